/**
 * The host's compile-only check of a cell's source (SPEC §5.4, §5.5, §5.6): refuse static imports,
 * decide JavaScript vs TypeScript, and report syntax errors, all without running user code.
 *
 * @module
 */

import vm from "node:vm";
import { CELL_FILE_NAME } from "../../proto/cell_source.ts";

/** The host's decision about a cell's source, made before the cell starts. */
export type SourceCheck =
  /** Run `source` (the original, or the type-stripped TypeScript) exactly once. */
  | { ok: true; source: string; typescript: boolean }
  /** The cell completes at once with this `error_text`; nothing runs. */
  | { ok: false; errorText: string };

/**
 * Decides how a cell's source runs, without running it. A cell is an ES module (`exec_main.mjs`),
 * as in Codex's own host.
 *
 * - The source is compiled (never run) as a module. If it compiles, it runs unchanged as
 *   JavaScript, unless it has a static `import` or `export … from`: the cell is then refused with
 *   `Unsupported import in exec: <the first specifier>` (a dynamic `import()` is refused when it
 *   runs).
 * - Otherwise its types are stripped (positions kept; `enum` and `namespace` are transformed
 *   instead, which moves lines) and, if the result compiles, it runs as TypeScript (static imports
 *   refused the same way; type-only imports are gone by then).
 * - Otherwise the cell fails with the JavaScript compile error: `SyntaxError: <V8 message>`.
 *
 * @param source the cell's source as the client sent it
 * @returns what to evaluate, or the error text the cell completes with
 * @throws never: failures of user code are results
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const js = await checkCellSource("text(1)");
 * assert.deepEqual(js, { ok: true, source: "text(1)", typescript: false });
 * const ts = await checkCellSource("const n: number = 2;\ntext(n)");
 * assert.deepEqual(ts, { ok: true, source: "const n         = 2;\ntext(n)", typescript: true });
 * const refused = await checkCellSource('import fs from "node:fs";');
 * assert.deepEqual(refused, { ok: false, errorText: "Unsupported import in exec: node:fs" });
 * const broken = await checkCellSource("text(1");
 * assert.deepEqual(broken, { ok: false, errorText: "SyntaxError: missing ) after argument list" });
 * ```
 */
export async function checkCellSource(source: string): Promise<SourceCheck> {
  const javascript = compileModule(source);
  if (javascript.ok) return decide(source, javascript.imports, false);
  const text = await stripTypes(source);
  if (text !== undefined) {
    const typescript = compileModule(text);
    if (typescript.ok) return decide(text, typescript.imports, true);
  }
  return { ok: false, errorText: javascript.errorText };
}

function decide(source: string, imports: readonly string[], typescript: boolean): SourceCheck {
  if (imports.length > 0) return { ok: false, errorText: `Unsupported import in exec: ${imports[0]}` };
  return { ok: true, source, typescript };
}

/**
 * Deno 2.9.6's `vm.SourceTextModule`, with `moduleRequests` (which the bundled Node types lack).
 * Compiled without a context or a dynamic-import callback: nothing of it is kept.
 */
const SourceTextModule = vm.SourceTextModule as unknown as new (
  source: string,
  options: { identifier: string },
) => { readonly moduleRequests: readonly { readonly specifier: string }[] };

type Compiled = { ok: true; imports: readonly string[] } | { ok: false; errorText: string };

/** Compiles, never runs, the source as a module: its static imports, or its compile error. */
function compileModule(source: string): Compiled {
  try {
    const module = new SourceTextModule(source, { identifier: CELL_FILE_NAME });
    return { ok: true, imports: module.moduleRequests.map((request) => request.specifier) };
  } catch (error) {
    // V8 reports a parser stack overflow (deep nesting) as a RangeError; keep its own name.
    if (error instanceof Error) return { ok: false, errorText: `${error.name}: ${error.message}` };
    return { ok: false, errorText: `SyntaxError: ${String(error)}` };
  }
}

type TransformSync = (typeof import("amaro"))["transformSync"];
let amaro: Promise<TransformSync> | undefined;

/** Loads amaro (~3.7 MB of JavaScript and wasm, ~60 ms) on first need, so plain JavaScript never pays. */
function loadStripper(): Promise<TransformSync> {
  return amaro ??= import("amaro").then((module) => module.transformSync);
}

/**
 * Strips TypeScript types from a cell's source (parsed as a module, as the cell runs); returns
 * undefined if the stripper refuses it.
 */
async function stripTypes(source: string): Promise<string | undefined> {
  const transformSync = await loadStripper();
  try {
    // strip-only blanks types with spaces, so every line and column stays where it was.
    const code = transformSync(source, { mode: "strip-only" }).code;
    if (code.length === source.length) return code;
  } catch (error) {
    // enum, namespace and `import x = require()` need the transform mode, which reprints the code;
    // a syntax error would only fail again there, after a much slower pass.
    if (isInvalidSyntax(error)) return undefined;
  }
  try {
    return transformSync(source, { mode: "transform" }).code;
  } catch {
    return undefined;
  }
}

/** Whether amaro refused the source as invalid syntax rather than as unsupported in its mode. */
function isInvalidSyntax(error: unknown): boolean {
  return typeof error === "object" && error !== null && "code" in error &&
    error.code === "InvalidSyntax";
}

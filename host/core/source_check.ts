/**
 * The host's compile-only check of a cell's source (SPEC §5.4, §5.5, §5.6): refuse static imports,
 * decide JavaScript vs TypeScript, and report syntax errors, all without running user code.
 *
 * @module
 */

import vm from "node:vm";
import { init as lexerReady, parse as lexModule } from "es-module-lexer";
import {
  CELL_FILE_NAME,
  CELL_LINE_OFFSET,
  CELL_SOURCE_PREFIX,
  CELL_SOURCE_SUFFIX,
  wrapCellSource,
} from "../../proto/cell_source.ts";

/** The host's decision about a cell's source, made before the cell starts. */
export type SourceCheck =
  /** Run `source` (the original, or the type-stripped TypeScript) exactly once. */
  | { ok: true; source: string; typescript: boolean }
  /** The cell completes at once with this `error_text`; nothing runs. */
  | { ok: false; errorText: string };

/**
 * Decides how a cell's source runs, without running it.
 *
 * - The source is compiled (never run) wrapped exactly as the cell runtime wraps it. If it
 *   compiles, it runs unchanged as JavaScript.
 * - Otherwise, a static `import` or `export … from` (TypeScript `import type` too) refuses the cell
 *   with `Unsupported import in exec: <first specifier in source order>`. Dynamic `import()` and
 *   `import.meta` are not refused here.
 * - Otherwise its types are stripped (positions kept; `enum` and `namespace` are transformed
 *   instead, which moves lines) and, if the result compiles, it runs as TypeScript.
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
  // A static import is a syntax error in a function body, so a source that compiles has none.
  // Compiling first spares valid JavaScript the scan and the lexer's false positives (it reads
  // HTML-like comments, which scripts allow, as code).
  const javascriptError = compileError(source);
  if (javascriptError === undefined) return { ok: true, source, typescript: false };

  const specifier = await findStaticImport(source);
  if (specifier !== undefined) {
    return { ok: false, errorText: `Unsupported import in exec: ${specifier}` };
  }

  const text = await stripTypes(source);
  if (text !== undefined && compileError(text) === undefined) {
    return { ok: true, source: text, typescript: true };
  }
  return { ok: false, errorText: javascriptError };
}

/** Compiles, never runs, the wrapped source; returns the error text, or undefined if it compiles. */
function compileError(source: string): string | undefined {
  try {
    new vm.Script(wrapCellSource(source), {
      filename: CELL_FILE_NAME,
      lineOffset: CELL_LINE_OFFSET,
    });
    return undefined;
  } catch (error) {
    // V8 reports a parser stack overflow (deep nesting) as a RangeError; keep its own name.
    if (error instanceof Error) return `${error.name}: ${error.message}`;
    return `SyntaxError: ${String(error)}`;
  }
}

/** Import types of es-module-lexer that are static declarations: plain, `source` and `defer`. */
const STATIC_IMPORT_TYPES: ReadonlySet<number> = new Set([1, 4, 6]);

/**
 * The `type` of TypeScript's `export type { … } from` and `export type * from`, which the lexer does
 * not report; blanking it (same length, so offsets hold) turns them into re-exports it does report.
 * A match inside a string or comment stays inside it, where the lexer ignores it anyway.
 */
const TYPE_REEXPORT = /\b(export\s+)type(?=\s*[{*])/g;

/** A static import the lexer found: where its statement starts, and its specifier. */
type FoundImport = { at: number; specifier: string };

/**
 * Returns the specifier of the first static import in `source`, or undefined if there is none or
 * the source cannot be scanned (its compile error is then reported instead).
 */
async function findStaticImport(source: string): Promise<string | undefined> {
  await lexerReady;
  const scan = lexFirstStaticImport(source);
  if (scan !== null) return scan?.specifier;
  return (await findStaticImportAfterStripping(source))?.specifier;
}

/**
 * The lexer cannot parse some TypeScript (it reads `a! / 2` as the start of a regular expression).
 * Types stripped in place keep every offset, so lex the stripped text for value imports, and each
 * removed run of text on its own for the type-only ones (`import type`, `export type … from`).
 */
async function findStaticImportAfterStripping(source: string): Promise<FoundImport | undefined> {
  const transformSync = await loadStripper();
  let stripped: string;
  try {
    stripped = transformSync(source, { mode: "strip-only" }).code;
  } catch {
    return undefined;
  }
  if (stripped.length !== source.length) return undefined;
  let first = lexFirstStaticImport(stripped);
  if (first === null) return undefined;
  for (const blank of stripped.matchAll(/\s+/g)) {
    if (first !== undefined && blank.index >= first.at) break;
    const removed = source.slice(blank.index, blank.index + blank[0].length);
    if (removed === blank[0] || !/\bimport\b|\bexport\b/.test(removed)) continue;
    const found = lexFirstStaticImport(removed);
    if (found) first = { at: blank.index + found.at, specifier: found.specifier };
  }
  return first;
}

/**
 * Lexes `text` as a module; returns its first static import (undefined if none), or null when the
 * lexer cannot parse the text.
 */
function lexFirstStaticImport(text: string): FoundImport | undefined | null {
  let imports;
  try {
    [imports] = lexModule(text.replace(TYPE_REEXPORT, "$1    "));
  } catch {
    return null;
  }
  // The lexer lists imports in source order; `n` is undefined only for unparsable escapes.
  const first = imports.find((entry) => STATIC_IMPORT_TYPES.has(entry.t));
  return first && { at: first.ss, specifier: first.n ?? text.slice(first.s, first.e) };
}

type TransformSync = (typeof import("amaro"))["transformSync"];
let amaro: Promise<TransformSync> | undefined;

/** Loads amaro (~3.7 MB of JavaScript and wasm, ~60 ms) on first need, so plain JavaScript never pays. */
function loadStripper(): Promise<TransformSync> {
  return amaro ??= import("amaro").then((module) => module.transformSync);
}

/** The start of amaro's `transform` output for a wrapped source, up to the user's first statement. */
const TRANSFORM_PREFIX = "(async function() {\n";
/** The end of amaro's `transform` output for a wrapped source. */
const TRANSFORM_SUFFIX = "\n});\n";

/**
 * Strips TypeScript types from a cell's source; returns undefined if the stripper refuses it.
 *
 * The source is stripped wrapped as the runtime wraps it, because the stripper parses a module,
 * where a top-level `return` is an error, and then unwrapped again.
 */
async function stripTypes(source: string): Promise<string | undefined> {
  const transformSync = await loadStripper();
  const wrapped = wrapCellSource(source);
  try {
    // strip-only blanks types with spaces, so every line and column stays where it was.
    const code = transformSync(wrapped, { mode: "strip-only" }).code;
    if (
      code.length === wrapped.length && code.startsWith(CELL_SOURCE_PREFIX) &&
      code.endsWith(CELL_SOURCE_SUFFIX)
    ) return code.slice(CELL_SOURCE_PREFIX.length, code.length - CELL_SOURCE_SUFFIX.length);
  } catch (error) {
    // enum, namespace and `import x = require()` need the transform mode, which reprints the code;
    // a syntax error would only fail again there, after a much slower pass.
    if (isInvalidSyntax(error)) return undefined;
  }
  try {
    const code = transformSync(wrapped, { mode: "transform" }).code;
    return code.startsWith(TRANSFORM_PREFIX) && code.endsWith(TRANSFORM_SUFFIX)
      ? code.slice(TRANSFORM_PREFIX.length, code.length - TRANSFORM_SUFFIX.length)
      : undefined;
  } catch {
    return undefined;
  }
}

/** Whether amaro refused the source as invalid syntax rather than as unsupported in its mode. */
function isInvalidSyntax(error: unknown): boolean {
  return typeof error === "object" && error !== null && "code" in error &&
    error.code === "InvalidSyntax";
}

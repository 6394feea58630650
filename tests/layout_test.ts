/**
 * The import rules of the tree (ARCHITECTURE.md, "The arrows"), read from the sources themselves:
 *
 * - no import cycle among production files;
 * - `worker/` and `client/` import only `proto/` (and their own folder);
 * - `proto/` imports nothing of the project outside `proto/`;
 * - `host/` never imports the rooms built on a provider or on the host: `client/`, `embedded/`,
 *   `mcp/`, `cli/`;
 * - `host/core/` imports nothing from a front door (`host/doors/`);
 * - `examples/` import only the public barrel `mod.ts` (and their own folder), as a user would;
 * - no production file imports a test file (`*_test.ts`, `tests/`) or `host/testing.ts`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";

const ROOT = normalize(join(dirname(new URL(import.meta.url).pathname), ".."));
const FOLDERS = ["host", "worker", "proto", "client", "embedded", "mcp", "examples", "cli"];

function isTestFile(path: string): boolean {
  return path.endsWith("_test.ts") || path.startsWith("tests/") || path === "host/testing.ts";
}

function* sourceFiles(dir: string): Generator<string> {
  // A room another branch has not created yet has no files.
  if (!existsSync(join(ROOT, dir))) return;
  for (const entry of Deno.readDirSync(join(ROOT, dir))) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory && entry.name !== "dist") yield* sourceFiles(path);
    else if (entry.isFile && entry.name.endsWith(".ts")) yield path;
  }
}

/**
 * The project files a source imports: statically (`import … from "./x.ts"`, `export … from`) and
 * lazily (`await import("./x.ts")`).
 */
function importsOf(path: string): string[] {
  const text = Deno.readTextFileSync(join(ROOT, path))
    // Doc comments hold examples whose imports are not the module's own.
    .replace(/\/\*[\s\S]*?\*\//g, "");
  const out: string[] = [];
  for (const match of text.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s*"(\.{1,2}\/[^"]+)"/gm)) {
    out.push(relative(ROOT, normalize(join(ROOT, dirname(path), match[1]))));
  }
  for (const match of text.matchAll(/\bimport\(\s*"(\.{1,2}\/[^"]+)"\s*\)/g)) {
    out.push(relative(ROOT, normalize(join(ROOT, dirname(path), match[1]))));
  }
  return out;
}

const production = FOLDERS.flatMap((dir) => [...sourceFiles(dir)]).filter((path) => !isTestFile(path));
production.push("mod.ts");
const graph = new Map(production.map((path) => [path, importsOf(path)]));

Deno.test("the import graph is read (a rule over no edges would pass vacuously)", () => {
  assert.ok(graph.get("host/doors/grpc/server.ts")?.includes("host/assemble.ts"));
  assert.ok(graph.get("worker/runtime.ts")?.some((p) => p.startsWith("proto/")));
  assert.ok(graph.get("cli/doors.ts")?.includes("host/doors/grpc/server.ts"), "a lazy import is an edge");
});

Deno.test("no production file takes part in an import cycle", () => {
  const state = new Map<string, "active" | "done">();
  const cycles: string[] = [];
  const visit = (path: string, stack: string[]) => {
    if (state.get(path) === "done") return;
    if (state.get(path) === "active") {
      cycles.push([...stack.slice(stack.indexOf(path)), path].join(" → "));
      return;
    }
    state.set(path, "active");
    for (const next of graph.get(path) ?? []) visit(next, [...stack, path]);
    state.set(path, "done");
  };
  for (const path of graph.keys()) visit(path, []);
  assert.deepEqual(cycles, []);
});

Deno.test("worker/ and client/ import only proto/ and their own folder; proto/ only itself", () => {
  const wrong: string[] = [];
  for (const [path, imports] of graph) {
    const folder = path.split("/")[0];
    if (folder !== "worker" && folder !== "client" && folder !== "proto") continue;
    for (const target of imports) {
      const allowed = target.startsWith(`${folder}/`) || target.startsWith("proto/");
      if (!allowed) wrong.push(`${path} → ${target}`);
    }
  }
  assert.deepEqual(wrong, []);
});

Deno.test("host/ imports nothing from client/, embedded/, mcp/ or cli/", () => {
  const above = ["client/", "embedded/", "mcp/", "cli/"];
  const wrong = [...graph].flatMap(([path, imports]) =>
    path.startsWith("host/")
      ? imports.filter((t) => above.some((room) => t.startsWith(room))).map((t) => `${path} → ${t}`)
      : []
  );
  assert.deepEqual(wrong, []);
});

Deno.test("examples/ import only mod.ts and their own folder, as a user would", () => {
  const wrong = [...graph].flatMap(([path, imports]) =>
    path.startsWith("examples/")
      ? imports.filter((t) => t !== "mod.ts" && !t.startsWith("examples/")).map((t) => `${path} → ${t}`)
      : []
  );
  assert.deepEqual(wrong, []);
});

Deno.test("host/core imports nothing from a front door", () => {
  const wrong = [...graph].flatMap(([path, imports]) =>
    path.startsWith("host/core/")
      ? imports.filter((t) => t.startsWith("host/doors/")).map((t) => `${path} → ${t}`)
      : []
  );
  assert.deepEqual(wrong, []);
});

Deno.test("no production file imports a test file or host/testing.ts", () => {
  const wrong = [...graph].flatMap(([path, imports]) =>
    imports.filter((target) => isTestFile(target)).map((target) => `${path} → ${target}`)
  );
  assert.deepEqual(wrong, []);
});

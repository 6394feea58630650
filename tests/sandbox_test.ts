/**
 * The sandbox matrix: from inside a cell (real host, real permission-restricted runtime), every
 * route to a platform capability is closed; and the runtime process itself has no permission
 * beyond reading its runtime directory (SPEC §5.2, §9.3, scenario 110).
 */
import assert from "node:assert/strict";
import { buildRuntimeCommand } from "../host/runtime/runtime_command.ts";
import { openSession, run, startHost } from "./_harness.ts";
import { HELPER_FUNCTIONS } from "./_spec_lists.ts";
import { selfSpawnOptions } from "./_self_spawn.ts";
import type { HostOptions } from "../host/doors/grpc/server.ts";

/**
 * The hosts the cell matrices run on: runtimes as `deno run` subprocesses (SPEC §9.3), and
 * self-spawned as a compiled executable spawns them, with its permissions, narrowed (SPEC §9.9).
 */
const HOSTS: [label: string, options: () => HostOptions][] = [
  ["", () => ({})],
  [" (self-spawned runtime, the compiled executable's permissions)", () => selfSpawnOptions()],
];

/** Escape routes: each expression evaluates (inside the cell) to something that must be harmless. */
const ROUTES: Record<string, string> = {
  "Deno global": "typeof Deno",
  "process global": "typeof process",
  "require global": "typeof require",
  "Buffer global": "typeof Buffer",
  "Worker global": "typeof Worker",
  "fetch global": "typeof fetch",
  "WebSocket global": "typeof WebSocket",
  "Function constructor → this": 'typeof Function("return this")().Deno',
  "Function constructor → process": 'Function("return typeof process")()',
  "AsyncFunction constructor": '(await (async () => {}).constructor("return typeof Deno")())',
  "GeneratorFunction constructor": '(function* () {}).constructor("return typeof Deno")().next().value',
  "AsyncGeneratorFunction constructor":
    '(await (async function* () {}).constructor("return typeof Deno")().next()).value',
  "indirect eval": '(0, eval)("typeof Deno")',
  "indirect eval global": 'typeof (0, eval)("this").process',
  "globalThis.constructor chain": 'globalThis.constructor.constructor("return typeof Deno")()',
  "Object.prototype constructor chain": '({}).constructor.constructor("return typeof process")()',
  "Error.prepareStackTrace frames":
    '(() => { let f = "none"; Error.prepareStackTrace = (e, s) => { f = typeof s[0]?.getFunction?.()?.constructor?.("return typeof Deno")?.(); return "" }; new Error().stack; return f })()',
  "import.meta via eval": '(() => { try { return eval("import.meta") } catch (e) { return e.name } })()',
};

const HELPERS = HELPER_FUNCTIONS;
for (const helper of HELPERS) {
  ROUTES[`${helper}.constructor`] = `${helper}.constructor("return typeof Deno + typeof process")()`;
  ROUTES[`${helper}.__proto__.constructor`] =
    `Object.getPrototypeOf(${helper}).constructor("return typeof Deno")()`;
}
Object.assign(ROUTES, {
  "tools.constructor": 'tools.constructor.constructor("return typeof Deno")()',
  "ALL_TOOLS.constructor": 'ALL_TOOLS.constructor.constructor("return typeof Deno")()',
  "load() value constructor":
    '(store("o", {a: [1]}), load("o").a.constructor.constructor("return typeof Deno")())',
  "helper error constructor": '(() => { try { setTimeout("x") } catch (e) { return typeof e } })()',
  "setTimeout id constructor": 'setTimeout(() => {}).constructor.constructor("return typeof Deno")()',
  "rejection reason of import()": '(await import("node:fs").catch((e) => typeof e))',
  "promise of import() constructor":
    'import("x").catch(() => {}).constructor.constructor("return typeof Deno")()',
});

const EXPECTED: Record<string, string> = {
  "import.meta via eval": "SyntaxError",
  "helper error constructor": "string",
  "rejection reason of import()": "string",
};
for (const helper of HELPERS) EXPECTED[`${helper}.constructor`] = "undefinedundefined";

for (const [label, options] of HOSTS) {
  Deno.test(`No escape route from a cell reaches a platform API (sandbox matrix)${label}`, async (t) => {
    await using h = await startHost(options());
    await using s = await openSession(h.client);
    for (const [name, expression] of Object.entries(ROUTES)) {
      await t.step(name, async () => {
        const r = await run(h.client, s.id, `text(String(${expression}))`);
        assert.equal(r.error, undefined, `${name}: ${r.error}`);
        assert.deepEqual(r.texts, [EXPECTED[name] ?? "undefined"]);
      });
    }
  });

  Deno.test(`Capabilities fail from inside a cell: files, env, net, subprocess, FFI, sys, imports, workers${label}`, async (t) => {
    await using h = await startHost(options());
    await using s = await openSession(h.client);
    const attempts: Record<string, string> = {
      "file read": 'Deno.readTextFileSync("/etc/passwd")',
      "file write": 'Deno.writeTextFileSync("/tmp/x", "x")',
      "env": 'Deno.env.get("HOME")',
      "network": 'await fetch("http://127.0.0.1:1")',
      "subprocess": 'new Deno.Command("true").outputSync()',
      "ffi": 'Deno.dlopen("libc.so.6", {})',
      "system info": "Deno.hostname()",
      "node fs": 'require("node:fs").readFileSync("/etc/passwd")',
      "process.env": "process.env.HOME",
      "worker creation": 'new Worker("data:text/javascript,1")',
      "node: import": 'await import("node:fs")',
      "npm: import": 'await import("npm:left-pad")',
      "remote import": 'await import("https://example.com/x.js")',
      "file import": 'await import("file:///etc/passwd")',
      "data: import": 'await import("data:text/javascript,export default 1")',
      "static import": 'import fs from "node:fs"',
    };
    for (const [name, code] of Object.entries(attempts)) {
      await t.step(name, async () => {
        const r = await run(h.client, s.id, code);
        assert.ok(r.error !== undefined, `${name} unexpectedly succeeded`);
        assert.match(r.error!, /is not defined|unsupported import in exec/i, `${name}: ${r.error}`);
      });
    }
  });
}

Deno.test("The runtime process may read only its runtime directory (scenario 110)", async (t) => {
  const runtimeDir = await Deno.makeTempDir({ prefix: "cmh-rt-" });
  const workDir = await Deno.makeTempDir({ prefix: "cmh-w-" });
  try {
    const probe = `
const results = {};
const attempt = async (name, fn) => { try { await fn(); results[name] = "allowed"; } catch (e) { results[name] = e.name; } };
await attempt("network", () => Deno.connect({ hostname: "127.0.0.1", port: 9 }));
await attempt("env", () => Deno.env.get("HOME"));
await attempt("write", () => Deno.writeTextFileSync(${JSON.stringify(runtimeDir + "/x")}, "x"));
await attempt("run", () => new Deno.Command("/bin/true").outputSync());
await attempt("read outside", () => Deno.readTextFileSync("/etc/hostname"));
await attempt("ffi", () => Deno.dlopen("libc.so.6", {}));
await attempt("sys", () => Deno.hostname());
await attempt("read own dir", () => Deno.readTextFileSync(new URL("./runtime.js", import.meta.url)));
console.log(JSON.stringify(results));`;
    await Deno.writeTextFile(`${runtimeDir}/runtime.js`, probe);
    const command = buildRuntimeCommand({
      deno: Deno.execPath(),
      runtimeDir,
      workDir,
      workerMainHeapMb: 512,
    });
    const out = await new Deno.Command(command.command, {
      args: command.args,
      env: command.env,
      clearEnv: true,
      cwd: command.cwd,
      stdout: "piped",
      stderr: "piped",
    }).output();
    const results = JSON.parse(new TextDecoder().decode(out.stdout));
    for (const name of ["network", "env", "write", "run", "read outside", "ffi", "sys"]) {
      await t.step(name, () => assert.equal(results[name], "NotCapable"));
    }
    await t.step("read own dir", () => assert.equal(results["read own dir"], "allowed"));
  } finally {
    await Deno.remove(runtimeDir, { recursive: true });
    await Deno.remove(workDir, { recursive: true });
  }
});

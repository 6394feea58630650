/**
 * The standalone executable (SPEC §9.9), tested from source because `deno compile` cannot fetch
 * its `denort` here: `deno task compile` embeds every file the runtime loads, and a runtime started
 * through the executable's entry dispatch, with the executable's permissions, narrows them to its
 * own directory before it runs anything (the cell matrix with such runtimes: sandbox_test.ts).
 */
import assert from "node:assert/strict";
import { RUNTIME_FILES } from "../host/runtime/runtime_files.ts";
import { buildRuntimeCommand } from "../host/runtime/runtime_command.ts";
import { compileCommand, compileIncludes, compilePermissionFlags, selfSpawnOptions } from "./_self_spawn.ts";
import { DOOR_MODULES } from "../cli/doors.ts";
import { OPS_MODULES } from "../host/assemble.ts";

const ROOT = new URL("..", import.meta.url).pathname;

Deno.test("deno task compile embeds every file the runtime and the host load at run time", () => {
  const includes = compileIncludes().map((path) => path.replace(/\/+$/, ""));
  const covered = (path: string) => includes.some((inc) => path === inc || path.startsWith(`${inc}/`));
  assert.equal(compileCommand().at(-1), "cli/main.ts");
  // The runtime directory's files, and every file a bundle loads next to itself.
  const loaded = new Set(RUNTIME_FILES);
  for (const name of RUNTIME_FILES) {
    const code = Deno.readTextFileSync(`${ROOT}worker/dist/${name}`);
    for (const match of code.matchAll(/new URL\(\s*"\.\/([^"]+)",\s*import\.meta\.url\s*\)/g)) {
      assert.ok(RUNTIME_FILES.includes(match[1]), `${name} loads ${match[1]}, which is not a runtime file`);
      loaded.add(match[1]);
    }
  }
  for (const name of loaded) assert.ok(covered(`worker/dist/${name}`), `worker/dist/${name} is not embedded`);
  // The .proto files the host reads at run time (proto/loader.ts).
  const loader = Deno.readTextFileSync(`${ROOT}proto/loader.ts`);
  const protos = [...loader.matchAll(/"([\w/]+\.proto)"/g)].map((m) => m[1]);
  assert.ok(protos.length > 0);
  for (const proto of protos) {
    const path = `proto/${proto}`;
    Deno.statSync(`${ROOT}${path}`);
    assert.ok(covered(path), `${path} is not embedded`);
  }
  // The modules the host imports by computed specifiers (the doors, metrics, tracing); the files that
  // import them have no literal import() left (its graph would load with theirs).
  for (const path of [...Object.values(DOOR_MODULES), ...Object.values(OPS_MODULES)]) {
    Deno.statSync(`${ROOT}${path}`);
    assert.ok(covered(path), `${path} is imported by a computed specifier and is not embedded`);
  }
  const lazy = new Set([...Object.values(DOOR_MODULES), ...Object.values(OPS_MODULES)]);
  for (const file of ["cli/doors.ts", "host/assemble.ts"]) {
    const code = Deno.readTextFileSync(`${ROOT}${file}`);
    for (const [, target] of code.matchAll(/(?<!typeof )import\(\s*"([^"]+)"/g)) {
      const path = new URL(target, `file:///${file}`).pathname.slice(1);
      assert.ok(!lazy.has(path as never), `${file} imports ${path} by a literal specifier`);
    }
  }
});

const PROBE = (dir: string) => `
const results = {};
const attempt = async (name, fn) => { try { await fn(); results[name] = "allowed"; } catch (e) { results[name] = e.name; } };
await attempt("network", () => Deno.connect({ hostname: "127.0.0.1", port: 9 }));
await attempt("env", () => Deno.env.get("HOME"));
await attempt("write", () => Deno.writeTextFileSync(${JSON.stringify(dir + "/x")}, "x"));
await attempt("run", () => new Deno.Command("/bin/true").outputSync());
await attempt("read outside", () => Deno.readTextFileSync("/etc/hostname"));
await attempt("read /", () => [...Deno.readDirSync("/")]);
await attempt("ffi", () => Deno.dlopen("libc.so.6", {}));
await attempt("sys", () => Deno.hostname());
const outside = "file:///etc/" + "hostname";
await attempt("import outside", () => import(outside));
const remote = "https://example.com/" + "x.js";
await attempt("import remote", () => import(remote));
await attempt("read own dir", () => Deno.readTextFileSync(new URL("./runtime.js", import.meta.url)));
await attempt("import own dir", () => import(new URL("./own.js", import.meta.url).href));
results.permissions = Object.fromEntries(["read", "write", "net", "env", "run", "ffi", "sys", "import"]
  .map((name) => [name, Deno.permissions.querySync({ name }).state]));
console.log(JSON.stringify(results));`;

async function runProbe(flags: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const runtimeDir = await Deno.makeTempDir({ prefix: "cmh-rt-" });
  const workDir = await Deno.makeTempDir({ prefix: "cmh-w-" });
  try {
    await Deno.writeTextFile(`${runtimeDir}/runtime.js`, PROBE(runtimeDir));
    await Deno.writeTextFile(`${runtimeDir}/own.js`, "export default 1;");
    const options = selfSpawnOptions(flags);
    const command = buildRuntimeCommand({
      deno: "unused",
      prefix: options.workerPrefix,
      self: options.runtimeCommand,
      runtimeDir,
      workDir,
      workerMainHeapMb: 0,
    });
    const out = await new Deno.Command(command.command, {
      args: command.args,
      env: command.env,
      clearEnv: true,
      cwd: command.cwd,
      stdout: "piped",
      stderr: "piped",
    }).output();
    return {
      code: out.code,
      stdout: new TextDecoder().decode(out.stdout),
      stderr: new TextDecoder().decode(out.stderr),
    };
  } finally {
    await Deno.remove(runtimeDir, { recursive: true });
    await Deno.remove(workDir, { recursive: true });
  }
}

Deno.test("a self-spawned runtime with the executable's permissions narrows them to reading its directory", async (t) => {
  const flags = compilePermissionFlags();
  assert.ok(flags.includes("--allow-read=/"), flags.join(" "));
  const out = await runProbe(flags);
  assert.equal(out.code, 0, out.stderr);
  const results = JSON.parse(out.stdout);
  for (const name of ["network", "env", "write", "run", "read outside", "read /", "ffi", "sys"]) {
    await t.step(name, () => assert.equal(results[name], "NotCapable"));
  }
  await t.step("imports outside the runtime directory", () => {
    assert.notEqual(results["import outside"], "allowed");
    assert.notEqual(results["import remote"], "allowed");
  });
  await t.step("its own directory stays readable and importable", () => {
    assert.equal(results["read own dir"], "allowed");
    assert.equal(results["import own dir"], "allowed");
  });
  await t.step("no permission is left granted", () => {
    for (const [name, state] of Object.entries(results.permissions)) assert.notEqual(state, "granted", name);
  });
});

Deno.test("a self-spawned runtime that cannot narrow its permissions (built with --allow-all) refuses to start", async () => {
  const out = await runProbe(["--allow-all"]);
  assert.equal(out.code, 70);
  assert.equal(out.stdout, "");
  assert.match(
    out.stderr,
    /^code-mode session runtime refused to start: could not narrow the runtime's permissions \(still granted: read \/\); build the executable with --allow-read=\/ /,
  );
});

/**
 * Unit tests of the host assembly (`assemble.ts`) without any front door: what it checks before it starts
 * anything, the runtime directory it owns (made at start, stale ones of dead hosts removed, gone at
 * the end), the warm pool, readiness on the metrics listener, and how `shutdown()` (bounded by
 * `shutdownGraceMs`) and `kill()` end it.
 */
import assert from "node:assert/strict";
import { Logger } from "./ops/log.ts";
import { assembleHost, type EngineOptions } from "./assemble.ts";
import { hostTempParent, RUNTIME_FILES } from "./runtime/runtime_files.ts";
import { encodeReadyFrame } from "../proto/worker_ready.ts";
import { IN_PROCESS_WARNING } from "./runtime/in_process_runtime.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

/** An engine with its log lines kept; no warm runtime unless asked for. */
function engine(options: EngineOptions = {}) {
  const lines: Json[] = [];
  const log = new Logger("info", (line) => lines.push(JSON.parse(line)));
  return assembleHost({ warmSessions: 0, osSandbox: "off", log, ...options }).then((e) =>
    Object.assign(e, { lines })
  );
}

/** This process's runtime directories under the host-private parent. */
function runtimeDirs(): string[] {
  return [...Deno.readDirSync(hostTempParent())].map((e) => e.name).filter((n) =>
    n.startsWith(`r-${Deno.pid}-`)
  )
    .sort();
}

function added(before: string[]): string[] {
  return runtimeDirs().filter((name) => !before.includes(name));
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  assert.fail("did not reject");
}

/** A port nothing listens on right now. */
function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

Deno.test("assembleHost refuses bad options before it leaves anything behind", async () => {
  const before = runtimeDirs();
  const cases: [EngineOptions, string][] = [
    [{ limits: { maxSessions: -1 } }, "limit maxSessions must be a non-negative integer"],
    [{ isolation: "threads" as never }, "unknown code-mode isolation `threads`"],
    [{ osSandbox: "maybe" as never }, "invalid --os-sandbox `maybe`"],
    [{ isolation: "in-process", osSandbox: "bwrap" }, "--os-sandbox bwrap needs subprocess isolation"],
    [{ metricsListen: "nowhere" }, "invalid --metrics-listen `nowhere`; expected `IP:PORT`"],
  ];
  for (const [options, message] of cases) {
    const error = await rejection(engine(options));
    assert.equal(error.message, message, JSON.stringify(options));
    assert.deepEqual(runtimeDirs(), before, `nothing left by ${JSON.stringify(options)}`);
  }
});

Deno.test("an invalid trace exporter URL is refused, and the metrics listener started before it is closed", async () => {
  const port = freePort();
  const error = await rejection(
    engine({ metricsListen: `127.0.0.1:${port}`, otelTraceExporter: "not a url" }),
  );
  assert.ok(error instanceof RangeError);
  assert.match(error.message, /^invalid --otel-trace-exporter URL: /);
  await assert.rejects(Deno.connect({ hostname: "127.0.0.1", port }), Deno.errors.ConnectionRefused);
});

Deno.test("the runtime directory: a private copy of the bundled runtime files, removed by shutdown()", async () => {
  const before = runtimeDirs();
  const e = await engine();
  const [dir] = added(before);
  assert.ok(dir, "one new runtime directory");
  const path = `${e.tempParent}/${dir}`;
  assert.equal(e.tempParent, hostTempParent());
  assert.equal(Deno.statSync(e.tempParent).mode! & 0o777, 0o700);
  for (const name of RUNTIME_FILES) {
    assert.deepEqual(
      Deno.readFileSync(`${path}/${name}`),
      Deno.readFileSync(new URL(`../worker/dist/${name}`, import.meta.url)),
      name,
    );
    assert.equal(Deno.statSync(`${path}/${name}`).mode! & 0o777, 0o600, name);
  }
  await e.shutdown();
  assert.deepEqual(runtimeDirs(), before);
  await e.shutdown(); // idempotent
  await e.kill(); // and kill after it too
});

Deno.test("runtimeFiles: the given files are the ones copied", async () => {
  const from = await Deno.makeTempDir({ prefix: "engine-test-files-" });
  try {
    for (const name of RUNTIME_FILES) await Deno.writeTextFile(`${from}/${name}`, `// ${name} of this test`);
    const before = runtimeDirs();
    await using stack = new AsyncDisposableStack();
    const e = await engine({ runtimeFiles: from });
    stack.defer(() => e.kill());
    const [dir] = added(before);
    for (const name of RUNTIME_FILES) {
      assert.equal(Deno.readTextFileSync(`${e.tempParent}/${dir}/${name}`), `// ${name} of this test`);
    }
  } finally {
    await Deno.remove(from, { recursive: true });
  }
});

Deno.test("start-up removes the directories of hosts that are gone and keeps those of live ones", async () => {
  const parent = hostTempParent();
  Deno.mkdirSync(parent, { recursive: true, mode: 0o700 });
  // Beyond Linux's largest pid (2^22): no such process can exist.
  const dead = ["r-4194399-stale", "w-4194399-stale", "tls-4194399-stale"];
  const live = [`r-${Deno.ppid}-engine-test-keep`, "not-a-host-dir-4194399"];
  for (const name of [...dead, ...live]) Deno.mkdirSync(`${parent}/${name}`, { recursive: true });
  try {
    const e = await engine();
    await e.kill();
    const names = [...Deno.readDirSync(parent)].map((d) => d.name);
    for (const name of dead) assert.ok(!names.includes(name), `${name} removed`);
    for (const name of live) assert.ok(names.includes(name), `${name} kept`);
  } finally {
    for (const name of [...dead, ...live]) {
      try {
        Deno.removeSync(`${parent}/${name}`, { recursive: true });
      } catch { /* removed by the engine */ }
    }
  }
});

Deno.test("a pool of two warm runtimes starts with one; the other follows once it is ready, not together with it", async () => {
  // Runtimes that start together share the cores with the host's own start-up and its first cells.
  const e = await engine({ warmSessions: 2 });
  try {
    assert.equal(e.state.spawnCount, 1);
    const [first] = e.manager.runtimes;
    await first.ready;
    assert.equal(e.state.spawnCount, 1, "not yet at its Ready");
    const deadline = Date.now() + 20_000;
    while (e.state.warmCount < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.equal(e.state.warmCount, 2);
    assert.equal(e.state.spawnCount, 2);
    assert.equal(e.state.requestPathSpawnCount, 0);
  } finally {
    await e.shutdown();
  }
});

Deno.test("the warm pool fills to warmSessions at start; shutdown stops and reaps every runtime", async () => {
  // One, not the default two: the option decides.
  const e = await engine({ warmSessions: 1 });
  const runtimes = [...e.manager.runtimes];
  assert.equal(runtimes.length, 1);
  assert.equal(e.state.spawnCount, 1);
  await Promise.all(runtimes.map((r) => r.ready));
  assert.equal(e.state.warmCount, 1);
  assert.equal(e.state.requestPathSpawnCount, 0);
  const pids = runtimes.map((r) => r.pid!);
  await e.shutdown();
  assert.equal(e.state.runtimeCount, 0);
  for (const runtime of runtimes) assert.equal((await runtime.ended).byHost, true);
  for (const pid of pids) assert.throws(() => Deno.statSync(`/proc/${pid}/stat`), Deno.errors.NotFound);
});

Deno.test("shutdown() is bounded by shutdownGraceMs: a runtime that ignores its stop is killed after it", async () => {
  // A runtime that is ready and then ignores Shutdown, the end of its stdin and SIGTERM.
  const from = await Deno.makeTempDir({ prefix: "engine-test-deaf-" });
  try {
    const ready = btoa(String.fromCharCode(...encodeReadyFrame(Deno.version.deno)));
    await Deno.writeTextFile(
      `${from}/runtime.js`,
      `Deno.addSignalListener("SIGTERM", () => {});
       setInterval(() => {}, 1000);
       Deno.stdout.writeSync(Uint8Array.from(atob("${ready}"), (c) => c.charCodeAt(0)));`,
    );
    for (const name of ["runtime_main.js", "cell.js"]) {
      await Deno.copyFile(new URL(`../worker/dist/${name}`, import.meta.url), `${from}/${name}`);
    }
    // workerKillGraceMs alone would take 2 × 5 s to reach SIGKILL.
    const e = await engine({
      runtimeFiles: from,
      warmSessions: 1,
      limits: { shutdownGraceMs: 300, workerKillGraceMs: 5_000 },
    });
    const [runtime] = e.manager.runtimes;
    await runtime.ready;
    const started = performance.now();
    await e.shutdown();
    const took = performance.now() - started;
    assert.ok(took >= 290 && took < 5_000, `shutdown took ${took} ms`);
    assert.equal(e.state.runtimeCount, 0, "reaped when shutdown() returns");
    assert.equal(runtime.alive, false);
    const end = await runtime.ended;
    assert.equal(end.signal, "SIGKILL");
  } finally {
    await Deno.remove(from, { recursive: true });
  }
});

Deno.test("kill() kills every runtime at once and removes the runtime directory", async () => {
  const before = runtimeDirs();
  const e = await engine({ warmSessions: 1 });
  const [runtime] = e.manager.runtimes;
  await runtime.ready;
  await e.kill();
  const end = await runtime.ended;
  assert.equal(end.signal, "SIGKILL");
  assert.equal(end.byHost, true);
  assert.deepEqual(runtimeDirs(), before);
});

Deno.test("metricsListen: /readyz says starting until the door serves, then ready; /metrics has the gauges; the listener closes with the engine", async () => {
  const e = await engine({ metricsListen: "127.0.0.1:0" });
  try {
    const url = e.state.metricsUrl!;
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.ok(e.lines.some((l) => l.msg === `metrics listening on ${url}`));
    const readyz = async () => {
      const response = await fetch(`${url}/readyz`);
      return [response.status, (await response.text()).trim()];
    };
    assert.deepEqual(await readyz(), [503, "starting"]);
    e.markServing();
    assert.deepEqual(await readyz(), [200, "ready"]);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /^code_mode_sessions_open 0$/m);
    assert.match(metrics, /^code_mode_warm_runtimes 0$/m);
  } finally {
    await e.shutdown();
  }
  await assert.rejects(fetch(`${e.state.metricsUrl}/readyz`));
});

Deno.test("the start-up log names the memory bound and the sandbox choice; in-process isolation warns and runs no subprocess", async () => {
  const off = await engine({ limits: { runtimeMemoryMb: 0 } });
  await off.kill();
  const messages = off.lines.map((l) => l.msg);
  assert.ok(messages.includes("runtime memory bound: off (runtimeMemoryMb=0)"), messages.join("\n"));
  assert.ok(messages.some((m) => m.startsWith("OS sandbox: off (")), messages.join("\n"));

  const inProcess = await engine({ isolation: "in-process", warmSessions: 1 });
  try {
    const [runtime] = inProcess.manager.runtimes;
    await runtime.ready;
    assert.equal(runtime.pid, undefined);
    assert.ok(inProcess.lines.some((l) => l.level === "warn" && l.msg === IN_PROCESS_WARNING));
    assert.ok(!inProcess.lines.some((l) => String(l.msg).startsWith("OS sandbox")));
  } finally {
    await inProcess.shutdown();
  }
});

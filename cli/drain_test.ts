import assert from "node:assert/strict";
import { Logger } from "../host/ops/log.ts";
import { drain, type Drainable, type StopPolicy } from "./drain.ts";

/** A door whose stops are recorded and settled by the test, and the signal and parent sources. */
function fixture(stop: StopPolicy, options: { exitWithParent?: boolean } = {}) {
  const calls: string[] = [];
  const shutdown = Promise.withResolvers<void>();
  const kill = Promise.withResolvers<void>();
  const ended = Promise.withResolvers<number>();
  const door: Drainable = {
    shutdown: () => (calls.push("shutdown"), shutdown.promise),
    kill: () => (calls.push("kill"), kill.promise),
    ended: ended.promise,
    stop,
  };
  const signals = new Map<string, () => void>();
  let parentGone: (() => void) | undefined;
  const lines: string[] = [];
  const code = drain(door, {
    exitWithParent: options.exitWithParent ?? true,
    log: new Logger("debug", (line) => lines.push(JSON.parse(line).msg)),
    onSignal: (signal, handler) => signals.set(signal, handler),
    onParentGone: (onGone) => parentGone = onGone,
  });
  return { calls, shutdown, kill, ended, signals, parentGone: () => parentGone?.(), lines, code };
}

Deno.test("drain() two-stage: the first signal shuts down and exits 0 even if that failed; a second kills and exits 1", async () => {
  const first = fixture("two-stage");
  assert.deepEqual([...first.signals.keys()], ["SIGINT", "SIGTERM"]);
  first.signals.get("SIGTERM")!();
  first.shutdown.reject(new Error("late"));
  assert.equal(await first.code, 0);
  assert.deepEqual(first.calls, ["shutdown"]);

  const second = fixture("two-stage");
  second.signals.get("SIGINT")!();
  second.signals.get("SIGTERM")!();
  assert.deepEqual(second.calls, ["shutdown", "kill"]);
  second.kill.reject(new Error("gone"));
  assert.equal(await second.code, 1);
});

Deno.test("drain() two-stage: the parent's end is logged and counts as a signal", async () => {
  const f = fixture("two-stage");
  f.parentGone();
  f.shutdown.resolve();
  assert.equal(await f.code, 0);
  assert.deepEqual(f.lines, ["code-mode-host parent process ended; shutting down"]);
  assert.deepEqual(f.calls, ["shutdown"]);
});

Deno.test("drain() one-stage: every signal shuts down; exit 0, or 1 when the shutdown failed; the parent's end is not logged", async () => {
  const ok = fixture("one-stage");
  ok.signals.get("SIGTERM")!();
  ok.signals.get("SIGTERM")!();
  assert.deepEqual(ok.calls, ["shutdown", "shutdown"]);
  ok.shutdown.resolve();
  assert.equal(await ok.code, 0);

  const failed = fixture("one-stage");
  failed.parentGone();
  failed.shutdown.reject(new Error("stuck"));
  assert.equal(await failed.code, 1);
  assert.deepEqual(failed.lines, []);
});

Deno.test("drain() none: no signal listener, no parent watch; the door's own end gives the code, its failure propagates", async () => {
  const f = fixture("none");
  assert.equal(f.signals.size, 0);
  f.parentGone();
  assert.deepEqual(f.calls, []);
  f.ended.resolve(3);
  assert.equal(await f.code, 3);

  const broken = fixture("none");
  broken.ended.reject(new Error("engine failed"));
  await assert.rejects(broken.code, /engine failed/);
});

Deno.test("drain() ends with the door's own end before any signal (grpc+stdio://), and watches no parent with exitWithParent off", async () => {
  const f = fixture("two-stage", { exitWithParent: false });
  f.parentGone();
  f.ended.resolve(0);
  assert.equal(await f.code, 0);
  assert.deepEqual(f.calls, []);
});

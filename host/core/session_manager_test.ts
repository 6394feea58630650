/**
 * Unit tests of the session registry, admission (SPEC §3.1, §9.5) and the warm pool (SPEC §9.3)
 * with fake runtimes: no processes. Errors are checked by their SPEC messages only.
 */
import assert from "node:assert/strict";
import {
  FakeClock,
  type FakeRuntime,
  type FakeRuntimeOptions,
  fakeSpawner,
  rejectionMessage,
  specText,
  thrownMessage,
  turn,
} from "../testing.ts";
import { type Limits, resolveLimits } from "./limits.ts";
import { Logger } from "../ops/log.ts";
import { OUTPUT_CLIENT, type Session } from "./session.ts";
import { SessionManager } from "./session_manager.ts";
import { CodeModeCore } from "./code_mode_core.ts";

function setup(
  options: {
    limits?: Partial<Limits>;
    warmSessions?: number;
    runtime?: FakeRuntimeOptions | ((index: number) => FakeRuntimeOptions);
  } = {},
) {
  const lines: Record<string, unknown>[] = [];
  const spawner = fakeSpawner(options.runtime);
  const manager = new SessionManager({
    limits: resolveLimits(options.limits),
    log: new Logger("debug", (line) => lines.push(JSON.parse(line))),
    clock: new FakeClock(),
    runtime: { deno: "unused", runtimeDir: "unused", workParent: "unused" },
    warmSessions: options.warmSessions ?? 1,
    spawn: spawner.spawn,
  });
  const open = (): Promise<Session> =>
    manager.open({ outputMode: OUTPUT_CLIENT, cellHeapMb: 64 }, manager.acquireSlot());
  return { manager, runtimes: spawner.runtimes, lines, open };
}

/** Reads a session's lease to its end: `undefined` for OK, else the SPEC text of its status. */
async function leaseEnd(session: Session): Promise<string | undefined> {
  try {
    for await (const _ of session.lease());
  } catch (error) {
    return specText(error);
  }
}

Deno.test("SessionManager: maxSessions bounds open and opening sessions; a removed session frees its slot", async () => {
  const { manager, open } = setup({ limits: { maxSessions: 2 } });
  const a = await open();
  const slot = manager.acquireSlot(); // an OpenSession still opening holds a slot too
  assert.equal(thrownMessage(() => manager.acquireSlot()), "code-mode host has too many sessions");
  slot.release();
  await open();
  assert.equal(thrownMessage(() => manager.acquireSlot()), "code-mode host has too many sessions");
  await a.close();
  assert.equal(manager.sessions.size, 1);
  (await manager.open({ outputMode: OUTPUT_CLIENT, cellHeapMb: 64 }, manager.acquireSlot())).ensureOpen();
  await manager.drain();
});

Deno.test("SessionManager: request and control permits are try-acquired with their SPEC messages", async () => {
  const { manager } = setup({ limits: { maxInFlightRequests: 1, maxInFlightControlRequests: 2 } });
  const request = manager.permit("request");
  assert.equal(
    thrownMessage(() => manager.permit("request")),
    "code-mode host has too many in-flight requests",
  );
  const controls = [manager.permit("control"), manager.permit("control")];
  assert.equal(
    thrownMessage(() => manager.permit("control")),
    "code-mode host has too many in-flight control requests",
  );
  request.release();
  request.release(); // idempotent: frees one permit, not two
  manager.permit("request");
  assert.equal(
    thrownMessage(() => manager.permit("request")),
    "code-mode host has too many in-flight requests",
  );
  controls[0].release();
  manager.permit("control");
  await manager.drain();
});

Deno.test("SessionManager: an open takes a warm runtime and configures it; an emptied pool is refilled at once", async () => {
  const { manager, runtimes, open } = setup({ warmSessions: 1 });
  assert.equal(manager.spawnCount, 1, "the pool fills at construction");
  assert.equal(manager.warmCount, 1);
  const session = await open();
  assert.equal(session.runtime, runtimes[0]);
  assert.equal(manager.requestPathSpawnCount, 0, "no cold spawn while a warm runtime was there");
  assert.equal(runtimes[0].frames("configure")[0].sessionId, session.id);
  await turn();
  assert.equal(manager.spawnCount, 2, "the replacement follows the reply");
  assert.equal(manager.warmCount, 1);
  assert.equal(runtimes[1].sent.length, 0, "a warm runtime is configured only when it is taken");
  await manager.drain();
});

Deno.test("SessionManager: with no warm runtime an open spawns on the request path", async () => {
  const { manager, runtimes, open } = setup({ warmSessions: 0 });
  assert.equal(manager.spawnCount, 0);
  const session = await open();
  assert.equal(manager.requestPathSpawnCount, 1);
  assert.equal(session.runtime, runtimes[0]);
  assert.equal(manager.warmCount, 0);
  await manager.drain();
});

Deno.test("SessionManager: a second open while the pool still holds a runtime leaves the refill for later; the last one refills at once", async () => {
  const { manager, open } = setup({ warmSessions: 2 });
  assert.equal(manager.warmCount, 2);
  await open();
  assert.equal(manager.warmCount, 1);
  assert.equal(manager.spawnCount, 2, "deferred while another warm runtime remains");
  await open();
  await turn();
  assert.equal(manager.spawnCount, 4);
  assert.equal(manager.warmCount, 2);
  assert.equal(manager.requestPathSpawnCount, 0);
  await manager.drain();
});

Deno.test("SessionManager: a deferred refill starts soon after the taking session's first outcome or its closure, not 250 ms later", async () => {
  const { manager, open } = setup({ warmSessions: 3 });
  const settled = () => new Promise((r) => setTimeout(r, 30));
  const first = await open();
  assert.equal(manager.spawnCount, 3, "deferred while other warm runtimes remain");
  await first.track(() => Promise.resolve()); // its first outcome is ready
  await settled();
  assert.equal(manager.spawnCount, 4, "the replacement followed the first outcome");
  const second = await open();
  await open(); // a third open leaves the one refill for later
  await settled();
  assert.equal(manager.spawnCount, 4);
  await second.close();
  await settled();
  assert.equal(manager.spawnCount, 6, "the replacements followed the closure");
  await manager.drain();
});

Deno.test("SessionManager: while idle sessions hand their runtimes over, a refill of a pool that still holds one waits until no handover came for 100 ms", async () => {
  const clock = new FakeClock();
  const spawner = fakeSpawner({ onStartCell: (cell) => void cell.started().complete() });
  const manager = new SessionManager({
    limits: resolveLimits({ runtimeHandover: 2 }),
    log: new Logger("error", () => {}),
    clock,
    runtime: { deno: "unused", runtimeDir: "unused", workParent: "unused" },
    warmSessions: 2,
    spawn: spawner.spawn,
  });
  const core = new CodeModeCore({ manager });
  const run = async (sessionId: string) => {
    for await (
      const _ of core.execute({ sessionId, executionId: crypto.randomUUID(), toolCallId: "c", source: "" })
    );
  };
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const a = await core.openSession({});
  assert.equal(manager.spawnCount, 2, "deferred while another warm runtime remains");
  await run(a.sessionId); // its first outcome pulls the refill forward (5 ms)
  const b = await core.openSession({});
  assert.equal(manager.sessions.get(b.sessionId)!.runtime, spawner.runtimes[0], "a's runtime, handed over");
  await pause(60);
  assert.equal(manager.spawnCount, 2, "no start while runtimes are handed over");
  assert.equal(manager.warmCount, 1);
  clock.advance(100);
  // The rescheduled refill fires within 100 ms; a loaded machine may delay it.
  for (let waited = 0; manager.spawnCount < 3 && waited < 2_000; waited += 10) await pause(10);
  assert.equal(manager.spawnCount, 3, "the replacement once the handovers stopped");
  assert.equal(manager.warmCount, 2);
  await manager.drain();
});

Deno.test("SessionManager: a warm runtime that dies is replaced and never handed out", async () => {
  const { manager, runtimes, lines, open } = setup({ warmSessions: 1 });
  await runtimes[0].crash({ code: 1 });
  await turn();
  assert.equal(manager.spawnCount, 2);
  assert.ok(lines.some((l) => l.level === "warn" && l.msg === "warm session runtime ended; replacing it"));
  const session = await open();
  assert.equal(session.runtime, runtimes[1]);
  await manager.drain();
});

Deno.test("SessionManager: a runtime that fails to start fails the open with its message and frees the slot", async () => {
  const mismatch = new Error("code-mode session runtime speaks protocol 0, the host 1");
  const { manager, runtimes, open } = setup({
    limits: { maxSessions: 1 },
    warmSessions: 0,
    runtime: (index) => index === 0 ? { ready: mismatch } : {},
  });
  assert.equal(await rejectionMessage(open()), mismatch.message);
  assert.equal(runtimes[0].endedBy, "kill", "the failed runtime is reaped");
  const session = await open(); // the slot came back
  assert.equal(session.runtime, runtimes[1]);
  await manager.drain();
});

Deno.test("SessionManager: a warm runtime whose start fails is logged, killed and replaced", async () => {
  const { manager, runtimes, lines, open } = setup({
    warmSessions: 1,
    runtime: (index) => index === 0 ? { ready: new Error("bad ready") } : {},
  });
  await turn();
  assert.equal(runtimes[0].endedBy, "kill");
  assert.ok(lines.some((l) => l.level === "error" && l.msg === "bad ready"));
  const session = await open();
  assert.equal(session.runtime, runtimes[1]);
  await manager.drain();
});

Deno.test("SessionManager: lookup validates the ID, finds open sessions, and answers NOT_FOUND once removed", async () => {
  const { manager, open } = setup();
  assert.equal(thrownMessage(() => manager.lookup("")), "code-mode session ID must not be empty");
  assert.equal(thrownMessage(() => manager.lookup(undefined)), "code-mode session ID must not be empty");
  assert.equal(thrownMessage(() => manager.lookup("not-a-uuid")), "code-mode session ID must be a UUID");
  const unknown = crypto.randomUUID();
  assert.equal(thrownMessage(() => manager.lookup(unknown)), `unknown code-mode session ${unknown}`);
  const session = await open();
  assert.equal(manager.lookup(session.id), session);
  await session.close();
  assert.equal(thrownMessage(() => manager.lookup(session.id)), `unknown code-mode session ${session.id}`);
  await manager.drain();
});

Deno.test("SessionManager: a crashed session leaves the registry at once", async () => {
  const { manager, open } = setup();
  const session = await open();
  await (session.runtime as FakeRuntime).crash({ signal: "SIGKILL" });
  assert.equal(thrownMessage(() => manager.lookup(session.id)), `unknown code-mode session ${session.id}`);
  manager.acquireSlot().release();
  await manager.drain();
});

Deno.test("SessionManager: drain refuses new sessions, closes every session with the shutdown status and stops every runtime", async () => {
  const { manager, runtimes, open } = setup({ warmSessions: 2 });
  const sessions = [await open(), await open()];
  const ends = sessions.map(leaseEnd);
  await turn();
  await manager.drain();
  assert.equal(thrownMessage(() => manager.acquireSlot()), "code-mode host is shutting down");
  assert.deepEqual(await Promise.all(ends), [
    "code-mode host is shutting down",
    "code-mode host is shutting down",
  ]);
  assert.equal(manager.sessions.size, 0);
  assert.equal(manager.runtimes.size, 0, "warm runtimes were stopped too");
  assert.ok(runtimes.every((r) => r.endedBy === "stop"), "an orderly stop for each");
  await turn();
  assert.equal(manager.spawnCount, runtimes.length);
  assert.equal(manager.warmCount, 0, "no refill after a drain");
  assert.equal(manager.draining, true);
});

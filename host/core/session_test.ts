/**
 * Unit tests of one session (SPEC §3–§6) against an in-memory runtime and a manual clock: no
 * processes, no sockets. Errors are checked by their SPEC messages only.
 */
import assert from "node:assert/strict";
import {
  FakeClock,
  FakeRuntime,
  type FakeRuntimeOptions,
  rejectionMessage,
  specText,
  thrownMessage,
  turn,
} from "../testing.ts";
import { type Limits, resolveLimits } from "./limits.ts";
import { Logger } from "../ops/log.ts";
import { Permits } from "./permits.ts";
import { OUTPUT_CLIENT, OUTPUT_SERVER, Session, type SessionEvent, type StartRequest } from "./session.ts";

const EXEC_ENDED = "exec runtime ended unexpectedly";
const CLOSED = "code-mode session is closed";

interface Harness {
  session: Session;
  clock: FakeClock;
  runtime: FakeRuntime;
  /** Runtimes handed out by `replaceRuntime`, oldest first. */
  replacements: FakeRuntime[];
  /** Times `onRemoved` was called. */
  removals: number;
  /** Log lines, parsed. */
  lines: Record<string, unknown>[];
  /** Lease events read so far (the lease is read in the background). */
  events: SessionEvent[];
  /** The lease's end: `undefined` for OK, else the SPEC text of its status. */
  leaseEnd: Promise<string | undefined>;
  limits: Limits;
  /** Starts a cell with defaults for everything not given. */
  start(source?: string, request?: Partial<StartRequest>): ReturnType<Session["startCell"]>;
}

let executions = 0;

function setup(
  overrides: Partial<Limits> = {},
  options: { outputMode?: number; runtime?: FakeRuntimeOptions; readLease?: boolean } = {},
): Harness {
  const clock = new FakeClock();
  const runtime = new FakeRuntime(options.runtime);
  const limits = resolveLimits(overrides);
  const lines: Record<string, unknown>[] = [];
  const replacements: FakeRuntime[] = [];
  const events: SessionEvent[] = [];
  const h = { removals: 0 } as Harness;
  const session = new Session({
    id: crypto.randomUUID(),
    ref: 7,
    outputMode: options.outputMode ?? OUTPUT_CLIENT,
    cellHeapMb: 64,
    runtime,
    limits,
    log: new Logger("debug", (line) => lines.push(JSON.parse(line))),
    clock,
    onRemoved: () => h.removals++,
    replaceRuntime: () => {
      const next = new FakeRuntime(options.runtime);
      replacements.push(next);
      return Promise.resolve(next);
    },
    hostDelegatePermits: new Permits(limits.maxPendingDelegateCalls),
  });
  const leaseEnd = (async () => {
    if (options.readLease === false) await session.removed;
    try {
      for await (const event of session.lease()) events.push(event);
      return undefined;
    } catch (error) {
      return specText(error);
    }
  })();
  return Object.assign(h, {
    session,
    clock,
    runtime,
    replacements,
    lines,
    events,
    leaseEnd,
    limits,
    start: (source = "text(1)", request: Partial<StartRequest> = {}) =>
      session.startCell({
        executionId: `e${++executions}`,
        toolCallId: "call",
        source,
        tools: [],
        permits: [],
        initial: { yieldMs: 10_000 },
        ...request,
      }),
  });
}

const textsOf = (outcome: { items: unknown[] }) =>
  outcome.items.map((item) => (item as { text?: { text: string } }).text?.text ?? "?");

/** The one replacement runtime, checked: configured for the session and sent its store (`k` = 1). */
function replacedWithStore(h: ReturnType<typeof setup>) {
  assert.equal(h.replacements.length, 1);
  const next = h.replacements[0];
  assert.equal(next.frames("configure")[0].sessionId, h.session.id);
  assert.deepEqual(next.frames("storeUpdate"), [
    { version: 1, reset: true, entries: [{ key: "k", valueJson: "1" }] },
  ]);
  return next;
}

Deno.test("Session: the lease starts with opened, and the runtime is configured with the session", async () => {
  const h = setup({}, { outputMode: OUTPUT_SERVER });
  await turn();
  assert.deepEqual(h.events[0], { opened: { sessionId: h.session.id, outputTruncation: OUTPUT_SERVER } });
  const configure = h.runtime.frames("configure");
  assert.equal(configure.length, 1);
  assert.equal(configure[0].sessionId, h.session.id);
  assert.equal(configure[0].outputTruncation, OUTPUT_SERVER);
  assert.equal(configure[0].cellHeapLimitMb, 64);
  assert.equal(configure[0].maxStoredValueBytes, h.limits.maxStoredValueBytes);
  assert.equal(h.runtime.frames("storeUpdate").length, 0, "an empty store sends no StoreUpdate");
  await h.session.close();
  assert.equal(await h.leaseEnd, undefined);
});

Deno.test("Session: a cell is started with StartCell, completes with its output, and closes on the lease", async () => {
  const h = setup();
  const permits = new Permits(1);
  const cell = await h.start("text(1)", {
    executionId: "ex",
    toolCallId: "call-9",
    tools: [{ globalName: "echo", description: "echoes" }],
    permits: [permits.tryAcquire()!],
  });
  assert.equal(cell.id, "1");
  assert.deepEqual(h.runtime.frames("startCell"), [
    {
      cellId: "1",
      source: "text(1)",
      tools: [{ globalName: "echo", description: "echoes" }],
      storeVersion: 0,
    },
  ]);
  assert.equal(h.session.runningCells, 1);
  h.runtime.cell("1")!.started().text("hello").text("world").complete();
  const outcome = await cell.initial;
  assert.equal(outcome.kind, "completed");
  assert.equal(outcome.errorText, undefined);
  assert.deepEqual(textsOf(outcome), ["hello", "world"]);
  await cell.done;
  await turn();
  assert.equal(h.session.runningCells, 0);
  assert.equal(permits.inUse, 0, "the active-cell permit went back with CellClosed");
  assert.deepEqual(h.events.at(-1), {
    cellClosed: { executionId: "ex", cellId: "1", finalToolCallSequence: 0 },
  });
  assert.equal(h.session.cell("1"), undefined, "a delivered terminal outcome makes the cell missing");
  assert.equal((await h.start()).id, "2", "cell IDs count up");
  await h.session.close();
});

Deno.test("Session: a failed cell's error text is its outcome's; a refused source never reaches the runtime", async () => {
  const h = setup();
  const failing = await h.start("throw 1");
  h.runtime.cell(failing.id)!.complete("Error: boom");
  assert.equal((await failing.initial).errorText, "Error: boom");
  const refused = await h.start('import fs from "node:fs";');
  const outcome = await refused.initial;
  assert.equal(outcome.kind, "completed");
  assert.equal(outcome.errorText, "Unsupported import in exec: node:fs");
  assert.deepEqual(h.runtime.frames("startCell").map((s) => s.cellId), [failing.id]);
  await h.session.close();
});

Deno.test("Session: a yielded cell stays findable; a Wait sees the rest; Wait/Terminate of unknown cells find none", async () => {
  const h = setup();
  const cell = await h.start("forever", { initial: { yieldMs: 50 } });
  h.runtime.cell("1")!.started().text("a");
  await h.clock.tick(50);
  const first = await cell.initial;
  assert.equal(first.kind, "yielded");
  assert.deepEqual(textsOf(first), ["a"]);
  assert.equal(h.session.cell("1"), cell, "a yielded cell can be waited on");
  assert.equal(h.session.cell("2"), undefined, "a cell that never existed is missing");
  const waited = cell.observe(10_000);
  h.runtime.cell("1")!.text("b").complete();
  const second = await waited;
  assert.equal(second.kind, "completed");
  assert.deepEqual(textsOf(second), ["b"]);
  assert.equal(h.session.cell("1"), undefined, "its terminal outcome was delivered");
  await h.session.close();
});

Deno.test("Session: Terminate sends StopCell and ends with terminated and the drained output; writes are discarded", async () => {
  const h = setup();
  const cell = await h.start("forever", { initial: { yieldMs: 1 } });
  h.runtime.cell("1")!.started().text("partial").store("k", 1);
  await h.clock.tick(1);
  await cell.initial;
  h.runtime.cell("1")!.text("more");
  const outcome = await cell.terminate();
  assert.deepEqual(h.runtime.frames("stopCell"), [{ cellId: "1" }]);
  assert.equal(outcome.kind, "terminated");
  assert.deepEqual(textsOf(outcome), ["more"]);
  assert.equal(h.session.cell("1"), undefined);
  await cell.done;
  const next = await h.start();
  assert.equal(h.runtime.frames("storeUpdate").length, 0, "a terminated cell commits nothing");
  assert.equal(h.runtime.frames("startCell").at(-1)!.storeVersion, 0);
  assert.equal(next.id, "2");
  await h.session.close();
});

Deno.test("Session: committed stored values reach the runtime as StoreUpdate before the next StartCell (SPEC §6)", async () => {
  const h = setup();
  const writer = await h.start("store");
  assert.equal(h.runtime.frames("startCell")[0].storeVersion, 0);
  h.runtime.cell(writer.id)!.store("k", { v: 1 }).store("j", "x").complete();
  await writer.initial;
  const failed = await h.start("fail()");
  h.runtime.cell(failed.id)!.store("k", 2).complete("Error: late");
  assert.equal((await failed.initial).errorText, "Error: late");
  await h.start("load");
  const kinds = h.runtime.sent.map((m) => Object.keys(m)[0]);
  assert.deepEqual(kinds, ["configure", "startCell", "storeUpdate", "startCell", "storeUpdate", "startCell"]);
  assert.deepEqual(h.runtime.frames("storeUpdate"), [
    { version: 1, entries: [{ key: "k", valueJson: '{"v":1}' }, { key: "j", valueJson: '"x"' }] },
    { version: 2, entries: [{ key: "k", valueJson: "2" }] },
  ]);
  assert.deepEqual(h.runtime.frames("startCell").map((s) => s.storeVersion), [0, 1, 2]);
  await h.session.close();
});

Deno.test("Session: a commit over maxStoredValueBytes is not applied and the completion carries the cap message", async () => {
  const h = setup({ maxStoredValueBytes: 10 });
  const big = await h.start("store");
  h.runtime.cell(big.id)!.store("k", "x".repeat(20)).text("done").complete();
  const outcome = await big.initial;
  assert.equal(outcome.errorText, "stored values exceed the 10-byte session limit");
  assert.deepEqual(textsOf(outcome), ["done"]);
  const own = await h.start("fail()");
  h.runtime.cell(own.id)!.store("k", "x".repeat(20)).complete("Error: mine");
  assert.equal((await own.initial).errorText, "Error: mine", "a cell's own error wins");
  const fits = await h.start("store");
  h.runtime.cell(fits.id)!.store("k", "xxxxxx").complete(); // 1 + 8 bytes
  assert.equal((await fits.initial).errorText, undefined);
  assert.deepEqual(h.runtime.frames("storeUpdate"), [{
    version: 1,
    entries: [{ key: "k", valueJson: '"xxxxxx"' }],
  }]);
  await h.session.close();
});

Deno.test("Session: the cell actor's failure handler keeps a failed isolate of a live runtime a cell error (A10), logged once", async () => {
  const h = setup();
  const panicked = await h.start("x");
  h.runtime.cell(panicked.id)!.started().text("before").exited("fault", "bootstrap broke");
  const outcome = await panicked.initial;
  assert.equal(outcome.errorText, EXEC_ENDED);
  assert.deepEqual(textsOf(outcome), ["before"]);
  const heap = await h.start("y");
  h.runtime.cell(heap.id)!.started().exited("heap_limit");
  assert.equal(
    (await heap.initial).errorText,
    "exec runtime ended unexpectedly: cell heap limit of 64 MiB reached",
  );
  await turn();
  const failures = h.lines.filter((l) => String(l.msg).startsWith("code-mode cell failed"));
  assert.deepEqual(failures.map((l) => [l.level, l.msg, l.cell_id, l.error]), [
    [
      "warn",
      "code-mode cell failed: code-mode V8 runtime thread panicked",
      panicked.id,
      "fault: bootstrap broke",
    ],
    ["warn", "code-mode cell failed: code-mode V8 runtime thread ended unexpectedly", heap.id, "heap_limit"],
  ]);
  assert.equal(h.session.open, true, "no session crash");
  const next = await h.start("text(1)");
  h.runtime.cell(next.id)!.complete();
  assert.equal((await next.initial).kind, "completed");
  await h.session.close();
  assert.equal(await h.leaseEnd, undefined);
});

Deno.test("Session: a runtime that exits on its own is a crash: lease INTERNAL, observations complete with the crash error", async () => {
  const h = setup();
  const executing = await h.start("forever");
  const waited = await h.start("forever", { initial: { yieldMs: 1 } });
  h.runtime.cell(executing.id)!.started().text("seen");
  h.runtime.cell(waited.id)!.started();
  await h.clock.tick(1);
  assert.equal((await waited.initial).kind, "yielded");
  const wait = waited.observe(10_000);
  await h.runtime.crash({ code: 137, signal: "SIGKILL", stderrTail: "tail" });
  assert.equal(
    await h.leaseEnd,
    "code-mode V8 runtime thread ended unexpectedly: worker process killed by signal SIGKILL",
  );
  const initial = await executing.initial;
  assert.equal(initial.kind, "completed");
  assert.equal(initial.errorText, EXEC_ENDED);
  assert.deepEqual(textsOf(initial), ["seen"]);
  const waitOutcome = await wait;
  assert.equal(waitOutcome.kind, "completed");
  assert.equal(waitOutcome.errorText, EXEC_ENDED);
  await h.session.removed;
  assert.equal(h.removals, 1);
  assert.equal(h.session.open, false);
  assert.equal(await rejectionMessage(h.start()), CLOSED);
  const failed = h.lines.find((l) => l.level === "error")!;
  assert.equal(failed.msg, "code-mode host session failed: worker process killed by signal SIGKILL");
  assert.equal(failed.session_ref, 7);
  assert.equal(failed.signal, "SIGKILL");
  assert.equal(failed.exit_code, 137);
  assert.equal(failed.stderr_tail, "tail");
  assert.equal(failed.session_id, undefined, "the session ID is a capability: never above debug");
  await h.session.close(); // closing a crashed session is a no-op
  assert.equal(h.removals, 1);
});

Deno.test("Session: crash reasons follow SPEC §3.5's table, and a runtime fault is a panic", async (t) => {
  const cases: [string, Parameters<FakeRuntime["crash"]>[0], string][] = [
    [
      "fault",
      { kind: "fault", detail: "loop broke" },
      "code-mode V8 runtime thread panicked: worker reported an internal fault: loop broke",
    ],
    [
      "protocol",
      { kind: "protocol", detail: "frame of 9 bytes" },
      "code-mode V8 runtime thread ended unexpectedly: worker protocol error: frame of 9 bytes",
    ],
    [
      "heap",
      { code: 133, signal: "SIGTRAP", stderrTail: "Fatal JavaScript out of memory" },
      "code-mode V8 runtime thread ended unexpectedly: V8 heap limit reached",
    ],
    [
      "exit",
      { code: 3 },
      "code-mode V8 runtime thread ended unexpectedly: worker process exited with code 3",
    ],
  ];
  for (const [name, end, message] of cases) {
    await t.step(name, async () => {
      const h = setup();
      await h.runtime.crash(end);
      assert.equal(await h.leaseEnd, message);
      assert.equal(h.removals, 1);
    });
  }
});

Deno.test("Session: close stops the runtime, terminates running cells, cancels Waits, ends the lease OK, then is removed", async () => {
  const h = setup();
  const permits = new Permits(2);
  const running = await h.start("forever", { permits: [permits.tryAcquire()!] });
  h.runtime.cell(running.id)!.started().text("drained");
  const yielded = await h.start("forever", { initial: { yieldMs: 1 }, permits: [permits.tryAcquire()!] });
  await h.clock.tick(1);
  await yielded.initial;
  const wait = h.session.registerWait("w1");
  const closing = h.session.close();
  assert.equal(h.session.open, false, "closed at once (step 1)");
  assert.equal(await rejectionMessage(h.start()), CLOSED);
  assert.equal(thrownMessage(() => h.session.ensureOpen()), CLOSED);
  assert.equal(
    specText(wait.cancel.reason),
    "code-mode wait was cancelled",
    "active Waits are cancelled (step 2), in Codex's host's words",
  );
  const outcome = await running.initial;
  assert.equal(outcome.kind, "terminated");
  assert.deepEqual(textsOf(outcome), ["drained"]);
  await closing;
  assert.equal(h.runtime.endedBy, "stop", "an orderly stop, not a kill");
  assert.equal(await h.leaseEnd, undefined, "the lease ends OK");
  assert.equal(h.removals, 1);
  assert.equal(permits.inUse, 0, "cell permits were released");
  // The cells the closure ended are marked: the gRPC door sends no CellClosed for them, as
  // Codex's host does not.
  const closed = h.events.filter((e) => "cellClosed" in e).map((e) =>
    "cellClosed" in e && `${e.cellClosed.cellId}:${e.cellClosed.closing}`
  );
  assert.deepEqual(closed.sort(), ["1:true", "2:true"]);
  assert.equal(h.session.closing, true);
  await h.session.close();
  assert.equal(h.removals, 1, "closing twice removes once");
});

Deno.test("Session: a shutdown ends the lease UNAVAILABLE-style, an overflow with the queue-full message", async () => {
  const shutdown = setup();
  await shutdown.session.close("shutdown");
  assert.equal(await shutdown.leaseEnd, "code-mode host is shutting down");
  const overflow = setup();
  await overflow.session.close("overflow");
  assert.equal(await overflow.leaseEnd, "code-mode session event queue is full");
});

Deno.test("Session: a CellClosed that finds the lease full closes the session with the overflow status", async () => {
  const h = setup({ leaseEventQueueCapacity: 2 }, { readLease: false });
  for (const source of ["a", "b"]) {
    const cell = await h.start(source);
    h.runtime.cell(cell.id)!.complete();
    await cell.initial;
    await cell.done;
  }
  await h.session.removed;
  assert.equal(h.removals, 1);
  assert.equal(await h.leaseEnd, "code-mode session event queue is full");
  assert.deepEqual(h.events.map((e) => Object.keys(e)[0]), ["opened", "cellClosed"]);
});

Deno.test("Session: the idle timeout closes a session nobody uses; requests and running cells keep it", async () => {
  const h = setup({ idleSessionTimeoutMs: 500 });
  h.clock.advance(400);
  h.session.touch();
  h.clock.advance(400);
  assert.ok(h.session.open, "a request restarted the idle time");
  const cell = await h.start("forever");
  h.clock.advance(2_000);
  assert.ok(h.session.open, "a running cell keeps the session");
  h.runtime.cell(cell.id)!.complete();
  await cell.initial;
  await cell.done;
  h.clock.advance(499);
  assert.ok(h.session.open);
  await h.clock.tick(1);
  await h.session.removed;
  assert.equal(h.session.open, false);
  assert.equal(await h.leaseEnd, undefined, "an idle close ends the lease OK");
  assert.equal(h.runtime.endedBy, "stop");
});

Deno.test("Session: an observation in flight keeps the session from idling", async () => {
  const h = setup({ idleSessionTimeoutMs: 500 });
  const release = Promise.withResolvers<void>();
  const tracked = h.session.track(() => release.promise);
  h.clock.advance(5_000);
  assert.ok(h.session.open);
  release.resolve();
  await tracked;
  h.clock.advance(500);
  await h.session.removed;
  assert.equal(h.session.open, false);
});

Deno.test("Session: a cell that cannot confirm a stop gets its runtime restarted; the store is replayed, other cells end", async () => {
  const h = setup({}, { runtime: { stopCell: "ignore" } });
  const writer = await h.start("store");
  h.runtime.cell(writer.id)!.store("k", 1).complete();
  await writer.initial;
  const stuck = await h.start("spin", { initial: { yieldMs: 1 } });
  const other = await h.start("forever");
  h.runtime.cell(stuck.id)!.started();
  h.runtime.cell(other.id)!.started();
  await h.clock.tick(1);
  await stuck.initial;
  const terminating = stuck.terminate();
  await turn();
  assert.deepEqual(h.runtime.frames("stopCell"), [{ cellId: stuck.id }]);
  h.clock.advance(h.limits.cooperativeStopMs);
  assert.equal((await terminating).kind, "terminated");
  assert.equal(h.runtime.endedBy, "kill", "a hard stop");
  const otherOutcome = await other.initial;
  assert.equal(
    otherOutcome.errorText,
    `exec runtime ended unexpectedly: the session runtime was restarted to stop cell ${stuck.id}`,
  );
  await turn();
  const next = replacedWithStore(h);
  assert.ok(h.session.open, "a restart does not end the session");
  // The failure handler (A10): a runtime the host killed leaves the other cell's failure a cell error.
  assert.deepEqual(
    h.lines.filter((l) => String(l.msg).startsWith("code-mode cell failed")).map((l) => [l.level, l.cell_id]),
    [["debug", other.id]],
  );
  assert.equal(h.lines.filter((l) => l.level === "error").length, 0, "no session failure");
  const after = await h.start();
  assert.deepEqual(next.frames("startCell").map((s) => [s.cellId, s.storeVersion]), [[after.id, 1]]);
  assert.equal(h.session.runtime, next);
  await h.session.close();
});

Deno.test("Session: a runtime that burns CPU while no cell runs is replaced; the session and its store stay, one warning", async () => {
  const h = setup();
  const writer = await h.start("store");
  h.runtime.cell(writer.id)!.store("k", 1).complete();
  await writer.initial;
  const live = await h.start("forever");
  h.runtime.cell(live.id)!.started();
  await turn();
  h.runtime.idleCpuBusy!(90);
  await turn();
  assert.equal(h.runtime.endedBy, undefined, "a runtime with a live cell is never replaced for its CPU");
  h.runtime.cell(live.id)!.complete();
  await live.initial;
  await turn();
  h.runtime.idleCpuBusy!(90);
  h.runtime.idleCpuBusy!(90);
  assert.equal(h.runtime.endedBy, "kill");
  await turn();
  const next = replacedWithStore(h);
  assert.ok(h.session.open);
  assert.deepEqual(h.lines.filter((l) => l.level === "warn").map((l) => [l.msg, l.cpu_percent]), [
    [
      "session runtime replaced: it kept burning CPU while none of its cells ran (a thread a completed cell left running)",
      90,
    ],
  ]);
  const after = await h.start();
  assert.deepEqual(next.frames("startCell").map((s) => [s.cellId, s.storeVersion]), [[after.id, 1]]);
  assert.ok(next.idleCpuBusy, "the replacement is watched too");
  await h.session.close();
});

Deno.test("Session: execution and wait IDs cannot be reused; a CancelWait that comes first cancels the Wait", () => {
  const h = setup();
  h.session.reserveExecution("e");
  assert.equal(thrownMessage(() => h.session.reserveExecution("e")), "code-mode execution ID `e` was reused");
  h.session.releaseExecution("e");
  assert.equal(thrownMessage(() => h.session.reserveExecution("e")), "code-mode execution ID `e` was reused");
  h.session.registerWait("w").finish();
  assert.equal(thrownMessage(() => h.session.registerWait("w")), "code-mode wait ID `w` was reused");
  void h.session.cancelWait("early");
  assert.equal(thrownMessage(() => h.session.registerWait("early")), "code-mode wait was cancelled");
  h.session.yieldObservation("pre", "execution");
  assert.ok(h.session.reserveExecution("pre").aborted, "a YieldObservation that came first is kept");
  return h.session.close();
});

Deno.test("Session: notify() is published on the lease with the cell's IDs", async () => {
  const h = setup();
  const cell = await h.start("notify", { executionId: "ex-n", toolCallId: "call-n" });
  h.runtime.cell(cell.id)!.notify("hello").complete();
  await cell.initial;
  await cell.done;
  await turn();
  const notification = h.events.find((e) => "notification" in e);
  assert.ok(notification && "notification" in notification);
  const { notificationId, ...rest } = notification.notification;
  assert.match(notificationId, /^[0-9a-f-]{36}$/);
  assert.deepEqual(rest, { executionId: "ex-n", cellId: cell.id, callId: "call-n", text: "hello" });
  await h.session.close();
});

Deno.test("Session: more tool subscriptions than maxSubscriptionsPerSession are refused", async () => {
  const h = setup({ maxSubscriptionsPerSession: 1 });
  const first = h.session.subscribe([]);
  assert.equal(
    thrownMessage(() => h.session.subscribe([])),
    "code-mode session has too many tool subscriptions",
  );
  h.session.unsubscribe(first);
  h.session.subscribe([]);
  await h.session.close();
});

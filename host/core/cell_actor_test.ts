import assert from "node:assert/strict";
import { endReasonText, ObserveMode, SERIAL_HOLD_MS, startCellActor } from "./cell_actor.ts";
import { type CellToolCall, type RuntimeEvent, RuntimeEventChannel } from "./cell_channel.ts";
import type { CellActorPort } from "./cell_port.ts";
import type { CellEvent, CellState, CompletedEvent } from "./cell_state.ts";
import { FakeClock } from "../testing.ts";
import {
  createOutputCollector,
  type OutputCollector,
  type OutputItem,
  type OutputMode,
  SERVER_IMAGE_BYTES,
} from "../output/output_collector.ts";

// ---------------------------------------------------------------------------------------------
// Test doubles

/**
 * The messages a runtime's control channel receives: `terminate` (the port's `stop`) in every
 * mode, `resume` only from the {@link PausingRuntime} fake (SPEC §4.12 runtime modes).
 */
type RuntimeControl = "resume" | "terminate";

/**
 * Like the seed's TestHost and RecordingHost: the session side of the actor's port; it commits
 * (optionally held), records its calls and the runtime controls, and counts the actor's closes.
 */
class TestHost implements CellActorPort {
  readonly commitStarted = Promise.withResolvers<void>();
  readonly notified = Promise.withResolvers<void>();
  readonly notifications: string[] = [];
  readonly committedWrites: Map<string, string>[] = [];
  readonly toolSignals: AbortSignal[] = [];
  readonly log: string[] = [];
  readonly controls: RuntimeControl[] = [];
  closedCalls = 0;
  #hold: Promise<void> | undefined;

  constructor(hold?: Promise<void>) {
    this.#hold = hold;
  }

  async commit(
    writes: Map<string, string>,
    buildEvent: () => CompletedEvent,
    state: CellState,
  ): Promise<"committed" | "rejected"> {
    this.log.push("commit");
    this.commitStarted.resolve();
    if (this.#hold) await this.#hold;
    return state.commitCompletion(buildEvent, () => this.committedWrites.push(writes));
  }

  notify(callId: string, text: string, _signal: AbortSignal): Promise<void> {
    this.log.push(`notify ${callId}`);
    this.notifications.push(text);
    this.notified.resolve();
    return Promise.resolve();
  }

  invokeTool(call: CellToolCall, signal: AbortSignal): Promise<void> {
    this.log.push(`tool ${call.id}`);
    this.toolSignals.push(signal);
    return Promise.reject(new Error("unexpected tool call"));
  }

  stop(): void {
    this.control("terminate");
  }

  /** Records a message to the runtime's control channel. */
  control(control: RuntimeControl): void {
    this.controls.push(control);
  }

  closed(): void {
    this.closedCalls++;
  }
}

interface Harness {
  events: RuntimeEventChannel;
  cell: ReturnType<typeof startCellActor>;
  yieldSignal: AbortController;
  controls: RuntimeControl[];
  clock: FakeClock;
  host: TestHost;
}

function spawn(
  initial: (signal: AbortSignal) => ObserveMode,
  options: {
    mode?: OutputMode;
    host?: TestHost;
    failureHandler?: (reason: string) => void;
    bytes?: number;
    serialOutcomes?: boolean;
  } = {},
): Harness {
  const mode = options.mode ?? "client";
  const events = new RuntimeEventChannel({ mode, bytes: options.bytes });
  const yieldSignal = new AbortController();
  const clock = new FakeClock();
  const host = options.host ?? new TestHost();
  const cell = startCellActor({
    port: host,
    onClosed: () => host.closed(),
    events,
    mode,
    clock,
    initialObserve: { mode: initial(yieldSignal.signal) },
    failureHandler: options.failureHandler,
    serialOutcomes: options.serialOutcomes,
  });
  return { events, cell, yieldSignal, controls: host.controls, clock, host };
}

/**
 * A `pauseUntilResumed` runtime (SPEC §4.12 runtime modes), faked around the actor: after each
 * `Pending` it runs on only when it is resumed, and an observation that attaches while it is
 * paused without a retained frontier to take resumes it (`resume` on its control channel). A
 * frontier is retained from a `Pending` until an observation receives it. Production runtimes
 * never pause, so the actor itself has no such mode.
 */
class PausingRuntime {
  readonly #h: Harness;
  readonly #step: () => void;
  #paused = false;
  #retained = false;

  /**
   * @param h the actor under test
   * @param step what the runtime does when resumed, up to its next {@link pending}
   */
  constructor(h: Harness, step: () => void) {
    this.#h = h;
    this.#step = step;
  }

  /** The runtime reaches a frontier: it emits `Pending` and pauses. */
  pending(): void {
    this.#h.events.trySend({ type: "pending" });
    this.#paused = true;
    this.#retained = true;
  }

  /**
   * Watches an observation's outcome: a `pending` one took the retained frontier.
   *
   * @param promise the outcome
   * @returns the same outcome
   */
  async received(promise: Promise<CellEvent>): Promise<CellEvent> {
    const event = await promise;
    if (event.type === "pending") this.#retained = false;
    return event;
  }

  /**
   * Observes the cell; resumes the runtime when it is paused and the observation has no retained
   * frontier to take.
   *
   * @param mode how it waits
   * @returns its outcome
   */
  observe(mode: ObserveMode): Promise<CellEvent> {
    const outcome = this.received(this.#h.cell.observe(mode));
    if (this.#paused && !(mode.kind === "pendingFrontier" && this.#retained)) {
      this.#paused = false;
      this.#h.host.control("resume");
      this.#step();
    }
    return outcome;
  }
}

/** A watchdog for "within 1 s" expectations; it never orders anything. */
async function within<T>(promise: Promise<T>, what: string, ms = 1000): Promise<T> {
  let id: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    id = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(id);
  }
}

const textItem = (text: string): OutputItem => ({ type: "text", text });
const content = (text: string): RuntimeEvent => ({ type: "contentItem", item: textItem(text) });

function collector(mode: OutputMode, ...texts: string[]): OutputCollector {
  const out = createOutputCollector(mode);
  for (const t of texts) out.push(textItem(t));
  return out;
}

const yielded = (c: OutputCollector): CellEvent => ({ type: "yielded", content: c });
const terminated = (c: OutputCollector): CellEvent => ({ type: "terminated", content: c });
const completed = (c: OutputCollector, resultBufferedForMs = 0, errorText?: string): CellEvent => ({
  type: "completed",
  content: c,
  resultBufferedForMs,
  ...(errorText === undefined ? {} : { errorText }),
});

/** Cell events are equal when kinds, fields and renderings are (SPEC §4.12). */
function assertEvent(actual: CellEvent, expected: CellEvent): void {
  const plain = (e: CellEvent) => ({ ...e, content: { mode: e.content.mode, items: e.content.render() } });
  assert.deepEqual(plain(actual), plain(expected));
}

// ---------------------------------------------------------------------------------------------
// Seed scenarios 40–53 (SPEC §12.4)

Deno.test("40 termination drains a send already blocked by backpressure", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000), { mode: "server" });
  const capacity = 128;
  for (let i = 0; i < capacity; i++) assert.ok(h.events.trySend(content("queued")));
  const blocked = h.events.send(content("blocked"));
  assert.equal(h.events.waitingSends, 1);
  const termination = h.cell.terminate();
  assert.equal(await within(blocked, "termination must release the blocked sender"), true);
  h.events.end();
  const event = await within(termination, "termination must finish after draining");
  const expected = collector("server", ...Array(capacity).fill("queued"), "blocked");
  assertEvent(event, terminated(expected));
  assertEvent(await h.cell.initial, terminated(expected));
  await within(h.cell.done, "actor must close");
});

Deno.test("41 unexpected runtime thread exit is reported to the session owner", async () => {
  const failures = Promise.withResolvers<string>();
  const h = spawn(() => ObserveMode.yieldAfter(60_000), { failureHandler: (r) => failures.resolve(r) });
  h.events.end();
  assert.equal(
    await within(failures.promise, "runtime failure"),
    "code-mode V8 runtime thread ended unexpectedly",
  );
  assertEvent(await h.cell.initial, completed(collector("client"), 0, "exec runtime ended unexpectedly"));
  await h.cell.done;
});

for (const [n, mode] of [["42", "client"], ["43", "server"]] as const) {
  Deno.test(`${n} termination during the completion commit preserves output and discards the losing error (${mode})`, async () => {
    const resume = Promise.withResolvers<void>();
    const host = new TestHost(resume.promise);
    const h = spawn(() => ObserveMode.yieldAfter(60_000), { mode, host });
    assert.ok(await h.events.send(content("output that must survive termination")));
    assert.ok(
      await h.events.send({
        type: "result",
        storedValueWrites: new Map([["k", "1"]]),
        errorText: "uncommitted error".repeat(128 * 1024),
      }),
    );
    await within(host.commitStarted.promise, "commit reached");
    const termination = h.cell.terminate();
    resume.resolve();
    const expected = terminated(collector(mode, "output that must survive termination"));
    assertEvent(await termination, expected);
    assertEvent(await h.cell.initial, expected);
    assert.deepEqual(host.committedWrites, []);
    await h.cell.done;
  });
}

Deno.test("44 a runtime thread panic remains a cell error without owner supervision", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000));
  h.events.trySend({ type: "threadPanicked" });
  h.events.end();
  assertEvent(await h.cell.initial, completed(collector("client"), 0, "exec runtime ended unexpectedly"));
  await h.cell.done;
});

Deno.test("45 the yield timer preempts buffered runtime output", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(0));
  h.events.trySend({ type: "started" });
  h.events.trySend(content("queued output"));
  assertEvent(await h.cell.initial, yielded(collector("client")));
  const termination = h.cell.terminate();
  h.events.end();
  assertEvent(await termination, terminated(collector("client", "queued output")));
  await h.cell.done;
});

Deno.test("46 a queued termination preempts an unobserved runtime completion", async () => {
  const h = spawn((signal) => ObserveMode.yieldAfter(0, signal));
  h.events.trySend({ type: "started" });
  h.events.trySend({ type: "yieldRequested" });
  h.events.trySend(content("queued output"));
  h.events.trySend({ type: "result", storedValueWrites: new Map() });
  h.yieldSignal.abort();
  const termination = h.cell.terminate();
  const expected = terminated(collector("client", "queued output"));
  assertEvent(await termination, expected);
  assertEvent(await h.cell.initial, expected);
  assert.deepEqual(h.host.committedWrites, []);
  await h.cell.done;
});

Deno.test("47 an observation dropped before dequeue does not consume output", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000));
  h.events.trySend({ type: "yieldRequested" });
  assert.equal((await h.cell.initial).type, "yielded");
  const drop = new AbortController();
  const dropped = h.cell.observe(ObserveMode.yieldAfter(60_000), { signal: drop.signal });
  drop.abort();
  await assert.rejects(dropped);
  h.events.trySend(content("survives pre-dequeue cancellation"));
  h.events.trySend({ type: "yieldRequested" });
  h.events.trySend({ type: "notify", callId: "after-dropped-command", text: "barrier" });
  await within(h.host.notified.promise, "notification barrier");
  assertEvent(
    await h.cell.observe(ObserveMode.yieldAfter(0)),
    yielded(collector("client", "survives pre-dequeue cancellation")),
  );
  const termination = h.cell.terminate();
  h.events.end();
  assertEvent(await termination, terminated(collector("client")));
  await h.cell.done;
});

Deno.test("48 a dropped yield observer preserves output for the next observation", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000));
  h.events.trySend({ type: "yieldRequested" });
  assert.equal((await h.cell.initial).type, "yielded");
  const drop = new AbortController();
  const dropped = h.cell.observe(ObserveMode.yieldAfter(60_000), { signal: drop.signal });
  await assert.rejects(h.cell.observe(ObserveMode.yieldAfter(0)), { kind: "busy" });
  drop.abort();
  await assert.rejects(dropped);
  h.events.trySend(content("survives active cancellation"));
  h.events.trySend({ type: "yieldRequested" });
  h.events.trySend({ type: "notify", callId: "after-dropped-observer", text: "barrier" });
  await within(h.host.notified.promise, "notification barrier");
  assertEvent(
    await h.cell.observe(ObserveMode.yieldAfter(0)),
    yielded(collector("client", "survives active cancellation")),
  );
  const termination = h.cell.terminate();
  h.events.end();
  assertEvent(await termination, terminated(collector("client")));
  await h.cell.done;
});

Deno.test("49 a dropped pending observer preserves the frontier for the next observation", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000));
  h.events.trySend({ type: "yieldRequested" });
  assert.equal((await h.cell.initial).type, "yielded");
  const drop = new AbortController();
  const dropped = h.cell.observe(ObserveMode.pendingFrontier, { signal: drop.signal });
  await assert.rejects(h.cell.observe(ObserveMode.pendingFrontier), { kind: "busy" });
  drop.abort();
  await assert.rejects(dropped);
  h.events.trySend(content("before frontier"));
  h.events.trySend({ type: "toolCall", id: "tool-1", name: { name: "echo" }, kind: "function", input: {} });
  h.events.trySend({ type: "pending" });
  h.events.trySend({ type: "notify", callId: "after-dropped-pending", text: "barrier" });
  await within(h.host.notified.promise, "notification barrier");
  assertEvent(await h.cell.observe(ObserveMode.pendingFrontier), {
    type: "pending",
    content: collector("client", "before frontier"),
    pendingToolCallIds: ["tool-1"],
  });
  assert.deepEqual(h.controls, []);
  const termination = h.cell.terminate();
  h.events.end();
  assertEvent(await termination, terminated(collector("client")));
  await h.cell.done;
});

// ---------------------------------------------------------------------------------------------
// 53a–53d

Deno.test("53a termination completes at Result without end-of-stream and the actor ends", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000));
  h.events.trySend(content("partial"));
  const termination = h.cell.terminate();
  h.events.trySend({ type: "result", storedValueWrites: new Map([["k", "v"]]), errorText: "lost" });
  const expected = terminated(collector("client", "partial"));
  assertEvent(await within(termination, "termination"), expected);
  assertEvent(await h.cell.initial, expected);
  await within(h.cell.done, "actor ends without end-of-stream");
  assert.deepEqual(h.host.committedWrites, []);
  assert.deepEqual(h.controls, ["terminate"]);
  assert.equal(h.host.closedCalls, 1);
});

Deno.test("53a termination completes when the runtime reports the isolate stopped", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000));
  const termination = h.cell.terminate();
  h.events.end({ kind: "heapLimit", limitMb: 16 });
  assertEvent(await termination, terminated(collector("client")));
  assertEvent(await h.cell.initial, terminated(collector("client")));
  await h.cell.done;
});

Deno.test("53b pendingToolCallIds lists issued calls whose result was not consumed, in issue order", async () => {
  const h = spawn(() => ObserveMode.pendingFrontier);
  h.events.trySend({ type: "toolCall", id: "tool-1", name: { name: "a" }, kind: "function" });
  h.events.trySend({
    type: "toolCall",
    id: "tool-2",
    name: { name: "b", namespace: "ns" },
    kind: "freeform",
  });
  h.events.trySend({ type: "toolResultConsumed", id: "tool-1" });
  h.events.trySend({ type: "pending" });
  assertEvent(await h.cell.initial, {
    type: "pending",
    content: collector("client"),
    pendingToolCallIds: ["tool-2"],
  });
  const termination = h.cell.terminate();
  h.events.end();
  await termination;
  await h.cell.done;
  assert.deepEqual(
    h.host.toolSignals.map((s) => s.aborted),
    [false, true],
    "only the unconsumed call is cancelled",
  );
});

Deno.test("53c an isolate exit at the heap limit completes with the heap-limit text and applies no writes", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000));
  h.events.trySend(content("before"));
  h.events.end({ kind: "heapLimit", limitMb: 16 });
  assertEvent(
    await h.cell.initial,
    completed(
      collector("client", "before"),
      0,
      "exec runtime ended unexpectedly: cell heap limit of 16 MiB reached",
    ),
  );
  assert.equal(h.host.committedWrites.length, 1);
  assert.equal(h.host.committedWrites[0].size, 0);
  await h.cell.done;
});

Deno.test("53d with an actor: the blocked 600-byte send completes once the actor takes the first", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000), { mode: "server", bytes: 1024 });
  assert.equal(h.events.trySend(content("a".repeat(600))), true);
  const second = h.events.send(content("b".repeat(600)));
  assert.equal(h.events.waitingSends, 1);
  assert.equal(await within(second, "actor takes the first item"), true);
  h.events.trySend({ type: "yieldRequested" });
  assertEvent(await h.cell.initial, yielded(collector("server", "a".repeat(600), "b".repeat(600))));
  h.events.end();
  await h.cell.done;
});

// ---------------------------------------------------------------------------------------------
// Rules A1–A10, one test per bullet

Deno.test("A1 a deadline that passes while events are queued yields without them; they carry over", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(100));
  h.events.trySend(content("late"));
  h.clock.advance(100);
  assertEvent(await h.cell.initial, yielded(collector("client")));
  h.events.trySend({ type: "notify", callId: "c", text: "barrier" });
  await h.host.notified.promise;
  assertEvent(await h.cell.observe(ObserveMode.yieldAfter(0)), yielded(collector("client", "late")));
  const t = h.cell.terminate();
  h.events.end();
  await t;
  await h.cell.done;
});

Deno.test("A1 a termination request beats a deadline that passed at the same time", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(100));
  h.events.trySend(content("x"));
  h.clock.advance(100);
  const termination = h.cell.terminate();
  h.events.end();
  assertEvent(await h.cell.initial, terminated(collector("client", "x")));
  assertEvent(await termination, terminated(collector("client", "x")));
  await h.cell.done;
  assert.equal(h.clock.timers, 0, "the yield timer was cleared");
});

Deno.test("A1 runtime events are handled before a new observe command", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(0));
  await h.cell.initial;
  h.events.trySend(content("first"));
  const observed = h.cell.observe(ObserveMode.yieldAfter(0));
  assertEvent(await observed, yielded(collector("client", "first")));
  const t = h.cell.terminate();
  h.events.end();
  await t;
  await h.cell.done;
});

Deno.test("A2 YieldAfter(0) returns only already-processed content although events are queued", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000));
  h.events.trySend(content("processed"));
  h.events.trySend({ type: "notify", callId: "c", text: "barrier" });
  await h.host.notified.promise;
  h.events.trySend(content("queued"));
  h.clock.advance(60_000);
  assertEvent(await h.cell.initial, yielded(collector("client", "processed")));
  const t = h.cell.terminate();
  h.events.end();
  assertEvent(await t, terminated(collector("client", "queued")));
  await h.cell.done;
});

Deno.test("A2 the yield signal yields like the deadline and leaves the cell running", async () => {
  const h = spawn((signal) => ObserveMode.yieldAfter(60_000, signal));
  h.events.trySend(content("so far"));
  h.events.trySend({ type: "notify", callId: "c", text: "barrier" });
  await h.host.notified.promise;
  h.yieldSignal.abort();
  assertEvent(await h.cell.initial, yielded(collector("client", "so far")));
  h.events.trySend({ type: "result", storedValueWrites: new Map([["k", "1"]]) });
  h.events.end();
  assertEvent(await h.cell.observe(ObserveMode.yieldAfter(60_000)), completed(collector("client")));
  await h.cell.done;
});

Deno.test("A3 Server mode: a dropped observer leaves the media budget, counters and notice position in place", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000), { mode: "server" });
  h.events.trySend({ type: "yieldRequested" });
  await h.cell.initial;
  const big: OutputItem = { type: "image", imageUrl: "i".repeat(SERVER_IMAGE_BYTES), detail: "high" };
  const drop = new AbortController();
  const dropped = h.cell.observe(ObserveMode.yieldAfter(60_000), { signal: drop.signal });
  assert.ok(await h.events.send({ type: "contentItem", item: big }));
  assert.ok(
    await h.events.send({ type: "contentItem", item: { type: "image", imageUrl: "excess", detail: "auto" } }),
  );
  assert.ok(await h.events.send({ type: "notify", callId: "c", text: "barrier" }));
  await h.host.notified.promise;
  drop.abort();
  await assert.rejects(dropped);
  assert.ok(await h.events.send(content("after")));
  const items = (await h.cell.observe(ObserveMode.yieldAfter(0))).content.render();
  assert.equal(items[0], big);
  assert.deepEqual(items.slice(1), [
    textItem(
      "[Code Mode session output limit reached: omitted 0 text bytes; discarded 0 text segments, 1 images, 0 audio items]",
    ),
    textItem("after"),
  ]);
  const t = h.cell.terminate();
  h.events.end();
  await t;
  await h.cell.done;
});

Deno.test("A4 in pauseUntilResumed a PendingFrontier without a retained frontier resumes the runtime", async () => {
  // The fake runtime runs to its next frontier only when it is resumed.
  const h = spawn(() => ObserveMode.pendingFrontier);
  const runtime: PausingRuntime = new PausingRuntime(h, () => {
    h.events.trySend(content("step"));
    runtime.pending();
  });
  runtime.pending();
  assertEvent(await runtime.received(h.cell.initial), {
    type: "pending",
    content: collector("client"),
    pendingToolCallIds: [],
  });
  assert.deepEqual(h.controls, []);
  const next = runtime.observe(ObserveMode.pendingFrontier);
  assertEvent(await next, { type: "pending", content: collector("client", "step"), pendingToolCallIds: [] });
  assert.deepEqual(h.controls, ["resume"]);
  const t = h.cell.terminate();
  h.events.end();
  await t;
  await h.cell.done;
});

Deno.test("A5 on Result notifications are drained and tool calls cancelled before the commit, which applies the writes", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000));
  h.events.trySend({
    type: "toolCall",
    id: "tool-1",
    name: { name: "t" },
    kind: "function",
    input: { a: 1 },
  });
  h.events.trySend({ type: "notify", callId: "call-1", text: "hello" });
  h.events.trySend({ type: "result", storedValueWrites: new Map([["k", "1"]]), errorText: "boom" });
  assertEvent(await h.cell.initial, completed(collector("client"), 0, "boom"));
  assert.deepEqual(h.host.log, ["tool tool-1", "notify call-1", "commit"]);
  assert.ok(h.host.toolSignals[0].aborted);
  assert.deepEqual(h.host.committedWrites, [new Map([["k", "1"]])]);
  h.events.end();
  await h.cell.done;
});

Deno.test("A5 the unanswered tool calls are cancelled newest first, at a Result and at a termination", async () => {
  for (const end of ["result", "terminate"] as const) {
    const h = spawn(() => ObserveMode.yieldAfter(60_000));
    for (const id of ["tool-1", "tool-2", "tool-3"]) {
      h.events.trySend({ type: "toolCall", id, name: { name: "t" }, kind: "function" });
    }
    h.events.trySend({ type: "notify", callId: "c", text: "barrier" });
    await h.host.notified.promise;
    const order: number[] = [];
    h.host.toolSignals.forEach((signal, i) => signal.addEventListener("abort", () => order.push(i + 1)));
    const t = end === "terminate" ? h.cell.terminate() : undefined;
    h.events.trySend({ type: "result", storedValueWrites: new Map() });
    await (t ?? h.cell.initial);
    h.events.end();
    await h.cell.done;
    assert.deepEqual(order, [3, 2, 1], end);
  }
});

Deno.test("A5 Server mode: a committed completion with an error ends with the Script error item", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000), { mode: "server" });
  h.events.trySend(content("before"));
  h.events.trySend({ type: "result", storedValueWrites: new Map(), errorText: "boom" });
  assertEvent(
    await h.cell.initial,
    completed(collector("server", "before", "Script error:\nboom"), 0, "boom"),
  );
  h.events.end();
  await h.cell.done;
});

Deno.test("A6 a completion delivered directly has resultBufferedFor 0; a buffered one measures until delivery", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(0));
  await h.cell.initial;
  h.events.trySend({ type: "result", storedValueWrites: new Map() });
  h.events.end();
  await h.cell.done;
  h.clock.advance(2_500);
  assertEvent(await h.cell.observe(ObserveMode.yieldAfter(60_000)), completed(collector("client"), 2_500));
  await assert.rejects(h.cell.observe(ObserveMode.yieldAfter(0)), { kind: "closed" });
  await assert.rejects(h.cell.terminate(), { kind: "closed" });
});

Deno.test("A7 terminating a cell whose completion is buffered returns that completion", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(0));
  await h.cell.initial;
  h.events.trySend(content("out"));
  h.events.trySend({ type: "result", storedValueWrites: new Map([["k", "v"]]) });
  await within(h.host.commitStarted.promise, "commit");
  const first = h.cell.terminate();
  await assert.rejects(h.cell.terminate(), { kind: "alreadyTerminating" });
  assertEvent(await first, completed(collector("client", "out")));
  assert.equal(h.host.committedWrites.length, 1, "the committed writes stay committed");
  await within(h.cell.done, "actor ends without end-of-stream");
});

Deno.test("A8 an observation during termination fails busy and the attached observer gets the same outcome", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000));
  h.events.trySend(content("kept"));
  const termination = h.cell.terminate();
  await assert.rejects(h.cell.observe(ObserveMode.yieldAfter(0)), { kind: "busy" });
  h.events.trySend(content("drained"));
  h.events.end();
  const expected = terminated(collector("client", "kept", "drained"));
  assertEvent(await termination, expected);
  assertEvent(await h.cell.initial, expected);
  await h.cell.done;
  await assert.rejects(h.cell.terminate(), { kind: "alreadyTerminating" });
});

Deno.test("A8 tool calls are cancelled at termination and the runtime is told to stop", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000));
  h.events.trySend({ type: "toolCall", id: "tool-1", name: { name: "t" }, kind: "function" });
  h.events.trySend({ type: "notify", callId: "c", text: "barrier" });
  await h.host.notified.promise;
  const t = h.cell.terminate();
  h.events.trySend({ type: "result", storedValueWrites: new Map() });
  await t;
  await h.cell.done;
  assert.ok(h.host.toolSignals[0].aborted);
  assert.deepEqual(h.controls, ["terminate"]);
});

Deno.test("A9 a runtime restart ends the cell with the restart text and calls the handler once", async () => {
  const reasons: string[] = [];
  const h = spawn(() => ObserveMode.yieldAfter(60_000), { failureHandler: (r) => reasons.push(r) });
  h.events.trySend(content("so far"));
  h.events.end({ kind: "restart", stoppedCellId: "2" });
  assertEvent(
    await h.cell.initial,
    completed(
      collector("client", "so far"),
      0,
      "exec runtime ended unexpectedly: the session runtime was restarted to stop cell 2",
    ),
  );
  await h.cell.done;
  assert.deepEqual(reasons, ["code-mode V8 runtime thread ended unexpectedly"]);
  assert.equal(endReasonText({ kind: "default" }), "exec runtime ended unexpectedly");
});

Deno.test("A10 ThreadPanicked with a handler reports the panic once and completes with the default text", async () => {
  const reasons: string[] = [];
  const h = spawn(() => ObserveMode.yieldAfter(60_000), { failureHandler: (r) => reasons.push(r) });
  h.events.trySend({ type: "threadPanicked" });
  h.events.end();
  assertEvent(await h.cell.initial, completed(collector("client"), 0, "exec runtime ended unexpectedly"));
  await h.cell.done;
  assert.deepEqual(reasons, ["code-mode V8 runtime thread panicked"]);
});

Deno.test("a dropped initial observation consumes nothing and the next observation receives the completion", async () => {
  const events = new RuntimeEventChannel();
  const host = new TestHost();
  const clock = new FakeClock();
  const drop = new AbortController();
  const cell = startCellActor({
    port: host,
    onClosed: () => host.closed(),
    events,
    mode: "client",
    clock,
    initialObserve: { mode: ObserveMode.yieldAfter(60_000), signal: drop.signal },
  });
  drop.abort();
  await assert.rejects(cell.initial);
  events.trySend(content("kept"));
  events.trySend({ type: "result", storedValueWrites: new Map() });
  events.end();
  await cell.done;
  clock.advance(7);
  assertEvent(await cell.observe(ObserveMode.pendingFrontier), completed(collector("client", "kept"), 7));
  assert.equal(host.closedCalls, 1);
});

// ---------------------------------------------------------------------------------------------
// The first observation's yield time counts from the cell's start (issue 25 item 5)

/** Resolves once the actor has handled every event sent before it (a notification as a barrier). */
async function barrier(h: Harness, label: string): Promise<void> {
  h.events.trySend({ type: "notify", callId: "c", text: label });
  while (!h.host.notifications.includes(label)) await new Promise((r) => setTimeout(r, 0));
}

/** Whether a promise has settled, after the actor handled everything sent so far. */
async function settledYet(h: Harness, promise: Promise<unknown>, label: string): Promise<boolean> {
  let settled = false;
  void promise.then(() => settled = true, () => settled = true);
  await barrier(h, label);
  return settled;
}

Deno.test("start grace: the first observation's yield time counts from the cell's started event", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(100, undefined, 10_000));
  h.clock.advance(5_000); // the runtime is still creating the cell's Worker
  assert.equal(await settledYet(h, h.cell.initial, "b1"), false);
  h.events.trySend({ type: "started" });
  h.events.trySend(content("first"));
  await barrier(h, "b2");
  h.clock.advance(99);
  assert.equal(await settledYet(h, h.cell.initial, "b3"), false);
  h.clock.advance(1);
  assertEvent(await h.cell.initial, yielded(collector("client", "first")));
  const t = h.cell.terminate();
  h.events.end();
  await t;
  await h.cell.done;
});

Deno.test("start grace: a cell that never starts yields grace + yield time after the observation began", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(100, undefined, 10_000));
  h.clock.advance(10_099);
  assert.equal(await settledYet(h, h.cell.initial, "b1"), false);
  h.clock.advance(1);
  assertEvent(await h.cell.initial, yielded(collector("client")));
  const t = h.cell.terminate();
  h.events.end();
  await t;
  await h.cell.done;
});

Deno.test("start grace: only the first started event counts (the runtime's, then the cell's own)", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(100, undefined, 10_000));
  h.events.trySend({ type: "started" });
  await barrier(h, "b1");
  h.clock.advance(60);
  h.events.trySend({ type: "started" });
  h.events.trySend(content("out"));
  assert.equal(await settledYet(h, h.cell.initial, "b2"), false);
  h.clock.advance(40);
  assertEvent(await h.cell.initial, yielded(collector("client", "out")));
  const t = h.cell.terminate();
  h.events.end();
  await t;
  await h.cell.done;
});

Deno.test("start grace: the yield signal and a completion still end the observation before the start", async () => {
  const h = spawn((signal) => ObserveMode.yieldAfter(100, signal, 10_000));
  h.yieldSignal.abort();
  assertEvent(await h.cell.initial, yielded(collector("client")));
  const t = h.cell.terminate();
  h.events.end();
  await t;
  await h.cell.done;
  const done = spawn(() => ObserveMode.yieldAfter(100, undefined, 10_000));
  done.events.trySend({ type: "result", storedValueWrites: new Map() });
  done.events.end();
  assertEvent(await done.cell.initial, completed(collector("client"), 0));
  await done.cell.done;
});

Deno.test("without start grace the yield time counts from the observation's start, started or not", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(100));
  h.clock.advance(100);
  assertEvent(await h.cell.initial, yielded(collector("client")));
  const t = h.cell.terminate();
  h.events.end();
  await t;
  await h.cell.done;
});

Deno.test("serialOutcomes: a yield's later tool calls and notifications reach the port only once the yield is written, in order", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000), { serialOutcomes: true });
  h.events.trySend({ type: "notify", callId: "c", text: "before" });
  h.events.trySend(content("a"));
  h.events.trySend({ type: "yieldRequested" });
  h.events.trySend({ type: "toolCall", id: "tool-1", name: { name: "t" }, kind: "function" });
  h.events.trySend({ type: "notify", callId: "c", text: "after" });
  const first = await h.cell.initial;
  assert.equal(first.type, "yielded");
  assert.ok(first.type === "yielded" && first.written, "the yield carries its written callback");
  // Every event has been handled; only what came before the yield reached the port.
  const second = await h.cell.observe(ObserveMode.yieldAfter(0));
  assert.equal(second.type, "yielded");
  assert.deepEqual(second.content.render(), []);
  assert.deepEqual(h.host.log, ["notify c"]);
  assert.deepEqual(h.host.notifications, ["before"]);
  first.written!();
  await Promise.resolve();
  await Promise.resolve();
  assert.deepEqual(h.host.log, ["notify c", "tool tool-1", "notify c"]);
  assert.deepEqual(h.host.notifications, ["before", "after"]);
  const t = h.cell.terminate();
  h.events.trySend({ type: "result", storedValueWrites: new Map() });
  await t;
  h.events.end();
  await h.cell.done;
});

Deno.test("serialOutcomes: a held tool call the cell no longer needs is never made; an unwritten yield releases after SERIAL_HOLD_MS", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000), { serialOutcomes: true });
  h.events.trySend({ type: "yieldRequested" });
  h.events.trySend({ type: "toolCall", id: "tool-1", name: { name: "t" }, kind: "function" });
  h.events.trySend({ type: "notify", callId: "c", text: "late" });
  const first = await h.cell.initial;
  assert.equal(first.type, "yielded");
  await h.cell.observe(ObserveMode.yieldAfter(0));
  assert.deepEqual(h.host.log, []);
  h.clock.advance(SERIAL_HOLD_MS);
  await Promise.resolve();
  await Promise.resolve();
  assert.deepEqual(h.host.log, ["tool tool-1", "notify c"]);

  // A second cell: completed before its yield was written, its held call is cancelled unmade.
  const g = spawn(() => ObserveMode.yieldAfter(60_000), { serialOutcomes: true });
  g.events.trySend({ type: "yieldRequested" });
  g.events.trySend({ type: "toolCall", id: "tool-9", name: { name: "t" }, kind: "function" });
  g.events.trySend({ type: "result", storedValueWrites: new Map() });
  const yieldedFirst = await g.cell.initial;
  await g.host.commitStarted.promise;
  (yieldedFirst as { written?: () => void }).written!();
  assert.equal((await g.cell.observe(ObserveMode.yieldAfter(60_000))).type, "completed");
  g.events.end();
  await g.cell.done;
  assert.deepEqual(g.host.log, ["commit"]);
  h.events.end();
  await h.cell.terminate().catch(() => {});
  await h.cell.done;
});

Deno.test("yield_control() with no observer attached is ignored: the next observation waits for the next yield or the end (as Codex's host)", async () => {
  const h = spawn(() => ObserveMode.yieldAfter(60_000));
  h.events.trySend(content("1"));
  h.events.trySend({ type: "yieldRequested" });
  assertEvent(await h.cell.initial, yielded(collector("client", "1")));
  // Between observations: output, then a yield nobody observes.
  h.events.trySend(content("2"));
  h.events.trySend({ type: "yieldRequested" });
  h.events.trySend({ type: "notify", callId: "c", text: "barrier" });
  await within(h.host.notified.promise, "both events handled");
  let settled = false;
  const next = h.cell.observe(ObserveMode.yieldAfter(60_000)).finally(() => settled = true);
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(settled, false, "the unobserved yield does not end the next observation");
  h.events.trySend(content("3"));
  h.events.trySend({ type: "result", storedValueWrites: new Map() });
  assertEvent(await next, completed(collector("client", "2", "3")));
  h.events.end();
  await h.cell.done;
});

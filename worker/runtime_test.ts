/**
 * Unit tests of the session runtime's main thread ({@link Runtime}) in this process: fake cell
 * Workers that speak the cell protocol (`cell_protocol.ts`), a manual clock, and frames in and out
 * through memory. The real cell isolate and the real process are covered by the host's tests.
 */
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import type { MessagePort } from "node:worker_threads";
import { encodeFrame, FrameDecoder } from "../proto/frame_codec.ts";
import { MIB } from "../proto/bytes.ts";
import { createWorkerCodec, type HostToWorker, type WorkerToHost } from "../proto/worker_codec.ts";
import { DEFAULT_MAX_FRAME_BYTES } from "./cell_events.ts";
import {
  CELL_BUSY,
  CELL_PROGRESS,
  CELL_RESULT,
  type CellControl,
  type CellOutput,
  type CellStart,
  CREDIT_ACKED,
  CREDIT_EVENTS,
  CREDIT_GENERATION,
  CREDIT_STOP,
} from "./cell_protocol.ts";
import { type CellWorkerThread, RETIRE_AFTER_CELLS, Runtime, type RuntimeInput } from "./runtime.ts";
import type { Clock } from "../proto/clock.ts";

const codec = createWorkerCodec();

/** A clock whose time moves only when a test advances it. */
class ManualClock implements Clock {
  #now = 0;
  #next = 1;
  #timers = new Map<number, { at: number; callback: () => void }>();
  now(): number {
    return this.#now;
  }
  setTimeout(callback: () => void, ms: number): number {
    const id = this.#next++;
    this.#timers.set(id, { at: this.#now + ms, callback });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.#timers.delete(handle as number);
  }
  /** Runs every timer due within `ms`, in time order, then sets the time `ms` later. */
  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      let first: [number, { at: number; callback: () => void }] | undefined;
      for (const entry of this.#timers) {
        if (entry[1].at <= end && (!first || entry[1].at < first[1].at)) first = entry;
      }
      if (!first) break;
      this.#timers.delete(first[0]);
      this.#now = Math.max(this.#now, first[1].at);
      first[1].callback();
    }
    this.#now = end;
  }
}

/** Host frames fed by the test; `read` waits for them like a pipe. */
class Pipe implements RuntimeInput {
  #chunks: Uint8Array[] = [];
  #ended = false;
  #wake: (() => void) | undefined;
  push(bytes: Uint8Array): void {
    this.#chunks.push(bytes);
    this.#wake?.();
  }
  send(message: HostToWorker, maxFrameBytes = DEFAULT_MAX_FRAME_BYTES): void {
    this.push(encodeFrame(codec.encodeHostToWorker(message), maxFrameBytes));
  }
  end(): void {
    this.#ended = true;
    this.#wake?.();
  }
  async read(buffer: Uint8Array): Promise<number | null> {
    while (this.#chunks.length === 0) {
      if (this.#ended) return null;
      await new Promise<void>((resolve) => this.#wake = resolve);
      this.#wake = undefined;
    }
    const chunk = this.#chunks[0];
    const n = Math.min(chunk.length, buffer.length);
    buffer.set(chunk.subarray(0, n));
    if (n === chunk.length) this.#chunks.shift();
    else this.#chunks[0] = chunk.subarray(n);
    return n;
  }
}

/** A cell Worker that speaks the cell protocol, driven by the test. */
class FakeCell extends EventEmitter {
  readonly posted: CellControl[] = [];
  start: CellStart | undefined;
  port: MessagePort | undefined;
  words: Int32Array | undefined;
  terminated = false;
  /** Whether it answers `ping` and `stop` (a parked isolate answers nothing). */
  answers = true;

  constructor(readonly heapMb: number, boot: boolean) {
    super();
    if (boot) this.boot();
  }

  boot(): void {
    setTimeout(() => this.emit("message", { t: "ready" }), 0);
  }

  postMessage(message: CellControl): void {
    this.posted.push(message);
    if (message.t === "warm") {
      this.port = message.port as unknown as MessagePort;
      this.words = message.words;
      (message.control as unknown as MessagePort).on("message", (start: CellStart) => this.start = start);
      this.port.postMessage({ t: "warmed" });
    } else if (this.answers && message.t === "ping") this.output({ t: "pong" });
    else if (this.answers && message.t === "stop") this.output({ t: "stopped" });
  }

  /** Posts an output on the cell's output port, as a cell without the stream words does. */
  output(output: CellOutput): void {
    this.port!.postMessage(output);
  }

  terminate(): Promise<number> {
    this.terminated = true;
    setTimeout(() => this.emit("exit", 1), 0);
    return Promise.resolve(1);
  }
}

/** A runtime with fake cells, a manual clock and its frames decoded. */
function harness(
  options: { boot?: boolean; cpu?: () => number; rss?: () => number; retireAfterCells?: number } = {},
) {
  const clock = new ManualClock();
  const input = new Pipe();
  const cells: FakeCell[] = [];
  const frames: WorkerToHost[] = [];
  const decoder = new FrameDecoder(1 << 30);
  const exits: number[] = [];
  const runtime = new Runtime({
    input,
    output: (bytes) => {
      for (const frame of decoder.push(bytes)) frames.push(codec.decodeWorkerToHost(frame));
    },
    exit: (code) => void exits.push(code),
    clock,
    createWorker: (heapMb) => {
      const cell = new FakeCell(heapMb, options.boot ?? true);
      cells.push(cell);
      return cell as unknown as CellWorkerThread;
    },
    cpuMicros: options.cpu ?? (() => 0),
    rssBytes: options.rss ?? (() => 0),
    retireAfterCells: options.retireAfterCells,
  });
  /** The events of one cell, without their cell ID. */
  const events = (cellId: string) =>
    frames.filter((f) => f.cellEvent?.cellId === cellId).map((f) => {
      const { cellId: _, ...event } = f.cellEvent!;
      return event;
    });
  return { runtime, clock, input, cells, frames, events, exits };
}

/** Lets ports, immediates and timers of the real event loop run. */
async function settle(turns = 5): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise((resolve) => setTimeout(resolve, 0));
}

const CONFIGURE: NonNullable<HostToWorker["configure"]> = {
  sessionId: "s",
  outputTruncation: 1,
  cellHeapLimitMb: 64,
  maxMessageBytes: 4 * MIB,
  maxStoredValueBytes: 2 * MIB,
};

/** Configures the runtime and starts cell `cellId` on its spare; returns the spare. */
async function started(h: ReturnType<typeof harness>, cellId = "1"): Promise<FakeCell> {
  h.runtime.receive({ message: "configure", configure: CONFIGURE });
  await settle();
  h.runtime.receive({
    message: "startCell",
    startCell: { cellId, source: "text(1)", tools: [], storeVersion: 0 },
  });
  await settle();
  const cell = h.cells.find((c) => c.start?.cellId === cellId);
  assert.ok(cell, "the cell was started");
  return cell;
}

/** The `started` the runtime sends as it hands a cell to its Worker (the host's yield time starts then). */
const STARTED = { event: "started", started: {} };

Deno.test("Configure: the limits reach the cell's start; a raised maxFrameBytes reaches the runtime and its cells", async () => {
  const h = harness();
  assert.equal(h.runtime.config.maxFrameBytes, DEFAULT_MAX_FRAME_BYTES);
  h.runtime.receive({ message: "configure", configure: { ...CONFIGURE, maxFrameBytes: 200 * MIB } });
  assert.equal(h.runtime.config.maxFrameBytes, 200 * MIB);
  const cell = await started(h);
  assert.equal(cell.heapMb, 64);
  const start = cell.start!;
  assert.equal(start.maxFrameBytes, 200 * MIB);
  assert.equal(start.maxMessageBytes, 4 * MIB);
  assert.equal(start.maxStoredValueBytes, 2 * MIB);
  // Client mode: one message is the threshold of the reduced forms.
  assert.equal(start.credit?.trimTextOver, 4 * MIB);
  assert.equal(start.credit?.dropMediaOver, 4 * MIB);
});

Deno.test("Configure: the runtime reads host frames up to the configured limit, not the default", async () => {
  const h = harness();
  const running = h.runtime.run();
  h.input.send({ configure: { ...CONFIGURE, maxMessageBytes: 100 * MIB, maxFrameBytes: 101 * MIB } });
  // A stored value whose frame is over the default limit.
  const big = "x".repeat(DEFAULT_MAX_FRAME_BYTES);
  h.input.send(
    { storeUpdate: { version: 1, reset: true, entries: [{ key: "k", valueJson: big }] } },
    101 * MIB,
  );
  h.input.send({ startCell: { cellId: "1", source: "", tools: [], storeVersion: 1 } });
  for (let i = 0; i < 200 && !h.cells.some((c) => c.start) && h.exits.length === 0; i++) await settle();
  assert.deepEqual(h.frames.filter((f) => f.runtimeFault), []);
  assert.equal(h.cells.find((c) => c.start)?.start?.store[0][1].length, big.length);
  h.input.end();
  await running;
  assert.deepEqual(h.exits, [0]);
});

Deno.test("Configure: a frame over a lowered limit is a RuntimeFault and exit code 1", async () => {
  const h = harness();
  const running = h.runtime.run();
  h.input.send({ configure: { ...CONFIGURE, maxFrameBytes: 1_000 } });
  h.input.send({ storeUpdate: { version: 1, entries: [{ key: "k", valueJson: "x".repeat(2_000) }] } });
  h.input.end();
  await running;
  assert.match(h.frames.at(-1)?.runtimeFault?.detail ?? "", /host frame stream failed: .*exceeds 1000 bytes/);
  assert.deepEqual(h.exits, [1]);
});

Deno.test("A Credit adds its events to the cell's acknowledged count and wakes it", async () => {
  const h = harness();
  const cell = await started(h);
  const generation = Atomics.load(cell.words!, CREDIT_GENERATION);
  h.runtime.receive({ message: "credit", credit: { cellId: "1", events: 3, bytes: 0 } });
  h.runtime.receive({ message: "credit", credit: { cellId: "1", events: 2, bytes: 0 } });
  assert.equal(Atomics.load(cell.words!, CREDIT_ACKED), 5);
  assert.equal(Atomics.load(cell.words!, CREDIT_GENERATION), generation + 2);
  // A Credit for a cell the runtime does not run changes nothing.
  h.runtime.receive({ message: "credit", credit: { cellId: "9", events: 1, bytes: 0 } });
  assert.equal(Atomics.load(cell.words!, CREDIT_ACKED), 5);
});

Deno.test("Outputs posted by a cell become its events; its result ends it with a normal exit, its Worker kept", async () => {
  const h = harness();
  const cell = await started(h);
  cell.output({ t: "started" });
  cell.output({ t: "text", text: "hi", n: 2 });
  cell.output({ t: "result", writes: [["k", "1"]] });
  await settle();
  assert.deepEqual(h.events("1"), [
    STARTED, // the runtime's, as it hands the cell to its Worker
    { event: "started", started: {} }, // the cell's own, with its first output
    { event: "contentItem", contentItem: { item: "text", text: "hi" } },
    { event: "storedWrites", storedWrites: { entries: [{ key: "k", valueJson: "1" }] } },
    { event: "result", result: {} },
    { event: "exited", exited: { reason: "normal" } },
  ]);
  assert.ok(!cell.terminated, "the completed cell's Worker is kept for the next cell (SPEC §5.1)");
});

/** Runs cell `cellId` to its result on `cell` and lets the Worker confirm its fresh realm. */
async function complete(cell: FakeCell, heap = MIB): Promise<void> {
  cell.output({ t: "result", writes: [] });
  await settle();
  cell.port!.postMessage({ t: "recycled", heap });
  await settle();
}

/** Sends the StartCell of cell `cellId`. */
function sendStart(h: ReturnType<typeof harness>, cellId: string): void {
  h.runtime.receive({ message: "startCell", startCell: { cellId, source: "", tools: [], storeVersion: 0 } });
}

/** Cell 1 posts its result, and cell 2's StartCell follows before its Worker confirms a fresh realm. */
async function resultThenStart(h: ReturnType<typeof harness>): Promise<FakeCell> {
  const cell = await started(h);
  cell.output({ t: "result", writes: [] });
  await settle();
  sendStart(h, "2");
  await settle();
  return cell;
}

/** Starts cell `cellId` on whatever Worker the runtime picks. */
async function startNext(h: ReturnType<typeof harness>, cellId: string): Promise<FakeCell> {
  sendStart(h, cellId);
  await settle();
  const cell = h.cells.find((c) => c.start?.cellId === cellId);
  assert.ok(cell, `cell ${cellId} was started`);
  return cell;
}

Deno.test("Reuse: a completed cell's Worker runs the next cell once it confirms its fresh realm; no new Worker", async () => {
  const h = harness();
  const cell = await started(h);
  Atomics.add(cell.words!, CREDIT_EVENTS, 3);
  h.runtime.receive({ message: "credit", credit: { cellId: "1", events: 2, bytes: 0 } });
  await complete(cell);
  const next = await startNext(h, "2");
  assert.equal(next, cell, "the same Worker");
  assert.equal(h.cells.length, 1, "no Worker was created");
  // Its credit words start from zero for the new cell; the last cell's Credit is ignored.
  assert.equal(Atomics.load(cell.words!, CREDIT_ACKED), 0);
  assert.equal(Atomics.load(cell.words!, CREDIT_EVENTS), 0);
  h.runtime.receive({ message: "credit", credit: { cellId: "1", events: 1, bytes: 0 } });
  assert.equal(Atomics.load(cell.words!, CREDIT_ACKED), 0);
  await complete(cell);
  assert.equal(await startNext(h, "3"), cell);
  assert.deepEqual(h.events("2").map((e) => e.event), ["started", "result", "exited"]);
});

Deno.test("Reuse: a start that arrives before the Worker confirms its realm waits for it", async () => {
  const h = harness();
  const cell = await resultThenStart(h);
  assert.equal(cell.start?.cellId, "1", "not handed over before `recycled`");
  cell.port!.postMessage({ t: "recycled", heap: MIB });
  await settle();
  assert.equal(cell.start?.cellId, "2");
  assert.equal(h.cells.length, 1);
});

Deno.test("A spare is created beside a running cell only in a session that has run cells concurrently", async () => {
  const h = harness();
  const first = await started(h);
  h.clock.advance(1_000);
  await settle();
  assert.equal(h.cells.length, 1, "a sequential session: the running cell's Worker is the next one");
  sendStart(h, "2"); // concurrent: a Worker of its own
  await settle();
  assert.equal(h.cells.length, 2);
  await complete(first);
  sendStart(h, "3"); // takes the reused Worker while cell 2 runs: none ready now
  await settle();
  assert.equal(h.cells.length, 2);
  h.clock.advance(1_000);
  await settle();
  assert.equal(h.cells.length, 3, "a spare beside the running cells");
});

Deno.test("Reuse: a start that overtakes the note of the last cell's result still gets that cell's Worker", async () => {
  const h = harness();
  const cell = await started(h);
  cell.output({ t: "result", writes: [] }); // queued on the port, not yet read by the runtime
  sendStart(h, "2");
  await settle();
  cell.port!.postMessage({ t: "recycled", heap: MIB });
  await settle();
  assert.equal(cell.start?.cellId, "2");
  assert.equal(h.cells.length, 1, "no Worker was created");
});

Deno.test("Reuse: a Configure that comes before the runtime read its last cell's result (a handover) creates no Worker; that cell's Worker is the spare", async () => {
  const h = harness();
  const cell = await started(h);
  cell.output({ t: "result", writes: [] }); // written to the host; not yet read by the runtime
  h.runtime.receive({ message: "configure", configure: { ...CONFIGURE, sessionId: "t" } });
  await settle();
  await complete(cell);
  h.clock.advance(1_000);
  await settle();
  assert.equal(h.cells.length, 1, "no Worker was created");
  assert.ok(!cell.terminated, "the recycled Worker was kept");
  assert.equal(await startNext(h, "2"), cell);
});

Deno.test("Reuse: a start that comes before the note of a result already written waits for it", async () => {
  const h = harness();
  const cell = await started(h);
  Atomics.store(cell.words!, CELL_RESULT, 1); // written to the host; the note is not posted yet
  sendStart(h, "2");
  await settle();
  assert.equal(h.cells.length, 1, "no Worker created while the note is on its way");
  await complete(cell);
  assert.equal(cell.start?.cellId, "2");
  assert.equal(Atomics.load(cell.words!, CELL_RESULT), 0, "reset for the new cell");
  assert.equal(h.cells.length, 1);
});

Deno.test("Reuse: a StopCell that comes while a start waits for the last result's note stops that cell before it begins", async () => {
  const h = harness();
  const cell = await started(h);
  Atomics.store(cell.words!, CELL_RESULT, 1); // written to the host; the note is not posted yet
  sendStart(h, "2");
  await settle();
  h.runtime.receive({ message: "stopCell", stopCell: { cellId: "2" } });
  await complete(cell);
  await settle();
  assert.deepEqual(h.events("2").map((e) => e.event), ["exited"], "confirmed at once, never started");
  assert.notEqual(cell.start?.cellId, "2", "the stopped cell was never handed to a Worker");
  assert.ok(await startNext(h, "3"), "the session goes on");
});

Deno.test("Reuse: messages for a cell carry its ID, so a reused Worker can tell them from the last cell's", async () => {
  const h = harness();
  const cell = await started(h);
  h.runtime.receive({
    message: "toolResult",
    toolResult: { cellId: "1", runtimeToolCallId: "tool-1", outputJson: "2" },
  });
  assert.deepEqual(cell.posted.at(-1), { t: "toolResult", id: "tool-1", json: "2", cell: "1" });
  await complete(cell);
  await startNext(h, "2");
  // A late result for cell 1 is not posted to the Worker that now runs cell 2.
  const posted = cell.posted.length;
  h.runtime.receive({
    message: "toolResult",
    toolResult: { cellId: "1", runtimeToolCallId: "tool-1", outputJson: "3" },
  });
  assert.equal(cell.posted.length, posted);
});

Deno.test("Reuse: never after a stopped cell; its Worker is ended and a new one runs the next cell", async () => {
  const h = harness();
  const cell = await started(h);
  h.runtime.receive({ message: "stopCell", stopCell: { cellId: "1" } });
  await settle();
  assert.ok(cell.terminated);
  h.clock.advance(0);
  await settle();
  const next = await startNext(h, "2");
  assert.notEqual(next, cell);
});

Deno.test("Reuse: never after a heap-limit exit or a fault of the Worker", async () => {
  for (const code of ["ERR_WORKER_OUT_OF_MEMORY", "ERR_OTHER"]) {
    const h = harness();
    const cell = await started(h);
    cell.emit("error", Object.assign(new Error("boom"), { code }));
    cell.emit("exit", 1);
    h.clock.advance(0);
    await settle();
    assert.equal(h.events("1").at(-1)?.exited?.reason, code === "ERR_OTHER" ? "fault" : "heap_limit");
    h.clock.advance(0);
    await settle();
    assert.notEqual(await startNext(h, "2"), cell, code);
  }
});

Deno.test("Reuse: a Worker that dies while building its fresh realm ends the cell waiting for it, which never starts after that", async () => {
  const h = harness();
  const cell = await resultThenStart(h);
  cell.emit("error", Object.assign(new Error("boom"), { code: "ERR_WORKER_OUT_OF_MEMORY" }));
  cell.emit("exit", 1);
  h.clock.advance(0);
  await settle();
  assert.equal(h.events("2").at(-1)?.exited?.reason, "heap_limit");
  h.clock.advance(1_000);
  await settle();
  assert.equal(
    h.cells.find((c) => c.start?.cellId === "2"),
    undefined,
    "cell 2 was not started after its exit",
  );
  assert.ok(await startNext(h, "3"), "the session goes on");
});

Deno.test("Reuse: a Worker is retired over its heap share, after RETIRE_AFTER_CELLS cells, or when it never confirms", async () => {
  // Over the heap bound (half of the 64 MiB limit): ended; a new spare follows.
  {
    const h = harness();
    const cell = await started(h);
    await complete(cell, 40 * MIB);
    assert.ok(cell.terminated);
    h.clock.advance(0);
    await settle();
    assert.notEqual(await startNext(h, "2"), cell);
  }
  // Cells served (the default is RETIRE_AFTER_CELLS).
  {
    assert.ok(RETIRE_AFTER_CELLS > 1);
    const h = harness({ retireAfterCells: 3 });
    const cell = await started(h);
    for (let i = 2; i <= 3; i++) {
      await complete(cell);
      assert.equal(await startNext(h, String(i)), cell);
    }
    await complete(cell);
    assert.ok(cell.terminated, "retired after 3 cells");
  }
  // No `recycled` (a microtask of its cell never ends): the waiting start gets a new Worker.
  {
    const h = harness();
    const cell = await resultThenStart(h);
    h.clock.advance(1_000);
    await settle();
    assert.ok(cell.terminated);
    const next = h.cells.find((c) => c.start?.cellId === "2");
    assert.ok(next && next !== cell);
  }
});

Deno.test("StopCell of a started cell sets its stop word, then asks it to stop; its answer ends it", async () => {
  const h = harness();
  const cell = await started(h);
  h.runtime.receive({ message: "stopCell", stopCell: { cellId: "1" } });
  assert.equal(Atomics.load(cell.words!, CREDIT_STOP), 1);
  assert.deepEqual(cell.posted.at(-1), { t: "stop", cell: "1" });
  await settle();
  assert.deepEqual(h.events("1"), [STARTED, { event: "exited", exited: { reason: "normal" } }]);
});

Deno.test("A ping after a StopCell is answered once the stopped cell confirms, when the cell was not running code", async () => {
  const h = harness();
  const cell = await started(h);
  // Its thread has not taken the stop yet (on a loaded machine: it waits for a core).
  cell.answers = false;
  h.runtime.receive({ message: "stopCell", stopCell: { cellId: "1" } });
  h.runtime.receive({ message: "ping", ping: { seq: 7 } });
  await settle(2);
  assert.deepEqual(h.frames.filter((f) => f.pong), [], "held while the cell has not confirmed");
  cell.output({ t: "stopped" });
  for (let i = 0; i < 20 && !h.frames.some((f) => f.pong); i++) await settle(1);
  const exited = h.frames.findIndex((f) => f.cellEvent?.exited);
  const pong = h.frames.findIndex((f) => f.pong);
  assert.ok(exited >= 0 && pong > exited, "the cell's exit comes before the answer");
  assert.equal(h.frames[pong].pong!.seq, 7);
});

Deno.test("A ping after a StopCell is answered at once for a cell running code, and within the bound for a silent one", async () => {
  const h = harness();
  const cell = await started(h);
  cell.answers = false;
  Atomics.store(cell.words!, CELL_BUSY, 1); // inside a stretch of its code
  h.runtime.receive({ message: "stopCell", stopCell: { cellId: "1" } });
  h.runtime.receive({ message: "ping", ping: { seq: 1 } });
  await Promise.resolve(); // the frame's flush
  assert.equal(h.frames.filter((f) => f.pong).length, 1, "answered at once");

  const g = harness();
  const silent = await started(g);
  silent.answers = false;
  g.runtime.receive({ message: "stopCell", stopCell: { cellId: "1" } });
  const asked = performance.now();
  g.runtime.receive({ message: "ping", ping: { seq: 2 } });
  while (!g.frames.some((f) => f.pong)) await new Promise((resolve) => setTimeout(resolve, 1));
  const waited = performance.now() - asked;
  assert.ok(waited >= 30, `held ${waited} ms`);
  assert.ok(!g.frames.some((f) => f.cellEvent?.exited), "the cell is left to the host");
});

Deno.test("StopCell of a cell whose Worker still boots is confirmed at once; the Worker is discarded", async () => {
  const h = harness({ boot: false });
  h.runtime.receive({ message: "configure", configure: CONFIGURE });
  h.runtime.receive({
    message: "startCell",
    startCell: { cellId: "1", source: "", tools: [], storeVersion: 0 },
  });
  h.runtime.receive({ message: "stopCell", stopCell: { cellId: "1" } });
  await settle();
  assert.deepEqual(h.events("1"), [{ event: "exited", exited: { reason: "normal" } }]);
  const cell = h.cells[0];
  assert.ok(cell.terminated);
  cell.boot();
  await settle();
  assert.equal(cell.start, undefined, "the discarded Worker never got the start");
});

Deno.test("Watchdog: a silent cell that answers no ping while the process uses no CPU ends as heap_limit", async () => {
  const h = harness();
  const cell = await started(h);
  cell.answers = false;
  h.clock.advance(500);
  assert.ok(cell.posted.some((m) => m.t === "ping"), "pinged after 500 ms of silence");
  h.clock.advance(750);
  assert.deepEqual(h.events("1"), [STARTED], "not yet: the parked window is 1 s");
  h.clock.advance(500);
  await settle();
  assert.deepEqual(h.events("1"), [STARTED, { event: "exited", exited: { reason: "heap_limit" } }]);
});

Deno.test("Watchdog: a silent cell while the process is busy (a spinning cell) is left running", async () => {
  let cpu = 0;
  const h = harness({ cpu: () => cpu });
  const cell = await started(h);
  cell.answers = false;
  for (let i = 0; i < 20; i++) {
    cpu += 250_000; // a whole core
    h.clock.advance(250);
  }
  await settle();
  assert.deepEqual(h.events("1"), [STARTED]);
});

Deno.test("Watchdog: a cell that writes its own outputs (CELL_PROGRESS) or waits for credit is never pinged", async () => {
  const h = harness();
  const cell = await started(h);
  cell.answers = false;
  for (let i = 0; i < 8; i++) {
    Atomics.add(cell.words!, CELL_PROGRESS, 1);
    h.clock.advance(250);
  }
  // Over its event credit (128 by default): its helper call waits for the host.
  Atomics.store(cell.words!, CREDIT_EVENTS, 200);
  h.clock.advance(3_000);
  assert.ok(!cell.posted.some((m) => m.t === "ping"));
  await settle();
  assert.deepEqual(h.events("1"), [STARTED]);
});

Deno.test("Watchdog: a silent cell while the process is over its memory budget ends as heap_limit", async () => {
  let cpu = 0;
  // A busy process (never "parked"): only the memory budget can end the cell.
  const h = harness({ cpu: () => cpu += 1e9, rss: () => 10_000 * MIB });
  const cell = await started(h);
  cell.answers = false;
  h.clock.advance(500); // pinged
  h.clock.advance(500); // no answer for 500 ms, resident memory far over 2 × 64 MiB + 512 MiB
  await settle();
  assert.deepEqual(h.events("1"), [STARTED, { event: "exited", exited: { reason: "heap_limit" } }]);
});

Deno.test("Shutdown and input EOF exit with 0 once the frames are out; garbage input is a RuntimeFault", async () => {
  for (const end of ["shutdown", "eof", "garbage"] as const) {
    const h = harness();
    const running = h.runtime.run();
    if (end === "shutdown") h.input.send({ shutdown: {} });
    else if (end === "eof") h.input.end();
    else h.input.push(encodeFrame(new Uint8Array([0xff, 0xff, 0xff]), 16));
    await running;
    assert.deepEqual(h.exits, [end === "garbage" ? 1 : 0], end);
    if (end === "garbage") assert.match(h.frames[0].runtimeFault!.detail, /^host frame stream failed: /);
  }
});

Deno.test("An unconfigured runtime creates its spare after 50 ms idle (the warm pool); Configure at once", () => {
  const h = harness();
  void h.runtime.run();
  h.clock.advance(49);
  assert.equal(h.cells.length, 0);
  h.clock.advance(1);
  assert.equal(h.cells.length, 1);
  assert.equal(h.cells[0].heapMb, 1024);
  // Another heap limit replaces the spare.
  h.runtime.receive({ message: "configure", configure: CONFIGURE });
  assert.equal(h.cells.length, 2);
  assert.ok(h.cells[0].terminated);
  assert.equal(h.cells[1].heapMb, 64);
  h.input.end();
});

Deno.test("A cell's start is reported when it is handed to its Worker, not when its StartCell arrives (the host's yield time starts then)", async () => {
  const h = harness({ boot: false });
  h.runtime.receive({ message: "configure", configure: CONFIGURE });
  h.runtime.receive({
    message: "startCell",
    startCell: { cellId: "1", source: "", tools: [], storeVersion: 0 },
  });
  await settle();
  assert.deepEqual(h.events("1"), [], "its Worker still boots");
  h.cells[0].boot();
  await settle();
  assert.equal(h.cells[0].start?.cellId, "1");
  assert.deepEqual(h.events("1"), [STARTED]);
});

/**
 * The session runtime: the main thread of one permission-restricted Deno subprocess (SPEC §9.3).
 * It holds no authoritative state. It reads `HostToWorker` frames on stdin, runs each cell in its
 * own `node:worker_threads` Worker (SPEC §5.1), and streams `WorkerToHost` frames on stdout.
 *
 * - The first frame is always `Ready`, written by `runtime_entry.ts` before this module loads.
 * - stdin EOF or `Shutdown` ends the process with `Deno.exit()`, even while a cell spins.
 * - Cells write their own frames to stdout (`cell_protocol.ts` item 3); this thread writes its own
 *   (`exited` of a cell that did not finish, faults) under the same stream lock, never waiting for
 *   it: a frame that finds the lock taken is retried a millisecond later.
 * - Every output a cell posted before it stopped is accounted for: the cell's output port is
 *   drained with `receiveMessageOnPort` before its Worker is terminated.
 * - Output credit (SPEC §8.10): the cell keeps the account of its unacknowledged outputs itself; a
 *   host `Credit{events: k}` only adds `k` to the cell's `CREDIT_ACKED` word and wakes the cell. A
 *   stop request sets the cell's stop word and wakes it first.
 *
 * This file is bundled into `worker/dist/runtime_main.js` (`deno task bundle`).
 *
 * @module
 */
import process from "node:process";
import { setImmediate } from "node:timers";
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from "node:worker_threads";
import { encodeFrame, FrameDecoder } from "../proto/frame_codec.ts";
import { LINE_END, MAX_FRAME_BYTES, tryLock, unlock, wireCellEvents, writeAllSync } from "./cell_events.ts";
import { collectGarbage } from "./collect_garbage.ts";
import { MAX_MEDIA_BYTES, MAX_TEXT_BYTES } from "../proto/bytes.ts";
import {
  createWorkerCodec,
  type HostToWorker,
  type WireCellEvent,
  type WorkerToHost,
} from "../proto/worker_codec.ts";
import {
  CELL_DOORBELL,
  CELL_PROGRESS,
  CELL_WORDS,
  type CellControl,
  type CellOutput,
  type CellStart,
  CREDIT_ACKED,
  CREDIT_BYTES,
  CREDIT_EVENTS,
  CREDIT_GENERATION,
  CREDIT_STOP,
  SINK_LOCK,
  SINK_WORDS,
  type WrittenOutput,
} from "./cell_protocol.ts";
const codec = createWorkerCodec();
const cellUrl = new URL("./cell.js", import.meta.url);
/** The port type of the cell protocol (the web one); ours are `node:worker_threads` ports. */
type WebPort = globalThis.MessagePort;

interface Config {
  heapMb: number;
  maxMessageBytes: number;
  maxStoredValueBytes: number;
  server: boolean;
  creditEvents: number;
  creditBytes: number;
}

let config: Config = {
  heapMb: 1024,
  maxMessageBytes: 67_108_864,
  maxStoredValueBytes: 67_108_864,
  server: false,
  creditEvents: 128,
  creditBytes: 2_097_152,
};

const store = new Map<string, string>();

// ---- stdout: one frame stream, shared with the cells --------------------------------------------

/** The stream words shared with every cell isolate (`SINK_*`, `cell_events.ts`). */
const sink = new Int32Array(new SharedArrayBuffer(4 * SINK_WORDS));
/** This thread's lock ID; cell Workers get 2, 3, … */
const MAIN_LOCK_ID = 1;
let nextSinkId = MAIN_LOCK_ID + 1;

/** Frames waiting for the stream lock, in order. */
let pending: Uint8Array[] = [];
let flushQueued = false;
let retry: ReturnType<typeof setTimeout> | undefined;
/** Frames are joined into one write up to this size; larger ones are written on their own. */
const JOIN_BYTES = 256 * 1024;
/** How long a frame waits before this thread looks at the lock again. */
const RETRY_MS = 1;

function send(message: WorkerToHost): void {
  message.lineEnd = LINE_END;
  enqueue(encodeFrame(codec.encodeWorkerToHost(message), MAX_FRAME_BYTES));
}

function enqueue(frame: Uint8Array): void {
  pending.push(frame);
  if (flushQueued) return;
  flushQueued = true;
  queueMicrotask(flush);
}

/**
 * Writes the pending frames in order, small ones joined, if the stream lock is free; else looks
 * again in {@link RETRY_MS} (a cell is writing). The write blocks this thread only while the host
 * is not reading: it always reads.
 */
function flush(): void {
  flushQueued = false;
  if (pending.length === 0) return;
  if (!tryLock(sink, MAIN_LOCK_ID)) {
    retry ??= setTimeout(() => {
      retry = undefined;
      flush();
    }, RETRY_MS);
    return;
  }
  const frames = pending;
  pending = [];
  try {
    let group: Uint8Array[] = [];
    let groupBytes = 0;
    const emit = () => {
      if (group.length === 0) return;
      const bytes = group.length === 1 ? group[0] : new Uint8Array(groupBytes);
      if (group.length > 1) {
        let offset = 0;
        for (const frame of group) {
          bytes.set(frame, offset);
          offset += frame.length;
        }
      }
      group = [];
      groupBytes = 0;
      writeAllSync(bytes);
    };
    for (const frame of frames) {
      if (groupBytes + frame.length > JOIN_BYTES) emit();
      group.push(frame);
      groupBytes += frame.length;
    }
    emit();
  } catch {
    Deno.exit(1); // stdout is gone: so is the host
  } finally {
    unlock(sink, MAIN_LOCK_ID);
  }
}

function sendCellEvent(event: WireCellEvent): void {
  send({ cellEvent: event });
}

/** How long an exit waits for a cell's write in progress before it exits anyway. */
const EXIT_FLUSH_MS = 1_000;

async function exitAfterFlush(code: number): Promise<never> {
  const deadline = performance.now() + EXIT_FLUSH_MS;
  flush();
  while (pending.length > 0 && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    flush();
  }
  Deno.exit(code);
}

// ---- cell workers -----------------------------------------------------------------------------

/** What arrives on a cell's output port: outputs posted whole, or notes of written ones. */
type PortOutput = CellOutput | WrittenOutput | (CellOutput | WrittenOutput)[];

interface CellWorker {
  worker: Worker;
  heapMb: number;
  /** Settles once the spare is warmed and parked, or dead. */
  ready: Promise<void>;
  /** Set as `ready` settles: a start then goes out without awaiting it (one turn less). */
  settled: boolean;
  /** Set once the Worker failed or exited before it was used. */
  dead: boolean;
  /** Set once its ports are closed (discarded, or its cell ended): it is never warmed. */
  closed: boolean;
  /** The cell's output port (ours), handed to the Worker with `warm`. */
  output: MessagePort;
  /** Where its `start` is posted (ours), before the doorbell rings. */
  control: MessagePort;
  /** `CREDIT_*` and `CELL_DOORBELL`, shared with the Worker. */
  words: Int32Array;
  /** Its lock ID on the stream words. */
  sinkId: number;
  /** Receives the cell's output; until the cell starts, it waits for `warmed`. */
  onOutput: (output: PortOutput) => void;
}

function createCellWorker(heapMb: number): CellWorker {
  const worker = new Worker(cellUrl, { resourceLimits: { maxOldGenerationSizeMb: heapMb } });
  const output = new MessageChannel();
  const control = new MessageChannel();
  const cell: CellWorker = {
    worker,
    heapMb,
    ready: Promise.resolve(),
    settled: false,
    dead: false,
    closed: false,
    output: output.port1,
    control: control.port1,
    words: new Int32Array(new SharedArrayBuffer(4 * CELL_WORDS)),
    sinkId: nextSinkId++,
    onOutput: () => {},
  };
  output.port1.on("message", (message: PortOutput) => cell.onOutput(message));
  cell.ready = new Promise<void>((settle) => {
    const resolve = () => {
      cell.settled = true;
      settle();
    };
    cell.onOutput = () => resolve(); // `warmed`
    const onMessage = (message: { t?: string }) => {
      if (message?.t !== "ready") return;
      worker.off("message", onMessage);
      if (cell.closed) return; // ended before it booted; its ports can no longer be handed over
      // The first message a Worker receives, and the first port it is handed, cost ~1 ms more
      // than later ones on Deno 2.9.6 (lazy set-up): pay for both here, before a cell waits, and
      // let the spare park on its doorbell (cell_protocol.ts).
      worker.postMessage(
        {
          t: "warm",
          port: output.port2 as unknown as WebPort,
          control: control.port2 as unknown as WebPort,
          words: cell.words,
          sink,
          sinkId: cell.sinkId,
        } satisfies CellControl,
        [output.port2, control.port2],
      );
    };
    worker.on("message", onMessage);
    worker.once("exit", () => {
      cell.dead = true;
      // Ended while writing (terminated, or out of memory): the stream is free again. A frame cut
      // short there breaks the stream, which the host reports as a runtime failure.
      unlock(sink, cell.sinkId);
      if (pending.length > 0) flush();
      resolve();
    });
  });
  worker.on("error", () => {
    cell.dead = true;
  });
  return cell;
}

let spare: CellWorker | undefined;

/** Wakes a parked Worker for good: a thread asleep in `Atomics.wait` ignores `terminate()`. */
function unpark(cell: CellWorker): void {
  Atomics.store(cell.words, CELL_DOORBELL, 2);
  Atomics.notify(cell.words, CELL_DOORBELL);
}

/** Ends a spare that will never run a cell. */
function discard(cell: CellWorker): void {
  unpark(cell);
  cell.closed = true;
  cell.output.close();
  cell.control.close();
  void cell.worker.terminate();
}

function takeCellWorker(): CellWorker {
  const taken = spare && !spare.dead && spare.heapMb === config.heapMb ? spare : undefined;
  if (spare && spare !== taken) discard(spare);
  spare = undefined;
  return taken ?? createCellWorker(config.heapMb);
}

function refillSpare(): void {
  if (!spare) spare = createCellWorker(config.heapMb);
}

interface RunningCell {
  id: string;
  cell: CellWorker;
  /** `result` or `stopped` seen: nothing more comes from the cell. */
  finished: boolean;
  /** `exited` sent to the host. */
  exited: boolean;
  /** The cell wrote its own `exited` (with its result). */
  exitWritten: boolean;
  /** The start message was posted to the cell's Worker. */
  started: boolean;
  /** `performance.now()` of the last message from the cell. */
  lastSeen: number;
  /** An unanswered ping: when it was sent and the process CPU time (µs) then. */
  ping?: { at: number; cpu: number };
  exitReason: "normal" | "heap_limit" | "fault";
  exitDetail?: string;
  /** `CELL_PROGRESS` as last seen by the watchdog. */
  progress: number;
}

const cells = new Map<string, RunningCell>();

function forward(running: RunningCell, output: PortOutput): void {
  if (Array.isArray(output)) {
    for (const one of output) forward(running, one);
    return;
  }
  const final = output.t === "result" || output.t === "stopped";
  if (final && running.finished) return;
  if (!("w" in output)) {
    for (const event of wireCellEvents(running.id, output)) sendCellEvent(event);
  }
  if (final) {
    running.finished = true;
    // The cell wrote its `exited` with its result.
    if ("w" in output) running.exitWritten = true;
    // Nothing more can come from the cell: its exit is reported now, not after `terminate()`
    // settles (0.2–1.5 ms later, more while the host and its client use both cores), since a
    // harness returns a cell's result only once its CellClosed arrives (SPEC §10.11).
    reportExit(running);
    endCellSoon(running);
  }
}

/** A host `Credit`: the cell's next `events` counted outputs are acknowledged (it settles them). */
function credit(cellId: string, events: number): void {
  const running = cells.get(cellId);
  if (!running) return;
  Atomics.add(running.cell.words, CREDIT_ACKED, events);
  wake(running);
}

function wake(running: RunningCell): void {
  Atomics.add(running.cell.words, CREDIT_GENERATION, 1);
  Atomics.notify(running.cell.words, CREDIT_GENERATION);
}

/** Whether the cell is over its credit, i.e. its helper call is (or is about to be) waiting. */
function overCredit(running: RunningCell): boolean {
  const words = running.cell.words;
  const unacked = (Atomics.load(words, CREDIT_EVENTS) - Atomics.load(words, CREDIT_ACKED)) | 0;
  return unacked > config.creditEvents ||
    (unacked > 0 && Atomics.load(words, CREDIT_BYTES) > config.creditBytes);
}

function drain(running: RunningCell): void {
  for (;;) {
    const next = receiveMessageOnPort(running.cell.output);
    if (!next) return;
    forward(running, next.message as PortOutput);
  }
}

function reportExit(running: RunningCell): void {
  if (running.exited) return;
  drain(running);
  if (running.exited) return; // the drain met the cell's result
  running.exited = true;
  cells.delete(running.id);
  running.cell.closed = true;
  running.cell.output.close();
  if (running.exitWritten) return;
  sendCellEvent({
    cellId: running.id,
    exited: running.exitDetail === undefined
      ? { reason: running.exitReason }
      : { reason: running.exitReason, detail: running.exitDetail },
  });
}

/**
 * Ends a finished cell's Worker once the frames just queued are on their way: `terminate()` costs
 * its caller ~0.1 ms, which the cell's result would otherwise wait for.
 */
function endCellSoon(running: RunningCell): void {
  setImmediate(() => void endCell(running));
}

async function endCell(running: RunningCell): Promise<void> {
  if (!running.started) unpark(running.cell);
  running.cell.closed = true;
  running.cell.control.close();
  await running.cell.worker.terminate().catch(() => {});
  reportExit(running);
  scheduleSpare();
}

/**
 * Creates the next spare after a turn of the event loop. On Deno 2.9.6 `new Worker()` blocks the
 * calling thread for ~30 ms, in which this thread neither reads host frames (a start, a stop,
 * credit) nor writes its own (cells still write theirs); between cells the time is usually free
 * (a model thinks for seconds between cells).
 */
function scheduleSpare(): void {
  setTimeout(refillSpare, 0);
}

async function startCell(start: NonNullable<HostToWorker["startCell"]>): Promise<void> {
  const cell = takeCellWorker();
  const running: RunningCell = {
    id: start.cellId,
    cell,
    finished: false,
    exited: false,
    exitWritten: false,
    started: false,
    lastSeen: performance.now(),
    exitReason: "normal",
    progress: 0,
  };
  cells.set(start.cellId, running);
  cell.worker.on("error", (error: Error & { code?: string }) => {
    if (error?.code === "ERR_WORKER_OUT_OF_MEMORY") running.exitReason = "heap_limit";
    else {
      running.exitReason = "fault";
      running.exitDetail = String(error?.message ?? error);
    }
  });
  cell.worker.once("exit", () => {
    // The error event (if any) precedes exit; give the port a last chance to deliver.
    setTimeout(() => reportExit(running), 0);
  });
  if (!cell.settled) await cell.ready;
  if (cell.dead) return;
  cell.onOutput = (output) => {
    running.lastSeen = performance.now();
    running.ping = undefined;
    forward(running, output);
  };
  // Stopped before it started: stopCell has already reported and disposed of it.
  if (running.finished) return;
  const message: CellStart = {
    t: "start",
    cellId: start.cellId,
    source: start.source ?? "",
    tools: (start.tools ?? []).map((t) => ({ name: t.globalName, description: t.description ?? "" })),
    store: [...store],
    maxStoredValueBytes: config.maxStoredValueBytes,
    maxMessageBytes: config.maxMessageBytes,
    credit: {
      maxEvents: config.creditEvents,
      maxBytes: config.creditBytes,
      // Server: what the collector could keep of a text or an image; Client: one message.
      trimTextOver: config.server ? 2 * MAX_TEXT_BYTES : config.maxMessageBytes,
      keepTextBytes: MAX_TEXT_BYTES,
      dropMediaOver: config.server ? MAX_MEDIA_BYTES : config.maxMessageBytes,
    },
  };
  // The parked spare takes the start from its control port as soon as the doorbell rings.
  cell.control.postMessage(message);
  Atomics.store(cell.words, CELL_DOORBELL, 1);
  Atomics.notify(cell.words, CELL_DOORBELL);
  running.started = true;
  running.lastSeen = performance.now();
  armWatchdog();
}

// ---- heap-limit watchdog --------------------------------------------------------------------------
//
// On Deno 2.9.6 a Worker that reaches its heap limit does not always end with
// ERR_WORKER_OUT_OF_MEMORY (measured on a loaded 2-core machine: a few per cent of limit hits).
// Two other outcomes were seen, and this watchdog turns both into the heap-limit exit:
// - the thread *parks*: no CPU, no report, forever;
// - the limit is *lifted*: the cell keeps allocating and the process grows by ~200 MiB/s.
// A cell that has been silent for a while is pinged; an idle cell answers at once. A cell that does
// not answer is running code, parked, or over its limit:
// - parked: this whole process used almost no CPU for a second while the ping went unanswered;
// - over its limit: the process's resident memory exceeds twice the heap limits of its running
//   cells plus a fixed allowance, while the cell does not answer.
// A cell spinning in synchronous code within its heap is neither; Terminate stops it.

const SILENCE_MS = 500;
const PARKED_WINDOW_MS = 1_000;
const PARKED_CPU_SHARE = 0.02;
/** Resident memory of the runtime itself, beyond its cells' heaps, before the limit check bites. */
const RSS_ALLOWANCE_MB = 512;
let watchdog: ReturnType<typeof setInterval> | undefined;

function cpuMicros(): number {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
}

function armWatchdog(): void {
  watchdog ??= setInterval(checkParkedCells, 250);
}

function checkParkedCells(): void {
  const now = performance.now();
  let active = 0;
  for (const running of cells.values()) if (running.started && !running.finished) active++;
  const rssMb = Deno.memoryUsage().rss / 1_048_576;
  const overBudget = rssMb > active * config.heapMb * 2 + RSS_ALLOWANCE_MB;
  for (const running of cells.values()) {
    if (!running.started || running.finished) continue;
    const progress = Atomics.load(running.cell.words, CELL_PROGRESS);
    if (
      progress !== running.progress || overCredit(running) ||
      Atomics.load(sink, SINK_LOCK) === running.cell.sinkId
    ) {
      running.progress = progress;
      // New output, waiting for the host's credit, or for the host to take a frame: not parked.
      running.lastSeen = now;
      running.ping = undefined;
      continue;
    }
    if (overBudget && running.ping && now - running.ping.at >= SILENCE_MS) {
      running.finished = true;
      running.exitReason = "heap_limit";
      void endCell(running);
      continue;
    }
    if (!running.ping) {
      if (now - running.lastSeen < SILENCE_MS) continue;
      running.ping = { at: now, cpu: cpuMicros() };
      running.cell.worker.postMessage({ t: "ping" } satisfies CellControl);
      continue;
    }
    const elapsedMs = now - running.ping.at;
    if (elapsedMs < PARKED_WINDOW_MS) continue;
    const cpuMs = (cpuMicros() - running.ping.cpu) / 1000;
    if (cpuMs < elapsedMs * PARKED_CPU_SHARE) {
      running.finished = true;
      running.exitReason = "heap_limit";
      void endCell(running);
    } else {
      running.ping = undefined; // busy (spinning or another cell's work): look again later
    }
  }
  if (active === 0 && watchdog !== undefined) {
    clearInterval(watchdog);
    watchdog = undefined;
  }
}

function control(cellId: string, message: CellControl): void {
  const running = cells.get(cellId);
  if (!running || running.finished) return;
  running.cell.worker.postMessage(message);
}

let stopDelayMs = 0;

function stopCell(cellId: string): void {
  const running = cells.get(cellId);
  if (!running || running.finished) return;
  if (!running.started) {
    // Its Worker may still be booting: confirm the stop now (the host would otherwise restart the
    // whole runtime after cooperativeStopMs) and dispose of the Worker unused.
    running.finished = true;
    reportExit(running);
    discard(running.cell);
    scheduleSpare();
    return;
  }
  Atomics.store(running.cell.words, CREDIT_STOP, 1);
  wake(running);
  const stop = () => {
    if (running.finished) return;
    drain(running);
    running.cell.worker.postMessage({ t: "stop" } satisfies CellControl);
  };
  if (stopDelayMs > 0) setTimeout(stop, stopDelayMs);
  else stop();
}

/** Fault injection for the host's tests (the host sends TestHook only through an internal API). */
function testHook(hook: NonNullable<HostToWorker["testHook"]>): void {
  switch (hook.action) {
    case "garbageFrame":
      enqueue(encodeFrame(new Uint8Array([0xff, 0xff, 0xff]), MAX_FRAME_BYTES));
      return;
    case "exhaustMainHeap": {
      const hoard: unknown[] = [];
      for (;;) hoard.push(new Array(1_000_000).fill(hoard.length));
    }
    case "delayStopMs":
      stopDelayMs = hook.delayStopMs ?? 0;
      return;
    case "faultCell": {
      const running = cells.get(hook.faultCell ?? "");
      if (!running || running.finished) return;
      running.finished = true;
      running.exitReason = "fault";
      running.exitDetail = "test hook: cell bootstrap fault";
      void endCell(running);
      return;
    }
    case "runtimeFault":
      send({ runtimeFault: { detail: hook.runtimeFault ?? "test hook" } });
      void exitAfterFlush(1);
      return;
    case "blockMainMs": {
      const until = performance.now() + (hook.blockMainMs ?? 0);
      while (performance.now() < until) { /* busy, as `new Worker()` keeps this thread */ }
      return;
    }
  }
}

async function shutdown(): Promise<never> {
  for (const running of cells.values()) drain(running);
  return await exitAfterFlush(0);
}

// ---- main loop --------------------------------------------------------------------------------

function dispatch(message: HostToWorker): void {
  switch (message.message) {
    case "configure": {
      const c = message.configure!;
      config = {
        heapMb: c.cellHeapLimitMb || config.heapMb,
        maxMessageBytes: c.maxMessageBytes || config.maxMessageBytes,
        maxStoredValueBytes: c.maxStoredValueBytes || config.maxStoredValueBytes,
        server: c.outputTruncation === 2,
        creditEvents: c.outputEventCredit || config.creditEvents,
        creditBytes: c.outputByteCredit || config.creditBytes,
      };
      clearTimeout(prewarming);
      if (spare && spare.heapMb !== config.heapMb) {
        discard(spare);
        spare = undefined;
      }
      prepareFirstSpare();
      return;
    }
    case "storeUpdate": {
      const u = message.storeUpdate!;
      if (u.reset) store.clear();
      for (const entry of u.entries ?? []) store.set(entry.key, entry.valueJson ?? "null");
      return;
    }
    case "startCell":
      void startCell(message.startCell!).catch((error) => {
        send({ runtimeFault: { detail: `failed to start cell: ${error}` } });
        void exitAfterFlush(1);
      });
      return;
    case "toolResult": {
      const r = message.toolResult!;
      const result: CellControl = r.errorMessage !== undefined
        ? { t: "toolResult", id: r.runtimeToolCallId, error: r.errorMessage }
        : { t: "toolResult", id: r.runtimeToolCallId, json: r.outputJson ?? "null" };
      return control(r.cellId, result);
    }
    case "stopCell":
      return stopCell(message.stopCell!.cellId);
    case "credit":
      return credit(message.credit!.cellId, message.credit!.events ?? 0);
    case "shutdown":
      void shutdown();
      return;
    case "testHook":
      return testHook(message.testHook!);
    default:
      // Control (the pauseUntilResumed test mode) is not implemented by this runtime.
      return;
  }
}

/**
 * Collects the runtime's own start-up garbage, then creates its first spare: no other isolate of
 * the process creates a context meanwhile (see collect_garbage.ts).
 */
function prepareFirstSpare(): void {
  if (spare) return;
  collectGarbage();
  refillSpare();
}

/**
 * A runtime the host spawned for a session is configured at once. One that is still unconfigured
 * after PREWARM_IDLE_MS waits in the warm pool: it creates its spare now, with the default cell
 * heap limit (the host's default too), so that neither OpenSession nor the session's first Execute
 * waits for a Worker (the first Execute of a session took ~98 ms p50 before, ~8 ms after). A
 * session with another limit replaces it.
 */
const PREWARM_IDLE_MS = 50;
/** The runtime reads host frames in chunks of up to this many bytes. */
const STDIN_CHUNK_BYTES = 65_536;
const prewarming = setTimeout(prepareFirstSpare, PREWARM_IDLE_MS);

// `Ready` has already gone out (runtime_entry.ts).
try {
  // `read()` into one reused buffer, not `Deno.stdin.readable`: no stream machinery per chunk
  // (a pipe round trip ~0.1 ms faster), and frames are copied out of the buffer as they complete.
  const decoder = new FrameDecoder(MAX_FRAME_BYTES);
  const chunk = new Uint8Array(STDIN_CHUNK_BYTES);
  for (;;) {
    const n = await Deno.stdin.read(chunk);
    if (n === null) {
      decoder.finish();
      break;
    }
    for (const frame of decoder.push(chunk.subarray(0, n))) dispatch(codec.decodeHostToWorker(frame));
  }
} catch (error) {
  send({ runtimeFault: { detail: `host frame stream failed: ${error}` } });
  await exitAfterFlush(1);
}
await shutdown();

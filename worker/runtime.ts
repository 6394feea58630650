/**
 * The session runtime: the main thread of one permission-restricted Deno subprocess (SPEC §9.3),
 * as a class with its input (host frames in), output (frames out), clock and cell Workers injected,
 * so that it runs in-process under test (`runtime_test.ts`). `runtime_main.ts` wires it to the
 * process's stdin and stdout. It holds no authoritative state: it reads `HostToWorker` frames, runs
 * each cell in its own `node:worker_threads` Worker (SPEC §5.1), and writes `WorkerToHost` frames.
 *
 * - The first frame is always `Ready`, written by `runtime_entry.ts` before this module loads.
 * - Input EOF or `Shutdown` ends the process (the injected `exit`), even while a cell spins.
 * - Cells write their own frames to stdout (`cell_protocol.ts` item 3); this thread writes its own
 *   (`exited` of a cell that did not finish, faults) under the same stream lock, never waiting for
 *   it: a frame that finds the lock taken is retried a millisecond later.
 * - Every output a cell posted before it stopped is accounted for: the cell's output port is
 *   drained with `receiveMessageOnPort` before its Worker is terminated.
 * - Output credit (SPEC §8.10): the cell keeps the account of its unacknowledged outputs itself; a
 *   host `Credit{events: k}` only adds `k` to the cell's `CREDIT_ACKED` word and wakes the cell. A
 *   stop request sets the cell's stop word and wakes it first.
 * - Frame limit: `Configure.max_frame_bytes` (the host's `maxWorkerFrameBytes`) bounds the frames
 *   this thread reads and writes, and the frames its cells write; until then the host's default.
 *
 * @module
 */
import process from "node:process";
import { setImmediate } from "node:timers";
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from "node:worker_threads";
import { encodeFrame, FrameDecoder } from "../proto/frame_codec.ts";
import { DEFAULT_MAX_FRAME_BYTES, LINE_END, tryLock, unlock, wireCellEvents } from "./cell_events.ts";
import { collectGarbage } from "./collect_garbage.ts";
import { MAX_MEDIA_BYTES, MAX_MESSAGE_BYTES, MAX_TEXT_BYTES, MIB } from "../proto/bytes.ts";
import { type Clock, realClock } from "../proto/clock.ts";
import {
  createWorkerCodec,
  type HostToWorker,
  type WireCellEvent,
  type WorkerToHost,
} from "../proto/worker_codec.ts";
import {
  CELL_DOORBELL,
  CELL_PROGRESS,
  CELL_RESULT,
  CELL_WORDS,
  type CellControl,
  type CellOutput,
  type CellRecycled,
  type CellStart,
  CREDIT_ACKED,
  CREDIT_BYTES,
  CREDIT_EVENTS,
  CREDIT_GENERATION,
  CREDIT_STOP,
  RETIRE_HEAP_BYTES,
  RETIRE_HEAP_SHARE,
  SINK_LOCK,
  SINK_WORDS,
  type WrittenOutput,
} from "./cell_protocol.ts";

const cellUrl = new URL("./cell.js", import.meta.url);
/** The port type of the cell protocol (the web one); ours are `node:worker_threads` ports. */
type WebPort = globalThis.MessagePort;

/** Where host frames come from: `Deno.stdin`, or anything that reads like it. */
export interface RuntimeInput {
  /** Reads into `buffer`; the bytes read, or `null` at EOF. */
  read(buffer: Uint8Array): Promise<number | null>;
}

/** What a cell's thread must offer: the parts of a `node:worker_threads` Worker the runtime uses. */
export type CellThread = Pick<Worker, "on" | "off" | "once" | "postMessage" | "terminate">;

/** Options of a {@link Runtime}. */
export interface RuntimeOptions {
  /** The host's frames (`Deno.stdin`). */
  input: RuntimeInput;
  /**
   * Writes complete frames to the host, all of them, blocking (stdout). It throws once the host
   * is gone. Cells write their own frames to the process's stdout, not through this.
   */
  output: (bytes: Uint8Array) => void;
  /** Ends the process (`Deno.exit`). */
  exit: (code: number) => void;
  /** Default {@link realClock}. */
  clock?: Clock;
  /** Creates a cell's Worker (default: a Worker on `cell.js` next to this module). */
  createWorker?: (heapMb: number) => CellThread;
  /** The process's CPU time, µs (default `process.cpuUsage()`): the watchdog's parked test. */
  cpuMicros?: () => number;
  /** The process's resident memory, bytes (default `Deno.memoryUsage().rss`): its budget test. */
  rssBytes?: () => number;
  /**
   * Whether cells write their frames to the process's stdout themselves (default true). In-process
   * isolation (SPEC §9.8) passes false: the runtime shares its process with the host, so cells post
   * every output to this thread, which writes it through `output`.
   */
  cellsWriteFrames?: boolean;
  /**
   * Whether the runtime collects its start-up garbage before the first spare (default true). In
   * the host's process (in-process isolation) other sessions' cells may be creating contexts at the
   * time, so it passes false (see `collect_garbage.ts`).
   */
  collectGarbage?: boolean;
  /** A cell Worker runs at most this many cells (default {@link RETIRE_AFTER_CELLS}). */
  retireAfterCells?: number;
}

/** The settings a `Configure` frame gives a runtime. */
export interface RuntimeConfig {
  heapMb: number;
  maxMessageBytes: number;
  maxStoredValueBytes: number;
  /** The largest frame read or written (`maxWorkerFrameBytes`). */
  maxFrameBytes: number;
  server: boolean;
  /** The session's door writes outcomes as JSON (`Configure.json_sizes`). */
  jsonSizes: boolean;
  creditEvents: number;
  creditBytes: number;
}

/** The settings of a runtime that has not been configured yet (the host's defaults). */
export const DEFAULT_RUNTIME_CONFIG: Readonly<RuntimeConfig> = Object.freeze({
  heapMb: 1024,
  maxMessageBytes: MAX_MESSAGE_BYTES,
  maxStoredValueBytes: MAX_MESSAGE_BYTES,
  maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
  server: false,
  jsonSizes: false,
  creditEvents: 128,
  creditBytes: 2 * MIB,
});

/** The main thread's lock ID on the stream words; cell Workers get 2, 3, … */
const MAIN_LOCK_ID = 1;
/** Frames are joined into one write up to this size; larger ones are written on their own. */
const JOIN_BYTES = 256 * 1024;
/** How long a frame waits before this thread looks at the lock again. */
const RETRY_MS = 1;
/** How long an exit waits for a cell's write in progress before it exits anyway. */
const EXIT_FLUSH_MS = 1_000;
/** The runtime reads host frames in chunks of up to this many bytes. */
const STDIN_CHUNK_BYTES = 65_536;
/**
 * A runtime the host spawned for a session is configured at once. One that is still unconfigured
 * after PREWARM_IDLE_MS waits in the warm pool: it creates its spare now, with the default cell
 * heap limit (the host's default too), so that neither OpenSession nor the session's first Execute
 * waits for a Worker (the first Execute of a session took ~98 ms p50 before, ~8 ms after). A
 * session with another limit replaces it.
 */
const PREWARM_IDLE_MS = 50;

// ---- Worker reuse (SPEC 1.2 §5.1, cell_protocol.ts item 3a) --------------------------------------

/**
 * A Worker whose cell completed is told to build a fresh realm; one that has not confirmed within
 * this time (a microtask of its cell that never ends) is ended and a new spare created.
 */
const RECYCLE_WAIT_MS = 1_000;
/**
 * A Worker is retired (ended, and a new one created off the critical path) after this many cells:
 * a bound on whatever a realm may leave in its isolate (compiled code, the `Symbol.for` registry).
 * Measured with bench/soak.ts (bench/README.md).
 */
export const RETIRE_AFTER_CELLS = 1_000;
/**
 * In a session that has run cells concurrently, a cell that runs this long with no Worker ready
 * gets a new spare beside it, for the next concurrent cell; a back-to-back cell reuses the running
 * cell's Worker, so a sequential session never pays for one (under load a first cell may take a
 * second, and a spare made then only retired the reused Worker).
 */
const SPARE_WHILE_RUNNING_MS = 1_000;
/** How long a start waits for the note of a result already written (see #startCell). */
const NOTE_WAIT_MS = 50;

// ---- heap-limit watchdog (see Runtime.#checkParkedCells) -----------------------------------------

const WATCHDOG_MS = 250;
const SILENCE_MS = 500;
const PARKED_WINDOW_MS = 1_000;
const PARKED_CPU_SHARE = 0.02;
/** Resident memory of the runtime itself, beyond its cells' heaps, before the limit check bites. */
const RSS_ALLOWANCE_MB = 512;

/** What arrives on a cell's output port: outputs posted whole, or notes of written ones. */
type PortOutput = CellOutput | WrittenOutput | (CellOutput | WrittenOutput)[];

interface CellWorker {
  worker: CellThread;
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
  /** Receives the cell's output; until the cell starts, it waits for `warmed` (or `recycled`). */
  onOutput: (output: PortOutput) => void;
  /** The cell it runs, if any: its error and exit are that cell's. */
  running?: RunningCell;
  /** Cells started on it so far (the retire policy). */
  served: number;
  /** Set when it will run no further cell (retired, or its recycling timed out). */
  retired: boolean;
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
  /** Clock time of the last message from the cell. */
  lastSeen: number;
  /** An unanswered ping: when it was sent and the process CPU time (µs) then. */
  ping?: { at: number; cpu: number };
  exitReason: "normal" | "heap_limit" | "fault";
  exitDetail?: string;
  /** `CELL_PROGRESS` as last seen by the watchdog. */
  progress: number;
  /** A stop was requested: its Worker is never reused. */
  stopRequested: boolean;
  /** Its Worker is kept for the next cell (it completed). */
  reuse: boolean;
  /** Settles when its result's note arrives (a start waits for it, see #startCell). */
  noted?: PromiseWithResolvers<void>;
}

/**
 * One session runtime's main thread: call {@link Runtime.run} once.
 *
 * @example
 * ```ts ignore
 * await new Runtime({ input: Deno.stdin, output: writeAllSync, exit: Deno.exit }).run();
 * ```
 */
export class Runtime {
  readonly #codec = createWorkerCodec();
  readonly #input: RuntimeInput;
  readonly #write: (bytes: Uint8Array) => void;
  readonly #exit: (code: number) => void;
  readonly #clock: Clock;
  readonly #createWorker: (heapMb: number) => CellThread;
  readonly #cpuMicros: () => number;
  readonly #rssBytes: () => number;
  readonly #cellsWriteFrames: boolean;
  readonly #collectGarbage: boolean;
  readonly #retireAfterCells: number;

  #config: RuntimeConfig = { ...DEFAULT_RUNTIME_CONFIG };
  readonly #store = new Map<string, string>();
  #decoder: FrameDecoder | undefined;

  /** The stream words shared with every cell isolate (`SINK_*`, `cell_events.ts`). */
  readonly #sink = new Int32Array(new SharedArrayBuffer(4 * SINK_WORDS));
  #nextSinkId = MAIN_LOCK_ID + 1;
  /** Frames waiting for the stream lock, in order. */
  #pending: Uint8Array[] = [];
  #flushQueued = false;
  #retry: unknown;

  #spare: CellWorker | undefined;
  /** A cell started while another ran: the session runs cells concurrently. */
  #concurrent = false;
  /** Cells whose StartCell waits for the note of the last cell's result (not yet in `#cells`). */
  readonly #startsWaiting = new Set<string>();
  /** Of those, the ones a StopCell named meanwhile. */
  readonly #stopsWhileWaiting = new Set<string>();
  /** The timer of {@link SPARE_WHILE_RUNNING_MS}. */
  #spareWhileRunning: unknown;
  readonly #cells = new Map<string, RunningCell>();
  #watchdog: unknown;
  #prewarming: unknown;
  #exiting = false;

  constructor(options: RuntimeOptions) {
    this.#input = options.input;
    this.#write = options.output;
    this.#exit = options.exit;
    this.#clock = options.clock ?? realClock;
    this.#createWorker = options.createWorker ??
      ((heapMb) => new Worker(cellUrl, { resourceLimits: { maxOldGenerationSizeMb: heapMb } }));
    this.#cpuMicros = options.cpuMicros ?? (() => {
      const usage = process.cpuUsage();
      return usage.user + usage.system;
    });
    this.#rssBytes = options.rssBytes ?? (() => Deno.memoryUsage().rss);
    this.#cellsWriteFrames = options.cellsWriteFrames ?? true;
    this.#collectGarbage = options.collectGarbage ?? true;
    this.#retireAfterCells = options.retireAfterCells ?? RETIRE_AFTER_CELLS;
  }

  /** The settings in force (the last `Configure`'s, or the defaults). */
  get config(): Readonly<RuntimeConfig> {
    return this.#config;
  }

  /**
   * Reads and handles host frames until the input ends, then shuts down: the cells' outputs are
   * drained, the pending frames written, and the process exits with 0. A broken frame stream is a
   * `RuntimeFault` and exit code 1. Arms the prewarm of the first spare.
   */
  async run(): Promise<void> {
    this.#prewarming = this.#clock.setTimeout(() => this.#prepareFirstSpare(), PREWARM_IDLE_MS);
    try {
      // `read()` into one reused buffer, not `Deno.stdin.readable`: no stream machinery per chunk
      // (a pipe round trip ~0.1 ms faster), and frames are copied out of the buffer as they complete.
      const decoder = this.#decoder = new FrameDecoder(this.#config.maxFrameBytes);
      const chunk = new Uint8Array(STDIN_CHUNK_BYTES);
      for (;;) {
        const n = await this.#input.read(chunk);
        if (n === null) {
          decoder.finish();
          break;
        }
        for (const frame of decoder.push(chunk.subarray(0, n))) {
          this.receive(this.#codec.decodeHostToWorker(frame));
          if (this.#exiting) return;
        }
      }
    } catch (error) {
      return await this.fail(`host frame stream failed: ${error}`);
    }
    await this.#shutdown();
  }

  /**
   * Handles one host message.
   *
   * @param message a decoded `HostToWorker`
   */
  receive(message: HostToWorker): void {
    switch (message.message) {
      case "configure":
        return this.#configure(message.configure!);
      case "storeUpdate": {
        const u = message.storeUpdate!;
        if (u.reset) this.#store.clear();
        for (const entry of u.entries ?? []) this.#store.set(entry.key, entry.valueJson ?? "null");
        return;
      }
      case "startCell":
        void this.#startCell(message.startCell!).catch((error) =>
          this.fail(`failed to start cell: ${error}`)
        );
        return;
      case "toolResult": {
        const r = message.toolResult!;
        const result: CellControl = r.errorMessage !== undefined
          ? { t: "toolResult", id: r.runtimeToolCallId, error: r.errorMessage, cell: r.cellId }
          : { t: "toolResult", id: r.runtimeToolCallId, json: r.outputJson ?? "null", cell: r.cellId };
        return this.#postToCell(r.cellId, result);
      }
      case "stopCell":
        return this.#stopCell(message.stopCell!.cellId);
      case "credit":
        return this.#credit(message.credit!.cellId, message.credit!.events ?? 0);
      case "shutdown":
        void this.#shutdown();
        return;
      case "ping":
        // Liveness: answered by this thread at once, whatever the cells do.
        return this.#send({ pong: { seq: message.ping!.seq ?? 0 } });
      default:
        // A message of a newer host that this runtime does not know.
        return;
    }
  }

  /**
   * Reports a `RuntimeFault` with `detail` and exits with code 1 once the frames pending are out.
   *
   * @param detail the fault's text
   */
  fail(detail: string): Promise<void> {
    this.#send({ runtimeFault: { detail } });
    return this.#exitAfterFlush(1);
  }

  /**
   * Writes a complete frame to the host, in order with this thread's own frames and under the
   * stream lock.
   *
   * @param frame the frame's bytes, header included
   */
  protected writeFrame(frame: Uint8Array): void {
    this.#pending.push(frame);
    if (this.#flushQueued) return;
    this.#flushQueued = true;
    queueMicrotask(this.#flush);
  }

  /**
   * Gives up on a cell that did not confirm its stop (in-process isolation has no hard stop, SPEC
   * §9.8): nothing more of it is forwarded, no `exited` is sent (the host has ended the cell), and
   * its Worker is terminated and unreferenced. Deno's `terminate()` does not stop a spinning Worker:
   * it may keep a core busy until the process exits, but it no longer keeps the process alive.
   *
   * @param cellId the cell
   */
  abandonCell(cellId: string): void {
    const running = this.#cells.get(cellId);
    if (!running) return;
    running.finished = true;
    running.exited = true;
    this.#cells.delete(cellId);
    this.#release(running.cell);
    this.#scheduleSpare();
  }

  /** Abandons every cell and the spare (the in-process runtime's end). */
  dispose(): void {
    this.#exiting = true;
    this.#clock.clearTimeout(this.#prewarming);
    for (const id of [...this.#cells.keys()]) this.abandonCell(id);
    if (this.#spare) this.#release(this.#spare);
    this.#spare = undefined;
  }

  #release(cell: CellWorker): void {
    this.#unpark(cell);
    cell.closed = true;
    cell.output.close();
    cell.control.close();
    (cell.worker as { unref?: () => void }).unref?.();
    void cell.worker.terminate().catch(() => {});
  }

  /**
   * Ends a running cell's isolate without its result: the host gets `exited` with `reason`. The
   * heap-limit watchdog ends cells this way.
   *
   * @param cellId the cell
   * @param reason the exit reason
   * @param detail the exit's detail, if any
   */
  protected abortCell(cellId: string, reason: "heap_limit" | "fault", detail?: string): void {
    const running = this.#cells.get(cellId);
    if (!running || running.finished) return;
    this.#abort(running, reason, detail);
  }

  #abort(running: RunningCell, reason: "heap_limit" | "fault", detail?: string): void {
    running.finished = true;
    running.exitReason = reason;
    if (detail !== undefined) running.exitDetail = detail;
    void this.#endCell(running);
  }

  #configure(c: NonNullable<HostToWorker["configure"]>): void {
    const config = this.#config;
    this.#config = {
      heapMb: c.cellHeapLimitMb || config.heapMb,
      maxMessageBytes: c.maxMessageBytes || config.maxMessageBytes,
      maxStoredValueBytes: c.maxStoredValueBytes || config.maxStoredValueBytes,
      maxFrameBytes: c.maxFrameBytes || config.maxFrameBytes,
      server: c.outputTruncation === 2,
      jsonSizes: c.jsonSizes === true,
      creditEvents: c.outputEventCredit || config.creditEvents,
      creditBytes: c.outputByteCredit || config.creditBytes,
    };
    this.#decoder?.setMaxFrameBytes(this.#config.maxFrameBytes);
    this.#clock.clearTimeout(this.#prewarming);
    if (this.#spare && this.#spare.heapMb !== this.#config.heapMb) {
      this.#discard(this.#spare);
      this.#spare = undefined;
    }
    this.#prepareFirstSpare();
  }

  // ---- the frame stream, shared with the cells ---------------------------------------------------

  #send(message: WorkerToHost): void {
    message.lineEnd = LINE_END;
    this.writeFrame(encodeFrame(this.#codec.encodeWorkerToHost(message), this.#config.maxFrameBytes));
  }

  #sendCellEvent(event: WireCellEvent): void {
    this.#send({ cellEvent: event });
  }

  /**
   * Writes the pending frames in order, small ones joined, if the stream lock is free; else looks
   * again in {@link RETRY_MS} (a cell is writing). The write blocks this thread only while the host
   * is not reading: it always reads.
   */
  readonly #flush = (): void => {
    this.#flushQueued = false;
    if (this.#pending.length === 0) return;
    if (!tryLock(this.#sink, MAIN_LOCK_ID)) {
      this.#retry ??= this.#clock.setTimeout(() => {
        this.#retry = undefined;
        this.#flush();
      }, RETRY_MS);
      return;
    }
    const frames = this.#pending;
    this.#pending = [];
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
        this.#write(bytes);
      };
      for (const frame of frames) {
        if (groupBytes + frame.length > JOIN_BYTES) emit();
        group.push(frame);
        groupBytes += frame.length;
      }
      emit();
    } catch {
      this.#exiting = true;
      this.#exit(1); // the output is gone: so is the host
    } finally {
      unlock(this.#sink, MAIN_LOCK_ID);
    }
  };

  async #exitAfterFlush(code: number): Promise<void> {
    if (this.#exiting) return;
    this.#exiting = true;
    const deadline = this.#clock.now() + EXIT_FLUSH_MS;
    this.#flush();
    while (this.#pending.length > 0 && this.#clock.now() < deadline) {
      await new Promise<void>((resolve) => this.#clock.setTimeout(resolve, RETRY_MS));
      this.#flush();
    }
    this.#exit(code);
  }

  async #shutdown(): Promise<void> {
    for (const running of this.#cells.values()) this.#drain(running);
    return await this.#exitAfterFlush(0);
  }

  // ---- cell workers -----------------------------------------------------------------------------

  #createCellWorker(heapMb: number): CellWorker {
    const worker = this.#createWorker(heapMb);
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
      sinkId: this.#nextSinkId++,
      onOutput: () => {},
      served: 0,
      retired: false,
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
            ...(this.#cellsWriteFrames ? { sink: this.#sink, sinkId: cell.sinkId } : {}),
          } satisfies CellControl,
          [output.port2, control.port2],
        );
      };
      worker.on("message", onMessage);
      worker.once("exit", () => {
        cell.dead = true;
        // Ended while writing (terminated, or out of memory): the stream is free again. A frame cut
        // short there breaks the stream, which the host reports as a runtime failure.
        unlock(this.#sink, cell.sinkId);
        if (this.#pending.length > 0) this.#flush();
        resolve();
        const running = cell.running;
        // The error event (if any) precedes exit; give the port a last chance to deliver.
        if (running) this.#clock.setTimeout(() => this.#reportExit(running), 0);
      });
    });
    worker.on("error", (error: Error & { code?: string }) => {
      cell.dead = true;
      const running = cell.running;
      if (!running) return;
      if (error?.code === "ERR_WORKER_OUT_OF_MEMORY") running.exitReason = "heap_limit";
      else {
        running.exitReason = "fault";
        running.exitDetail = String(error?.message ?? error);
      }
    });
    return cell;
  }

  /** Wakes a parked Worker for good: a thread asleep in `Atomics.wait` ignores `terminate()`. */
  #unpark(cell: CellWorker): void {
    Atomics.store(cell.words, CELL_DOORBELL, 2);
    Atomics.notify(cell.words, CELL_DOORBELL);
  }

  /** Ends a spare that will never run a cell. */
  #discard(cell: CellWorker): void {
    cell.running = undefined;
    cell.retired = true;
    this.#unpark(cell);
    cell.closed = true;
    cell.output.close();
    cell.control.close();
    void cell.worker.terminate();
  }

  #takeCellWorker(): CellWorker {
    const spare = this.#spare;
    const taken = spare && !spare.dead && !spare.retired && spare.heapMb === this.#config.heapMb
      ? spare
      : undefined;
    if (spare && spare !== taken) this.#discard(spare);
    this.#spare = undefined;
    return taken ?? this.#createCellWorker(this.#config.heapMb);
  }

  #refillSpare(): void {
    if (!this.#spare && !this.#exiting) this.#spare = this.#createCellWorker(this.#config.heapMb);
  }

  /** Creates a spare if a cell still runs with none ready after {@link SPARE_WHILE_RUNNING_MS}. */
  #armSpareWhileRunning(): void {
    this.#spareWhileRunning ??= this.#clock.setTimeout(() => {
      this.#spareWhileRunning = undefined;
      for (const running of this.#cells.values()) {
        if (!running.finished) return this.#refillSpare();
      }
    }, SPARE_WHILE_RUNNING_MS);
  }

  /**
   * Collects the runtime's own start-up garbage, then creates its first spare: no other isolate of
   * the process creates a context meanwhile (see collect_garbage.ts).
   */
  #prepareFirstSpare(): void {
    if (this.#spare) return;
    if (this.#collectGarbage) collectGarbage();
    this.#refillSpare();
  }

  /**
   * Creates the next spare after a turn of the event loop. On Deno 2.9.6 `new Worker()` blocks the
   * calling thread for ~30 ms, in which this thread neither reads host frames (a start, a stop,
   * credit) nor writes its own (cells still write theirs); between cells the time is usually free
   * (a model thinks for seconds between cells).
   */
  #scheduleSpare(): void {
    this.#clock.setTimeout(() => this.#refillSpare(), 0);
  }

  #forward(running: RunningCell, output: PortOutput): void {
    if (Array.isArray(output)) {
      for (const one of output) this.#forward(running, one);
      return;
    }
    // A spare's `warmed` still queued on its port when a drain reads it (a shutdown while the cell
    // waits for its Worker): not an output of the cell.
    const kind = (output as { t: string }).t;
    if (kind === "warmed") return;
    // A reused Worker's fresh realm, met by the drain of the cell it ran: its recycle handler's.
    if (kind === "recycled") {
      if (running.reuse) running.cell.onOutput(output);
      return;
    }
    const final = output.t === "result" || output.t === "stopped";
    if (final && running.finished) return;
    if (!("w" in output)) {
      for (const event of wireCellEvents(running.id, output)) this.#sendCellEvent(event);
    }
    if (final) {
      running.finished = true;
      // The cell wrote its `exited` with its result.
      if ("w" in output) running.exitWritten = true;
      // Nothing more can come from the cell: its exit is reported now, not after `terminate()`
      // settles (0.2–1.5 ms later, more while the host and its client use both cores), since a
      // harness returns a cell's result only once its CellClosed arrives (SPEC §10.11).
      running.reuse = output.t === "result" && this.#reusable(running);
      running.noted?.resolve();
      // Before the exit's drain, which may meet the Worker's `recycled` already.
      if (running.reuse) this.#recycle(running);
      this.#reportExit(running);
      if (!running.reuse) this.#endCellSoon(running);
    }
  }

  /** Whether a cell's Worker may run the next cell (SPEC §5.1): the cell completed, cleanly. */
  #reusable(running: RunningCell): boolean {
    const cell = running.cell;
    return !running.stopRequested && running.exitReason === "normal" && !cell.dead && !cell.retired &&
      !this.#exiting && cell.heapMb === this.#config.heapMb &&
      Atomics.load(cell.words, CREDIT_STOP) === 0;
  }

  /**
   * Keeps a completed cell's Worker for the next cell: it is the spare again once it confirms its
   * fresh realm (`recycled`), unless the retire policy ends it then. A start that comes first waits
   * for that confirmation (usually well under a millisecond).
   */
  #recycle(running: RunningCell): void {
    const cell = running.cell;
    cell.running = undefined;
    cell.settled = false;
    let timer: unknown;
    cell.ready = new Promise<void>((settle) => {
      // A Worker that dies while building its fresh realm settles the wait too: a start waiting for
      // it then sees it dead (its exit reports the waiting cell) instead of starting after that exit.
      const onExit = () => done();
      const done = () => {
        this.#clock.clearTimeout(timer);
        cell.worker.off("exit", onExit);
        cell.settled = true;
        settle();
      };
      cell.worker.once("exit", onExit);
      timer = this.#clock.setTimeout(() => {
        this.#retire(cell);
        done();
      }, RECYCLE_WAIT_MS);
      cell.onOutput = (output) => {
        const recycled = output as unknown as CellRecycled;
        if (recycled.t !== "recycled") return;
        const limit = Math.min(RETIRE_HEAP_BYTES, cell.heapMb * MIB * RETIRE_HEAP_SHARE);
        if (cell.served >= this.#retireAfterCells || recycled.heap > limit) this.#retire(cell);
        done();
      };
      if (cell.dead) done();
    });
    if (this.#spare === undefined && !this.#exiting) {
      this.#spare = cell;
      this.#clock.clearTimeout(this.#spareWhileRunning);
      this.#spareWhileRunning = undefined;
    } else if (this.#spare !== cell) {
      // A spare is ready already (one per session): this Worker is not needed.
      this.#retire(cell);
    }
  }

  /** Ends a Worker that will run no further cell; a new spare follows if it was the spare. */
  #retire(cell: CellWorker): void {
    if (cell.retired) return;
    const wasSpare = this.#spare === cell;
    if (wasSpare) this.#spare = undefined;
    // A start that waits for it falls back to a new Worker (#startCell).
    this.#discard(cell);
    if (wasSpare) this.#scheduleSpare();
  }

  /** A host `Credit`: the cell's next `events` counted outputs are acknowledged (it settles them). */
  #credit(cellId: string, events: number): void {
    const running = this.#cells.get(cellId);
    if (!running) return;
    Atomics.add(running.cell.words, CREDIT_ACKED, events);
    this.#wake(running);
  }

  #wake(running: RunningCell): void {
    Atomics.add(running.cell.words, CREDIT_GENERATION, 1);
    Atomics.notify(running.cell.words, CREDIT_GENERATION);
  }

  /** Whether the cell is over its credit, i.e. its helper call is (or is about to be) waiting. */
  #overCredit(running: RunningCell): boolean {
    const words = running.cell.words;
    const unacked = (Atomics.load(words, CREDIT_EVENTS) - Atomics.load(words, CREDIT_ACKED)) | 0;
    return unacked > this.#config.creditEvents ||
      (unacked > 0 && Atomics.load(words, CREDIT_BYTES) > this.#config.creditBytes);
  }

  #drain(running: RunningCell): void {
    for (;;) {
      const next = receiveMessageOnPort(running.cell.output);
      if (!next) return;
      this.#forward(running, next.message as PortOutput);
    }
  }

  #reportExit(running: RunningCell): void {
    if (running.exited) return;
    this.#drain(running);
    if (running.exited) return; // the drain met the cell's result
    running.exited = true;
    this.#cells.delete(running.id);
    if (!running.reuse) {
      running.cell.closed = true;
      running.cell.output.close();
    }
    if (running.exitWritten) return;
    this.#sendCellEvent({
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
  #endCellSoon(running: RunningCell): void {
    setImmediate(() => void this.#endCell(running));
  }

  async #endCell(running: RunningCell): Promise<void> {
    // Also a Worker that built a fresh realm on its own and parked: the runtime did not reuse it.
    this.#unpark(running.cell);
    running.cell.closed = true;
    running.cell.control.close();
    await running.cell.worker.terminate().catch(() => {});
    this.#reportExit(running);
    this.#scheduleSpare();
  }

  async #startCell(start: NonNullable<HostToWorker["startCell"]>): Promise<void> {
    if (this.#spare === undefined) {
      // A back-to-back start can overtake the note of the last cell's result: the cell wrote its
      // result to the host itself, the harness sent the next cell, and this thread has not run the
      // note's message event yet, or the cell has not even posted it (a pipe write hands the CPU
      // to the host). Read the queued notes, and wait a little for one whose result is written, so
      // that the cell's Worker is reused (seen under load: a new Worker every ~30 cells, and two
      // Workers for one sequential session).
      for (const running of [...this.#cells.values()]) {
        if (!running.started || running.finished) continue;
        this.#drain(running);
        if (running.finished || Atomics.load(running.cell.words, CELL_RESULT) !== 1) continue;
        const noted = running.noted ??= Promise.withResolvers<void>();
        let timer: unknown;
        this.#startsWaiting.add(start.cellId);
        await Promise.race([
          noted.promise,
          new Promise<void>((resolve) => timer = this.#clock.setTimeout(resolve, NOTE_WAIT_MS)),
        ]);
        this.#clock.clearTimeout(timer);
        this.#startsWaiting.delete(start.cellId);
        break;
      }
    }
    let cell = this.#takeCellWorker();
    const running: RunningCell = {
      id: start.cellId,
      cell,
      finished: false,
      exited: false,
      exitWritten: false,
      started: false,
      lastSeen: this.#clock.now(),
      exitReason: "normal",
      progress: 0,
      stopRequested: false,
      reuse: false,
    };
    this.#cells.set(start.cellId, running);
    cell.running = running;
    // A StopCell that came while this start waited for the last cell's note: stopped before it began.
    if (this.#stopsWhileWaiting.delete(start.cellId)) this.#stopCell(start.cellId);
    if (!cell.settled) await cell.ready;
    if (cell.retired && !running.finished && !running.exited) {
      // A recycled Worker that the retire policy ended, or that never confirmed its fresh realm.
      cell.running = undefined;
      cell = running.cell = this.#createCellWorker(this.#config.heapMb);
      cell.running = running;
      await cell.ready;
    }
    if (cell.dead) return;
    cell.served++;
    // A session that runs cells concurrently keeps a Worker ready for the next concurrent one too.
    let others = 0;
    for (const other of this.#cells.values()) if (!other.finished) others++;
    if (others > 1) this.#concurrent = true;
    if (this.#spare === undefined && this.#concurrent) this.#armSpareWhileRunning();
    cell.onOutput = (output) => {
      running.lastSeen = this.#clock.now();
      running.ping = undefined;
      this.#forward(running, output);
    };
    // Stopped before it started: stopCell has already reported and disposed of it.
    if (running.finished) return;
    const config = this.#config;
    const message: CellStart = {
      t: "start",
      cellId: start.cellId,
      source: start.source ?? "",
      tools: (start.tools ?? []).map((t) => ({ name: t.globalName, description: t.description ?? "" })),
      store: [...this.#store],
      maxStoredValueBytes: config.maxStoredValueBytes,
      maxMessageBytes: config.maxMessageBytes,
      maxFrameBytes: config.maxFrameBytes,
      credit: {
        maxEvents: config.creditEvents,
        maxBytes: config.creditBytes,
        // Server: what the collector could keep of a text or an image; Client: one message.
        trimTextOver: config.server ? 2 * MAX_TEXT_BYTES : config.maxMessageBytes,
        keepTextBytes: MAX_TEXT_BYTES,
        dropMediaOver: config.server ? MAX_MEDIA_BYTES : config.maxMessageBytes,
        jsonSizes: config.jsonSizes,
      },
    };
    if (cell.served > 1) {
      // A reused Worker: the last cell's account (a Credit for it is ignored from now on).
      for (const word of [CREDIT_EVENTS, CREDIT_BYTES, CREDIT_ACKED, CELL_PROGRESS, CELL_RESULT]) {
        Atomics.store(cell.words, word, 0);
      }
    }
    // The parked spare takes the start from its control port as soon as the doorbell rings.
    cell.control.postMessage(message);
    Atomics.store(cell.words, CELL_DOORBELL, 1);
    Atomics.notify(cell.words, CELL_DOORBELL);
    running.started = true;
    // The host counts the yield time of the cell's first observation from here, not from its
    // StartCell, which may have waited for a Worker (a fresh runtime's first cell: up to a second
    // on a loaded machine). The cell's own `started` follows with its first output.
    this.#sendCellEvent({ cellId: start.cellId, started: {} });
    running.lastSeen = this.#clock.now();
    this.#armWatchdog();
  }

  #postToCell(cellId: string, message: CellControl): void {
    const running = this.#cells.get(cellId);
    if (!running || running.finished) return;
    running.cell.worker.postMessage(message);
  }

  #stopCell(cellId: string): void {
    const running = this.#cells.get(cellId);
    if (!running && this.#startsWaiting.has(cellId)) this.#stopsWhileWaiting.add(cellId);
    if (!running || running.finished) return;
    if (!running.started) {
      // Its Worker may still be booting: confirm the stop now (the host would otherwise restart the
      // whole runtime after cooperativeStopMs) and dispose of the Worker unused.
      running.finished = true;
      this.#reportExit(running);
      this.#discard(running.cell);
      this.#scheduleSpare();
      return;
    }
    running.stopRequested = true;
    Atomics.store(running.cell.words, CREDIT_STOP, 1);
    this.#wake(running);
    this.#drain(running);
    running.cell.worker.postMessage({ t: "stop", cell: running.id } satisfies CellControl);
  }

  // ---- heap-limit watchdog ------------------------------------------------------------------------
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

  #armWatchdog(): void {
    this.#watchdog ??= this.#clock.setTimeout(this.#watch, WATCHDOG_MS);
  }

  readonly #watch = (): void => {
    this.#watchdog = undefined;
    if (this.#checkParkedCells() > 0) this.#armWatchdog();
  };

  /** One look at the running cells; returns how many were running. */
  #checkParkedCells(): number {
    const now = this.#clock.now();
    let active = 0;
    for (const running of this.#cells.values()) if (running.started && !running.finished) active++;
    const rssMb = this.#rssBytes() / MIB;
    const overBudget = rssMb > active * this.#config.heapMb * 2 + RSS_ALLOWANCE_MB;
    for (const running of this.#cells.values()) {
      if (!running.started || running.finished) continue;
      const progress = Atomics.load(running.cell.words, CELL_PROGRESS);
      if (
        progress !== running.progress || this.#overCredit(running) ||
        Atomics.load(this.#sink, SINK_LOCK) === running.cell.sinkId
      ) {
        running.progress = progress;
        // New output, waiting for the host's credit, or for the host to take a frame: not parked.
        running.lastSeen = now;
        running.ping = undefined;
        continue;
      }
      if (overBudget && running.ping && now - running.ping.at >= SILENCE_MS) {
        this.#abort(running, "heap_limit");
        continue;
      }
      if (!running.ping) {
        if (now - running.lastSeen < SILENCE_MS) continue;
        running.ping = { at: now, cpu: this.#cpuMicros() };
        running.cell.worker.postMessage({ t: "ping" } satisfies CellControl);
        continue;
      }
      const elapsedMs = now - running.ping.at;
      if (elapsedMs < PARKED_WINDOW_MS) continue;
      const cpuMs = (this.#cpuMicros() - running.ping.cpu) / 1000;
      if (cpuMs < elapsedMs * PARKED_CPU_SHARE) {
        this.#abort(running, "heap_limit");
      } else {
        running.ping = undefined; // busy (spinning or another cell's work): look again later
      }
    }
    return active;
  }
}

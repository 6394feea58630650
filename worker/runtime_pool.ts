/**
 * The runtime's cell workers (SPEC 1.2 §5.1, `cell_protocol.ts` items 1 and 3a): creating one,
 * warming it, keeping one ready as the session's spare, reusing a worker whose cell completed, and
 * retiring or discarding the others.
 *
 * - At most one spare per session; a new one is created a turn after the last is taken
 *   ({@link CellWorkerPool.scheduleSpare}), never while a start waits for a thread.
 * - A worker whose cell completed cleanly is recycled: it becomes the spare again once it confirms
 *   its fresh realm (`recycled`), unless the retire policy ends it then.
 * - A worker that ends is unparked first: a thread asleep in `Atomics.wait` ignores `terminate()`.
 *
 * @module
 */
import { MessageChannel, type MessagePort, Worker } from "node:worker_threads";
import { MIB } from "../proto/bytes.ts";
import {
  CELL_DOORBELL,
  CELL_WORDS,
  type CellControl,
  CREDIT_STOP,
  RETIRE_HEAP_BYTES,
  RETIRE_HEAP_SHARE,
} from "./cell_protocol.ts";
import { collectGarbage } from "./collect_garbage.ts";
import type { FrameOutput } from "./runtime_output.ts";
import type { CellRun, CellWorker, CellWorkerThread, PortOutput, RuntimeConfig } from "./runtime_records.ts";
import type { Clock } from "../proto/clock.ts";

const cellUrl = new URL("./cell.js", import.meta.url);
/** The port type of the cell protocol (the web one); ours are `node:worker_threads` ports. */
type WebPort = globalThis.MessagePort;

/**
 * A cell worker is retired (ended, and a new one created off the critical path) after this many
 * cell runs: a bound on whatever a realm may leave in its isolate (compiled code, the `Symbol.for`
 * registry). Measured with bench/soak.ts (bench/README.md).
 */
export const RETIRE_AFTER_CELLS = 1_000;
/**
 * A cell worker whose cell completed is told to build a fresh realm; one that has not confirmed
 * within this time (a microtask of its cell that never ends) is ended and a new spare created.
 */
const RECYCLE_WAIT_MS = 1_000;
/**
 * In a session that has run cells concurrently, a cell that runs this long with no worker ready
 * gets a new spare beside it, for the next concurrent cell; a back-to-back cell reuses the running
 * cell's worker, so a sequential session never pays for one (under load a first cell may take a
 * second, and a spare made then only retired the reused worker).
 */
const SPARE_WHILE_RUNNING_MS = 1_000;
/**
 * A runtime the host spawned for a session is configured at once. One that is still unconfigured
 * after PREWARM_IDLE_MS waits in the warm pool: it creates its spare now, with the default cell
 * heap limit (the host's default too), so that neither OpenSession nor the session's first Execute
 * waits for a worker (the first Execute of a session took ~98 ms p50 before, ~8 ms after). A
 * session with another limit replaces it.
 */
const PREWARM_IDLE_MS = 50;

/** Options of a {@link CellWorkerPool}. */
export interface CellWorkerPoolOptions {
  clock: Clock;
  /** Creates a cell worker's thread (default: a Worker on `cell.js` next to this module). */
  createThread?: (heapMb: number) => CellWorkerThread;
  /** The stream the workers write to: their lock IDs, and their lock freed when they end. */
  output: FrameOutput;
  /** The settings in force. */
  config: () => Readonly<RuntimeConfig>;
  /** Whether cell workers write their frames themselves (they get the stream words). */
  cellsWriteFrames: boolean;
  /** Whether the first spare waits for a collection of the runtime's start-up garbage. */
  collectGarbage: boolean;
  /** A cell worker serves at most this many cell runs. */
  retireAfterCells: number;
  /** Whether the runtime is exiting: no spare is created or kept then. */
  exiting: () => boolean;
  /** A worker serving `run` exited: the run's exit is reported (its error event came first). */
  onExit: (run: CellRun) => void;
  /** Whether any cell run has not finished (the spare created while one runs). */
  anyRunning: () => boolean;
  /** Run once as the first spare is created, while it boots (`runtime_rehearsal.ts`). */
  rehearse?: () => void;
}

/** The cell workers of one runtime and its spare. */
export class CellWorkerPool {
  readonly #options: CellWorkerPoolOptions;
  /** Whether the first spare was prepared (and {@link CellWorkerPoolOptions.rehearse} run). */
  #firstPrepared = false;
  readonly #clock: Clock;
  readonly #createThread: (heapMb: number) => CellWorkerThread;
  #spare: CellWorker | undefined;
  /** A cell started while another ran: the session runs cells concurrently. */
  #concurrent = false;
  /** The timer of {@link SPARE_WHILE_RUNNING_MS}. */
  #spareWhileRunning: unknown;
  /** The timer of {@link PREWARM_IDLE_MS}. */
  #prewarming: unknown;

  /** @param options see {@link CellWorkerPoolOptions} */
  constructor(options: CellWorkerPoolOptions) {
    this.#options = options;
    this.#clock = options.clock;
    this.#createThread = options.createThread ??
      ((heapMb) => new Worker(cellUrl, { resourceLimits: { maxOldGenerationSizeMb: heapMb } }));
  }

  /** Whether a spare is ready (or booting). */
  get hasSpare(): boolean {
    return this.#spare !== undefined;
  }

  /** Creates the first spare after {@link PREWARM_IDLE_MS}, unless a `Configure` comes first. */
  armPrewarm(): void {
    this.#prewarming = this.#clock.setTimeout(() => this.#prepareFirstSpare(), PREWARM_IDLE_MS);
  }

  /**
   * A `Configure` arrived: a spare of another heap limit is replaced, the first spare created. A
   * runtime that made its first spare already (one handed over to another session) gets its next
   * spare by the usual rules: its last cell's worker is recycled, or a new one comes a turn later.
   * That cell wrote its result itself, so this Configure can come before this thread has read the
   * result (the host hands the runtime over as soon as the result reaches its client); creating a
   * spare here then blocked this thread for a Worker's start (100–200 ms) and retired the recycled
   * worker (bench:scale's turns across 100 sessions: two or three such stalls per 100 turns).
   */
  configured(): void {
    this.#clock.clearTimeout(this.#prewarming);
    const heapMb = this.#options.config().heapMb;
    const spare = this.#spare;
    const replaced = spare !== undefined && spare.heapMb !== heapMb;
    if (replaced) {
      this.discard(spare);
      this.#spare = undefined;
    }
    if (!this.#firstPrepared) return this.#prepareFirstSpare();
    if (replaced) return this.#refillSpare();
    if (!this.#spare && !this.#options.anyRunning()) this.scheduleSpare();
  }

  /** Ends the spare and the prewarm (the in-process runtime's end). */
  dispose(): void {
    this.#clock.clearTimeout(this.#prewarming);
    if (this.#spare) this.release(this.#spare);
    this.#spare = undefined;
  }

  /** The worker for a starting cell run: the spare if it fits, else a new one. */
  take(): CellWorker {
    const spare = this.#spare;
    const heapMb = this.#options.config().heapMb;
    const taken = spare && !spare.dead && !spare.retired && spare.heapMb === heapMb ? spare : undefined;
    if (spare && spare !== taken) this.discard(spare);
    this.#spare = undefined;
    return taken ?? this.create(heapMb);
  }

  /**
   * A cell run started with `running` runs unfinished: once two ran at the same time, a worker is
   * kept ready for the next concurrent one too.
   */
  noteRunning(running: number): void {
    if (running > 1) this.#concurrent = true;
    if (this.#spare === undefined && this.#concurrent) this.#armSpareWhileRunning();
  }

  /** Creates a cell worker: it boots, gets `warm` with its ports, and parks (see `ready`). */
  create(heapMb: number): CellWorker {
    const thread = this.#createThread(heapMb);
    const output = new MessageChannel();
    const control = new MessageChannel();
    const worker: CellWorker = {
      thread,
      heapMb,
      ready: Promise.resolve(),
      settled: false,
      dead: false,
      closed: false,
      output: output.port1,
      control: control.port1,
      words: new Int32Array(new SharedArrayBuffer(4 * CELL_WORDS)),
      sinkId: this.#options.output.nextLockId(),
      onOutput: () => {},
      served: 0,
      retired: false,
    };
    output.port1.on("message", (message: PortOutput) => worker.onOutput(message));
    worker.ready = new Promise<void>((settle) => {
      const resolve = () => {
        worker.settled = true;
        settle();
      };
      worker.onOutput = () => resolve(); // `warmed`
      this.#warmWhenReady(worker, output.port2, control.port2);
      thread.once("exit", () => {
        worker.dead = true;
        this.#options.output.releaseLock(worker.sinkId);
        resolve();
        const run = worker.run;
        // The error event (if any) precedes exit; give the port a last chance to deliver.
        if (run) this.#clock.setTimeout(() => this.#options.onExit(run), 0);
      });
    });
    thread.on("error", (error: Error & { code?: string }) => {
      worker.dead = true;
      const run = worker.run;
      if (!run) return;
      if (error?.code === "ERR_WORKER_OUT_OF_MEMORY") run.exitReason = "heap_limit";
      else {
        run.exitReason = "fault";
        run.exitDetail = String(error?.message ?? error);
      }
    });
    return worker;
  }

  /** Hands a booted worker (`ready`) its ports and words with `warm`, so that it parks. */
  #warmWhenReady(worker: CellWorker, output: MessagePort, control: MessagePort): void {
    const thread = worker.thread;
    const onMessage = (message: { t?: string }) => {
      if (message?.t !== "ready") return;
      thread.off("message", onMessage);
      if (worker.closed) return; // ended before it booted; its ports can no longer be handed over
      // The first message a Worker receives, and the first port it is handed, cost ~1 ms more
      // than later ones on Deno 2.9.6 (lazy set-up): pay for both here, before a cell waits, and
      // let the spare park on its doorbell (cell_protocol.ts).
      thread.postMessage(
        {
          t: "warm",
          // The cell protocol names the web MessagePort type; these are node:worker_threads ports,
          // which Deno implements as the same class.
          port: output as unknown as WebPort,
          control: control as unknown as WebPort,
          words: worker.words,
          ...(this.#options.cellsWriteFrames
            ? { sink: this.#options.output.sink, sinkId: worker.sinkId }
            : {}),
        } satisfies CellControl,
        [output, control],
      );
    };
    thread.on("message", onMessage);
  }

  /** Wakes a parked worker for good: a thread asleep in `Atomics.wait` ignores `terminate()`. */
  unpark(worker: CellWorker): void {
    Atomics.store(worker.words, CELL_DOORBELL, 2);
    Atomics.notify(worker.words, CELL_DOORBELL);
  }

  /** Ends a worker that will never serve a cell run (a spare, or one stopped before it started). */
  discard(worker: CellWorker): void {
    worker.run = undefined;
    worker.retired = true;
    this.unpark(worker);
    worker.closed = true;
    worker.output.close();
    worker.control.close();
    this.#terminate(worker);
  }

  /**
   * Ends a worker and lets go of it: it no longer keeps the process alive, even if Deno cannot stop
   * it (a spinning thread, in-process isolation: see `Runtime.abandonCell`).
   */
  release(worker: CellWorker): void {
    this.unpark(worker);
    worker.closed = true;
    worker.output.close();
    worker.control.close();
    (worker.thread as { unref?: () => void }).unref?.();
    this.#terminate(worker);
  }

  /**
   * Closes the control of a cell run's worker that will not be reused, before its thread is
   * terminated: also a worker that built a fresh realm on its own and parked (the runtime did not
   * reuse it) is woken for good.
   */
  close(worker: CellWorker): void {
    this.unpark(worker);
    worker.closed = true;
    worker.control.close();
  }

  /** Terminates a worker's thread without waiting for its end (see {@link terminated}). */
  #terminate(worker: CellWorker): void {
    worker.thread.terminate().then(ignoreOutcome, ignoreOutcome);
  }

  /** Whether a cell run's worker may serve the next cell run (SPEC §5.1): it completed, cleanly. */
  reusable(run: CellRun): boolean {
    const worker = run.worker;
    return !run.stopRequested && run.exitReason === "normal" && !worker.dead && !worker.retired &&
      !this.#options.exiting() && worker.heapMb === this.#options.config().heapMb &&
      Atomics.load(worker.words, CREDIT_STOP) === 0;
  }

  /**
   * Keeps a completed cell run's worker for the next cell run: it is the spare again once it
   * confirms its fresh realm (`recycled`), unless the retire policy ends it then. A start that
   * comes first waits for that confirmation (usually well under a millisecond).
   */
  recycle(run: CellRun): void {
    const worker = run.worker;
    worker.run = undefined;
    worker.settled = false;
    let timer: unknown;
    worker.ready = new Promise<void>((settle) => {
      // A worker that dies while building its fresh realm settles the wait too: a start waiting for
      // it then sees it dead (its exit reports the waiting run) instead of starting after that exit.
      const onExit = () => done();
      const done = () => {
        this.#clock.clearTimeout(timer);
        worker.thread.off("exit", onExit);
        worker.settled = true;
        settle();
      };
      worker.thread.once("exit", onExit);
      timer = this.#clock.setTimeout(() => {
        this.retire(worker);
        done();
      }, RECYCLE_WAIT_MS);
      worker.onOutput = (output) => {
        if (Array.isArray(output) || output.t !== "recycled") return;
        const limit = Math.min(RETIRE_HEAP_BYTES, worker.heapMb * MIB * RETIRE_HEAP_SHARE);
        if (worker.served >= this.#options.retireAfterCells || output.heap > limit) this.retire(worker);
        done();
      };
      if (worker.dead) done();
    });
    if (this.#spare === undefined && !this.#options.exiting()) {
      this.#spare = worker;
      this.#clock.clearTimeout(this.#spareWhileRunning);
      this.#spareWhileRunning = undefined;
    } else if (this.#spare !== worker) {
      // A spare is ready already (one per session): this worker is not needed.
      this.retire(worker);
    }
  }

  /** Ends a worker that will serve no further cell run; a new spare follows if it was the spare. */
  retire(worker: CellWorker): void {
    if (worker.retired) return;
    const wasSpare = this.#spare === worker;
    if (wasSpare) this.#spare = undefined;
    // A start that waits for it falls back to a new worker (CellRuns.start).
    this.discard(worker);
    if (wasSpare) this.scheduleSpare();
  }

  /**
   * Creates the next spare after a turn of the event loop. On Deno 2.9.6 `new Worker()` blocks the
   * calling thread for ~30 ms, in which this thread neither reads host frames (a start, a stop,
   * credit) nor writes its own (cells still write theirs); between cells the time is usually free
   * (a model thinks for seconds between cells).
   */
  scheduleSpare(): void {
    this.#clock.setTimeout(() => this.#refillSpare(), 0);
  }

  #refillSpare(): void {
    if (!this.#spare && !this.#options.exiting()) this.#spare = this.create(this.#options.config().heapMb);
  }

  /** Creates a spare if a cell still runs with none ready after {@link SPARE_WHILE_RUNNING_MS}. */
  #armSpareWhileRunning(): void {
    this.#spareWhileRunning ??= this.#clock.setTimeout(() => {
      this.#spareWhileRunning = undefined;
      if (this.#options.anyRunning()) this.#refillSpare();
    }, SPARE_WHILE_RUNNING_MS);
  }

  /**
   * Collects the runtime's own start-up garbage, then creates its first spare: no other isolate of
   * the process creates a context meanwhile (see collect_garbage.ts).
   */
  #prepareFirstSpare(): void {
    if (this.#spare) return;
    if (this.#options.collectGarbage) collectGarbage();
    this.#refillSpare();
    // While the spare boots on its own thread: the main thread's cell path, once.
    if (this.#firstPrepared) return;
    this.#firstPrepared = true;
    this.#options.rehearse?.();
  }
}

/**
 * Terminates a cell worker's thread; settles once it has ended. Its outcome is not looked at: the
 * thread's `exit` event reports the end, and Deno's `terminate()` rejects only for a thread that
 * is gone already, which is what it was asked for.
 */
export function terminated(thread: CellWorkerThread): Promise<void> {
  return thread.terminate().then(ignoreOutcome, ignoreOutcome);
}

function ignoreOutcome(): void {}

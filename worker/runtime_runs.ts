/**
 * The runtime's cell runs: each `StartCell` starts one on a cell worker of the pool, its outputs
 * are forwarded to the host, and its end is reported once, as `exited`.
 *
 * - Every output a cell posted before it stopped is accounted for: the cell worker's output port is
 *   drained with `receiveMessageOnPort` before the run's exit is reported.
 * - Output credit (SPEC §8.10): the cell keeps the account of its unacknowledged outputs itself; a
 *   host `Credit{events: k}` only adds `k` to the cell's `CREDIT_ACKED` word and wakes the cell. A
 *   stop request sets the cell's stop word and wakes it first.
 * - A run's worker is reused only when the cell completed (`CellWorkerPool.reusable`); else it is
 *   terminated once the run's frames are queued.
 *
 * @module
 */
import type { StoreStart } from "./store_snapshot.ts";
import { setImmediate } from "node:timers";
import { receiveMessageOnPort } from "node:worker_threads";
import { MAX_MEDIA_BYTES, MAX_TEXT_BYTES } from "../proto/bytes.ts";
import type { HostToWorker } from "../proto/worker_codec.ts";
import { wireCellEvents } from "./cell_events.ts";
import {
  CELL_BUSY,
  CELL_BUSY_REPORTED,
  CELL_DOORBELL,
  CELL_PROGRESS,
  CELL_RESULT,
  CELL_STOPPED,
  type CellControl,
  type CellStart,
  CREDIT_ACKED,
  CREDIT_BYTES,
  CREDIT_EVENTS,
  CREDIT_GENERATION,
  CREDIT_STOP,
} from "./cell_protocol.ts";
import type { FrameOutput } from "./runtime_output.ts";
import { type CellWorkerPool, terminated } from "./runtime_pool.ts";
import type { CellRun, CellWorker, PortOutput, RuntimeConfig } from "./runtime_records.ts";
import type { Clock } from "../proto/clock.ts";

/** How long a start waits for the note of a result already written (see {@link CellRuns.start}). */
const NOTE_WAIT_MS = 50;
/**
 * How long a StopCell waits for the cell's `stopped` (see {@link CellRuns.stop}): an idle or
 * awaiting cell answers within one thread hop; a cell running code does not.
 */
const STOP_WAIT_MS = 1;
/**
 * How long the runtime holds its answers to the host's pings for a stopped cell that is not
 * running code but has not confirmed yet (see {@link CellRuns.answer}): on a loaded machine its
 * thread waits for a core (3–50 ms measured), and an answer sent meanwhile would have the host
 * restart the runtime of a cell that stops by itself. Below the host's `cooperativeStopMs`
 * (100 ms by default).
 */
const STOP_HOLD_MS = 40;
/**
 * How often the running cells' busy stretches are looked at (`cell_busy.ts`): a stretch seen at two
 * looks in a row has lasted this long at least, and is reported to the host (`busy`).
 */
const BUSY_LOOK_MS = 5;

/** A host `StartCell`. */
type StartCell = NonNullable<HostToWorker["startCell"]>;

/** Options of {@link CellRuns}. */
export interface CellRunsOptions {
  clock: Clock;
  pool: CellWorkerPool;
  output: FrameOutput;
  /** The settings in force. */
  config: () => Readonly<RuntimeConfig>;
  /** The stored values a cell run starts from (`store_snapshot.ts`). */
  store: () => StoreStart;
  /** A cell run has started: the watchdog looks at the running ones from now on. */
  onStarted: () => void;
  /** Owns a task nobody waits for: its failure is a runtime fault. */
  background: (task: Promise<void>, what: string) => void;
}

/** The cell runs of one runtime, by cell ID. */
export class CellRuns {
  readonly #clock: Clock;
  readonly #pool: CellWorkerPool;
  readonly #output: FrameOutput;
  readonly #options: CellRunsOptions;
  readonly #runs = new Map<string, CellRun>();
  /** Cells whose StartCell waits for the note of the last cell's result (not yet in `#runs`). */
  readonly #startsWaiting = new Set<string>();
  /** Of those, the ones a StopCell named meanwhile. */
  readonly #stopsWhileWaiting = new Set<string>();
  /** The next look at the busy stretches, while cells run. */
  #busyTimer: unknown;
  /** A stopped cell that is not running code and has not confirmed yet (see {@link CellRuns.answer}). */
  #unconfirmed: { run: CellRun; until: number; held: (() => void)[] } | undefined;

  /** @param options see {@link CellRunsOptions} */
  constructor(options: CellRunsOptions) {
    this.#clock = options.clock;
    this.#pool = options.pool;
    this.#output = options.output;
    this.#options = options;
  }

  /** The runs whose exit is not reported yet. */
  values(): IterableIterator<CellRun> {
    return this.#runs.values();
  }

  /** Whether a run has not finished. */
  anyRunning(): boolean {
    for (const run of this.#runs.values()) if (!run.finished) return true;
    return false;
  }

  /**
   * Starts a cell run on the spare, a recycled worker, or a new one, then posts its start and sends
   * `started` (from here the host counts the yield time of its first observation).
   */
  async start(start: StartCell): Promise<void> {
    const note = this.#pool.hasSpare ? undefined : this.#noteOfLastResult();
    if (note !== undefined) {
      let timer: unknown;
      this.#startsWaiting.add(start.cellId);
      await Promise.race([
        note,
        new Promise<void>((resolve) => timer = this.#clock.setTimeout(resolve, NOTE_WAIT_MS)),
      ]);
      this.#clock.clearTimeout(timer);
      this.#startsWaiting.delete(start.cellId);
    }
    let worker = this.#pool.take();
    const run = this.#newRun(start.cellId, worker);
    this.#runs.set(start.cellId, run);
    worker.run = run;
    // A StopCell that came while this start waited for the last cell's note: stopped before it began.
    if (this.#stopsWhileWaiting.delete(start.cellId)) this.stop(start.cellId);
    // Not awaited when settled: the start then goes out in this turn.
    if (!worker.settled) await worker.ready;
    if (worker.retired && !run.finished && !run.exited) {
      // A recycled worker that the retire policy ended, or that never confirmed its fresh realm.
      worker.run = undefined;
      worker = run.worker = this.#pool.create(this.#options.config().heapMb);
      worker.run = run;
      await worker.ready;
    }
    if (worker.dead) return;
    worker.served++;
    let running = 0;
    for (const other of this.#runs.values()) if (!other.finished) running++;
    this.#pool.noteRunning(running);
    worker.onOutput = (output) => {
      run.lastSeen = this.#clock.now();
      run.ping = undefined;
      this.#forward(run, output);
    };
    // Stopped before it started: stop() has already reported and disposed of it.
    if (run.finished) return;
    this.#post(worker, this.#startMessage(start));
    run.started = true;
    // The host counts the yield time of the cell's first observation from here, not from its
    // StartCell, which may have waited for a worker (a fresh runtime's first cell: up to a second
    // on a loaded machine). The cell's own `started` follows with its first output.
    this.#output.sendCellEvent({ cellId: start.cellId, started: {} });
    run.lastSeen = this.#clock.now();
    this.#options.onStarted();
    this.#busyTimer ??= this.#clock.setTimeout(this.#lookBusy, BUSY_LOOK_MS);
  }

  /**
   * Reports each running cell's busy stretch that lasted {@link BUSY_LOOK_MS} (`cell_busy.ts`): after
   * what the cell posted before, and only while the stretch goes on and the cell has not written its
   * result. The host may stop such a cell at once; the cell writes `idle` as the stretch ends.
   */
  readonly #lookBusy = (): void => {
    this.#busyTimer = undefined;
    let running = false;
    for (const run of this.#runs.values()) {
      if (!run.started || run.finished) continue;
      running = true;
      const words = run.worker.words;
      const stretch = Atomics.load(words, CELL_BUSY);
      const seen = run.busySeen;
      run.busySeen = stretch;
      if ((stretch & 1) === 0 || stretch !== seen || run.busyReported === stretch) continue;
      this.#drain(run);
      if (run.finished) continue;
      Atomics.store(words, CELL_BUSY_REPORTED, stretch);
      if (Atomics.load(words, CELL_BUSY) !== stretch || Atomics.load(words, CELL_RESULT) !== 0) continue;
      run.busyReported = stretch;
      this.#output.sendCellEvent({ cellId: run.id, busy: stretch >>> 0 });
    }
    if (running) this.#busyTimer ??= this.#clock.setTimeout(this.#lookBusy, BUSY_LOOK_MS);
  };

  /**
   * A back-to-back start can overtake the note of the last cell's result: the cell wrote its result
   * to the host itself, the harness sent the next cell, and this thread has not run the note's
   * message event yet, or the cell has not even posted it (a pipe write hands the CPU to the host).
   * Reads the queued notes; the note of a run whose result is written is worth a short wait, so
   * that the run's worker is reused (seen under load: a new worker every ~30 cells, and two workers
   * for one sequential session).
   *
   * @returns the note's settlement, or undefined when no run's result waits for its note
   */
  #noteOfLastResult(): Promise<void> | undefined {
    for (const run of [...this.#runs.values()]) {
      if (!run.started || run.finished) continue;
      this.#drain(run);
      if (run.finished || Atomics.load(run.worker.words, CELL_RESULT) !== 1) continue;
      return (run.noted ??= Promise.withResolvers<void>()).promise;
    }
    return undefined;
  }

  #newRun(id: string, worker: CellWorker): CellRun {
    return {
      id,
      worker,
      finished: false,
      exited: false,
      exitWritten: false,
      started: false,
      lastSeen: this.#clock.now(),
      exitReason: "normal",
      progress: 0,
      stopRequested: false,
      reuse: false,
      busySeen: 0,
      busyReported: 0,
    };
  }

  #startMessage(start: StartCell): CellStart {
    const config = this.#options.config();
    return {
      t: "start",
      cellId: start.cellId,
      source: start.source ?? "",
      tools: (start.tools ?? []).map((t) => ({ name: t.globalName, description: t.description ?? "" })),
      ...this.#options.store(),
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
  }

  /** Hands `message` to a parked worker: it takes it from its control port once the doorbell rings. */
  #post(worker: CellWorker, message: CellStart): void {
    if (worker.served > 1) {
      // A reused worker: the last cell's account (a Credit for it is ignored from now on).
      for (
        const word of [
          CREDIT_EVENTS,
          CREDIT_BYTES,
          CREDIT_ACKED,
          CELL_PROGRESS,
          CELL_RESULT,
          CELL_STOPPED,
          CELL_BUSY,
          CELL_BUSY_REPORTED,
        ]
      ) {
        Atomics.store(worker.words, word, 0);
      }
    }
    worker.control.postMessage(message);
    Atomics.store(worker.words, CELL_DOORBELL, 1);
    Atomics.notify(worker.words, CELL_DOORBELL);
  }

  /** Posts a control message to a cell that has not finished (a tool's result). */
  postToCell(cellId: string, message: CellControl): void {
    const run = this.#runs.get(cellId);
    if (!run || run.finished) return;
    run.worker.thread.postMessage(message);
  }

  /**
   * A host `StopCell`. A started cell is asked to stop, and this thread waits up to
   * {@link STOP_WAIT_MS} for its answer, so that a cell that stops cooperatively has reported its
   * exit before the host's next frame is answered (the host's ping after a StopCell: a cell not
   * ended by then is running code, and the host may restart the runtime at once).
   */
  stop(cellId: string): void {
    const run = this.#runs.get(cellId);
    if (!run && this.#startsWaiting.has(cellId)) this.#stopsWhileWaiting.add(cellId);
    if (!run || run.finished) return;
    if (!run.started) {
      // Its worker may still be booting: confirm the stop now (the host would otherwise restart the
      // whole runtime after cooperativeStopMs) and dispose of the worker unused.
      run.finished = true;
      this.reportExit(run);
      this.#pool.discard(run.worker);
      this.#pool.scheduleSpare();
      return;
    }
    run.stopRequested = true;
    Atomics.store(run.worker.words, CREDIT_STOP, 1);
    this.#wake(run);
    this.#drain(run);
    run.worker.thread.postMessage({ t: "stop", cell: run.id } satisfies CellControl);
    // Polled, not `Atomics.wait`: a thread that sleeps on a loaded machine waits for a core again
    // as it wakes (3–50 ms measured), and the host waits for this thread's answer. The bound is a
    // busy wait's, on the CPU's time (`performance`), not a rule of the injected clock.
    const until = performance.now() + STOP_WAIT_MS;
    while (Atomics.load(run.worker.words, CELL_STOPPED) === 0 && performance.now() < until) {
      // polling
    }
    this.#drain(run);
    // Between two stretches of its code (idle, awaiting): its thread waits for a core, and the
    // confirmation follows (see `answer`).
    const words = run.worker.words;
    if (!run.finished && (Atomics.load(words, CELL_BUSY) & 1) === 0) {
      this.#release();
      this.#unconfirmed = { run, until: performance.now() + STOP_WAIT_MS + STOP_HOLD_MS, held: [] };
    }
  }

  /**
   * Answers a host ping (`answer` sends the pong). The host takes a stopped cell that has not
   * confirmed by the answer to the ping after its StopCell for a cell running code, and restarts
   * the runtime; so while a stopped cell that was not running code has not confirmed, the answer
   * waits for its confirmation, for it to enter its code, or {@link STOP_HOLD_MS}, whichever comes
   * first. A cell that runs code is answered for at once.
   */
  answer(send: () => void): void {
    const waiting = this.#unconfirmed;
    if (!waiting) return send();
    const first = waiting.held.length === 0;
    waiting.held.push(send);
    if (first) this.#watchUnconfirmed();
  }

  #watchUnconfirmed = (): void => {
    const waiting = this.#unconfirmed;
    if (!waiting) return;
    const { run } = waiting;
    if (!run.finished) this.#drain(run);
    const words = run.worker.words;
    if (
      run.finished || run.worker.dead || (Atomics.load(words, CELL_BUSY) & 1) === 1 ||
      performance.now() >= waiting.until
    ) {
      return this.#release();
    }
    // Like the bound, the CPU's time, not a rule of the injected clock (see `stop`).
    setTimeout(this.#watchUnconfirmed, 1);
  };

  /** Sends the answers held for an unconfirmed stop. */
  #release(): void {
    const waiting = this.#unconfirmed;
    this.#unconfirmed = undefined;
    for (const send of waiting?.held ?? []) send();
  }

  /** A host `Credit`: the cell's next `events` counted outputs are acknowledged (it settles them). */
  credit(cellId: string, events: number): void {
    const run = this.#runs.get(cellId);
    if (!run) return;
    Atomics.add(run.worker.words, CREDIT_ACKED, events);
    this.#wake(run);
  }

  #wake(run: CellRun): void {
    Atomics.add(run.worker.words, CREDIT_GENERATION, 1);
    Atomics.notify(run.worker.words, CREDIT_GENERATION);
  }

  /** Whether the cell is over its credit, i.e. its helper call is (or is about to be) waiting. */
  overCredit(run: CellRun): boolean {
    const words = run.worker.words;
    const config = this.#options.config();
    const unacked = (Atomics.load(words, CREDIT_EVENTS) - Atomics.load(words, CREDIT_ACKED)) | 0;
    return unacked > config.creditEvents ||
      (unacked > 0 && Atomics.load(words, CREDIT_BYTES) > config.creditBytes);
  }

  /**
   * Ends a running cell's worker without its result: the host gets `exited` with `reason` (the
   * heap-limit watchdog ends cells this way).
   */
  abort(cellId: string, reason: "heap_limit" | "fault", detail?: string): void {
    const run = this.#runs.get(cellId);
    if (!run || run.finished) return;
    run.finished = true;
    run.exitReason = reason;
    if (detail !== undefined) run.exitDetail = detail;
    this.#options.background(this.#end(run), "failed to end cell");
  }

  /**
   * Gives up on a cell that did not confirm its stop: nothing more of it is forwarded, no `exited`
   * is sent, and its worker is terminated and released.
   */
  abandon(cellId: string): void {
    const run = this.#runs.get(cellId);
    if (!run) return;
    run.finished = true;
    run.exited = true;
    this.#runs.delete(cellId);
    this.#pool.release(run.worker);
    this.#pool.scheduleSpare();
  }

  /** Forwards what every run's cell posted so far (the runtime's shutdown). */
  drainAll(): void {
    for (const run of this.#runs.values()) this.#drain(run);
  }

  #drain(run: CellRun): void {
    for (;;) {
      const next = receiveMessageOnPort(run.worker.output);
      if (!next) return;
      this.#forward(run, next.message as PortOutput);
    }
  }

  /** Reports a run's exit to the host, once, after what its cell posted before it. */
  reportExit(run: CellRun): void {
    if (run.exited) return;
    this.#drain(run);
    if (run.exited) return; // the drain met the cell's result
    run.exited = true;
    this.#runs.delete(run.id);
    if (!run.reuse) {
      run.worker.closed = true;
      run.worker.output.close();
    }
    if (run.exitWritten) return;
    this.#output.sendCellEvent({
      cellId: run.id,
      exited: run.exitDetail === undefined
        ? { reason: run.exitReason }
        : { reason: run.exitReason, detail: run.exitDetail },
    });
  }

  /** Ends a finished run's worker (not reused), then reports its exit and makes a new spare. */
  async #end(run: CellRun): Promise<void> {
    this.#pool.close(run.worker);
    await terminated(run.worker.thread);
    this.reportExit(run);
    this.#pool.scheduleSpare();
  }

  /**
   * Ends a finished run's worker once the frames just queued are on their way: `terminate()` costs
   * its caller ~0.1 ms, which the run's result would otherwise wait for.
   */
  #endSoon(run: CellRun): void {
    setImmediate(() => this.#options.background(this.#end(run), "failed to end cell"));
  }

  #forward(run: CellRun, output: PortOutput): void {
    if (Array.isArray(output)) {
      for (const one of output) this.#forward(run, one);
      return;
    }
    // A spare's `warmed` still queued on its port when a drain reads it (a shutdown while the cell
    // waits for its worker): not an output of the cell.
    if (output.t === "warmed") return;
    // A reused worker's fresh realm, met by the drain of the run it served: its recycle handler's.
    if (output.t === "recycled") {
      if (run.reuse) run.worker.onOutput(output);
      return;
    }
    const final = output.t === "result" || output.t === "stopped";
    if (final && run.finished) return;
    if (!("w" in output)) {
      for (const event of wireCellEvents(run.id, output)) this.#output.sendCellEvent(event);
    }
    if (final) {
      run.finished = true;
      // The cell wrote its `exited` with its result.
      if ("w" in output) run.exitWritten = true;
      // Nothing more can come from the cell: its exit is reported now, not after `terminate()`
      // settles (0.2–1.5 ms later, more while the host and its client use both cores), since a
      // harness returns a cell's result only once its CellClosed arrives (SPEC §10.11).
      run.reuse = output.t === "result" && this.#pool.reusable(run);
      run.noted?.resolve();
      // Before the exit's drain, which may meet the worker's `recycled` already.
      if (run.reuse) this.#pool.recycle(run);
      this.reportExit(run);
      if (!run.reuse) this.#endSoon(run);
    }
  }
}

/**
 * The session runtime: the main thread of one permission-restricted Deno subprocess (SPEC §9.3),
 * as a class with its input (host frames in), output (frames out), clock and cell workers injected,
 * so that it runs in-process under test (`runtime_test.ts`) and for in-process isolation (SPEC
 * §9.8). `runtime_main.ts` wires it to the process's stdin and stdout. It holds no authoritative
 * state: it reads `HostToWorker` frames, runs each cell in a cell worker (SPEC §5.1), and writes
 * `WorkerToHost` frames.
 *
 * Glossary of `worker/` (one name per concept):
 * - **runtime**: the per-session Deno subprocess; its main thread runs {@link Runtime}.
 * - **cell worker**: the `node:worker_threads` Worker one cell runs in (`cell_bootstrap.ts`). The
 *   runtime's record of one is a `CellWorker`, its thread a {@link CellWorkerThread}
 *   (`runtime_records.ts`); the runtime creates, reuses and retires them (`runtime_pool.ts`).
 * - **spare**: a cell worker that booted, warmed up and parked, waiting for its next cell run.
 * - **cell run**: one execution of a cell. The runtime's record of one is a `CellRun`
 *   (`runtime_runs.ts`); inside its cell worker, its execution is the `CellRun` of `cell_run.ts`.
 * - **realm** (context): the fresh `node:vm` context a cell run evaluates its module in.
 *
 * The runtime's parts, each in its own module, composed here:
 * - `runtime_output.ts` ({@link FrameOutput}): this thread's frames to the host, under the stream
 *   lock shared with the cell workers;
 * - `runtime_pool.ts` ({@link CellWorkerPool}): the cell workers and the spare;
 * - `runtime_runs.ts` ({@link CellRuns}): the cell runs, their outputs, credit and exits;
 * - `runtime_watchdog.ts` ({@link ParkedCellWatchdog}): parked cells turned into heap-limit exits;
 * - this module: reading and dispatching host frames, the settings, the stored values, the end.
 *
 * Contract:
 * - The first frame is always `Ready`, written by `runtime_entry.ts` before this module loads.
 * - Input EOF or `Shutdown` ends the process (the injected `exit`), even while a cell spins.
 * - Frame limit: `Configure.max_frame_bytes` (the host's `maxWorkerFrameBytes`) bounds the frames
 *   this thread reads and writes, and the frames its cells write; until then the host's default.
 *
 * @module
 */
import process from "node:process";
import { FrameDecoder } from "../proto/frame_codec.ts";
import { createWorkerCodec, type HostToWorker } from "../proto/worker_codec.ts";
import type { CellControl } from "./cell_protocol.ts";
import { FrameOutput, RETRY_MS } from "./runtime_output.ts";
import { StoreReplica } from "./store_snapshot.ts";
import { CellWorkerPool, RETIRE_AFTER_CELLS } from "./runtime_pool.ts";
import { type CellWorkerThread, DEFAULT_RUNTIME_CONFIG, type RuntimeConfig } from "./runtime_records.ts";
import { type Clock, realClock } from "../proto/clock.ts";
import { CellRuns } from "./runtime_runs.ts";
import { ParkedCellWatchdog } from "./runtime_watchdog.ts";
import { rehearseMainThread } from "./runtime_rehearsal.ts";

export { RETIRE_AFTER_CELLS } from "./runtime_pool.ts";
export { type CellWorkerThread, DEFAULT_RUNTIME_CONFIG, type RuntimeConfig } from "./runtime_records.ts";

/** How long an exit waits for a cell's write in progress before it exits anyway. */
const EXIT_FLUSH_MS = 1_000;
/** The runtime reads host frames in chunks of up to this many bytes. */
const STDIN_CHUNK_BYTES = 65_536;

/** Where host frames come from: `Deno.stdin`, or anything that reads like it. */
export interface RuntimeInput {
  /** Reads into `buffer`; the bytes read, or `null` at EOF. */
  read(buffer: Uint8Array): Promise<number | null>;
}

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
  /** Creates a cell worker's thread (default: a Worker on `cell.js` next to this module). */
  createWorker?: (heapMb: number) => CellWorkerThread;
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
  /** A cell worker serves at most this many cell runs (default {@link RETIRE_AFTER_CELLS}). */
  retireAfterCells?: number;
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
  readonly #exit: (code: number) => void;
  readonly #clock: Clock;
  readonly #output: FrameOutput;
  readonly #pool: CellWorkerPool;
  readonly #runs: CellRuns;
  readonly #watchdog: ParkedCellWatchdog;

  #config: RuntimeConfig = { ...DEFAULT_RUNTIME_CONFIG };
  /** The session's stored values (key → JSON text), as the host's store updates leave them. */
  readonly #store = new StoreReplica();
  #decoder: FrameDecoder | undefined;
  #exiting = false;

  /** @param options see {@link RuntimeOptions} */
  constructor(options: RuntimeOptions) {
    this.#input = options.input;
    this.#exit = options.exit;
    const clock = this.#clock = options.clock ?? realClock;
    const config = () => this.#config;
    const exiting = () => this.#exiting;
    const output = this.#output = new FrameOutput({
      write: options.output,
      clock,
      maxFrameBytes: () => this.#config.maxFrameBytes,
      onBroken: () => {
        this.#exiting = true;
        this.#exit(1); // the output is gone: so is the host
      },
    });
    const pool: CellWorkerPool = this.#pool = new CellWorkerPool({
      clock,
      createThread: options.createWorker,
      output,
      config,
      cellsWriteFrames: options.cellsWriteFrames ?? true,
      collectGarbage: options.collectGarbage ?? true,
      retireAfterCells: options.retireAfterCells ?? RETIRE_AFTER_CELLS,
      exiting,
      onExit: (run): void => runs.reportExit(run),
      anyRunning: (): boolean => runs.anyRunning(),
      rehearse: () => rehearseMainThread(this.#codec, this.#config.maxFrameBytes),
    });
    const runs: CellRuns = this.#runs = new CellRuns({
      clock,
      pool,
      output,
      config,
      store: () => this.#store.start(),
      onStarted: () => this.#watchdog.arm(),
      background: (task, what) => this.#background(task, what),
    });
    this.#watchdog = new ParkedCellWatchdog({
      clock,
      cpuMicros: options.cpuMicros ?? (() => {
        const usage = process.cpuUsage();
        return usage.user + usage.system;
      }),
      rssBytes: options.rssBytes ?? (() => Deno.memoryUsage().rss),
      config,
      runs: () => runs.values(),
      overCredit: (run) => runs.overCredit(run),
      writing: (run) => output.isLockedBy(run.worker.sinkId),
      abort: (run) => runs.abort(run.id, "heap_limit"),
    });
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
    this.#pool.armPrewarm();
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
      case "storeUpdate":
        return this.#updateStore(message.storeUpdate!);
      case "startCell":
        return this.#background(this.#runs.start(message.startCell!), "failed to start cell");
      case "toolResult": {
        const r = message.toolResult!;
        const result: CellControl = r.errorMessage !== undefined
          ? { t: "toolResult", id: r.runtimeToolCallId, error: r.errorMessage, cell: r.cellId }
          : { t: "toolResult", id: r.runtimeToolCallId, json: r.outputJson ?? "null", cell: r.cellId };
        return this.#runs.postToCell(r.cellId, result);
      }
      case "stopCell":
        return this.#runs.stop(message.stopCell!.cellId);
      case "credit":
        return this.#runs.credit(message.credit!.cellId, message.credit!.events ?? 0);
      case "shutdown":
        return this.#background(this.#shutdown(), "failed to shut down");
      case "ping":
        // Liveness: answered by this thread, whatever the cells do; after a StopCell, once the
        // stopped cell confirmed unless it runs code (see `CellRuns.answer`).
        return this.#runs.answer(() => this.#output.send({ pong: { seq: message.ping!.seq ?? 0 } }));
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
    this.#output.send({ runtimeFault: { detail } });
    return this.#exitAfterFlush(1);
  }

  /**
   * Writes a complete frame to the host, in order with this thread's own frames and under the
   * stream lock.
   *
   * @param frame the frame's bytes, header included
   */
  protected writeFrame(frame: Uint8Array): void {
    this.#output.queue(frame);
  }

  /**
   * Gives up on a cell that did not confirm its stop (in-process isolation has no hard stop, SPEC
   * §9.8): nothing more of it is forwarded, no `exited` is sent (the host has ended the cell), and
   * its cell worker is terminated and unreferenced. Deno's `terminate()` does not stop a spinning
   * Worker: it may keep a core busy until the process exits, but it no longer keeps the process
   * alive.
   *
   * @param cellId the cell
   */
  abandonCell(cellId: string): void {
    this.#runs.abandon(cellId);
  }

  /** Abandons every cell and the spare (the in-process runtime's end). */
  dispose(): void {
    this.#exiting = true;
    for (const run of [...this.#runs.values()]) this.#runs.abandon(run.id);
    this.#pool.dispose();
  }

  /**
   * Ends a running cell's worker without its result: the host gets `exited` with `reason`. The
   * heap-limit watchdog ends cells this way.
   *
   * @param cellId the cell
   * @param reason the exit reason
   * @param detail the exit's detail, if any
   */
  protected abortCell(cellId: string, reason: "heap_limit" | "fault", detail?: string): void {
    this.#runs.abort(cellId, reason, detail);
  }

  /** Runs `task` without waiting for it: its failure is a `RuntimeFault` (`what: error`). */
  #background(task: Promise<void>, what: string): void {
    task.catch((error) => this.fail(`${what}: ${error}`));
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
    this.#pool.configured();
  }

  /** A host `StoreUpdate`: the stored values the next cell runs start from. */
  #updateStore(update: NonNullable<HostToWorker["storeUpdate"]>): void {
    this.#store.update(update.reset === true, update.entries ?? []);
  }

  async #exitAfterFlush(code: number): Promise<void> {
    if (this.#exiting) return;
    this.#exiting = true;
    const deadline = this.#clock.now() + EXIT_FLUSH_MS;
    this.#output.flush();
    while (this.#output.hasPending && this.#clock.now() < deadline) {
      await new Promise<void>((resolve) => this.#clock.setTimeout(resolve, RETRY_MS));
      this.#output.flush();
    }
    this.#exit(code);
  }

  async #shutdown(): Promise<void> {
    this.#runs.drainAll();
    return await this.#exitAfterFlush(0);
  }
}

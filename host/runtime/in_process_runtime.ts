/**
 * In-process isolation (SPEC §9.8): a session runtime inside the host process. The runtime is the
 * real one (`worker/runtime.ts`, the class the subprocess runs), its cells are `node:worker_threads`
 * Workers of the host process on the bundled cell bootstrap (`cell.js` in the host's runtime
 * directory), and the host talks to it over an in-memory byte stream carrying the same frames,
 * encoded and bounded by `maxWorkerFrameBytes` exactly as on the subprocess's pipes. It is the
 * production twin of the test fake `FakeRuntime` (`host/testing.ts`).
 *
 * Differences from a subprocess (SPEC §9.8):
 * - no hard stop: `hardStop` is false, and a cell that does not confirm a cooperative stop is
 *   abandoned ({@link RuntimeTransport.abandonCell}); its Worker may keep a core busy until the
 *   host exits, but no longer keeps the process alive;
 * - no OS process: `pid` is undefined, `kill()` abandons every cell at once;
 * - a cell Worker whose thread outlives its `terminate()` (a cell that left a promise chain spinning
 *   after it completed, or one abandoned) cannot be stopped: one still running
 *   {@link LEFT_RUNNING_CHECK_MS} later that burns CPU (`runtimeIdleCpuPercent`) is reported through
 *   `watchIdleCpu`, and the session counts and logs it; it runs until the host exits;
 * - cells run with the host's permissions: this mode is not for untrusted code.
 *
 * @module
 */
import process from "node:process";
import { Worker } from "node:worker_threads";
import { encodeFrame, FrameDecoder, FrameError } from "../../proto/frame_codec.ts";
import type { HostToWorker, WorkerCodec, WorkerToHost } from "../../proto/worker_codec.ts";
import { type CellWorkerThread, Runtime, type RuntimeInput } from "../../worker/runtime.ts";
import { refusedAfterEnd, type RuntimeEnd, type RuntimeTransport } from "./runtime_transport.ts";
import { type IdleCpuWatch, type IdleCpuWatchdog, workerThreadTid } from "./cpu_watchdog.ts";

/** How long after its `terminate()` a cell Worker's thread that still exists is watched for CPU. */
export const LEFT_RUNNING_CHECK_MS = 1_000;

/** The failure of a platform without what in-process isolation needs (SPEC §9.8). */
export const IN_PROCESS_UNSUPPORTED = "code-mode in-process isolation needs node:worker_threads and node:vm";

/** The start-up warning of in-process isolation (SPEC §9.8). */
export const IN_PROCESS_WARNING =
  "code-mode in-process isolation is not safe for untrusted code: cells run in Workers of the host " +
  "process with the host's permissions, and a cell that ignores a stop cannot be stopped";

/**
 * Whether this platform has `node:worker_threads` Workers and `node:vm` contexts.
 *
 * @param getBuiltin looks up a built-in module (default `process.getBuiltinModule`)
 * @returns whether in-process isolation can run here
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(inProcessSupported(), true);
 * assert.equal(inProcessSupported(() => undefined), false);
 * ```
 */
export function inProcessSupported(
  getBuiltin: (name: string) => unknown = (name) =>
    (process as { getBuiltinModule?: (n: string) => unknown }).getBuiltinModule?.(name),
): boolean {
  try {
    const threads = getBuiltin("node:worker_threads") as { Worker?: unknown } | undefined;
    const vm = getBuiltin("node:vm") as { createContext?: unknown } | undefined;
    return typeof threads?.Worker === "function" && typeof vm?.createContext === "function";
  } catch {
    return false;
  }
}

/** Options of {@link InProcessRuntime}. */
export interface InProcessRuntimeOptions {
  codec: WorkerCodec;
  /** The host's runtime directory; cells run its `cell.js`. */
  runtimeDir: string;
  maxWorkerFrameBytes: number;
  workerKillGraceMs: number;
  /** Watches cell Worker threads that outlive their `terminate()` (`runtimeIdleCpuPercent`); none when off. */
  cpuWatchdog?: IdleCpuWatchdog;
}

let nextId = 0;

/** Host → runtime bytes: an unbounded in-memory pipe the runtime reads like stdin. */
class BytePipe implements RuntimeInput {
  #chunks: Uint8Array[] = [];
  #closed = false;
  #waiter: (() => void) | undefined;

  write(bytes: Uint8Array): void {
    if (this.#closed) throw new Error("code-mode session runtime is gone");
    this.#chunks.push(bytes);
    this.#wake();
  }

  close(): void {
    this.#closed = true;
    this.#wake();
  }

  #wake(): void {
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.();
  }

  async read(buffer: Uint8Array): Promise<number | null> {
    while (this.#chunks.length === 0) {
      if (this.#closed) return null;
      await new Promise<void>((resolve) => this.#waiter = resolve);
    }
    const chunk = this.#chunks[0];
    const n = Math.min(chunk.length, buffer.length);
    buffer.set(chunk.subarray(0, n));
    if (n === chunk.length) this.#chunks.shift();
    else this.#chunks[0] = chunk.subarray(n);
    return n;
  }
}

/**
 * Worker events after which it no longer loads its module: its first message (the cell bootstrap
 * posts once it has loaded), an error or its exit. (`online` comes before the module has loaded.)
 */
const LOAD_ENDS = ["message", "error", "exit"] as const;

/** One in-process session runtime (see the module doc). */
export class InProcessRuntime implements RuntimeTransport {
  readonly id = ++nextId;
  readonly pid: number | undefined = undefined;
  readonly hardStop = false;
  readonly ready: Promise<void> = Promise.resolve();
  readonly ended: Promise<RuntimeEnd>;
  onMessage: (message: WorkerToHost) => void = () => {};

  readonly #options: InProcessRuntimeOptions;
  readonly #input = new BytePipe();
  readonly #decoder: FrameDecoder;
  readonly #runtime: Runtime;
  readonly #ended = Promise.withResolvers<RuntimeEnd>();
  #alive = true;
  #stopping = false;
  /** Workers still loading their module (see {@link InProcessRuntime.#cellThread}). */
  readonly #loading = new Set<Promise<void>>();
  #failure: { kind: "protocol" | "fault"; detail: string } | undefined;
  /** Where a Worker thread left running is reported ({@link InProcessRuntime.watchIdleCpu}). */
  #onLeftRunning: ((cpuPercent: number) => void) | undefined;
  /** Checks of terminated Workers' threads, and watches of those that outlived it. */
  readonly #leftRunningChecks = new Set<ReturnType<typeof setTimeout>>();
  readonly #leftRunning = new Set<IdleCpuWatch>();

  /** @param options see {@link InProcessRuntimeOptions} */
  constructor(options: InProcessRuntimeOptions) {
    this.#options = options;
    this.ended = this.#ended.promise;
    this.#decoder = new FrameDecoder(options.maxWorkerFrameBytes);
    const cellUrl = new URL(`file://${options.runtimeDir.replace(/\/+$/, "")}/cell.js`);
    this.#runtime = new Runtime({
      input: this.#input,
      output: (bytes) => this.#receive(bytes),
      exit: (code) => this.#finish(code),
      createWorker: (heapMb) => this.#cellThread(cellUrl, heapMb),
      cellsWriteFrames: false,
      collectGarbage: false,
    });
    this.#runtime.run().catch((error) => this.#protocolFailure(`runtime failed: ${error}`));
  }

  get alive(): boolean {
    return this.#alive && !this.#stopping;
  }

  send(message: HostToWorker): Promise<void> {
    if (!this.#alive) return Promise.reject(new Error("session runtime has ended"));
    try {
      const frame = encodeFrame(
        this.#options.codec.encodeHostToWorker(message),
        this.#options.maxWorkerFrameBytes,
      );
      this.#input.write(frame);
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(error);
    }
  }

  watchIdleCpu(onBusy: (cpuPercent: number) => void): void {
    this.#onLeftRunning = onBusy;
  }

  abandonCell(cellId: string): void {
    this.#runtime.abandonCell(cellId);
  }

  async stop(): Promise<RuntimeEnd> {
    if (this.#stopping || !this.#alive) return await this.ended;
    this.#stopping = true;
    this.send({ shutdown: {} }).catch(refusedAfterEnd);
    this.#input.close();
    const timer = setTimeout(() => this.#finish(null), this.#options.workerKillGraceMs);
    try {
      return await this.ended;
    } finally {
      clearTimeout(timer);
    }
  }

  async kill(): Promise<RuntimeEnd> {
    this.#stopping = true;
    this.#finish(null);
    return await this.ended;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  /**
   * A cell Worker whose `terminate()` waits until it has loaded its module (its first message),
   * and which the runtime's end waits for (at most `workerKillGraceMs`). Under `deno test` (which type-checks a Worker's module as it loads), a Worker
   * terminated while still loading `cell.js` kept loading, and once the host had removed the
   * runtime directory it reported `Cannot find module …/cell.js` on stderr.
   */
  #cellThread(url: URL, heapMb: number): CellWorkerThread {
    const worker = new Worker(url, { resourceLimits: { maxOldGenerationSizeMb: heapMb } });
    const loaded: Promise<void> = new Promise((resolve) => {
      const done = () => {
        for (const event of LOAD_ENDS) worker.off(event, done);
        this.#loading.delete(loaded);
        resolve();
      };
      for (const event of LOAD_ENDS) worker.on(event, done);
    });
    this.#loading.add(loaded);
    const terminate = worker.terminate.bind(worker);
    worker.terminate = () => {
      this.#checkLeftRunning(worker.threadId);
      return loaded.then(terminate);
    };
    return worker;
  }

  /**
   * Deno's `terminate()` does not stop a thread that runs JavaScript: a Worker's thread that still
   * exists {@link LEFT_RUNNING_CHECK_MS} later is watched, and reported if it burns CPU.
   */
  #checkLeftRunning(threadId: number): void {
    const watchdog = this.#options.cpuWatchdog;
    if (!watchdog || !this.#alive) return;
    const timer = setTimeout(() => {
      this.#leftRunningChecks.delete(timer);
      const tid = workerThreadTid(threadId);
      if (tid === undefined || !this.#alive) return;
      const watch = watchdog.watchThread(tid, (cpuPercent) => {
        this.#leftRunning.delete(watch);
        if (this.#alive) this.#onLeftRunning?.(cpuPercent);
      });
      this.#leftRunning.add(watch);
    }, LEFT_RUNNING_CHECK_MS);
    Deno.unrefTimer(timer);
    this.#leftRunningChecks.add(timer);
  }

  /** Runtime → host bytes: decoded and dispatched at once, as the subprocess's reader does. */
  #receive(bytes: Uint8Array): void {
    if (!this.#alive) return;
    try {
      for (const frame of this.#decoder.push(bytes)) {
        let message: WorkerToHost;
        try {
          message = this.#options.codec.decodeWorkerToHost(frame);
        } catch (error) {
          throw new FrameError(`undecodable frame: ${(error as Error).message}`);
        }
        if (message.message === undefined) throw new FrameError("an envelope with no message set");
        if (message.ready) throw new FrameError("an unexpected Ready frame");
        if (message.runtimeFault) {
          this.#failure ??= { kind: "fault", detail: message.runtimeFault.detail ?? "" };
        }
        this.onMessage(message);
        if (!this.#alive) return;
      }
    } catch (error) {
      this.#protocolFailure(error instanceof FrameError ? error.message : String(error));
    }
  }

  #protocolFailure(detail: string): void {
    if (!this.#alive) return;
    if (!this.#stopping) this.#failure ??= { kind: "protocol", detail };
    this.#finish(null);
  }

  /** The runtime exited (`code`), or the host ended it (`null`): abandon its cells, report the end. */
  #finish(code: number | null): void {
    if (!this.#alive) return;
    this.#alive = false;
    this.#input.close();
    this.#runtime.dispose();
    for (const timer of this.#leftRunningChecks) clearTimeout(timer);
    for (const watch of this.#leftRunning) watch.stop();
    const base = { code, signal: null, stderrTail: "" };
    const end: RuntimeEnd = this.#failure
      ? { kind: this.#failure.kind, byHost: false, detail: this.#failure.detail, ...base }
      : { kind: "exit", byHost: this.#stopping, ...base };
    // The runtime directory may go once no Worker is still loading from it (a bounded wait).
    if (this.#loading.size === 0) return this.#ended.resolve(end);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<RuntimeEnd>((resolve) =>
      timer = setTimeout(() => resolve(end), this.#options.workerKillGraceMs)
    );
    const loaded = Promise.all(this.#loading).then(() => end);
    this.#ended.resolve(Promise.race([loaded, late]).finally(() => clearTimeout(timer)));
  }
}

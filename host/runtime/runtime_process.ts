/**
 * Spawns and supervises one session runtime subprocess (SPEC §9.3, §3.5).
 *
 * - Frames on stdout are decoded and handed to `onMessage` at once; nothing here waits on a
 *   session queue, so a slow consumer never stalls the reader.
 * - The process status promise, stdout EOF and frame errors are all watched, so a runtime that
 *   dies on its own is reported immediately through `ended`.
 * - stderr is kept in a ring buffer of `stderrTailBytes` for the crash log.
 * - The runtime's working directory (and its `DENO_DIR`) is removed once the process is reaped.
 *
 * @module
 */
import { TimeSlice } from "../../proto/time_slice.ts";
import { encodeFrame, FrameError, readFrames } from "../../proto/frame_codec.ts";
import {
  type HostToWorker,
  WORKER_PROTOCOL_VERSION,
  type WorkerCodec,
  type WorkerToHost,
} from "../../proto/worker_codec.ts";
import type { Logger } from "../ops/log.ts";
import { refusedAfterEnd, type RuntimeEnd, type RuntimeTransport } from "./runtime_transport.ts";
import { buildRuntimeCommand } from "./runtime_command.ts";
import { type MemoryWatchdog, processTree } from "./memory_watchdog.ts";
import type { IdleCpuWatch, IdleCpuWatchdog } from "./cpu_watchdog.ts";
import type { OsSandbox } from "./os_sandbox.ts";
import { sandboxedSignal } from "./os_sandbox_command.ts";

/** Options of {@link spawnRuntimeProcess}. */
export interface RuntimeProcessOptions {
  codec: WorkerCodec;
  deno: string;
  prefix?: readonly string[];
  /** Argv that starts this program as a session runtime (see `buildRuntimeCommand`). */
  self?: readonly string[];
  runtimeDir: string;
  /** Parent of per-runtime work dirs (`<TMPDIR>/code-mode-host`). */
  workParent: string;
  workerMainHeapMb: number;
  maxWorkerFrameBytes: number;
  stderrTailBytes: number;
  workerKillGraceMs: number;
  /** Watches the runtime's resident memory (`runtimeMemoryMb`); none when the bound is off. */
  memoryWatchdog?: MemoryWatchdog;
  /** Judges the runtime's CPU while its session has no live cell (`runtimeIdleCpuPercent`); none when off. */
  cpuWatchdog?: IdleCpuWatchdog;
  /** Run the runtime inside this bubblewrap sandbox (`--os-sandbox`); none runs it directly. */
  sandbox?: OsSandbox;
  /**
   * The runtime's Deno permission flags (default `--allow-read=<runtimeDir>`, see
   * `RuntimeCommandOptions.permissions`); the host never sets them, a {@link RuntimeFactory} may.
   */
  permissions?: readonly string[];
  /** Expected Deno version in `Ready` (default: this process's). */
  denoVersion?: string;
  /** Expected protocol version in `Ready` (default {@link WORKER_PROTOCOL_VERSION}). */
  protocolVersion?: number;
  /** `runtimeUnresponsiveMs`: an unanswered ping this old kills the runtime; 0 or absent = no pings. */
  unresponsiveMs?: number;
  /** Where housekeeping failures go (a work directory left behind); default: nowhere. */
  log?: Logger;
}

/**
 * Makes one session runtime from what the host resolved for it: an extension point of the host
 * (`HostExtensions.runtimeFactory`). The host calls it for every runtime it starts — warm ones, a
 * session's, a restart's replacement — with the options {@link spawnRuntimeProcess} takes, and
 * owns what it returns (it stops or kills it, and awaits its `ended`).
 *
 * - The default is {@link spawnRuntimeProcess} (or, with in-process isolation, a runtime inside the
 *   host's process).
 * - A factory may wrap the default with other options (e.g. Deno `permissions` for a patched
 *   runtime that needs them), or return any {@link RuntimeTransport} that speaks the worker protocol.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { type RuntimeFactory, spawnRuntimeProcess } from "./runtime_process.ts";
 * const readsData: RuntimeFactory = (options) =>
 *   spawnRuntimeProcess({ ...options, permissions: [`--allow-read=${options.runtimeDir},/srv/data`] });
 * assert.equal(typeof readsData, "function");
 * ```
 */
export type RuntimeFactory = (options: RuntimeProcessOptions) => RuntimeTransport;

/**
 * Liveness ticks per unresponsive limit: a ping goes out on a tick while none is unanswered, and
 * one unanswered past the limit on two ticks in a row kills the runtime, so a stopped runtime is
 * found within 1.5 × the limit (and never before it).
 */
const PINGS_PER_LIMIT = 4;

/**
 * A wait this long for the runtime's next frame (ms) means the reader waited for the pipe (its
 * event loop ran others meanwhile), not that the read settled at once: its time slice starts anew.
 */
const WAITED_MS = 1;

let nextId = 0;

/** `ready`'s rejection is for whoever awaits it; this marks it handled for a runtime nobody asked. */
function reportedByReady(_error: unknown): void {}

/** A failed write is reported to its sender (`send` returns it); the write chain goes on. */
function reportedToSender(_error: unknown): void {}

/** A batch of {@link FrameBatches} larger than this is written frame by frame, not copied into one. */
const BATCH_COPY_MAX_BYTES = 256 * 1024;

/**
 * How long {@link FrameBatches} holds a frame that takes effect only with the runtime's next cell
 * (`Configure`, `StoreUpdate`) when no other frame follows it.
 */
const HOLD_MS = 10;

/** One write of {@link FrameBatches}: its frames, and the promise their senders wait for. */
interface Batch {
  frames: Uint8Array[];
  bytes: number;
  done: PromiseWithResolvers<void>;
  /** Whether its write is queued (it may still gather frames until the write begins). */
  queued: boolean;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * Writes frames in order, those sent while the last write was under way or in the same turn as
 * one write. A frame sent with `hold` waits for the next frame without it, or {@link HOLD_MS}: a
 * handover's frames (the old session's reset, the new one's `Configure` and stored values) then
 * leave with the new session's first `StartCell`. Each was a pipe write of its own, a system call
 * on the host's thread (~0.2 ms on the 2-core VM of bench/README.md) and a wake-up of the
 * runtime's reader.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { FrameBatches } from "./runtime_process.ts";
 * const writes: number[][] = [];
 * const frames = new FrameBatches((bytes) => {
 *   writes.push([...bytes]);
 *   return Promise.resolve();
 * });
 * const held = frames.write(new Uint8Array([1]), true);
 * await Promise.all([held, frames.write(new Uint8Array([2, 3]))]);
 * assert.deepEqual(writes, [[1, 2, 3]]);
 * ```
 */
export class FrameBatches {
  #write: (bytes: Uint8Array) => Promise<void>;
  /** The batch whose write has not begun: frames sent now join it. */
  #next: Batch | undefined;
  #chain: Promise<void> = Promise.resolve();

  /** @param write writes bytes (the runtime's stdin); each call waits for the one before */
  constructor(write: (bytes: Uint8Array) => Promise<void>) {
    this.#write = write;
  }

  /**
   * Queues a frame.
   *
   * @param frame an encoded frame
   * @param hold the frame may wait for the next one (at most {@link HOLD_MS})
   * @returns settles when its batch is written; rejects with that write's failure
   */
  write(frame: Uint8Array, hold = false): Promise<void> {
    const batch = this.#next ??= {
      frames: [],
      bytes: 0,
      done: Promise.withResolvers<void>(),
      queued: false,
      timer: undefined,
    };
    batch.frames.push(frame);
    batch.bytes += frame.length;
    if (!hold) this.#queue(batch);
    else if (!batch.queued) batch.timer ??= setTimeout(() => this.#queue(batch), HOLD_MS);
    return batch.done.promise;
  }

  #queue(batch: Batch): void {
    if (batch.queued) return;
    batch.queued = true;
    clearTimeout(batch.timer);
    const written = this.#chain.then(() => {
      if (this.#next === batch) this.#next = undefined;
      return this.#flush(batch.frames, batch.bytes);
    });
    written.then(batch.done.resolve, batch.done.reject);
    // The next batch waits for this one, not for its success: its senders see the failure.
    this.#chain = written.catch(reportedToSender);
  }

  async #flush(frames: Uint8Array[], bytes: number): Promise<void> {
    if (frames.length === 1) return await this.#write(frames[0]);
    if (bytes > BATCH_COPY_MAX_BYTES) {
      for (const frame of frames) await this.#write(frame);
      return;
    }
    const joined = new Uint8Array(bytes);
    let at = 0;
    for (const frame of frames) {
      joined.set(frame, at);
      at += frame.length;
    }
    await this.#write(joined);
  }
}

/** Keeps the last `capacity` bytes written to it. */
class TailBuffer {
  #chunks: Uint8Array[] = [];
  #size = 0;
  #capacity: number;
  constructor(capacity: number) {
    this.#capacity = capacity;
  }
  push(chunk: Uint8Array): void {
    this.#chunks.push(chunk.slice());
    this.#size += chunk.length;
    while (this.#size - this.#chunks[0].length >= this.#capacity) {
      this.#size -= this.#chunks.shift()!.length;
    }
  }
  text(): string {
    const all = new Uint8Array(this.#size);
    let at = 0;
    for (const c of this.#chunks) {
      all.set(c, at);
      at += c.length;
    }
    const start = Math.max(0, all.length - this.#capacity);
    return new TextDecoder().decode(all.subarray(start));
  }
}

/**
 * Spawns a runtime subprocess. The returned transport's `ready` settles with the `Ready` frame.
 *
 * @param options see {@link RuntimeProcessOptions}
 * @returns the supervised runtime
 */
export function spawnRuntimeProcess(options: RuntimeProcessOptions): RuntimeTransport {
  return new RuntimeProcess(options);
}

class RuntimeProcess implements RuntimeTransport {
  readonly id = ++nextId;
  readonly ready: Promise<void>;
  readonly ended: Promise<RuntimeEnd>;
  onMessage: (message: WorkerToHost) => void = () => {};

  #options: RuntimeProcessOptions;
  #child: Deno.ChildProcess;
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #frames: FrameBatches;
  #stderr: TailBuffer;
  #workDir: string;
  #stopping = false;
  #alive = true;
  #failure:
    | { kind: "protocol" | "fault" | "unresponsive"; detail: string }
    | { kind: "memory"; limitMb: number }
    | undefined;
  #unwatch: () => void = () => {};
  /** The idle CPU watch, once a session asked for it ({@link RuntimeProcess.watchIdleCpu}). */
  #cpuWatch: IdleCpuWatch | undefined;
  /** Who {@link RuntimeProcess.watchIdleCpu} reports to: the session that asked last. */
  #onBusy: ((cpuPercent: number) => void) | undefined;
  /** Cells are running (`setActive`): the liveness timer runs. */
  #active = false;
  #pingTimer: ReturnType<typeof setTimeout> | undefined;
  #pingSeq = 0;
  /** When the reader last took a frame from this runtime (its pipe is being drained while recent). */
  #lastFrameAt = 0;
  /** The unanswered ping: its seq and when it was sent. */
  #pingOut: { seq: number; at: number; overdue?: boolean } | undefined;
  /** Unanswered {@link RuntimeProcess.flush} pings, by seq (the liveness pings' counter). */
  #flushes = new Map<number, (answered: boolean) => void>();
  #resolveReady!: () => void;
  #rejectReady!: (error: Error) => void;
  #gotReady = false;

  constructor(options: RuntimeProcessOptions) {
    this.#options = options;
    this.#stderr = new TailBuffer(options.stderrTailBytes);
    // Unique even when several hosts share one process (parallel tests).
    this.#workDir = Deno.makeTempDirSync({ dir: options.workParent, prefix: `w-${Deno.pid}-${this.id}-` });
    Deno.mkdirSync(`${this.#workDir}/deno_dir`, { mode: 0o700 });
    const command = buildRuntimeCommand({
      deno: options.sandbox?.deno ?? options.deno,
      prefix: options.prefix,
      sandbox: options.sandbox,
      permissions: options.permissions,
      self: options.self,
      runtimeDir: options.runtimeDir,
      workDir: this.#workDir,
      workerMainHeapMb: options.workerMainHeapMb,
    });
    this.#child = new Deno.Command(command.command, {
      args: command.args,
      env: command.env,
      clearEnv: true,
      cwd: command.cwd,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#writer = this.#child.stdin.getWriter();
    this.#frames = new FrameBatches((bytes) => this.#writer.write(bytes));
    const watchdog = options.memoryWatchdog;
    if (watchdog) {
      this.#unwatch = watchdog.watch(this.#child.pid, () => {
        if (this.#stopping || !this.#alive) return;
        this.#failure ??= { kind: "memory", limitMb: watchdog.limitBytes / 1048576 };
        this.#signal("SIGKILL");
      });
    }
    this.ready = new Promise((resolve, reject) => {
      this.#resolveReady = resolve;
      this.#rejectReady = reject;
    });
    // `ready` rejects for whoever awaits it (the session manager logs a spare's failure); one that
    // nobody awaited before the runtime was dropped is no unhandled rejection.
    this.ready.catch(reportedByReady);
    this.ended = this.#supervise(this.#pumpStderr());
  }

  /** The Deno process inside a sandbox without a prefix (found at `Ready`); else the spawned one. */
  #runtimePid: number | undefined;

  get pid(): number | undefined {
    return this.#runtimePid ?? this.#child.pid;
  }

  get alive(): boolean {
    return this.#alive && !this.#stopping;
  }

  send(message: HostToWorker): Promise<void> {
    if (!this.#alive) return Promise.reject(new Error("session runtime has ended"));
    const frame = encodeFrame(
      this.#options.codec.encodeHostToWorker(message),
      this.#options.maxWorkerFrameBytes,
    );
    // A `Configure` or a `StoreUpdate` takes effect with the runtime's next cell: it may wait
    // for that cell's `StartCell` (or any other frame).
    return this.#frames.write(frame, message.configure !== undefined || message.storeUpdate !== undefined);
  }

  async stop(): Promise<RuntimeEnd> {
    if (this.#stopping || !this.#alive) return await this.ended;
    this.#stopping = true;
    const [end] = await Promise.all([this.ended, this.#closeInput(), this.#escalate()]);
    return end;
  }

  /** `Shutdown`, then EOF on stdin; a runtime gone meanwhile refuses them, and `ended` says why. */
  async #closeInput(): Promise<void> {
    try {
      await this.send({ shutdown: {} });
      await this.#writer.close();
    } catch (error) {
      refusedAfterEnd(error);
    }
  }

  /** SIGTERM after a grace period, SIGKILL after another, unless the runtime exited first. */
  async #escalate(): Promise<void> {
    const grace = this.#options.workerKillGraceMs;
    if (await this.#exitsWithin(grace)) return;
    this.#signal("SIGTERM");
    if (await this.#exitsWithin(grace)) return;
    this.#signal("SIGKILL");
  }

  async kill(): Promise<RuntimeEnd> {
    this.#stopping = true;
    this.#signal("SIGKILL");
    return await this.ended;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  setActive(active: boolean, settleMs?: number): void {
    this.#active = active;
    this.#cpuWatch?.setIdle(!active, settleMs);
    if (active) this.#armPing();
  }

  watchIdleCpu(onBusy: (cpuPercent: number) => void): void {
    // The latest caller is told: a runtime handed over to another session (`runtimeHandover`).
    this.#onBusy = onBusy;
    const watchdog = this.#options.cpuWatchdog;
    if (!watchdog || this.#cpuWatch || !this.#alive || this.#stopping) return;
    // The whole tree from the spawned process: bubblewrap's processes and a prefix's count too.
    this.#cpuWatch = watchdog.watch(this.#child.pid, (cpuPercent) => {
      if (this.#alive && !this.#stopping) this.#onBusy?.(cpuPercent);
    });
    this.#cpuWatch.setIdle(!this.#active);
  }

  /** One timer per runtime, armed while cells run or a ping is unanswered. */
  #armPing(): void {
    const limit = this.#options.unresponsiveMs ?? 0;
    if (limit <= 0 || this.#pingTimer !== undefined || !this.#alive || this.#stopping) return;
    if (!this.#active && this.#pingOut === undefined) return;
    this.#pingTimer = setTimeout(this.#onPingTimer, Math.max(1, Math.floor(limit / PINGS_PER_LIMIT)));
    Deno.unrefTimer(this.#pingTimer);
  }

  readonly #onPingTimer = (): void => {
    this.#pingTimer = undefined;
    if (!this.#alive || this.#stopping) return;
    const now = performance.now();
    const out = this.#pingOut;
    if (out !== undefined) {
      const limit = this.#options.unresponsiveMs!;
      if (now - out.at >= limit) {
        // Overdue twice: once, and again a tick later, after this process has read its pipes
        // (a host that stalled past the limit has a Pong waiting unread, and is not misled). A
        // reader still taking frames from this runtime, in time slices, may have the Pong behind
        // them (a flood of cell output): judged once it has caught up.
        const draining = now - this.#lastFrameAt < Math.max(1, Math.floor(limit / PINGS_PER_LIMIT));
        if (out.overdue && !draining) {
          this.#failure ??= {
            kind: "unresponsive",
            detail: `no answer to a liveness ping in ${Math.round(now - out.at)} ms`,
          };
          this.#signal("SIGKILL");
          return;
        }
        out.overdue = true;
      }
    } else if (this.#active && this.#gotReady) {
      const seq = this.#pingSeq = (this.#pingSeq + 1) >>> 0;
      this.#pingOut = { seq, at: now };
      this.send({ ping: { seq } }).catch(refusedAfterEnd);
    }
    this.#armPing();
  };

  #onPong(seq: number): void {
    if (this.#pingOut?.seq === seq) this.#pingOut = undefined;
    const flushed = this.#flushes.get(seq);
    if (flushed) {
      this.#flushes.delete(seq);
      flushed(true);
    }
  }

  flush(): Promise<boolean> {
    if (!this.#alive || this.#stopping) return Promise.resolve(false);
    const seq = this.#pingSeq = (this.#pingSeq + 1) >>> 0;
    const answer = Promise.withResolvers<boolean>();
    this.#flushes.set(seq, answer.resolve);
    // A refusal means the runtime has ended: its end answers `false` below.
    this.send({ ping: { seq } }).catch(refusedAfterEnd);
    return answer.promise;
  }

  #signal(signal: Deno.Signal): void {
    try {
      this.#child.kill(signal);
    } catch {
      // Already gone.
    }
  }

  async #exitsWithin(ms: number): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<false>((resolve) => timer = setTimeout(() => resolve(false), ms));
    const result = await Promise.race([this.#child.status.then(() => true), timeout]);
    clearTimeout(timer);
    return result;
  }

  async #pumpStderr(): Promise<void> {
    try {
      for await (const chunk of this.#child.stderr) this.#stderr.push(chunk);
    } catch {
      // The pipe broke with the process; the status tells the rest.
    }
  }

  #accept(message: WorkerToHost): void {
    if (!this.#gotReady) {
      const ready = message.ready;
      if (!ready) throw new FrameError("the first frame was not Ready");
      this.#gotReady = true;
      // The sandbox is transparent: its bubblewrap process is looked through. A
      // `--worker-prefix` process stays the runtime's pid, as without the sandbox.
      if (this.#options.sandbox && !this.#options.prefix?.length) {
        this.#runtimePid = processTree(this.#child.pid).at(-1);
      }
      const wantDeno = this.#options.denoVersion ?? Deno.version.deno;
      const wantProtocol = this.#options.protocolVersion ?? WORKER_PROTOCOL_VERSION;
      if (ready.protocolVersion !== wantProtocol || ready.denoVersion !== wantDeno) {
        const detail = `runtime reported deno ${ready.denoVersion} protocol ${ready.protocolVersion}; ` +
          `host expects deno ${wantDeno} protocol ${wantProtocol}`;
        this.#rejectReady(new Error(`code-mode session runtime version mismatch: ${detail}`));
        this.#stopping = true;
        this.#signal("SIGKILL");
        return;
      }
      this.#resolveReady();
      return;
    }
    // A cell event (nearly every frame) takes one comparison.
    if (message.message !== "cellEvent") {
      if (message.message === undefined) throw new FrameError("an envelope with no message set");
      if (message.ready) throw new FrameError("an unexpected Ready frame");
      if (message.pong) return this.#onPong(message.pong.seq ?? 0);
      if (message.runtimeFault) {
        this.#failure ??= { kind: "fault", detail: message.runtimeFault.detail ?? "" };
      }
    }
    this.onMessage(message);
  }

  async #readFrames(): Promise<void> {
    try {
      // A burst of frames (a cell's stored writes, say) is read as fast as the pipe gives it, and
      // its reads may settle without a turn of the event loop: yield one every slice. A frame that
      // the reader waited for starts a new slice: the slice is the burst's, not the time since the
      // last yield (which made every cell 10 ms after one yield through a 0 ms timer, ~1 ms on
      // Deno 2.9.6: back-to-back cells ran ~12% slower).
      const slice = new TimeSlice();
      let waitingSince = performance.now();
      for await (const frame of readFrames(this.#child.stdout, this.#options.maxWorkerFrameBytes)) {
        if (performance.now() - waitingSince >= WAITED_MS) slice.restart();
        let message: WorkerToHost;
        try {
          message = this.#options.codec.decodeWorkerToHost(frame);
        } catch (error) {
          throw new FrameError(`undecodable frame: ${(error as Error).message}`);
        }
        this.#accept(message);
        if (slice.over) {
          this.#lastFrameAt = performance.now();
          await slice.next();
        }
        waitingSince = performance.now();
      }
      // Orderly EOF. If the host did not ask for it, wait briefly for the status.
      if (!this.#stopping && !this.#failure && !(await this.#exitsWithin(500))) {
        this.#failure = { kind: "protocol", detail: "unexpected end of stream" };
        this.#signal("SIGKILL");
      }
    } catch (error) {
      if (!this.#stopping) {
        const detail = error instanceof FrameError ? error.message : String(error);
        this.#failure ??= { kind: "protocol", detail };
        this.#signal("SIGKILL");
      }
    }
  }

  async #supervise(stderr: Promise<void>): Promise<RuntimeEnd> {
    const reading = this.#readFrames();
    const status = await this.#child.status;
    this.#alive = false;
    this.#unwatch();
    this.#cpuWatch?.stop();
    clearTimeout(this.#pingTimer);
    this.#pingTimer = undefined;
    for (const flushed of this.#flushes.values()) flushed(false);
    this.#flushes.clear();
    if (!this.#gotReady) this.#rejectReady(new Error("session runtime exited before it was ready"));
    // Give the readers a moment to take what is already in the pipes (a RuntimeFault, say).
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([Promise.all([reading, stderr]), new Promise((r) => timer = setTimeout(r, 50))]);
    clearTimeout(timer);
    await this.#writer.close().catch(refusedAfterEnd);
    await Deno.remove(this.#workDir, { recursive: true }).catch((error) => {
      this.#options.log?.warn("session runtime work directory not removed", {
        error: String(error),
        path: this.#workDir,
      });
    });
    const signal = this.#options.sandbox ? sandboxedSignal(status.code, status.signal) : status.signal;
    const base = { code: status.code, signal, stderrTail: this.#stderr.text() };
    if (this.#failure?.kind === "memory") {
      return { kind: "memory", byHost: false, limitMb: this.#failure.limitMb, ...base };
    }
    if (this.#failure) {
      return { kind: this.#failure.kind, byHost: false, detail: this.#failure.detail, ...base };
    }
    return { kind: "exit", byHost: this.#stopping, ...base };
  }
}

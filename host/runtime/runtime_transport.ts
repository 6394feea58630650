/**
 * The host's view of one session runtime — the per-session Deno subprocess that runs the session's
 * cell workers — whatever carries its frames: the subprocess's pipes (`runtime_process.ts`), or an
 * in-memory stream to a runtime inside the host's process (`in_process_runtime.ts`, SPEC §9.8).
 *
 * @module
 */
import type { HostToWorker, WorkerToHost } from "../../proto/worker_codec.ts";

/** How a runtime ended. */
export type RuntimeEnd =
  /** The process exited (or was killed); `byHost` when the host stopped or killed it itself. */
  | {
    kind: "exit";
    byHost: boolean;
    code: number | null;
    signal: string | null;
    stderrTail: string;
  }
  /** The frame stream broke the protocol (the host killed the process). */
  | {
    kind: "protocol";
    byHost: false;
    detail: string;
    code: number | null;
    signal: string | null;
    stderrTail: string;
  }
  /** The host killed the runtime for exceeding `runtimeMemoryMb` (SPEC §3.5). */
  | {
    kind: "memory";
    byHost: false;
    /** The limit that was crossed, MiB. */
    limitMb: number;
    code: number | null;
    signal: string | null;
    stderrTail: string;
  }
  /** The runtime left a liveness ping unanswered past its limit (the host killed the process). */
  | {
    kind: "unresponsive";
    byHost: false;
    detail: string;
    code: number | null;
    signal: string | null;
    stderrTail: string;
  }
  /** The runtime reported a fault of its own main loop. */
  | {
    kind: "fault";
    byHost: false;
    detail: string;
    code: number | null;
    signal: string | null;
    stderrTail: string;
  };

/** One session runtime. */
export interface RuntimeTransport extends AsyncDisposable {
  /** A number unique in this process (a runtime subprocess names its work directory after it). */
  readonly id: number;
  /** OS process id, when there is one. */
  readonly pid: number | undefined;
  /** Resolves once `Ready` was accepted; rejects (with the version-mismatch message) otherwise. */
  readonly ready: Promise<void>;
  /** Resolves once the runtime is gone and reaped. Never rejects. */
  readonly ended: Promise<RuntimeEnd>;
  /** Whether the runtime has ended (or is being stopped by the host). */
  readonly alive: boolean;
  /** Receives every frame after `Ready`, in order, synchronously as it is decoded. */
  onMessage: (message: WorkerToHost) => void;
  /** Sends one frame; resolves when it was written to the pipe. Rejects if the runtime is gone. */
  send(message: HostToWorker): Promise<void>;
  /** Orderly stop (SPEC §9.3): `Shutdown`, close stdin, grace, SIGTERM, grace, SIGKILL, reap. */
  stop(): Promise<RuntimeEnd>;
  /** Hard stop (SPEC §4.5): SIGKILL at once, then reap. */
  kill(): Promise<RuntimeEnd>;
  /**
   * Whether a cell that does not confirm its stop can be stopped by killing the runtime (default
   * true). In-process isolation has no hard stop (SPEC §9.8): such a cell is abandoned instead.
   */
  readonly hardStop?: boolean;
  /**
   * Resolves `true` once the runtime has answered a ping sent now: every frame it wrote before it
   * read this one (the cell events of the frames sent before it, such as a `StopCell`'s drained
   * output) has been handed to {@link RuntimeTransport.onMessage}; `false` when it ended first.
   * Absent where frames are not carried by a pipe (in-process isolation).
   */
  flush?(): Promise<boolean>;
  /** Gives up on a cell that did not confirm its stop (runtimes without a hard stop). */
  abandonCell?(cellId: string): void;
  /**
   * Whether the runtime has cells running (the session says so as cells start and end): while it
   * has, its liveness is checked (`runtimeUnresponsiveMs`); an idle runtime is not pinged.
   * `settleMs`: its idle CPU is judged only this long after it became idle (see
   * {@link RuntimeTransport.watchIdleCpu}).
   */
  setActive?(active: boolean, settleMs?: number): void;
  /**
   * Judges the runtime's CPU use while it is not active ({@link RuntimeTransport.setActive}): a
   * runtime that keeps burning CPU then (a Worker thread its cell left spinning, which Deno cannot
   * stop) is reported once through `onBusy`, with its mean % of a core. Absent, or a no-op, where
   * nothing can be measured or done (in-process isolation, the bound off, no `/proc`).
   */
  watchIdleCpu?(onBusy: (cpuPercent: number) => void): void;
}

/**
 * The rejection handler of a frame sent without waiting for it: a runtime refuses frames only once
 * it has ended (or its pipe broke as it ended), and its `ended` reports that end with the reason,
 * so the refusal adds nothing. Use it only where `ended` is watched (the session manager watches
 * every runtime's).
 *
 * @param _error the refusal
 */
export function refusedAfterEnd(_error: unknown): void {}

/**
 * The crash reason of SPEC §3.5 for a runtime that ended on its own.
 *
 * @param end how the runtime ended
 * @returns the `{reason}` text
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const end = { kind: "exit", byHost: false, code: 137, signal: "SIGKILL", stderrTail: "" } as const;
 * assert.equal(crashReason(end), "worker process killed by signal SIGKILL");
 * ```
 */
export function crashReason(end: RuntimeEnd): string {
  if (end.kind === "protocol") return `worker protocol error: ${end.detail}`;
  if (end.kind === "fault") return `worker reported an internal fault: ${end.detail}`;
  if (end.kind === "memory") return `session runtime exceeded its memory limit of ${end.limitMb} MiB`;
  if (end.kind === "unresponsive") return "session runtime stopped responding";
  if (/heap limit|out of memory/i.test(end.stderrTail)) return "V8 heap limit reached";
  if (end.signal) return `worker process killed by signal ${end.signal}`;
  return `worker process exited with code ${end.code}`;
}

/**
 * What a session holds in place of a runtime it handed over to another session (`runtimeHandover`):
 * ended as far as that session is concerned, stopped by the host. It refuses frames, and stopping
 * it touches nothing (the runtime is the other session's now).
 *
 * @param runtime the runtime handed over
 * @returns its placeholder
 */
export function handedOver(runtime: RuntimeTransport): RuntimeTransport {
  const end: RuntimeEnd = { kind: "exit", byHost: true, code: null, signal: null, stderrTail: "" };
  const ended = Promise.resolve(end);
  return {
    id: runtime.id,
    pid: undefined,
    ready: Promise.resolve(),
    ended,
    alive: false,
    hardStop: runtime.hardStop,
    onMessage: () => {},
    send: () => Promise.reject(new Error("code-mode session runtime was handed over to another session")),
    stop: () => ended,
    kill: () => ended,
    [Symbol.asyncDispose]: () => Promise.resolve(),
  };
}

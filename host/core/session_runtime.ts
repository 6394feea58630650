/**
 * A session's runtime supervision (SPEC §3.5, §4.5): the session runtime its cells run in, the
 * frames sent to it, and what happens when it ends or must be replaced.
 *
 * - A runtime is configured as it is attached, and a replacement first gets the session's whole
 *   store (`reset`), before any later `StartCell` (SPEC §6).
 * - A frame sent without waiting that the runtime refuses is logged at `debug`: a runtime refuses
 *   frames only once it has ended, and its end is handled here with its reason.
 * - A runtime that ends on its own while the session is open is the session's crash
 *   ({@link SessionRuntimeOptions.crashed}) — except when it died of a cell's heap limit (see
 *   {@link SessionRuntime.#ended}): then, as after a hard stop, its cells end and a replacement
 *   runtime takes over with the session's stored values.
 * - One replacement at a time: {@link SessionRuntime.restarting} is what `StartCell` and the
 *   session's close wait for.
 * - A runtime that keeps burning CPU while none of the session's cells runs (a thread a completed
 *   cell left spinning, which Deno cannot stop) is replaced the same way
 *   ({@link SessionRuntime.replaceRuntime}, reason `idleCpu`); where there is no hard stop
 *   (in-process isolation) such a thread is only counted and logged.
 *
 * @module
 */
import { setImmediate } from "node:timers";
import type { HostToWorker } from "../../proto/worker_codec.ts";
import type { Cell } from "./cell.ts";
import type { EndReason } from "./cell_channel.ts";
import type { Clock } from "./clock.ts";
import type { Limits } from "./limits.ts";
import type { LogFields, Logger } from "../ops/log.ts";
import type { CrashLabel, HostMetrics } from "../ops/telemetry.ts";
import {
  crashReason,
  handedOver,
  type RuntimeEnd,
  type RuntimeTransport,
} from "../runtime/runtime_transport.ts";
import type { StoreUpdate } from "./stored_values.ts";
import { type HardStop, stopCell } from "./cell_stop.ts";
import { messageOf } from "./errors.ts";

/**
 * A spinning cell stopped at once (reported busy) ends at once, and its runtime is killed and
 * replaced this much later: the kill (the process's teardown, its end's reaping) and the
 * replacement (Configure, the stored values) would otherwise hold the host's thread while the
 * Terminate's reply is being written (measured: Terminate p50 2.5–3.6 ms, 3.9–5.1 ms killing first).
 * A next cell waits for the replacement; the cell's frames meanwhile go nowhere.
 */
const ANSWER_FIRST_MS = 10;

/** The crash label of a runtime's end (`code_mode_runtime_crashes_total{reason}`). */
function crashLabel(end: RuntimeEnd): CrashLabel {
  if (end.kind !== "exit") return end.kind;
  if (/heap limit|out of memory/i.test(end.stderrTail)) return "heap";
  return end.signal ? "signal" : "exit";
}

/** Why {@link SessionRuntime.replaceRuntime} replaces a session's runtime. */
export type RuntimeReplacement =
  /** A hard stop; with `answerFirst` the kill and the replacement wait {@link ANSWER_FIRST_MS}. */
  | HardStop
  /** The runtime kept burning CPU while none of its session's cells ran, `cpuPercent` of a core. */
  | { kind: "idleCpu"; cpuPercent: number };

/** Construction options of a {@link SessionRuntime}. */
export interface SessionRuntimeOptions {
  /** The first runtime, ready. */
  runtime: RuntimeTransport;
  /** The session's host-local number (logs). */
  ref: number;
  /** The session's cell heap limit, MiB (a heap-limit death names it). */
  cellHeapMb: number;
  limits: Limits;
  log: Logger;
  clock: Clock;
  metrics: HostMetrics;
  /** The session's ID (each runtime is configured with it as it is attached). */
  sessionId: string;
  /** The session's output truncation (`OUTPUT_CLIENT` or `OUTPUT_SERVER`). */
  outputMode: number;
  /** The runtime also measures what JSON escaping adds to reduced texts (a JSON door's session). */
  jsonOutcomeSizes: boolean;
  /** The session's cells whose isolate has not stopped, by cell ID (shared, read only here). */
  running: ReadonlyMap<string, Cell>;
  /**
   * Sends the session's stored values as `reset` updates (none when empty), in order, maybe over
   * several turns (`StartCell` waits for them: `stored_values.ts`).
   */
  replica(send: (update: StoreUpdate) => void): void;
  /** Whether the session is open (a runtime's end while closing is no crash). */
  isOpen(): boolean;
  /** Obtains a replacement runtime (SPEC §4.5). */
  replace(): Promise<RuntimeTransport>;
  /** At the close: offers the idle runtime to the session it came from (`runtimeHandover`). */
  giveBack?(runtime: RuntimeTransport, detach: () => RuntimeTransport): boolean;
  /**
   * The session failed (its runtime crashed, or could not be replaced).
   *
   * @param reason the crash reason (SPEC §3.5)
   * @param panicked the runtime reported a fault of its own (`… thread panicked`)
   * @param fields log fields (exit code, signal, stderr tail)
   */
  crashed(reason: string, panicked: boolean, fields?: LogFields): void;
}

/**
 * A session whose cells began to run twice within this time is in a burst (back-to-back cells, a
 * loop of turns): its runtime is not handed over (`runtimeHandover`) until the burst has passed.
 * Measured: with 8 parallel sessions reusing runtimes handed over among them, every cell took
 * another session's runtime (51.9 cells/s against 312.4 on Codex's host, bench:reference).
 */
const BURST_MS = 1_000;

/** A session's side of `runtimeHandover` (its idle runtime given, a runtime taken back). */
export interface RuntimeHandover {
  /** Since when the session's idle runtime could be handed over, if it can. */
  readonly handoverIdleSince: number | undefined;
  /** Hands the session's idle runtime to another session, if it can be. */
  handOver(): RuntimeTransport | undefined;
  /** Whether the session has no runtime and could take one back now. */
  readonly canAdopt: boolean;
  /** Takes back a runtime handed over from the session; check {@link canAdopt} first. */
  adopt(runtime: RuntimeTransport): boolean;
}

/** The runtime of one session, supervised. */
export class SessionRuntime implements RuntimeHandover {
  #options: SessionRuntimeOptions;
  #current: RuntimeTransport;
  /** Set while a replacement is obtained; StartCell and the session's close wait for it. */
  #restarting: Promise<void> | undefined;
  /** The session gave its runtime back (idle); its next cell takes one ({@link SessionRuntime.acquire}). */
  #released = false;
  /** The timer of an idle session's release (`idleRuntimeReleaseMs`). */
  #releaseTimer: unknown;
  /** Since when no cell of the session has run (clock ms); `undefined` while cells run. */
  #idleSince: number | undefined;
  /** When cells began to run before the latest time they did (clock ms; see {@link BURST_MS}). */
  #activeBefore = -Infinity;
  /** When cells last began to run (clock ms). */
  #activeAt = -Infinity;
  /** Runtimes attached so far (the latest attachment reports its runtime's end). */
  #attachments = 0;

  /** @param options see {@link SessionRuntimeOptions} */
  constructor(options: SessionRuntimeOptions) {
    this.#options = options;
    this.#current = options.runtime;
    this.#idleSince = options.clock.now();
    this.#attach(options.runtime);
  }

  /** The runtime the session's next cells start on. */
  get current(): RuntimeTransport {
    return this.#current;
  }

  /** Resolves once a replacement in progress is in place (or given up); `undefined` when none is. */
  get restarting(): Promise<void> | undefined {
    return this.#restarting;
  }

  /** Whether the session has given its runtime back (idle; see {@link SessionRuntime.acquire}). */
  get released(): boolean {
    return this.#released;
  }

  /**
   * What a `StartCell` waits for: a replacement in progress, or, when the session gave its runtime
   * back, a ready runtime taken now from the warm pool, configured for the session and sent its
   * stored values (as after a restart; a failure is the session's crash).
   *
   * @returns a promise to await first, or `undefined` when the current runtime takes the cell
   */
  acquire(): Promise<void> | undefined {
    if (this.#released && !this.#restarting && this.#options.isOpen()) {
      this.#replace(
        () => ({ kind: "default" }),
        "session runtime taken again after an idle release",
        {},
        "debug",
      );
    }
    return this.#restarting;
  }

  /**
   * Sends a frame and resolves once it is written; a refusal (the runtime has ended) is logged.
   *
   * @param message the frame
   * @param runtime the runtime to send it to (default the current one)
   */
  send(message: HostToWorker, runtime: RuntimeTransport = this.#current): Promise<void> {
    return runtime.send(message).catch(this.#refused);
  }

  /**
   * Sends a frame without waiting for it (see {@link SessionRuntime.send}).
   *
   * @param message the frame
   */
  post(message: HostToWorker): void {
    this.#current.send(message).catch(this.#refused);
  }

  readonly #refused = (error: unknown): void => {
    this.#options.log.debug("code-mode frame not sent: the session runtime has ended", {
      session_ref: this.#options.ref,
      error: messageOf(error),
    });
  };

  /**
   * Whether cells run (the runtime's liveness is checked while they do). A session that has no
   * running cell for `idleRuntimeReleaseMs` gives its runtime back.
   *
   * @param active whether cells run
   * @param settleMs the runtime's idle CPU is judged only this long after it became idle
   */
  setActive(active: boolean, settleMs?: number): void {
    this.#current.setActive?.(active, settleMs);
    const { clock, limits } = this.#options;
    this.#cancelRelease();
    this.#idleSince = active ? undefined : clock.now();
    if (active) [this.#activeBefore, this.#activeAt] = [this.#activeAt, clock.now()];
    if (!active && limits.idleRuntimeReleaseMs > 0 && this.#options.isOpen()) {
      this.#releaseTimer = clock.setTimeout(this.#release, limits.idleRuntimeReleaseMs);
    }
  }

  /**
   * Gives an idle session's runtime back: stops it (orderly; its end is no crash). The session's
   * stored values, cells and lease are the host's, and its next cell takes a ready runtime.
   */
  #cancelRelease(): void {
    this.#options.clock.clearTimeout(this.#releaseTimer);
    this.#releaseTimer = undefined;
  }

  readonly #release = (): void => {
    this.#releaseTimer = undefined;
    if (this.#released || this.#restarting || this.#options.running.size > 0 || !this.#options.isOpen()) {
      return;
    }
    this.#released = true;
    this.#options.metrics.runtimeReleased();
    this.#options.log.debug("idle session runtime released", { session_ref: this.#options.ref });
    // Never rejects; the session manager watches every runtime's end and reaps it.
    this.#current.stop();
  };

  /**
   * Since when the session's runtime could be handed to another session (`runtimeHandover`): the
   * session is open and holds a live subprocess runtime that no cell of it uses, with no
   * replacement under way, it has run a cell, and it is not in a burst of cells (cells began to run
   * twice within {@link BURST_MS}). A session that has run no cell yet, or is in a burst, is likely
   * to run its next cell at once (a harness opens a session to run one), and taking its runtime
   * would only make it take another's; `undefined` otherwise.
   */
  get handoverIdleSince(): number | undefined {
    if (
      this.#idleSince === undefined || this.#released || this.#restarting || !this.#options.isOpen() ||
      this.#options.running.size > 0 || !this.#current.alive || this.#current.hardStop === false ||
      this.#activeAt === -Infinity || this.#options.clock.now() - this.#activeBefore < BURST_MS
    ) return undefined;
    return this.#idleSince;
  }

  /**
   * Gives the session's idle runtime to another session (`runtimeHandover`), as an idle release
   * does but without stopping it: its stored values are cleared in it first (an empty `reset`),
   * and it no longer reports to this session. The session's next cell takes a runtime again.
   *
   * @returns the runtime, or `undefined` when it cannot be handed over now
   */
  handOver(): RuntimeTransport | undefined {
    if (this.handoverIdleSince === undefined) return undefined;
    this.#options.log.debug("idle session runtime handed over to another session", {
      session_ref: this.#options.ref,
    });
    return this.#detach();
  }

  /** Lets go of the current runtime without stopping it, its stored values cleared in it. */
  #detach(): RuntimeTransport {
    const runtime = this.#current;
    this.#cancelRelease();
    this.#released = true;
    this.#current = handedOver(runtime);
    runtime.onMessage = () => {};
    runtime.send({ storeUpdate: { version: 0, reset: true, entries: [] } }).catch(this.#refused);
    return runtime;
  }

  /** Whether the session has no runtime and could take one back now ({@link SessionRuntime.adopt}). */
  get canAdopt(): boolean {
    return this.#released && !this.#restarting && this.#options.isOpen();
  }

  /**
   * Takes a runtime back (`runtimeHandover`: the session it was handed to closed) when the session
   * has none ({@link SessionRuntime.canAdopt}, checked by the caller): attached as after a
   * restart (its `Configure` and stored values), idle.
   *
   * @param runtime a live runtime with no cell of another session, its stored values cleared
   * @returns whether it was taken (not when it has ended)
   */
  adopt(runtime: RuntimeTransport): boolean {
    if (!runtime.alive) return false;
    this.#current = runtime;
    this.#released = false;
    this.#attach(runtime);
    this.setActive(false);
    return true;
  }

  #attach(runtime: RuntimeTransport): void {
    const running = this.#options.running;
    runtime.onMessage = (message) => {
      const event = message.cellEvent;
      if (event) running.get(event.cellId)?.onEvent(event);
    };
    this.post({ configure: this.#configure() });
    // A runtime handed over meanwhile (`runtimeHandover`) gets no more of this session's values.
    this.#options.replica((update) => {
      if (runtime === this.#current) this.send({ storeUpdate: update }, runtime);
    });
    // `ended` never rejects.
    // Only this attachment reports the end: a runtime handed back may have been attached before.
    const attachment = ++this.#attachments;
    runtime.ended.then((end) => {
      if (attachment === this.#attachments) this.#ended(runtime, end);
    });
    // A replacement runtime may come while cells are already waiting for it.
    if (running.size > 0) runtime.setActive?.(true);
    runtime.watchIdleCpu?.((cpuPercent) => {
      if (runtime !== this.#current) return;
      if (runtime.hardStop === false) return this.#leftRunning(cpuPercent);
      if (running.size === 0) this.replaceRuntime({ kind: "idleCpu", cpuPercent });
    });
  }

  /** The `Configure` frame each runtime gets as it is attached. */
  #configure(): NonNullable<HostToWorker["configure"]> {
    const { limits } = this.#options;
    return {
      sessionId: this.#options.sessionId,
      outputTruncation: this.#options.outputMode,
      cellHeapLimitMb: this.#options.cellHeapMb,
      maxMessageBytes: limits.maxMessageBytes,
      maxStoredValueBytes: limits.maxStoredValueBytes,
      outputEventCredit: limits.outputEventQueueCapacity,
      outputByteCredit: limits.outputEventQueueBytes,
      maxFrameBytes: limits.maxWorkerFrameBytes,
      ...(this.#options.jsonOutcomeSizes ? { jsonSizes: true } : {}),
    };
  }

  /**
   * The cell actor's failure handler (SPEC §4.12 A9–A10), decided from the cell's runtime: alive,
   * or stopped by the host (a hard stop, closing, shutdown), the failure stays a cell error and is
   * logged; a runtime that died on its own is a session crash (§3.5), reported once its exit is
   * known (the same report as the runtime's own end, whichever comes first).
   *
   * @param cell the cell
   * @param runtime the runtime the cell ran on
   * @param reason the actor's reason
   * @param detail what ended the isolate, when known
   */
  cellFailed(cell: Cell, runtime: RuntimeTransport, reason: string, detail?: string): void {
    const log = this.#options.log;
    const fields = { session_ref: this.#options.ref, cell_id: cell.id, ...(detail ? { error: detail } : {}) };
    if (runtime.alive) return log.warn(`code-mode cell failed: ${reason}`, fields);
    runtime.ended.then((end) => {
      if (end.byHost) log.debug(`code-mode cell failed: ${reason}`, fields);
      else this.#ended(runtime, end);
    });
  }

  #ended(runtime: RuntimeTransport, end: RuntimeEnd): void {
    if (runtime !== this.#current) return;
    this.#cancelRelease();
    const running = this.#options.running;
    if (this.#options.isOpen() && !end.byHost) {
      // One allocation far over a cell's heap limit (`new Array(1e7).fill(1.5)` under 16 MiB) is
      // beyond what its Worker's limit can contain: V8 ends the whole runtime. That is the
      // running cells' heap limit, not the session's end: they fail as over it, and the session
      // goes on in a new runtime with its stored values (as after a hard stop). Only when the
      // runtime's main isolate has V8's default limit (no `workerMainHeapMb`): its stderr does not
      // say which isolate died, and with the default the main isolate is not the one.
      const heap = crashLabel(end) === "heap" && running.size > 0 &&
        this.#options.limits.workerMainHeapMb === 0;
      if (heap) return this.#recoverFromHeapLimit(end);
      this.#options.metrics.runtimeCrashed(crashLabel(end));
      return this.#options.crashed(crashReason(end), end.kind === "fault", {
        exit_code: end.code,
        signal: end.signal,
        stderr_tail: end.stderrTail,
      });
    }
    for (const cell of [...running.values()]) cell.end();
  }

  /** The runtime died of a cell's heap limit (see {@link SessionRuntime.#ended}): replace it. */
  #recoverFromHeapLimit(end: RuntimeEnd): void {
    if (this.#restarting) return;
    this.#options.metrics.runtimeCrashed("heap");
    const limitMb = this.#options.cellHeapMb;
    this.#replace(
      (cell) => cell.terminating ? { kind: "default" } : { kind: "heapLimit", limitMb },
      "session runtime replaced: a cell's allocation passed its heap limit",
      { cell_ids: [...this.#options.running.keys()].join(","), exit_code: end.code, signal: end.signal },
    );
  }

  /**
   * Asks the runtime to stop a cell (StopCell; the rules: `cell_stop.ts`).
   *
   * @param cell the cell to stop
   */
  stopCell(cell: Cell): void {
    stopCell(cell, this, this.#options);
  }

  /**
   * A cell Worker thread of a runtime without a hard stop (in-process isolation) kept burning CPU
   * after its cell ended: nothing can stop it but ending the host; counted and logged.
   */
  #leftRunning(cpuPercent: number): void {
    this.#options.metrics.cellThreadLeftRunning();
    this.#options.log.warn(
      "a cell's Worker thread kept running after its cell ended; in-process isolation cannot stop it " +
        "(it runs until the host exits)",
      { session_ref: this.#options.ref, cpu_percent: cpuPercent },
    );
  }

  /**
   * Replaces the session's runtime now, keeping the session: kills the current runtime, ends every
   * cell still running in it, and attaches a runtime from the warm pool, which first gets the
   * session's stored values. The session, its lease and its stored values stay (the host owns
   * them). Counted and logged by its reason; one replacement at a time (a second call while one is
   * under way, or once the session closes, does nothing).
   *
   * - `stop`: a hard stop (SPEC §4.5): the stopped cell (and any other being terminated) ends
   *   terminated, the others with `… the session runtime was restarted to stop cell {id}`;
   *   `code_mode_runtime_restarts_total`, one `info` line. With `answerFirst` the cells end now, and
   *   the kill and the replacement follow {@link ANSWER_FIRST_MS} later.
   * - `idleCpu`: the runtime kept burning CPU while none of its cells ran (a thread a completed cell
   *   left spinning; see `host/runtime/cpu_watchdog.ts`); a cell started meanwhile ends with the
   *   crash text `exec runtime ended unexpectedly`; `code_mode_runtime_cpu_replacements_total`,
   *   one `warn` line.
   *
   * @param reason why
   */
  replaceRuntime(reason: RuntimeReplacement): void {
    if (this.#restarting || !this.#options.isOpen()) return;
    const { metrics } = this.#options;
    const runtime = this.#current;
    const afterMs = reason.kind === "stop" && reason.answerFirst ? ANSWER_FIRST_MS : 0;
    // Never rejects; the session manager watches every runtime's end and reaps it.
    if (afterMs > 0) setTimeout(() => runtime.kill(), afterMs);
    else runtime.kill();
    if (reason.kind === "stop") {
      metrics.runtimeRestarted();
      const stoppedCellId = reason.cellId;
      return this.#replace(
        (cell) => cell.terminating ? { kind: "default" } : { kind: "restart", stoppedCellId },
        "session runtime restarted to stop a cell",
        { cell_id: stoppedCellId },
        "info",
        afterMs,
      );
    }
    metrics.runtimeReplacedIdleCpu();
    this.#replace(
      () => ({ kind: "default" }),
      "session runtime replaced: it kept burning CPU while none of its cells ran (a thread a " +
        "completed cell left running)",
      { cpu_percent: reason.cpuPercent },
      "warn",
    );
  }

  /**
   * Ends every cell of the current (killed or dead) runtime with its reason and replaces the
   * runtime; the session, its lease and its stored values stay. {@link SessionRuntime.restarting}
   * is set until the replacement is in place; a failure is the session's crash.
   */
  #replace(
    reason: (cell: Cell) => EndReason,
    message: string,
    fields: LogFields,
    level: "debug" | "info" | "warn" = "info",
    afterMs = 0,
  ): void {
    if (this.#restarting) return;
    const done = Promise.withResolvers<void>();
    this.#restarting = done.promise;
    this.#replaceNow(reason, message, fields, level, afterMs)
      .catch((error) => {
        this.#cancelRelease();
        this.#options.crashed(`session runtime could not be replaced: ${messageOf(error)}`, false);
      })
      .finally(() => {
        this.#restarting = undefined;
        done.resolve();
      });
  }

  async #replaceNow(
    reason: (cell: Cell) => EndReason,
    message: string,
    fields: LogFields,
    level: "debug" | "info" | "warn",
    afterMs: number,
  ): Promise<void> {
    for (const cell of [...this.#options.running.values()]) cell.end(reason(cell));
    // The ended cells' observations are answered first (a Terminate waits for nothing more); the
    // replacement is taken in the next turn of the event loop, or `afterMs` later (a real pause for
    // the reply's write, not a rule of the session's clock).
    await new Promise((resolve) => afterMs > 0 ? setTimeout(resolve, afterMs) : setImmediate(resolve));
    const next = await this.#options.replace();
    if (!this.#options.isOpen()) {
      // The session began closing meanwhile. Never rejects; the session manager reaps the spare.
      next.stop();
      return;
    }
    this.#current = next;
    this.#released = false;
    this.#attach(next);
    this.#options.log[level](message, { session_ref: this.#options.ref, ...fields });
  }

  /** Orderly stop of the current runtime (the session's close). */
  async stop(): Promise<void> {
    this.#cancelRelease();
    const runtime = this.#current;
    // A runtime this session was handed (`runtimeHandover`) goes back to the session it came from,
    // if no cell of this session ran in it when it closed.
    const clean = this.#options.running.size === 0 && !this.#released && !this.#restarting &&
      runtime.alive && runtime.hardStop !== false;
    if (clean && this.#options.giveBack?.(runtime, () => this.#detach())) return;
    await runtime.stop();
  }
}

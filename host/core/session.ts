/**
 * One host session (SPEC §3): its runtime, cells, stored values, IDs, lease and lifetime.
 *
 * - The host owns the authoritative stored-value map; the runtime's replica is kept current by
 *   sending each commit as a `StoreUpdate` before any later `StartCell` (SPEC §6).
 * - Closing follows SPEC §3.4; a runtime that ends on its own is a crash (SPEC §3.5): the
 *   session leaves the registry at once and every observation completes with
 *   `exec runtime ended unexpectedly`.
 *
 * @module
 */
import type { WorkerToHost } from "../../proto/worker_codec.ts";
import { Cell, type CellOptions, type Outcome } from "./cell.ts";
import type { CellPort } from "./cell_port.ts";
import type { CellState, CompletedEvent } from "./cell_state.ts";
import type { EndReason } from "./cell_channel.ts";
import type { Clock } from "./clock.ts";
import { HostError } from "./errors.ts";
import { LeaseQueue } from "./lease_queue.ts";
import type { Limits } from "./limits.ts";
import type { LogFields, Logger } from "../ops/log.ts";
import { type Permit, Permits, RecentIds } from "./permits.ts";
import { crashReason, type RuntimeEnd, type RuntimeTransport } from "../runtime/runtime_transport.ts";
import { checkCellSource } from "./source_check.ts";
import {
  type Subscription,
  ToolBridge,
  type ToolDefinitionInfo,
  type ToolNameInfo,
  TooManySubscriptions,
} from "./tool_bridge.ts";
import { utf8ByteLength } from "../../proto/bytes.ts";
import {
  type CellOutcomeLabel,
  type CrashLabel,
  type HostSpan,
  NO_METRICS,
  NO_SPAN,
  NO_TELEMETRY,
  type Telemetry,
} from "../ops/telemetry.ts";

/** Output truncation modes (the public enum numbers). */
export const OUTPUT_CLIENT = 1;
/** Server-mode truncation. */
export const OUTPUT_SERVER = 2;

/** A `SessionEvent` as a plain object for the encoder. */
export type SessionEvent =
  | { opened: { sessionId: string; outputTruncation: number } }
  | { toolCallCancelled: { invocationId: string } }
  | {
    notification: {
      notificationId: string;
      executionId: string;
      cellId: string;
      callId: string;
      text: string;
    };
  }
  | {
    cellClosed: {
      executionId: string;
      cellId: string;
      finalToolCallSequence: number;
      /** The cell ended because its session was closing (Codex's host sends no `CellClosed` then). */
      closing?: true;
    };
  };

/** Construction options of a {@link Session}. */
export interface SessionOptions {
  id: string;
  ref: number;
  outputMode: number;
  /** The session's `max_yield_time_ms`, if it asked. */
  maxYieldTimeMs?: bigint;
  cellHeapMb: number;
  runtime: RuntimeTransport;
  limits: Limits;
  log: Logger;
  clock: Clock;
  /** Called once when the session leaves the registry. */
  onRemoved(session: Session): void;
  /** Obtains a replacement runtime for a runtime restart (SPEC §4.5). */
  replaceRuntime(): Promise<RuntimeTransport>;
  /** Host-wide delegate permits (`maxPendingDelegateCalls`), or the session's connection's pool. */
  hostDelegatePermits: Permits;
  /** The session's own delegate capacity (default `maxPendingDelegateCallsPerSession`). */
  sessionDelegateCapacity?: number;
  /** Outcomes are written as JSON (`OpenSessionRequest.jsonOutcomeSizes`); default false. */
  jsonOutcomeSizes?: boolean;
  /** Outcomes and delegate requests share one ordered channel (`OpenSessionRequest.serialOutcomes`). */
  serialOutcomes?: boolean;
  /** A Wait pending at the closure gets its cell's Terminated outcome (`OpenSessionRequest.closureTerminatesWaits`). */
  closureTerminatesWaits?: boolean;
  /** Metrics and tracing (default off). */
  telemetry?: Telemetry;
}

/** What an Execute needs to start a cell. */
export interface StartRequest {
  executionId: string;
  toolCallId: string;
  source: string;
  tools: { globalName: string; description: string }[];
  /** Active-cell permits, released when the cell's `CellClosed` is queued. */
  permits: Permit[];
  /** The initial observation: effective yield time, YieldObservation signal, the stream's signal, its start. */
  initial: CellOptions["initial"];
  /** The Execute's `max_output_tokens` (Server mode). */
  maxOutputTokens?: number;
  /** The Execute's tool definitions by JS name (the last definition of a name wins). */
  definitions?: ReadonlyMap<string, ToolDefinitionInfo>;
  /** The Execute's `traceparent`. */
  traceparent?: string;
  /** The Execute's span: the cell's lifetime becomes its child span `Cell`. */
  span?: HostSpan;
}

/** What the session's telemetry follows of one cell until its `CellClosed`. */
interface CellWatch {
  span: HostSpan;
  /** Its completion was committed; `failed`: with an error text. */
  committed?: { failed: boolean };
}

/** The crash label of a runtime's end (`code_mode_runtime_crashes_total{reason}`). */
function crashLabel(end: RuntimeEnd): CrashLabel {
  if (end.kind !== "exit") return end.kind;
  if (/heap limit|out of memory/i.test(end.stderrTail)) return "heap";
  return end.signal ? "signal" : "exit";
}

interface ActiveWait {
  cancel: AbortController;
  yieldNow: AbortController;
  done: Promise<void>;
}

const CLOSED_MESSAGE = "code-mode session is closed";
/**
 * How long a cell's outcome waits, at most, for its notifications to be handed to the lease's
 * transport ({@link Session.notificationsFlushed}): a lease that is read hands them off within
 * microtasks; one that is not read must not hold the outcome back (SPEC §7.8).
 */
export const NOTIFICATION_FLUSH_MS = 250;
/**
 * Cooperative-stop deadlines a cell whose isolate has not begun gets before its runtime is
 * restarted: 5 × `cooperativeStopMs` (500 ms), inside Terminate's 1 s bound (SPEC §4.5).
 */
const UNSTARTED_STOP_ROUNDS = 5;

/** Host-side state of one session. */
export class Session {
  readonly id: string;
  readonly ref: number;
  readonly outputMode: number;
  readonly maxYieldTimeMs: bigint | undefined;
  readonly cellHeapMb: number;
  /** Active-cell permits of this session (`maxActiveCellsPerSession`), held until `CellClosed`. */
  readonly activeCells: Permits;

  #options: SessionOptions;
  #runtime: RuntimeTransport;
  #state: "open" | "closing" | "crashed" | "closed" = "open";
  #lease: LeaseQueue<SessionEvent>;
  #removed = Promise.withResolvers<void>();
  #nextCellId = 1;
  /** Cells a Wait or Terminate can still name. */
  #cells = new Map<string, Cell>();
  /** Cells whose isolate has not stopped, by cell ID (includes forgotten ones). */
  #running = new Map<string, Cell>();
  #cellPermits = new Map<Cell, Permit[]>();
  #store = new Map<string, string>();
  #storeBytes = 0;
  #storeVersion = 0;
  #activeExecutions = new Map<string, AbortController>();
  #recentExecutions: RecentIds;
  #activeWaits = new Map<string, ActiveWait>();
  #recentWaits: RecentIds;
  #preYielded: RecentIds;
  #preCancelled: RecentIds;
  #bridge: ToolBridge;
  #sessionDelegatePermits: Permits;
  /** Aborts when closing begins or the session crashes. */
  #closing = new AbortController();
  /** Set while a runtime restart obtains a replacement; StartCell waits for it. */
  #restarting: Promise<void> | undefined;
  #inFlight = 0;
  #lastActivity = 0;
  #idleTimer: unknown;
  #telemetry: Telemetry;
  /** The session's runtime crashed (its cells' outcome is `crashed`). */
  #crashed = false;
  #watches = new Map<Cell, CellWatch>();
  /** The lease item number of each cell's last published notification. */
  #lastNotification = new WeakMap<Cell, number>();

  /** @param options see {@link SessionOptions} */
  constructor(options: SessionOptions) {
    this.#options = options;
    this.id = options.id;
    this.ref = options.ref;
    this.outputMode = options.outputMode;
    this.maxYieldTimeMs = options.maxYieldTimeMs;
    this.cellHeapMb = options.cellHeapMb;
    this.#telemetry = options.telemetry ?? NO_TELEMETRY;
    this.activeCells = new Permits(options.limits.maxActiveCellsPerSession);
    const recent = options.limits.maxRecentIds;
    this.#recentExecutions = new RecentIds(recent);
    this.#recentWaits = new RecentIds(recent);
    this.#preYielded = new RecentIds(recent);
    this.#preCancelled = new RecentIds(recent);
    this.#lease = new LeaseQueue(options.limits.leaseEventQueueCapacity);
    this.#sessionDelegatePermits = new Permits(
      options.sessionDelegateCapacity ?? options.limits.maxPendingDelegateCallsPerSession,
    );
    this.#bridge = new ToolBridge({
      sessionId: options.id,
      maxMessageBytes: options.limits.maxMessageBytes,
      maxRecentIds: options.limits.maxRecentIds,
      maxSubscriptions: options.limits.maxSubscriptionsPerSession,
      subscriptionQueueCapacity: options.limits.subscriptionQueueCapacity,
      hostDelegatePermits: options.hostDelegatePermits,
      sessionDelegatePermits: this.#sessionDelegatePermits,
      isOpen: () => this.#state === "open",
      closed: this.#closing.signal,
      onCancelled: (invocationId) => {
        this.#lease.push({ toolCallCancelled: { invocationId } });
      },
    });
    this.#lease.push({ opened: { sessionId: this.id, outputTruncation: this.outputMode } });
    this.#runtime = options.runtime;
    this.#attach(options.runtime);
    this.touch();
    this.#armIdleTimer();
  }

  /** Whether the session accepts new work. */
  get open(): boolean {
    return this.#state === "open";
  }

  /** Whether the session is closing or closed (by a request, its lease, the host; not a crash). */
  get closing(): boolean {
    return (this.#state === "closing" || this.#state === "closed") && !this.#crashed;
  }

  /** Observations in flight: Executes awaiting their outcome, Waits and Terminates. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Number of cells whose isolate is running. */
  get runningCells(): number {
    return this.#running.size;
  }

  /** Resolves once the session has been removed from the registry. */
  get removed(): Promise<void> {
    return this.#removed.promise;
  }

  /** The session's runtime (a test hook). */
  get runtime(): RuntimeTransport {
    return this.#runtime;
  }

  /** The lease stream: `opened` first, then session events, until the session ends. */
  lease(signal?: AbortSignal): AsyncGenerator<SessionEvent> {
    return this.#lease.drain(signal);
  }

  /**
   * Publication before release (item 4 of issue 25): a cell's outcome (Execute, Wait, Terminate)
   * is released only after every notification the cell published before it has been handed to the
   * lease's transport, as Codex's host writes a cell's notifications before its outcome.
   *
   * - A notification is published when it is queued on the lease (in order, before the cell's
   *   `CellClosed`); it is handed off when the lease's reader has taken it and asked for the next
   *   event, i.e. written it to the lease stream.
   * - The wait ends at the latest after {@link NOTIFICATION_FLUSH_MS}, or when the lease's reader
   *   stops: a client that does not read its lease delays its outcomes by that much at most, and
   *   then receives the notifications after the outcome.
   *
   * @param cell the cell whose outcome is about to be released
   * @returns a promise to await first, or `undefined` when there is nothing to wait for
   */
  notificationsFlushed(cell: Cell): Promise<void> | undefined {
    const seq = this.#lastNotification.get(cell);
    if (seq === undefined) return undefined;
    const handedOff = this.#lease.handedOff(seq);
    const clock = this.#options.clock;
    let timer: unknown;
    const bound = new Promise<void>((resolve) => timer = clock.setTimeout(resolve, NOTIFICATION_FLUSH_MS));
    return Promise.race([handedOff, bound]).finally(() => clock.clearTimeout(timer));
  }

  /** Lease events queued and not yet taken by the lease's reader. */
  get leaseBacklog(): number {
    return this.#lease.size;
  }

  /** @throws {HostError} `session_closed` `code-mode session is closed` once closing began */
  ensureOpen(): void {
    if (this.#state !== "open") throw new HostError("session_closed", CLOSED_MESSAGE);
  }

  #attach(runtime: RuntimeTransport): void {
    runtime.onMessage = (message) => this.#onRuntimeMessage(message);
    void runtime.send({
      configure: {
        sessionId: this.id,
        outputTruncation: this.outputMode,
        cellHeapLimitMb: this.cellHeapMb,
        maxMessageBytes: this.#options.limits.maxMessageBytes,
        maxStoredValueBytes: this.#options.limits.maxStoredValueBytes,
        outputEventCredit: this.#options.limits.outputEventQueueCapacity,
        outputByteCredit: this.#options.limits.outputEventQueueBytes,
        maxFrameBytes: this.#options.limits.maxWorkerFrameBytes,
        ...(this.#options.jsonOutcomeSizes ? { jsonSizes: true } : {}),
      },
    }).catch(() => {});
    if (this.#store.size > 0) {
      const entries = [...this.#store].map(([key, valueJson]) => ({ key, valueJson }));
      void runtime.send({ storeUpdate: { version: this.#storeVersion, reset: true, entries } }).catch(
        () => {},
      );
    }
    void runtime.ended.then((end) => this.#onRuntimeEnded(runtime, end));
    // A replacement runtime may come while cells are already waiting for it.
    if (this.#running.size > 0) runtime.setActive?.(true);
  }

  #onRuntimeMessage(message: WorkerToHost): void {
    const event = message.cellEvent;
    if (!event) return;
    const cell = this.#running.get(event.cellId);
    cell?.onEvent(event);
  }

  /**
   * The cell actor's failure handler (SPEC §4.12 A9–A10), decided from the cell's runtime: alive,
   * or stopped by the host (a hard stop, closing, shutdown), the failure stays a cell error and is
   * logged; a runtime that died on its own is a session crash (§3.5), reported once its exit is
   * known (the same report as the runtime's own end, whichever comes first).
   */
  #cellFailed(cell: Cell, runtime: RuntimeTransport, reason: string, detail?: string): void {
    const fields = { session_ref: this.ref, cell_id: cell.id, ...(detail ? { error: detail } : {}) };
    if (runtime.alive) return this.#options.log.warn(`code-mode cell failed: ${reason}`, fields);
    void runtime.ended.then((end) => {
      if (end.byHost) this.#options.log.debug(`code-mode cell failed: ${reason}`, fields);
      else this.#onRuntimeEnded(runtime, end);
    });
  }

  #onRuntimeEnded(runtime: RuntimeTransport, end: RuntimeEnd): void {
    if (runtime !== this.#runtime) return;
    if (this.#state === "open" && !end.byHost) {
      // One allocation far over a cell's heap limit (`new Array(1e7).fill(1.5)` under 16 MiB) is
      // beyond what its Worker's limit can contain: V8 ends the whole runtime. That is the
      // running cells' heap limit, not the session's end: they fail as over it, and the session
      // goes on in a new runtime with its stored values (as after a hard stop). Only when the
      // runtime's main isolate has V8's default limit (no `workerMainHeapMb`): its stderr does not
      // say which isolate died, and with the default the main isolate is not the one.
      if (
        crashLabel(end) === "heap" && this.#running.size > 0 && this.#options.limits.workerMainHeapMb === 0
      ) return void this.#recoverFromHeapLimit(end);
      return this.#crash(end);
    }
    for (const cell of [...this.#running.values()]) cell.end();
  }

  /** The runtime died of a cell's heap limit (see {@link #onRuntimeEnded}): replace it, keep the session. */
  async #recoverFromHeapLimit(end: RuntimeEnd): Promise<void> {
    if (this.#restarting) return;
    this.#telemetry.metrics.runtimeCrashed("heap");
    const limitMb = this.cellHeapMb;
    await this.#replaceRuntime(
      (cell) => cell.terminating ? { kind: "default" } : { kind: "heapLimit", limitMb },
      "session runtime replaced: a cell's allocation passed its heap limit",
      { cell_ids: [...this.#running.keys()].join(","), exit_code: end.code, signal: end.signal },
    );
  }

  #crash(end: RuntimeEnd): void {
    this.#telemetry.metrics.runtimeCrashed(crashLabel(end));
    this.#fail(crashReason(end), end.kind === "fault", {
      exit_code: end.code,
      signal: end.signal,
      stderr_tail: end.stderrTail,
    });
  }

  #fail(reason: string, panicked: boolean, fields: LogFields = {}): void {
    if (this.#state === "crashed" || this.#state === "closed") return;
    this.#state = "crashed";
    this.#crashed = true;
    this.#clearIdleTimer();
    const owner = panicked
      ? "code-mode V8 runtime thread panicked"
      : "code-mode V8 runtime thread ended unexpectedly";
    this.#options.log.error(`code-mode host session failed: ${reason}`, { session_ref: this.ref, ...fields });
    this.#closing.abort();
    this.#remove();
    const status = new HostError("session_crashed", `${owner}: ${reason}`);
    this.#bridge.closeAll(status);
    for (const cell of [...this.#running.values()]) cell.end();
    this.#lease.end(status);
    this.#state = "closed";
  }

  #remove(): void {
    this.#options.onRemoved(this);
    this.#removed.resolve();
    this.#options.log.debug("session closed", { session_id: this.id, session_ref: this.ref });
  }

  // ---- executions and cells ---------------------------------------------------------------------

  /**
   * Reserves an execution ID (SPEC §4.1 step 3).
   *
   * @param executionId the client's ID
   * @returns the execution's yield signal (pre-fired if a YieldObservation came first)
   * @throws {HostError} `id_reused` when reused, `session_closed` when the session closed
   */
  reserveExecution(executionId: string): AbortSignal {
    if (this.#activeExecutions.has(executionId) || this.#recentExecutions.has(executionId)) {
      throw new HostError("id_reused", `code-mode execution ID \`${executionId}\` was reused`);
    }
    this.ensureOpen();
    const yieldNow = new AbortController();
    if (this.#preYielded.delete(executionId)) yieldNow.abort();
    this.#activeExecutions.set(executionId, yieldNow);
    this.#recentExecutions.add(executionId);
    return yieldNow.signal;
  }

  /** Ends an execution's reservation (its initial observation is over). */
  releaseExecution(executionId: string): void {
    this.#activeExecutions.delete(executionId);
  }

  /**
   * Allocates the next cell ID, checks the source and starts the cell in the runtime.
   *
   * @param request the Execute's inputs
   * @returns the started (or already refused) cell
   */
  async startCell(request: StartRequest): Promise<Cell> {
    let check: Awaited<ReturnType<typeof checkCellSource>>;
    try {
      this.ensureOpen();
      check = await checkCellSource(request.source);
      if (this.#restarting) await this.#restarting;
      this.ensureOpen();
    } catch (error) {
      // The cell never started: it consumes no ID, and its permits go back (SPEC §4.8).
      for (const permit of request.permits) permit.release();
      throw error;
    }
    // The yield timer of the initial observation starts here, as StartCell is sent (SPEC §4.1).
    const cell = new Cell({
      id: String(this.#nextCellId++),
      executionId: request.executionId,
      toolCallId: request.toolCallId,
      port: (cell) => this.#cellPort(cell),
      heapLimitMb: this.cellHeapMb,
      initial: request.initial,
      maxOutputTokens: request.maxOutputTokens ?? this.#options.limits.defaultMaxOutputTokens,
      definitions: request.definitions,
      traceparent: request.traceparent,
      metrics: this.#telemetry.metrics === NO_METRICS ? undefined : this.#telemetry.metrics,
    });
    const span = this.#telemetry.tracer.enabled
      ? this.#telemetry.tracer.start("Cell", request.span, { "code_mode.cell_id": cell.id })
      : NO_SPAN;
    this.#watches.set(cell, { span });
    this.#cells.set(cell.id, cell);
    this.#running.set(cell.id, cell);
    if (this.#running.size === 1) this.#runtime.setActive?.(true);
    this.#cellPermits.set(cell, request.permits);
    if (!check.ok) {
      cell.refuse(check.errorText);
      return cell;
    }
    await this.#runtime.send({
      startCell: {
        cellId: cell.id,
        source: check.source,
        tools: request.tools,
        storeVersion: this.#storeVersion,
      },
    }).catch(() => {});
    return cell;
  }

  /** A cell that Wait/Terminate can name, if any. */
  cell(cellId: string): Cell | undefined {
    return this.#cells.get(cellId);
  }

  /**
   * Abandons an Execute's cell (SPEC §4.1 step 7): terminate in the background, drop its output.
   *
   * @param cell the cell whose Execute stream went away
   */
  abandon(cell: Cell): void {
    this.#cells.delete(cell.id);
    void cell.terminate().catch(() => {});
  }

  /**
   * The port through which one cell reaches this session (`cell_port.ts`): its actor commits,
   * notifies, calls tools and stops through it; the cell returns credit, forgets its delivered
   * outcome and reports its close.
   */
  #cellPort(cell: Cell): CellPort {
    const clock = this.#options.clock;
    // The runtime the cell starts on (a restart replaces this.#runtime, not the cell's).
    const runtime = this.#runtime;
    return {
      clock,
      mode: this.outputMode === OUTPUT_SERVER ? "server" : "client",
      maxMessageBytes: this.#options.limits.maxMessageBytes,
      serialOutcomes: this.#options.serialOutcomes ?? false,
      queue: {
        capacity: this.#options.limits.outputEventQueueCapacity,
        bytes: this.#options.limits.outputEventQueueBytes,
      },
      credit: (events) => {
        void this.#runtime.send({ credit: { cellId: cell.id, events, bytes: 0 } }).catch(() => {});
      },
      commit: (writes, buildEvent, state) => {
        const watch = this.#watches.get(cell);
        const build = () => {
          const event = buildEvent();
          if (watch) watch.committed = { failed: event.errorText !== undefined };
          return event;
        };
        return Promise.resolve(this.#commit(writes, build, state));
      },
      stop: () => {
        if (!cell.running || this.#state !== "open") return;
        void this.#runtime.send({ stopCell: { cellId: cell.id } }).catch(() => {});
        // A cell running synchronous code cannot confirm: restart its runtime (SPEC §4.5). A cell
        // whose isolate has not begun cannot be running code: its runtime is busy (creating a
        // Worker blocks it ~30 ms, more on a loaded machine), and a restart would end the
        // session's other cells, so it gets up to UNSTARTED_STOP_ROUNDS deadlines.
        const stopMs = this.#options.limits.cooperativeStopMs;
        // Began before the stop, or seen begun one deadline ago: it had its full deadline.
        let hadDeadline = cell.began;
        let rounds = 0;
        const check = () => {
          if (!cell.running || this.#state !== "open") return;
          if (hadDeadline || ++rounds >= UNSTARTED_STOP_ROUNDS) {
            // Without a hard stop (in-process isolation, SPEC §9.8) the cell is abandoned instead.
            if (this.#runtime.hardStop === false) return void this.#abandonUnstopped(cell);
            return void this.#restartRuntime(cell);
          }
          hadDeadline = cell.began;
          clock.setTimeout(check, stopMs);
        };
        clock.setTimeout(check, stopMs);
      },
      failed: (reason, detail) => this.#cellFailed(cell, runtime, reason, detail),
      forget: () => {
        if (this.#cells.get(cell.id) === cell) this.#cells.delete(cell.id);
      },
      closed: () => this.#cellClosed(cell),
      notify: (_callId, text) => this.#publishNotification(cell, text),
      invokeTool: async (call, signal) => {
        const id = call.id;
        const span = this.#telemetry.tracer.enabled
          ? this.#telemetry.tracer.start("ToolCall", this.#watches.get(cell)?.span, {
            "code_mode.tool": call.name.name,
          })
          : NO_SPAN;
        const result = await this.#bridge.dispatch({
          executionId: cell.executionId,
          cellId: cell.id,
          runtimeToolCallId: id,
          definition: cell.definitions.get(call.name.name),
          inputJson: call.input === undefined ? undefined : JSON.stringify(call.input),
          traceparent: cell.traceparent,
          nextSequence: () => cell.nextSequence(),
          leaseMark: this.#lease.pushed,
        }, signal);
        const failure = "errorMessage" in result ? result.errorMessage : undefined;
        const outcome = failure === undefined ? "succeeded" : signal.aborted ? "cancelled" : "failed";
        this.#telemetry.metrics.toolCall(outcome);
        span.set({ "code_mode.tool_outcome": outcome });
        span.end(failure);
        if (signal.aborted || !cell.running) return;
        await this.#runtime.send({ toolResult: { cellId: cell.id, runtimeToolCallId: id, ...result } })
          .catch(() => {});
      },
    };
  }

  /**
   * Publishes a `notify()` on the lease (SPEC §7.8): it takes a delegate permit (else it is dropped
   * and logged), and it never takes the lease's last places, which stay free for the `CellClosed`
   * and `tool_call_cancelled` events of the cells (their producers do not wait).
   */
  #publishNotification(cell: Cell, text: string): void {
    const host = this.#options.hostDelegatePermits.tryAcquire();
    const session = host && this.#sessionDelegatePermits.tryAcquire();
    try {
      const reserve = Math.min(
        this.#options.limits.maxActiveCellsPerSession * 2,
        this.#options.limits.leaseEventQueueCapacity / 2,
      );
      const room = this.#lease.size < this.#options.limits.leaseEventQueueCapacity - reserve;
      if (!host || !session || !room) {
        // One line per second per session at most, with the count of those left out.
        this.#options.log.repeated(
          "warn",
          `notification dropped ${this.ref}`,
          "code-mode notification dropped",
          {
            session_ref: this.ref,
            cell_id: cell.id,
            error: !host || !session ? "no delegate permit" : "the lease is full",
          },
        );
        return;
      }
      const queued = this.#lease.push({
        notification: {
          notificationId: crypto.randomUUID(),
          executionId: cell.executionId,
          cellId: cell.id,
          callId: cell.toolCallId,
          text,
        },
      });
      if (queued) this.#lastNotification.set(cell, this.#lease.pushed);
    } finally {
      session?.release();
      host?.release();
    }
  }

  /** Counts a closed cell by its outcome and ends its span. */
  #cellOutcome(cell: Cell): void {
    const watch = this.#watches.get(cell);
    this.#watches.delete(cell);
    const reason = cell.endReason?.kind;
    // A completion with an error text is the end reason's when the isolate ended without a result.
    const outcome: CellOutcomeLabel = !watch?.committed
      ? "terminated"
      : !watch.committed.failed
      ? "completed"
      : cell.resulted
      ? "failed"
      : reason === "heapLimit"
      ? "heap_limit"
      : reason === "restart"
      ? "restart"
      : this.#crashed
      ? "crashed"
      : "failed";
    this.#telemetry.metrics.cellClosed(outcome);
    watch?.span.set({ "code_mode.outcome": outcome });
    watch?.span.end();
  }

  #cellClosed(cell: Cell): void {
    this.#cellOutcome(cell);
    if (this.#running.delete(cell.id) && this.#running.size === 0) this.#runtime.setActive?.(false);
    this.touch();
    const permits = this.#cellPermits.get(cell) ?? [];
    this.#cellPermits.delete(cell);
    if (this.#state === "crashed" || this.#state === "closed") {
      for (const permit of permits) permit.release();
      return;
    }
    const queued = this.#lease.push({
      cellClosed: {
        executionId: cell.executionId,
        cellId: cell.id,
        finalToolCallSequence: cell.lastSequence,
        ...(this.#state === "closing" ? { closing: true } : {}),
      },
    });
    for (const permit of permits) permit.release();
    if (!queued && this.#state === "open") {
      void this.close("overflow");
    }
  }

  /**
   * Commits a cell's completion and its stored writes atomically (SPEC §4.7, §6). A merge that
   * would exceed `maxStoredValueBytes` is not applied, and the completion then carries the cap
   * message unless the cell had already failed.
   */
  #commit(
    writes: Map<string, string>,
    buildEvent: () => CompletedEvent,
    state: CellState,
  ): "committed" | "rejected" {
    let size = this.#storeBytes;
    for (const [key, value] of writes) {
      const old = this.#store.get(key);
      if (old !== undefined) size -= utf8ByteLength(key) + utf8ByteLength(old);
      size += utf8ByteLength(key) + utf8ByteLength(value);
    }
    const cap = this.#options.limits.maxStoredValueBytes;
    const refused = size > cap ? `stored values exceed the ${cap}-byte session limit` : undefined;
    return state.commitCompletion(
      () => {
        const event = buildEvent();
        if (refused !== undefined && event.errorText === undefined) event.errorText = refused;
        return event;
      },
      () => {
        if (refused !== undefined || writes.size === 0) return;
        for (const [key, value] of writes) this.#store.set(key, value);
        this.#storeBytes = size;
        this.#storeVersion++;
        const entries = [...writes].map(([key, valueJson]) => ({ key, valueJson }));
        void this.#runtime.send({ storeUpdate: { version: this.#storeVersion, entries } }).catch(() => {});
      },
    );
  }

  /**
   * Registers a tool subscription (SPEC §7.6 rule 1).
   *
   * @param filters its tool-name filters (already validated)
   * @returns the subscription; pass it to {@link Session.unsubscribe} when its stream ends
   * @throws {HostError} `overloaded` beyond `maxSubscriptionsPerSession`
   */
  subscribe(filters: readonly ToolNameInfo[]): Subscription {
    try {
      return this.#bridge.subscribe(filters);
    } catch (error) {
      if (error instanceof TooManySubscriptions) {
        this.#telemetry.metrics.admissionRefused("maxSubscriptionsPerSession");
        throw new HostError("overloaded", "code-mode session has too many tool subscriptions");
      }
      throw error;
    }
  }

  /**
   * A subscription stream ended. If it held unanswered invocations, the whole session closes
   * (SPEC §7.6 rule 5): replaying could run a tool twice, dropping would leave a sequence gap.
   *
   * @param subscription the subscription
   */
  unsubscribe(subscription: Subscription): void {
    if (this.#bridge.unsubscribe(subscription) && this.#state === "open") void this.close("subscription");
  }

  /** Whether a tool invocation ID was ever issued in this session. */
  issuedInvocation(invocationId: string): boolean {
    return this.#bridge.issued(invocationId);
  }

  /**
   * Delivers a `CompleteToolCall` result (ignored when already finished or cancelled).
   *
   * @param invocationId the invocation
   * @param completion the output JSON text or the failure message
   */
  completeToolCall(invocationId: string, completion: { outputJson: string } | { failed: string }): void {
    this.#bridge.complete(invocationId, completion);
  }

  /** Ends a cell that did not confirm its stop, leaving its isolate to the runtime (SPEC §9.8). */
  #abandonUnstopped(cell: Cell): void {
    this.#runtime.abandonCell?.(cell.id);
    cell.end({ kind: "default" });
    this.#options.log.warn("cell did not confirm its stop and was abandoned", {
      session_ref: this.ref,
      cell_id: cell.id,
    });
  }

  /**
   * Hard stop (SPEC §4.5): kills the runtime, ends every cell that ran in it, and replaces the
   * runtime while the session, its lease and its stored values stay.
   */
  async #restartRuntime(stopped: Cell): Promise<void> {
    if (this.#restarting) return await this.#restarting;
    void this.#runtime.kill();
    this.#telemetry.metrics.runtimeRestarted();
    await this.#replaceRuntime(
      (cell) => cell.terminating ? { kind: "default" } : { kind: "restart", stoppedCellId: stopped.id },
      "session runtime restarted to stop a cell",
      { cell_id: stopped.id },
    );
  }

  /**
   * Ends every cell of the current (killed or dead) runtime with its reason and replaces the
   * runtime; the session, its lease and its stored values stay.
   */
  async #replaceRuntime(
    reason: (cell: Cell) => EndReason,
    message: string,
    fields: LogFields,
  ): Promise<void> {
    if (this.#restarting) return await this.#restarting;
    const { promise, resolve } = Promise.withResolvers<void>();
    this.#restarting = promise;
    try {
      for (const cell of [...this.#running.values()]) cell.end(reason(cell));
      let next: RuntimeTransport;
      try {
        next = await this.#options.replaceRuntime();
      } catch (error) {
        this.#fail(`session runtime could not be replaced: ${(error as Error).message}`, false);
        return;
      }
      if (this.#state !== "open") {
        void next.stop();
        return;
      }
      this.#runtime = next;
      this.#attach(next);
      this.#options.log.info(message, { session_ref: this.ref, ...fields });
    } finally {
      this.#restarting = undefined;
      resolve();
    }
  }

  // ---- activity and idle timeout ----------------------------------------------------------------

  /** Records a request naming the session (SPEC §3.3 idle rule). */
  touch(): void {
    this.#lastActivity = this.#options.clock.now();
  }

  /**
   * Tracks an observation in flight (Execute, Wait, Terminate) for the idle rule.
   *
   * @param work the observation
   * @returns its result
   */
  async track<T>(work: () => Promise<T>): Promise<T> {
    this.#inFlight++;
    this.touch();
    try {
      return await work();
    } finally {
      this.#inFlight--;
      this.touch();
    }
  }

  #armIdleTimer(): void {
    const idleMs = this.#options.limits.idleSessionTimeoutMs;
    if (idleMs <= 0 || this.#state !== "open") return;
    const clock = this.#options.clock;
    const due = this.#lastActivity + idleMs - clock.now();
    this.#idleTimer = clock.setTimeout(() => {
      if (this.#state !== "open") return;
      const idle = this.#inFlight === 0 && this.#running.size === 0 &&
        clock.now() - this.#lastActivity >= idleMs;
      if (idle) void this.close("idle");
      else this.#armIdleTimer();
    }, Math.max(1, Math.min(due, idleMs)));
  }

  #clearIdleTimer(): void {
    if (this.#idleTimer !== undefined) this.#options.clock.clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
  }

  // ---- waits and yields -------------------------------------------------------------------------

  /**
   * Registers a Wait (SPEC §4.3 step 2).
   *
   * @param waitId the client's ID
   * @returns its cancellation and yield signals, and `finish` to call when the Wait ends
   * @throws {HostError} `id_reused` when reused, `cancelled` when pre-cancelled
   */
  registerWait(waitId: string): { cancel: AbortSignal; yieldNow: AbortSignal; finish(): void } {
    if (this.#activeWaits.has(waitId) || this.#recentWaits.has(waitId)) {
      throw new HostError("id_reused", `code-mode wait ID \`${waitId}\` was reused`);
    }
    this.#recentWaits.add(waitId);
    if (this.#preCancelled.delete(waitId)) {
      throw new HostError("cancelled", "code-mode wait was cancelled");
    }
    const done = Promise.withResolvers<void>();
    const wait: ActiveWait = {
      cancel: new AbortController(),
      yieldNow: new AbortController(),
      done: done.promise,
    };
    if (this.#preYielded.delete(waitId)) wait.yieldNow.abort();
    this.#activeWaits.set(waitId, wait);
    return {
      cancel: wait.cancel.signal,
      yieldNow: wait.yieldNow.signal,
      finish: () => {
        this.#activeWaits.delete(waitId);
        done.resolve();
      },
    };
  }

  /**
   * Fires the yield signal of an execution's initial observation or of a Wait (SPEC §4.4).
   *
   * @param id the execution or wait ID
   * @param kind which kind of ID
   */
  yieldObservation(id: string, kind: "execution" | "wait"): void {
    if (kind === "execution") {
      const active = this.#activeExecutions.get(id);
      if (active) active.abort();
      else if (!this.#recentExecutions.has(id)) this.#preYielded.add(id);
    } else {
      const active = this.#activeWaits.get(id);
      if (active) active.yieldNow.abort();
      else if (!this.#recentWaits.has(id)) this.#preYielded.add(id);
    }
  }

  /**
   * Cancels a Wait and resolves once it has retired (SPEC §4.4).
   *
   * @param waitId the wait ID
   */
  async cancelWait(waitId: string): Promise<void> {
    const active = this.#activeWaits.get(waitId);
    if (active) {
      active.cancel.abort(new HostError("cancelled", "code-mode wait was cancelled"));
      await active.done;
    } else if (!this.#recentWaits.has(waitId)) {
      this.#preCancelled.add(waitId);
    }
  }

  // ---- closing ----------------------------------------------------------------------------------

  /**
   * Closes the session (SPEC §3.4) and resolves once it has been removed from the registry.
   *
   * @param trigger what closed it; `shutdown` ends the lease `shutting_down`, `overflow` ends it
   *   `lease_overflow`, anything else OK
   */
  async close(
    trigger: "close" | "lease" | "shutdown" | "overflow" | "idle" | "subscription" = "close",
  ): Promise<void> {
    if (this.#state !== "open") return await this.#removed.promise;
    this.#state = "closing";
    this.#closing.abort();
    this.#clearIdleTimer();
    if (this.#restarting) await this.#restarting;
    // A Wait pending at the closure is cancelled, in Codex's host's words (over gRPC), or answered
    // with the Terminated outcome of the cell the closure terminates (over JSON host V1).
    if (!this.#options.closureTerminatesWaits) {
      const cancelled = new HostError("cancelled", "code-mode wait was cancelled");
      for (const wait of this.#activeWaits.values()) wait.cancel.abort(cancelled);
    }
    // Pending tool invocations are dropped and subscription streams end (SPEC §3.4 steps 4–5).
    this.#bridge.closeAll();
    const terminations: Promise<Outcome | void>[] = [];
    for (const cell of this.#running.values()) {
      if (!cell.terminating) terminations.push(cell.terminate().catch(() => {}));
    }
    await this.#runtime.stop();
    await Promise.all(terminations);
    const status = trigger === "shutdown"
      ? new HostError("shutting_down", "code-mode host is shutting down")
      : trigger === "overflow"
      ? new HostError("lease_overflow", "code-mode session event queue is full")
      : undefined;
    this.#state = "closed";
    this.#lease.end(status);
    this.#remove();
  }
}

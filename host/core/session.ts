/**
 * One host session (SPEC §3): its cells, lease and lifetime, over the parts that do one job each —
 * the supervised runtime (`session_runtime.ts`), the stored values (`stored_values.ts`), the
 * execution and wait IDs (`session_observations.ts`), the idle timer (`session_activity.ts`), the
 * cells' telemetry (`cell_telemetry.ts`) and the tool bridge (`tool_bridge.ts`).
 *
 * - The host owns the authoritative stored-value map; the runtime's replica is kept current by
 *   sending each commit as a `StoreUpdate` before any later `StartCell` (SPEC §6).
 * - Closing follows SPEC §3.4; a runtime that ends on its own is a crash (SPEC §3.5): the
 *   session leaves the registry at once and every observation completes with
 *   `exec runtime ended unexpectedly`.
 *
 * @module
 */
import { Cell, type Outcome } from "./cell.ts";
import type { CellPort } from "./cell_port.ts";
import type { CellToolCall } from "./cell_channel.ts";
import { CellTelemetry } from "./cell_telemetry.ts";
import { HostError, messageOf } from "./errors.ts";
import { LeaseQueue } from "./lease_queue.ts";
import type { LogFields } from "../ops/log.ts";
import { type Permit, Permits } from "./permits.ts";
import type { RuntimeTransport } from "../runtime/runtime_transport.ts";
import { SessionActivity } from "./session_activity.ts";
import {
  type CloseTrigger,
  OUTPUT_SERVER,
  type SessionEvent,
  type SessionOptions,
  type StartRequest,
} from "./session_types.ts";
import { SessionNotifications } from "./session_notifications.ts";
import { type RegisteredWait, SessionObservations } from "./session_observations.ts";
import { type RuntimeHandover, SessionRuntime } from "./session_runtime.ts";
import { checkCellSource } from "./source_check.ts";
import { StoredValues } from "./stored_values.ts";
import { type Subscription, ToolBridge, type ToolNameInfo, TooManySubscriptions } from "./tool_bridge.ts";
import { NO_METRICS, NO_TELEMETRY, type Telemetry } from "../ops/telemetry.ts";

export {
  type CloseTrigger,
  OUTPUT_CLIENT,
  OUTPUT_SERVER,
  type SessionEvent,
  type SessionOptions,
  type StartRequest,
} from "./session_types.ts";
export { NOTIFICATION_FLUSH_MS } from "./session_notifications.ts";

const CLOSED_MESSAGE = "code-mode session is closed";
/** Idle CPU is not judged this long after a heap-limit cell, ms: its Worker's last collections run ~1 s. */
const HEAP_LIMIT_SETTLE_MS = 3_000;
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
  #state: "open" | "closing" | "crashed" | "closed" = "open";
  #lease: LeaseQueue<SessionEvent>;
  #removed = Promise.withResolvers<void>();
  #nextCellId = 1;
  /** Cells a Wait or Terminate can still name. */
  #cells = new Map<string, Cell>();
  /** Cells whose isolate has not stopped, by cell ID (includes forgotten ones). */
  #running = new Map<string, Cell>();
  #cellPermits = new Map<Cell, Permit[]>();
  #store: StoredValues;
  #observations: SessionObservations;
  #activity: SessionActivity;
  #runtime: SessionRuntime;
  #bridge: ToolBridge;
  #sessionDelegatePermits: Permits;
  /** Aborts when closing begins or the session crashes. */
  #closing = new AbortController();
  #telemetry: Telemetry;
  #cellTelemetry: CellTelemetry;
  /** The session's runtime crashed (its cells' outcome is `crashed`). */
  #crashed = false;
  #notifications: SessionNotifications;

  /** @param options see {@link SessionOptions} */
  constructor(options: SessionOptions) {
    this.#options = options;
    this.id = options.id;
    this.ref = options.ref;
    this.outputMode = options.outputMode;
    this.maxYieldTimeMs = options.maxYieldTimeMs;
    this.cellHeapMb = options.cellHeapMb;
    const limits = options.limits;
    this.#telemetry = options.telemetry ?? NO_TELEMETRY;
    this.#cellTelemetry = new CellTelemetry(this.#telemetry);
    this.activeCells = new Permits(limits.maxActiveCellsPerSession);
    this.#observations = new SessionObservations(limits.maxRecentIds);
    this.#store = new StoredValues(limits.maxStoredValueBytes, options.budget);
    this.#lease = new LeaseQueue(limits.leaseEventQueueCapacity);
    this.#sessionDelegatePermits = new Permits(
      options.sessionDelegateCapacity ?? limits.maxPendingDelegateCallsPerSession,
    );
    this.#bridge = new ToolBridge({
      sessionId: options.id,
      maxMessageBytes: limits.maxMessageBytes,
      maxRecentIds: limits.maxRecentIds,
      maxSubscriptions: limits.maxSubscriptionsPerSession,
      subscriptionQueueCapacity: limits.subscriptionQueueCapacity,
      hostDelegatePermits: options.hostDelegatePermits,
      sessionDelegatePermits: this.#sessionDelegatePermits,
      isOpen: () => this.#state === "open",
      closed: this.#closing.signal,
      onCancelled: (invocationId) => {
        this.#lease.push({ toolCallCancelled: { invocationId } });
      },
    });
    this.#lease.push({ opened: { sessionId: this.id, outputTruncation: this.outputMode } });
    this.#notifications = new SessionNotifications({
      lease: this.#lease,
      limits,
      log: options.log,
      clock: options.clock,
      ref: options.ref,
      hostDelegatePermits: options.hostDelegatePermits,
      sessionDelegatePermits: this.#sessionDelegatePermits,
    });
    this.#runtime = new SessionRuntime({
      runtime: options.runtime,
      ref: options.ref,
      cellHeapMb: options.cellHeapMb,
      limits,
      log: options.log,
      clock: options.clock,
      metrics: this.#telemetry.metrics,
      sessionId: this.id,
      outputMode: this.outputMode,
      jsonOutcomeSizes: options.jsonOutcomeSizes ?? false,
      running: this.#running,
      replica: (send) => this.#store.sendReplica(send),
      isOpen: () => this.#state === "open",
      replace: options.replaceRuntime,
      giveBack: options.giveBackRuntime,
      crashed: (reason, panicked, fields) => this.#fail(reason, panicked, fields),
    });
    this.#activity = new SessionActivity({
      clock: options.clock,
      idleMs: limits.idleSessionTimeoutMs,
      isOpen: () => this.#state === "open",
      hasRunningCells: () => this.#running.size > 0,
      onIdle: () => this.closeInBackground("idle"),
      onObserved: options.onObserved,
    });
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
    return this.#activity.inFlight;
  }

  /** Number of cells whose isolate is running. */
  get runningCells(): number {
    return this.#running.size;
  }

  /** Resolves once the session has been removed from the registry. */
  get removed(): Promise<void> {
    return this.#removed.promise;
  }

  /** The session's current runtime (a diagnostics view: its process id). */
  get runtime(): RuntimeTransport {
    return this.#runtime.current;
  }

  /** Whether the session has given its runtime back while idle (`idleRuntimeReleaseMs`). */
  get runtimeReleased(): boolean {
    return this.#runtime.released;
  }

  /** The session's side of `runtimeHandover` (its idle runtime given, a runtime taken back). */
  get handover(): RuntimeHandover {
    return this.#runtime;
  }

  /** The lease stream: `opened` first, then session events, until the session ends. */
  lease(signal?: AbortSignal): AsyncGenerator<SessionEvent> {
    return this.#lease.drain(signal);
  }

  /**
   * Publication before release: see {@link SessionNotifications.flushed}.
   *
   * @param cell the cell whose outcome is about to be released
   * @returns a promise to await first, or `undefined` when there is nothing to wait for
   */
  notificationsFlushed(cell: Cell): Promise<void> | undefined {
    return this.#notifications.flushed(cell);
  }

  /** Lease events queued and not yet taken by the lease's reader. */
  get leaseBacklog(): number {
    return this.#lease.size;
  }

  /** @throws {HostError} `session_closed` `code-mode session is closed` once closing began */
  ensureOpen(): void {
    if (this.#state !== "open") throw new HostError("session_closed", CLOSED_MESSAGE);
  }

  #fail(reason: string, panicked: boolean, fields: LogFields = {}): void {
    if (this.#state === "crashed" || this.#state === "closed") return;
    this.#state = "crashed";
    this.#crashed = true;
    this.#activity.stop();
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
    // What the session held (unread outcomes, stored values) is the session's no more.
    this.#options.budget?.close();
    this.#options.onRemoved(this);
    this.#removed.resolve();
    this.#options.log.debug("session closed", { session_id: this.id, session_ref: this.ref });
  }

  /**
   * Reserves an execution ID (SPEC §4.1 step 3).
   *
   * @param executionId the client's ID
   * @returns the execution's yield signal (pre-fired if a YieldObservation came first)
   * @throws {HostError} `id_reused` when reused, `session_closed` when the session closed
   */
  reserveExecution(executionId: string): AbortSignal {
    return this.#observations.reserveExecution(executionId, () => this.ensureOpen());
  }

  /** Ends an execution's reservation (its initial observation is over). */
  releaseExecution(executionId: string): void {
    this.#observations.releaseExecution(executionId);
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
      // A runtime taken again after an idle release, a replacement in progress, and the stored
      // values a commit or a replica is still sending: the cell starts from the map as it is once
      // they are done (SPEC §6).
      for (let wait = this.#runtime.acquire() ?? this.#store.settling; wait;) {
        await wait;
        wait = this.#runtime.acquire() ?? this.#store.settling;
      }
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
    this.#cellTelemetry.started(cell, request.span);
    this.#cells.set(cell.id, cell);
    this.#running.set(cell.id, cell);
    if (this.#running.size === 1) this.#runtime.setActive(true);
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
        storeVersion: this.#store.version,
      },
    });
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
    cell.terminate().catch((error) =>
      this.#options.log.debug("abandoned cell not terminated", {
        session_ref: this.ref,
        cell_id: cell.id,
        error: messageOf(error),
      })
    );
  }

  /**
   * The port through which one cell reaches this session (`cell_port.ts`): its actor commits,
   * notifies, calls tools and stops through it; the cell returns credit, forgets its delivered
   * outcome and reports its close.
   */
  #cellPort(cell: Cell): CellPort {
    // The runtime the cell starts on (a restart replaces the session's, not the cell's).
    const runtime = this.#runtime.current;
    return {
      clock: this.#options.clock,
      mode: this.outputMode === OUTPUT_SERVER ? "server" : "client",
      maxMessageBytes: this.#options.limits.maxMessageBytes,
      budget: this.#options.budget,
      serialOutcomes: this.#options.serialOutcomes ?? false,
      queue: {
        capacity: this.#options.limits.outputEventQueueCapacity,
        bytes: this.#options.limits.outputEventQueueBytes,
      },
      credit: (events) => this.#runtime.post({ credit: { cellId: cell.id, events, bytes: 0 } }),
      commit: (writes, buildEvent, state) => {
        // Committed atomically with the completion (SPEC §4.7, §6): a merge over
        // `maxStoredValueBytes` is not applied, and the completion then carries the cap message
        // unless the cell had already failed. A large write set is checked and applied in time
        // slices, after the commits before it (`stored_values.ts`).
        let committed!: ReturnType<typeof state.commitCompletion>;
        const done = this.#store.commit(
          writes,
          (refused) => {
            let apply = false;
            committed = state.commitCompletion(
              () => {
                const event = buildEvent();
                if (refused !== undefined && event.errorText === undefined) event.errorText = refused;
                this.#cellTelemetry.committed(cell, event.errorText !== undefined);
                return event;
              },
              () => {
                apply = true;
              },
            );
            return apply;
          },
          (update) => this.#runtime.post({ storeUpdate: update }),
        );
        return done === undefined ? Promise.resolve(committed) : done.then(() => committed);
      },
      stop: () => this.#runtime.stopCell(cell),
      failed: (reason, detail) => this.#runtime.cellFailed(cell, runtime, reason, detail),
      forget: () => {
        if (this.#cells.get(cell.id) === cell) this.#cells.delete(cell.id);
      },
      closed: () => this.#cellClosed(cell),
      notify: (_callId, text) => this.#notifications.publish(cell, text),
      invokeTool: (call, signal) =>
        this.#invokeTool(cell, call, signal).catch((error) =>
          this.#options.log.error("code-mode tool call failed", {
            session_ref: this.ref,
            cell_id: cell.id,
            error: messageOf(error),
          })
        ),
    };
  }

  /** Dispatches a cell's tool call (SPEC §7) and answers the runtime with its result. */
  async #invokeTool(cell: Cell, call: CellToolCall, signal: AbortSignal): Promise<void> {
    const span = this.#cellTelemetry.toolCallSpan(cell, call.name.name);
    const result = await this.#bridge.dispatch({
      executionId: cell.executionId,
      cellId: cell.id,
      runtimeToolCallId: call.id,
      definition: cell.definitions.get(call.name.name),
      inputJson: call.input === undefined ? undefined : JSON.stringify(call.input),
      traceparent: cell.traceparent,
      nextSequence: () => cell.nextSequence(),
      leaseMark: this.#lease.pushed,
    }, signal);
    const failure = "errorMessage" in result ? result.errorMessage : undefined;
    const outcome = failure === undefined ? "succeeded" : signal.aborted ? "cancelled" : "failed";
    this.#cellTelemetry.toolCallDone(span, outcome, failure);
    if (signal.aborted || !cell.running) return;
    await this.#runtime.send({ toolResult: { cellId: cell.id, runtimeToolCallId: call.id, ...result } });
  }

  #cellClosed(cell: Cell): void {
    this.#cellTelemetry.closed(cell, this.#crashed);
    const settleMs = cell.endReason?.kind === "heapLimit" ? HEAP_LIMIT_SETTLE_MS : 0;
    if (this.#running.delete(cell.id) && this.#running.size === 0) this.#runtime.setActive(false, settleMs);
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
    if (!queued && this.#state === "open") this.closeInBackground("overflow");
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
    if (this.#bridge.unsubscribe(subscription) && this.#state === "open") {
      this.closeInBackground("subscription");
    }
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

  /** Records a request naming the session (SPEC §3.3 idle rule). */
  touch(): void {
    this.#activity.touch();
  }

  /**
   * Tracks an observation in flight (Execute, Wait, Terminate) for the idle rule.
   *
   * @param work the observation
   * @returns its result
   */
  track<T>(work: () => Promise<T>): Promise<T> {
    return this.#activity.track(work);
  }

  /**
   * Registers a Wait (SPEC §4.3 step 2).
   *
   * @param waitId the client's ID
   * @returns its cancellation and yield signals, and `finish` to call when the Wait ends
   * @throws {HostError} `id_reused` when reused, `cancelled` when pre-cancelled
   */
  registerWait(waitId: string): RegisteredWait {
    return this.#observations.registerWait(waitId);
  }

  /**
   * Fires the yield signal of an execution's initial observation or of a Wait (SPEC §4.4).
   *
   * @param id the execution or wait ID
   * @param kind which kind of ID
   */
  yieldObservation(id: string, kind: "execution" | "wait"): void {
    this.#observations.yieldObservation(id, kind);
  }

  /**
   * Cancels a Wait and resolves once it has retired (SPEC §4.4).
   *
   * @param waitId the wait ID
   */
  cancelWait(waitId: string): Promise<void> {
    return this.#observations.cancelWait(waitId);
  }

  /**
   * Closes the session without waiting for it (idle, overflow, a subscription's or lease's end); the
   * session owns the closing, and a failure is logged.
   *
   * @param trigger what closed it (see {@link Session.close})
   */
  closeInBackground(trigger: CloseTrigger): void {
    this.close(trigger).catch((error) =>
      this.#options.log.error("code-mode session close failed", {
        session_ref: this.ref,
        trigger,
        error: messageOf(error),
      })
    );
  }

  /** A cell's termination by the closure failed (it had ended meanwhile): its outcome stands. */
  #closingFailure(cell: Cell, error: unknown): void {
    this.#options.log.debug("cell not terminated by the session's closure", {
      session_ref: this.ref,
      cell_id: cell.id,
      error: messageOf(error),
    });
  }

  /**
   * Closes the session (SPEC §3.4) and resolves once it has been removed from the registry.
   *
   * @param trigger what closed it; `shutdown` ends the lease `shutting_down`, `overflow` ends it
   *   `lease_overflow`, anything else OK
   */
  async close(trigger: CloseTrigger = "close"): Promise<void> {
    if (this.#state !== "open") return await this.#removed.promise;
    this.#state = "closing";
    this.#closing.abort();
    this.#activity.stop();
    const restarting = this.#runtime.restarting;
    if (restarting) await restarting;
    // A Wait pending at the closure is cancelled, in Codex's host's words (over gRPC), or answered
    // with the Terminated outcome of the cell the closure terminates (over JSON host V1).
    if (!this.#options.closureTerminatesWaits) this.#observations.cancelAllWaits();
    // Pending tool invocations are dropped and subscription streams end (SPEC §3.4 steps 4–5).
    this.#bridge.closeAll();
    const terminations: Promise<Outcome | void>[] = [];
    for (const cell of this.#running.values()) {
      if (!cell.terminating) {
        terminations.push(cell.terminate().catch((error) => this.#closingFailure(cell, error)));
      }
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

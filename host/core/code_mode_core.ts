/**
 * The transport-neutral API of the host (SPEC §3–§8): every operation a front door offers, as
 * typed functions and async iterables over a {@link SessionManager}. A door converts its wire
 * form to these requests, calls one method, and converts the result back; every domain rule
 * (identifiers, limits, permits, tool definitions, tool output JSON, missing cells, effective
 * yield) is checked here, so every door gives the same answers and the same messages.
 *
 * - Failures are {@link HostError}s with the exact messages of Codex's own host (where it and the
 *   SPEC differ, the reference wins); the door maps the codes.
 * - Validation happens in the reference's order (it decides which message a request with several
 *   faults gets).
 * - A UUID identifier (session, invocation, notification) is accepted in any form Codex's host
 *   parses (`validate.ts` `parseUuid`) and looked up by its canonical form.
 * - Cancellation is an `AbortSignal` in an options bag: the caller went away.
 * - A session's closure (not a crash) cancels its pending Waits (`code-mode wait was cancelled`)
 *   and marks what the closure produced: an Execute outcome released while the session closes, and
 *   the `CellClosed` of a cell it ended, carry `closing` (Codex's host sends neither; the gRPC
 *   door drops them).
 * - Notifications before outcomes: an outcome of a cell (Execute, Wait, Terminate) is returned only
 *   after every notification that cell published before it has been handed to the lease stream's
 *   transport, or after `NOTIFICATION_FLUSH_MS` (250 ms) when the lease is not being read
 *   (`Session.notificationsFlushed`). A door that writes each lease event to its transport before
 *   it asks for the next one therefore never sends a notification after its cell's outcome while
 *   its lease is read.
 *
 * @module
 */
import { MIB } from "../../proto/bytes.ts";
import { CellOperations } from "./cell_operations.ts";
import {
  CALLBACK_CAPACITY_MESSAGE,
  type CodeModeCoreOptions,
  type CompleteToolCallRequest,
  type ExecuteEvent,
  type ExecuteRequest,
  type Lease,
  type LeaseEvent,
  NO_RESOURCE_LIMITS,
  type ObservationResult,
  type OpenSessionRequest,
  type ToolCallSubscription,
  type ToolName,
  type WaitRequest,
  type YieldObservationRequest,
} from "./core_api.ts";
import { HostError } from "./errors.ts";
import type { Limits } from "./limits.ts";
import { parseJsonBytes, RequestRules } from "./request_rules.ts";
import { OUTPUT_CLIENT, OUTPUT_SERVER, type SessionEvent } from "./session.ts";
import type { SessionManager } from "./session_manager.ts";
import { parseUuid, validateIdentifier } from "./validate.ts";
import { type HostSpan, NO_METRICS, NO_SPAN, type Telemetry, type TimedMethod } from "../ops/telemetry.ts";

// The API's types and shared texts live in core_api.ts; a door imports them from here.
export * from "./core_api.ts";

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const NEVER = new AbortController().signal;

function toLeaseEvent(event: SessionEvent): LeaseEvent {
  if ("opened" in event) {
    const { sessionId, outputTruncation } = event.opened;
    return {
      type: "opened",
      sessionId,
      outputMode: outputTruncation === OUTPUT_SERVER ? "server" : "client",
    };
  }
  if ("toolCallCancelled" in event) return { type: "toolCallCancelled", ...event.toolCallCancelled };
  if ("notification" in event) return { type: "notification", ...event.notification };
  return { type: "cellClosed", ...event.cellClosed };
}

/**
 * The host's operations over a session manager.
 *
 * @example
 * ```ts ignore
 * const core = new CodeModeCore({ manager });
 * const lease = await core.openSession({});
 * for await (const event of core.execute({ sessionId: lease.sessionId, executionId: "e1",
 *   toolCallId: "c1", source: "text('hi')" })) console.log(event.type);
 * ```
 */
export class CodeModeCore {
  #manager: SessionManager;
  #rules: RequestRules;
  #cells: CellOperations;
  #clientSessionIds: boolean;
  #resourceLimits: boolean;
  #telemetry: Telemetry;
  /** Whether metrics or tracing is on (else requests run with no telemetry wrapper). */
  #telemetryOn: boolean;

  /** @param options see {@link CodeModeCoreOptions} */
  constructor(options: CodeModeCoreOptions) {
    this.#manager = options.manager;
    this.#clientSessionIds = options.clientSessionIds ?? false;
    this.#resourceLimits = options.resourceLimits ?? true;
    this.#rules = new RequestRules({
      manager: options.manager,
      clientSessionIds: this.#clientSessionIds,
      lenientIds: options.lenientIds ?? false,
    });
    this.#cells = new CellOperations(this.#rules, options.manager);
    this.#telemetry = options.manager.telemetry;
    this.#telemetryOn = this.#telemetry.metrics !== NO_METRICS || this.#telemetry.tracer.enabled;
  }

  /** A span for a request (none when tracing is off). */
  #span(name: string, traceparent: string | undefined, sessionId?: string): HostSpan {
    const tracer = this.#telemetry.tracer;
    if (!tracer.enabled) return NO_SPAN;
    const ref = sessionId === undefined ? undefined : this.#manager.sessions.get(sessionId)?.ref;
    return tracer.start(name, traceparent, { "code_mode.session_ref": ref });
  }

  /**
   * Runs one request with its span and, for Execute, Wait and Terminate, its latency.
   *
   * @param method the request's name
   * @param span its span, ended here (failed with the error's message when `work` throws)
   * @param work the request
   * @returns what `work` returns
   */
  async #observed<T>(
    method: TimedMethod | "OpenSession",
    span: HostSpan,
    work: () => Promise<T>,
  ): Promise<T> {
    if (!this.#telemetryOn) return await work();
    const start = performance.now();
    let failure: string | undefined;
    try {
      return await work();
    } catch (error) {
      failure = (error as Error)?.message ?? String(error);
      throw error;
    } finally {
      if (method !== "OpenSession") {
        this.#telemetry.metrics.requestDone(method, (performance.now() - start) / 1e3);
      }
      span.end(failure);
    }
  }

  /** The limits in force. */
  get limits(): Limits {
    return this.#rules.limits;
  }

  /**
   * Opens a session (SPEC §3.1).
   *
   * @param request mode, limits and (for client-named sessions) the ID
   * @returns the session's lease
   * @throws {HostError} `overloaded`, `shutting_down`, `invalid_request` (heap size, session ID),
   *   `unsupported` (a heap size where resource limits are not supported),
   *   `session_exists`, `id_reused`, `runtime_failed`
   */
  openSession(request: OpenSessionRequest): Promise<Lease> {
    const span = this.#span("OpenSession", request.traceparent);
    return this.#observed("OpenSession", span, async () => {
      const lease = await this.#openSession(request);
      span.set({ "code_mode.session_ref": this.#manager.sessions.get(lease.sessionId)?.ref });
      return lease;
    });
  }

  async #openSession(request: OpenSessionRequest): Promise<Lease> {
    const limits = this.#rules.limits;
    using _permit = this.#manager.permit("request");
    const slot = this.#manager.acquireSlot();
    let sessionId: string | undefined;
    let heapBytes = request.maxHeapSizeBytes;
    try {
      if (request.maxPendingDelegateCalls === 0) {
        throw new HostError("invalid_request", CALLBACK_CAPACITY_MESSAGE);
      }
      if (heapBytes !== undefined) {
        // Codex's own host takes any u64 here and runs cells anyway: clamp into what works.
        const min = BigInt(limits.minHeapSizeBytes);
        heapBytes = heapBytes < min ? min : heapBytes > MAX_SAFE ? MAX_SAFE : heapBytes;
      }
      if (heapBytes !== undefined && !this.#resourceLimits) {
        throw new HostError("unsupported", NO_RESOURCE_LIMITS);
      }
      if (request.sessionId !== undefined || this.#clientSessionIds) {
        if (!this.#clientSessionIds) {
          throw new HostError("invalid_request", "code-mode session IDs are chosen by the host");
        }
        sessionId = this.#rules.id(request.sessionId, "session ID");
      }
    } catch (error) {
      slot.release();
      throw error;
    }
    const heap = Number(heapBytes ?? BigInt(limits.defaultMaxHeapSizeBytes));
    const outputMode = request.outputMode === "server" ? "server" : "client";
    const session = await this.#manager.open({
      sessionId,
      outputMode: outputMode === "server" ? OUTPUT_SERVER : OUTPUT_CLIENT,
      maxYieldTimeMs: request.maxYieldTimeMs,
      cellHeapMb: Math.ceil(heap / MIB),
      maxPendingDelegateCalls: request.maxPendingDelegateCalls,
      delegatePermits: request.delegatePermits,
      jsonOutcomeSizes: request.jsonOutcomeSizes,
      serialOutcomes: request.serialOutcomes,
      closureTerminatesWaits: request.closureTerminatesWaits,
      client: request.client,
    }, slot);
    return {
      sessionId: session.id,
      outputMode,
      get backlog() {
        return session.leaseBacklog;
      },
      events: async function* (signal?: AbortSignal): AsyncGenerator<LeaseEvent> {
        try {
          for await (const event of session.lease(signal)) yield toLeaseEvent(event);
        } finally {
          if (signal?.aborted) session.closeInBackground("lease");
        }
      },
    };
  }

  /**
   * Closes a session (SPEC §3.4) and resolves once it is gone.
   *
   * @param sessionId the session
   * @throws {HostError} `invalid_request`, `unknown_session`, `overloaded`
   */
  async closeSession(sessionId: string): Promise<void> {
    const session = this.#rules.lookup(sessionId);
    using _permit = this.#manager.permit("control");
    await session.close("close");
  }

  /**
   * Starts a cell and observes it (SPEC §4.1): `started` as soon as the cell has its ID, then its
   * initial observation's outcome. When `signal` aborts after `started`, the cell is abandoned
   * (terminated in the background) and no outcome follows.
   *
   * @param request the Execute
   * @param options `signal`: the caller went away
   * @returns the events
   * @throws {HostError} `invalid_request`, `unknown_session`, `overloaded`, `id_reused`,
   *   `session_closed`
   */
  async *execute(
    request: ExecuteRequest,
    options: { signal?: AbortSignal } = {},
  ): AsyncGenerator<ExecuteEvent> {
    const start = performance.now();
    // Telemetry off: no wrapper at all around the cell's events.
    if (!this.#telemetryOn) {
      return yield* this.#cells.execute(request, options.signal ?? NEVER, start, NO_SPAN);
    }
    const span = this.#span("Execute", request.traceparent, request.sessionId);
    let failure: string | undefined;
    let observed = false;
    // Latency is the time to the initial outcome (or the failure), as the caller waits for it.
    const done = () => {
      if (observed) return;
      observed = true;
      this.#telemetry.metrics.requestDone("Execute", (performance.now() - start) / 1e3);
      span.end(failure);
    };
    try {
      for await (const event of this.#cells.execute(request, options.signal ?? NEVER, start, span)) {
        if (event.type === "started") span.set({ "code_mode.cell_id": event.cellId });
        else {
          span.set({ "code_mode.outcome": event.outcome.kind });
          done();
        }
        yield event;
      }
    } catch (error) {
      failure = (error as Error)?.message ?? String(error);
      throw error;
    } finally {
      done();
    }
  }

  /**
   * Observes a cell until it yields, completes or is terminated (SPEC §4.3).
   *
   * @param request the Wait
   * @param options `signal`: the caller went away (fails `cancelled`, nothing is consumed)
   * @returns the cell's outcome, or the missing-cell outcome
   * @throws {HostError} `invalid_request`, `unknown_session`, `overloaded`, `session_closed`,
   *   `id_reused`, `cancelled`, `cell_busy`
   */
  wait(request: WaitRequest, options: { signal?: AbortSignal } = {}): Promise<ObservationResult> {
    const span = this.#span("Wait", request.traceparent, request.sessionId);
    span.set({ "code_mode.cell_id": request.cellId });
    return this.#observed("Wait", span, () => this.#cells.wait(request, options.signal ?? NEVER));
  }

  /**
   * Terminates a cell and returns its final outcome (SPEC §4.5).
   *
   * @param request the session and cell; `maxTokens`: Server mode: the outcome's token budget (JSON V1's
   *   `maxOutputTokens`; gRPC's Terminate has none), default `limits.defaultMaxOutputTokens`
   * @returns the cell's outcome, or the missing-cell outcome
   * @throws {HostError} `invalid_request`, `unknown_session`, `overloaded`, `session_closed`,
   *   `cell_busy`
   */
  terminate(
    request: { sessionId: string; cellId: string; traceparent?: string; maxTokens?: bigint },
  ): Promise<ObservationResult> {
    const span = this.#span("Terminate", request.traceparent, request.sessionId);
    span.set({ "code_mode.cell_id": request.cellId });
    return this.#observed("Terminate", span, () => this.#cells.terminate(request));
  }

  /**
   * Ends an execution's initial observation or a Wait early (SPEC §4.4); an ID not seen yet is
   * remembered.
   *
   * @param request the session and the observation
   * @throws {HostError} `invalid_request`, `unknown_session`, `overloaded`
   */
  yieldObservation(request: YieldObservationRequest): void {
    const session = this.#rules.lookup(request.sessionId);
    using _permit = this.#manager.permit("control");
    const observation = request.observation;
    if (observation?.kind === "execution") {
      session.yieldObservation(this.#rules.id(observation.executionId, "execution ID"), "execution");
    } else if (observation?.kind === "wait") {
      session.yieldObservation(this.#rules.id(observation.waitId, "wait ID"), "wait");
    } else {
      throw new HostError("invalid_request", "missing code-mode observation ID");
    }
  }

  /**
   * Cancels a Wait and resolves once it has retired (SPEC §4.4).
   *
   * @param request the session and wait ID
   * @throws {HostError} `invalid_request`, `unknown_session`, `overloaded`
   */
  async cancelWait(request: { sessionId: string; waitId: string }): Promise<void> {
    const session = this.#rules.lookup(request.sessionId);
    const waitId = this.#rules.id(request.waitId, "wait ID");
    using _permit = this.#manager.permit("control");
    await session.cancelWait(waitId);
  }

  /**
   * Acknowledges a notification (SPEC §7.8): checked, otherwise a no-op.
   *
   * @param request the session and notification ID
   * @throws {HostError} `invalid_request`, `unknown_session`, `overloaded`
   */
  acknowledgeNotification(request: { sessionId: string; notificationId: string }): void {
    this.#rules.lookup(request.sessionId);
    validateIdentifier(request.notificationId, "notification ID", this.#rules.limits.maxIdentifierBytes, {
      uuid: true,
    });
    using _permit = this.#manager.permit("control");
  }

  /**
   * Registers a tool subscription (SPEC §7.6).
   *
   * @param request the session and tool-name filters (empty: every tool)
   * @returns the subscription, registered before this returns
   * @throws {HostError} `invalid_request`, `unknown_session`, `overloaded`
   */
  subscribeToToolCalls(
    request: { sessionId: string; toolNames?: readonly ToolName[] },
  ): ToolCallSubscription {
    const session = this.#rules.lookup(request.sessionId);
    using _permit = this.#manager.permit("control");
    const filters = request.toolNames ?? [];
    if (filters.length > this.#rules.limits.maxToolFilters) {
      throw new HostError(
        "invalid_request",
        `code-mode tool subscription exceeds ${this.#rules.limits.maxToolFilters} filters`,
      );
    }
    const names = filters.map((filter) => this.#rules.toolName(filter));
    const subscription = session.subscribe(names);
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      session.unsubscribe(subscription);
    };
    return {
      sessionId: session.id,
      calls: (signal) => subscription.stream(signal ?? NEVER),
      close,
      [Symbol.dispose]: close,
    };
  }

  /**
   * Delivers a tool call's result (SPEC §7.4); a finished or cancelled invocation accepts and
   * ignores it.
   *
   * Checks in Codex's host's order: the session, the invocation ID (any UUID form; the refusal
   * quotes its canonical form), the outcome's presence, the output JSON, then whether the
   * invocation was ever issued.
   *
   * @param request the session, invocation and outcome
   * @throws {HostError} `invalid_request` (IDs, output JSON, missing outcome), `unknown_session`,
   *   `overloaded`, `unknown_invocation`
   */
  completeToolCall(request: CompleteToolCallRequest): void {
    const session = this.#rules.lookup(request.sessionId);
    using _permit = this.#manager.permit("control");
    const invocationId = parseUuid(validateIdentifier(
      request.invocationId,
      "tool invocation ID",
      this.#rules.limits.maxIdentifierBytes,
      { uuid: true },
    ))!;
    const outcome = request.outcome;
    let completion: { outputJson: string } | { failed: string };
    if (outcome?.type === "succeeded") {
      try {
        completion = { outputJson: parseJsonBytes(outcome.outputJson) };
      } catch (error) {
        throw new HostError(
          "invalid_request",
          `invalid code-mode tool output JSON: ${(error as Error).message}`,
          { cause: error },
        );
      }
    } else if (outcome?.type === "failed") {
      completion = { failed: outcome.message };
    } else {
      throw new HostError("invalid_request", "tool completion is missing its outcome");
    }
    if (!session.issuedInvocation(invocationId)) {
      throw new HostError("unknown_invocation", `unknown code-mode tool invocation ${invocationId}`);
    }
    session.completeToolCall(invocationId, completion);
  }
}

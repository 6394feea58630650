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
import { serverMissingCellContent } from "./cell.ts";
import type { ContentItem, Outcome, OversizeOutcome } from "./cell.ts";
import { MAX_TIMER_MS } from "./clock.ts";
import { HostError } from "./errors.ts";
import { normalizeCodeModeIdentifier } from "../../proto/identifiers.ts";
import type { Limits } from "./limits.ts";
import type { Permit, Permits } from "./permits.ts";
import { OUTPUT_CLIENT, OUTPUT_SERVER, type Session, type SessionEvent } from "./session.ts";
import type { SessionManager } from "./session_manager.ts";
import type { ToolDefinitionInfo, ToolNameInfo } from "./tool_bridge.ts";
import { parseUuid, validateIdentifier } from "./validate.ts";
import { serdeJsonError } from "./serde_json.ts";
import { ToolCatalog } from "./tool_catalog.ts";
import { type HostSpan, NO_METRICS, NO_SPAN, type Telemetry, type TimedMethod } from "../ops/telemetry.ts";

export type { ContentItem, OversizeOutcome } from "./cell.ts";

/** A session's output truncation mode (SPEC §8.1). */
export type SessionOutputMode = "client" | "server";

/** A tool's name and optional namespace (`functions` when absent or empty). */
export type ToolName = ToolNameInfo;

/** `ToolKind` numbers (SPEC §2.3). */
export const TOOL_KIND_FUNCTION = 1;
/** A freeform tool. */
export const TOOL_KIND_FREEFORM = 2;

/** What an open asks for (SPEC §3.1). */
export interface OpenSessionRequest {
  /**
   * A session ID chosen by the caller (a door whose clients name their sessions); only with
   * {@link CodeModeCoreOptions.clientSessionIds}. Default: the host generates a UUIDv4.
   */
  sessionId?: string;
  /** Default `client`. */
  outputMode?: SessionOutputMode;
  /** The session's cap on every yield time. */
  maxYieldTimeMs?: bigint;
  /**
   * Heap limit of each cell's isolate (default `limits.defaultMaxHeapSizeBytes`). Every value is
   * accepted, as Codex's host accepts it; the limit applied is kept between
   * `limits.minHeapSizeBytes` (an isolate needs that much to start) and 2^53 − 1.
   */
  maxHeapSizeBytes?: bigint;
  /** W3C trace parent of the request: its span continues that trace. */
  traceparent?: string;
  /**
   * Pending delegate calls (tool calls and notifications being delivered) the session may hold
   * at once (gRPC's `max_pending_delegate_calls`; default `limits.maxPendingDelegateCallsPerSession`);
   * past it a tool call fails `code-mode session has too many pending delegate calls`. 0 is
   * refused `callback capacity must be positive`, the reference's text.
   */
  maxPendingDelegateCalls?: number;
  /**
   * The door writes outcomes as JSON (JSON host V1): the session's runtime also measures, for the
   * texts and media it sends in reduced form, what JSON escaping adds to them, so that an outcome
   * too large to send is reported with its exact JSON frame length (`oversize`). Default false.
   */
  jsonOutcomeSizes?: boolean;
  /**
   * The door writes outcomes and delegate requests on one ordered channel (JSON host V1), as
   * Codex's own host does: a cell's tool calls and notifications made after a yield reach the door
   * only once it has written the yield (it calls the outcome's `written`). Default false.
   */
  serialOutcomes?: boolean;
  /**
   * A Wait pending when the session closes is answered with its cell's `Terminated` outcome (the
   * closure terminates the cell), as Codex's own host does over JSON host V1; otherwise it fails
   * `code-mode wait was cancelled`, as Codex's host does over gRPC. Default false.
   */
  closureTerminatesWaits?: boolean;
  /**
   * The pool of delegate permits the session draws from besides its own (default the host-wide
   * `maxPendingDelegateCalls` pool): a door whose connection has its own delegate capacity (JSON
   * host V1's `delegate-capacity-4096`) passes one pool for all of that connection's sessions.
   * Past it a tool call fails `code-mode host has too many pending delegate calls`.
   */
  delegatePermits?: Permits;
}

/** An event of a session's lease (SPEC §3.2). */
export type LeaseEvent =
  | { type: "opened"; sessionId: string; outputMode: SessionOutputMode }
  | { type: "toolCallCancelled"; invocationId: string }
  | {
    type: "notification";
    notificationId: string;
    executionId: string;
    cellId: string;
    callId: string;
    text: string;
  }
  | {
    type: "cellClosed";
    executionId: string;
    cellId: string;
    finalToolCallSequence: number;
    /**
     * Set when the cell ended because its session was closing: Codex's host sends no `CellClosed`
     * for such a cell (the gRPC door drops it).
     */
    closing?: true;
  };

/** An open session's lease. */
export interface Lease {
  /** The session's ID. */
  readonly sessionId: string;
  /** The session's output mode. */
  readonly outputMode: SessionOutputMode;
  /**
   * Events the session has produced that {@link Lease.events} has not yielded yet (a door that
   * must write them before something else, as JSON host V1 does before an outcome, counts on it).
   */
  readonly backlog: number;
  /**
   * The lease's events: `opened` first, then the session's events, until the session ends. It
   * ends by throwing a {@link HostError} when the session crashed (`session_crashed`), the host
   * shut down (`shutting_down`) or the event queue overflowed (`lease_overflow`). Iterate it once.
   *
   * @param signal the lease holder went away: iteration stops and the session closes
   */
  events(signal?: AbortSignal): AsyncGenerator<LeaseEvent>;
}

/** One tool a cell may call (SPEC §2.3, §7.1). */
export interface ToolDefinition {
  /** The JS-facing name before normalisation. */
  name: string;
  toolName?: ToolName;
  description?: string;
  /** {@link TOOL_KIND_FUNCTION} or {@link TOOL_KIND_FREEFORM}; anything else is refused. */
  kind?: number;
  /** UTF-8 JSON, when given. */
  inputSchemaJson?: Uint8Array;
  /** UTF-8 JSON, when given. */
  outputSchemaJson?: Uint8Array;
}

/** What an Execute asks for (SPEC §4.1). */
export interface ExecuteRequest {
  sessionId: string;
  executionId: string;
  toolCallId: string;
  source: string;
  enabledTools?: readonly ToolDefinition[];
  /** Default `limits.defaultExecYieldTimeMs`. */
  yieldTimeMs?: bigint;
  /** Server mode: the output token budget (default `limits.defaultMaxOutputTokens`); any value. */
  maxOutputTokens?: bigint;
  /** W3C trace parent, passed to tool calls. */
  traceparent?: string;
  /**
   * The session's tool-catalog revision (`tool-catalog-revision-v1`, `tool_catalog.ts`): with
   * empty `enabledTools` the tools stored under it are used; absent, the catalog is not involved.
   */
  catalogRevision?: bigint;
}

/** How an observation ended (SPEC §4.2). */
export type ExecutionOutcome =
  & {
    cellId: string;
    contentItems: ContentItem[];
    /** Time the host spent on the request, in nanoseconds. */
    hostDurationNs: number;
    /**
     * Set on a cell's `completed` outcome (not on a missing cell's): how long, in nanoseconds, the
     * completion waited for an observer (0 when an observer was waiting when the cell completed).
     * The gRPC door sends it as the `codex-code-mode-result-buffered-for-ns` header of Wait and
     * Terminate, as Codex's host does.
     */
    resultBufferedForNs?: number;
    /**
     * Set when the outcome was consumed but is too large to send (Client mode; `contentItems` is then
     * empty and `errorText` absent): a door answers with its transport's size error instead
     * (gRPC `OUT_OF_RANGE`, {@link outcomeTooLargeMessage}; JSON V1's frame-limit error), as
     * Codex's own host does; the cell does not get it back.
     */
    oversize?: OversizeOutcome;
    /**
     * A `yielded` outcome of a session opened with `serialOutcomes`: the door calls it once it has
     * queued the outcome, which releases the cell's later tool calls and notifications.
     */
    written?: () => void;
  }
  & ({ kind: "yielded" } | { kind: "terminated" } | { kind: "completed"; errorText?: string });

/**
 * The gRPC status message of an outcome too large to send, as Codex's own host (tonic) words it;
 * its status is `OUT_OF_RANGE`.
 *
 * @param oversize the outcome's sizes
 * @returns `Error, encoded message length too large: found N bytes, the limit is: L bytes`
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { outcomeTooLargeMessage } from "./code_mode_core.ts";
 *
 * assert.equal(
 *   outcomeTooLargeMessage({ messageBytes: 70, limit: 64, content: { payloadBytes: 0, shapes: new Map() } }),
 *   "Error, encoded message length too large: found 70 bytes, the limit is: 64 bytes",
 * );
 * ```
 */
export function outcomeTooLargeMessage(oversize: OversizeOutcome): string {
  return `Error, encoded message length too large: found ${oversize.messageBytes} bytes, the limit is: ${oversize.limit} bytes`;
}

/** What an Execute streams: `started` once, then (unless the caller went away) `outcome`. */
export type ExecuteEvent =
  | { type: "started"; executionId: string; cellId: string }
  | {
    type: "outcome";
    outcome: ExecutionOutcome;
    /**
     * Set when the session began closing before the outcome was released (its cell was ended by
     * the closure): Codex's host ends such an Execute with no outcome (the gRPC door drops it).
     */
    closing?: true;
  };

/** What Wait and Terminate answer: the cell's outcome, or the missing-cell outcome (SPEC §4.11). */
export interface ObservationResult {
  state: "liveCell" | "missingCell";
  outcome: ExecutionOutcome;
}

/** What a Wait asks for (SPEC §4.3). */
export interface WaitRequest {
  sessionId: string;
  cellId: string;
  waitId: string;
  /** Default 0 (an immediate poll). */
  yieldTimeMs?: bigint;
  /**
   * Server mode: the output token budget of this observation (the `wait` tool's `max_tokens`);
   * default `limits.defaultMaxOutputTokens`, whatever the Execute asked for.
   */
  maxTokens?: bigint;
  /** W3C trace parent of the request, if the client sent one: its span continues that trace. */
  traceparent?: string;
}

/** What a YieldObservation names (SPEC §4.4). */
export interface YieldObservationRequest {
  sessionId: string;
  /** The observation to end early; absent is refused. */
  observation?: { kind: "execution"; executionId: string } | { kind: "wait"; waitId: string };
}

/** One tool call sent to a subscriber (SPEC §7.3). */
export interface ToolCall {
  sessionId: string;
  executionId: string;
  cellId: string;
  invocationId: string;
  runtimeToolCallId: string;
  toolName: ToolName;
  toolKind: number;
  /** UTF-8 JSON; absent when the cell passed no value. */
  inputJson?: Uint8Array;
  sequence: number;
  traceparent?: string;
  /**
   * How many lease events the session had queued when the cell made the call (its notifications
   * before the call among them): a door that writes both on one channel (JSON V1) writes the call
   * after those. Not on the gRPC wire.
   */
  leaseMark?: number;
}

/** A registered tool subscription (SPEC §7.6). Dispose it (or call `close`) when its stream ends. */
export interface ToolCallSubscription extends Disposable {
  /** The session's ID in its canonical form (the request may have named it in another UUID form). */
  readonly sessionId: string;
  /**
   * The calls routed to this subscription, until the session ends or `signal` aborts; it throws
   * `session_crashed` when the session crashed.
   *
   * @param signal the subscriber went away
   */
  calls(signal?: AbortSignal): AsyncGenerator<ToolCall>;
  /** Unregisters the subscription; with unanswered calls the session closes (rule 5). Idempotent. */
  close(): void;
}

/** What a CompleteToolCall carries (SPEC §7.4). */
export interface CompleteToolCallRequest {
  sessionId: string;
  invocationId: string;
  /** Absent is refused. */
  outcome?: { type: "succeeded"; outputJson: Uint8Array } | { type: "failed"; message: string };
}

/** Options of a {@link CodeModeCore}. */
export interface CodeModeCoreOptions {
  /** The registry, admission and runtimes behind the API. */
  manager: SessionManager;
  /**
   * Whether callers choose session IDs (1–`maxIdentifierBytes` bytes, any text) instead of the
   * host generating UUIDs (default false: every session ID a request names must be a UUID).
   */
  clientSessionIds?: boolean;
  /**
   * Whether sessions may set their cells' heap limit (default true). In-process isolation cannot
   * (SPEC §9.8): an open that asks is refused `unsupported` (SPEC §2.7).
   */
  resourceLimits?: boolean;
  /**
   * Identifiers as JSON host V1 takes them (default false): cell IDs, tool call IDs, tool names and
   * session IDs are not checked for length or emptiness (an empty or long cell ID is a missing
   * cell, as in Codex's own host; an empty session ID is refused by the V1 decoder itself), and a
   * heap size under `minHeapSizeBytes` or over this platform's range is clamped instead of refused.
   */
  lenientIds?: boolean;
}

/** The refusal of `max_heap_size_bytes` in in-process isolation (SPEC §2.7). */
export const NO_RESOURCE_LIMITS = "code-mode session provider does not support resource limits";

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * How long an Execute's yield time may wait for its cell to start. The yield time counts from the
 * moment the runtime hands the cell to its Worker, not from the Execute's arrival: a fresh runtime's
 * first cell waits for its first Worker (a few hundred milliseconds, more on a loaded machine), and
 * the reference host shows a busy cell's first `text()` at a 100 ms yield time. A runtime that never
 * starts the cell yields after this plus the yield time.
 */
const START_GRACE_MS = 10_000;

/**
 * A token budget from the wire (any `uint64`) as a number: `B = 4·T` stays exact in a double up to
 * 2^51 tokens, and larger budgets never truncate anyway (the reference accepts every value).
 */
function tokenBudget(tokens: bigint): number {
  return Number(tokens > 2n ** 50n ? 2n ** 50n : tokens);
}
/** The identifiers {@link CodeModeCoreOptions.lenientIds} does not check. */
const LENIENT_FIELDS = new Set<string>([
  "session ID",
  "cell ID",
  "tool call ID",
  "tool definition name",
  "tool name",
]);
const NEVER = new AbortController().signal;

function nanosSince(start: number): number {
  return Math.max(0, Math.round((performance.now() - start) * 1e6));
}

function toOutcome(cellId: string, outcome: Outcome, start: number): ExecutionOutcome {
  const base = {
    cellId,
    contentItems: outcome.items,
    hostDurationNs: nanosSince(start),
    ...(outcome.oversize ? { oversize: outcome.oversize } : {}),
    ...(outcome.written ? { written: outcome.written } : {}),
  };
  if (outcome.kind === "completed") {
    const buffered = { ...base, resultBufferedForNs: outcome.resultBufferedForNs ?? 0 };
    return outcome.errorText === undefined
      ? { ...buffered, kind: "completed" }
      : { ...buffered, kind: "completed", errorText: outcome.errorText };
  }
  return { ...base, kind: outcome.kind };
}

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

function isAbort(error: unknown, signal: AbortSignal): boolean {
  return signal.aborted && (error === signal.reason || (error as Error)?.name === "AbortError");
}

/** Bytes that must be one JSON value, as text; throws serde_json's error text (Codex's host's). */
function parseJsonBytes(bytes: Uint8Array): string {
  const error = serdeJsonError(bytes);
  if (error !== undefined) throw new SyntaxError(error);
  return new TextDecoder().decode(bytes);
}

/** The refusal of `max_pending_delegate_calls` = 0, in the reference's words. */
export const CALLBACK_CAPACITY_MESSAGE = "callback capacity must be positive";

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
  #limits: Limits;
  #clientSessionIds: boolean;
  #resourceLimits: boolean;
  #lenientIds: boolean;
  /** Each session's tool catalog (gone with its session). */
  #catalogs = new WeakMap<Session, ToolCatalog<ToolDefinition>>();
  #telemetry: Telemetry;
  /** Whether metrics or tracing is on (else requests run with no telemetry wrapper). */
  #telemetryOn: boolean;

  /** @param options see {@link CodeModeCoreOptions} */
  constructor(options: CodeModeCoreOptions) {
    this.#manager = options.manager;
    this.#limits = options.manager.limits;
    this.#clientSessionIds = options.clientSessionIds ?? false;
    this.#resourceLimits = options.resourceLimits ?? true;
    this.#lenientIds = options.lenientIds ?? false;
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
    return this.#limits;
  }

  #id(value: string | undefined, field: Parameters<typeof validateIdentifier>[1]): string {
    if (this.#lenientIds && LENIENT_FIELDS.has(field)) return value ?? "";
    return validateIdentifier(value, field, this.#limits.maxIdentifierBytes);
  }

  #lookup(sessionId: string): Session {
    return this.#manager.lookup(sessionId, { uuid: !this.#clientSessionIds, unchecked: this.#lenientIds });
  }

  /** Effective yield time: requested, capped by the session, clamped to a timer (SPEC §4.1). */
  #effectiveYield(requested: bigint, session: Session): number {
    let ms = requested;
    if (session.maxYieldTimeMs !== undefined && session.maxYieldTimeMs < ms) ms = session.maxYieldTimeMs;
    return Number(ms > BigInt(MAX_TIMER_MS) ? BigInt(MAX_TIMER_MS) : ms);
  }

  /**
   * SPEC §4.11; a Server-mode session also gets the `Script error:` item (§8.4), truncated to the
   * observation's budget.
   */
  #missingCell(cellId: string, session: Session, start: number, maxTokens: number): ObservationResult {
    const errorText = `exec cell ${cellId} not found`;
    const contentItems = session.outputMode === OUTPUT_SERVER
      ? serverMissingCellContent(errorText, maxTokens)
      : [];
    return {
      state: "missingCell",
      outcome: { cellId, contentItems, kind: "completed", errorText, hostDurationNs: nanosSince(start) },
    };
  }

  #toolName(name: ToolName): ToolName {
    this.#id(name.name, "tool name");
    if (name.namespace !== undefined) {
      validateIdentifier(name.namespace, "tool namespace", this.#limits.maxIdentifierBytes, {
        allowEmpty: true,
      });
      return { name: name.name, namespace: name.namespace };
    }
    return { name: name.name };
  }

  #validateTools(
    tools: readonly ToolDefinition[] | undefined,
  ): { globalName: string; description: string; definition: ToolDefinitionInfo }[] {
    const out: { globalName: string; description: string; definition: ToolDefinitionInfo }[] = [];
    for (const def of tools ?? []) {
      this.#id(def.name, "tool definition name");
      if (!def.toolName) throw new HostError("invalid_request", "tool definition is missing its tool name");
      const toolName = this.#toolName(def.toolName);
      if (def.kind !== TOOL_KIND_FUNCTION && def.kind !== TOOL_KIND_FREEFORM) {
        throw new HostError("invalid_request", "tool definition has an invalid kind");
      }
      for (
        const [bytes, label] of [[def.inputSchemaJson, "input"], [def.outputSchemaJson, "output"]] as const
      ) {
        if (bytes === undefined) continue;
        try {
          parseJsonBytes(bytes);
        } catch (error) {
          throw new HostError(
            "invalid_request",
            `invalid tool ${label} schema: ${(error as Error).message}`,
            {
              cause: error,
            },
          );
        }
      }
      out.push({
        globalName: normalizeCodeModeIdentifier(def.name),
        description: def.description ?? "",
        definition: { toolName, kind: def.kind },
      });
    }
    return out;
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
    const limits = this.#limits;
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
        sessionId = this.#id(request.sessionId, "session ID");
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
          if (signal?.aborted) void session.close("lease");
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
    const session = this.#lookup(sessionId);
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
    if (!this.#telemetryOn) return yield* this.#execute(request, options.signal ?? NEVER, start, NO_SPAN);
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
      for await (const event of this.#execute(request, options.signal ?? NEVER, start, span)) {
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

  async *#execute(
    request: ExecuteRequest,
    signal: AbortSignal,
    start: number,
    span: HostSpan,
  ): AsyncGenerator<ExecuteEvent> {
    const manager = this.#manager;
    const session = this.#lookup(request.sessionId);
    const executionId = this.#id(request.executionId, "execution ID");
    using _permit = manager.permit("request");
    const toolCallId = this.#id(request.toolCallId, "tool call ID");
    let tools = this.#validateTools(request.enabledTools);
    if (request.catalogRevision !== undefined) {
      let catalog = this.#catalogs.get(session);
      if (!catalog) this.#catalogs.set(session, catalog = new ToolCatalog());
      const given = request.enabledTools ?? [];
      const resolved = catalog.resolve(request.catalogRevision, given);
      if (resolved !== given) tools = this.#validateTools(resolved);
    }
    const maxTokens = request.maxOutputTokens;
    // Active-cell permits travel with the cell until its CellClosed; released here on refusal.
    const permits: Permit[] = [];
    let yieldSignal: AbortSignal;
    try {
      const hostPermit = manager.activeCells.tryAcquire();
      if (!hostPermit) throw manager.overloaded("maxActiveCells", "code-mode host has too many active cells");
      permits.push(hostPermit);
      const sessionPermit = session.activeCells.tryAcquire();
      if (!sessionPermit) {
        throw manager.overloaded("maxActiveCellsPerSession", "code-mode session has too many active cells");
      }
      permits.push(sessionPermit);
      yieldSignal = session.reserveExecution(executionId);
    } catch (error) {
      for (const p of permits) p.release();
      throw error;
    }
    try {
      const yieldMs = this.#effectiveYield(
        request.yieldTimeMs ?? BigInt(this.#limits.defaultExecYieldTimeMs),
        session,
      );
      const cell = await session.startCell({
        executionId,
        toolCallId,
        source: request.source,
        tools: tools.map(({ globalName, description }) => ({ globalName, description })),
        definitions: new Map(tools.map((t) => [t.globalName, t.definition])),
        traceparent: request.traceparent,
        span,
        permits,
        initial: { yieldMs, yieldSignal, signal, startedAt: start, startGraceMs: START_GRACE_MS },
        maxOutputTokens: maxTokens === undefined ? undefined : tokenBudget(maxTokens),
      });
      yield { type: "started", executionId, cellId: cell.id };
      let outcome: Outcome;
      try {
        outcome = await session.track(() => cell.initial);
        const flushed = session.notificationsFlushed(cell);
        if (flushed) await flushed;
      } catch (error) {
        if (signal.aborted) session.abandon(cell);
        throw error;
      }
      if (signal.aborted) {
        session.abandon(cell);
        return;
      }
      const event: ExecuteEvent = { type: "outcome", outcome: toOutcome(cell.id, outcome, start) };
      if (session.closing) event.closing = true;
      yield event;
    } finally {
      session.releaseExecution(executionId);
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
    return this.#observed("Wait", span, () => this.#wait(request, options));
  }

  async #wait(request: WaitRequest, options: { signal?: AbortSignal }): Promise<ObservationResult> {
    const start = performance.now();
    const callerSignal = options.signal ?? NEVER;
    const session = this.#lookup(request.sessionId);
    const cellId = this.#id(request.cellId, "cell ID");
    const waitId = this.#id(request.waitId, "wait ID");
    using _permit = this.#manager.permit("request");
    session.ensureOpen();
    const wait = session.registerWait(waitId);
    try {
      const cell = session.cell(cellId);
      const maxTokens = request.maxTokens === undefined
        ? this.#limits.defaultMaxOutputTokens
        : tokenBudget(request.maxTokens);
      if (!cell) return this.#missingCell(cellId, session, start, maxTokens);
      if (wait.cancel.aborted) throw wait.cancel.reason;
      const signal = AbortSignal.any([callerSignal, wait.cancel]);
      const yieldMs = this.#effectiveYield(request.yieldTimeMs ?? 0n, session);
      let outcome: Outcome;
      try {
        outcome = await session.track(() =>
          cell.observe(yieldMs, { signal, yieldSignal: wait.yieldNow, startedAt: start, maxTokens })
        );
        const flushed = session.notificationsFlushed(cell);
        if (flushed) await flushed;
      } catch (error) {
        if (wait.cancel.aborted) throw wait.cancel.reason;
        if (isAbort(error, callerSignal)) {
          throw new HostError("cancelled", "code-mode wait was cancelled", { cause: error });
        }
        throw error;
      }
      return { state: "liveCell", outcome: toOutcome(cellId, outcome, start) };
    } finally {
      wait.finish();
    }
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
    return this.#observed("Terminate", span, () => this.#terminate(request));
  }

  async #terminate(
    request: { sessionId: string; cellId: string; maxTokens?: bigint },
  ): Promise<ObservationResult> {
    const start = performance.now();
    const session = this.#lookup(request.sessionId);
    const cellId = this.#id(request.cellId, "cell ID");
    using _permit = this.#manager.permit("request");
    session.ensureOpen();
    const cell = session.cell(cellId);
    // Not the Execute's budget: the request's, else the host's default, as in the reference host.
    const maxTokens = request.maxTokens === undefined
      ? this.#limits.defaultMaxOutputTokens
      : tokenBudget(request.maxTokens);
    if (!cell) return this.#missingCell(cellId, session, start, maxTokens);
    const outcome = await session.track(() => cell.terminate(start, maxTokens));
    const flushed = session.notificationsFlushed(cell);
    if (flushed) await flushed;
    return { state: "liveCell", outcome: toOutcome(cellId, outcome, start) };
  }

  /**
   * Ends an execution's initial observation or a Wait early (SPEC §4.4); an ID not seen yet is
   * remembered.
   *
   * @param request the session and the observation
   * @throws {HostError} `invalid_request`, `unknown_session`, `overloaded`
   */
  yieldObservation(request: YieldObservationRequest): void {
    const session = this.#lookup(request.sessionId);
    using _permit = this.#manager.permit("control");
    const observation = request.observation;
    if (observation?.kind === "execution") {
      session.yieldObservation(this.#id(observation.executionId, "execution ID"), "execution");
    } else if (observation?.kind === "wait") {
      session.yieldObservation(this.#id(observation.waitId, "wait ID"), "wait");
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
    const session = this.#lookup(request.sessionId);
    const waitId = this.#id(request.waitId, "wait ID");
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
    this.#lookup(request.sessionId);
    validateIdentifier(request.notificationId, "notification ID", this.#limits.maxIdentifierBytes, {
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
    const session = this.#lookup(request.sessionId);
    using _permit = this.#manager.permit("control");
    const filters = request.toolNames ?? [];
    if (filters.length > this.#limits.maxToolFilters) {
      throw new HostError(
        "invalid_request",
        `code-mode tool subscription exceeds ${this.#limits.maxToolFilters} filters`,
      );
    }
    const names = filters.map((filter) => this.#toolName(filter));
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
    const session = this.#lookup(request.sessionId);
    using _permit = this.#manager.permit("control");
    const invocationId = parseUuid(validateIdentifier(
      request.invocationId,
      "tool invocation ID",
      this.#limits.maxIdentifierBytes,
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

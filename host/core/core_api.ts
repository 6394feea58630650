/**
 * The types of the host's transport-neutral API (`code_mode_core.ts`): what each operation takes
 * and gives, with the constants and texts every door shares. A door imports them through
 * `code_mode_core.ts`.
 *
 * @module
 */
import type { ContentItem, OversizeOutcome } from "./cell.ts";
import type { Permits } from "./permits.ts";
import type { SessionManager } from "./session_manager.ts";
import type { ToolNameInfo } from "./tool_bridge.ts";

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
   * The client the session belongs to, for `runtimeHandover=1`: sessions of different clients never
   * hand a runtime to each other (the gRPC door gives the connection's peer address). Default: one
   * client for every session of the host.
   */
  client?: string;
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

/** The refusal of `max_pending_delegate_calls` = 0, in the reference's words. */
export const CALLBACK_CAPACITY_MESSAGE = "callback capacity must be positive";

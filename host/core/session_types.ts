/**
 * A session's vocabulary: what its lease carries (SPEC §3.2) as plain objects for the encoder,
 * the output truncation modes' public enum numbers, a session's construction options, what starts a
 * cell, and what closes a session.
 *
 * @module
 */
import type { CellOptions } from "./cell.ts";
import type { Clock } from "./clock.ts";
import type { Limits } from "./limits.ts";
import type { SessionBudget } from "./memory_budget.ts";
import type { Logger } from "../ops/log.ts";
import type { Permit, Permits } from "./permits.ts";
import type { RuntimeTransport } from "../runtime/runtime_transport.ts";
import type { ToolDefinitionInfo } from "./tool_bridge.ts";
import type { HostSpan, Telemetry } from "../ops/telemetry.ts";

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

/** What closed a session: `shutdown` ends the lease `shutting_down`, `overflow` `lease_overflow`. */
export type CloseTrigger = "close" | "lease" | "shutdown" | "overflow" | "idle" | "subscription";

/** Construction options of a `Session`. */
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
  /** Called once when the session leaves the registry, with the session. */
  onRemoved(session: { readonly id: string }): void;
  /** An observation (Execute, Wait, Terminate) of the session ended; its outcome goes out next. */
  onObserved?(): void;
  /** Obtains a replacement runtime for a runtime restart (SPEC §4.5). */
  replaceRuntime(): Promise<RuntimeTransport>;
  /**
   * At the session's close, offers its idle runtime back to the session it was handed over from
   * (`runtimeHandover`): `detach` clears the closing session's stored values in it and lets go of
   * it; `true` when taken (it is not stopped then).
   */
  giveBackRuntime?(runtime: RuntimeTransport, detach: () => RuntimeTransport): boolean;
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
  /** The session's account in the host's memory budget (default: uncounted); closed with the session. */
  budget?: SessionBudget;
}

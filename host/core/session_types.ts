/**
 * A session's vocabulary: what its lease carries (SPEC §3.2) as plain objects for the encoder,
 * the output truncation modes' public enum numbers, what starts a cell, and what closes a session.
 *
 * @module
 */
import type { CellOptions } from "./cell.ts";
import type { Permit } from "./permits.ts";
import type { ToolDefinitionInfo } from "./tool_bridge.ts";
import type { HostSpan } from "../ops/telemetry.ts";

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

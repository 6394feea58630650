/**
 * What a JSON "host V1" host sends, built from the core's results as Codex's own host (0.171)
 * writes them: each builder's key order is the reference's; request and delegate IDs are exact
 * signed 64-bit integers, echoed as written. What the client sends is `client_messages.ts`.
 * Nothing here does I/O.
 *
 * @module
 */
import type {
  ContentItem,
  ExecutionOutcome,
  ObservationResult,
  ToolCall,
} from "../../core/code_mode_core.ts";
import { TOOL_KIND_FREEFORM } from "../../core/code_mode_core.ts";
import { parseJson, rawJson } from "./serde.ts";

type Json = Record<string, unknown>;

/** A content item on the wire. */
export type WireContentItem =
  | { type: "input_text"; text: string }
  | { type: "input_image"; image_url: string; detail?: string }
  | { type: "input_audio"; audio_url: string };

const DETAILS: Record<number, string> = { 1: "auto", 2: "low", 3: "high", 4: "original" };

/**
 * Converts content items.
 *
 * @param items the core's items
 * @returns the wire items
 */
export function wireContentItems(items: readonly ContentItem[]): WireContentItem[] {
  const out: WireContentItem[] = [];
  for (const item of items) {
    if ("text" in item) out.push({ type: "input_text", text: item.text.text });
    else if ("image" in item) {
      const detail = DETAILS[item.image.detail];
      out.push(
        detail === undefined
          ? { type: "input_image", image_url: item.image.imageUrl }
          : { type: "input_image", image_url: item.image.imageUrl, detail },
      );
    } else if ("audio" in item) out.push({ type: "input_audio", audio_url: item.audio.audioUrl });
  }
  return out;
}

/**
 * A runtime response (externally tagged), fields in the reference's order:
 * `{"Yielded":{cell_id, content_items, code_mode_host_duration_ns}}`, the same for `Terminated`,
 * and `{"Result":{cell_id, content_items, error_text, result_buffered_for_ns,
 * code_mode_host_duration_ns}}` (`error_text` null on success).
 *
 * @param outcome the core's outcome (`resultBufferedForNs`: how long a completion waited for its
 *   observer; 0 when the core does not report it)
 * @returns the wire value
 */
export function runtimeResponse(outcome: ExecutionOutcome): Json {
  const cell_id = outcome.cellId;
  const content_items = wireContentItems(outcome.contentItems);
  const code_mode_host_duration_ns = nanos(outcome.hostDurationNs);
  switch (outcome.kind) {
    case "yielded":
      return { Yielded: { cell_id, content_items, code_mode_host_duration_ns } };
    case "terminated":
      return { Terminated: { cell_id, content_items, code_mode_host_duration_ns } };
    case "completed": {
      const buffered = (outcome as ExecutionOutcome & { resultBufferedForNs?: number | bigint })
        .resultBufferedForNs ?? 0;
      return {
        Result: {
          cell_id,
          content_items,
          error_text: outcome.errorText ?? null,
          result_buffered_for_ns: nanos(buffered),
          code_mode_host_duration_ns,
        },
      };
    }
  }
}

/** The detail number of each image shape key (`image:<detail>`). */
const DETAIL_NUMBERS: Record<string, number> = { auto: 1, low: 2, high: 3, original: 4 };

/**
 * An outcome too large to send (`oversize`), as a stand-in and the bytes its frame lacks: the
 * stand-in has no content items and, for a completion with an error, an empty `error_text`; the
 * frame that would carry the real outcome is `extraBytes` longer (its items, each in this door's
 * form, and the error text).
 *
 * @param outcome an outcome with `oversize` set
 * @returns the stand-in outcome and the missing bytes
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { oversizeStandIn, runtimeResponse } from "./host_messages.ts";
 *
 * const items = [{ type: "input_text", text: "a\"b" }, { type: "input_text", text: "" }];
 * const { outcome, extraBytes } = oversizeStandIn({
 *   cellId: "1",
 *   kind: "yielded",
 *   contentItems: [],
 *   hostDurationNs: 5,
 *   oversize: { messageBytes: 99, limit: 64, content: { payloadBytes: 8, shapes: new Map([["text", 2]]) } },
 * });
 * const real = JSON.stringify(runtimeResponse(outcome)).replace('"content_items":[]', `"content_items":${JSON.stringify(items)}`);
 * assert.equal(JSON.stringify(runtimeResponse(outcome)).length + extraBytes, real.length);
 * ```
 */
export function oversizeStandIn(
  outcome: ExecutionOutcome,
): { outcome: ExecutionOutcome; extraBytes: number } {
  const oversize = outcome.oversize!;
  let extraBytes = oversize.content.payloadBytes;
  let items = 0;
  for (const [shape, count] of oversize.content.shapes) {
    const empty: ContentItem = shape === "text"
      ? { text: { text: "" } }
      : shape === "audio"
      ? { audio: { audioUrl: "" } }
      : { image: { imageUrl: "", detail: DETAIL_NUMBERS[shape.slice("image:".length)] ?? 3 } };
    // The item's wrapping: its JSON form with an empty payload, less the empty string's quotes.
    extraBytes += count * (JSON.stringify(wireContentItems([empty])[0]).length - 2);
    items += count;
  }
  if (items > 1) extraBytes += items - 1; // the commas between items
  const { oversize: _, ...rest } = outcome;
  if (outcome.kind !== "completed" || oversize.errorTextJsonBytes === undefined) {
    return { outcome: { ...rest, contentItems: [] }, extraBytes };
  }
  extraBytes += oversize.errorTextJsonBytes - 2;
  return { outcome: { ...rest, contentItems: [], kind: "completed", errorText: "" }, extraBytes };
}

/** A nanosecond count as a JSON integer (exact past 2^53). */
function nanos(value: number | bigint): unknown {
  if (typeof value === "bigint") return rawJson(String(value));
  return Number.isSafeInteger(value) ? value : rawJson(BigInt(Math.round(value)).toString());
}

/**
 * A wait outcome (`LiveCell` or `MissingCell` around a runtime response).
 *
 * @param result what Wait or Terminate gave
 * @returns the wire outcome
 */
export function waitOutcome(result: ObservationResult): Json {
  return result.state === "liveCell"
    ? { LiveCell: runtimeResponse(result.outcome) }
    : { MissingCell: runtimeResponse(result.outcome) };
}

/**
 * A `tool/invoke` delegate request's `request`.
 *
 * @param call the core's tool call
 * @returns the wire request
 */
export function toolInvoke(call: ToolCall): Json {
  // Parsed keeping every number's exact text, so the input reaches the client as the cell wrote it.
  const input = call.inputJson === undefined ? null : parseJson(call.inputJson);
  return {
    type: "tool/invoke",
    invocation: {
      cell_id: call.cellId,
      runtime_tool_call_id: call.runtimeToolCallId,
      tool_name: { name: call.toolName.name, namespace: call.toolName.namespace ?? null },
      tool_kind: call.toolKind === TOOL_KIND_FREEFORM ? "freeform" : "function",
      input,
    },
  };
}

/** A request or delegate ID as a JSON integer, exact. */
export function wireId(id: bigint): unknown {
  return Number.isSafeInteger(Number(id)) ? Number(id) : rawJson(String(id));
}

/** An ok result. */
export function ok(value: Json): Json {
  return { status: "ok", value };
}

/** An error result. */
export function error(message: string): Json {
  return { status: "error", message };
}

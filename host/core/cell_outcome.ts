/**
 * A cell's outcomes as the session hands them to a door: the public content items, converted from
 * the runtime's items and the output collector's rendering; the Server-mode content (token
 * truncation, SPEC §8.4); and the size of the gRPC response that would carry a Client-mode outcome,
 * which decides whether it is too large to send (`oversize`).
 *
 * @module
 */
import type { WireCellEvent, WireItem } from "../../proto/worker_codec.ts";
import {
  type ContentJsonSize,
  createOutputCollector,
  diagnosticErrorText,
  type ErrorText,
  errorTextBytes,
  errorTextString,
  type OutputCollector,
  type OutputItem,
  type OutputMode,
  type PushedItem,
} from "../output/output_collector.ts";
import { fieldBytes, utf8ByteLength, varintBytes } from "../../proto/bytes.ts";
import { truncateEntries } from "../output/token_truncation.ts";
import { scriptErrorItem } from "./cell_actor.ts";
import type { RuntimeEvent } from "./cell_channel.ts";
import type { CellEvent } from "./cell_state.ts";

/** A public `ContentItem` as a plain object for the encoder. */
export type ContentItem =
  | { text: { text: string } }
  | { image: { imageUrl: string; detail: number } }
  | { audio: { audioUrl: string } };

/**
 * A Client-mode outcome too large for one message (Codex's own host answers gRPC `OUT_OF_RANGE`
 * `Error, encoded message length too large: found N bytes, the limit is: L bytes`, and JSON V1
 * `… exceeds the IPC frame limit: code-mode IPC frame length N exceeds L bytes`): it was consumed
 * like a delivered one, and only its sizes remain.
 */
export interface OversizeOutcome {
  /** The encoded size of the gRPC response (`ExecuteEvent` or `WaitResponse`) that would carry it. */
  messageBytes: number;
  /** `maxMessageBytes`. */
  limit: number;
  /** Its content items as a JSON door sizes them. */
  content: ContentJsonSize;
  /** A completion's error text as a JSON string literal (quotes included), bytes; absent: none. */
  errorTextJsonBytes?: number;
}

/** What an observation returns, ready for the wire. */
export interface Outcome {
  kind: "yielded" | "completed" | "terminated";
  /** Empty when {@link oversize} is set. */
  items: ContentItem[];
  errorText?: string;
  /** `completed`: nanoseconds the completion waited for an observer (A6; 0 when one was waiting). */
  resultBufferedForNs?: number;
  /** Set when the outcome is too large to send (Client mode): `items` and `errorText` are then left out. */
  oversize?: OversizeOutcome;
  /**
   * A `yielded` outcome of a session whose door writes outcomes and delegate requests in order
   * (`CellPort.serialOutcomes`): the door calls it once the outcome is queued, which releases the
   * cell's later tool calls and notifications.
   */
  written?: () => void;
}

const DETAILS: Record<string, number> = { auto: 1, low: 2, high: 3, original: 4 };

/** A reduced text as a frame carries it (fields a decoder left out are empty). */
export function fromWireTrimmed(
  t: { head?: string; tail?: string; totalBytes?: number; jsonExtraBytes?: number },
): { head: string; tail: string; totalBytes: number; jsonExtraBytes: number } {
  return {
    head: t.head ?? "",
    tail: t.tail ?? "",
    totalBytes: Number(t.totalBytes ?? 0),
    jsonExtraBytes: Number(t.jsonExtraBytes ?? 0),
  };
}

/**
 * Converts a runtime content item to an item for the collector.
 *
 * @param item the item from the frame
 * @returns the item, or `undefined` for an item that carries no content
 */
export function toPushedItem(item: WireItem): PushedItem | undefined {
  if ("text" in item) return { type: "text", text: item.text };
  if ("image" in item) {
    const detail = (item.image.detail in DETAILS ? item.image.detail : "high") as
      | "auto"
      | "low"
      | "high"
      | "original";
    return { type: "image", imageUrl: item.image.imageUrl, detail };
  }
  if ("audioUrl" in item) return { type: "audio", audioUrl: item.audioUrl };
  if ("trimmedText" in item) return { type: "trimmedText", ...fromWireTrimmed(item.trimmedText) };
  if ("droppedMedia" in item) {
    const m = item.droppedMedia;
    const jsonExtraBytes = Number(m.jsonExtraBytes ?? 0);
    if (m.kind === "audio") {
      return { type: "droppedMedia", kind: "audio", bytes: Number(m.bytes), jsonExtraBytes };
    }
    const detail = (m.detail !== undefined && m.detail in DETAILS ? m.detail : "high") as
      | "auto"
      | "low"
      | "high"
      | "original";
    return { type: "droppedMedia", kind: "image", bytes: Number(m.bytes), detail, jsonExtraBytes };
  }
  return undefined;
}

/**
 * Converts rendered output items to public content items.
 *
 * @param items rendered items
 * @returns wire content items
 */
function toContentItems(items: OutputItem[]): ContentItem[] {
  return items.map((item) =>
    item.type === "text"
      ? { text: { text: item.text } }
      : item.type === "image"
      ? { image: { imageUrl: item.imageUrl, detail: DETAILS[item.detail] ?? 3 } }
      : { audio: { audioUrl: item.audioUrl } }
  );
}

/**
 * The content of a Server-mode outcome: the bounded window, token-truncated (SPEC §8.4 step 3).
 *
 * @param content the window
 * @param maxTokens the cell's budget `T`
 * @returns wire content items
 */
function serverContent(content: OutputCollector, maxTokens: number): ContentItem[] {
  return toContentItems(truncateEntries(content.entries(), maxTokens));
}

/**
 * The content of a Server-mode `missing_cell` (SPEC §4.11): the `Script error:` item alone,
 * through the collector and truncation with the default budget.
 *
 * @param errorText the missing cell's error text
 * @param maxTokens the budget `T`: the host's `defaultMaxOutputTokens`
 * @returns wire content items
 */
export function serverMissingCellContent(errorText: string, maxTokens: number): ContentItem[] {
  const content = createOutputCollector("server");
  content.push(scriptErrorItem(errorText));
  return serverContent(content, maxTokens);
}

export function toOutcome(event: CellEvent, mode: OutputMode, maxTokens: number): Outcome {
  const items = mode === "server"
    ? serverContent(event.content, maxTokens)
    : toContentItems(event.content.render());
  if (event.type === "completed") {
    const resultBufferedForNs = Math.max(0, Math.round(event.resultBufferedForMs * 1e6));
    if (event.errorText === undefined) return { kind: "completed", items, resultBufferedForNs };
    const errorText = mode === "server"
      ? diagnosticErrorText(event.errorText)
      : errorTextString(event.errorText);
    return { kind: "completed", items, errorText, resultBufferedForNs };
  }
  if (event.type === "pending") return { kind: "yielded", items };
  return { kind: event.type, items };
}

/**
 * The encoded size of the response that carries an outcome: an `ExecuteEvent.outcome` or a
 * `WaitResponse.live_cell` (both one-byte tags around an `ExecutionOutcome`).
 *
 * @param cellId the outcome's `cell_id`
 * @param contentBytes the encoded `content_items` ({@link OutputCollector.encodedBytes})
 * @param event the outcome kind and error text
 * @param durationNs `code_mode_host_duration_ns`
 * @returns the response's size in bytes
 */
export function outcomeResponseBytes(
  cellId: string,
  contentBytes: number,
  event: { type: CellEvent["type"]; errorText?: ErrorText },
  durationNs: number,
): number {
  let oneof = fieldBytes(0);
  if (event.type === "completed" && event.errorText !== undefined) {
    oneof = fieldBytes(fieldBytes(errorTextBytes(event.errorText)));
  }
  const outcome = fieldBytes(utf8ByteLength(cellId)) + contentBytes + oneof + 1 + varintBytes(durationNs);
  return fieldBytes(outcome);
}

/** The UTF-8 bytes of content items' text and URLs. */
export function itemBytes(items: readonly ContentItem[]): number {
  let total = 0;
  for (const item of items) {
    total += utf8ByteLength(
      "text" in item ? item.text.text : "image" in item ? item.image.imageUrl : item.audio.audioUrl,
    );
  }
  return total;
}

/**
 * The runtime event of a frame that carries no state of the cell's own (every kind but
 * `storedWrite`, `storedWrites`, `result` and `exited`, which the cell handles itself).
 *
 * @param event the decoded `CellEvent` frame
 * @param callId the Execute's tool call ID (a notification's `callId`)
 * @returns the event, or `undefined` for one that carries nothing (an empty content item)
 */
export function runtimeEventOf(event: WireCellEvent, callId: string): RuntimeEvent | undefined {
  switch (event.event) {
    case "started":
      return { type: "started" };
    case "contentItem": {
      const item = toPushedItem(event.contentItem!);
      return item ? { type: "contentItem", item } : undefined;
    }
    case "yieldRequested":
      return { type: "yieldRequested" };
    case "toolCall": {
      const call = event.toolCall!;
      return {
        type: "toolCall",
        id: call.runtimeToolCallId,
        name: { name: call.globalName },
        kind: "function",
        ...(call.inputJson === undefined ? {} : { input: JSON.parse(call.inputJson) }),
      };
    }
    case "toolResultConsumed":
      return { type: "toolResultConsumed", id: event.toolResultConsumed! };
    case "notify":
      return { type: "notify", callId, text: event.notify ?? "" };
    case "pending":
      return { type: "pending" };
    default:
      return undefined;
  }
}

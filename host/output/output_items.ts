/**
 * The vocabulary of the output collectors (SPEC §8.3–§8.6): the items a cell pushes and a client
 * receives, error texts and their sizes, rendered entries and notices, the limits, the encoded and
 * JSON sizes of items, and the {@link OutputCollector} interface both modes implement.
 *
 * @module
 */
import {
  fieldBytes,
  jsonEscapeExtraBytes,
  utf8ByteLength,
  utf8Prefix,
  utf8Suffix,
} from "../../proto/bytes.ts";

/** One content item as delivered to a client. */
export type OutputItem =
  | { type: "text"; text: string }
  | { type: "image"; imageUrl: string; detail: "auto" | "low" | "high" | "original" }
  | { type: "audio"; audioUrl: string };

/** A text sent in reduced form (SPEC §8.10): its first and last bytes plus its true UTF-8 length. */
export interface TrimmedTextItem {
  type: "trimmedText";
  /** The longest prefix of whole characters of at most `MAX_TEXT` bytes. */
  head: string;
  /** The longest suffix of whole characters of at most `MAX_TEXT` bytes. */
  tail: string;
  /** The UTF-8 length of the whole text. */
  totalBytes: number;
  /** The bytes `JSON.stringify` adds to the whole text (`jsonEscapeExtraBytes`); absent: 0. */
  jsonExtraBytes?: number;
}

/** A media item sent as its kind and size only (SPEC §8.10); no window can keep it. */
export interface DroppedMediaItem {
  type: "droppedMedia";
  kind: "image" | "audio";
  /** The UTF-8 length of its URL. */
  bytes: number;
  /** An image's detail (absent: `high`). */
  detail?: "auto" | "low" | "high" | "original";
  /** The bytes `JSON.stringify` adds to its URL; absent: 0. */
  jsonExtraBytes?: number;
}

/** `maxDiagnosticBytes` of SPEC §2.8: the Server-mode cap on `error_text`. */
export const MAX_DIAGNOSTIC_BYTES = 65_536;

/** An error text as the runtime sends it: whole, or reduced like a {@link TrimmedTextItem}. */
export type ErrorText = string | Omit<TrimmedTextItem, "type">;

/**
 * The whole error text, or (reduced form) its head and tail joined.
 *
 * @param error the error text
 * @returns a string; for a reduced text, `head + tail`
 */
export function errorTextString(error: ErrorText): string {
  return typeof error === "string" ? error : error.head + error.tail;
}

/**
 * The UTF-8 length of an error text (the true length of a reduced one).
 *
 * @param error the error text
 * @returns its byte length
 */
export function errorTextBytes(error: ErrorText): number {
  return typeof error === "string" ? utf8ByteLength(error) : error.totalBytes;
}

/** The marker the reference host puts between the two ends of a capped error text. */
const DIAGNOSTIC_MARKER = "\u2026";

/**
 * The UTF-8 length of an error text as `JSON.stringify` writes it, quotes included (of the whole
 * text also for a reduced one).
 *
 * @param error the error text
 * @returns its JSON string literal's byte length
 */
export function errorTextJsonBytes(error: ErrorText): number {
  return typeof error === "string"
    ? utf8ByteLength(error) + jsonEscapeExtraBytes(error) + 2
    : error.totalBytes + (error.jsonExtraBytes ?? 0) + 2;
}

/**
 * The diagnostic form of an error text, as Codex 0.171's own host caps a Server-mode `error_text`:
 * unchanged up to `maxBytes` UTF-8 bytes; else its longest whole-character prefix of at most
 * `⌊(maxBytes − 3) / 2⌋` bytes, then `…` (3 bytes), then its longest whole-character suffix of at
 * most the rest of `maxBytes − 3`: 32,766 + 3 + 32,767 bytes for the default 65,536.
 *
 * @param error the error text, whole or reduced (a reduced text keeps far more than half at each end)
 * @param maxBytes the cap; default 65,536
 * @returns the diagnostic text
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { diagnosticErrorText } from "./output_collector.ts";
 *
 * assert.equal(diagnosticErrorText("abcdefghij", 9), "abc…hij");
 * assert.equal(diagnosticErrorText("abcd", 4), "abcd");
 * ```
 */
export function diagnosticErrorText(error: ErrorText, maxBytes: number = MAX_DIAGNOSTIC_BYTES): string {
  if (errorTextBytes(error) <= maxBytes) return errorTextString(error);
  const budget = Math.max(0, maxBytes - utf8ByteLength(DIAGNOSTIC_MARKER));
  const headBudget = Math.floor(budget / 2);
  const head = typeof error === "string" ? error : error.head;
  const tail = typeof error === "string" ? error : error.tail;
  return head.slice(0, utf8Prefix(head, headBudget).units) + DIAGNOSTIC_MARKER +
    tail.slice(tail.length - utf8Suffix(tail, budget - headBudget).units);
}

/** What a cell's output path carries into a collector. */
export type PushedItem = OutputItem | TrimmedTextItem | DroppedMediaItem;

/** What one omission notice reports. */
export interface NoticeCounts {
  /** Text bytes omitted. */
  bytes: number;
  /** Text fragments omitted whole. */
  segments: number;
  /** Images discarded. */
  images: number;
  /** Audio items discarded (the Server collector never discards audio: always 0 there). */
  audio: number;
}

/**
 * A rendered window before token truncation: text fragments with their owners (the item each came
 * from), media items (`anchor`), omission notices, and audio items kept as their size only.
 */
export type RenderedEntry =
  | { kind: "text"; text: string; owner: number }
  | { kind: "anchor"; item: OutputItem }
  | { kind: "notice"; counts: NoticeCounts }
  | { kind: "droppedAudio"; bytes: number };

/**
 * The text of an omission notice (SPEC §8.6 rule 5).
 *
 * @param counts what the notice reports
 * @returns the notice text
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { noticeText } from "./output_collector.ts";
 *
 * assert.equal(
 *   noticeText({ bytes: 5, segments: 1, images: 0, audio: 0 }),
 *   "[Code Mode session output limit reached: omitted 5 text bytes; discarded 1 text segments, 0 images, 0 audio items]",
 * );
 * ```
 */
export function noticeText(counts: NoticeCounts): string {
  return `[Code Mode session output limit reached: omitted ${counts.bytes} text bytes; discarded ${counts.segments} text segments, ${counts.images} images, ${counts.audio} audio items]`;
}

/** The output modes of SPEC §8.2. */
export type OutputMode = "client" | "server";

/** Collector limits; defaults are the reference host's. */
export interface OutputLimits {
  /** Retained text bytes per window (head + tail). Default 1,048,576. */
  maxTextBytes?: number;
  /** Retained image URL bytes per window. Default 8,388,608. */
  maxImageBytes?: number;
  /** Server mode: retained audio URL bytes per window (later audio is kept as its size only). Default 67,108,864. */
  maxAudioBytes?: number;
  /** Server mode: retained items per window, a notice included; half of them in the head. Default 32,768. */
  maxItems?: number;
  /** Client mode: encoded content bytes a window retains (`maxMessageBytes`). Default 67,108,864. */
  maxMessageBytes?: number;
}

/**
 * The encoded size of one item as an entry of `ExecutionOutcome.content_items`: the repeated
 * field's tag and length, the `ContentItem` and its text, image or audio message. Reduced items
 * count their true size.
 *
 * @param item the item
 * @returns the bytes it adds to an encoded outcome
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { contentItemEncodedBytes } from "./output_collector.ts";
 *
 * // tag + len, ContentItem.text tag + len, TextContent.text tag + len + "hi"
 * assert.equal(contentItemEncodedBytes({ type: "text", text: "hi" }), 8);
 * ```
 */
export function contentItemEncodedBytes(item: PushedItem): number {
  let inner: number;
  switch (item.type) {
    case "text":
      inner = fieldBytes(utf8ByteLength(item.text));
      break;
    case "trimmedText":
      inner = fieldBytes(item.totalBytes);
      break;
    case "image":
      inner = fieldBytes(utf8ByteLength(item.imageUrl)) + 2; // url, then the detail enum
      break;
    case "audio":
      inner = fieldBytes(utf8ByteLength(item.audioUrl));
      break;
    case "droppedMedia":
      inner = fieldBytes(item.bytes) + (item.kind === "image" ? 2 : 0);
      break;
  }
  return fieldBytes(fieldBytes(inner));
}

/**
 * The size of a window's items as a JSON door writes them, without the items (a Client window over
 * its limit keeps none): the door adds its own per-item wrapping for each shape.
 */
export interface ContentJsonSize {
  /** The UTF-8 bytes of every item's payload (its text or URL) as `JSON.stringify` writes it, quotes included. */
  payloadBytes: number;
  /** How many items of each shape: `text`, `audio`, `image:<detail>`. */
  shapes: Map<string, number>;
}

/**
 * The shape and JSON payload size of one item (see {@link ContentJsonSize}).
 *
 * @param item the item
 * @returns its shape key and the JSON string literal size of its payload
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { contentItemJson } from "./output_collector.ts";
 *
 * assert.deepEqual(contentItemJson({ type: "text", text: 'say "hi"' }), { shape: "text", bytes: 12 });
 * ```
 */
export function contentItemJson(item: PushedItem): { shape: string; bytes: number } {
  switch (item.type) {
    case "text":
      return { shape: "text", bytes: utf8ByteLength(item.text) + jsonEscapeExtraBytes(item.text) + 2 };
    case "trimmedText":
      return { shape: "text", bytes: item.totalBytes + (item.jsonExtraBytes ?? 0) + 2 };
    case "image":
      return {
        shape: `image:${item.detail}`,
        bytes: utf8ByteLength(item.imageUrl) + jsonEscapeExtraBytes(item.imageUrl) + 2,
      };
    case "audio":
      return {
        shape: "audio",
        bytes: utf8ByteLength(item.audioUrl) + jsonEscapeExtraBytes(item.audioUrl) + 2,
      };
    case "droppedMedia":
      return {
        shape: item.kind === "audio" ? "audio" : `image:${item.detail ?? "high"}`,
        bytes: item.bytes + (item.jsonExtraBytes ?? 0) + 2,
      };
  }
}

/**
 * The JSON size of items (see {@link ContentJsonSize}).
 *
 * @param items the items
 * @returns their payload bytes and shapes
 */
export function contentJsonOf(items: Iterable<PushedItem>): ContentJsonSize {
  const json: ContentJsonSize = { payloadBytes: 0, shapes: new Map() };
  for (const item of items) {
    const { shape, bytes } = contentItemJson(item);
    json.payloadBytes += bytes;
    json.shapes.set(shape, (json.shapes.get(shape) ?? 0) + 1);
  }
  return json;
}

/** One output window of either mode. */
export interface OutputCollector {
  /** The mode this collector implements. */
  readonly mode: OutputMode;
  /** Whether nothing has been pushed into this window (and nothing discarded). */
  readonly isEmpty: boolean;
  /**
   * Client mode: the encoded size of the window's items inside an outcome (every pushed item, also
   * those no longer retained); Server mode: the same for what {@link render} returns.
   */
  readonly encodedBytes: number;
  /** Server mode: text bytes pushed into this window and left out of it by its limits; Client mode: 0. */
  readonly omittedTextBytes: number;
  /**
   * Client mode, once the window outgrew `maxMessageBytes`: the JSON size of every item pushed into
   * it (what a JSON door would have written); otherwise `undefined`.
   */
  readonly contentJson: ContentJsonSize | undefined;
  /**
   * Adds one item in production order.
   *
   * @param item the item; media items are kept as this very object
   */
  push(item: PushedItem): void;
  /**
   * Renders the window (SPEC §8.6 rule 8).
   *
   * @returns the items; media items are the pushed objects themselves
   * @throws {RangeError} in Client mode when the window outgrew `maxMessageBytes` (it retains nothing)
   */
  render(): OutputItem[];
  /**
   * The rendered window as text fragments with owners and anchors, for token truncation (§8.7).
   *
   * @returns the entries; Client mode gives every item its own owner
   * @throws {RangeError} in Client mode when the window outgrew `maxMessageBytes`
   */
  entries(): RenderedEntry[];
  /**
   * Hands the window over and restarts this one empty with fresh budgets.
   *
   * @returns a collector holding the taken window
   */
  take(): OutputCollector;
  /**
   * Puts a taken window back in front of whatever was pushed since the take (a failed delivery).
   *
   * @param taken a collector returned by {@link OutputCollector.take} of the same mode; it is left empty
   */
  restore(taken: OutputCollector): void;
  /**
   * Gives back the window's share of the host's memory budget: it was handed to an observer
   * (only a budgeted collector holds one; `budgeted_output.ts`).
   */
  release?(): void;
}

/**
 * Renders entries as items (SPEC §8.6 rule 8): anchors as they are; adjacent text fragments of one
 * owner with nothing between them merged into one item (an empty `text("")` stays an item);
 * adjacent notices as one notice; a `droppedAudio` entry as nothing (it still separates the others).
 *
 * @param entries rendered entries in order
 * @returns the items
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { mergeEntries } from "./output_collector.ts";
 *
 * assert.deepEqual(
 *   mergeEntries([{ kind: "text", text: "a", owner: 1 }, { kind: "text", text: "b", owner: 1 }]),
 *   [{ type: "text", text: "ab" }],
 * );
 * ```
 */
export function mergeEntries(entries: readonly RenderedEntry[]): OutputItem[] {
  const out: OutputItem[] = [];
  let openOwner: number | undefined;
  let parts: string[] = [];
  const close = () => {
    if (parts.length > 0) out.push({ type: "text", text: parts.length === 1 ? parts[0] : parts.join("") });
    parts = [];
    openOwner = undefined;
  };
  let notice: NoticeCounts | undefined;
  for (const e of entries) {
    if (e.kind === "text") {
      if (openOwner !== e.owner) close();
      openOwner = e.owner;
      parts.push(e.text);
      notice = undefined;
      continue;
    }
    close();
    if (e.kind === "notice") {
      if (notice) {
        notice = addCounts(notice, e.counts);
        out[out.length - 1] = { type: "text", text: noticeText(notice) };
      } else {
        notice = e.counts;
        out.push({ type: "text", text: noticeText(notice) });
      }
      continue;
    }
    notice = undefined;
    if (e.kind === "anchor") out.push(e.item);
  }
  close();
  return out;
}

/**
 * The counts of two adjacent notices as one.
 *
 * @param a the first notice's counts
 * @param b the second's
 * @returns a new object with the sums
 */
export function addCounts(a: NoticeCounts, b: NoticeCounts): NoticeCounts {
  return {
    bytes: a.bytes + b.bytes,
    segments: a.segments + b.segments,
    images: a.images + b.images,
    audio: a.audio + b.audio,
  };
}

/**
 * A share of the host's memory budget (`hostBufferedBytes`): what a collector, or a session's
 * stored values, charge for the bytes they hold (the core's `SessionBudget` implements it).
 */
export interface ByteBudget {
  /** The host's budget in bytes (0: off). */
  readonly total: number;
  /**
   * Takes `bytes` if they fit the budget and the session's share.
   *
   * @returns false, taking nothing, when they do not
   */
  tryCharge(bytes: number): boolean;
  /** Whether {@link ByteBudget.tryCharge} would take `bytes` now (takes nothing). */
  fits(bytes: number): boolean;
  /** Takes `bytes` even past the budget (bytes already held, checked with {@link ByteBudget.fits}). */
  charge(bytes: number): void;
  /** Gives back bytes no longer held. */
  release(bytes: number): void;
}

/**
 * The text that ends a window whose cell's later output the host's memory budget refused.
 *
 * @param items the items refused
 * @param bytes their payload bytes
 * @param total the budget (`hostBufferedBytes`)
 * @returns the notice
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { budgetNoticeText } from "./output_collector.ts";
 *
 * assert.equal(
 *   budgetNoticeText(2, 10, 1024),
 *   "[Code Mode host memory budget reached: refused 2 later output items (10 bytes) of this cell; the host buffers at most 1024 bytes of unread output and stored values, shared by its sessions]",
 * );
 * ```
 */
export function budgetNoticeText(items: number, bytes: number, total: number): string {
  return `[Code Mode host memory budget reached: refused ${items} later output items (${bytes} bytes) of this cell; the host buffers at most ${total} bytes of unread output and stored values, shared by its sessions]`;
}

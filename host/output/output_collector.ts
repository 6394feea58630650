/**
 * Output collectors shared by host code (SPEC §8.3, §8.6): the Client collector keeps every item in
 * order; the Server collector bounds one window as the reference host does.
 *
 * Contract (Server collector; the reference host's behaviour, which differs from SPEC §8.6):
 * - Items fill the head up to `maxTextBytes / 2` bytes of text and `maxItems / 2` items; the first
 *   text that does not fit is split at a character boundary (its first part stays in the head, the
 *   rest goes to the tail but is no item of its own), the head freezes, and later items go to the
 *   tail. A discarded image does not freeze it.
 * - The tail keeps the last `maxTextBytes − headText` bytes of text pushed since freezing: bytes go
 *   from the front of the oldest non-empty tail text; media, dropped audio and empty texts stay.
 * - The window keeps at most `maxItems` items, counting one for the notice once anything was lost:
 *   past that the oldest tail item of any kind goes (an image counts as discarded, an audio item
 *   as a discarded audio item, a text as a segment).
 * - Everything lost leaves an omission where it was; adjacent omissions render as one notice, so
 *   a kept item (an empty text too) between two runs of lost output gives two notices. A fragment
 *   evicted whole counts as one discarded segment (the tail part of a split item too).
 * - Images share one `maxImageBytes` budget (8 MiB); an image over it is discarded and leaves an
 *   omission where it was pushed, joining an omission that ends the window.
 * - Audio items share their own `maxAudioBytes` budget (64 MiB: the reference keeps far more audio
 *   than images, and a window never carries more than one message); one over it is kept as its
 *   size only (a `droppedAudio` entry, which token truncation always omits).
 * - Rendering gives the entries in order; adjacent omissions make one notice; adjacent fragments of
 *   one item merge.
 * - `take()` hands the window over and starts a fresh one; `restore()` puts a taken window back in
 *   front exactly (entries, owners, budgets, counters, frozen flag, the same item objects).
 *
 * - A pre-trimmed text item (its first and last `MAX_TEXT` bytes plus its true length, §8.10)
 *   renders exactly like the whole text would; a dropped image is always discarded.
 *
 * Contract (Client collector, SPEC §8.3):
 * - Items are kept exactly as pushed while the window's encoded content fits `maxMessageBytes`;
 *   past that the window retains nothing and only counts encoded bytes
 *   ({@link OutputCollector.encodedBytes}), because it cannot be delivered anyway.
 *
 * Token truncation is `token_truncation.ts`, over {@link OutputCollector.entries}.
 *
 * @module
 */

import {
  fieldBytes,
  jsonEscapeExtraBytes,
  MAX_MESSAGE_BYTES,
  MAX_TEXT_BYTES,
  utf8ByteLength,
  utf8CharAt,
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
}

/**
 * Creates an empty collector for a mode.
 *
 * @param mode `"client"` (plain ordered list) or `"server"` (bounded, SPEC §8.6)
 * @param limits Server limits; ignored in Client mode
 * @returns the collector
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { createOutputCollector } from "./output_collector.ts";
 *
 * const out = createOutputCollector("server", { maxTextBytes: 8 });
 * out.push({ type: "text", text: "abcdef" });
 * out.push({ type: "text", text: "ghij" });
 * assert.deepEqual(out.render().map((i) => i.type === "text" && i.text), [
 *   "abcd",
 *   "[Code Mode session output limit reached: omitted 2 text bytes; discarded 1 text segments, 0 images, 0 audio items]",
 *   "ghij",
 * ]);
 * ```
 */
export function createOutputCollector(mode: OutputMode, limits: OutputLimits = {}): OutputCollector {
  return mode === "server" ? new ServerOutputCollector(limits) : new ClientOutputCollector(limits);
}

/**
 * Whether two collectors render to the same items (SPEC §4.12: internal state is not compared).
 *
 * @param a one collector
 * @param b the other
 * @returns true when the renderings are structurally equal
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { createOutputCollector, sameRendering } from "./output_collector.ts";
 *
 * const a = createOutputCollector("client");
 * const b = createOutputCollector("server");
 * a.push({ type: "text", text: "x" });
 * b.push({ type: "text", text: "x" });
 * assert.ok(sameRendering(a, b));
 * ```
 */
export function sameRendering(a: OutputCollector, b: OutputCollector): boolean {
  const x = a.render();
  const y = b.render();
  return x.length === y.length && x.every((item, i) => sameItem(item, y[i]));
}

function sameItem(a: OutputItem, b: OutputItem): boolean {
  switch (a.type) {
    case "text":
      return b.type === "text" && a.text === b.text;
    case "image":
      return b.type === "image" && a.imageUrl === b.imageUrl && a.detail === b.detail;
    case "audio":
      return b.type === "audio" && a.audioUrl === b.audioUrl;
  }
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

/** A list of items, kept exactly as produced while they fit one message (SPEC §8.3). */
class ClientOutputCollector implements OutputCollector {
  readonly mode = "client";
  readonly #limit: number;
  #items: PushedItem[] = [];
  #encoded = 0;
  #pushed = 0;
  /** Counted from the push that took the window over its limit (before that, the items are there). */
  #json: ContentJsonSize | undefined;

  constructor(limits: OutputLimits) {
    this.#limit = limits.maxMessageBytes ?? MAX_MESSAGE_BYTES;
  }

  get contentJson(): ContentJsonSize | undefined {
    return this.#json;
  }

  /** Adds items to the JSON count (started with the retained items when the window outgrows its limit). */
  #countJson(items: Iterable<PushedItem>): void {
    this.#addJsonSize(contentJsonOf(items));
  }

  #addJsonSize(size: ContentJsonSize): void {
    const json = this.#json ??= { payloadBytes: 0, shapes: new Map() };
    json.payloadBytes += size.payloadBytes;
    for (const [shape, n] of size.shapes) json.shapes.set(shape, (json.shapes.get(shape) ?? 0) + n);
  }

  /** Adds another window's JSON count (or its retained items') to this one's. */
  #addJson(other: ClientOutputCollector): void {
    this.#addJsonSize(other.#json ?? contentJsonOf(other.#items));
  }

  get isEmpty(): boolean {
    return this.#pushed === 0;
  }

  get encodedBytes(): number {
    return this.#encoded;
  }

  get omittedTextBytes(): number {
    return 0;
  }

  push(item: PushedItem): void {
    this.#pushed++;
    this.#encoded += contentItemEncodedBytes(item);
    if (this.#encoded <= this.#limit) {
      this.#items.push(item);
      return;
    }
    if (this.#json === undefined) this.#countJson(this.#items);
    this.#countJson([item]);
    this.#items = [];
  }

  #retained(): OutputItem[] {
    if (this.#encoded > this.#limit) {
      throw new RangeError(`a Client window of ${this.#encoded} bytes exceeds ${this.#limit} bytes`);
    }
    return this.#items as OutputItem[];
  }

  render(): OutputItem[] {
    return [...this.#retained()];
  }

  entries(): RenderedEntry[] {
    return this.#retained().map((item, owner) =>
      item.type === "text" ? { kind: "text", text: item.text, owner } : { kind: "anchor", item }
    );
  }

  take(): OutputCollector {
    const taken = new ClientOutputCollector({ maxMessageBytes: this.#limit });
    taken.#items = this.#items;
    taken.#encoded = this.#encoded;
    taken.#pushed = this.#pushed;
    taken.#json = this.#json;
    this.#items = [];
    this.#encoded = 0;
    this.#pushed = 0;
    this.#json = undefined;
    return taken;
  }

  restore(taken: OutputCollector): void {
    if (!(taken instanceof ClientOutputCollector)) throw new TypeError("restore needs a Client collector");
    this.#encoded += taken.#encoded;
    this.#pushed += taken.#pushed;
    if (this.#encoded > this.#limit) {
      if (this.#json === undefined) this.#countJson(this.#items);
      this.#addJson(taken);
      this.#items = [];
    } else {
      this.#items = this.#items.length === 0 ? taken.#items : [...taken.#items, ...this.#items];
    }
    taken.#items = [];
    taken.#encoded = 0;
    taken.#pushed = 0;
    taken.#json = undefined;
  }
}

/** One omission: what its notice reports, at the place where the output was lost. */
interface Omission {
  kind: "omission";
  /** Text bytes evicted here. */
  bytes: number;
  /** Items (or the tail parts of split items) evicted whole here. */
  segments: number;
  /** Images discarded or evicted here. */
  images: number;
  /** Audio items evicted here. */
  audio: number;
}

interface TextEntry {
  kind: "text";
  text: string;
  /** Bytes this fragment stands for; more than `text` holds only while a reduced text is evicted. */
  bytes: number;
  owner: number;
  /** Bytes evicted from this fragment's front: the omission right before it. */
  before?: Omission;
  /** The tail part of an item whose first part is in the head: not an item of its own. */
  borrowed?: boolean;
  /** `text` holds only the last bytes of the fragment (a reduced text, until its first eviction). */
  reduced?: boolean;
}

interface MediaEntry {
  kind: "media";
  item: OutputItem;
}

/** An audio item kept as its size only (over the audio budget, or sent so by the runtime). */
interface DroppedAudioEntry {
  kind: "droppedAudio";
  bytes: number;
}

type Entry = TextEntry | MediaEntry | DroppedAudioEntry | Omission;

interface WindowState {
  /** Entries before the head filled: never evicted. */
  head: Entry[];
  /** Entries after the head filled, oldest first; an evicted entry becomes an omission in place. */
  tail: Entry[];
  /** Every tail entry before this index holds no text byte left to evict. */
  byteFrom: number;
  /** Every tail entry before this index is an omission or a borrowed part. */
  countFrom: number;
  /** Tail entries turned into omissions since the last compaction. */
  killed: number;
  frozen: boolean;
  headText: number;
  tailText: number;
  /** Items in the head: a split item counts here, its tail part nowhere. */
  headItems: number;
  tailItems: number;
  /** Something was lost: the window renders a notice, which takes an item's place. */
  omitted: boolean;
  images: number;
  audio: number;
  pushedTextBytes: number;
  /** Something was pushed (an empty text or a discarded item too). */
  pushed: boolean;
  nextOwner: number;
}

function freshState(): WindowState {
  return {
    head: [],
    tail: [],
    byteFrom: 0,
    countFrom: 0,
    killed: 0,
    frozen: false,
    headText: 0,
    tailText: 0,
    headItems: 0,
    tailItems: 0,
    omitted: false,
    images: 0,
    audio: 0,
    pushedTextBytes: 0,
    pushed: false,
    nextOwner: 0,
  };
}

/** The image bytes a Server window keeps, as the reference host does (8 MiB). */
export const SERVER_IMAGE_BYTES = 8_388_608;

/** The items (a notice included) a Server window keeps, as the reference host does. */
export const SERVER_MAX_ITEMS = 32_768;

function omission(): Omission {
  return { kind: "omission", bytes: 0, segments: 0, images: 0, audio: 0 };
}

/** Whether an entry is an item of its own, for the item limit. */
function counted(e: Entry): boolean {
  return e.kind === "text" ? !e.borrowed : e.kind !== "omission";
}

/** The bounded collector, as the reference host bounds a window (see the module documentation). */
class ServerOutputCollector implements OutputCollector {
  readonly mode = "server";
  readonly #maxText: number;
  readonly #headBudget: number;
  readonly #maxImages: number;
  readonly #maxAudio: number;
  readonly #maxItems: number;
  readonly #headItems: number;
  #s: WindowState = freshState();

  constructor(limits: OutputLimits) {
    this.#maxText = limits.maxTextBytes ?? MAX_TEXT_BYTES;
    this.#headBudget = Math.floor(this.#maxText / 2);
    this.#maxImages = limits.maxImageBytes ?? SERVER_IMAGE_BYTES;
    this.#maxAudio = limits.maxAudioBytes ?? MAX_MESSAGE_BYTES;
    this.#maxItems = limits.maxItems ?? SERVER_MAX_ITEMS;
    this.#headItems = Math.floor(this.#maxItems / 2);
  }

  #limits(): OutputLimits {
    return {
      maxTextBytes: this.#maxText,
      maxImageBytes: this.#maxImages,
      maxAudioBytes: this.#maxAudio,
      maxItems: this.#maxItems,
    };
  }

  get isEmpty(): boolean {
    return !this.#s.pushed;
  }

  get contentJson(): undefined {
    return undefined;
  }

  get omittedTextBytes(): number {
    const s = this.#s;
    return s.pushedTextBytes - s.headText - s.tailText;
  }

  get encodedBytes(): number {
    let total = 0;
    for (const item of this.render()) total += contentItemEncodedBytes(item);
    return total;
  }

  push(item: PushedItem): void {
    const s = this.#s;
    s.pushed = true;
    switch (item.type) {
      case "text":
        this.#pushText(item.text, utf8ByteLength(item.text));
        break;
      case "trimmedText":
        this.#pushTrimmed(item);
        break;
      case "droppedMedia":
        if (item.kind === "image") this.#omit({ images: 1 });
        else this.#place({ kind: "droppedAudio", bytes: item.bytes });
        break;
      case "image": {
        const bytes = utf8ByteLength(item.imageUrl);
        if (s.images + bytes > this.#maxImages) {
          this.#omit({ images: 1 });
        } else {
          s.images += bytes;
          this.#place({ kind: "media", item });
        }
        break;
      }
      case "audio": {
        const bytes = utf8ByteLength(item.audioUrl);
        if (s.audio + bytes > this.#maxAudio) {
          this.#place({ kind: "droppedAudio", bytes });
        } else {
          s.audio += bytes;
          this.#place({ kind: "media", item });
        }
        break;
      }
    }
    this.#evictItems();
    if (s.killed > 64 && s.killed * 2 > s.tail.length) this.#compact();
  }

  /** The head is full of items: the next one starts the tail. */
  #freezeOnItems(): void {
    if (!this.#s.frozen && this.#s.headItems >= this.#headItems) this.#s.frozen = true;
  }

  /** Appends a non-text item. */
  #place(entry: MediaEntry | DroppedAudioEntry): void {
    const s = this.#s;
    this.#freezeOnItems();
    if (s.frozen) {
      s.tail.push(entry);
      s.tailItems++;
    } else {
      s.head.push(entry);
      s.headItems++;
    }
  }

  /** Records lost output at the end of the window, joining an omission that ends it. */
  #omit(counts: Partial<Omit<Omission, "kind">>): void {
    const s = this.#s;
    s.omitted = true;
    const list = s.frozen ? s.tail : s.head;
    let last = list[list.length - 1];
    if (last?.kind !== "omission") list.push(last = omission());
    last.bytes += counts.bytes ?? 0;
    last.segments += counts.segments ?? 0;
    last.images += counts.images ?? 0;
    last.audio += counts.audio ?? 0;
  }

  #pushText(text: string, bytes: number): void {
    const s = this.#s;
    const owner = s.nextOwner++;
    s.pushedTextBytes += bytes;
    this.#freezeOnItems();
    if (!s.frozen) {
      if (s.headText + bytes <= this.#headBudget) {
        s.head.push({ kind: "text", text, bytes, owner });
        s.headText += bytes;
        s.headItems++;
        return;
      }
      const prefix = this.#headPrefix(text, owner);
      this.#appendTail({
        kind: "text",
        text: text.slice(prefix.units),
        bytes: bytes - prefix.bytes,
        owner,
        ...(prefix.bytes > 0 ? { borrowed: true } : {}),
      });
      return;
    }
    this.#appendTail({ kind: "text", text, bytes, owner });
  }

  /**
   * A reduced text renders like the whole one: the head can only take bytes of its first part, and
   * the tail keeps at most `maxTextBytes / 2` bytes, all from its last part.
   */
  #pushTrimmed(item: TrimmedTextItem): void {
    const s = this.#s;
    const owner = s.nextOwner++;
    s.pushedTextBytes += item.totalBytes;
    this.#freezeOnItems();
    const taken = s.frozen ? 0 : this.#headPrefix(item.head, owner).bytes;
    this.#appendTail({
      kind: "text",
      text: item.tail,
      bytes: item.totalBytes - taken,
      owner,
      reduced: true,
      ...(taken > 0 ? { borrowed: true } : {}),
    });
  }

  /** Keeps the longest prefix of `text` that still fits into the head, then freezes the head. */
  #headPrefix(text: string, owner: number): { units: number; bytes: number } {
    const s = this.#s;
    const prefix = utf8Prefix(text, this.#headBudget - s.headText);
    if (prefix.bytes > 0) {
      s.head.push({ kind: "text", text: text.slice(0, prefix.units), bytes: prefix.bytes, owner });
      s.headText += prefix.bytes;
      s.headItems++;
    }
    s.frozen = true;
    return prefix;
  }

  #appendTail(entry: TextEntry): void {
    const s = this.#s;
    s.tail.push(entry);
    s.tailText += entry.bytes;
    if (!entry.borrowed) s.tailItems++;
    this.#evictBytes();
  }

  /** Turns the tail entry at `i` into the omission that records it. */
  #kill(i: number): void {
    const s = this.#s;
    const e = s.tail[i];
    let o: Omission;
    if (e.kind === "text") {
      o = e.before ?? omission();
      o.bytes += e.bytes;
      o.segments++;
      s.tailText -= e.bytes;
    } else {
      o = omission();
      if (e.kind === "media" && e.item.type === "image") o.images++;
      else o.audio++;
    }
    if (counted(e)) s.tailItems--;
    s.tail[i] = o;
    s.omitted = true;
    s.killed++;
  }

  /**
   * Drops bytes from the front of the oldest non-empty tail text until the tail fits its budget
   * (`maxTextBytes` − the head). Media, dropped audio and empty texts stay where they are.
   */
  #evictBytes(): void {
    const s = this.#s;
    const budget = this.#maxText - s.headText;
    while (s.tailText > budget) {
      let e = s.tail[s.byteFrom];
      while (e.kind !== "text" || e.bytes === 0) e = s.tail[++s.byteFrom];
      const excess = s.tailText - budget;
      if (e.bytes <= excess) {
        this.#kill(s.byteFrom++);
        continue;
      }
      const keep = e.bytes - excess;
      let units: number;
      let kept: number;
      if (!e.reduced && excess <= keep) {
        // Scan from the front when less is removed than kept.
        let cut = 0;
        let removed = 0;
        while (removed < excess) {
          const [b, u] = utf8CharAt(e.text, cut);
          removed += b;
          cut += u;
        }
        units = e.text.length - cut;
        kept = e.bytes - removed;
      } else {
        ({ units, bytes: kept } = utf8Suffix(e.text, keep));
      }
      if (kept === 0) {
        // One character larger than what was left to keep: the fragment is gone after all.
        this.#kill(s.byteFrom++);
        continue;
      }
      const before = e.before ??= omission();
      before.bytes += e.bytes - kept;
      s.tailText -= e.bytes - kept;
      e.text = e.text.slice(e.text.length - units);
      e.bytes = kept;
      e.reduced = undefined;
      s.omitted = true;
    }
  }

  /** Drops the oldest tail items (of any kind) while the window holds more than its item limit. */
  #evictItems(): void {
    const s = this.#s;
    while (s.headItems + s.tailItems + (s.omitted ? 1 : 0) > this.#maxItems) {
      let e = s.tail[s.countFrom];
      while (!counted(e)) e = s.tail[++s.countFrom];
      this.#kill(s.countFrom++);
    }
  }

  /** Joins runs of omissions, so that a flood of evicted items costs no memory. */
  #compact(): void {
    const s = this.#s;
    const kept: Entry[] = [];
    let byteFrom = -1;
    let countFrom = -1;
    for (let i = 0; i < s.tail.length; i++) {
      const e = s.tail[i];
      const last = kept[kept.length - 1];
      if (e.kind === "omission" && last?.kind === "omission") {
        last.bytes += e.bytes;
        last.segments += e.segments;
        last.images += e.images;
        last.audio += e.audio;
      } else {
        kept.push(e);
      }
      if (i === s.byteFrom) byteFrom = kept.length - 1;
      if (i === s.countFrom) countFrom = kept.length - 1;
    }
    s.byteFrom = byteFrom < 0 ? kept.length : byteFrom;
    s.countFrom = countFrom < 0 ? kept.length : countFrom;
    s.tail = kept;
    s.killed = 0;
  }

  entries(): RenderedEntry[] {
    const s = this.#s;
    const out: RenderedEntry[] = [];
    let notice: NoticeCounts | undefined;
    const addNotice = (o: Omission) => {
      if (notice) {
        notice.bytes += o.bytes;
        notice.segments += o.segments;
        notice.images += o.images;
        notice.audio += o.audio;
      } else {
        notice = { bytes: o.bytes, segments: o.segments, images: o.images, audio: o.audio };
        out.push({ kind: "notice", counts: notice });
      }
    };
    const add = (e: Entry) => {
      switch (e.kind) {
        case "omission":
          return addNotice(e);
        case "text":
          if (e.before) addNotice(e.before);
          out.push({ kind: "text", text: e.text, owner: e.owner });
          break;
        case "media":
          out.push({ kind: "anchor", item: e.item });
          break;
        case "droppedAudio":
          out.push({ kind: "droppedAudio", bytes: e.bytes });
          break;
      }
      notice = undefined;
    };
    s.head.forEach(add);
    s.tail.forEach(add);
    return out;
  }

  render(): OutputItem[] {
    return mergeEntries(this.entries());
  }

  take(): OutputCollector {
    const taken = new ServerOutputCollector(this.#limits());
    taken.#s = this.#s;
    this.#s = freshState();
    return taken;
  }

  restore(taken: OutputCollector): void {
    if (!(taken instanceof ServerOutputCollector)) throw new TypeError("restore needs a Server collector");
    const later = this.#s;
    this.#s = taken.#s;
    taken.#s = freshState();
    if (!later.pushed) return;
    // Pushes landed between the take and the restore: replay them after the restored window; what
    // they had already lost is recorded as omissions at its place, so nothing is lost or counted twice.
    const replay = new ServerOutputCollector(this.#limits());
    replay.#s = later;
    for (const entry of replay.entries()) {
      switch (entry.kind) {
        case "text":
          this.push({ type: "text", text: entry.text });
          break;
        case "anchor":
          this.push(entry.item);
          break;
        case "droppedAudio":
          this.push({ type: "droppedMedia", kind: "audio", bytes: entry.bytes });
          break;
        case "notice":
          this.#s.pushedTextBytes += entry.counts.bytes;
          this.#omit(entry.counts);
          this.#evictItems();
          break;
      }
    }
  }
}

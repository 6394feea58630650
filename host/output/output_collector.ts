/**
 * Output collectors shared by host code (SPEC §8.3, §8.6): the Client collector keeps every item in
 * order; the Server collector bounds one window by UTF-8 bytes with a head, a tail and an omission
 * notice.
 *
 * Contract (Server collector, SPEC §8.6):
 * - Text fills the head up to `maxTextBytes / 2`; the first text that does not fit is split at a
 *   character boundary, the head freezes and the rest goes to the tail.
 * - The tail keeps the last `maxTextBytes − headText` bytes of text pushed since freezing; media in
 *   the tail are never evicted.
 * - Media share one `maxMediaBytes` budget; a media item over budget is discarded, counted and
 *   freezes the head.
 * - Rendering gives head, then at most one notice, then tail; adjacent fragments of one item merge.
 * - `take()` hands the window over and starts a fresh one; `restore()` puts a taken window back in
 *   front exactly (entries, owners, budgets, counters, frozen flag, the same item objects).
 *
 * - A pre-trimmed text item (its first and last `MAX_TEXT` bytes plus its true length, §8.10)
 *   renders exactly like the whole text would; a dropped media item (kind and size only) is always
 *   discarded.
 *
 * Contract (Client collector, SPEC §8.3):
 * - Items are kept exactly as pushed while the window's encoded content fits `maxMessageBytes`;
 *   past that the window retains nothing and only counts encoded bytes
 *   ({@link OutputCollector.encodedBytes}), because it cannot be delivered anyway.
 *
 * Token truncation (§8.7) is `token_truncation.ts`, over {@link OutputCollector.entries}.
 *
 * @module
 */

import {
  fieldBytes,
  MAX_MEDIA_BYTES,
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
}

/** A media item sent as its kind and size only (SPEC §8.10); no window can keep it. */
export interface DroppedMediaItem {
  type: "droppedMedia";
  kind: "image" | "audio";
  /** The UTF-8 length of its URL. */
  bytes: number;
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

/**
 * The diagnostic form of an error text (SPEC §8.5): unchanged up to `maxBytes` bytes, else its
 * longest whole-character prefix of at most half of `maxBytes` immediately followed by its longest
 * whole-character suffix of at most half, with no marker.
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
 * assert.equal(diagnosticErrorText("abcdefgh", 4), "abgh");
 * assert.equal(diagnosticErrorText("abcd", 4), "abcd");
 * ```
 */
export function diagnosticErrorText(error: ErrorText, maxBytes: number = MAX_DIAGNOSTIC_BYTES): string {
  if (errorTextBytes(error) <= maxBytes) return errorTextString(error);
  const half = Math.floor(maxBytes / 2);
  const head = typeof error === "string" ? error : error.head;
  const tail = typeof error === "string" ? error : error.tail;
  return head.slice(0, utf8Prefix(head, half).units) + tail.slice(tail.length - utf8Suffix(tail, half).units);
}

/** What a cell's output path carries into a collector. */
export type PushedItem = OutputItem | TrimmedTextItem | DroppedMediaItem;

/** A rendered window before token truncation: text fragments with their owners, and anchors. */
export type RenderedEntry =
  | { kind: "text"; text: string; owner: number }
  | { kind: "anchor"; item: OutputItem };

/** The output modes of SPEC §8.2. */
export type OutputMode = "client" | "server";

/** Server collector limits; defaults are the SPEC's (§2.8). */
export interface OutputLimits {
  /** Retained text bytes per window (head + tail). Default 1,048,576. */
  maxTextBytes?: number;
  /** Retained image/audio URL bytes per window. Default 16,777,216. */
  maxMediaBytes?: number;
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
 *   "[Code Mode session output limit reached: omitted 2 text bytes; discarded 0 text segments, 0 images, 0 audio items]",
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
 * owner with nothing between them merged into one item (an empty `text("")` stays an item).
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
  for (const e of entries) {
    if (e.kind === "anchor") {
      close();
      out.push(e.item);
    } else {
      if (openOwner !== e.owner) close();
      openOwner = e.owner;
      parts.push(e.text);
    }
  }
  close();
  return out;
}

/** A list of items, kept exactly as produced while they fit one message (SPEC §8.3). */
class ClientOutputCollector implements OutputCollector {
  readonly mode = "client";
  readonly #limit: number;
  #items: PushedItem[] = [];
  #encoded = 0;
  #pushed = 0;

  constructor(limits: OutputLimits) {
    this.#limit = limits.maxMessageBytes ?? MAX_MESSAGE_BYTES;
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
    if (this.#encoded > this.#limit) this.#items = [];
    else this.#items.push(item);
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
    this.#items = [];
    this.#encoded = 0;
    this.#pushed = 0;
    return taken;
  }

  restore(taken: OutputCollector): void {
    if (!(taken instanceof ClientOutputCollector)) throw new TypeError("restore needs a Client collector");
    this.#encoded += taken.#encoded;
    this.#pushed += taken.#pushed;
    this.#items = this.#encoded > this.#limit
      ? []
      : this.#items.length === 0
      ? taken.#items
      : [...taken.#items, ...this.#items];
    taken.#items = [];
    taken.#encoded = 0;
    taken.#pushed = 0;
  }
}

interface TextEntry {
  kind: "text";
  text: string;
  bytes: number;
  owner: number;
  /** The head also holds a fragment of this owner (the first tail part of a split item). */
  sharesOwner: boolean;
  /** Evicted from the tail; skipped when rendering. */
  dead: boolean;
}

interface MediaEntry {
  kind: "media";
  item: OutputItem;
}

type Entry = TextEntry | MediaEntry;

interface WindowState {
  head: Entry[];
  tail: Entry[];
  /** Every tail text entry before this index is dead. */
  evictFrom: number;
  deadCount: number;
  frozen: boolean;
  tailBudget: number;
  headText: number;
  tailText: number;
  media: number;
  discardedImages: number;
  discardedAudio: number;
  pushedTextBytes: number;
  pushedTextItems: number;
  retainedTextItems: number;
  nextOwner: number;
}

function freshState(): WindowState {
  return {
    head: [],
    tail: [],
    evictFrom: 0,
    deadCount: 0,
    frozen: false,
    tailBudget: 0,
    headText: 0,
    tailText: 0,
    media: 0,
    discardedImages: 0,
    discardedAudio: 0,
    pushedTextBytes: 0,
    pushedTextItems: 0,
    retainedTextItems: 0,
    nextOwner: 0,
  };
}

/** The bounded collector of SPEC §8.6. */
class ServerOutputCollector implements OutputCollector {
  readonly mode = "server";
  readonly #maxText: number;
  readonly #headBudget: number;
  readonly #maxMedia: number;
  #s: WindowState = freshState();

  constructor(limits: OutputLimits) {
    this.#maxText = limits.maxTextBytes ?? MAX_TEXT_BYTES;
    this.#headBudget = Math.floor(this.#maxText / 2);
    this.#maxMedia = limits.maxMediaBytes ?? MAX_MEDIA_BYTES;
  }

  get isEmpty(): boolean {
    const s = this.#s;
    return s.head.length === 0 && s.tail.length === 0 && s.pushedTextBytes === 0 &&
      s.discardedImages === 0 && s.discardedAudio === 0;
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
    switch (item.type) {
      case "text":
        return this.#pushText(item.text);
      case "trimmedText":
        return this.#pushTrimmed(item);
      case "droppedMedia":
        return this.#discardMedia(item.kind);
      default:
        return this.#pushMedia(item);
    }
  }

  /**
   * A reduced text renders like the whole one: the head can only take bytes of its first part, and
   * the tail keeps at most `MAX_TEXT` bytes, all from its last part (and nothing older).
   */
  #pushTrimmed(item: TrimmedTextItem): void {
    const s = this.#s;
    const owner = s.nextOwner++;
    s.pushedTextBytes += item.totalBytes;
    s.pushedTextItems++;
    const sharesOwner = !s.frozen && this.#headPrefix(item.head, owner).bytes > 0;
    for (let i = s.evictFrom; i < s.tail.length; i++) {
      const e = s.tail[i];
      if (e.kind === "text" && !e.dead) this.#kill(e);
    }
    this.#appendTail(item.tail, utf8ByteLength(item.tail), owner, sharesOwner);
  }

  /** Keeps the longest prefix of `text` that still fits into the head, then freezes the head. */
  #headPrefix(text: string, owner: number): { units: number; bytes: number } {
    const s = this.#s;
    const prefix = utf8Prefix(text, this.#headBudget - s.headText);
    if (prefix.bytes > 0) {
      s.head.push({
        kind: "text",
        text: text.slice(0, prefix.units),
        bytes: prefix.bytes,
        owner,
        sharesOwner: false,
        dead: false,
      });
      s.headText += prefix.bytes;
      s.retainedTextItems++;
    }
    this.#freeze();
    return prefix;
  }

  #freeze(): void {
    const s = this.#s;
    s.frozen = true;
    s.tailBudget = this.#maxText - s.headText;
  }

  /** Drops a whole tail text: it renders as nothing from now on. */
  #kill(e: TextEntry): void {
    const s = this.#s;
    s.tailText -= e.bytes;
    if (e.bytes > 0 && !e.sharesOwner) s.retainedTextItems--;
    e.dead = true;
    e.text = "";
    e.bytes = 0;
    s.deadCount++;
  }

  #pushText(text: string): void {
    const s = this.#s;
    const bytes = utf8ByteLength(text);
    const owner = s.nextOwner++;
    s.pushedTextBytes += bytes;
    if (bytes > 0) s.pushedTextItems++;
    if (!s.frozen) {
      if (s.headText + bytes <= this.#headBudget) {
        s.head.push({ kind: "text", text, bytes, owner, sharesOwner: false, dead: false });
        s.headText += bytes;
        if (bytes > 0) s.retainedTextItems++;
        return;
      }
      const prefix = this.#headPrefix(text, owner);
      this.#appendTail(text.slice(prefix.units), bytes - prefix.bytes, owner, prefix.bytes > 0);
      return;
    }
    this.#appendTail(text, bytes, owner, false);
  }

  #appendTail(text: string, bytes: number, owner: number, sharesOwner: boolean): void {
    const s = this.#s;
    s.tail.push({ kind: "text", text, bytes, owner, sharesOwner, dead: false });
    s.tailText += bytes;
    if (bytes > 0 && !sharesOwner) s.retainedTextItems++;
    this.#evict();
  }

  /** Rule 2: drop bytes from the front of the oldest tail text until the tail fits its budget. */
  #evict(): void {
    const s = this.#s;
    while (s.tailText > s.tailBudget) {
      let i = s.evictFrom;
      while (s.tail[i].kind !== "text" || (s.tail[i] as TextEntry).dead) i++;
      s.evictFrom = i;
      const e = s.tail[i] as TextEntry;
      const excess = s.tailText - s.tailBudget;
      if (e.bytes <= excess) {
        this.#kill(e);
        continue;
      }
      // Keep the largest suffix that fits; scan from whichever end is shorter.
      const keep = e.bytes - excess;
      let units: number;
      let kept: number;
      if (excess <= keep) {
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
      s.tailText -= e.bytes - kept;
      e.text = e.text.slice(e.text.length - units);
      e.bytes = kept;
      if (kept === 0) {
        if (!e.sharesOwner) s.retainedTextItems--;
        e.dead = true;
        s.deadCount++;
      }
    }
    if (s.deadCount > 64 && s.deadCount * 2 > s.tail.length) {
      s.tail = s.tail.filter((e) => e.kind === "media" || !e.dead);
      s.evictFrom = 0;
      s.deadCount = 0;
    }
  }

  #pushMedia(item: Extract<OutputItem, { type: "image" | "audio" }>): void {
    const s = this.#s;
    const bytes = utf8ByteLength(item.type === "image" ? item.imageUrl : item.audioUrl);
    if (s.media + bytes <= this.#maxMedia) {
      s.media += bytes;
      (s.frozen ? s.tail : s.head).push({ kind: "media", item });
      return;
    }
    this.#discardMedia(item.type === "image" ? "image" : "audio");
  }

  #discardMedia(kind: "image" | "audio"): void {
    const s = this.#s;
    if (kind === "image") s.discardedImages++;
    else s.discardedAudio++;
    if (!s.frozen) this.#freeze();
  }

  entries(): RenderedEntry[] {
    const s = this.#s;
    const out: RenderedEntry[] = [];
    const add = (e: Entry) => {
      if (e.kind === "media") out.push({ kind: "anchor", item: e.item });
      else if (!e.dead) out.push({ kind: "text", text: e.text, owner: e.owner });
    };
    s.head.forEach(add);
    const omitted = s.pushedTextBytes - s.headText - s.tailText;
    if (omitted > 0 || s.discardedImages > 0 || s.discardedAudio > 0) {
      out.push({
        kind: "anchor",
        item: {
          type: "text",
          text: `[Code Mode session output limit reached: omitted ${omitted} text bytes; discarded ${
            s.pushedTextItems - s.retainedTextItems
          } text segments, ${s.discardedImages} images, ${s.discardedAudio} audio items]`,
        },
      });
    }
    s.tail.forEach(add);
    return out;
  }

  render(): OutputItem[] {
    return mergeEntries(this.entries());
  }

  take(): OutputCollector {
    const taken = new ServerOutputCollector({ maxTextBytes: this.#maxText, maxMediaBytes: this.#maxMedia });
    taken.#s = this.#s;
    this.#s = freshState();
    return taken;
  }

  restore(taken: OutputCollector): void {
    if (!(taken instanceof ServerOutputCollector)) throw new TypeError("restore needs a Server collector");
    const later = this.#s;
    this.#s = taken.#s;
    taken.#s = freshState();
    if (
      later.head.length === 0 && later.tail.length === 0 && later.pushedTextBytes === 0 &&
      later.discardedImages === 0 && later.discardedAudio === 0
    ) return;
    // Pushes landed between the take and the restore: replay them after the restored window, and
    // carry over what they had already omitted, so nothing is lost or counted twice.
    const replay = new ServerOutputCollector({ maxTextBytes: this.#maxText, maxMediaBytes: this.#maxMedia });
    replay.#s = later;
    const omittedBytes = later.pushedTextBytes - later.headText - later.tailText;
    const omittedItems = later.pushedTextItems - later.retainedTextItems;
    const lostMedia = later.discardedImages + later.discardedAudio;
    const items = replay.render();
    if (omittedBytes > 0 || lostMedia > 0) items.splice(replay.#noticeIndex(), 1);
    for (const item of items) this.push(item);
    const s = this.#s;
    s.pushedTextBytes += omittedBytes;
    s.pushedTextItems += omittedItems;
    s.discardedImages += later.discardedImages;
    s.discardedAudio += later.discardedAudio;
    if ((omittedBytes > 0 || lostMedia > 0) && !s.frozen) this.#freeze();
  }

  /** Index of the notice in {@link render}'s output (call only when there is a notice). */
  #noticeIndex(): number {
    let n = 0;
    let openOwner = -1;
    for (const e of this.#s.head) {
      if (e.kind === "media") {
        n++;
        openOwner = -1;
      } else if (e.owner !== openOwner) {
        n++;
        openOwner = e.owner;
      }
    }
    return n;
  }
}

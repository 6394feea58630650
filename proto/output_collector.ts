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
 * Token truncation (§8.7) is not done here.
 *
 * @module
 */

/** One content item as produced by a cell. */
export type OutputItem =
  | { type: "text"; text: string }
  | { type: "image"; imageUrl: string; detail: "auto" | "low" | "high" | "original" }
  | { type: "audio"; audioUrl: string };

/** The output modes of SPEC §8.2. */
export type OutputMode = "client" | "server";

/** Server collector limits; defaults are the SPEC's (§2.8). */
export interface OutputLimits {
  /** Retained text bytes per window (head + tail). Default 1,048,576. */
  maxTextBytes?: number;
  /** Retained image/audio URL bytes per window. Default 16,777,216. */
  maxMediaBytes?: number;
}

/** `MAX_TEXT` of SPEC §8.6. */
export const MAX_TEXT_BYTES = 1_048_576;
/** `MAX_MEDIA` of SPEC §8.6. */
export const MAX_MEDIA_BYTES = 16_777_216;

/** One output window of either mode. */
export interface OutputCollector {
  /** The mode this collector implements. */
  readonly mode: OutputMode;
  /** Whether nothing has been pushed into this window (and nothing discarded). */
  readonly isEmpty: boolean;
  /**
   * Adds one item in production order.
   *
   * @param item the item; media items are kept as this very object
   */
  push(item: OutputItem): void;
  /**
   * Renders the window (SPEC §8.6 rule 8).
   *
   * @returns the items; media items are the pushed objects themselves
   */
  render(): OutputItem[];
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
  return mode === "server" ? new ServerOutputCollector(limits) : new ClientOutputCollector();
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
 * The UTF-8 byte length of a string (a lone surrogate counts as its 3-byte replacement).
 *
 * @param s the string
 * @returns its UTF-8 byte length
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { utf8ByteLength } from "./output_collector.ts";
 *
 * assert.equal(utf8ByteLength("aé🦀"), 7);
 * ```
 */
export function utf8ByteLength(s: string): number {
  let bytes = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff && isLow(s.charCodeAt(i + 1))) {
      bytes += 2; // 2 code units → 4 bytes
      i++;
    } else bytes += 2;
  }
  return bytes;
}

function isLow(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/** Bytes and code units of the character starting at `i`. */
function charAt(s: string, i: number): [bytes: number, units: number] {
  const c = s.charCodeAt(i);
  if (c < 0x80) return [1, 1];
  if (c < 0x800) return [2, 1];
  if (c >= 0xd800 && c <= 0xdbff && isLow(s.charCodeAt(i + 1))) return [4, 2];
  return [3, 1];
}

/** Bytes and code units of the character ending just before `end`. */
function charBefore(s: string, end: number): [bytes: number, units: number] {
  const c = s.charCodeAt(end - 1);
  if (c < 0x80) return [1, 1];
  if (c < 0x800) return [2, 1];
  if (isLow(c) && end >= 2) {
    const h = s.charCodeAt(end - 2);
    if (h >= 0xd800 && h <= 0xdbff) return [4, 2];
  }
  return [3, 1];
}

/**
 * The longest prefix of whole characters of at most `maxBytes` UTF-8 bytes.
 *
 * @param s the string
 * @param maxBytes the byte budget
 * @returns the code-unit length of the prefix and its byte length
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { utf8Prefix } from "./output_collector.ts";
 *
 * assert.deepEqual(utf8Prefix("a🦀b", 4), { units: 1, bytes: 1 });
 * ```
 */
export function utf8Prefix(s: string, maxBytes: number): { units: number; bytes: number } {
  let units = 0;
  let bytes = 0;
  while (units < s.length) {
    const [b, u] = charAt(s, units);
    if (bytes + b > maxBytes) break;
    bytes += b;
    units += u;
  }
  return { units, bytes };
}

/**
 * The longest suffix of whole characters of at most `maxBytes` UTF-8 bytes.
 *
 * @param s the string
 * @param maxBytes the byte budget
 * @returns the code-unit length of the suffix and its byte length
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { utf8Suffix } from "./output_collector.ts";
 *
 * assert.deepEqual(utf8Suffix("a🦀b", 4), { units: 1, bytes: 1 });
 * ```
 */
export function utf8Suffix(s: string, maxBytes: number): { units: number; bytes: number } {
  let units = 0;
  let bytes = 0;
  while (units < s.length) {
    const [b, u] = charBefore(s, s.length - units);
    if (bytes + b > maxBytes) break;
    bytes += b;
    units += u;
  }
  return { units, bytes };
}

/** A list of items, kept exactly as produced (SPEC §8.3). */
class ClientOutputCollector implements OutputCollector {
  readonly mode = "client";
  #items: OutputItem[] = [];

  get isEmpty(): boolean {
    return this.#items.length === 0;
  }

  push(item: OutputItem): void {
    this.#items.push(item);
  }

  render(): OutputItem[] {
    return [...this.#items];
  }

  take(): OutputCollector {
    const taken = new ClientOutputCollector();
    taken.#items = this.#items;
    this.#items = [];
    return taken;
  }

  restore(taken: OutputCollector): void {
    if (!(taken instanceof ClientOutputCollector)) throw new TypeError("restore needs a Client collector");
    this.#items = this.#items.length === 0 ? taken.#items : [...taken.#items, ...this.#items];
    taken.#items = [];
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

  push(item: OutputItem): void {
    if (item.type === "text") this.#pushText(item.text);
    else this.#pushMedia(item);
  }

  #freeze(): void {
    const s = this.#s;
    s.frozen = true;
    s.tailBudget = this.#maxText - s.headText;
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
      const prefix = utf8Prefix(text, this.#headBudget - s.headText);
      let sharesOwner = false;
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
        sharesOwner = true;
      }
      this.#freeze();
      this.#appendTail(text.slice(prefix.units), bytes - prefix.bytes, owner, sharesOwner);
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
        s.tailText -= e.bytes;
        if (e.bytes > 0 && !e.sharesOwner) s.retainedTextItems--;
        e.dead = true;
        e.text = "";
        e.bytes = 0;
        s.deadCount++;
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
          const [b, u] = charAt(e.text, cut);
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

  #pushMedia(item: OutputItem): void {
    const s = this.#s;
    const bytes = utf8ByteLength(
      item.type === "image" ? item.imageUrl : item.type === "audio" ? item.audioUrl : "",
    );
    if (s.media + bytes <= this.#maxMedia) {
      s.media += bytes;
      (s.frozen ? s.tail : s.head).push({ kind: "media", item });
      return;
    }
    if (item.type === "image") s.discardedImages++;
    else s.discardedAudio++;
    if (!s.frozen) this.#freeze();
  }

  render(): OutputItem[] {
    const s = this.#s;
    const out: OutputItem[] = [];
    let openOwner = -1;
    const emit = (e: Entry) => {
      if (e.kind === "media") {
        out.push(e.item);
        openOwner = -1;
        return;
      }
      if (e.dead) return;
      const last = out[out.length - 1];
      if (openOwner === e.owner && last?.type === "text") {
        out[out.length - 1] = { type: "text", text: last.text + e.text };
      } else {
        out.push({ type: "text", text: e.text });
        openOwner = e.owner;
      }
    };
    s.head.forEach(emit);
    const omitted = s.pushedTextBytes - s.headText - s.tailText;
    if (omitted > 0 || s.discardedImages > 0 || s.discardedAudio > 0) {
      out.push({
        type: "text",
        text: `[Code Mode session output limit reached: omitted ${omitted} text bytes; discarded ${
          s.pushedTextItems - s.retainedTextItems
        } text segments, ${s.discardedImages} images, ${s.discardedAudio} audio items]`,
      });
      openOwner = -1;
    }
    s.tail.forEach(emit);
    return out;
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

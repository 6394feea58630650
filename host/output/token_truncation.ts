/**
 * Server-mode token truncation of an output window, as the reference host does it (it is the
 * truncation Codex applies itself to a Client-mode result, SPEC §11.5 step 2, over the window the
 * bounded collector rendered).
 *
 * Input is the collector's rendered entries: text fragments in order, each with the `owner` (pushed
 * item) it came from; media items (`anchor`); omission notices; audio kept as its size only.
 * Budget `T` tokens, byte budget `B = 4·T`; a token estimate of `n` bytes is `ceil(n / 4)`; all
 * lengths are UTF-8 bytes, and a cut never splits a character.
 *
 * Contract of {@link truncateEntries}:
 * - A window with media (an image or audio entry, a dropped audio, or a notice counting discarded
 *   images) is walked item by item (Codex's `truncate_function_output_items_with_policy`): the
 *   remaining budget starts at `T`; images and notices are kept and cost nothing; an empty text is
 *   left out; a text is counted as omitted once the budget is 0, is kept when its estimate fits
 *   (and charged), else is cut in the middle to the remaining budget (`prefix…k tokens
 *   truncated…suffix`, no header) and the budget becomes 0; an audio item is kept and charged when
 *   the estimate of its URL fits, else omitted (a dropped audio always is). Then
 *   `[omitted n text items ...]` and `[omitted n audio items ...]` are appended when `n > 0`.
 * - Any other window is one text: its fragments joined, with one `\n` before each fragment when the
 *   text so far is not empty and the fragment starts another item than the previous fragment (the
 *   two parts of an item split around a notice join directly). If that text fits `B` the rendered
 *   items are returned unchanged. Otherwise the result is
 *   `Warning: truncated output (original token count: N)\nTotal output lines: L\n\n` + the whole
 *   characters of its first `floor(B / 2)` bytes + `…k tokens truncated…` + the whole characters of
 *   its last `B − floor(B / 2)` bytes (`N = ceil(len / 4)`, `k = ceil((len − B) / 4)`, `L` its lines
 *   as Rust's `str::lines` counts them), split into items at the notices: a notice stands where the
 *   text of the fragment after it starts (after that fragment's `\n`), at its place when that is in
 *   the kept prefix (up to and including the cut) or suffix, else right after the marker.
 * - In both, notices left with nothing between them become one notice (their counts summed).
 * - A budget that is not a non-negative integer is a `RangeError`. Work is linear in the text length.
 *
 * @module
 */

import {
  addCounts,
  mergeEntries,
  type NoticeCounts,
  noticeText,
  type OutputItem,
  type RenderedEntry,
} from "./output_collector.ts";
import { utf8ByteLength, utf8Prefix, utf8Suffix } from "../../proto/bytes.ts";

// Re-exported so that this module's public signatures are documented in full (`deno doc --lint`).
export type { NoticeCounts, OutputItem, RenderedEntry };

/**
 * Applies Server-mode token truncation to rendered entries with a budget of `maxTokens` (see the
 * module documentation for the exact rules).
 *
 * @param entries the rendered entries, in order
 * @param maxTokens the token budget `T` (bytes budget `4·T`)
 * @returns the output items; media items are the same objects
 * @throws {RangeError} when `maxTokens` is not a non-negative integer
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { truncateEntries } from "./token_truncation.ts";
 *
 * const lines = Array.from({ length: 50 }, (_, i) => ({ kind: "text", text: `line ${i}`, owner: i }) as const);
 * assert.deepEqual(truncateEntries(lines, 30), [{
 *   type: "text",
 *   text: "Warning: truncated output (original token count: 98)\nTotal output lines: 50\n\n" +
 *     "line 0\nline 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline…68 tokens truncated…" +
 *     "e 42\nline 43\nline 44\nline 45\nline 46\nline 47\nline 48\nline 49",
 * }]);
 * ```
 */
export function truncateEntries(entries: readonly RenderedEntry[], maxTokens: number): OutputItem[] {
  if (!Number.isInteger(maxTokens) || maxTokens < 0) {
    throw new RangeError(`token budget ${maxTokens} is not a non-negative integer`);
  }
  const mixed = entries.some((e) =>
    e.kind === "anchor" || e.kind === "droppedAudio" ||
    (e.kind === "notice" && (e.counts.images > 0 || e.counts.audio > 0))
  );
  return mixed ? truncateItems(entries, maxTokens) : truncateJoined(entries, maxTokens);
}

/**
 * Codex's middle truncation of one text to `maxTokens` (no header): unchanged when it fits, else the
 * whole characters of its first `floor(B/2)` bytes, `…k tokens truncated…` and the whole characters
 * of its last `B − floor(B/2)` bytes.
 *
 * @param text the text
 * @param maxTokens the budget `T`
 * @returns the truncated text
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { middleTruncate } from "./token_truncation.ts";
 *
 * assert.equal(middleTruncate("d".repeat(100), 2), "dddd…23 tokens truncated…dddd");
 * assert.equal(middleTruncate("abc", 0), "…1 tokens truncated…");
 * ```
 */
export function middleTruncate(text: string, maxTokens: number): string {
  const length = utf8ByteLength(text);
  const budget = 4 * maxTokens;
  if (length <= budget) return text;
  const left = Math.floor(budget / 2);
  const prefix = text.slice(0, utf8Prefix(text, left).units);
  const suffix = text.slice(text.length - utf8Suffix(text, budget - left).units);
  return `${prefix}…${Math.ceil((length - budget) / 4)} tokens truncated…${suffix}`;
}

/**
 * The lines of a text as Rust's `str::lines().count()` gives them: a trailing `\n` starts no new
 * line, and an empty text has none.
 *
 * @param text the text
 * @returns its line count
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { lineCount } from "./token_truncation.ts";
 *
 * assert.equal(lineCount("a\nb\n"), 2);
 * assert.equal(lineCount(""), 0);
 * ```
 */
export function lineCount(text: string): number {
  if (text.length === 0) return 0;
  let lines = 1;
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) lines++;
  return text.endsWith("\n") ? lines - 1 : lines;
}

/** The output being built: text items and notices, adjacent notices merged. */
class Output {
  readonly items: (OutputItem | { notice: NoticeCounts })[] = [];
  #parts: string[] = [];
  #open = false;

  text(piece: string): void {
    if (piece.length === 0) return;
    this.#parts.push(piece);
    this.#open = true;
  }

  item(item: OutputItem): void {
    this.#close();
    this.items.push(item);
  }

  notice(counts: NoticeCounts): void {
    this.#close();
    const last = this.items[this.items.length - 1];
    if (last !== undefined && "notice" in last) last.notice = addCounts(last.notice, counts);
    else this.items.push({ notice: counts });
  }

  finish(): OutputItem[] {
    this.#close();
    return this.items.map((item) =>
      "notice" in item ? { type: "text", text: noticeText(item.notice) } : item
    );
  }

  #close(): void {
    if (!this.#open) return;
    const parts = this.#parts;
    this.items.push({ type: "text", text: parts.length === 1 ? parts[0] : parts.join("") });
    this.#parts = [];
    this.#open = false;
  }
}

/** A window with media: Codex's item-by-item truncation. */
function truncateItems(entries: readonly RenderedEntry[], maxTokens: number): OutputItem[] {
  const out = new Output();
  let remaining = maxTokens;
  let omittedText = 0;
  let omittedAudio = 0;
  const text = (value: string) => {
    if (value.length === 0) return;
    if (remaining === 0) {
      omittedText++;
      return;
    }
    const cost = Math.ceil(utf8ByteLength(value) / 4);
    if (cost <= remaining) {
      out.item({ type: "text", text: value });
      remaining -= cost;
    } else {
      out.item({ type: "text", text: middleTruncate(value, remaining) });
      remaining = 0;
    }
  };
  // Text fragments of one item with nothing between them are one text item.
  let openOwner: number | undefined;
  let parts: string[] = [];
  const flush = () => {
    if (openOwner !== undefined) text(parts.length === 1 ? parts[0] : parts.join(""));
    openOwner = undefined;
    parts = [];
  };
  for (const entry of entries) {
    if (entry.kind === "text") {
      if (openOwner !== entry.owner) flush();
      openOwner = entry.owner;
      parts.push(entry.text);
      continue;
    }
    flush();
    if (entry.kind === "notice") {
      out.notice(entry.counts);
    } else if (entry.kind === "droppedAudio") {
      omittedAudio++;
    } else if (entry.item.type === "audio") {
      const cost = Math.ceil(utf8ByteLength(entry.item.audioUrl) / 4);
      if (cost <= remaining) {
        out.item(entry.item);
        remaining -= cost;
      } else {
        omittedAudio++;
      }
    } else {
      out.item(entry.item);
    }
  }
  flush();
  if (omittedText > 0) out.item({ type: "text", text: `[omitted ${omittedText} text items ...]` });
  if (omittedAudio > 0) out.item({ type: "text", text: `[omitted ${omittedAudio} audio items ...]` });
  return out.finish();
}

/** Where each text fragment of a window lies in the joined text (see {@link joinedLayout}). */
interface JoinedLayout {
  /** Per entry: its content's first byte in the joined text (-1: not a text). */
  starts: number[];
  /** Per entry: the byte after its content. */
  ends: number[];
  /** Per entry: a separator byte (`\n`, between owners) comes before it. */
  separated: boolean[];
  /** The joined text's length in bytes. */
  length: number;
  /** Its lines, as the reference counts them. */
  lines: number;
}

/** Pass 1: where each text fragment lies in the joined text, after a separator between owners. */
function joinedLayout(entries: readonly RenderedEntry[]): JoinedLayout {
  const starts = new Array<number>(entries.length).fill(-1);
  const ends = new Array<number>(entries.length).fill(-1);
  const separated = new Array<boolean>(entries.length).fill(false);
  let length = 0;
  let newlines = 0;
  let previousOwner: number | undefined;
  let trailingNewline = false;
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i];
    if (entry.kind !== "text") continue;
    if (length > 0 && previousOwner !== entry.owner) {
      separated[i] = true;
      length += 1;
      newlines += 1;
      trailingNewline = true;
    }
    starts[i] = length;
    length += utf8ByteLength(entry.text);
    ends[i] = length;
    newlines += countNewlines(entry.text);
    previousOwner = entry.owner;
    if (entry.text.length > 0) trailingNewline = entry.text.endsWith("\n");
  }
  return { starts, ends, separated, length, lines: newlines + 1 - (trailingNewline ? 1 : 0) };
}

/**
 * Pass 2: the cuts, both on character boundaries: `cut` is the first removed byte, `resume` the
 * first byte of the suffix (a separator counts as one character). `length > budget` gives
 * `cut < resume`.
 */
function joinedCuts(
  entries: readonly RenderedEntry[],
  layout: JoinedLayout,
  budget: number,
): { cut: number; resume: number } {
  const left = Math.floor(budget / 2);
  const rightStart = layout.length - (budget - left);
  let cut = -1;
  let resume = layout.length;
  for (let i = 0; i < entries.length; i++) {
    const start = layout.starts[i];
    if (start < 0) continue;
    const end = layout.ends[i];
    const from = layout.separated[i] ? start - 1 : start;
    const text = (entries[i] as { text: string }).text;
    if (cut < 0 && left < end) cut = left < start ? from : start + utf8Prefix(text, left - start).bytes;
    if (rightStart < end) {
      resume = rightStart < start ? from : end - utf8Suffix(text, end - rightStart).bytes;
      break;
    }
  }
  return { cut, resume };
}

/** A window of text and notices only: one joined text, cut in the middle, split at the notices. */
function truncateJoined(entries: readonly RenderedEntry[], maxTokens: number): OutputItem[] {
  const budget = 4 * maxTokens;
  const layout = joinedLayout(entries);
  const { starts, ends, separated, length } = layout;
  if (length <= budget) return mergeEntries(entries);
  // The joined text is not empty here (len > B ≥ 0).
  const { cut, resume } = joinedCuts(entries, layout, budget);
  const marker = `…${Math.ceil((length - budget) / 4)} tokens truncated…`;
  const out = new Output();
  out.text(
    `Warning: truncated output (original token count: ${Math.ceil(length / 4)})\n` +
      `Total output lines: ${layout.lines}\n\n`,
  );
  let marked = false;
  const mark = () => {
    if (marked) return;
    marked = true;
    out.text(marker);
  };
  /** Emits the kept bytes of a piece `text` lying at [from, from + its length) of the joined text. */
  const piece = (text: string, from: number, to: number) => {
    if (to <= cut || from >= resume) return out.text(text);
    if (from < cut) out.text(text.slice(0, utf8Prefix(text, cut - from).units));
    if (to > cut) mark();
    if (to > resume) {
      out.text(from >= resume ? text : text.slice(text.length - utf8Suffix(text, to - resume).units));
    }
  };
  // Notices wait for the next fragment: they stand after its separator, before its text.
  let pending: NoticeCounts[] = [];
  const place = (at: number) => {
    if (pending.length === 0) return;
    if (at > cut) mark();
    for (const counts of pending) out.notice(counts);
    pending = [];
  };
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i];
    if (entry.kind === "notice") {
      pending.push(entry.counts);
      continue;
    }
    if (entry.kind !== "text") continue;
    const start = starts[i];
    if (separated[i]) piece("\n", start - 1, start);
    place(start);
    piece(entry.text, start, ends[i]);
  }
  place(length);
  return out.finish();
}

function countNewlines(text: string): number {
  let count = 0;
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) count++;
  return count;
}

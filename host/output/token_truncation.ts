/**
 * Server-mode rendering and token truncation of an output window (SPEC §8.6 rule 8, §8.7).
 *
 * Input is the collector's rendered entries: text fragments in order, each with the `owner` (pushed
 * item) it came from, and anchors (media items and the omission notice) that are opaque items.
 *
 * Contract of {@link truncateEntries} (§8.7), with byte budget `B = 4·T`:
 * - The logical text `L` is the non-empty fragments in order, with one `\n` separator before a
 *   fragment whose owner differs from the previous non-empty fragment's; anchors do not break the
 *   direct joining of one owner's fragments. All lengths are UTF-8 bytes.
 * - When `len(L) ≤ B` the output is exactly `mergeEntries` of the input (the
 *   collector's own rendering, §8.6 rule 8, which keeps a `text("")` item).
 * - Otherwise the kept text is the longest whole-character prefix of `L` ending at or before byte
 *   `floor(B / 2)` and the whole characters of `L` starting at or after byte `len(L) − (B − floor(B / 2))`;
 *   a character (including a surrogate pair) is never split, so at most `B` text bytes are kept.
 * - Separators and empty fragments are never emitted.
 * - The marker `…{k} tokens truncated…` (`k = ceil((len(L) − B) / 4)`) is emitted exactly once, at
 *   the first removed byte of `L`; every anchor is emitted exactly once, in order, as the same
 *   object. An anchor between two fragments lies before the later fragment's separator, so anchors
 *   in the removed middle come after the marker and before the suffix.
 * - The marker is glued to the text piece emitted immediately before it; otherwise it is a piece
 *   of its own that belongs to the owner of the first removed byte (for a separator: the fragment
 *   after it), so a single text item always gives `header + prefix + marker + suffix` as one item.
 * - A text piece continues the previous output item only when the previous emitted piece is text
 *   of the same owner; anchors always separate items.
 * - The header `Warning: truncated output (original token count: {N})\nTotal output lines: {lines}\n\n`
 *   (`N = ceil(len(L) / 4)`; `lines` = the lines of `L`, a trailing `\n` starting no new line) is
 *   prepended to the first text item built from text pieces (there is always one: the marker's).
 *   Anchors are never modified, so a notice that comes first stays exactly as the collector wrote
 *   it (§8.6 rule 5).
 * - A budget that is not a non-negative integer is a `RangeError`.
 * - Each fragment is measured on its own; the collector splits fragments at character boundaries,
 *   so this equals measuring `L`. Work is linear in the text length; no per-byte arrays are built.
 *
 * @module
 */

import { mergeEntries, type OutputItem, type RenderedEntry } from "./output_collector.ts";
import { utf8ByteLength, utf8Prefix, utf8Suffix } from "../../proto/bytes.ts";

// Re-exported so that this module's public signatures are documented in full (`deno doc --lint`).
export type { OutputItem, RenderedEntry };

/**
 * Applies Server-mode token truncation (SPEC §8.7) to rendered entries with a budget of `maxTokens`.
 *
 * Under budget the result equals the collector's `mergeEntries`; over budget the logical text is cut in the
 * middle at whole characters, a `…{k} tokens truncated…` marker stands at the first removed byte,
 * every anchor is kept in order, and a warning header is prepended to the first text item.
 *
 * @param entries the rendered entries, in order
 * @param maxTokens the token budget `T` (bytes budget `4·T`)
 * @returns the output items; anchors are the same objects
 * @throws {RangeError} when `maxTokens` is not a non-negative integer
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { truncateEntries } from "./token_truncation.ts";
 *
 * const notice = { type: "text", text: "[notice]" } as const;
 * const items = truncateEntries([
 *   { kind: "text", text: "Script error:\nbegin:XXXXXXXXXX", owner: 1 },
 *   { kind: "anchor", item: notice },
 *   { kind: "text", text: "XXXXXXXXXX:end", owner: 1 },
 * ], 5);
 * assert.deepEqual(items, [
 *   {
 *     type: "text",
 *     text: "Warning: truncated output (original token count: 11)\nTotal output lines: 2\n\n" +
 *       "Script err…6 tokens truncated…",
 *   },
 *   notice,
 *   { type: "text", text: "XXXXXX:end" },
 * ]);
 * assert.equal(items[1], notice);
 * ```
 */
export function truncateEntries(entries: readonly RenderedEntry[], maxTokens: number): OutputItem[] {
  if (!Number.isInteger(maxTokens) || maxTokens < 0) {
    throw new RangeError(`token budget ${maxTokens} is not a non-negative integer`);
  }
  const budget = 4 * maxTokens;

  // Pass 1: where each non-empty fragment lies in L: [starts[i], ends[i]), after a separator byte
  // when separated[i]. Other entries keep start −1.
  const starts = new Array<number>(entries.length).fill(-1);
  const ends = new Array<number>(entries.length).fill(-1);
  const separated = new Array<boolean>(entries.length).fill(false);
  let length = 0;
  let newlines = 0;
  let previousOwner: number | undefined;
  let lastText = "";
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i];
    if (entry.kind !== "text" || entry.text.length === 0) continue;
    if (previousOwner !== undefined && previousOwner !== entry.owner) {
      separated[i] = true;
      length += 1;
      newlines += 1;
    }
    starts[i] = length;
    length += utf8ByteLength(entry.text);
    ends[i] = length;
    newlines += countNewlines(entry.text);
    previousOwner = entry.owner;
    lastText = entry.text;
  }
  if (length <= budget) return mergeEntries(entries);

  const lines = newlines + 1 - (lastText.endsWith("\n") ? 1 : 0);
  const left = Math.floor(budget / 2);
  const rightStart = length - (budget - left);
  // Both cuts fall on character boundaries of L: `cut` is the first removed byte, `resume` the first
  // byte of the suffix (a separator counts as one character). len(L) > B gives left < rightStart,
  // hence cut < resume, and cut < len(L), so some fragment (or its separator) holds the cut.
  let cut = -1;
  let resume = length;
  for (let i = 0; i < entries.length; i++) {
    const start = starts[i];
    if (start < 0) continue;
    const end = ends[i];
    const from = separated[i] ? start - 1 : start;
    const text = (entries[i] as { text: string }).text;
    if (cut < 0 && left < end) cut = left < start ? from : start + utf8Prefix(text, left - start).bytes;
    if (rightStart < end) {
      resume = rightStart < start ? from : end - utf8Suffix(text, end - rightStart).bytes;
      break;
    }
  }

  const marker = `…${Math.ceil((length - budget) / 4)} tokens truncated…`;
  const out = new Grouper(
    `Warning: truncated output (original token count: ${Math.ceil(length / 4)})\n` +
      `Total output lines: ${lines}\n\n`,
  );
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i];
    if (entry.kind === "anchor") {
      out.anchor(entry.item);
      continue;
    }
    const start = starts[i];
    if (start < 0) continue;
    const end = ends[i];
    const from = separated[i] ? start - 1 : start;
    const { text, owner } = entry;
    if (end <= cut || from >= resume) {
      out.text(text, owner);
      continue;
    }
    if (start < cut) out.text(text.slice(0, utf8Prefix(text, cut - start).units), owner);
    if (from <= cut) out.marker(marker, owner);
    if (resume < end) {
      out.text(
        resume <= start ? text : text.slice(text.length - utf8Suffix(text, end - resume).units),
        owner,
      );
    }
  }
  return out.finish();
}

/** Groups emitted pieces into output items (§8.7 step 5) and prepends the header (step 6). */
class Grouper {
  readonly #items: OutputItem[] = [];
  #header: string | undefined;
  #parts: string[] = [];
  /** Owner of the open text item; the open item exists iff the last emitted piece was text. */
  #owner = 0;

  constructor(header: string) {
    this.#header = header;
  }

  text(piece: string, owner: number): void {
    if (piece.length === 0) return;
    if (this.#parts.length === 0 || this.#owner !== owner) this.#open(owner);
    this.#parts.push(piece);
  }

  /** `owner` is the owner of the first removed byte, used when no text piece precedes the marker. */
  marker(marker: string, owner: number): void {
    if (this.#parts.length === 0) this.#open(owner);
    this.#parts.push(marker);
  }

  anchor(item: OutputItem): void {
    this.#close();
    this.#items.push(item);
  }

  finish(): OutputItem[] {
    this.#close();
    return this.#items;
  }

  #open(owner: number): void {
    this.#close();
    this.#owner = owner;
    if (this.#header !== undefined) {
      this.#parts.push(this.#header);
      this.#header = undefined;
    }
  }

  #close(): void {
    if (this.#parts.length > 0) this.#items.push(textItem(this.#parts));
    this.#parts = [];
  }
}

function textItem(parts: string[]): OutputItem {
  return { type: "text", text: parts.length === 1 ? parts[0] : parts.join("") };
}

function countNewlines(text: string): number {
  let count = 0;
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) count++;
  return count;
}

/**
 * Byte helpers and size constants of the wire, shared by the host, the session runtime and the
 * client: UTF-8 lengths and character-boundary cuts, protobuf varint sizes, and the fixed sizes of
 * SPEC §2.8 and §8.6.
 *
 * @module
 */
import { Buffer } from "node:buffer";

/** One mebibyte. */
export const MIB = 1_048_576;
/** The largest timer delay and the largest int32: 2^31 − 1. */
export const MAX_INT32 = 2_147_483_647;

/** `MAX_TEXT` of SPEC §8.6. */
export const MAX_TEXT_BYTES = 1_048_576;
/** `MAX_MEDIA` of SPEC §8.6. */
export const MAX_MEDIA_BYTES = 16_777_216;
/** `maxMessageBytes` of SPEC §2.8. */
export const MAX_MESSAGE_BYTES = 67_108_864;

/**
 * The bytes of a protobuf varint.
 *
 * @param n a non-negative integer
 * @returns its varint length (1…10)
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { varintBytes } from "./bytes.ts";
 *
 * assert.deepEqual([0, 127, 128, 16_384].map(varintBytes), [1, 1, 2, 3]);
 * ```
 */
export function varintBytes(n: number): number {
  let bytes = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    bytes++;
  }
  return bytes;
}

/** A length-delimited field of `n` payload bytes with a one-byte tag. */
export function fieldBytes(n: number): number {
  return 1 + varintBytes(n) + n;
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
 * import { utf8ByteLength } from "./bytes.ts";
 *
 * assert.equal(utf8ByteLength("aé🦀"), 7);
 * ```
 */
export function utf8ByteLength(s: string): number {
  if (s.length < REMEMBER_FROM) return Buffer.byteLength(s, "utf8");
  if (s === remembered.text) return remembered.bytes;
  // Node's UTF-8 length also counts a lone surrogate as its 3-byte replacement, and it is ~80×
  // faster than a loop in JavaScript.
  const bytes = Buffer.byteLength(s, "utf8");
  remembered = { text: s, bytes };
  return bytes;
}

/**
 * Texts of this many UTF-16 units or more have their UTF-8 length remembered (the last one only):
 * a cell's long text is measured by its channel, its window and the budget in turn (a 16 MiB text:
 * ~2–5 ms each), and the frame decoder knows it already ({@link rememberUtf8}).
 */
const REMEMBER_FROM = 4_096;
let remembered: { text: string; bytes: number; utf8?: Uint8Array } = { text: "", bytes: 0 };

/**
 * Records a long text decoded from exactly these well-formed UTF-8 bytes, so that
 * {@link utf8ByteLength} of it costs nothing and an encoder can copy the bytes instead of encoding
 * the text again ({@link rememberedUtf8}). Only the last such text is kept (with its bytes: one
 * frame's text at most stays referenced after its outcome went out).
 *
 * @param text the decoded text
 * @param utf8 the well-formed UTF-8 it was decoded from
 */
export function rememberUtf8(text: string, utf8: Uint8Array): void {
  if (text.length >= REMEMBER_FROM) remembered = { text, bytes: utf8.length, utf8 };
}

/**
 * The UTF-8 bytes of a text that {@link rememberUtf8} recorded last, if it is that text.
 *
 * @param text a text about to be encoded
 * @returns its UTF-8 bytes, or `undefined`
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { rememberedUtf8, rememberUtf8 } from "./bytes.ts";
 *
 * const text = "x".repeat(5_000);
 * const utf8 = new TextEncoder().encode(text);
 * rememberUtf8(text, utf8);
 * assert.equal(rememberedUtf8(text), utf8);
 * assert.equal(rememberedUtf8("y".repeat(5_000)), undefined);
 * ```
 */
export function rememberedUtf8(text: string): Uint8Array | undefined {
  return text.length >= REMEMBER_FROM && text === remembered.text ? remembered.utf8 : undefined;
}

function isLow(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/**
 * Bytes and code units of the character starting at `i`.
 *
 * @param s the string
 * @param i a code-unit index inside it
 * @returns the character's UTF-8 bytes and UTF-16 code units
 */
export function utf8CharAt(s: string, i: number): [bytes: number, units: number] {
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
 * import { utf8Prefix } from "./bytes.ts";
 *
 * assert.deepEqual(utf8Prefix("a🦀b", 4), { units: 1, bytes: 1 });
 * ```
 */
export function utf8Prefix(s: string, maxBytes: number): { units: number; bytes: number } {
  let units = 0;
  let bytes = 0;
  while (units < s.length) {
    const [b, u] = utf8CharAt(s, units);
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
 * import { utf8Suffix } from "./bytes.ts";
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

/** A character `JSON.stringify` escapes: `"`, `\`, a control character, or a surrogate to check. */
// deno-lint-ignore no-control-regex
const JSON_ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * The bytes `JSON.stringify` adds to a string's UTF-8 length, quotes left out: 1 for `"`, `\` and
 * the control characters it writes as two-character escapes (`\b`, `\t`, `\n`, `\f`, `\r`), 5 for
 * the other control characters (`\u00XX`), and 3 for a lone surrogate (`\uDXXX` instead of its
 * 3-byte replacement). A JSON door sizes its frame with it without holding the text.
 *
 * @param s the string
 * @returns `utf8(JSON.stringify(s)) - utf8(s) - 2`
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { jsonEscapeExtraBytes } from "./bytes.ts";
 *
 * assert.equal(jsonEscapeExtraBytes('a"b\n\u0001🦀'), 1 + 1 + 5);
 * ```
 */
export function jsonEscapeExtraBytes(s: string): number {
  const first = s.search(JSON_ESCAPED);
  if (first < 0) return 0;
  let extra = 0;
  for (let i = first; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c !== 0x22 && c !== 0x5c && (c < 0xd800 || c > 0xdfff)) continue;
    if (c === 0x22 || c === 0x5c || c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d) {
      extra += 1;
    } else if (c < 0x20) extra += 5;
    else if (c <= 0xdbff && i + 1 < s.length && isLow(s.charCodeAt(i + 1))) i++;
    else extra += 3;
  }
  return extra;
}

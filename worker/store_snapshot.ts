/**
 * The stored values a cell starts from (SPEC §6 rule 2: "SHOULD reach the cell without being
 * copied into its heap … `load` decodes only the value asked for"), as the runtime keeps them and
 * hands them to its cells.
 *
 * - {@link StoreReplica} is the runtime's replica of the session's map, kept by the host's
 *   `StoreUpdate`s. A cell start gets a {@link StoreStart}: an immutable *base* — a hash table of
 *   keys and JSON texts in one `SharedArrayBuffer`, built once and shared by every cell that starts
 *   while it is current, never copied — plus the entries changed since it was built (the
 *   *overlay*, copied), and the map's size in UTF-8 bytes. The base is rebuilt when the overlay
 *   grows past an eighth of the map (and {@link SMALL_OVERLAY} entries): a million keys cost a
 *   cell start nothing but the overlay, where they cost a copy of the whole map per cell before.
 * - {@link SnapshotReader} looks a key up in a base inside the cell worker and decodes only that
 *   value.
 *
 * Layout of a base (native-endian `Int32` and `Uint16` words): `count`, `tableSize`, then the open
 * addressing table (`tableSize` words: entry index + 1, 0 = empty; FNV-1a of the key's UTF-16 code
 * units, linear probing), then per entry its first code unit, its key's length and its value's
 * length, then the code units of every key and value.
 *
 * @module
 */
import { utf8ByteLength } from "../proto/bytes.ts";

/** A map this small is handed over whole, with no base. */
export const SMALL_OVERLAY = 4_096;

/** What a cell start carries of the stored values (fields of `CellStart`). */
export interface StoreStart {
  /** Entries not in the base, or changed since it was built (the whole map when there is no base). */
  store: [string, string][];
  /** The shared base, if any (see the module doc). */
  storeBase?: SharedArrayBuffer;
  /** UTF-8 bytes of keys plus JSON texts of the whole map. */
  storeBytes: number;
}

const HEADER_WORDS = 2;

function hash(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * Builds a base from `entries`.
 *
 * @param entries key → JSON text
 * @returns the shared buffer
 */
export function buildSnapshot(entries: ReadonlyMap<string, string>): SharedArrayBuffer {
  const count = entries.size;
  let units = 0;
  for (const [key, value] of entries) units += key.length + value.length;
  let tableSize = 2;
  while (tableSize < count * 2) tableSize *= 2;
  const wordsBytes = 4 * (HEADER_WORDS + tableSize + 3 * count);
  const buffer = new SharedArrayBuffer(wordsBytes + 2 * units);
  const words = new Int32Array(buffer, 0, HEADER_WORDS + tableSize + 3 * count);
  const chars = new Uint16Array(buffer, wordsBytes, units);
  words[0] = count;
  words[1] = tableSize;
  const mask = tableSize - 1;
  const table = HEADER_WORDS;
  const index = HEADER_WORDS + tableSize;
  let at = 0;
  let i = 0;
  for (const [key, value] of entries) {
    words[index + 3 * i] = at;
    words[index + 3 * i + 1] = key.length;
    words[index + 3 * i + 2] = value.length;
    for (let j = 0; j < key.length; j++) chars[at++] = key.charCodeAt(j);
    for (let j = 0; j < value.length; j++) chars[at++] = value.charCodeAt(j);
    let slot = hash(key) & mask;
    while (words[table + slot] !== 0) slot = (slot + 1) & mask;
    words[table + slot] = ++i;
  }
  return buffer;
}

/** Reads a base inside a cell worker: one lookup, one value decoded. */
export class SnapshotReader {
  readonly #words: Int32Array;
  readonly #chars: Uint16Array;
  readonly #mask: number;
  readonly #index: number;

  /**
   * @param buffer a base built by {@link buildSnapshot}
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { buildSnapshot, SnapshotReader } from "./store_snapshot.ts";
   * const reader = new SnapshotReader(buildSnapshot(new Map([["a", "1"], ["é", '"x"']])));
   * assert.deepEqual([reader.get("a"), reader.get("é"), reader.get("b")], ["1", '"x"', undefined]);
   * ```
   */
  constructor(buffer: SharedArrayBuffer) {
    const head = new Int32Array(buffer, 0, HEADER_WORDS);
    const count = head[0];
    const tableSize = head[1];
    const wordsLength = HEADER_WORDS + tableSize + 3 * count;
    this.#words = new Int32Array(buffer, 0, wordsLength);
    this.#chars = new Uint16Array(buffer, 4 * wordsLength);
    this.#mask = tableSize - 1;
    this.#index = HEADER_WORDS + tableSize;
  }

  /** The JSON text stored under `key`, or `undefined`. */
  get(key: string): string | undefined {
    const words = this.#words;
    const chars = this.#chars;
    const length = key.length;
    for (let slot = hash(key) & this.#mask;; slot = (slot + 1) & this.#mask) {
      const entry = words[HEADER_WORDS + slot];
      if (entry === 0) return undefined;
      const at = this.#index + 3 * (entry - 1);
      if (words[at + 1] !== length) continue;
      const start = words[at];
      let same = true;
      for (let j = 0; j < length; j++) {
        if (chars[start + j] !== key.charCodeAt(j)) {
          same = false;
          break;
        }
      }
      if (same) return decode(chars, start + length, words[at + 2]);
    }
  }
}

/** Code units per `String.fromCharCode` call (its arguments are bounded). */
const DECODE_CHUNK = 8_192;

function decode(chars: Uint16Array, start: number, length: number): string {
  if (length <= DECODE_CHUNK) {
    return String.fromCharCode.apply(null, chars.subarray(start, start + length) as unknown as number[]);
  }
  const parts: string[] = [];
  for (let at = start; at < start + length; at += DECODE_CHUNK) {
    const end = Math.min(at + DECODE_CHUNK, start + length);
    parts.push(String.fromCharCode.apply(null, chars.subarray(at, end) as unknown as number[]));
  }
  return parts.join("");
}

/** The runtime's replica of a session's stored values, and what each cell start gets of it. */
export class StoreReplica {
  readonly #values = new Map<string, string>();
  #bytes = 0;
  #base: SharedArrayBuffer | undefined;
  /** Entries set since the base was built (all of them while there is none). */
  readonly #overlay = new Map<string, string>();

  /** Applies one `StoreUpdate` frame (a `reset` one empties the replica first). */
  update(reset: boolean, entries: readonly { key: string; valueJson?: string }[]): void {
    if (reset) {
      this.#values.clear();
      this.#overlay.clear();
      this.#base = undefined;
      this.#bytes = 0;
    }
    const values = this.#values;
    for (const { key, valueJson } of entries) {
      const value = valueJson ?? "null";
      const old = values.get(key);
      const keyBytes = utf8ByteLength(key);
      if (old !== undefined) this.#bytes -= keyBytes + utf8ByteLength(old);
      this.#bytes += keyBytes + utf8ByteLength(value);
      values.set(key, value);
      this.#overlay.set(key, value);
    }
  }

  /**
   * What the next cell start carries: the base, rebuilt first when the overlay has grown past
   * its bound, the overlay and the size.
   */
  start(): StoreStart {
    const overlay = this.#overlay;
    if (overlay.size > SMALL_OVERLAY && overlay.size * 8 > this.#values.size) {
      this.#base = buildSnapshot(this.#values);
      overlay.clear();
    }
    const start: StoreStart = { store: [...overlay], storeBytes: this.#bytes };
    if (this.#base !== undefined) start.storeBase = this.#base;
    return start;
  }
}

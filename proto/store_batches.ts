/**
 * Stored values cross the frame channel in batches (SPEC §9.4: "batched so that every frame
 * fits"): a cell's write set as `StoredWrites` events, the host's updates of the runtime's replica
 * as `StoreUpdate` frames. A batch holds entries up to about {@link STORE_BATCH_UNITS} UTF-16 code
 * units of keys and values (at most 3 UTF-8 bytes each), so a million small keys cross in a few
 * hundred frames, and no side builds or decodes the whole set in one piece. An entry larger than
 * the bound is a batch of its own (it fits a frame: the stored-value cap is below the frame limit).
 *
 * @module
 */

/** The UTF-16 code units of keys and values a batch holds before it is closed (~64–192 KiB). */
export const STORE_BATCH_UNITS = 65_536;

/**
 * The end (exclusive) of the batch of `entries` that starts at `from`.
 *
 * @param entries key → JSON text pairs
 * @param from the batch's first index (< `entries.length`)
 * @param maxUnits the batch bound, UTF-16 code units (default {@link STORE_BATCH_UNITS})
 * @returns the index after the batch's last entry (> `from`)
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { storeBatchEnd } from "./store_batches.ts";
 * const entries: [string, string][] = [["a", "1"], ["b", "22"], ["c", "333"]];
 * assert.equal(storeBatchEnd(entries, 0, 4), 2);
 * assert.equal(storeBatchEnd(entries, 2, 1), 3);
 * ```
 */
export function storeBatchEnd(
  entries: readonly (readonly [string, string])[],
  from: number,
  maxUnits: number = STORE_BATCH_UNITS,
): number {
  let units = 0;
  let end = from;
  while (end < entries.length && (end === from || units < maxUnits)) {
    const [key, value] = entries[end++];
    units += key.length + value.length;
  }
  return end;
}

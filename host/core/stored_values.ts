/**
 * A session's stored values (SPEC §6): the host's authoritative map, its size against
 * `maxStoredValueBytes`, and the version the runtime's replica is kept at.
 *
 * - A cell's writes are committed with its completion, all or none: a merge that would pass the cap
 *   is refused as a whole (the completion then carries {@link StoredValues.check}'s text).
 * - The values count against the host's memory budget (`hostBufferedBytes`, the session's share):
 *   a merge that grows them past what the budget grants is refused the same way, with
 *   {@link budgetRefusal}'s text; a value of {@link BYTES_FROM} bytes or more is held as UTF-8 bytes.
 * - Each applied commit bumps the version by one and yields the `StoreUpdate` that brings the
 *   runtime's replica to it; a replacement runtime gets the whole map as one `reset` update.
 *
 * @module
 */
import { utf8ByteLength } from "../../proto/bytes.ts";
import type { ByteBudget } from "../output/output_items.ts";

/** Values of this many UTF-16 units or more are held as UTF-8 bytes (half the memory as two-byte strings). */
export const BYTES_FROM = 1_024;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The refusal text of a merge the host's memory budget does not grant.
 *
 * @param total the budget (`hostBufferedBytes`)
 * @returns the text
 */
export function budgetRefusal(total: number): string {
  return `stored values exceed the host's memory budget: the host holds at most ${total} bytes of unread output and stored values, shared by its sessions`;
}

/** A `StoreUpdate` frame's body. */
export interface StoreUpdate {
  version: number;
  reset?: true;
  entries: { key: string; valueJson: string }[];
}

/** A cell's writes, checked against the cap (see {@link StoredValues.check}). */
export interface CheckedWrites {
  /** The cap's refusal text, when the merge would pass it. */
  refused?: string;
  /** Applies the writes (a no-op when refused or empty); returns the update for the runtime, if any. */
  apply(): StoreUpdate | undefined;
}

/** The authoritative stored values of one session. */
export class StoredValues {
  #values = new Map<string, string | Uint8Array>();
  #bytes = 0;
  #version = 0;
  readonly #maxBytes: number;
  readonly #budget: ByteBudget | undefined;

  /**
   * @param maxBytes `maxStoredValueBytes`: keys and values, UTF-8
   * @param budget the session's share of the host's memory budget; absent: not counted
   */
  constructor(maxBytes: number, budget?: ByteBudget) {
    this.#maxBytes = maxBytes;
    this.#budget = budget;
  }

  /** The version of the last applied commit (0 before any). */
  get version(): number {
    return this.#version;
  }

  /** The whole map as one `reset` update for a replacement runtime, or `undefined` when empty. */
  replica(): StoreUpdate | undefined {
    if (this.#values.size === 0) return undefined;
    const entries = [...this.#values].map(([key, value]) => ({ key, valueJson: textOf(value) }));
    return { version: this.#version, reset: true, entries };
  }

  /**
   * Checks a cell's writes against the cap, to be applied with its completion.
   *
   * @param writes the cell's writes, key → value JSON
   * @returns the refusal text if any, and `apply`
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { StoredValues } from "./stored_values.ts";
   * const store = new StoredValues(10);
   * assert.equal(store.check(new Map([["k", "12345678901"]])).refused, "stored values exceed the 10-byte session limit");
   * assert.deepEqual(store.check(new Map([["k", "1"]])).apply(), { version: 1, entries: [{ key: "k", valueJson: "1" }] });
   * ```
   */
  check(writes: ReadonlyMap<string, string>): CheckedWrites {
    let size = this.#bytes;
    for (const [key, value] of writes) {
      const old = this.#values.get(key);
      if (old !== undefined) size -= utf8ByteLength(key) + bytesOf(old);
      size += utf8ByteLength(key) + utf8ByteLength(value);
    }
    const growth = size - this.#bytes;
    const refused = size > this.#maxBytes
      ? `stored values exceed the ${this.#maxBytes}-byte session limit`
      : this.#budget && !this.#budget.fits(growth)
      ? budgetRefusal(this.#budget.total)
      : undefined;
    return {
      refused,
      apply: () => {
        if (refused !== undefined || writes.size === 0) return undefined;
        for (const [key, value] of writes) {
          this.#values.set(key, value.length >= BYTES_FROM ? encoder.encode(value) : value);
        }
        if (growth > 0) this.#budget?.charge(growth);
        else this.#budget?.release(-growth);
        this.#bytes = size;
        this.#version++;
        return {
          version: this.#version,
          entries: [...writes].map(([key, valueJson]) => ({ key, valueJson })),
        };
      },
    };
  }
}

function bytesOf(value: string | Uint8Array): number {
  return typeof value === "string" ? utf8ByteLength(value) : value.byteLength;
}

function textOf(value: string | Uint8Array): string {
  return typeof value === "string" ? value : decoder.decode(value);
}

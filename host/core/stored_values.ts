/**
 * A session's stored values (SPEC §6): the host's authoritative map, its size against
 * `maxStoredValueBytes`, and the version the runtime's replica is kept at.
 *
 * - A cell's writes are committed with its completion, all or none: a merge that would pass the cap
 *   is refused as a whole (the completion then carries {@link StoredValues.check}'s text).
 * - Each applied commit bumps the version by one and yields the `StoreUpdate` that brings the
 *   runtime's replica to it; a replacement runtime gets the whole map as one `reset` update.
 *
 * @module
 */
import { utf8ByteLength } from "../../proto/bytes.ts";

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
  #values = new Map<string, string>();
  #bytes = 0;
  #version = 0;
  readonly #maxBytes: number;

  /** @param maxBytes `maxStoredValueBytes`: keys and values, UTF-8 */
  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** The version of the last applied commit (0 before any). */
  get version(): number {
    return this.#version;
  }

  /** The whole map as one `reset` update for a replacement runtime, or `undefined` when empty. */
  replica(): StoreUpdate | undefined {
    if (this.#values.size === 0) return undefined;
    const entries = [...this.#values].map(([key, valueJson]) => ({ key, valueJson }));
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
      if (old !== undefined) size -= utf8ByteLength(key) + utf8ByteLength(old);
      size += utf8ByteLength(key) + utf8ByteLength(value);
    }
    const refused = size > this.#maxBytes
      ? `stored values exceed the ${this.#maxBytes}-byte session limit`
      : undefined;
    return {
      refused,
      apply: () => {
        if (refused !== undefined || writes.size === 0) return undefined;
        for (const [key, value] of writes) this.#values.set(key, value);
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

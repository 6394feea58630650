/**
 * A session's stored values (SPEC §6): the host's authoritative map, its size against
 * `maxStoredValueBytes`, and the updates that keep the runtime's replica current.
 *
 * - A cell's writes are committed with its completion, all or none: a merge that would pass the cap
 *   is refused as a whole (the completion then carries the cap's text).
 * - The values count against the host's memory budget (`hostBufferedBytes`, the session's share):
 *   a merge that grows them past what the budget grants is refused the same way, with
 *   {@link budgetRefusal}'s text; a value of {@link BYTES_FROM} bytes or more is held as UTF-8 bytes.
 * - Each applied commit bumps the version by one and sends the `StoreUpdate`s that bring the
 *   runtime's replica to it; a replacement runtime gets the whole map as `reset` updates. Updates
 *   are batched (`proto/store_batches.ts`), so every frame fits and none is large.
 * - Commits and replicas run one at a time, in call order (the session store lock of SPEC §4.12
 *   A5). A small one on an idle store runs at once, in the caller's turn; a large one (over
 *   {@link SYNC_ENTRIES} entries) runs in time slices (`proto/time_slice.ts`), so that a million
 *   keys never block the host's event loop for more than a slice. {@link StoredValues.settling}
 *   says when the work in progress is done: a `StartCell` waits for it, so a cell started after a
 *   commit sees its writes.
 *
 * @module
 */
import { utf8ByteLength } from "../../proto/bytes.ts";
import { STORE_BATCH_UNITS } from "../../proto/store_batches.ts";
import { TimeSlice } from "../../proto/time_slice.ts";
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

/** Where updates go: the session's runtime (each call one frame, sent in call order). */
export type SendUpdate = (update: StoreUpdate) => void;

/**
 * The completion's side of a commit: told the cap's refusal text (if any), it commits the
 * completion and says whether the writes are to be applied (false: terminated, or refused).
 */
export type DecideCommit = (refused: string | undefined) => boolean;

/** Write sets (and maps, for a replica) up to this many entries are handled at once when idle. */
export const SYNC_ENTRIES = 4_096;

/** Steps between two looks at the clock in a sliced loop. */
const STEPS_PER_LOOK = 512;

/** The authoritative stored values of one session. */
export class StoredValues {
  #values = new Map<string, string | Uint8Array>();
  #bytes = 0;
  #version = 0;
  readonly #maxBytes: number;
  readonly #budget: ByteBudget | undefined;
  /** The last queued task's end (errors swallowed); `undefined` when idle. */
  #tail: Promise<void> | undefined;
  #queued = 0;

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

  /** Resolves once the commits and replicas in progress are done; `undefined` when none is. */
  get settling(): Promise<void> | undefined {
    return this.#tail;
  }

  /**
   * Sends the whole map as `reset` updates for a replacement runtime (nothing when empty), after
   * the work in progress.
   *
   * @param send where the updates go
   */
  sendReplica(send: SendUpdate): void {
    if (this.#tail === undefined && this.#values.size <= SYNC_ENTRIES) {
      this.#sendReplica(send, undefined);
      return;
    }
    void this.#serial(async () => await this.#sendReplica(send, new TimeSlice()));
  }

  /**
   * Commits a cell's writes with its completion: checks them against the cap, lets `decide`
   * commit the completion, then applies them and sends the updates.
   *
   * @param writes the cell's writes, key → value JSON (not changed until this is done)
   * @param decide commits the completion; returns whether to apply the writes
   * @param send where the updates go
   * @returns `undefined` when all is done already, else the promise of its end
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { StoredValues, type StoreUpdate } from "./stored_values.ts";
   * const store = new StoredValues(10);
   * const sent: StoreUpdate[] = [];
   * let refusal: string | undefined;
   * store.commit(new Map([["k", "12345678901"]]), (refused) => (refusal = refused, true), (u) => sent.push(u));
   * assert.equal(refusal, "stored values exceed the 10-byte session limit");
   * store.commit(new Map([["k", "1"]]), () => true, (u) => sent.push(u));
   * assert.deepEqual(sent, [{ version: 1, entries: [{ key: "k", valueJson: "1" }] }]);
   * ```
   */
  commit(
    writes: ReadonlyMap<string, string>,
    decide: DecideCommit,
    send: SendUpdate,
  ): Promise<void> | undefined {
    if (this.#tail === undefined && writes.size <= SYNC_ENTRIES) {
      const size = this.#sizeAfter(writes, undefined) as number;
      this.#decideAndApply(writes, size, decide, send, undefined);
      return undefined;
    }
    return this.#serial(async () => {
      const slice = new TimeSlice();
      const size = await this.#sizeAfter(writes, slice);
      await this.#decideAndApply(writes, size, decide, send, slice);
    });
  }

  /** Runs `task` after every task queued before it. */
  #serial(task: () => Promise<void>): Promise<void> {
    const run = (this.#tail ?? Promise.resolve()).then(task);
    this.#queued++;
    const tail = run.catch(() => {}).finally(() => {
      if (--this.#queued === 0) this.#tail = undefined;
    });
    this.#tail = tail;
    return run;
  }

  /** The map's size after merging `writes`; sliced when `slice` is given. */
  #sizeAfter(writes: ReadonlyMap<string, string>, slice: TimeSlice | undefined): number | Promise<number> {
    const values = this.#values;
    let size = this.#bytes;
    const iterator = writes.entries();
    const step = (): number | Promise<number> => {
      for (let n = 0;; n++) {
        if (slice !== undefined && n === STEPS_PER_LOOK) {
          if (slice.over) return slice.next().then(step);
          n = 0;
        }
        const next = iterator.next();
        if (next.done) return size;
        const [key, value] = next.value;
        const old = values.get(key);
        const keyBytes = utf8ByteLength(key);
        if (old !== undefined) size -= keyBytes + bytesOf(old);
        size += keyBytes + utf8ByteLength(value);
      }
    };
    return step();
  }

  #decideAndApply(
    writes: ReadonlyMap<string, string>,
    size: number,
    decide: DecideCommit,
    send: SendUpdate,
    slice: TimeSlice | undefined,
  ): void | Promise<void> {
    const growth = size - this.#bytes;
    const refused = size > this.#maxBytes
      ? `stored values exceed the ${this.#maxBytes}-byte session limit`
      : this.#budget && !this.#budget.fits(growth)
      ? budgetRefusal(this.#budget.total)
      : undefined;
    if (!decide(refused) || refused !== undefined || writes.size === 0) return;
    if (growth > 0) this.#budget?.charge(growth);
    else this.#budget?.release(-growth);
    this.#bytes = size;
    const version = ++this.#version;
    const values = this.#values;
    const set = (key: string, value: string) => {
      values.set(key, value.length >= BYTES_FROM ? encoder.encode(value) : value);
    };
    return this.#batched(writes.entries(), set, send, { version }, slice);
  }

  #sendReplica(send: SendUpdate, slice: TimeSlice | undefined): void | Promise<void> {
    if (this.#values.size === 0) return;
    return this.#batched(
      texts(this.#values),
      () => {},
      send,
      { version: this.#version, reset: true },
      slice,
    );
  }

  /**
   * Sends `entries` as updates of at most {@link STORE_BATCH_UNITS} code units each (`head`
   * on the first, the version on all), calling `each` per entry; sliced when `slice` is given.
   */
  #batched(
    entries: Iterator<[string, string]>,
    each: (key: string, value: string) => void,
    send: SendUpdate,
    head: { version: number; reset?: true },
    slice: TimeSlice | undefined,
  ): void | Promise<void> {
    let batch: StoreUpdate["entries"] = [];
    let units = 0;
    let first = true;
    const flush = () => {
      send(
        first && head.reset
          ? { version: head.version, reset: true, entries: batch }
          : { version: head.version, entries: batch },
      );
      first = false;
      batch = [];
      units = 0;
    };
    const step = (): void | Promise<void> => {
      for (let n = 0;; n++) {
        if (slice !== undefined && n === STEPS_PER_LOOK) {
          if (slice.over) return slice.next().then(step);
          n = 0;
        }
        const next = entries.next();
        if (next.done) break;
        const [key, valueJson] = next.value;
        each(key, valueJson);
        batch.push({ key, valueJson });
        units += key.length + valueJson.length;
        if (units >= STORE_BATCH_UNITS) {
          flush();
          // Encoding a batch is the costly part: look at the clock after each.
          if (slice?.over) return slice.next().then(step);
        }
      }
      if (batch.length > 0) flush();
    };
    return step();
  }
}

function bytesOf(value: string | Uint8Array): number {
  return typeof value === "string" ? utf8ByteLength(value) : value.byteLength;
}

function* texts(values: Map<string, string | Uint8Array>): Generator<[string, string]> {
  for (const [key, value] of values) yield [key, typeof value === "string" ? value : decoder.decode(value)];
}

/**
 * Try-acquired counting permits (SPEC §9.5): exhaustion answers at once and never queues.
 *
 * @module
 */

/** A released-once permit. */
export interface Permit extends Disposable {
  /** Releases the permit; idempotent. */
  release(): void;
}

/** A counting semaphore whose acquisition never waits. */
export class Permits {
  #available: number;
  #capacity: number;

  /** @param capacity how many permits exist */
  constructor(capacity: number) {
    this.#capacity = capacity;
    this.#available = capacity;
  }

  /** Permits currently held. */
  get inUse(): number {
    return this.#capacity - this.#available;
  }

  /**
   * Takes a permit if one is free.
   *
   * @returns the permit, or `undefined` when none is free
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * const p = new Permits(1);
   * const a = p.tryAcquire();
   * assert.equal(p.tryAcquire(), undefined);
   * a?.release();
   * assert.ok(p.tryAcquire());
   * ```
   */
  tryAcquire(): Permit | undefined {
    if (this.#available <= 0) return undefined;
    this.#available--;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.#available++;
    };
    return { release, [Symbol.dispose]: release };
  }
}

/** A bounded FIFO memory of recently seen IDs (SPEC `maxRecentIds`). */
export class RecentIds {
  #set = new Set<string>();
  #capacity: number;

  /** @param capacity how many IDs are remembered */
  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** Whether `id` is remembered. */
  has(id: string): boolean {
    return this.#set.has(id);
  }

  /** Remembers `id`, forgetting the oldest beyond capacity. */
  add(id: string): void {
    if (this.#set.has(id)) return;
    this.#set.add(id);
    if (this.#set.size > this.#capacity) {
      const oldest = this.#set.values().next().value as string;
      this.#set.delete(oldest);
    }
  }

  /** Forgets `id`; returns whether it was remembered. */
  delete(id: string): boolean {
    return this.#set.delete(id);
  }
}

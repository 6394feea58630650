/**
 * The bounded queue behind a server stream: a session's lease (SPEC §3.2) and each tool
 * subscription (SPEC §7.6). Items in order, a fixed capacity, and an end that is either OK or a
 * status error.
 *
 * @module
 */

/** A single-consumer queue that ends once. */
export class LeaseQueue<T> {
  #items: T[] = [];
  #capacity: number;
  #waiter: PromiseWithResolvers<void> | undefined;
  #ended = false;
  #error: unknown;
  #onTake: (() => void) | undefined;

  /**
   * @param capacity items held at most
   * @param onTake called whenever the consumer takes an item (room was made)
   */
  constructor(capacity: number, onTake?: () => void) {
    this.#capacity = capacity;
    this.#onTake = onTake;
  }

  /** Whether an item can be queued now. */
  get hasSpace(): boolean {
    return !this.#ended && this.#items.length < this.#capacity;
  }

  /** Events queued and not yet taken. */
  get size(): number {
    return this.#items.length;
  }

  /** Whether {@link LeaseQueue.end} was called. */
  get ended(): boolean {
    return this.#ended;
  }

  /**
   * Appends an event without waiting.
   *
   * @param item the event
   * @returns `false` when the queue is full or ended (the event is not queued)
   */
  push(item: T): boolean {
    if (this.#ended || this.#items.length >= this.#capacity) return false;
    this.#items.push(item);
    this.#waiter?.resolve();
    return true;
  }

  /**
   * Ends the stream after the queued events; `error` (if any) is thrown to the consumer.
   *
   * @param error the status to end with, or undefined for OK
   */
  end(error?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#error = error;
    this.#waiter?.resolve();
  }

  /**
   * Yields queued events until the end; stops early when `signal` aborts.
   *
   * @param signal the consumer's cancellation
   */
  async *drain(signal?: AbortSignal): AsyncGenerator<T> {
    const onAbort = () => this.#waiter?.resolve();
    signal?.addEventListener("abort", onAbort);
    try {
      while (!signal?.aborted) {
        if (this.#items.length > 0) {
          const item = this.#items.shift()!;
          this.#onTake?.();
          yield item;
          continue;
        }
        if (this.#ended) {
          if (this.#error !== undefined) throw this.#error;
          return;
        }
        this.#waiter = Promise.withResolvers<void>();
        await this.#waiter.promise;
        this.#waiter = undefined;
      }
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }
}

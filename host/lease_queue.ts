/**
 * The bounded event queue behind a session's lease stream (SPEC §3.2): events in order, a fixed
 * capacity, and an end that is either OK or a status error.
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

  /** @param capacity events held at most */
  constructor(capacity: number) {
    this.#capacity = capacity;
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
          yield this.#items.shift()!;
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

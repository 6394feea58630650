/**
 * The bounded queue behind a server stream: a session's lease (SPEC §3.2) and each tool
 * subscription (SPEC §7.6). Items in order, a fixed capacity, and an end that is either OK or a
 * status error.
 *
 * - Items are numbered 1, 2, … as they are pushed ({@link LeaseQueue.pushed}).
 * - An item is *handed off* once the consumer, having taken it, comes back for the next one: a
 *   gRPC server stream asks for the next message only after it wrote the previous one to its
 *   transport. {@link LeaseQueue.handedOff} waits for that.
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
  #pushed = 0;
  #handed = 0;
  /** The consumer stopped (ended, or left): nothing more will be handed off. */
  #stopped = false;
  #handoffs: { seq: number; resolve: () => void }[] = [];

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

  /** How many items were pushed so far: the number of the last one. */
  get pushed(): number {
    return this.#pushed;
  }

  /**
   * Waits until item `seq` has been handed off, or the consumer stopped.
   *
   * @param seq an item number ({@link LeaseQueue.pushed} right after its push)
   * @returns resolves then (at once when it already was)
   */
  handedOff(seq: number): Promise<void> {
    if (seq <= this.#handed || this.#stopped) return Promise.resolve();
    const { promise, resolve } = Promise.withResolvers<void>();
    this.#handoffs.push({ seq, resolve });
    return promise;
  }

  #handOff(): void {
    this.#handed++;
    if (this.#handoffs.length === 0) return;
    const ready = this.#handoffs.filter((h) => h.seq <= this.#handed);
    if (ready.length === 0) return;
    this.#handoffs = this.#handoffs.filter((h) => h.seq > this.#handed);
    for (const h of ready) h.resolve();
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
    this.#pushed++;
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
          this.#handOff();
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
      this.#stopped = true;
      for (const h of this.#handoffs.splice(0)) h.resolve();
    }
  }
}

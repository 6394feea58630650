/**
 * Time slices for long work on an event loop that serves others: work that may run long (decoding
 * a runtime's burst of frames, committing a million stored writes) checks {@link TimeSlice.over}
 * between steps and, once its slice is used up, awaits {@link TimeSlice.next}, a macrotask, so
 * that timers, I/O and other sessions run before it goes on.
 *
 * - A slice is {@link SLICE_MS} long by default: a loop of short steps blocks its event loop for
 *   about that long at a time, whatever the total.
 * - {@link TimeSlice.next} yields through a 0 ms timer, so that I/O is polled before the work goes
 *   on. Not `setImmediate`: on Deno 2.9.6 a chain of immediates ran before the socket reads of
 *   other requests (another session's Execute waited for the whole sliced commit, ~0.9 s), and
 *   only the timers got through.
 *
 * @module
 */
/** The default slice, milliseconds. */
export const SLICE_MS = 10;

/** A slice of an event loop's time for one piece of long work. */
export class TimeSlice {
  readonly #budgetMs: number;
  #start = performance.now();

  /**
   * Starts the first slice.
   *
   * @param budgetMs the slice's length, ms (default {@link SLICE_MS})
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { TimeSlice } from "./time_slice.ts";
   * const slice = new TimeSlice(0);
   * assert.equal(slice.over, true);
   * await slice.next();
   * ```
   */
  constructor(budgetMs: number = SLICE_MS) {
    this.#budgetMs = budgetMs;
  }

  /** Whether this slice is used up (the work should await {@link TimeSlice.next}). */
  get over(): boolean {
    return performance.now() - this.#start >= this.#budgetMs;
  }

  /**
   * Starts a new slice without yielding: the work waited meanwhile (for input), and its event loop
   * ran others then.
   *
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { TimeSlice } from "./time_slice.ts";
   * const slice = new TimeSlice(5);
   * const until = performance.now() + 6;
   * while (performance.now() < until) continue; // work
   * assert.equal(slice.over, true);
   * slice.restart();
   * assert.equal(slice.over, false);
   * ```
   */
  restart(): void {
    this.#start = performance.now();
  }

  /** Yields to the event loop for one macrotask, then starts a new slice. */
  async next(): Promise<void> {
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
    this.#start = performance.now();
  }
}

/**
 * The one clock of the project: monotonic milliseconds and timers, injected wherever time matters
 * so that timing rules can be tested with a manual clock (fakes live in the tests). The session
 * core (`host/core/`), the session runtime (`worker/runtime.ts`) and the client library (its
 * deadlines and admission delays, SPEC §10.3) all take this {@link Clock}.
 *
 * - {@link realClock} clamps every delay to 0 … {@link MAX_TIMER_MS} (a platform timer fires a
 *   longer delay after 1 ms).
 * - {@link sleep} and {@link withDeadline} remove their timer and listener once they settle.
 *
 * @module
 */
import { MAX_INT32 } from "./bytes.ts";

/** Time source and timers. */
export interface Clock {
  /** Monotonic milliseconds. */
  now(): number;
  /** Schedules `fn` after `ms`; returns a handle for {@link Clock.clearTimeout}. */
  setTimeout(fn: () => void, ms: number): unknown;
  /** Cancels a timer; a stale or `undefined` handle is ignored. */
  clearTimeout(handle: unknown): void;
}

/** The largest delay a JavaScript timer supports; every yield time is clamped to it (SPEC §4.1). */
export const MAX_TIMER_MS = MAX_INT32;

/**
 * The real clock: `performance.now()` and the platform's timers.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { realClock, sleep } from "./clock.ts";
 *
 * const start = realClock.now();
 * await sleep(realClock, 1);
 * assert.ok(realClock.now() >= start);
 * ```
 */
export const realClock: Clock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, Math.min(MAX_TIMER_MS, Math.max(0, ms))),
  clearTimeout: (handle) => clearTimeout(handle as number | undefined),
};

/**
 * Resolves after `ms` on `clock`.
 *
 * @param clock the clock the delay runs on
 * @param ms the delay
 * @param signal rejects the sleep with its reason when it aborts first (the timer is cleared)
 * @returns a promise of the end of the delay
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { realClock, sleep } from "./clock.ts";
 *
 * await assert.rejects(sleep(realClock, 60_000, AbortSignal.abort(new Error("stop"))), { message: "stop" });
 * ```
 */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      clock.clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** What {@link withDeadline} resolves to when the deadline passed first. */
export const TIMED_OUT: unique symbol = Symbol("timed out");

/**
 * Races `promise` against a deadline of `ms` on `clock`; the deadline's timer is cleared once the
 * race is settled.
 *
 * @param clock the clock the deadline runs on
 * @param promise what is awaited
 * @param ms the deadline, from now
 * @returns the promise's value, or {@link TIMED_OUT}
 * @throws whatever `promise` rejects with, when it settles first
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { realClock, TIMED_OUT, withDeadline } from "./clock.ts";
 *
 * assert.equal(await withDeadline(realClock, Promise.resolve(1), 1_000), 1);
 * assert.equal(await withDeadline(realClock, new Promise(() => {}), 1), TIMED_OUT);
 * ```
 */
export async function withDeadline<T>(
  clock: Clock,
  promise: Promise<T>,
  ms: number,
): Promise<T | typeof TIMED_OUT> {
  let timer: unknown;
  const expired = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = clock.setTimeout(() => resolve(TIMED_OUT), ms);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clock.clearTimeout(timer);
  }
}

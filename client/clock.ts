/**
 * Real time for the client library (SPEC §10.3): `performance.now()` and abortable sleeps.
 *
 * @module
 */
import { MAX_INT32 } from "../proto/bytes.ts";
import type { Clock } from "./types.ts";

/**
 * The real clock.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { realClock } from "./clock.ts";
 *
 * const start = realClock.now();
 * await realClock.sleep(1);
 * assert.ok(realClock.now() >= start);
 * ```
 */
export const realClock: Clock = {
  now: () => performance.now(),
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal!.reason);
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, Math.max(0, Math.min(ms, MAX_INT32)));
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  },
};

/** What {@link withDeadline} resolves to when the deadline passed first. */
export const TIMED_OUT: unique symbol = Symbol("timed out");

/**
 * Races `promise` against a deadline of `ms` on `clock`; the deadline's sleep is cancelled once the
 * race is settled.
 *
 * @param clock the clock the deadline runs on
 * @param promise what is awaited
 * @param ms the deadline, from now
 * @returns the promise's value, or {@link TIMED_OUT}
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
  const timer = new AbortController();
  const expired = clock.sleep(ms, timer.signal).then(
    (): typeof TIMED_OUT => TIMED_OUT,
    () => new Promise<never>(() => {}),
  );
  try {
    return await Promise.race([promise, expired]);
  } finally {
    timer.abort();
  }
}

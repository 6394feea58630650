/**
 * Real time for the client library (SPEC §10.3): `performance.now()` and abortable sleeps.
 *
 * @module
 */
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
      }, Math.max(0, Math.min(ms, 2_147_483_647)));
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  },
};

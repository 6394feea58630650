/**
 * An injectable clock (monotonic milliseconds and timers), so timing rules can be unit-tested.
 *
 * @module
 */
import { MAX_INT32 } from "../../proto/bytes.ts";

/** Time source and timers. */
export interface Clock {
  /** Monotonic milliseconds. */
  now(): number;
  /** Schedules `fn` after `ms`; returns a handle for {@link Clock.clearTimeout}. */
  setTimeout(fn: () => void, ms: number): unknown;
  /** Cancels a timer; a stale handle is ignored. */
  clearTimeout(handle: unknown): void;
}

/** The largest delay a JavaScript timer supports; every yield time is clamped to it (SPEC §4.1). */
export const MAX_TIMER_MS = MAX_INT32;

/** The real clock. */
export const realClock: Clock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, Math.min(MAX_TIMER_MS, Math.max(0, ms))),
  clearTimeout: (handle) => clearTimeout(handle as number),
};

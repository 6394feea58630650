/**
 * The port calls a cell actor makes for its cell (SPEC §4.12): tool calls and notifications, each
 * owned until it settles, and — when the door writes outcomes and delegate requests on one ordered
 * channel (`serialOutcomes`) — held back behind a delivered yield that is not yet written.
 *
 * - Calls are made in the order they are asked for; a held tool call whose cell no longer needs it
 *   by then (its signal aborted) is not made.
 * - A hold ends when the yield is written, its consumer goes away, the cell's lifetime ends, or
 *   {@link SERIAL_HOLD_MS} passes, whichever comes first.
 * - A call's failure is reported by the port itself (the session's port logs a tool call that
 *   failed and answers the runtime); the calls are owned here to be awaited before the actor
 *   closes.
 *
 * @module
 */
import type { Clock } from "./clock.ts";

/** The longest a yield holds back the cell's later tool calls and notifications (`serialOutcomes`). */
export const SERIAL_HOLD_MS = 2_000;

/** The tool calls and notifications of one cell actor. */
export class PortCalls {
  readonly #clock: Clock;
  readonly #lifetime: AbortSignal;
  /** Set while a delivered yield is not yet written; later calls wait for it. */
  #hold: Promise<void> | undefined;
  readonly #toolCalls = new Set<Promise<void>>();
  readonly #notifications = new Set<Promise<void>>();

  /**
   * @param clock the time source of the hold's bound
   * @param lifetime aborts when the cell stops: every hold ends
   */
  constructor(clock: Clock, lifetime: AbortSignal) {
    this.#clock = clock;
    this.#lifetime = lifetime;
  }

  /**
   * Holds the calls asked for from now until the yield just delivered is written (after any
   * earlier hold).
   *
   * @param signal the yield's consumer went away
   * @returns `release`: the yield was written (the door calls it as the outcome's `written`)
   */
  holdUntilWritten(signal: AbortSignal): () => void {
    const { promise, resolve } = Promise.withResolvers<void>();
    const lifetime = this.#lifetime;
    const release = () => {
      this.#clock.clearTimeout(timer);
      signal.removeEventListener("abort", release);
      lifetime.removeEventListener("abort", release);
      resolve();
    };
    const timer = this.#clock.setTimeout(release, SERIAL_HOLD_MS);
    signal.addEventListener("abort", release, { once: true });
    lifetime.addEventListener("abort", release, { once: true });
    const earlier = this.#hold;
    const hold: Promise<void> = (earlier === undefined ? promise : earlier.then(() => promise)).then(() => {
      if (this.#hold === hold) this.#hold = undefined;
    });
    this.#hold = hold;
    return release;
  }

  /**
   * Makes a tool call now, or after the current hold unless `signal` aborted by then.
   *
   * @param call the port call
   * @param signal the call was cancelled
   */
  toolCall(call: () => Promise<void>, signal: AbortSignal): void {
    this.#own(this.#toolCalls, this.#after(call, signal));
  }

  /**
   * Publishes a notification now, or after the current hold.
   *
   * @param call the port call
   */
  notify(call: () => void | Promise<void>): void {
    this.#own(this.#notifications, this.#after(call));
  }

  /** Resolves once every notification asked for so far has settled (a completion waits for them). */
  notificationsSettled(): Promise<unknown> {
    return Promise.allSettled([...this.#notifications]);
  }

  /** Resolves once every call asked for so far has settled. */
  settled(): Promise<unknown> {
    return Promise.allSettled([...this.#toolCalls, ...this.#notifications]);
  }

  #after(call: () => void | Promise<void>, signal?: AbortSignal): Promise<void> {
    const hold = this.#hold;
    if (hold === undefined) return invoke(call);
    return hold.then(() => signal?.aborted ? undefined : invoke(call));
  }

  /** Keeps a call until it settles. */
  #own(set: Set<Promise<void>>, call: Promise<void>): void {
    const settled: Promise<void> = call.then(() => {}, reportedByPort).finally(() => set.delete(settled));
    set.add(settled);
  }
}

/** A port call's failure is reported by the port itself (see the module doc). */
function reportedByPort(_error: unknown): void {}

/** Calls `fn`, turning a synchronous throw into a rejection. */
function invoke(fn: () => void | Promise<void>): Promise<void> {
  try {
    return Promise.resolve(fn());
  } catch (e) {
    return Promise.reject(e);
  }
}

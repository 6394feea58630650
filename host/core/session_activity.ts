/**
 * A session's activity and idle timeout (SPEC §3.3): requests naming the session, observations in
 * flight, and the timer that closes a session idle for `idleSessionTimeoutMs`.
 *
 * - A session is idle when no observation is in flight, no cell runs, and no request named it for
 *   the whole timeout; the timer re-arms itself until then, and stops once the session is no
 *   longer open.
 *
 * @module
 */
import type { Clock } from "./clock.ts";

/** Construction options of a {@link SessionActivity}. */
export interface SessionActivityOptions {
  clock: Clock;
  /** `idleSessionTimeoutMs`; 0 or less: never idle. */
  idleMs: number;
  /** Whether the session is open. */
  isOpen(): boolean;
  /** Whether cells run in the session. */
  hasRunningCells(): boolean;
  /** The session has been idle for `idleMs`: close it. */
  onIdle(): void;
  /** An observation ended (its outcome is about to be sent). */
  onObserved?(): void;
}

/** The activity of one session and its idle timer. */
export class SessionActivity {
  #options: SessionActivityOptions;
  #inFlight = 0;
  #lastActivity = 0;
  #timer: unknown;

  /** @param options see {@link SessionActivityOptions}; the timer starts at once */
  constructor(options: SessionActivityOptions) {
    this.#options = options;
    this.touch();
    this.#arm();
  }

  /** Observations in flight: Executes awaiting their outcome, Waits and Terminates. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Records a request naming the session. */
  touch(): void {
    this.#lastActivity = this.#options.clock.now();
  }

  /**
   * Tracks an observation in flight (Execute, Wait, Terminate).
   *
   * @param work the observation
   * @returns its result
   */
  async track<T>(work: () => Promise<T>): Promise<T> {
    this.#inFlight++;
    this.touch();
    try {
      return await work();
    } finally {
      this.#inFlight--;
      this.touch();
      this.#options.onObserved?.();
    }
  }

  /** Stops the idle timer (the session is closing or gone). */
  stop(): void {
    if (this.#timer !== undefined) this.#options.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(): void {
    const { clock, idleMs } = this.#options;
    if (idleMs <= 0 || !this.#options.isOpen()) return;
    const due = this.#lastActivity + idleMs - clock.now();
    this.#timer = clock.setTimeout(() => {
      if (!this.#options.isOpen()) return;
      const idle = this.#inFlight === 0 && !this.#options.hasRunningCells() &&
        clock.now() - this.#lastActivity >= idleMs;
      if (idle) this.#options.onIdle();
      else this.#arm();
    }, Math.max(1, Math.min(due, idleMs)));
  }
}

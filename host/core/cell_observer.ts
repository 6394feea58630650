/**
 * The observation attached to a cell actor (SPEC §4.12): how it waits ({@link ObserveMode}), its
 * responder, and its deadline.
 *
 * - At most one observation is attached; its deadline and yield signal wake the actor, which
 *   decides what happens (the slot only keeps time).
 * - A `yieldAfter` observation attached before the cell's `started` event, with a start grace,
 *   counts its yield time from that event, waiting for it at most the grace.
 * - Every listener and timer of an observation goes when it is detached.
 *
 * @module
 */
import { type Clock, MAX_TIMER_MS } from "./clock.ts";
import type { CellEvent, CellResponder } from "./cell_state.ts";

/** How an observation waits (SPEC §4.12 observe modes). */
export type ObserveMode =
  | { kind: "yieldAfter"; ms: number; yieldSignal?: AbortSignal; startGraceMs?: number }
  | { kind: "pendingFrontier" };

/** Constructors of {@link ObserveMode} values. */
export const ObserveMode = {
  /**
   * Yield after `ms` (clamped to 0…2,147,483,647), or when `yieldSignal` aborts.
   *
   * With `startGraceMs`, an observation attached before the cell's `started` event counts its `ms`
   * from that event instead (the cell's first observation: its StartCell may wait for a Worker), but
   * waits for it at most `startGraceMs`: without it, it yields `startGraceMs + ms` after attaching.
   *
   * @param ms the yield time
   * @param yieldSignal the YieldObservation signal
   * @param startGraceMs how long the yield time may wait for the cell to start; default: it does not
   * @returns the mode
   */
  yieldAfter(ms: number, yieldSignal?: AbortSignal, startGraceMs?: number): ObserveMode {
    const clamped = Math.min(MAX_TIMER_MS, Math.max(0, ms));
    return startGraceMs === undefined
      ? { kind: "yieldAfter", ms: clamped, yieldSignal }
      : { kind: "yieldAfter", ms: clamped, yieldSignal, startGraceMs: Math.max(0, startGraceMs) };
  },
  /** Resolve at the next `Pending` (or the retained frontier). */
  pendingFrontier: { kind: "pendingFrontier" } as ObserveMode,
};

/** The attached observation. */
export interface Observer {
  readonly mode: ObserveMode;
  readonly responder: CellResponder;
  reject(error: unknown): void;
  timer?: unknown;
  deadlineAt?: number;
  deadlineFired: boolean;
  /** The yield time counts from the cell's `started` event, which has not come yet. */
  awaitingStart?: boolean;
  /** Removes the observation's listeners and timer. */
  cleanup(): void;
}

/** A responder, its outcome's promise, and its rejection. */
export interface Responder {
  responder: CellResponder;
  promise: Promise<CellEvent>;
  reject(e: unknown): void;
}

/**
 * Makes a responder whose promise rejects with the signal's reason when it aborts first.
 *
 * @param signal the observer went away
 * @returns the responder
 */
export function makeResponder(signal: AbortSignal | undefined): Responder {
  const { promise, resolve, reject } = Promise.withResolvers<CellEvent>();
  const s = signal ?? new AbortController().signal;
  let settled = false;
  const onAbort = () => finish(() => reject(s.reason));
  const finish = (fn: () => void) => {
    if (settled) return;
    settled = true;
    s.removeEventListener("abort", onAbort);
    fn();
  };
  if (s.aborted) onAbort();
  else s.addEventListener("abort", onAbort);
  return {
    promise,
    responder: { signal: s, resolve: (event) => finish(() => resolve(event)) },
    reject: (e) => finish(() => reject(e)),
  };
}

/** The one observation a cell actor may have attached, with its deadline. */
export class ObserverSlot {
  readonly #clock: Clock;
  readonly #wake: () => void;
  #observer: Observer | undefined;

  /**
   * @param clock the time source
   * @param wake wakes the actor (a deadline passed, a signal aborted)
   */
  constructor(clock: Clock, wake: () => void) {
    this.#clock = clock;
    this.#wake = wake;
  }

  /** The attached observation, if any. */
  get current(): Observer | undefined {
    return this.#observer;
  }

  /**
   * Attaches an observation and starts its deadline.
   *
   * @param mode how it waits
   * @param responder where its outcome goes
   * @param reject its rejection
   * @param started whether the cell's `started` event was handled
   */
  attach(
    mode: ObserveMode,
    responder: CellResponder,
    reject: (error: unknown) => void,
    started: boolean,
  ): void {
    const onAbort = () => this.#wake();
    const observer: Observer = {
      mode,
      responder,
      reject,
      deadlineFired: false,
      cleanup: () => {
        responder.signal.removeEventListener("abort", onAbort);
        if (observer.timer !== undefined) this.#clock.clearTimeout(observer.timer);
        observer.timer = undefined;
        if (mode.kind === "yieldAfter") mode.yieldSignal?.removeEventListener("abort", onAbort);
      },
    };
    responder.signal.addEventListener("abort", onAbort);
    if (mode.kind === "yieldAfter") {
      if (mode.startGraceMs !== undefined && !started) {
        observer.awaitingStart = true;
        this.#arm(observer, Math.min(MAX_TIMER_MS, mode.startGraceMs + mode.ms));
      } else {
        this.#arm(observer, mode.ms);
      }
      mode.yieldSignal?.addEventListener("abort", onAbort);
    }
    this.#observer = observer;
  }

  /** The cell's `started` event: an observation that waited for it counts its yield time from now. */
  started(): void {
    const o = this.#observer;
    if (o?.awaitingStart && o.mode.kind === "yieldAfter" && !o.deadlineFired) {
      o.awaitingStart = false;
      this.#arm(o, o.mode.ms);
    }
  }

  /** Sets the observer's deadline `ms` from now. */
  #arm(observer: Observer, ms: number): void {
    if (observer.timer !== undefined) this.#clock.clearTimeout(observer.timer);
    observer.timer = undefined;
    observer.deadlineAt = this.#clock.now() + ms;
    if (ms <= 0) {
      observer.deadlineFired = true;
      return;
    }
    observer.timer = this.#clock.setTimeout(() => {
      observer.deadlineFired = true;
      this.#wake();
    }, ms);
  }

  /**
   * Detaches the observation.
   *
   * @returns it, or `undefined` when none was attached
   */
  detach(): Observer | undefined {
    const observer = this.#observer;
    observer?.cleanup();
    this.#observer = undefined;
    return observer;
  }

  /**
   * Stops the observation's deadline and signals; it stays attached for the outcome (a
   * termination's).
   *
   * @returns it, or `undefined` when none is attached
   */
  stopDeadline(): Observer | undefined {
    this.#observer?.cleanup();
    return this.#observer;
  }

  /** Whether the attached observation's deadline passed or its yield signal aborted. */
  deadlineReady(): boolean {
    const o = this.#observer;
    if (o?.mode.kind !== "yieldAfter") return false;
    return o.deadlineFired || this.#clock.now() >= o.deadlineAt! || (o.mode.yieldSignal?.aborted ?? false);
  }
}

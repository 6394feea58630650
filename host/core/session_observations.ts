/**
 * A session's observation IDs (SPEC §4.1, §4.3, §4.4): the execution IDs its Executes reserve,
 * the wait IDs its Waits register, and the yield and cancel requests that may name either before
 * or while it runs.
 *
 * - An ID is used once per session: a reused execution or wait ID is refused `id_reused`, among
 *   the active ones and the last `maxRecentIds` ended ones.
 * - A YieldObservation or a wait's cancellation that comes before its observation is remembered
 *   (bounded) and applies when the observation starts; one for an ended observation is dropped.
 *
 * @module
 */
import { HostError } from "./errors.ts";
import { RecentIds } from "./permits.ts";

interface ActiveWait {
  cancel: AbortController;
  yieldNow: AbortController;
  done: Promise<void>;
}

/** What a registered Wait gets: its signals, and `finish` to call when it ends. */
export interface RegisteredWait {
  /** Aborts with the `cancelled` error when the Wait is cancelled (or its session closes). */
  cancel: AbortSignal;
  /** Aborts when the Wait is asked to yield early. */
  yieldNow: AbortSignal;
  /** The Wait has ended. */
  finish(): void;
}

/** The execution and wait IDs of one session. */
export class SessionObservations {
  #activeExecutions = new Map<string, AbortController>();
  #recentExecutions: RecentIds;
  #activeWaits = new Map<string, ActiveWait>();
  #recentWaits: RecentIds;
  #preYielded: RecentIds;
  #preCancelled: RecentIds;

  /** @param maxRecentIds how many ended and early IDs each kind remembers */
  constructor(maxRecentIds: number) {
    this.#recentExecutions = new RecentIds(maxRecentIds);
    this.#recentWaits = new RecentIds(maxRecentIds);
    this.#preYielded = new RecentIds(maxRecentIds);
    this.#preCancelled = new RecentIds(maxRecentIds);
  }

  /**
   * Reserves an execution ID (SPEC §4.1 step 3).
   *
   * @param executionId the client's ID
   * @param ensureOpen throws when the session no longer takes work (checked after the reuse check)
   * @returns the execution's yield signal (pre-fired if a YieldObservation came first)
   * @throws {HostError} `id_reused` when reused
   */
  reserveExecution(executionId: string, ensureOpen: () => void): AbortSignal {
    if (this.#activeExecutions.has(executionId) || this.#recentExecutions.has(executionId)) {
      throw new HostError("id_reused", `code-mode execution ID \`${executionId}\` was reused`);
    }
    ensureOpen();
    const yieldNow = new AbortController();
    if (this.#preYielded.delete(executionId)) yieldNow.abort();
    this.#activeExecutions.set(executionId, yieldNow);
    this.#recentExecutions.add(executionId);
    return yieldNow.signal;
  }

  /** Ends an execution's reservation (its initial observation is over). */
  releaseExecution(executionId: string): void {
    this.#activeExecutions.delete(executionId);
  }

  /**
   * Registers a Wait (SPEC §4.3 step 2).
   *
   * @param waitId the client's ID
   * @returns its signals and `finish`
   * @throws {HostError} `id_reused` when reused, `cancelled` when pre-cancelled
   */
  registerWait(waitId: string): RegisteredWait {
    if (this.#activeWaits.has(waitId) || this.#recentWaits.has(waitId)) {
      throw new HostError("id_reused", `code-mode wait ID \`${waitId}\` was reused`);
    }
    this.#recentWaits.add(waitId);
    if (this.#preCancelled.delete(waitId)) {
      throw new HostError("cancelled", "code-mode wait was cancelled");
    }
    const done = Promise.withResolvers<void>();
    const wait: ActiveWait = {
      cancel: new AbortController(),
      yieldNow: new AbortController(),
      done: done.promise,
    };
    if (this.#preYielded.delete(waitId)) wait.yieldNow.abort();
    this.#activeWaits.set(waitId, wait);
    return {
      cancel: wait.cancel.signal,
      yieldNow: wait.yieldNow.signal,
      finish: () => {
        this.#activeWaits.delete(waitId);
        done.resolve();
      },
    };
  }

  /**
   * Fires the yield signal of an execution's initial observation or of a Wait (SPEC §4.4).
   *
   * @param id the execution or wait ID
   * @param kind which kind of ID
   */
  yieldObservation(id: string, kind: "execution" | "wait"): void {
    if (kind === "execution") {
      const active = this.#activeExecutions.get(id);
      if (active) active.abort();
      else if (!this.#recentExecutions.has(id)) this.#preYielded.add(id);
    } else {
      const active = this.#activeWaits.get(id);
      if (active) active.yieldNow.abort();
      else if (!this.#recentWaits.has(id)) this.#preYielded.add(id);
    }
  }

  /**
   * Cancels a Wait and resolves once it has retired (SPEC §4.4).
   *
   * @param waitId the wait ID
   */
  async cancelWait(waitId: string): Promise<void> {
    const active = this.#activeWaits.get(waitId);
    if (active) {
      active.cancel.abort(new HostError("cancelled", "code-mode wait was cancelled"));
      await active.done;
    } else if (!this.#recentWaits.has(waitId)) {
      this.#preCancelled.add(waitId);
    }
  }

  /** Cancels every pending Wait, as a closing session does (`code-mode wait was cancelled`). */
  cancelAllWaits(): void {
    const cancelled = new HostError("cancelled", "code-mode wait was cancelled");
    for (const wait of this.#activeWaits.values()) wait.cancel.abort(cancelled);
  }
}

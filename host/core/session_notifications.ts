/**
 * A session's notifications (SPEC §7.8): publishing a cell's `notify()` on the lease, and holding
 * the cell's outcome back until what it published before has reached the lease's transport.
 *
 * - A notification takes a delegate permit of the host and of the session for its publication;
 *   without one, or when the lease has no room left beyond the places kept for the cells'
 *   `CellClosed` and `tool_call_cancelled` events, it is dropped and logged (one line per second
 *   per session at most).
 * - Publication before release (item 4 of issue 25): see {@link SessionNotifications.flushed}.
 *
 * @module
 */
import type { Cell } from "./cell.ts";
import type { Clock } from "./clock.ts";
import type { LeaseQueue } from "./lease_queue.ts";
import type { Limits } from "./limits.ts";
import type { Logger } from "../ops/log.ts";
import type { Permits } from "./permits.ts";
import type { SessionEvent } from "./session_types.ts";

/**
 * How long a cell's outcome waits, at most, for its notifications to be handed to the lease's
 * transport ({@link SessionNotifications.flushed}): a lease that is read hands them off within
 * microtasks; one that is not read must not hold the outcome back (SPEC §7.8).
 */
export const NOTIFICATION_FLUSH_MS = 250;

/** Construction options of {@link SessionNotifications}. */
export interface SessionNotificationsOptions {
  /** The session's lease. */
  lease: LeaseQueue<SessionEvent>;
  limits: Limits;
  log: Logger;
  clock: Clock;
  /** The session's host-local number (logs). */
  ref: number;
  /** Host-wide delegate permits (or the session's connection's pool). */
  hostDelegatePermits: Permits;
  /** The session's own delegate permits. */
  sessionDelegatePermits: Permits;
}

/** The notifications of one session's cells. */
export class SessionNotifications {
  #options: SessionNotificationsOptions;
  /** The lease item number of each cell's last published notification. */
  #last = new WeakMap<Cell, number>();

  /** @param options see {@link SessionNotificationsOptions} */
  constructor(options: SessionNotificationsOptions) {
    this.#options = options;
  }

  /**
   * Publishes a cell's `notify()` on the lease, or drops it (see the module doc).
   *
   * @param cell the cell
   * @param text the notification's text
   */
  publish(cell: Cell, text: string): void {
    const { lease, limits, log } = this.#options;
    const host = this.#options.hostDelegatePermits.tryAcquire();
    const session = host && this.#options.sessionDelegatePermits.tryAcquire();
    try {
      const reserve = Math.min(limits.maxActiveCellsPerSession * 2, limits.leaseEventQueueCapacity / 2);
      const room = lease.size < limits.leaseEventQueueCapacity - reserve;
      if (!host || !session || !room) {
        log.repeated("warn", `notification dropped ${this.#options.ref}`, "code-mode notification dropped", {
          session_ref: this.#options.ref,
          cell_id: cell.id,
          error: !host || !session ? "no delegate permit" : "the lease is full",
        });
        return;
      }
      const queued = lease.push({
        notification: {
          notificationId: crypto.randomUUID(),
          executionId: cell.executionId,
          cellId: cell.id,
          callId: cell.toolCallId,
          text,
        },
      });
      if (queued) this.#last.set(cell, lease.pushed);
    } finally {
      session?.release();
      host?.release();
    }
  }

  /**
   * Publication before release (item 4 of issue 25): a cell's outcome (Execute, Wait, Terminate)
   * is released only after every notification the cell published before it has been handed to the
   * lease's transport, as Codex's host writes a cell's notifications before its outcome.
   *
   * - A notification is published when it is queued on the lease (in order, before the cell's
   *   `CellClosed`); it is handed off when the lease's reader has taken it and asked for the next
   *   event, i.e. written it to the lease stream.
   * - The wait ends at the latest after {@link NOTIFICATION_FLUSH_MS}, or when the lease's reader
   *   stops: a client that does not read its lease delays its outcomes by that much at most, and
   *   then receives the notifications after the outcome.
   *
   * @param cell the cell whose outcome is about to be released
   * @returns a promise to await first, or `undefined` when there is nothing to wait for
   */
  flushed(cell: Cell): Promise<void> | undefined {
    const seq = this.#last.get(cell);
    if (seq === undefined) return undefined;
    const handedOff = this.#options.lease.handedOff(seq);
    const clock = this.#options.clock;
    let timer: unknown;
    const bound = new Promise<void>((resolve) => timer = clock.setTimeout(resolve, NOTIFICATION_FLUSH_MS));
    return Promise.race([handedOff, bound]).finally(() => clock.clearTimeout(timer));
  }
}

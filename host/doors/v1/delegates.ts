/**
 * A V1 connection's delegate requests (`delegate/request`) in flight: the tool calls and
 * notifications it has sent its client and not yet seen answered, by delegate ID.
 *
 * - Delegate IDs are 1, 2, … per connection; one that cannot be written is used up all the same.
 * - A late `delegate/response` (cancelled, answered, or never sent) is ignored.
 * - A notification's delivery ends with its response, its cancellation, or the connection's end;
 *   a failed delivery is logged as Codex's host logs it, and the core is told either way.
 * - A cell's final outcome waits for the end of every delivery of its notifications
 *   ({@link DelegateTable.notificationsDelivered}), as on Codex's host.
 *
 * @module
 */
import type { CodeModeCore, CompleteToolCallRequest } from "../../core/code_mode_core.ts";
import type { Logger } from "../../ops/log.ts";
import type { DelegateResult } from "./client_messages.ts";
import { messageOf } from "../../core/errors.ts";

/** One delegate request in flight. */
export type Delegate =
  & {
    sessionId: string;
    /** Resolves once the request is queued for writing (a cancel follows it). */
    queued: Promise<void>;
  }
  & (
    | { kind: "tool"; invocationId: string }
    | { kind: "notification"; notificationId: string; cellId: string }
  );

/** A notification delegate. */
export type NotificationDelegate = Delegate & { kind: "notification" };

/** The delegate requests of one connection. */
export class DelegateTable {
  readonly #core: CodeModeCore;
  readonly #log: Logger;
  readonly #delegates = new Map<bigint, Delegate>();
  /**
   * While a final outcome waits ({@link DelegateTable.notificationsDelivered}): resolved as a
   * request is forgotten.
   */
  #forgotten: PromiseWithResolvers<void> | undefined;
  #next = 1n;

  /**
   * @param core the core the answers go to
   * @param log the connection's log
   */
  constructor(core: CodeModeCore, log: Logger) {
    this.#core = core;
    this.#log = log;
  }

  /** Uses up the next delegate ID. */
  nextId(): bigint {
    return this.#next++;
  }

  /**
   * Records a delegate request in flight.
   *
   * @param id its delegate ID
   * @param delegate the request
   */
  set(id: bigint, delegate: Delegate): void {
    this.#delegates.set(id, delegate);
  }

  /**
   * The request in flight under an ID, if any.
   *
   * @param id the delegate ID
   * @returns the request
   */
  get(id: bigint): Delegate | undefined {
    return this.#delegates.get(id);
  }

  /**
   * Forgets a request (answered, cancelled, or its session gone).
   *
   * @param id the delegate ID
   */
  delete(id: bigint): void {
    if (!this.#delegates.delete(id)) return;
    this.#forgotten?.resolve();
    this.#forgotten = undefined;
  }

  /**
   * Resolves once no notification of a session's cell is being delivered any more (answered,
   * failed, cancelled, or its session or connection gone).
   *
   * Codex's own host holds a cell's final outcome (an Execute's result, a Wait's) until then: a
   * V1 client records a notification before it answers it, so it has every notification of the
   * cell before the result. Codex 0.171 drops a notification it handles after the cell's result.
   * A yielded outcome and a termination are not held.
   *
   * @param sessionId the session
   * @param cellId the cell
   * @returns a promise to await first, or `undefined` when none is being delivered (no extra turn:
   *   a tool call's cancel the core makes meanwhile would otherwise go out before the outcome)
   */
  notificationsDelivered(sessionId: string, cellId: string): Promise<void> | undefined {
    if (!this.#delivering(sessionId, cellId)) return undefined;
    return (async () => {
      while (this.#delivering(sessionId, cellId)) {
        this.#forgotten ??= Promise.withResolvers();
        await this.#forgotten.promise;
      }
    })();
  }

  /** Whether a notification of the session's cell is being delivered. */
  #delivering(sessionId: string, cellId: string): boolean {
    for (const d of this.#delegates.values()) {
      if (d.kind === "notification" && d.cellId === cellId && d.sessionId === sessionId) return true;
    }
    return false;
  }

  /**
   * A session's notifications of one cell still being delivered, newest first.
   *
   * @param sessionId the session
   * @param cellId the cell
   * @returns their IDs and requests
   */
  notificationsOf(sessionId: string, cellId: string): [bigint, NotificationDelegate][] {
    const found: [bigint, NotificationDelegate][] = [];
    for (const [id, d] of this.#delegates) {
      if (d.kind === "notification" && d.cellId === cellId && d.sessionId === sessionId) found.push([id, d]);
    }
    return found.reverse();
  }

  /**
   * Forgets every request of a session (its pumps have ended).
   *
   * @param sessionId the session
   */
  dropSession(sessionId: string): void {
    for (const [id, delegate] of this.#delegates) {
      if (delegate.sessionId === sessionId) this.delete(id);
    }
  }

  /**
   * Gives a tool call's outcome to the core; a refusal (the session or invocation is gone) is
   * logged at debug.
   *
   * @param sessionId the session
   * @param invocationId the invocation
   * @param outcome the outcome
   */
  complete(sessionId: string, invocationId: string, outcome: CompleteToolCallRequest["outcome"]): void {
    try {
      this.#core.completeToolCall({ sessionId, invocationId, outcome });
    } catch (err) {
      this.#log.debug("code-mode delegate response ignored", { error: messageOf(err) });
    }
  }

  /**
   * Ends a notification's delivery; a failure is logged as Codex's host logs it.
   *
   * @param delegate the notification
   * @param failure why it was not delivered, or `undefined` when it was
   */
  acknowledge(delegate: NotificationDelegate, failure: string | undefined): void {
    if (failure !== undefined) this.#log.warn(`failed to deliver code mode notification: ${failure}`);
    try {
      this.#core.acknowledgeNotification({
        sessionId: delegate.sessionId,
        notificationId: delegate.notificationId,
      });
    } catch (err) {
      this.#log.debug("code-mode notification acknowledgement ignored", { error: messageOf(err) });
    }
  }

  /**
   * A `delegate/response`: the tool call's outcome or the notification's delivery goes to the core.
   *
   * @param id the delegate ID
   * @param result the response's result
   * @param answered a tool call is answered: its session forgets its invocation (called first)
   */
  respond(id: bigint, result: DelegateResult, answered: (tool: Delegate & { kind: "tool" }) => void): void {
    const delegate = this.#delegates.get(id);
    if (!delegate) return; // cancelled, finished, or never sent: a late response is ignored
    this.delete(id);
    if (delegate.kind === "tool") {
      answered(delegate);
      this.complete(
        delegate.sessionId,
        delegate.invocationId,
        result.status === "error"
          ? { type: "failed", message: result.message }
          : result.value.type === "tool/result"
          ? { type: "succeeded", outputJson: new TextEncoder().encode(JSON.stringify(result.value.result)) }
          : { type: "failed", message: "code-mode client returned an invalid tool result" },
      );
      return;
    }
    this.acknowledge(
      delegate,
      result.status === "error"
        ? result.message
        : result.value.type === "notification/delivered"
        ? undefined
        : "code-mode client returned an invalid notification result",
    );
  }

  /** The connection ended: every notification still being delivered failed. */
  closeNotifications(): void {
    for (const [id, delegate] of this.#delegates) {
      if (delegate.kind !== "notification") continue;
      this.delete(id);
      this.acknowledge(delegate, "code-mode client connection closed");
    }
  }
}

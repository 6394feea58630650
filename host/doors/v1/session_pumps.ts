/**
 * One session of a V1 connection: the pumps that write its lease events and tool calls as
 * delegate requests, and the per-cell gates that keep each cell's frames in the reference's order.
 *
 * - Per cell, frames go out as Codex's own host writes them: `execution/started`, then the cell's
 *   delegate requests (tool calls, notifications, cancels) as they happen, then its initial
 *   response, then `cell/closed` (after the initial response and the final outcome).
 * - Before any outcome of the session is written, every lease event the core had already produced
 *   (a notification, a tool call's cancel) is written first; a cell's final outcome (not a yield)
 *   waits until the client has answered each of the cell's notifications, as on Codex's host;
 *   before a termination, a `delegate/cancel` goes for each of them still being delivered.
 * - A tool call goes after the notifications its cell made before it; a cancel that comes before
 *   its `tool/invoke` was written follows it.
 * - A Wait pending when the session closes is answered with the cell's Terminated outcome before
 *   the cell's `cell/closed`.
 *
 * @module
 */
import type { ExecutionOutcome, Lease, LeaseEvent, ToolCallSubscription } from "../../core/code_mode_core.ts";
import type { Logger } from "../../ops/log.ts";
import { setImmediate } from "node:timers";
import type { Delegate, DelegateTable } from "./delegates.ts";
import { encodeFrame, frameTooLarge } from "./framing.ts";
import { toolInvoke, wireId } from "./host_messages.ts";
import type { Outbox } from "./outbox.ts";
import { messageOf } from "../../core/errors.ts";

type Gates = Map<string, PromiseWithResolvers<void>>;

/**
 * One macrotask: `setImmediate`, not a 0 ms timer, which Deno 2.9.6 fires ~1 ms later, and every
 * outcome waits for it (see `#leaseSettled`).
 */
const macrotask = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Construction options of a {@link V1Session}. */
export interface V1SessionOptions {
  lease: Lease;
  subscription: ToolCallSubscription;
  outbox: Outbox;
  delegates: DelegateTable;
  log: Logger;
  /** Both pumps have ended and every `cell/closed` is written: the connection forgets the session. */
  onPumped(session: V1Session): void;
}

/** One session of a V1 connection, with its pumps. */
export class V1Session {
  readonly sessionId: string;
  readonly lease: Lease;
  readonly subscription: ToolCallSubscription;
  /** Stops the tool-call pump (the lease's own iteration ends when the session does). */
  readonly stop = new AbortController();
  /** Both pumps have ended and every `cell/closed` was written. */
  readonly pumped: Promise<void>;
  readonly #outbox: Outbox;
  readonly #delegates: DelegateTable;
  readonly #log: Logger;
  /** Per cell: resolved once its `execution/started` is queued (its delegate requests wait). */
  readonly #startedSent: Gates = new Map();
  /** Per cell: resolved once its initial response is queued (cell/closed waits for it). */
  readonly #initialSent: Gates = new Map();
  /**
   * Per cell: resolved once its final outcome (a Result or Terminated, or the error that replaced
   * it) is queued, or the session is ending. Codex's host closes a cell only once its completion
   * was delivered, so `cell/closed` waits for this.
   */
  readonly #finalSent: Gates = new Map();
  /** Per cell: its Waits in progress. */
  readonly #waiting = new Map<string, number>();
  /** The session is shutting down or gone: every cell's `cell/closed` may go. */
  #ending = false;
  /** cell/closed frames waiting for their cell's outcomes. */
  readonly #closing = new Set<Promise<void>>();
  /** Per invocation whose cancellation came before its `tool/invoke` was written: resolved once it is. */
  readonly #invokeWritten: Gates = new Map();
  /** invocation ID → delegate ID. */
  readonly #invocations = new Map<string, bigint>();
  /** Lease events the pump has taken from the core, and written (or dropped). */
  #leasePulled = 0;
  #leaseWritten = 0;
  /** The lease ended: nothing more will be written for it. */
  #leaseEnded = false;
  /** Resolved (and replaced) each time the pump has written an event or ended. */
  #leaseProgress = Promise.withResolvers<void>();

  /** @param options see {@link V1SessionOptions}; the pumps start at once */
  constructor(options: V1SessionOptions) {
    this.sessionId = options.lease.sessionId;
    this.lease = options.lease;
    this.subscription = options.subscription;
    this.#outbox = options.outbox;
    this.#delegates = options.delegates;
    this.#log = options.log;
    // The lease's own iteration must not be stopped by the door (an aborted lease closes the
    // session); it ends when the session does.
    this.pumped = Promise.all([this.#pumpLease(), this.#pumpToolCalls()])
      .then(() => Promise.all([...this.#closing]))
      .then(() => {
        this.subscription.close();
        options.onPumped(this);
        this.#delegates.dropSession(this.sessionId);
      });
  }

  #gate(gates: Gates, cellId: string): PromiseWithResolvers<void> {
    let gate = gates.get(cellId);
    if (!gate) {
      gate = Promise.withResolvers<void>();
      gates.set(cellId, gate);
    }
    return gate;
  }

  /** A cell's `execution/started` is queued: its delegate requests may follow. */
  startedSent(cellId: string): void {
    this.#gate(this.#startedSent, cellId).resolve();
  }

  /** A cell's initial response is queued (or will never be): its `cell/closed` may follow. */
  initialSent(cellId: string): void {
    this.#gate(this.#initialSent, cellId).resolve();
  }

  /** A cell's final outcome (or the error that replaced it) is queued: its `cell/closed` may follow. */
  finalSent(cellId: string): void {
    this.#gate(this.#finalSent, cellId).resolve();
  }

  /** A Wait on a cell begins (its `cell/closed` waits for it once the session is ending). */
  waitBegins(cellId: string): void {
    this.#waiting.set(cellId, (this.#waiting.get(cellId) ?? 0) + 1);
  }

  /** A Wait on a cell ended. */
  waitEnds(cellId: string): void {
    const left = (this.#waiting.get(cellId) ?? 1) - 1;
    if (left > 0) this.#waiting.set(cellId, left);
    else this.#waiting.delete(cellId);
    if (left <= 0 && this.#ending) this.finalSent(cellId);
  }

  #finalGate(cellId: string): Promise<void> {
    const gate = this.#gate(this.#finalSent, cellId);
    if (this.#ending && !this.#waiting.has(cellId)) gate.resolve();
    return gate.promise;
  }

  /** The session is ending: every cell may be reported closed without its final outcome. */
  markEnding(): void {
    this.#ending = true;
    for (const [cellId, gate] of this.#finalSent) if (!this.#waiting.has(cellId)) gate.resolve();
  }

  /** The connection ended: nothing more is written, so every cell still waiting on a gate goes. */
  releaseGates(): void {
    this.markEnding();
    for (const gates of [this.#startedSent, this.#initialSent]) {
      for (const gate of gates.values()) gate.resolve();
    }
  }

  /**
   * Writes an outcome of a cell after what must precede it; a final one opens its `cell/closed`.
   *
   * @param outcome the outcome
   * @param write writes it
   */
  async delivering(outcome: ExecutionOutcome, write: () => Promise<void>): Promise<void> {
    try {
      await this.#beforeOutcome(outcome);
      await write();
    } finally {
      // The outcome is queued: the cell's later delegate requests may follow it.
      outcome.written?.();
      if (outcome.kind !== "yielded") this.finalSent(outcome.cellId);
    }
  }

  /**
   * Resolves once the lease pump has written every event the core had produced when this was
   * called (not the ones after, so a flood of notifications cannot hold an outcome back): after a
   * macrotask every event the core had handed over has reached the pump (the hand-over is
   * microtasks), and the core's backlog counts the rest.
   */
  async #leaseSettled(): Promise<void> {
    await macrotask();
    const target = this.#leasePulled + this.lease.backlog;
    while (this.#leaseWritten < target && !this.#leaseEnded) await this.#leaseProgress.promise;
  }

  /**
   * What must precede an outcome: the session's earlier lease events; before a final outcome, the
   * end of every delivery of the cell's notifications; before a termination, a `delegate/cancel` for
   * each of the cell's notifications still being delivered instead (as Codex's host does, newest
   * first).
   */
  async #beforeOutcome(outcome: ExecutionOutcome): Promise<void> {
    await this.#leaseSettled();
    if (outcome.kind === "completed") {
      const delivered = this.#delegates.notificationsDelivered(this.sessionId, outcome.cellId);
      if (delivered) await delivered;
      return;
    }
    if (outcome.kind !== "terminated") return;
    for (const [delegateId, delegate] of this.#delegates.notificationsOf(this.sessionId, outcome.cellId)) {
      this.#delegates.delete(delegateId);
      this.#delegates.acknowledge(delegate, "code mode delegate request cancelled");
      await delegate.queued;
      await this.#outbox.send({ type: "delegate/cancel", id: wireId(delegateId) });
    }
  }

  #progress(): void {
    this.#leaseProgress.resolve();
    this.#leaseProgress = Promise.withResolvers();
  }

  async #pumpLease(): Promise<void> {
    try {
      for await (const event of this.lease.events()) {
        this.#leasePulled++;
        try {
          await this.#leaseEvent(event);
        } finally {
          this.#leaseWritten++;
          this.#progress();
        }
      }
    } catch (err) {
      this.#log.debug("code-mode V1 lease ended", { error: messageOf(err) });
    } finally {
      this.markEnding();
      this.#leaseEnded = true;
      this.#progress();
    }
  }

  async #leaseEvent(event: LeaseEvent): Promise<void> {
    switch (event.type) {
      case "notification":
        return await this.#notification(event);
      case "toolCallCancelled":
        return await this.#cancelled(event.invocationId);
      case "cellClosed": {
        const cellId = event.cellId;
        const closed = (async () => {
          await this.#gate(this.#initialSent, cellId).promise;
          await this.#finalGate(cellId);
          await this.#outbox.send({ type: "cell/closed", sessionId: this.sessionId, cellId });
        })().finally(() => {
          this.#closing.delete(closed);
          this.#startedSent.delete(cellId);
          this.#initialSent.delete(cellId);
          this.#finalSent.delete(cellId);
        });
        this.#closing.add(closed);
        return;
      }
      case "opened":
        return;
    }
  }

  async #notification(event: Extract<LeaseEvent, { type: "notification" }>): Promise<void> {
    await this.#gate(this.#startedSent, event.cellId).promise;
    const delegates = this.#delegates;
    const delegateId = delegates.nextId();
    const delegate: Delegate = {
      kind: "notification",
      sessionId: this.sessionId,
      notificationId: event.notificationId,
      cellId: event.cellId,
      queued: Promise.resolve(),
    };
    delegates.set(delegateId, delegate);
    delegate.queued = this.#outbox.send({
      type: "delegate/request",
      id: wireId(delegateId),
      sessionId: this.sessionId,
      request: { type: "notification/send", callId: event.callId, cellId: event.cellId, text: event.text },
    }).then((sent) => {
      // A notification that cannot be written is a failed delivery.
      if (!sent && delegates.get(delegateId) === delegate) {
        delegates.delete(delegateId);
        delegates.acknowledge(delegate, "code-mode host message exceeded the IPC frame limit");
      }
    });
    await delegate.queued;
  }

  async #cancelled(invocationId: string): Promise<void> {
    let delegateId = this.#invocations.get(invocationId);
    if (delegateId === undefined) {
      // Its tool/invoke is not written yet (it follows the notifications before it): the cancel
      // follows it, as on Codex's host.
      const written = Promise.withResolvers<void>();
      this.#invokeWritten.set(invocationId, written);
      const stopped = Promise.withResolvers<void>();
      const onStop = () => stopped.resolve();
      this.stop.signal.addEventListener("abort", onStop, { once: true });
      if (this.stop.signal.aborted) onStop();
      await Promise.race([written.promise, stopped.promise]);
      this.stop.signal.removeEventListener("abort", onStop);
      this.#invokeWritten.delete(invocationId);
      delegateId = this.#invocations.get(invocationId);
      if (delegateId === undefined) return;
    }
    this.#invocations.delete(invocationId);
    const delegate = this.#delegates.get(delegateId);
    this.#delegates.delete(delegateId);
    await delegate?.queued;
    await this.#outbox.send({ type: "delegate/cancel", id: wireId(delegateId) });
  }

  /**
   * A tool call was answered: the session forgets its invocation.
   *
   * @param invocationId the invocation
   */
  answered(invocationId: string): void {
    this.#invocations.delete(invocationId);
  }

  async #pumpToolCalls(): Promise<void> {
    const max = this.#outbox.maxFrameBytes;
    try {
      for await (const call of this.subscription.calls(this.stop.signal)) {
        await this.#gate(this.#startedSent, call.cellId).promise;
        // After the notifications the cell made before this call, as Codex's host writes them.
        const mark = call.leaseMark ?? 0;
        while (this.#leaseWritten < mark && !this.#leaseEnded) await this.#leaseProgress.promise;
        const delegateId = this.#delegates.nextId();
        const frame = encodeFrame({
          type: "delegate/request",
          id: wireId(delegateId),
          sessionId: this.sessionId,
          request: toolInvoke(call),
        });
        if (frame.length - 4 > max) {
          // Codex's host fails the call with the frame's length (its delegate ID is used up).
          this.#delegates.complete(this.sessionId, call.invocationId, {
            type: "failed",
            message: frameTooLarge(frame.length - 4, max),
          });
          this.#invokeWritten.get(call.invocationId)?.resolve();
          continue;
        }
        const queued = this.#outbox.sendFrame(frame);
        this.#invocations.set(call.invocationId, delegateId);
        this.#delegates.set(delegateId, {
          kind: "tool",
          sessionId: this.sessionId,
          invocationId: call.invocationId,
          queued,
        });
        this.#invokeWritten.get(call.invocationId)?.resolve();
        await queued;
      }
    } catch (err) {
      this.#log.debug("code-mode V1 tool calls ended", { error: messageOf(err) });
    }
  }
}

/**
 * The cell actor of SPEC §4.12: it sits between a cell's runtime events and its observers and
 * decides, deterministically, which outcome each observation receives.
 *
 * Contract:
 * - Each step handles exactly one thing, in this order (A1): a termination request, then the
 *   attached observation's deadline or yield signal, then one runtime event, then one observe
 *   command. Stimuli that arrive while the actor is busy are all seen by the next step, so
 *   priorities, not arrival timing, decide races.
 * - An observation whose signal aborts before it is dequeued, or while it is attached, consumes
 *   nothing; a delivery to a gone responder restores the taken window in front (A3).
 * - A completion is committed through the session's port (A5) and then delivered or buffered in
 *   the {@link CellState}, which outlives the actor; termination claimed first rejects the commit.
 *   In Server mode a committed completion with an error ends with the `Script error:` item
 *   (SPEC §8.4 step 2), built only when the commit goes ahead.
 * - Termination drains the event queue (releasing a blocked producer and keeping its item),
 *   ignores `Result`, completes at `Result` or end-of-stream and never waits for more (A8).
 * - End-of-stream without `Result` completes the cell with the end reason's error text (A9, A10).
 * - All time comes from the injected {@link Clock}.
 *
 * The runtime never pauses here (SPEC §4.12 runtime mode `continue`); the test-only
 * `pauseUntilResumed` mode is faked around the actor by its tests.
 *
 * @module
 */
import type { Clock } from "./clock.ts";
export type { Clock } from "./clock.ts";
import {
  BudgetedCollector,
  type ByteBudget,
  createOutputCollector,
  type ErrorText,
  type OutputCollector,
  type OutputLimits,
  type OutputMode,
  type PushedItem,
} from "../output/output_collector.ts";
import { utf8ByteLength } from "../../proto/bytes.ts";
import type { ChannelEntry, EndReason, RuntimeEventChannel } from "./cell_channel.ts";
import { makeResponder, type ObserveMode, ObserverSlot } from "./cell_observer.ts";
import type { CellActorPort } from "./cell_port.ts";
import { PortCalls } from "./cell_port_calls.ts";
import {
  CellActorError,
  type CellEvent,
  type CellResponder,
  CellState,
  type CompletedEvent,
  sendYield,
} from "./cell_state.ts";

export { ObserveMode } from "./cell_observer.ts";
export { SERIAL_HOLD_MS } from "./cell_port_calls.ts";

/**
 * The completion error text of an end-of-stream without `Result` (SPEC §4.12 A9).
 *
 * @param reason the end reason
 * @returns the `exec runtime ended unexpectedly…` text
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { endReasonText } from "./cell_actor.ts";
 *
 * assert.equal(
 *   endReasonText({ kind: "heapLimit", limitMb: 16 }),
 *   "exec runtime ended unexpectedly: cell heap limit of 16 MiB reached",
 * );
 * ```
 */
export function endReasonText(reason: EndReason): string {
  switch (reason.kind) {
    case "heapLimit":
      return `exec runtime ended unexpectedly: cell heap limit of ${reason.limitMb} MiB reached`;
    case "restart":
      return `exec runtime ended unexpectedly: the session runtime was restarted to stop cell ${reason.stoppedCellId}`;
    default:
      return "exec runtime ended unexpectedly";
  }
}

/**
 * The `Script error:` item of a Server-mode completion with an error (SPEC §8.4 step 2).
 *
 * @param error the completion's error text
 * @returns the item: `Script error:\n` + the full error text
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { scriptErrorItem } from "./cell_actor.ts";
 *
 * assert.deepEqual(scriptErrorItem("boom"), { type: "text", text: "Script error:\nboom" });
 * ```
 */
export function scriptErrorItem(error: ErrorText): PushedItem {
  const prefix = "Script error:\n";
  return typeof error === "string" ? { type: "text", text: prefix + error } : {
    type: "trimmedText",
    head: prefix + error.head,
    tail: error.tail,
    totalBytes: utf8ByteLength(prefix) + error.totalBytes,
  };
}

/** Options of {@link startCellActor}. */
export interface CellActorOptions {
  /** The session side: the part of the cell's port that the actor calls. */
  port: CellActorPort;
  /**
   * Called once the actor has ended and every port call it made has settled (the owner closes
   * the cell when its isolate has stopped too). Default: none.
   */
  onClosed?: () => void;
  /** The runtime event source. */
  events: RuntimeEventChannel;
  /** The output mode of the session. */
  mode: OutputMode;
  /** The time source. */
  clock: Clock;
  /** The initial (Execute) observation; its yield timer starts now. */
  initialObserve: { mode: ObserveMode; signal?: AbortSignal };
  /** Receives runtime-thread failures (A9, A10). Default: none. */
  failureHandler?: (reason: string) => void;
  /** The cell ID, for error messages. */
  cellId?: string;
  /** Server collector limits. Default: the SPEC's. */
  outputLimits?: OutputLimits;
  /** The session's share of the host's memory budget, charged for the cell's output. Default: none. */
  budget?: ByteBudget;
  /**
   * The door writes outcomes and the cell's delegate requests on one ordered channel (JSON V1),
   * as Codex's own host does: after a `yielded` outcome, the cell's later tool calls and
   * notifications reach the port only once the door has queued that outcome (its `written`), the
   * outcome's consumer went away, the cell ended, or {@link SERIAL_HOLD_MS} passed. Default false.
   */
  serialOutcomes?: boolean;
}

/** The handle of a running cell actor. */
export interface CellActorHandle {
  /** The shared cell state. */
  readonly state: CellState;
  /** The initial observation's outcome (rejects with the signal's reason when it is dropped). */
  readonly initial: Promise<CellEvent>;
  /** Resolves when the actor task has ended, after `onClosed`. */
  readonly done: Promise<void>;
  /**
   * Observes the cell.
   *
   * @param mode how to wait
   * @param options `signal`: dropping the observation
   * @returns the outcome; rejects with a {@link CellActorError} or the signal's reason
   */
  observe(mode: ObserveMode, options?: { signal?: AbortSignal }): Promise<CellEvent>;
  /**
   * Terminates the cell (claims termination at once).
   *
   * @returns `terminated`, or the committed completion; rejects `alreadyTerminating` or `closed`
   */
  terminate(): Promise<CellEvent>;
}

interface Command {
  mode: ObserveMode;
  responder: CellResponder;
  reject(error: unknown): void;
}

/**
 * The reason the port calls of an ended cell are aborted with: one `AbortError` made once. A new
 * one per cell (`abort()` with no reason) took ~0.08 ms of the host thread per cell (a CPU profile of
 * eight sessions running cells): its stack trace.
 */
const CELL_ENDED = new DOMException("This operation was aborted", "AbortError");

/**
 * Starts the actor of one cell (SPEC §4.12).
 *
 * @param options port, event channel, mode, clock, initial observation and the optional parts
 * @returns the handle: `initial`, `observe`, `terminate`, `done`
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ObserveMode, startCellActor } from "./cell_actor.ts";
 * import { RuntimeEventChannel } from "./cell_channel.ts";
 * import { realClock } from "./clock.ts";
 *
 * const events = new RuntimeEventChannel();
 * const cell = startCellActor({
 *   port: {
 *     commit: (_writes, build, state) => Promise.resolve(state.commitCompletion(build, () => {})),
 *     notify: () => {},
 *     invokeTool: () => Promise.resolve(),
 *     stop: () => {},
 *   },
 *   events,
 *   mode: "client",
 *   clock: realClock,
 *   initialObserve: { mode: ObserveMode.yieldAfter(60_000) },
 * });
 * events.trySend({ type: "contentItem", item: { type: "text", text: "hi" } });
 * events.trySend({ type: "result", storedValueWrites: new Map() });
 * events.end();
 * const outcome = await cell.initial;
 * assert.equal(outcome.type, "completed");
 * assert.deepEqual(outcome.content.render(), [{ type: "text", text: "hi" }]);
 * await cell.done;
 * ```
 */
export function startCellActor(options: CellActorOptions): CellActorHandle {
  return new CellActor(options).handle;
}

class CellActor {
  readonly handle: CellActorHandle;
  readonly #port: CellActorPort;
  readonly #onClosed: (() => void) | undefined;
  readonly #mode: OutputMode;
  readonly #events: RuntimeEventChannel;
  readonly #state: CellState;
  readonly #output: OutputCollector;
  readonly #failureHandler: ((reason: string) => void) | undefined;
  readonly #cellId: string | undefined;
  /** Aborts the port calls in flight when the cell stops. */
  readonly #lifetime = new AbortController();
  readonly #observer: ObserverSlot;
  readonly #calls: PortCalls;
  readonly #serialOutcomes: boolean;

  #commands: Command[] = [];
  #pendingCalls = new Map<string, AbortController>();
  #pendingIds = new Set<string>();
  #frontier = false;
  /** The cell's `started` event has been handled. */
  #started = false;
  #failureReported = false;
  #ended = false;
  #wake: (() => void) | undefined;

  constructor(options: CellActorOptions) {
    this.#serialOutcomes = options.serialOutcomes ?? false;
    this.#port = options.port;
    this.#onClosed = options.onClosed;
    this.#mode = options.mode;
    this.#events = options.events;
    this.#cellId = options.cellId;
    this.#state = new CellState({ clock: options.clock, cellId: options.cellId });
    this.#output = createOutputCollector(options.mode, options.outputLimits, options.budget);
    this.#failureHandler = options.failureHandler;
    this.#observer = new ObserverSlot(options.clock, () => this.#notify());
    this.#calls = new PortCalls(options.clock, this.#lifetime.signal);

    const initial = makeResponder(options.initialObserve.signal);
    this.#observer.attach(options.initialObserve.mode, initial.responder, initial.reject, this.#started);
    this.#events.setConsumer(() => this.#notify());
    this.#state.onTerminationClaimed(() => this.#notify());

    const done = this.#run();
    this.handle = {
      state: this.#state,
      initial: initial.promise,
      done,
      observe: (mode, opts) => this.#observe(mode, opts?.signal),
      terminate: () => this.#state.requestTermination(),
    };
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  #sleep(): Promise<void> {
    const { promise, resolve } = Promise.withResolvers<void>();
    this.#wake = resolve;
    return promise;
  }

  #observe(mode: ObserveMode, signal: AbortSignal | undefined): Promise<CellEvent> {
    const r = makeResponder(signal);
    if (r.responder.signal.aborted) return r.promise;
    if (this.#state.completionBuffered) {
      this.#state.routeObservation(r.responder);
    } else if (this.#state.terminalDelivered) {
      r.reject(new CellActorError("closed", this.#cellId));
    } else if (this.#state.terminationClaimed) {
      r.reject(new CellActorError("busy", this.#cellId));
    } else if (this.#ended) {
      r.reject(new CellActorError("closed", this.#cellId));
    } else {
      this.#commands.push({ mode, responder: r.responder, reject: r.reject });
      r.responder.signal.addEventListener("abort", () => this.#notify(), { once: true });
      this.#notify();
    }
    return r.promise;
  }

  #deliverYield(): void {
    const o = this.#observer.detach()!;
    if (!this.#serialOutcomes || o.responder.signal.aborted) {
      sendYield(this.#output, o.responder);
      return;
    }
    // Hold the cell's later tool calls and notifications until this outcome (and any earlier
    // one not yet written) is written.
    const release = this.#calls.holdUntilWritten(o.responder.signal);
    if (sendYield(this.#output, o.responder, release) === "restored") release();
  }

  #deliverPending(): void {
    const o = this.#observer.detach()!;
    const content = this.#output.take();
    if (o.responder.signal.aborted) {
      this.#output.restore(content);
      this.#frontier = true;
      return;
    }
    this.#frontier = false;
    o.responder.resolve({ type: "pending", content, pendingToolCallIds: [...this.#pendingIds] });
  }

  async #run(): Promise<void> {
    // Let the code that started the actor finish first, like a freshly spawned task.
    await Promise.resolve();
    try {
      await this.#loop();
    } finally {
      this.#ended = true;
      // Only an actor that failed (a port call threw) still has an observer here.
      this.#observer.detach()?.reject(new CellActorError("closed", this.#cellId));
      this.#events.setConsumer(undefined);
      this.#events.close();
      this.#state.onTerminationClaimed(undefined);
      this.#abortPendingCalls();
      this.#lifetime.abort(CELL_ENDED);
      for (const cmd of this.#commands.splice(0)) this.#routeAfterEnd(cmd);
      await this.#calls.settled();
      this.#onClosed?.();
    }
  }

  #routeAfterEnd(cmd: Command): void {
    if (cmd.responder.signal.aborted) return;
    if (this.#state.completionBuffered) this.#state.routeObservation(cmd.responder);
    else cmd.reject(new CellActorError(this.#state.terminalDelivered ? "closed" : "busy", this.#cellId));
  }

  async #loop(): Promise<void> {
    let completed = false;
    for (;;) {
      if (this.#observer.current?.responder.signal.aborted) this.#observer.detach();
      // 1. A pending termination request.
      if (this.#state.terminationClaimed) return await this.#terminate(false);
      // 2. The deadline or yield signal of the attached observation.
      if (this.#observer.deadlineReady()) {
        this.#deliverYield();
        continue;
      }
      // 3. One runtime event (after completion only end-of-stream matters).
      const entry = this.#events.take();
      if (entry) {
        if (completed) {
          if (entry.type === "end") return;
          continue;
        }
        const outcome = await this.#handle(entry);
        if (outcome === "terminate") return await this.#terminate(true);
        if (outcome === "end") return;
        if (outcome === "completed") completed = true;
        continue;
      }
      // 4. One observe command.
      const cmd = this.#commands.shift();
      if (cmd) {
        this.#handleCommand(cmd, completed);
        continue;
      }
      await this.#sleep();
    }
  }

  #handleCommand(cmd: Command, completed: boolean): void {
    if (cmd.responder.signal.aborted) return; // dropped before dequeue: consumes nothing
    if (completed) return this.#routeAfterEnd(cmd);
    if (this.#observer.current) return cmd.reject(new CellActorError("busy", this.#cellId));
    this.#observer.attach(cmd.mode, cmd.responder, cmd.reject, this.#started);
    if (cmd.mode.kind === "pendingFrontier" && this.#frontier) this.#deliverPending();
  }

  #notifyCall(entry: Extract<ChannelEntry, { type: "notify" }>): void {
    this.#calls.notify(() => this.#port.notify(entry.callId, entry.text, this.#lifetime.signal));
  }

  /** Handles one runtime event; tells the loop whether the cell completed, ended or must terminate. */
  async #handle(entry: ChannelEntry): Promise<"continue" | "completed" | "end" | "terminate"> {
    switch (entry.type) {
      case "started":
        // The runtime reports the start when it hands the cell to its Worker, and the cell again
        // with its first output: only the first counts.
        if (!this.#started) {
          this.#started = true;
          this.#observer.started();
        }
        return "continue";
      case "contentItem":
        this.#output.push(entry.item);
        this.#frontier = false;
        return "continue";
      case "yieldRequested":
        this.#frontier = false;
        if (this.#observer.current?.mode.kind === "yieldAfter") this.#deliverYield();
        return "continue";
      case "toolCall": {
        this.#frontier = false;
        const { type: _, ...call } = entry;
        const controller = new AbortController();
        this.#pendingCalls.set(call.id, controller);
        this.#pendingIds.add(call.id);
        this.#calls.toolCall(() => this.#port.invokeTool(call, controller.signal), controller.signal);
        return "continue";
      }
      case "toolResultConsumed":
        this.#frontier = false;
        this.#pendingIds.delete(entry.id);
        this.#pendingCalls.delete(entry.id);
        return "continue";
      case "notify":
        this.#notifyCall(entry);
        return "continue";
      case "pending":
        if (this.#observer.current?.mode.kind === "pendingFrontier") this.#deliverPending();
        else this.#frontier = true;
        return "continue";
      case "threadPanicked":
        this.#reportFailure("code-mode V8 runtime thread panicked");
        return "continue";
      case "result":
        return await this.#complete(entry.storedValueWrites, entry.errorText, true);
      case "end":
        this.#reportFailure("code-mode V8 runtime thread ended unexpectedly");
        return await this.#complete(new Map(), endReasonText(entry.reason), false);
    }
  }

  #reportFailure(reason: string): void {
    if (this.#failureReported || !this.#failureHandler) return;
    this.#failureReported = true;
    this.#failureHandler(reason);
  }

  /** A5/A9: cleanup, commit, deliver. */
  async #complete(
    writes: Map<string, string>,
    errorText: ErrorText | undefined,
    fromResult: boolean,
  ): Promise<"completed" | "end" | "terminate"> {
    await this.#calls.notificationsSettled();
    this.#abortPendingCalls();
    this.#pendingCalls.clear();
    const build = (): CompletedEvent => {
      const content = this.#output.take();
      if (errorText === undefined) return { type: "completed", content, resultBufferedForMs: 0 };
      if (this.#mode === "server") {
        // The error is the completion's own: it is kept whatever the budget.
        const item = scriptErrorItem(errorText);
        if (content instanceof BudgetedCollector) content.pushForced(item);
        else content.push(item);
      }
      return { type: "completed", content, resultBufferedForMs: 0, errorText };
    };
    const commit = await this.#port.commit(writes, build, this.#state);
    if (commit === "rejected") {
      // Termination was claimed first: its Result (or end-of-stream) completes it at once.
      return "terminate";
    }
    if (this.#observer.current?.responder.signal.aborted) this.#observer.detach();
    const observer = this.#observer.detach();
    this.#state.deliverCompletion(observer?.responder);
    return fromResult ? "completed" : "end";
  }

  /** Cancels the cell's unanswered tool calls, newest first (as Codex's own host does). */
  #abortPendingCalls(): void {
    for (const c of [...this.#pendingCalls.values()].reverse()) c.abort();
  }

  /** A8. `finished`: a Result or end-of-stream has already been seen. */
  async #terminate(finished: boolean): Promise<void> {
    // Stop observing the deadline; the observation stays attached for the outcome.
    const observer = this.#observer.stopDeadline();
    this.#abortPendingCalls();
    this.#pendingCalls.clear();
    for (const cmd of this.#commands.splice(0)) {
      if (!cmd.responder.signal.aborted) cmd.reject(new CellActorError("busy", this.#cellId));
    }
    if (!this.#state.completionCommitted) {
      this.#port.stop();
      await this.#drainUntilStopped(finished);
    }
    this.#observer.detach();
    this.#state.finishTermination({ type: "terminated", content: this.#output.take() }, observer?.responder);
  }

  /** A8's drain: output and notifications until the Result or end-of-stream, then what is queued. */
  async #drainUntilStopped(finished: boolean): Promise<void> {
    while (!finished) {
      const entry = this.#events.take();
      if (!entry) {
        await this.#sleep();
        continue;
      }
      switch (entry.type) {
        case "contentItem":
          this.#output.push(entry.item);
          break;
        case "notify":
          this.#notifyCall(entry);
          break;
        case "result":
        case "end":
          finished = true;
          break;
      }
    }
    // Everything already queued (and a blocked producer's item) belongs to the outcome.
    for (let entry = this.#events.take(); entry; entry = this.#events.take()) {
      if (entry.type === "contentItem") this.#output.push(entry.item);
    }
  }
}

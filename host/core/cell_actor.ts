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
import { type Clock, MAX_TIMER_MS } from "./clock.ts";
export type { Clock } from "./clock.ts";
import {
  createOutputCollector,
  type ErrorText,
  type OutputCollector,
  type OutputLimits,
  type OutputMode,
  type PushedItem,
} from "../output/output_collector.ts";
import { utf8ByteLength } from "../../proto/bytes.ts";
import type { ChannelEntry, EndReason, RuntimeEventChannel } from "./cell_channel.ts";
import type { CellActorPort } from "./cell_port.ts";
import {
  CellActorError,
  type CellEvent,
  type CellResponder,
  CellState,
  type CompletedEvent,
  sendYield,
} from "./cell_state.ts";

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
  /**
   * The door writes outcomes and the cell's delegate requests on one ordered channel (JSON V1),
   * as Codex's own host does: after a `yielded` outcome, the cell's later tool calls and
   * notifications reach the port only once the door has queued that outcome (its `written`), the
   * outcome's consumer went away, the cell ended, or {@link SERIAL_HOLD_MS} passed. Default false.
   */
  serialOutcomes?: boolean;
}

/** The longest a yield holds back the cell's later tool calls and notifications (`serialOutcomes`). */
export const SERIAL_HOLD_MS = 2_000;

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

interface Observer {
  mode: ObserveMode;
  responder: CellResponder;
  reject(error: unknown): void;
  timer?: unknown;
  deadlineAt?: number;
  deadlineFired: boolean;
  /** The yield time counts from the cell's `started` event, which has not come yet. */
  awaitingStart?: boolean;
  cleanup(): void;
}

interface Command {
  mode: ObserveMode;
  responder: CellResponder;
  reject(error: unknown): void;
}

/** Makes a responder whose promise rejects with the signal's reason when it aborts first. */
function makeResponder(
  signal: AbortSignal | undefined,
): { responder: CellResponder; promise: Promise<CellEvent>; reject(e: unknown): void } {
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
  readonly #clock: Clock;
  readonly #state: CellState;
  readonly #output: OutputCollector;
  readonly #failureHandler: ((reason: string) => void) | undefined;
  readonly #cellId: string | undefined;
  /** Aborts the port calls in flight when the cell stops. */
  readonly #lifetime = new AbortController();

  #observer: Observer | undefined;
  #commands: Command[] = [];
  #pendingCalls = new Map<string, AbortController>();
  #pendingIds = new Set<string>();
  #callbacks = new Set<Promise<void>>();
  #notifications = new Set<Promise<void>>();
  #frontier = false;
  /** The cell's `started` event has been handled. */
  #started = false;
  #failureReported = false;
  #ended = false;
  #wake: (() => void) | undefined;
  readonly #serialOutcomes: boolean;
  /** `serialOutcomes`: set while a delivered yield is not yet written; later port calls wait for it. */
  #hold: Promise<void> | undefined;

  constructor(options: CellActorOptions) {
    this.#serialOutcomes = options.serialOutcomes ?? false;
    this.#port = options.port;
    this.#onClosed = options.onClosed;
    this.#mode = options.mode;
    this.#events = options.events;
    this.#clock = options.clock;
    this.#cellId = options.cellId;
    this.#state = new CellState({ clock: options.clock, cellId: options.cellId });
    this.#output = createOutputCollector(options.mode, options.outputLimits);
    this.#failureHandler = options.failureHandler;

    const initial = makeResponder(options.initialObserve.signal);
    this.#attach(options.initialObserve.mode, initial.responder, initial.reject);
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

  #attach(mode: ObserveMode, responder: CellResponder, reject: (error: unknown) => void): void {
    const onAbort = () => this.#notify();
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
      if (mode.startGraceMs !== undefined && !this.#started) {
        observer.awaitingStart = true;
        this.#arm(observer, Math.min(MAX_TIMER_MS, mode.startGraceMs + mode.ms));
      } else {
        this.#arm(observer, mode.ms);
      }
      mode.yieldSignal?.addEventListener("abort", onAbort);
    }
    this.#observer = observer;
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
      this.#notify();
    }, ms);
  }

  #detach(): Observer | undefined {
    const observer = this.#observer;
    observer?.cleanup();
    this.#observer = undefined;
    return observer;
  }

  #deadlineReady(o: Observer): boolean {
    if (o.mode.kind !== "yieldAfter") return false;
    return o.deadlineFired || this.#clock.now() >= o.deadlineAt! || (o.mode.yieldSignal?.aborted ?? false);
  }

  #deliverYield(): void {
    const o = this.#detach()!;
    if (!this.#serialOutcomes || o.responder.signal.aborted) {
      sendYield(this.#output, o.responder);
      return;
    }
    // Hold the cell's later tool calls and notifications until this outcome (and any earlier
    // one not yet written) is written.
    const { promise, resolve } = Promise.withResolvers<void>();
    const signal = o.responder.signal;
    const release = () => {
      this.#clock.clearTimeout(timer);
      signal.removeEventListener("abort", release);
      this.#lifetime.signal.removeEventListener("abort", release);
      resolve();
    };
    const timer = this.#clock.setTimeout(release, SERIAL_HOLD_MS);
    signal.addEventListener("abort", release, { once: true });
    this.#lifetime.signal.addEventListener("abort", release, { once: true });
    const earlier = this.#hold;
    const hold = earlier === undefined ? promise : earlier.then(() => promise);
    this.#hold = hold;
    void hold.then(() => {
      if (this.#hold === hold) this.#hold = undefined;
    });
    if (sendYield(this.#output, o.responder, release) === "restored") release();
  }

  /**
   * Calls the port now, or (`serialOutcomes`) after the delivered yield that is not yet written,
   * in the order of the calls. A tool call whose cell no longer needs it by then is not made.
   */
  #portCall(fn: () => void | Promise<void>, signal?: AbortSignal): Promise<void> {
    const hold = this.#hold;
    if (hold === undefined) return this.#callPort(fn);
    return hold.then(() => signal?.aborted ? undefined : this.#callPort(fn));
  }

  #deliverPending(): void {
    const o = this.#detach()!;
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
      this.#detach()?.reject(new CellActorError("closed", this.#cellId));
      this.#events.setConsumer(undefined);
      this.#events.close();
      this.#state.onTerminationClaimed(undefined);
      this.#abortPendingCalls();
      this.#lifetime.abort();
      for (const cmd of this.#commands.splice(0)) this.#routeAfterEnd(cmd);
      await Promise.allSettled([...this.#callbacks, ...this.#notifications]);
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
      if (this.#observer?.responder.signal.aborted) this.#detach();
      // 1. A pending termination request.
      if (this.#state.terminationClaimed) return await this.#terminate(false);
      // 2. The deadline or yield signal of the attached observation.
      if (this.#observer && this.#deadlineReady(this.#observer)) {
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
    if (this.#observer) return cmd.reject(new CellActorError("busy", this.#cellId));
    this.#attach(cmd.mode, cmd.responder, cmd.reject);
    if (cmd.mode.kind === "pendingFrontier" && this.#frontier) this.#deliverPending();
  }

  #track(set: Set<Promise<void>>, p: Promise<void>): void {
    const settled = p.then(() => {}, () => {}).finally(() => set.delete(settled));
    set.add(settled);
  }

  /** Handles one runtime event; tells the loop whether the cell completed, ended or must terminate. */
  async #handle(entry: ChannelEntry): Promise<"continue" | "completed" | "end" | "terminate"> {
    switch (entry.type) {
      case "started": {
        // The runtime reports the start when it hands the cell to its Worker, and the cell again
        // with its first output: only the first counts.
        if (this.#started) return "continue";
        this.#started = true;
        const o = this.#observer;
        if (o?.awaitingStart && o.mode.kind === "yieldAfter" && !o.deadlineFired) {
          o.awaitingStart = false;
          this.#arm(o, o.mode.ms);
        }
        return "continue";
      }
      case "contentItem":
        this.#output.push(entry.item);
        this.#frontier = false;
        return "continue";
      case "yieldRequested":
        this.#frontier = false;
        if (this.#observer?.mode.kind === "yieldAfter") this.#deliverYield();
        return "continue";
      case "toolCall": {
        this.#frontier = false;
        const { type: _, ...call } = entry;
        const controller = new AbortController();
        this.#pendingCalls.set(call.id, controller);
        this.#pendingIds.add(call.id);
        this.#track(
          this.#callbacks,
          this.#portCall(() => this.#port.invokeTool(call, controller.signal), controller.signal),
        );
        return "continue";
      }
      case "toolResultConsumed":
        this.#frontier = false;
        this.#pendingIds.delete(entry.id);
        this.#pendingCalls.delete(entry.id);
        return "continue";
      case "notify":
        this.#track(
          this.#notifications,
          this.#portCall(() => this.#port.notify(entry.callId, entry.text, this.#lifetime.signal)),
        );
        return "continue";
      case "pending":
        if (this.#observer?.mode.kind === "pendingFrontier") this.#deliverPending();
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

  #callPort(fn: () => void | Promise<void>): Promise<void> {
    try {
      return Promise.resolve(fn());
    } catch (e) {
      return Promise.reject(e);
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
    await Promise.allSettled([...this.#notifications]);
    this.#abortPendingCalls();
    this.#pendingCalls.clear();
    const build = (): CompletedEvent => {
      const content = this.#output.take();
      if (errorText === undefined) return { type: "completed", content, resultBufferedForMs: 0 };
      if (this.#mode === "server") content.push(scriptErrorItem(errorText));
      return { type: "completed", content, resultBufferedForMs: 0, errorText };
    };
    const commit = await this.#port.commit(writes, build, this.#state);
    if (commit === "rejected") {
      // Termination was claimed first: its Result (or end-of-stream) completes it at once.
      return "terminate";
    }
    if (this.#observer?.responder.signal.aborted) this.#detach();
    const observer = this.#detach();
    this.#state.deliverCompletion(observer?.responder);
    return fromResult ? "completed" : "end";
  }

  /** Cancels the cell's unanswered tool calls, newest first (as Codex's own host does). */
  #abortPendingCalls(): void {
    for (const c of [...this.#pendingCalls.values()].reverse()) c.abort();
  }

  /** A8. `finished`: a Result or end-of-stream has already been seen. */
  async #terminate(finished: boolean): Promise<void> {
    const observer = this.#observer;
    observer?.cleanup(); // stop observing the deadline; stays attached for the outcome
    this.#abortPendingCalls();
    this.#pendingCalls.clear();
    for (const cmd of this.#commands.splice(0)) {
      if (!cmd.responder.signal.aborted) cmd.reject(new CellActorError("busy", this.#cellId));
    }
    if (!this.#state.completionCommitted) {
      this.#port.stop();
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
            this.#track(
              this.#notifications,
              this.#portCall(() => this.#port.notify(entry.callId, entry.text, this.#lifetime.signal)),
            );
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
    this.#observer = undefined;
    this.#state.finishTermination({ type: "terminated", content: this.#output.take() }, observer?.responder);
  }
}

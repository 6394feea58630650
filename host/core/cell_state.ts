/**
 * A cell's outcomes and its completion/termination state (SPEC §4.12), shared by the actor,
 * terminators and the session store; the state outlives the actor.
 *
 * - The cell events an observation receives: `yielded`, `pending`, `completed`, `terminated`.
 * - A responder is where one outcome goes; a responder whose signal aborted is gone, and a window
 *   delivered to it is restored in front ({@link sendYield}, A3).
 * - {@link CellState} decides, atomically, between a committed completion and a claimed
 *   termination (A5, A7) and measures how long a completion stayed buffered (A6).
 *
 * @module
 */
import type { Clock } from "./clock.ts";
import type { ErrorText, OutputCollector } from "../output/output_collector.ts";

/** An observation's outcome (SPEC §4.12 cell events). */
export type CellEvent =
  /**
   * `written`: set when the actor holds back the cell's later tool calls and notifications until
   * the outcome is on the wire (`CellActorOptions.serialOutcomes`); the door calls it once it has
   * queued the outcome.
   */
  | { type: "yielded"; content: OutputCollector; written?: () => void }
  | { type: "pending"; content: OutputCollector; pendingToolCallIds: string[] }
  | { type: "completed"; content: OutputCollector; resultBufferedForMs: number; errorText?: ErrorText }
  | { type: "terminated"; content: OutputCollector };

/** The `completed` cell event. */
export type CompletedEvent = Extract<CellEvent, { type: "completed" }>;

/** A terminal cell event: `completed` or `terminated`. */
export type TerminalEvent = Extract<CellEvent, { type: "completed" | "terminated" }>;

/** The kinds of {@link CellActorError}. */
export type CellActorErrorKind = "busy" | "alreadyTerminating" | "closed";

/**
 * An observation or termination that the actor refused (SPEC §4.12 errors).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CellActorError } from "./cell_state.ts";
 *
 * const e = new CellActorError("busy", "7");
 * assert.equal(e.kind, "busy");
 * assert.equal(e.message, "exec cell 7 already has an active observer");
 * ```
 */
export class CellActorError extends Error {
  /** Which refusal. */
  readonly kind: CellActorErrorKind;
  /**
   * Creates the error with the SPEC's wording.
   *
   * @param kind which refusal
   * @param cellId the cell ID for the message; default `"?"`
   */
  constructor(kind: CellActorErrorKind, cellId = "?") {
    super(
      kind === "busy"
        ? `exec cell ${cellId} already has an active observer`
        : kind === "alreadyTerminating"
        ? `exec cell ${cellId} is already terminating`
        : `exec cell ${cellId} is closed`,
    );
    this.name = "CellActorError";
    this.kind = kind;
  }
}

/**
 * Where an outcome goes. A responder whose signal has aborted is *gone*; delivering to it fails.
 */
export interface CellResponder {
  /** Aborts when the observer goes away. */
  readonly signal: AbortSignal;
  /** Receives the outcome (called at most once, only while the signal has not aborted). */
  resolve(event: CellEvent): void;
}

/**
 * Delivers a `yielded` window to a responder, restoring it in front when the responder is gone.
 *
 * @param output the cell's current window
 * @param responder the observer
 * @returns `"delivered"`, or `"restored"` when the responder was gone (A3)
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { sendYield } from "./cell_state.ts";
 * import { createOutputCollector } from "../output/output_collector.ts";
 *
 * const out = createOutputCollector("client");
 * out.push({ type: "text", text: "kept" });
 * const gone = AbortSignal.abort();
 * assert.equal(sendYield(out, { signal: gone, resolve: () => {} }), "restored");
 * assert.equal(out.render().length, 1);
 * ```
 */
export function sendYield(
  output: OutputCollector,
  responder: CellResponder,
  written?: () => void,
): "delivered" | "restored" {
  const content = output.take();
  if (responder.signal.aborted) {
    output.restore(content);
    return "restored";
  }
  responder.resolve(written ? { type: "yielded", content, written } : { type: "yielded", content });
  return "delivered";
}

/** Options of a {@link CellState}. */
export interface CellStateOptions {
  /** The time source for `resultBufferedFor` (A6). */
  clock: Clock;
  /** The cell ID, for error messages. */
  cellId?: string;
}

/**
 * A cell's completion and termination state, shared by the actor, terminators and the session
 * store (SPEC §4.12).
 *
 * - The first of `commitCompletion` and `requestTermination` wins: a claim rejects a later commit
 *   without calling its functions; a committed completion answers a later claim.
 * - A committed completion is delivered exactly once; failed deliveries keep it buffered and keep
 *   its `resultBufferedFor` clock running (A6).
 * - `requestTermination()` rejects with `alreadyTerminating` while a claim exists, and with
 *   `closed` once the terminal outcome has been delivered.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CellState } from "./cell_state.ts";
 * import { createOutputCollector } from "../output/output_collector.ts";
 * import { realClock } from "./clock.ts";
 *
 * const state = new CellState({ clock: realClock });
 * const claim = state.requestTermination();
 * assert.equal(state.commitCompletion(() => assert.fail("not built"), () => assert.fail("not applied")), "rejected");
 * const terminated = { type: "terminated" as const, content: createOutputCollector("client") };
 * assert.equal(state.finishTermination(terminated), terminated);
 * assert.equal(await claim, terminated);
 * ```
 */
export class CellState {
  readonly #clock: Clock;
  readonly #cellId: string | undefined;
  #completion: { event: TerminalEvent; committedAt: number; buffered: boolean } | undefined;
  #claim: PromiseWithResolvers<CellEvent> | undefined;
  #terminalDelivered = false;
  #terminal: CellEvent | undefined;
  #onClaim: (() => void) | undefined;

  /**
   * Creates the state of a running cell.
   *
   * @param options clock and cell ID
   */
  constructor(options: CellStateOptions) {
    this.#clock = options.clock;
    this.#cellId = options.cellId;
  }

  /** Whether termination has been claimed. */
  get terminationClaimed(): boolean {
    return this.#claim !== undefined;
  }

  /** Whether a completion has been committed (delivered or not). */
  get completionCommitted(): boolean {
    return this.#completion !== undefined;
  }

  /** Whether a committed completion is waiting for delivery. */
  get completionBuffered(): boolean {
    return this.#completion !== undefined && !this.#terminalDelivered;
  }

  /** Whether the terminal outcome (`completed` or `terminated`) has been delivered. */
  get terminalDelivered(): boolean {
    return this.#terminalDelivered;
  }

  /**
   * Commits the completion atomically with the running → completed transition (A5).
   *
   * @param buildEvent builds the `completed` event; called only when committing
   * @param applyWrites merges the stored writes; called only when committing, before `buildEvent`
   * @returns `"committed"`, or `"rejected"` when termination was claimed first (neither function runs)
   * @throws {Error} when a completion was already committed
   */
  commitCompletion(buildEvent: () => CompletedEvent, applyWrites: () => void): "committed" | "rejected" {
    if (this.#claim) return "rejected";
    if (this.#completion) throw new Error("the cell's completion was already committed");
    applyWrites();
    const event = buildEvent();
    this.#completion = { event, committedAt: this.#clock.now(), buffered: false };
    return "committed";
  }

  #completedNow(): TerminalEvent {
    const c = this.#completion!;
    if (c.event.type !== "completed") return { ...c.event };
    const resultBufferedForMs = c.buffered ? Math.max(0, this.#clock.now() - c.committedAt) : 0;
    return { ...c.event, resultBufferedForMs };
  }

  /**
   * Delivers the committed completion to the attached observer, or buffers it.
   *
   * @param responder the attached observer, if any
   * @returns `"delivered"`, or `"buffered"` when there is none or it is gone
   * @throws {Error} when nothing was committed
   */
  deliverCompletion(responder?: CellResponder): "delivered" | "buffered" {
    if (!this.#completion) throw new Error("no completion was committed");
    if (this.#terminalDelivered) return "delivered";
    if (responder && !responder.signal.aborted) {
      this.#terminalDelivered = true;
      responder.resolve(this.#terminal = this.#completedNow());
      return "delivered";
    }
    this.#completion.buffered = true;
    return "buffered";
  }

  /**
   * Hands a new observation the buffered completion, if there is one.
   *
   * @param responder the new observer
   * @returns `"delivered"`; `"buffered"` when the responder is gone or no completion is buffered
   */
  routeObservation(responder: CellResponder): "delivered" | "buffered" {
    if (!this.completionBuffered) return "buffered";
    return this.deliverCompletion(responder);
  }

  /**
   * Claims termination (A7).
   *
   * @returns the claim: it resolves with the buffered completion at once when one was committed,
   *   else with what {@link finishTermination} delivers; it rejects with a {@link CellActorError}
   *   `alreadyTerminating` while another claim exists, or `closed` after the terminal outcome
   */
  requestTermination(): Promise<CellEvent> {
    if (this.#claim) return Promise.reject(new CellActorError("alreadyTerminating", this.#cellId));
    if (this.#terminalDelivered) return Promise.reject(new CellActorError("closed", this.#cellId));
    this.#claim = Promise.withResolvers<CellEvent>();
    if (this.#completion) {
      this.#completion.buffered = true;
      this.#terminalDelivered = true;
      this.#claim.resolve(this.#terminal = this.#completedNow());
    }
    this.#onClaim?.();
    return this.#claim.promise;
  }

  /**
   * Ends a claimed termination: delivers the committed completion if there was one, else
   * `terminated`, to the claimant and the attached observer.
   *
   * @param terminated the `terminated` event built by the actor
   * @param observer the attached observer, if any (skipped when gone)
   * @returns the event actually delivered
   */
  finishTermination(terminated: CellEvent, observer?: CellResponder): CellEvent {
    const event = this.#terminal ?? (this.#completion ? this.#completedNow() : terminated);
    this.#terminal = event;
    this.#terminalDelivered = true;
    this.#claim?.resolve(event);
    if (observer && !observer.signal.aborted) observer.resolve(event);
    return event;
  }

  /** Whether a new observation may attach: no claim and no terminal outcome delivered. */
  acceptingObservations(): boolean {
    return !this.#claim && !this.#terminalDelivered;
  }

  /**
   * Registers the callback run when termination is claimed (the actor's wake-up).
   *
   * @param onClaim the callback
   */
  onTerminationClaimed(onClaim: (() => void) | undefined): void {
    this.#onClaim = onClaim;
  }
}

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
 * - A completion is committed through the host (A5) and then delivered or buffered in the
 *   {@link CellState}, which outlives the actor; termination claimed first rejects the commit.
 * - Termination drains the event queue (releasing a blocked producer and keeping its item),
 *   ignores `Result`, completes at `Result` or end-of-stream and never waits for more (A8).
 * - End-of-stream without `Result` completes the cell with the end reason's error text (A9, A10).
 * - All time comes from the injected {@link Clock}.
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

/** A tool name as the runtime reports it. */
export interface ToolName {
  /** The tool's name. */
  name: string;
  /** Its namespace, if any. */
  namespace?: string;
}

/** A tool call issued by the cell. */
export interface CellToolCall {
  /** The per-cell runtime tool call ID (`tool-1`, …). */
  id: string;
  /** The tool that is called. */
  name: ToolName;
  /** The tool kind. */
  kind: "function" | "freeform";
  /** The call's input (a JSON value), absent when the cell passed none. */
  input?: unknown;
}

/** One event of a cell's runtime, in order (SPEC §4.12). */
export type RuntimeEvent =
  | { type: "started" }
  | { type: "contentItem"; item: PushedItem }
  | { type: "yieldRequested" }
  | ({ type: "toolCall" } & CellToolCall)
  | { type: "toolResultConsumed"; id: string }
  | { type: "notify"; callId: string; text: string }
  | { type: "pending" }
  | { type: "result"; storedValueWrites: Map<string, string>; errorText?: ErrorText }
  | { type: "threadPanicked" };

/** Why a runtime event stream ended; each maps to an A9 error text. */
export type EndReason =
  | { kind: "default" }
  | { kind: "heapLimit"; limitMb: number }
  | { kind: "restart"; stoppedCellId: string };

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

/** The queue entry that marks end-of-stream. */
export interface EndMarker {
  /** Always `"end"`. */
  type: "end";
  /** Why the stream ended. */
  reason: EndReason;
}

/** What the actor takes from a {@link RuntimeEventChannel}. */
export type ChannelEntry = RuntimeEvent | EndMarker;

/** Options of a {@link RuntimeEventChannel}. */
export interface RuntimeEventChannelOptions {
  /** `"client"`: unbounded; `"server"`: bounded by `capacity` and `bytes`. Default `"client"`. */
  mode?: OutputMode;
  /** Server mode: queued events at most (`outputEventQueueCapacity`). Default 128. */
  capacity?: number;
  /** Server mode: queued payload bytes at most (`outputEventQueueBytes`). Default 2,097,152. */
  bytes?: number;
  /**
   * Called with every entry the consumer takes, in order, and its payload bytes
   * ({@link eventPayloadBytes}; the host returns output credit).
   */
  onTake?: (entry: ChannelEntry, bytes: number) => void;
}

/**
 * The UTF-8 payload bytes of an event as SPEC §4.12 counts them: text, media URL, notification
 * text, tool input (its JSON text). Other events, including `Result`, count 0 bytes.
 *
 * @param event the runtime event
 * @returns its payload bytes
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { eventPayloadBytes } from "./cell_actor.ts";
 *
 * assert.equal(eventPayloadBytes({ type: "notify", callId: "c", text: "🦀" }), 4);
 * ```
 */
export function eventPayloadBytes(event: RuntimeEvent): number {
  switch (event.type) {
    case "contentItem": {
      const item = event.item;
      switch (item.type) {
        case "text":
          return utf8ByteLength(item.text);
        case "image":
          return utf8ByteLength(item.imageUrl);
        case "audio":
          return utf8ByteLength(item.audioUrl);
        case "trimmedText":
          return utf8ByteLength(item.head) + utf8ByteLength(item.tail);
        case "droppedMedia":
          return 0;
      }
      break;
    }
    case "notify":
      return utf8ByteLength(event.text);
    case "toolCall":
      return event.input === undefined ? 0 : utf8ByteLength(JSON.stringify(event.input) ?? "");
    default:
      return 0;
  }
}

interface Waiting {
  entry: ChannelEntry;
  bytes: number;
  resolve(accepted: boolean): void;
}

/**
 * The in-memory runtime event source of one cell (runtime → actor).
 *
 * - Client mode: unbounded; every send is accepted at once.
 * - Server mode: a send whose event would exceed `capacity` events or `bytes` payload bytes
 *   waits until the actor takes events; an event is always accepted into an empty queue.
 * - Sends are accepted in call order; `end()` queues end-of-stream behind waiting sends.
 * - `close()` (the actor went away) resolves every waiting and later send with `false`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { RuntimeEventChannel } from "./cell_actor.ts";
 *
 * const ch = new RuntimeEventChannel({ mode: "server", capacity: 1 });
 * assert.ok(ch.trySend({ type: "started" }));
 * const blocked = ch.send({ type: "pending" });
 * assert.equal(ch.take()?.type, "started");
 * assert.equal(await blocked, true);
 * assert.equal(ch.take()?.type, "pending");
 * ```
 */
export class RuntimeEventChannel {
  readonly #bounded: boolean;
  readonly #capacity: number;
  readonly #maxBytes: number;
  #queue: { entry: ChannelEntry; bytes: number }[] = [];
  #head = 0;
  #bytes = 0;
  #waiting: Waiting[] = [];
  #ended = false;
  #closed = false;
  #onReady: (() => void) | undefined;
  readonly #onTake: ((entry: ChannelEntry, bytes: number) => void) | undefined;

  /**
   * Creates an empty channel.
   *
   * @param options mode and Server-mode bounds
   */
  constructor(options: RuntimeEventChannelOptions = {}) {
    this.#bounded = options.mode === "server";
    this.#capacity = options.capacity ?? 128;
    this.#maxBytes = options.bytes ?? 2_097_152;
    this.#onTake = options.onTake;
  }

  /** Events queued and not yet taken. */
  get size(): number {
    return this.#queue.length - this.#head;
  }

  /** Sends still waiting for room. */
  get waitingSends(): number {
    return this.#waiting.length;
  }

  #fits(bytes: number): boolean {
    if (!this.#bounded || this.size === 0) return true;
    return this.size + 1 <= this.#capacity && this.#bytes + bytes <= this.#maxBytes;
  }

  #accept(entry: ChannelEntry, bytes: number): void {
    this.#queue.push({ entry, bytes });
    this.#bytes += bytes;
    this.#onReady?.();
  }

  /**
   * Sends an event only if it fits now.
   *
   * @param event the runtime event
   * @param bytes its payload bytes, when the caller has counted them already
   * @returns true when accepted; false when it would have to wait, or after `end()`/`close()`
   */
  trySend(event: RuntimeEvent, bytes: number = eventPayloadBytes(event)): boolean {
    if (this.#ended || this.#closed) return false;
    if (this.#waiting.length > 0 || !this.#fits(bytes)) return false;
    this.#accept(event, bytes);
    return true;
  }

  /**
   * Sends an event, waiting for room in Server mode.
   *
   * @param event the runtime event
   * @returns resolves true once accepted, false if the channel was ended or closed first
   */
  send(event: RuntimeEvent): Promise<boolean> {
    if (this.#ended || this.#closed) return Promise.resolve(false);
    const bytes = eventPayloadBytes(event);
    if (this.#waiting.length === 0 && this.#fits(bytes)) {
      this.#accept(event, bytes);
      return Promise.resolve(true);
    }
    const { promise, resolve } = Promise.withResolvers<boolean>();
    this.#waiting.push({ entry: event, bytes, resolve });
    return promise;
  }

  /**
   * Ends the stream (the isolate exited or the runtime stopped); idempotent.
   *
   * @param reason why it ended; default `{ kind: "default" }`
   */
  end(reason: EndReason = { kind: "default" }): void {
    if (this.#ended || this.#closed) return;
    this.#ended = true;
    const entry: EndMarker = { type: "end", reason };
    if (this.#waiting.length > 0) this.#waiting.push({ entry, bytes: 0, resolve: () => {} });
    else this.#accept(entry, 0);
  }

  /**
   * Takes the oldest queued entry and lets waiting sends in while they fit.
   *
   * @returns the entry, or undefined when the queue is empty
   */
  take(): ChannelEntry | undefined {
    if (this.size === 0) return undefined;
    const { entry, bytes } = this.#queue[this.#head];
    this.#queue[this.#head++] = undefined as never;
    this.#bytes -= bytes;
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
    while (
      this.#waiting.length > 0 &&
      (this.#waiting[0].entry.type === "end" || this.#fits(this.#waiting[0].bytes))
    ) {
      const w = this.#waiting.shift()!;
      this.#accept(w.entry, w.bytes);
      w.resolve(true);
    }
    this.#onTake?.(entry, bytes);
    return entry;
  }

  /**
   * The consumer is gone: waiting and later sends resolve false; queued entries are dropped.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#onReady = undefined;
    this.#queue = [];
    this.#head = 0;
    this.#bytes = 0;
    for (const w of this.#waiting.splice(0)) w.resolve(false);
  }

  /**
   * Registers the consumer's wake-up callback, called whenever an entry is queued.
   *
   * @param onReady the callback, or undefined to remove it
   */
  setConsumer(onReady: (() => void) | undefined): void {
    this.#onReady = onReady;
  }
}

/** An observation's outcome (SPEC §4.12 cell events). */
export type CellEvent =
  | { type: "yielded"; content: OutputCollector }
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
 * import { CellActorError } from "./cell_actor.ts";
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
 * import { sendYield } from "./cell_actor.ts";
 * import { createOutputCollector } from "../output/output_collector.ts";
 *
 * const out = createOutputCollector("client");
 * out.push({ type: "text", text: "kept" });
 * const gone = AbortSignal.abort();
 * assert.equal(sendYield(out, { signal: gone, resolve: () => {} }), "restored");
 * assert.equal(out.render().length, 1);
 * ```
 */
export function sendYield(output: OutputCollector, responder: CellResponder): "delivered" | "restored" {
  const content = output.take();
  if (responder.signal.aborted) {
    output.restore(content);
    return "restored";
  }
  responder.resolve({ type: "yielded", content });
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
 * import { CellState } from "./cell_actor.ts";
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
   * A delivered terminal outcome could not be sent after all (Client mode: it exceeded the gRPC
   * message limit, SPEC §8.3): `replacement` is buffered like a committed completion, so the next
   * observation or Terminate receives it. Repeating it for the same delivery changes nothing.
   *
   * @param delivered the terminal event that was handed out
   * @param replacement what to deliver instead
   */
  rebuffer(delivered: CellEvent, replacement: TerminalEvent): void {
    if (this.#terminal !== delivered) return;
    this.#completion = {
      event: replacement,
      committedAt: this.#completion?.committedAt ?? this.#clock.now(),
      buffered: true,
    };
    this.#terminal = undefined;
    this.#terminalDelivered = false;
    this.#claim = undefined;
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

/** How an observation waits (SPEC §4.12 observe modes). */
export type ObserveMode =
  | { kind: "yieldAfter"; ms: number; yieldSignal?: AbortSignal }
  | { kind: "pendingFrontier" };

/** Constructors of {@link ObserveMode} values. */
export const ObserveMode = {
  /**
   * Yield after `ms` (clamped to 0…2,147,483,647), or when `yieldSignal` aborts.
   *
   * @param ms the yield time
   * @param yieldSignal the YieldObservation signal
   * @returns the mode
   */
  yieldAfter(ms: number, yieldSignal?: AbortSignal): ObserveMode {
    return { kind: "yieldAfter", ms: Math.min(MAX_TIMER_MS, Math.max(0, ms)), yieldSignal };
  },
  /** Resolve at the next `Pending` (or the retained frontier). */
  pendingFrontier: { kind: "pendingFrontier" } as ObserveMode,
};

/** Control messages to a `pauseUntilResumed` runtime (and `terminate` to any runtime). */
export type RuntimeControl = "continue" | "resume" | "terminate";

/** What the actor needs from its session. */
export interface CellActorHost {
  /**
   * Commits the completion; may wait for the session store lock, then must call
   * `state.commitCompletion(buildEvent, applyWrites)` and return its answer.
   */
  commitCompletion(
    writes: Map<string, string>,
    buildEvent: () => CompletedEvent,
    state: CellState,
  ): Promise<"committed" | "rejected">;
  /** Publishes a notification; should settle promptly, and soon after `signal` aborts. */
  notify(callId: string, text: string, signal: AbortSignal): Promise<void>;
  /** Dispatches a tool call and answers the runtime itself; `signal` aborts on cancellation. */
  invokeTool(call: CellToolCall, signal: AbortSignal): Promise<void>;
  /** The actor has ended and all its host callbacks have settled (the cell is closed). */
  closed(): Promise<void>;
}

/** Options of {@link startCellActor}. */
export interface CellActorOptions {
  /** The session side. */
  host: CellActorHost;
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
  /** Whether the runtime pauses after `Pending`. Default `"continue"`. */
  runtimeMode?: "continue" | "pauseUntilResumed";
  /** Sends a control message to the runtime. Default: ignore. */
  sendRuntimeControl?: (control: RuntimeControl) => void;
  /** The cell ID, for error messages. */
  cellId?: string;
  /** Server collector limits. Default: the SPEC's. */
  outputLimits?: OutputLimits;
  /** The shared cell state. Default: a new one. */
  state?: CellState;
}

/** The handle of a running cell actor. */
export interface CellActorHandle {
  /** The shared cell state. */
  readonly state: CellState;
  /** The initial observation's outcome (rejects with the signal's reason when it is dropped). */
  readonly initial: Promise<CellEvent>;
  /** Resolves when the actor task has ended and the host's `closed()` has returned. */
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
  /**
   * Puts a delivered `yielded`/`pending` window back in front of the current one: the outcome
   * could not be sent after all (Client mode, SPEC §8.3).
   *
   * @param content the window to restore (possibly a replacement of the delivered one)
   */
  restoreOutput(content: OutputCollector): void;
}

interface Observer {
  mode: ObserveMode;
  responder: CellResponder;
  reject(error: unknown): void;
  timer?: unknown;
  deadlineAt?: number;
  deadlineFired: boolean;
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
 * @param options host, event channel, mode, clock, initial observation and the optional parts
 * @returns the handle: `initial`, `observe`, `terminate`, `done`
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ObserveMode, RuntimeEventChannel, startCellActor } from "./cell_actor.ts";
 * import { realClock } from "./clock.ts";
 *
 * const events = new RuntimeEventChannel();
 * const cell = startCellActor({
 *   host: {
 *     commitCompletion: (_writes, build, state) => Promise.resolve(state.commitCompletion(build, () => {})),
 *     notify: () => Promise.resolve(),
 *     invokeTool: () => Promise.resolve(),
 *     closed: () => Promise.resolve(),
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
  readonly #host: CellActorHost;
  readonly #events: RuntimeEventChannel;
  readonly #clock: Clock;
  readonly #state: CellState;
  readonly #output: OutputCollector;
  readonly #failureHandler: ((reason: string) => void) | undefined;
  readonly #pauseMode: boolean;
  readonly #control: (control: RuntimeControl) => void;
  readonly #cellId: string | undefined;
  /** Aborts the host callbacks when the cell stops. */
  readonly #lifetime = new AbortController();

  #observer: Observer | undefined;
  #commands: Command[] = [];
  #pendingCalls = new Map<string, AbortController>();
  #pendingIds = new Set<string>();
  #callbacks = new Set<Promise<void>>();
  #notifications = new Set<Promise<void>>();
  #frontier = false;
  #paused = false;
  #failureReported = false;
  #ended = false;
  #wake: (() => void) | undefined;

  constructor(options: CellActorOptions) {
    this.#host = options.host;
    this.#events = options.events;
    this.#clock = options.clock;
    this.#cellId = options.cellId;
    this.#state = options.state ?? new CellState({ clock: options.clock, cellId: options.cellId });
    this.#output = createOutputCollector(options.mode, options.outputLimits);
    this.#failureHandler = options.failureHandler;
    this.#pauseMode = options.runtimeMode === "pauseUntilResumed";
    this.#control = options.sendRuntimeControl ?? (() => {});

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
      restoreOutput: (content) => this.#output.restore(content),
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
      observer.deadlineAt = this.#clock.now() + mode.ms;
      if (mode.ms <= 0) observer.deadlineFired = true;
      else {
        observer.timer = this.#clock.setTimeout(() => {
          observer.deadlineFired = true;
          this.#notify();
        }, mode.ms);
      }
      mode.yieldSignal?.addEventListener("abort", onAbort);
    }
    this.#observer = observer;
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
    sendYield(this.#output, o.responder);
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

  #resumeRuntime(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.#frontier = false;
    this.#control("resume");
  }

  async #run(): Promise<void> {
    // Let the code that started the actor finish first, like a freshly spawned task.
    await Promise.resolve();
    try {
      await this.#loop();
    } finally {
      this.#ended = true;
      // Only an actor that failed (a host callback threw) still has an observer here.
      this.#detach()?.reject(new CellActorError("closed", this.#cellId));
      this.#events.setConsumer(undefined);
      this.#events.close();
      this.#state.onTerminationClaimed(undefined);
      for (const c of this.#pendingCalls.values()) c.abort();
      this.#lifetime.abort();
      for (const cmd of this.#commands.splice(0)) this.#routeAfterEnd(cmd);
      await Promise.allSettled([...this.#callbacks, ...this.#notifications]);
      await this.#host.closed();
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
    if (cmd.mode.kind === "pendingFrontier") {
      if (this.#frontier) this.#deliverPending();
      else this.#resumeRuntime();
    } else {
      this.#resumeRuntime();
    }
  }

  #track(set: Set<Promise<void>>, p: Promise<void>): void {
    const settled = p.then(() => {}, () => {}).finally(() => set.delete(settled));
    set.add(settled);
  }

  /** Handles one runtime event; tells the loop whether the cell completed, ended or must terminate. */
  async #handle(entry: ChannelEntry): Promise<"continue" | "completed" | "end" | "terminate"> {
    switch (entry.type) {
      case "started":
        return "continue";
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
        this.#track(this.#callbacks, this.#callHost(() => this.#host.invokeTool(call, controller.signal)));
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
          this.#callHost(() => this.#host.notify(entry.callId, entry.text, this.#lifetime.signal)),
        );
        return "continue";
      case "pending":
        if (this.#pauseMode) this.#paused = true;
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

  #callHost(fn: () => Promise<void>): Promise<void> {
    try {
      return fn();
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
    for (const c of this.#pendingCalls.values()) c.abort();
    this.#pendingCalls.clear();
    const build = (): CompletedEvent => ({
      type: "completed",
      content: this.#output.take(),
      resultBufferedForMs: 0,
      ...(errorText === undefined ? {} : { errorText }),
    });
    const commit = await this.#host.commitCompletion(writes, build, this.#state);
    if (commit === "rejected") {
      // Termination was claimed first: its Result (or end-of-stream) completes it at once.
      return "terminate";
    }
    if (this.#observer?.responder.signal.aborted) this.#detach();
    const observer = this.#detach();
    this.#state.deliverCompletion(observer?.responder);
    return fromResult ? "completed" : "end";
  }

  /** A8. `finished`: a Result or end-of-stream has already been seen. */
  async #terminate(finished: boolean): Promise<void> {
    const observer = this.#observer;
    observer?.cleanup(); // stop observing the deadline; stays attached for the outcome
    for (const c of this.#pendingCalls.values()) c.abort();
    this.#pendingCalls.clear();
    for (const cmd of this.#commands.splice(0)) {
      if (!cmd.responder.signal.aborted) cmd.reject(new CellActorError("busy", this.#cellId));
    }
    if (!this.#state.completionCommitted) {
      this.#control("terminate");
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
              this.#callHost(() => this.#host.notify(entry.callId, entry.text, this.#lifetime.signal)),
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

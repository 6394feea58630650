/**
 * One cell as the session sees it: it turns the session runtime's frames into runtime events for
 * its cell actor (SPEC §4.12, `cell_actor.ts`, which owns the observation semantics) and the
 * actor's outcomes into wire outcomes.
 *
 * - The session hands the cell one port (`cell_port.ts`); the cell hands the port's actor part to
 *   the actor unchanged, so a commit, a notification, a tool call or a stop goes from the actor to
 *   the session directly, and an outcome comes back actor → cell → session → front door.
 * - Runtime frames become actor runtime events in order; the frame reader never waits. Output
 *   credit goes back to the runtime (SPEC §8.10): in Client mode as each counted event arrives, in
 *   Server mode as the actor takes it from its bounded queue (an event that does not fit waits
 *   there as the cell's one blocked send). While the cell holds less than half of either limit,
 *   the `Credit` frame waits up to 2 ms, and a cell that ends meanwhile gets none.
 * - Outcomes leave through the mode's pipeline (SPEC §8.3–§8.5): Client mode renders the window
 *   as it is; an outcome too large for one gRPC message is consumed as if it had been sent (a
 *   completion's cell is forgotten, a yield's window is gone) and comes out as its sizes only
 *   (`oversize`), which each door reports as Codex's own host does (gRPC `OUT_OF_RANGE`, JSON V1's
 *   frame-limit error). Server mode (whose actor adds the `Script error:` item at commit)
 *   truncates to the cell's token budget and caps `error_text`.
 * - The isolate's exit (or its runtime's end) is the actor's end-of-stream, with the reason that
 *   selects the A9 error text (heap limit, runtime restart, or the default).
 * - `CellClosed` is emitted once both the actor has ended and the isolate has stopped.
 *
 * @module
 */
import { setImmediate } from "node:timers";
import type { WireCellEvent } from "../../proto/worker_codec.ts";
import { contentJsonOf, type ErrorText, errorTextJsonBytes } from "../output/output_collector.ts";
import { type CellActorHandle, ObserveMode, startCellActor } from "./cell_actor.ts";
import { type EndReason, eventPayloadBytes, type RuntimeEvent, RuntimeEventChannel } from "./cell_channel.ts";
import {
  fromWireTrimmed,
  itemBytes,
  type Outcome,
  outcomeResponseBytes,
  type OversizeOutcome,
  runtimeEventOf,
  toOutcome,
} from "./cell_outcome.ts";
import type { CellPort } from "./cell_port.ts";
import { CellActorError, type CellEvent } from "./cell_state.ts";
import { HostError } from "./errors.ts";
import type { ToolDefinitionInfo } from "./tool_bridge.ts";
import type { HostMetrics } from "../ops/telemetry.ts";

export {
  type ContentItem,
  type Outcome,
  type OversizeOutcome,
  serverMissingCellContent,
} from "./cell_outcome.ts";

/** Maps actor refusals to the SPEC statuses. */
function toStatus(error: unknown): unknown {
  if (error instanceof CellActorError && error.kind !== "closed") {
    return new HostError("cell_busy", error.message, { cause: error });
  }
  return error;
}

/** Options of {@link Cell}. */
export interface CellOptions {
  id: string;
  executionId: string;
  toolCallId: string;
  /** The Execute's tool definitions by JS name (the last definition of a name wins). */
  definitions?: ReadonlyMap<string, ToolDefinitionInfo>;
  /** The Execute's `traceparent`, copied into its tool calls. */
  traceparent?: string;
  /**
   * Builds the cell's port to its session (called once, by the constructor, with the new cell);
   * the cell hands the port's actor part to its actor.
   */
  port: (cell: Cell) => CellPort;
  heapLimitMb: number;
  /**
   * The Execute's initial observation: its yield time starts now, or with `startGraceMs` when the
   * runtime reports the cell's start (waiting at most that long for it); `startedAt` is the RPC's start.
   */
  initial: {
    yieldMs: number;
    yieldSignal?: AbortSignal;
    signal?: AbortSignal;
    startedAt?: number;
    startGraceMs?: number;
  };
  /**
   * Server mode: the budget of the Execute's own observation: its `max_output_tokens`, else the
   * host's `defaultMaxOutputTokens` (a Wait or Terminate brings its own, {@link Cell.observe}).
   */
  maxOutputTokens: number;
  /** Where delivered and dropped output bytes are counted (default: not counted). */
  metrics?: HostMetrics;
}

/**
 * How long acknowledged output waits before its credit goes back while the cell is far from its
 * limits (under half its events and half its bytes unacknowledged): most cells end within it, and
 * an ended cell needs no credit, so a short cell's outputs cost no `Credit` frame and no wake-up
 * of its runtime. Nearer the limits the credit goes back at once, so a flooding cell never waits
 * for it beyond the time its frames take to be read.
 */
const CREDIT_DELAY_MS = 2;

/** The runtime events that consume output credit (SPEC §8.10). */
const COUNTED = new Set<string>([
  "contentItem",
  "yieldRequested",
  "toolCall",
  "toolResultConsumed",
  "notify",
]);

/** The session-side handle of one cell. */
export class Cell {
  readonly id: string;
  readonly executionId: string;
  readonly toolCallId: string;
  /** The Execute's tool definitions by JS name. */
  readonly definitions: ReadonlyMap<string, ToolDefinitionInfo>;
  /** The Execute's `traceparent`, if any. */
  readonly traceparent: string | undefined;
  /** The initial (Execute) observation's outcome. */
  readonly initial: Promise<Outcome>;

  #port: CellPort;
  #events: RuntimeEventChannel;
  #actor: CellActorHandle;
  #heapLimitMb: number;
  #metrics: HostMetrics | undefined;
  #endReason: EndReason | undefined;
  /** The runtime reported the cell's result (else its end reason decides its completion). */
  #resulted = false;
  #ended = false;
  /** What ended the isolate without a result, for the failure handler's log. */
  #endDetail: string | undefined;
  /** The runtime reported that the cell's isolate began evaluating it. */
  #began = false;
  /** When the runtime reported that (the port's clock). */
  #beganAt: number | undefined;
  /** The cell's lasting synchronous stretch its runtime reported, until it ends (0: none). */
  #busyStretch = 0;
  /** The latest stretch the cell reported ended. */
  #idleUpTo = 0;
  /** Called once when the runtime next reports the cell busy ({@link Cell.whenBusy}). */
  #onBusy: (() => void) | undefined;
  #actorDone = false;
  #closed = false;
  #writes = new Map<string, string>();
  #sequence = 0;
  #maxTokens: number;
  /** Counted events acknowledged but not yet credited back, and their payload bytes. */
  #unacked = 0;
  #unackedBytes = 0;
  /** A credit return is scheduled for the next turn of the event loop. */
  #creditNow = false;
  /** The timer of a deferred credit return ({@link CREDIT_DELAY_MS}). */
  #creditTimer: unknown;

  /** @param options see {@link CellOptions} */
  constructor(options: CellOptions) {
    this.id = options.id;
    this.executionId = options.executionId;
    this.toolCallId = options.toolCallId;
    this.definitions = options.definitions ?? new Map();
    this.traceparent = options.traceparent;
    this.#heapLimitMb = options.heapLimitMb;
    this.#maxTokens = options.maxOutputTokens;
    this.#metrics = options.metrics;
    const port = this.#port = options.port(this);
    this.#events = new RuntimeEventChannel({
      mode: port.mode,
      capacity: port.queue.capacity,
      bytes: port.queue.bytes,
      onTake: port.mode === "server"
        ? (entry, bytes) => COUNTED.has(entry.type) && this.#ack(bytes)
        : undefined,
    });
    this.#actor = startCellActor({
      port,
      onClosed: () => {
        this.#actorDone = true;
        this.#maybeClosed();
      },
      events: this.#events,
      mode: port.mode,
      outputLimits: { maxMessageBytes: port.maxMessageBytes },
      budget: port.budget,
      clock: port.clock,
      failureHandler: (reason) => port.failed(reason, this.#endDetail),
      cellId: options.id,
      serialOutcomes: port.serialOutcomes ?? false,
      initialObserve: {
        mode: ObserveMode.yieldAfter(
          options.initial.yieldMs,
          options.initial.yieldSignal,
          options.initial.startGraceMs,
        ),
        signal: options.initial.signal,
      },
    });
    this.initial = this.#settle(
      this.#actor.initial,
      options.initial.startedAt ?? performance.now(),
      options.maxOutputTokens,
    );
  }

  /**
   * One counted event acknowledged (SPEC §8.10). Its credit goes back in one frame per burst:
   * after the frames read with it have been handled once the cell holds half of either limit,
   * else after {@link CREDIT_DELAY_MS}. An ended cell needs no credit.
   *
   * @param bytes the event's payload bytes
   */
  #ack(bytes: number): void {
    this.#unacked++;
    this.#unackedBytes += bytes;
    if (this.#creditNow) return;
    const { capacity, bytes: maxBytes } = this.#port.queue;
    if (this.#unacked * 2 >= capacity || this.#unackedBytes * 2 >= maxBytes) {
      this.#creditNow = true;
      setImmediate(() => this.#returnCredit());
    } else if (this.#creditTimer === undefined) {
      this.#creditTimer = this.#port.clock.setTimeout(() => this.#returnCredit(), CREDIT_DELAY_MS);
    }
  }

  #returnCredit(): void {
    this.#creditNow = false;
    this.#cancelCreditTimer();
    const events = this.#unacked;
    this.#unacked = 0;
    this.#unackedBytes = 0;
    if (events > 0 && !this.#ended) this.#port.credit(events);
  }

  #cancelCreditTimer(): void {
    if (this.#creditTimer === undefined) return;
    this.#port.clock.clearTimeout(this.#creditTimer);
    this.#creditTimer = undefined;
  }

  /** Allocates the execution's next tool-call `sequence` (1, 2, …). */
  nextSequence(): number {
    return ++this.#sequence;
  }

  /** The last `sequence` sent for this execution; 0 if none (`CellClosed`). */
  get lastSequence(): number {
    return this.#sequence;
  }

  /** Whether the cell's isolate is still running. */
  get running(): boolean {
    return !this.#ended;
  }

  /** Whether the runtime reported that the cell's isolate began evaluating it (`started`). */
  get began(): boolean {
    return this.#began;
  }

  /** When the cell's isolate began (the port's clock), once it has. */
  get beganAt(): number | undefined {
    return this.#beganAt;
  }

  /**
   * Whether the runtime reported the cell inside synchronous code for a while (`worker/cell_busy.ts`),
   * and the cell has not reported that stretch's end: it cannot confirm a stop now.
   */
  get busy(): boolean {
    return this.#busyStretch !== 0;
  }

  /** Calls `onBusy` once, when the runtime next reports the cell busy (replacing an earlier call). */
  whenBusy(onBusy: () => void): void {
    this.#onBusy = onBusy;
  }

  /** Whether a termination has been claimed. */
  get terminating(): boolean {
    return this.#actor.state.terminationClaimed;
  }

  async #settle(promise: Promise<CellEvent>, startedAt: number, maxTokens: number): Promise<Outcome> {
    let event: CellEvent;
    try {
      event = await promise;
    } catch (error) {
      throw toStatus(error);
    }
    if (event.type === "completed" || event.type === "terminated") this.#port.forget();
    // Handed over: the door holds the window now (until it has written it), no longer the cell.
    event.content.release?.();
    const oversize = this.#port.mode === "client" ? this.#oversize(event, startedAt) : undefined;
    const written = event.type === "yielded" ? event.written : undefined;
    if (oversize) {
      this.#metrics?.output(0, oversize.messageBytes);
      return event.type === "completed"
        ? {
          kind: "completed",
          items: [],
          resultBufferedForNs: Math.max(0, Math.round(event.resultBufferedForMs * 1e6)),
          oversize,
        }
        : {
          kind: event.type === "pending" ? "yielded" : event.type,
          items: [],
          oversize,
          ...(written ? { written } : {}),
        };
    }
    const outcome = toOutcome(event, this.#port.mode, maxTokens);
    if (written) outcome.written = written;
    this.#metrics?.output(itemBytes(outcome.items), event.content.omittedTextBytes);
    return outcome;
  }

  /** Why the cell's isolate stopped, once it has (`undefined` while it runs). */
  get endReason(): EndReason | undefined {
    return this.#endReason;
  }

  /** Whether the runtime reported the cell's result (a refused source counts as one). */
  get resulted(): boolean {
    return this.#resulted;
  }

  /**
   * A Client-mode outcome too large for one gRPC message, as Codex's own host treats it: it is not
   * kept for a later observation (the caller has consumed it; only its size is reported).
   *
   * @returns its sizes, or `undefined` when it fits
   */
  #oversize(event: CellEvent, startedAt: number): OversizeOutcome | undefined {
    const limit = this.#port.maxMessageBytes;
    const durationNs = Math.max(0, Math.round((performance.now() - startedAt) * 1e6));
    const messageBytes = outcomeResponseBytes(this.id, event.content.encodedBytes, event, durationNs);
    if (messageBytes <= limit) return undefined;
    const content = event.content.contentJson ?? contentJsonOf(event.content.render());
    const errorText = event.type === "completed" ? event.errorText : undefined;
    return errorText === undefined
      ? { messageBytes, limit, content }
      : { messageBytes, limit, content, errorTextJsonBytes: errorTextJsonBytes(errorText) };
  }

  /**
   * Handles one runtime event of this cell, in order.
   *
   * @param event the decoded `CellEvent` frame
   */
  onEvent(event: WireCellEvent): void {
    if (this.#ended) return;
    let runtimeEvent: RuntimeEvent | undefined;
    switch (event.event) {
      case "storedWrite":
        this.#writes.set(event.storedWrite!.key, event.storedWrite!.valueJson ?? "null");
        return;
      case "storedWrites":
        for (const { key, valueJson } of event.storedWrites!.entries ?? []) {
          this.#writes.set(key ?? "", valueJson ?? "null");
        }
        return;
      case "result": {
        this.#resulted = true;
        const r = event.result!;
        const t = r.trimmedError;
        const errorText: ErrorText | undefined = r.errorText ?? (t ? fromWireTrimmed(t) : undefined);
        runtimeEvent = errorText === undefined
          ? { type: "result", storedValueWrites: this.#writes }
          : { type: "result", storedValueWrites: this.#writes, errorText };
        break;
      }
      case "exited":
        return this.#exited(event.exited!);
      case "busy":
        // The two reports may cross (`worker/cell_busy.ts`): a stretch ended already stays ended.
        if (event.busy! > this.#idleUpTo) {
          this.#busyStretch = event.busy!;
          const onBusy = this.#onBusy;
          this.#onBusy = undefined;
          onBusy?.();
        }
        return;
      case "idle":
        this.#idleUpTo = Math.max(this.#idleUpTo, event.idle!);
        if (this.#busyStretch <= this.#idleUpTo) this.#busyStretch = 0;
        return;
      default:
        if (event.event === "started" && !this.#began) {
          this.#began = true;
          this.#beganAt = this.#port.clock.now();
        }
        runtimeEvent = runtimeEventOf(event, this.toolCallId);
    }
    if (this.#port.mode === "client" || !runtimeEvent) {
      const bytes = runtimeEvent ? eventPayloadBytes(runtimeEvent) : 0;
      if (COUNTED.has(event.event ?? "")) this.#ack(bytes);
      if (runtimeEvent) this.#events.trySend(runtimeEvent, bytes);
      return;
    }
    // Server mode: an event that does not fit waits as the blocked send; credit returns on take.
    this.#events.enqueue(runtimeEvent);
  }

  /** The isolate exited: end-of-stream, with the reason that selects the A9 error text. */
  #exited({ reason, detail }: NonNullable<WireCellEvent["exited"]>): void {
    if (reason !== "normal") this.#endDetail = detail ? `${reason}: ${detail}` : reason;
    // The bootstrap's internal fault is A10's ThreadPanicked, then end-of-stream.
    // It queues behind a blocked Server-mode send, like end-of-stream itself.
    if (reason === "fault") this.#events.enqueue({ type: "threadPanicked" });
    this.end(
      reason === "heap_limit" ? { kind: "heapLimit", limitMb: this.#heapLimitMb } : { kind: "default" },
    );
  }

  /**
   * The cell's isolate (or its runtime) stopped: end-of-stream for the actor.
   *
   * @param reason selects the completion error when no result arrived (A9)
   */
  end(reason: EndReason = { kind: "default" }): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#endReason = reason;
    if (reason.kind === "restart") {
      this.#endDetail ??= `the session runtime was restarted to stop cell ${reason.stoppedCellId}`;
    }
    this.#cancelCreditTimer();
    this.#events.end(reason);
    this.#maybeClosed();
  }

  /**
   * Completes a cell that never reached the runtime (refused source, SPEC §5.4–§5.5).
   *
   * @param errorText the error text
   */
  refuse(errorText: string): void {
    this.#resulted = true;
    this.#events.trySend({ type: "result", storedValueWrites: new Map(), errorText });
    this.end();
  }

  #maybeClosed(): void {
    if (this.#closed || !this.#ended || !this.#actorDone) return;
    this.#closed = true;
    this.#port.closed();
  }

  /**
   * Observes the cell until it yields, completes or is terminated.
   *
   * @param yieldMs the effective yield time (already capped and clamped)
   * @param options `signal`: the caller went away (nothing is consumed); `yieldSignal`: yield early;
   *   `startedAt`: the RPC's `performance.now()` at its start (for the size of its response);
   *   `maxTokens`: Server mode: this observation's token budget (default: the Execute's)
   * @returns the outcome
   * @throws {HostError} `cell_busy` when another observer is attached or a termination runs
   */
  observe(
    yieldMs: number,
    options: { signal?: AbortSignal; yieldSignal?: AbortSignal; startedAt?: number; maxTokens?: number } = {},
  ): Promise<Outcome> {
    return this.#settle(
      this.#actor.observe(ObserveMode.yieldAfter(yieldMs, options.yieldSignal), { signal: options.signal }),
      options.startedAt ?? performance.now(),
      options.maxTokens ?? this.#maxTokens,
    );
  }

  /**
   * Terminates the cell and returns its final outcome (SPEC §4.5).
   *
   * @param startedAt the Terminate's `performance.now()` at its start (for the size of its response)
   * @param maxTokens Server mode: the outcome's token budget (default: the Execute's)
   * @returns `terminated` with the drained output, or the committed natural completion
   * @throws {HostError} `cell_busy` `exec cell {id} is already terminating`
   */
  terminate(startedAt: number = performance.now(), maxTokens: number = this.#maxTokens): Promise<Outcome> {
    return this.#settle(this.#actor.terminate(), startedAt, maxTokens);
  }

  /** Resolves once the actor has ended. */
  get done(): Promise<void> {
    return this.#actor.done;
  }
}

/**
 * One cell as the session sees it: a thin adapter between the session runtime's frames and the
 * cell actor of SPEC §4.12 (`cell_actor.ts`), which owns the observation semantics.
 *
 * - Runtime frames become actor runtime events in order; the frame reader never waits (Client
 *   mode queues are unbounded; Server-mode credits arrive with the output feature).
 * - The isolate's exit (or its runtime's end) is the actor's end-of-stream, with the reason that
 *   selects the A9 error text (heap limit, runtime restart, or the default).
 * - `CellClosed` is emitted once both the actor has ended and the isolate has stopped.
 *
 * @module
 */
import type { WireCellEvent, WireItem } from "../proto/worker_codec.ts";
import type { OutputItem, OutputMode } from "../proto/output_collector.ts";
import {
  CellActorError,
  type CellActorHandle,
  type CellEvent,
  type CellState,
  type CompletedEvent,
  type EndReason,
  ObserveMode,
  type RuntimeEvent,
  RuntimeEventChannel,
  startCellActor,
} from "./cell_actor.ts";
import type { Clock } from "./clock.ts";
import { CodeModeError } from "./errors.ts";
import type { ToolDefinitionInfo } from "./tool_bridge.ts";

/** A public `ContentItem` as a plain object for the encoder. */
export type ContentItem =
  | { text: { text: string } }
  | { image: { imageUrl: string; detail: number } }
  | { audio: { audioUrl: string } };

/** What an observation returns, ready for the wire. */
export interface Outcome {
  kind: "yielded" | "completed" | "terminated";
  items: ContentItem[];
  errorText?: string;
}

/** What a cell needs from its session. */
export interface CellHost {
  clock: Clock;
  mode: OutputMode;
  /** Commits the cell's writes atomically with its completion; see `CellActorHost`. */
  commit(
    writes: Map<string, string>,
    buildEvent: () => CompletedEvent,
    state: CellState,
  ): Promise<"committed" | "rejected">;
  /** Asks the runtime to stop the cell (StopCell; a hard stop follows if it cannot confirm). */
  stop(cell: Cell): void;
  /** The cell's terminal outcome was delivered: Wait/Terminate now see it as missing. */
  forget(cell: Cell): void;
  /** The cell's isolate has stopped and its actor has ended. */
  closed(cell: Cell): void;
  /** Publishes a `notify()` of the cell. */
  notify(cell: Cell, text: string): void;
  /** Handles a tool call of the cell (answers the runtime itself). */
  invokeTool(
    cell: Cell,
    id: string,
    name: string,
    input: string | undefined,
    signal: AbortSignal,
  ): Promise<void>;
}

const DETAILS: Record<string, number> = { auto: 1, low: 2, high: 3, original: 4 };

/**
 * Converts a runtime content item to an output item.
 *
 * @param item the item from the frame
 * @returns the output item, or `undefined` for an item that carries no content
 */
export function toOutputItem(item: WireItem): OutputItem | undefined {
  if ("text" in item) return { type: "text", text: item.text };
  if ("image" in item) {
    const detail = (item.image.detail in DETAILS ? item.image.detail : "high") as
      | "auto"
      | "low"
      | "high"
      | "original";
    return { type: "image", imageUrl: item.image.imageUrl, detail };
  }
  if ("audioUrl" in item) return { type: "audio", audioUrl: item.audioUrl };
  if ("trimmedText" in item) return { type: "text", text: item.trimmedText.head + item.trimmedText.tail };
  return undefined;
}

/**
 * Converts rendered output items to public content items.
 *
 * @param items rendered items
 * @returns wire content items
 */
export function toContentItems(items: OutputItem[]): ContentItem[] {
  return items.map((item) =>
    item.type === "text"
      ? { text: { text: item.text } }
      : item.type === "image"
      ? { image: { imageUrl: item.imageUrl, detail: DETAILS[item.detail] ?? 3 } }
      : { audio: { audioUrl: item.audioUrl } }
  );
}

function toOutcome(event: CellEvent): Outcome {
  const items = toContentItems(event.content.render());
  if (event.type === "completed") {
    return event.errorText === undefined
      ? { kind: "completed", items }
      : { kind: "completed", items, errorText: event.errorText };
  }
  if (event.type === "pending") return { kind: "yielded", items };
  return { kind: event.type, items };
}

/** Maps actor refusals to the SPEC statuses. */
function toStatus(error: unknown): unknown {
  if (error instanceof CellActorError && error.kind !== "closed") {
    return new CodeModeError("FAILED_PRECONDITION", error.message);
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
  host: CellHost;
  heapLimitMb: number;
  /** The Execute's initial observation: its yield time starts now. */
  initial: { yieldMs: number; yieldSignal?: AbortSignal; signal?: AbortSignal };
}

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

  #host: CellHost;
  #events: RuntimeEventChannel;
  #actor: CellActorHandle;
  #heapLimitMb: number;
  #ended = false;
  #actorDone = false;
  #closed = false;
  #writes = new Map<string, string>();
  #sequence = 0;

  /** @param options see {@link CellOptions} */
  constructor(options: CellOptions) {
    this.id = options.id;
    this.executionId = options.executionId;
    this.toolCallId = options.toolCallId;
    this.definitions = options.definitions ?? new Map();
    this.traceparent = options.traceparent;
    this.#host = options.host;
    this.#heapLimitMb = options.heapLimitMb;
    this.#events = new RuntimeEventChannel({ mode: options.host.mode });
    this.#actor = startCellActor({
      host: {
        commitCompletion: (writes, buildEvent, state) => options.host.commit(writes, buildEvent, state),
        notify: (_callId, text) => {
          options.host.notify(this, text);
          return Promise.resolve();
        },
        invokeTool: (call, signal) =>
          options.host.invokeTool(
            this,
            call.id,
            call.name.name,
            call.input === undefined ? undefined : JSON.stringify(call.input),
            signal,
          ),
        closed: () => {
          this.#actorDone = true;
          this.#maybeClosed();
          return Promise.resolve();
        },
      },
      events: this.#events,
      mode: options.host.mode,
      clock: options.host.clock,
      cellId: options.id,
      initialObserve: {
        mode: ObserveMode.yieldAfter(options.initial.yieldMs, options.initial.yieldSignal),
        signal: options.initial.signal,
      },
      sendRuntimeControl: (control) => {
        if (control === "terminate" && !this.#ended) options.host.stop(this);
      },
    });
    this.initial = this.#settle(this.#actor.initial);
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

  /** Whether a termination has been claimed. */
  get terminating(): boolean {
    return this.#actor.state.terminationClaimed;
  }

  async #settle(promise: Promise<CellEvent>): Promise<Outcome> {
    let event: CellEvent;
    try {
      event = await promise;
    } catch (error) {
      throw toStatus(error);
    }
    if (event.type === "completed" || event.type === "terminated") this.#host.forget(this);
    return toOutcome(event);
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
      case "started":
        runtimeEvent = { type: "started" };
        break;
      case "contentItem": {
        const item = toOutputItem(event.contentItem!);
        if (item) runtimeEvent = { type: "contentItem", item };
        break;
      }
      case "yieldRequested":
        runtimeEvent = { type: "yieldRequested" };
        break;
      case "toolCall": {
        const call = event.toolCall!;
        let input: unknown;
        if (call.inputJson !== undefined) input = JSON.parse(call.inputJson);
        runtimeEvent = {
          type: "toolCall",
          id: call.runtimeToolCallId,
          name: { name: call.globalName },
          kind: "function",
          ...(call.inputJson === undefined ? {} : { input }),
        };
        break;
      }
      case "toolResultConsumed":
        runtimeEvent = { type: "toolResultConsumed", id: event.toolResultConsumed! };
        break;
      case "notify":
        runtimeEvent = { type: "notify", callId: this.toolCallId, text: event.notify ?? "" };
        break;
      case "pending":
        runtimeEvent = { type: "pending" };
        break;
      case "storedWrite":
        this.#writes.set(event.storedWrite!.key, event.storedWrite!.valueJson ?? "null");
        return;
      case "result": {
        const r = event.result!;
        const errorText = r.errorText ??
          (r.trimmedError ? r.trimmedError.head + r.trimmedError.tail : undefined);
        runtimeEvent = errorText === undefined
          ? { type: "result", storedValueWrites: this.#writes }
          : { type: "result", storedValueWrites: this.#writes, errorText };
        break;
      }
      case "exited": {
        const reason = event.exited!.reason;
        this.end(
          reason === "heap_limit" ? { kind: "heapLimit", limitMb: this.#heapLimitMb } : { kind: "default" },
        );
        return;
      }
    }
    if (runtimeEvent) this.#events.trySend(runtimeEvent);
  }

  /**
   * The cell's isolate (or its runtime) stopped: end-of-stream for the actor.
   *
   * @param reason selects the completion error when no result arrived (A9)
   */
  end(reason: EndReason = { kind: "default" }): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#events.end(reason);
    this.#maybeClosed();
  }

  /**
   * Completes a cell that never reached the runtime (refused source, SPEC §5.4–§5.5).
   *
   * @param errorText the error text
   */
  refuse(errorText: string): void {
    this.#events.trySend({ type: "result", storedValueWrites: new Map(), errorText });
    this.end();
  }

  #maybeClosed(): void {
    if (this.#closed || !this.#ended || !this.#actorDone) return;
    this.#closed = true;
    this.#host.closed(this);
  }

  /**
   * Observes the cell until it yields, completes or is terminated.
   *
   * @param yieldMs the effective yield time (already capped and clamped)
   * @param options `signal`: the caller went away (nothing is consumed); `yieldSignal`: yield early
   * @returns the outcome
   * @throws {CodeModeError} `FAILED_PRECONDITION` when another observer is attached or a termination runs
   */
  observe(
    yieldMs: number,
    options: { signal?: AbortSignal; yieldSignal?: AbortSignal } = {},
  ): Promise<Outcome> {
    return this.#settle(
      this.#actor.observe(ObserveMode.yieldAfter(yieldMs, options.yieldSignal), { signal: options.signal }),
    );
  }

  /**
   * Terminates the cell and returns its final outcome (SPEC §4.5).
   *
   * @returns `terminated` with the drained output, or the committed natural completion
   * @throws {CodeModeError} `FAILED_PRECONDITION` `exec cell {id} is already terminating`
   */
  terminate(): Promise<Outcome> {
    return this.#settle(this.#actor.terminate());
  }

  /** Resolves once the actor has ended. */
  get done(): Promise<void> {
    return this.#actor.done;
  }
}

/**
 * The bounded runtime event channel of one cell (SPEC §4.12): the runtime events in order, and the
 * queue that carries them from the session's frame reader to the cell actor.
 *
 * - Client mode: unbounded. Server mode: bounded by `outputEventQueueCapacity` events and
 *   `outputEventQueueBytes` payload bytes ({@link eventPayloadBytes}); a send that does not fit
 *   waits until the actor takes events, and an empty queue accepts any event.
 * - End-of-stream (`end(reason)`) queues behind waiting sends; `close()` (the actor went away)
 *   releases every waiting send with `false`.
 *
 * @module
 */
import type { ErrorText, OutputMode, PushedItem } from "../output/output_collector.ts";
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
 * import { eventPayloadBytes } from "./cell_channel.ts";
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
 * import { RuntimeEventChannel } from "./cell_channel.ts";
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
    const { promise, resolve } = Promise.withResolvers<boolean>();
    this.#offer(event, resolve);
    return promise;
  }

  /**
   * Sends an event, waiting for room in Server mode, as {@link RuntimeEventChannel.send} does, for
   * a producer that does not wait: the channel holds the waiting event (the cell's one blocked send)
   * and drops it if it ends or closes first.
   *
   * @param event the runtime event
   */
  enqueue(event: RuntimeEvent): void {
    this.#offer(event, () => {});
  }

  #offer(event: RuntimeEvent, resolve: (accepted: boolean) => void): void {
    if (this.#ended || this.#closed) return resolve(false);
    const bytes = eventPayloadBytes(event);
    if (this.#waiting.length === 0 && this.#fits(bytes)) {
      this.#accept(event, bytes);
      return resolve(true);
    }
    this.#waiting.push({ entry: event, bytes, resolve });
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

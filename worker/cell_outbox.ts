/**
 * The way out of a cell run (`cell_protocol.ts` items 3 and 4): its outputs, counted against the
 * host's credit, in their reduced forms when too large, written as frames to the runtime's stream
 * or posted whole on the cell worker's output port; and its result, sent exactly once.
 *
 * - A helper call posts its item, then waits in `Atomics.wait` while the cell is over its credit.
 *   The runtime wakes it when the host returns credit, or after setting the stop word, which makes
 *   this and every later helper call throw without posting anything.
 * - Items too large for one frame are posted in their reduced forms (first and last bytes plus the
 *   true length; an image URL as its size only), so a 65 MiB string never crosses a thread.
 * - A helper call may run with almost no stack left (a cell at stack exhaustion): an output is
 *   either sent and counted or neither, and a result whose sending ran out of stack stays owed
 *   until the cell run's next (shallow) entry sends it.
 *
 * @module
 */
import { jsonEscapeExtraBytes, utf8ByteLength, utf8Prefix, utf8Suffix } from "../proto/bytes.ts";
import { FrameError } from "../proto/frame_codec.ts";
import {
  DEFAULT_MAX_FRAME_BYTES,
  encodeCellFrames,
  encodeStoredWrites,
  FrameScratch,
} from "./cell_events.ts";
import { storeBatchEnd } from "../proto/store_batches.ts";
import {
  CELL_PROGRESS,
  CELL_RESULT,
  type CellCredit,
  type CellOutput,
  type CellTrimmedText,
  type CountedOutput,
  CREDIT_ACKED,
  CREDIT_BYTES,
  CREDIT_EVENTS,
  CREDIT_GENERATION,
  type WrittenOutput,
} from "./cell_protocol.ts";
import { PHASE_RUNNING } from "./cell_helpers.ts";

/** Writes complete frames of a cell to the runtime's stream. */
export type FrameWriter = (frames: Uint8Array) => void;

/** The cell run an outbox serves: its phase as helpers see it (see `CellRun.livePhase`). */
export interface OutboxOwner {
  livePhase(): number;
  /** The cell's busy stretches: a credit wait is not one (`cell_busy.ts`). */
  readonly busy?: { pause(): void; resume(): void };
}

/** Where a cell run's outputs go, set when it begins. */
export interface OutboxRoute {
  cellId: string;
  /** The largest frame the cell writes. */
  maxFrameBytes: number;
  /** The cell worker's output port; unset for a rehearsal that posts nowhere. */
  output: MessagePort | undefined;
  /** Writes frames to the runtime's stream; unset for a cell that posts its outputs whole. */
  write: FrameWriter | undefined;
  credit: CellCredit;
}

/** This isolate's frame buffer: frames are written synchronously, before the next encoding. */
const FRAMES = new FrameScratch();

/** What the runtime is told of a result the cell wrote itself. */
const WRITTEN_RESULT: WrittenOutput = { t: "result", w: true };

/** The outputs and the result of one cell run, and its credit account. */
export class CellOutbox {
  readonly #owner: OutboxOwner;
  #cellId = "";
  #output: MessagePort | undefined;
  /** Writes frames to the runtime's stream; unset for a cell that posts its outputs whole. */
  #write: FrameWriter | undefined;
  /** The largest frame this cell writes (the host's `maxWorkerFrameBytes`). */
  #maxFrameBytes = DEFAULT_MAX_FRAME_BYTES;
  #credit: CellCredit | undefined;
  /** Payload bytes of the counted outputs not yet acknowledged, oldest first from `#unackedHead`. */
  #unacked: number[] = [];
  #unackedHead = 0;
  #unackedBytes = 0;
  /** `CREDIT_ACKED` as last settled. */
  #ackedSeen = 0;
  /** `started` leaves with the cell's first output (one message, one frame write): see `post`. */
  #startedPending = false;
  /**
   * A posted output's credit wait was cut short by a stack overflow: the next output waits first.
   * A field, not a method: it is set where the stack is exhausted, and a call might overflow it.
   */
  owesWait = false;
  /**
   * The result, until it has been sent (the cell run's end may run short of stack). A field, not a
   * method, for the same reason as {@link CellOutbox.owesWait}.
   */
  unsentResult: CellOutput | undefined;
  /** The result's frames are written but the runtime has not been told yet. */
  #noticeOwed = false;
  /** How many of the result's stored writes are written already (a retried result goes on from there). */
  #writesSent = 0;

  /** @param owner the cell run whose phase decides whether a credit wait goes on */
  constructor(owner: OutboxOwner) {
    this.#owner = owner;
  }

  /** Routes the cell run's outputs. */
  open(route: OutboxRoute): void {
    this.#cellId = route.cellId;
    this.#maxFrameBytes = route.maxFrameBytes;
    this.#output = route.output;
    this.#write = route.write;
    this.#credit = route.credit;
  }

  /** From here `started` leaves with the cell's first output (one message, one frame write). */
  holdStarted(): void {
    this.#startedPending = true;
  }

  /** Sends `started` unless it left with an output already (a cell running without output yet). */
  sendStartedIfPending(): void {
    if (this.#startedPending) {
      this.#startedPending = false;
      this.post({ t: "started" });
    }
  }

  /** Whether the result is still to be sent, or the runtime still to be told of it. */
  get resultOwed(): boolean {
    return this.unsentResult !== undefined || this.#noticeOwed;
  }

  /** Sends {@link CellOutbox.unsentResult} and the note of a written one (retried if out of stack). */
  sendOwedResult(): void {
    const result = this.unsentResult;
    if (result !== undefined) {
      this.post(result);
      this.unsentResult = undefined;
    }
    if (this.#noticeOwed) this.#sendNotice();
  }

  /** The reduced form of a text over the trimming threshold, else undefined. */
  trim(text: string): CellTrimmedText | undefined {
    const credit = this.#credit!;
    // UTF-16 length × 3 bounds the UTF-8 length: skip counting short texts.
    if (text.length * 3 <= credit.trimTextOver) return undefined;
    const total = utf8ByteLength(text);
    if (total <= credit.trimTextOver) return undefined;
    const head = text.slice(0, utf8Prefix(text, credit.keepTextBytes).units);
    const tail = text.slice(text.length - utf8Suffix(text, credit.keepTextBytes).units);
    return { head, tail, total, jsonExtra: this.jsonExtra(text) };
  }

  /** What JSON escaping adds to a text sent in reduced form, when the session's door writes JSON. */
  jsonExtra(text: string): number {
    return this.#credit!.jsonSizes ? jsonEscapeExtraBytes(text) : 0;
  }

  /** A text item, reduced when over the trimming threshold. */
  postText(text: string): void {
    const trimmed = this.trim(text);
    if (trimmed === undefined) return this.postCounted({ t: "text", text, n: utf8ByteLength(text) });
    this.postCounted({
      t: "trimmedText",
      text: trimmed,
      n: utf8ByteLength(trimmed.head) + utf8ByteLength(trimmed.tail),
    });
  }

  /**
   * Counts and posts an output. A helper call may run with almost no stack left (a cell at stack
   * exhaustion), where any call, even of a built-in, can throw a stack overflow: the output is
   * counted first and the count undone if the post throws (with the same built-ins at the same
   * depth, which cannot overflow there: they just ran), so it is either sent and counted or
   * neither, and the helper call throws only in the second case.
   */
  postCounted(message: CountedOutput): void {
    const words = this.#credit!.words;
    if (this.#credit!.maxEvents === Infinity) {
      // Unlimited credit (a hand-driven isolate): nothing to settle.
      Atomics.add(words, CREDIT_EVENTS, 1);
      try {
        this.post(message);
      } catch (e) {
        Atomics.add(words, CREDIT_EVENTS, -1);
        throw e;
      }
      return;
    }
    // A call that posted but could not wait for credit (see the `emit` bridge) waits first.
    if (this.owesWait) {
      // Stopped while waiting: nothing is posted, and the helper call sees the stop.
      if (!this.awaitCredit()) return;
      this.owesWait = false;
    }
    this.#settleCredit();
    const unacked = this.#unacked;
    const length = unacked.length;
    unacked[length] = message.n;
    this.#unackedBytes += message.n;
    Atomics.store(words, CREDIT_BYTES, this.#unackedBytes);
    Atomics.add(words, CREDIT_EVENTS, 1);
    try {
      this.post(message);
    } catch (e) {
      unacked.length = length;
      this.#unackedBytes -= message.n;
      Atomics.store(words, CREDIT_BYTES, this.#unackedBytes);
      Atomics.add(words, CREDIT_EVENTS, -1);
      throw e;
    }
  }

  /** Settles the outputs the host has acknowledged since the last look (`CREDIT_ACKED`). */
  #settleCredit(): void {
    const words = this.#credit!.words;
    const acked = Atomics.load(words, CREDIT_ACKED);
    const unacked = this.#unacked;
    let head = this.#unackedHead;
    while (this.#ackedSeen !== acked && head < unacked.length) {
      this.#unackedBytes -= unacked[head++];
      this.#ackedSeen = (this.#ackedSeen + 1) | 0;
    }
    // More acknowledged than posted never happens; if it did, the surplus is ignored.
    if (head === unacked.length) this.#ackedSeen = acked;
    if (head > 1024 && head * 2 > unacked.length) {
      this.#unacked = unacked.slice(head);
      head = 0;
    }
    this.#unackedHead = head;
    Atomics.store(words, CREDIT_BYTES, this.#unackedBytes);
  }

  /**
   * Waits while the cell is over its output credit (the item is already posted).
   *
   * @returns false when the stop word was set: the helper call throws
   */
  awaitCredit(): boolean {
    const credit = this.#credit!;
    const words = credit.words;
    for (;;) {
      const generation = Atomics.load(words, CREDIT_GENERATION);
      if (this.#owner.livePhase() !== PHASE_RUNNING) return false;
      this.#settleCredit();
      if (
        this.#unacked.length - this.#unackedHead <= credit.maxEvents &&
        this.#unackedBytes <= credit.maxBytes
      ) return true;
      this.#owner.busy?.pause();
      Atomics.wait(words, CREDIT_GENERATION, generation);
      this.#owner.busy?.resume();
    }
  }

  /**
   * Sends `message` (after `started`, when that is still pending): as frames written to the
   * runtime's stream when the cell has a writer, else posted whole (`cell_protocol.ts` item 3).
   */
  post(message: CellOutput): void {
    let outputs: CellOutput[] = this.#startedPending ? [{ t: "started" }, message] : [message];
    // A helper call may run with almost no stack left: every step below may throw a stack
    // overflow, which reaches the helper (it throws, nothing was sent) until the frames are out;
    // `started` stays pending until then.
    try {
      if (this.#write !== undefined && message.t !== "stopped" && message.t !== "pong") {
        if (message.t === "result" && message.writes.length > 0) {
          this.#writeStored(message.writes);
          // `started` went with the first batch.
          message = { ...message, writes: [] };
          outputs = [message];
        }
        let frames: Uint8Array | undefined;
        try {
          frames = encodeCellFrames(this.#cellId, outputs, this.#maxFrameBytes, FRAMES);
        } catch (e) {
          // Over the frame limit (reduced forms keep items under it): posted whole, the runtime's
          // own encoding then fails the same way.
          if (!(e instanceof FrameError)) throw e;
        }
        if (frames !== undefined) {
          // Before the write: nothing that can throw may follow it (see `postCounted`).
          Atomics.add(this.#credit!.words, CELL_PROGRESS, 1);
          const result = message.t === "result";
          if (result) Atomics.store(this.#credit!.words, CELL_RESULT, 1);
          this.#noticeOwed = result;
          this.#write(frames);
          this.#startedPending = false;
          if (result) {
            this.unsentResult = undefined;
            // The runtime ends the cell worker once it reads this: the frames went first. If this
            // runs out of stack, the cell run's next entry sends it.
            this.#sendNotice();
          }
          return;
        }
      }
      // More than one batch: the batches go ahead of the result (one batch stays in it).
      if (
        message.t === "result" &&
        (this.#writesSent > 0 || storeBatchEnd(message.writes, 0) < message.writes.length)
      ) {
        this.#postStored(message.writes);
        message = { ...message, writes: [] };
        outputs = [message];
      }
      this.#output?.postMessage(outputs.length === 1 ? outputs[0] : outputs);
      this.#startedPending = false;
    } catch (e) {
      // A closed port or stream means the runtime has gone; nothing to report to.
      if (e instanceof RangeError) throw e;
    }
  }

  /**
   * Writes a result's stored writes ahead of it, one `StoredWrites` frame per batch
   * (`proto/store_batches.ts`), each its own write under the stream lock: a million keys never
   * become one buffer in the cell's heap, and other cells' frames may pass between batches (the
   * host collects a cell's writes until its result). `started`, when still pending, leads the
   * first batch. A write cut short by a stack overflow goes on from the batch it failed on.
   */
  #writeStored(writes: readonly (readonly [string, string])[]): void {
    const words = this.#credit!.words;
    while (this.#writesSent < writes.length) {
      const from = this.#writesSent;
      const end = storeBatchEnd(writes, from);
      let frames = encodeStoredWrites(this.#cellId, writes, from, end, this.#maxFrameBytes, FRAMES);
      if (this.#startedPending) {
        const started = encodeCellFrames(this.#cellId, [{ t: "started" }], this.#maxFrameBytes);
        const both = new Uint8Array(started.length + frames.length);
        both.set(started);
        both.set(frames, started.length);
        frames = both;
      }
      Atomics.add(words, CELL_PROGRESS, 1);
      this.#write!(frames);
      this.#startedPending = false;
      this.#writesSent = end;
    }
  }

  /**
   * Posts a result's stored writes ahead of it, one `storedWrites` message per batch, for a cell
   * that posts its outputs whole (in-process isolation) and has more than one batch to send: the
   * runtime's thread takes and forwards
   * each batch on its own, never the whole set in one message. `started`, when still pending,
   * leads the first batch; a post cut short by a stack overflow goes on from its batch.
   */
  #postStored(writes: [string, string][]): void {
    while (this.#writesSent < writes.length) {
      const from = this.#writesSent;
      const end = storeBatchEnd(writes, from);
      const batch: CellOutput = { t: "storedWrites", writes: writes.slice(from, end) };
      this.#output?.postMessage(this.#startedPending ? [{ t: "started" }, batch] : batch);
      this.#startedPending = false;
      this.#writesSent = end;
    }
  }

  /** Tells the runtime the result is written (retried by the cell run if this ran out of stack). */
  #sendNotice(): void {
    this.#output?.postMessage(WRITTEN_RESULT);
    this.#noticeOwed = false;
  }
}

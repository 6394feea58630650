/**
 * The frames the runtime's main thread writes to the host: its own (`exited` of a cell run that did
 * not finish, `started`, `pong`, faults), on the stream it shares with its cell workers.
 *
 * - Cell workers write their own frames to the process's stdout (`cell_protocol.ts` item 3); this
 *   thread writes its own under the same stream lock (`SINK_LOCK` of {@link FrameOutput.sink}),
 *   never waiting for it: a frame that finds the lock taken is retried {@link RETRY_MS} later.
 * - Frames go out in the order they were queued; small ones are joined into one write.
 * - A write that throws means the host is gone: `onBroken` is called and nothing more is written.
 *
 * @module
 */
import { encodeFrame } from "../proto/frame_codec.ts";
import { createWorkerCodec, type WireCellEvent, type WorkerToHost } from "../proto/worker_codec.ts";
import { LINE_END, tryLock, unlock } from "./cell_events.ts";
import { SINK_LOCK, SINK_WORDS } from "./cell_protocol.ts";
import type { Clock } from "../proto/clock.ts";

/** The main thread's lock ID on the stream words; cell workers get 2, 3, … */
const MAIN_LOCK_ID = 1;
/** Frames are joined into one write up to this size; larger ones are written on their own. */
const JOIN_BYTES = 256 * 1024;
/** How long a frame waits before this thread looks at the lock again. */
export const RETRY_MS = 1;

/** Options of a {@link FrameOutput}. */
export interface FrameOutputOptions {
  /** Writes complete frames to the host, all of them, blocking; throws once the host is gone. */
  write: (bytes: Uint8Array) => void;
  clock: Clock;
  /** The frame limit in force (the runtime's `Configure`). */
  maxFrameBytes: () => number;
  /** Called when a write threw: the output is gone, and so is the host. */
  onBroken: () => void;
}

/** The main thread's frames to the host, in order, under the stream lock shared with the cells. */
export class FrameOutput {
  readonly #codec = createWorkerCodec();
  readonly #write: (bytes: Uint8Array) => void;
  readonly #clock: Clock;
  readonly #maxFrameBytes: () => number;
  readonly #onBroken: () => void;
  /** The stream words shared with every cell worker (`SINK_*`, `cell_events.ts`). */
  readonly sink: Int32Array = new Int32Array(new SharedArrayBuffer(4 * SINK_WORDS));
  #nextLockId = MAIN_LOCK_ID + 1;
  /** Frames waiting for the stream lock, in order. */
  #pending: Uint8Array[] = [];
  #flushQueued = false;
  #retry: unknown;

  /** @param options see {@link FrameOutputOptions} */
  constructor(options: FrameOutputOptions) {
    this.#write = options.write;
    this.#clock = options.clock;
    this.#maxFrameBytes = options.maxFrameBytes;
    this.#onBroken = options.onBroken;
  }

  /** A new cell worker's lock ID on {@link FrameOutput.sink}. */
  nextLockId(): number {
    return this.#nextLockId++;
  }

  /** Whether frames still wait for the stream lock. */
  get hasPending(): boolean {
    return this.#pending.length > 0;
  }

  /** Whether the cell worker with lock ID `lockId` holds the stream lock (it is writing). */
  isLockedBy(lockId: number): boolean {
    return Atomics.load(this.sink, SINK_LOCK) === lockId;
  }

  /**
   * Frees the stream lock of a cell worker that ended, maybe while writing (terminated, or out of
   * memory), and writes the frames that waited for it. A frame cut short there breaks the stream,
   * which the host reports as a runtime failure.
   */
  releaseLock(lockId: number): void {
    unlock(this.sink, lockId);
    if (this.#pending.length > 0) this.flush();
  }

  /** Encodes `message` (with its line end) and queues its frame. */
  send(message: WorkerToHost): void {
    message.lineEnd = LINE_END;
    this.queue(encodeFrame(this.#codec.encodeWorkerToHost(message), this.#maxFrameBytes()));
  }

  /** Sends one cell event. */
  sendCellEvent(event: WireCellEvent): void {
    this.send({ cellEvent: event });
  }

  /** Queues a complete frame; the queue is written at the end of this task's microtasks. */
  queue(frame: Uint8Array): void {
    this.#pending.push(frame);
    if (this.#flushQueued) return;
    this.#flushQueued = true;
    queueMicrotask(this.flush);
  }

  /**
   * Writes the pending frames in order, small ones joined, if the stream lock is free; else looks
   * again in {@link RETRY_MS} (a cell is writing). The write blocks this thread only while the host
   * is not reading: it always reads.
   */
  readonly flush = (): void => {
    this.#flushQueued = false;
    if (this.#pending.length === 0) return;
    if (!tryLock(this.sink, MAIN_LOCK_ID)) {
      this.#retry ??= this.#clock.setTimeout(() => {
        this.#retry = undefined;
        this.flush();
      }, RETRY_MS);
      return;
    }
    const frames = this.#pending;
    this.#pending = [];
    try {
      this.#writeJoined(frames);
    } catch {
      this.#onBroken();
    } finally {
      unlock(this.sink, MAIN_LOCK_ID);
    }
  };

  #writeJoined(frames: Uint8Array[]): void {
    let group: Uint8Array[] = [];
    let groupBytes = 0;
    const emit = () => {
      if (group.length === 0) return;
      const bytes = group.length === 1 ? group[0] : new Uint8Array(groupBytes);
      if (group.length > 1) {
        let offset = 0;
        for (const frame of group) {
          bytes.set(frame, offset);
          offset += frame.length;
        }
      }
      group = [];
      groupBytes = 0;
      this.#write(bytes);
    };
    for (const frame of frames) {
      if (groupBytes + frame.length > JOIN_BYTES) emit();
      group.push(frame);
      groupBytes += frame.length;
    }
    emit();
  }
}

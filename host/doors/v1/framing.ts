/**
 * Frames of the JSON "host V1" protocol (SPEC §9.10): a 4-byte little-endian payload length, then
 * that many bytes of UTF-8 JSON. A frame longer than {@link MAX_FRAME_BYTES} is never buffered:
 * its payload is discarded as it arrives, and only its first {@link OVERSIZED_HEAD_BYTES} bytes
 * are kept so that the caller can answer the request by its id.
 *
 * The writer side is a bounded queue of encoded frames ({@link FrameWriter}): a producer waits for
 * room, so a client that stops reading holds producers back instead of growing memory.
 *
 * @module
 */

/** Largest payload of one frame (64 MiB). */
export const MAX_FRAME_BYTES = 67_108_864;
/** How much of an oversized frame is kept to find its `id`. */
export const OVERSIZED_HEAD_BYTES = 4_096;
/** Frames the outgoing queue holds at most. */
export const OUTGOING_QUEUE_FRAMES = 128;

/** What the reader yields. */
export type IncomingFrame =
  | { type: "frame"; payload: Uint8Array }
  | { type: "oversized"; length: number; head: Uint8Array };

/** The stream ended inside a frame. */
export class FramingError extends Error {
  override name = "FramingError";
}

/**
 * Reads frames until EOF at a frame boundary.
 *
 * @param readable the byte stream (the host's stdin)
 * @param maxBytes the payload limit (default {@link MAX_FRAME_BYTES})
 * @returns the frames in order
 * @throws {FramingError} on EOF inside a frame
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { encodeFrame, readFrames } from "./framing.ts";
 *
 * const frames = [];
 * for await (const f of readFrames(ReadableStream.from([encodeFrame({ a: 1 })]))) frames.push(f);
 * assert.equal(frames.length, 1);
 * ```
 */
export async function* readFrames(
  readable: ReadableStream<Uint8Array>,
  maxBytes: number = MAX_FRAME_BYTES,
): AsyncGenerator<IncomingFrame> {
  const reader = readable.getReader();
  let chunk: Uint8Array = new Uint8Array(0);
  let at = 0;
  /** Next bytes from the stream; false at EOF. */
  const more = async (): Promise<boolean> => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      if (value.length === 0) continue;
      chunk = value;
      at = 0;
      return true;
    }
  };
  try {
    for (;;) {
      // The length prefix, possibly split across chunks.
      const prefix = new Uint8Array(4);
      let have = 0;
      while (have < 4) {
        if (at === chunk.length && !(await more())) {
          if (have === 0) return;
          throw new FramingError("code-mode IPC stream ended inside a frame length");
        }
        const n = Math.min(4 - have, chunk.length - at);
        prefix.set(chunk.subarray(at, at + n), have);
        have += n;
        at += n;
      }
      const length = new DataView(prefix.buffer).getUint32(0, true);
      const oversized = length > maxBytes;
      const keep = oversized ? Math.min(length, OVERSIZED_HEAD_BYTES) : length;
      const payload = new Uint8Array(keep);
      let got = 0;
      while (got < length) {
        if (at === chunk.length && !(await more())) {
          throw new FramingError(`code-mode IPC stream ended inside a ${length}-byte frame`);
        }
        const n = Math.min(length - got, chunk.length - at);
        if (got < keep) payload.set(chunk.subarray(at, at + Math.min(n, keep - got)), got);
        got += n;
        at += n;
      }
      yield oversized ? { type: "oversized", length, head: payload } : { type: "frame", payload };
    }
  } finally {
    reader.releaseLock();
  }
}

/**
 * Encodes one message as a frame (no size check).
 *
 * @param message a JSON value
 * @returns the length prefix and the UTF-8 JSON
 */
export function encodeFrame(message: unknown): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(message));
  const frame = new Uint8Array(4 + json.length);
  new DataView(frame.buffer).setUint32(0, json.length, true);
  frame.set(json, 4);
  return frame;
}

/**
 * The outgoing side: a FIFO of encoded frames, at most `capacity`, written one at a time and
 * each flushed as it is written. After a write fails (the client closed its end) frames are
 * dropped.
 */
export class FrameWriter {
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #queue: Uint8Array[] = [];
  #capacity: number;
  #room: PromiseWithResolvers<void>[] = [];
  #idle: PromiseWithResolvers<void> | undefined;
  #writing = false;
  #broken = false;

  /**
   * @param writable the byte sink (the host's stdout)
   * @param capacity frames queued at most (default {@link OUTGOING_QUEUE_FRAMES})
   */
  constructor(writable: WritableStream<Uint8Array>, capacity: number = OUTGOING_QUEUE_FRAMES) {
    this.#writer = writable.getWriter();
    this.#capacity = capacity;
  }

  /** Frames queued and not yet written. */
  get queued(): number {
    return this.#queue.length;
  }

  /** Whether a write failed. */
  get broken(): boolean {
    return this.#broken;
  }

  /**
   * Queues a frame, waiting while the queue is full (and not after the writer broke).
   *
   * @param frame an encoded frame
   */
  async send(frame: Uint8Array): Promise<void> {
    while (!this.#broken && this.#queue.length >= this.#capacity) {
      const room = Promise.withResolvers<void>();
      this.#room.push(room);
      await room.promise;
    }
    if (this.#broken) return;
    this.#queue.push(frame);
    if (!this.#writing) void this.#pump();
  }

  /** Resolves once every queued frame has been written (or dropped). */
  flushed(): Promise<void> {
    if (this.#queue.length === 0 && !this.#writing) return Promise.resolve();
    this.#idle ??= Promise.withResolvers<void>();
    return this.#idle.promise;
  }

  /** Closes the sink after the queued frames. */
  async close(): Promise<void> {
    await this.flushed();
    await this.#writer.close().catch(() => {});
  }

  async #pump(): Promise<void> {
    this.#writing = true;
    while (this.#queue.length > 0) {
      const frame = this.#queue.shift()!;
      this.#room.shift()?.resolve();
      if (this.#broken) continue;
      try {
        await this.#writer.write(frame);
      } catch {
        this.#broken = true;
        for (const room of this.#room.splice(0)) room.resolve();
      }
    }
    this.#writing = false;
    this.#idle?.resolve();
    this.#idle = undefined;
  }
}

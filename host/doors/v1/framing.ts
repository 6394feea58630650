/**
 * Frames of the JSON "host V1" protocol: a 4-byte little-endian payload length, then that many
 * bytes of UTF-8 JSON. As in Codex's own host, a length over {@link MAX_FRAME_BYTES} is refused as
 * soon as the 4 length bytes are read (nothing of its payload is buffered) and EOF inside a frame
 * is `early eof`; both end the connection.
 *
 * The writer side is a bounded queue of encoded frames ({@link FrameWriter}): a producer waits for
 * room, so a client that stops reading holds producers back instead of growing memory.
 *
 * @module
 */

/** Largest payload of one frame (64 MiB). */
export const MAX_FRAME_BYTES = 67_108_864;
/** Frames the outgoing queue holds at most. */
export const OUTGOING_QUEUE_FRAMES = 128;

/** The stream ended inside a frame, or announced a frame over the limit. */
export class FramingError extends Error {
  override name = "FramingError";
}

/** The message of a frame over the limit, both ways (Codex's host's text). */
export function frameTooLarge(length: number, maxBytes: number = MAX_FRAME_BYTES): string {
  return `code-mode IPC frame length ${length} exceeds ${maxBytes} bytes`;
}

/**
 * Reads frames until EOF at a frame boundary.
 *
 * @param readable the byte stream (the host's stdin)
 * @param maxBytes the payload limit (default {@link MAX_FRAME_BYTES})
 * @returns the frames' payloads in order
 * @throws {FramingError} `early eof` inside a frame, or {@link frameTooLarge} for a length over
 *   `maxBytes`
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
): AsyncGenerator<Uint8Array> {
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
          throw new FramingError("early eof");
        }
        const n = Math.min(4 - have, chunk.length - at);
        prefix.set(chunk.subarray(at, at + n), have);
        have += n;
        at += n;
      }
      const length = new DataView(prefix.buffer).getUint32(0, true);
      if (length > maxBytes) throw new FramingError(frameTooLarge(length, maxBytes));
      const payload = new Uint8Array(length);
      let got = 0;
      while (got < length) {
        if (at === chunk.length && !(await more())) throw new FramingError("early eof");
        const n = Math.min(length - got, chunk.length - at);
        payload.set(chunk.subarray(at, at + n), got);
        got += n;
        at += n;
      }
      yield payload;
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

/** The rejection handler of closing a sink whose reader has gone (nothing is left to tell). */
function lostReader(_error: unknown): void {}

/**
 * The outgoing side: a FIFO of encoded frames, at most `capacity`, written one at a time and
 * each flushed as it is written. After a write fails (the client closed its end) frames are
 * dropped.
 *
 * - Fair: producers waiting for room get it in the order they came; a later producer never takes
 *   a freed place ahead of them (else a busy producer could starve another one for ever).
 */
export class FrameWriter {
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #queue: Uint8Array[] = [];
  #capacity: number;
  /** Frames waiting for room, in order; each is moved into the queue when a place frees. */
  #waiting: { frame: Uint8Array; queued: PromiseWithResolvers<void> }[] = [];
  #idle: PromiseWithResolvers<void> | undefined;
  #writing = false;
  #pumping: Promise<void> = Promise.resolve();
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
    if (this.#broken) return;
    if (this.#waiting.length > 0 || this.#queue.length >= this.#capacity) {
      const queued = Promise.withResolvers<void>();
      this.#waiting.push({ frame, queued });
      return await queued.promise;
    }
    this.#queue.push(frame);
    // Never rejects (a failed write breaks the writer); `flushed()` and `close()` wait for it.
    if (!this.#writing) this.#pumping = this.#pump();
  }

  /** Moves waiting frames into the queue while it has room. */
  #admit(): void {
    while (this.#waiting.length > 0 && this.#queue.length < this.#capacity) {
      const next = this.#waiting.shift()!;
      this.#queue.push(next.frame);
      next.queued.resolve();
    }
  }

  /** Releases every waiting producer (its frame is dropped). */
  #releaseAll(): void {
    for (const waiting of this.#waiting.splice(0)) waiting.queued.resolve();
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
    await this.#pumping;
    // A sink that cannot close has lost its reader: there is no one left to tell.
    await this.#writer.close().catch(lostReader);
  }

  /**
   * Stops writing: frames queued and not yet written are dropped, later ones too, and producers
   * waiting for room go on (the connection ended: Codex's host writes nothing after its client's
   * EOF or a fatal error).
   */
  stop(): void {
    this.#broken = true;
    this.#queue.length = 0;
    this.#releaseAll();
  }

  async #pump(): Promise<void> {
    this.#writing = true;
    while (this.#queue.length > 0) {
      const frame = this.#queue.shift()!;
      this.#admit();
      if (this.#broken) continue;
      try {
        await this.#writer.write(frame);
      } catch {
        this.#broken = true;
        this.#queue.length = 0;
        this.#releaseAll();
      }
    }
    this.#writing = false;
    this.#idle?.resolve();
    this.#idle = undefined;
  }
}

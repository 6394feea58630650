/**
 * Length-prefixed framing of the internal worker protocol (SPEC §9.4): a 4-byte big-endian
 * unsigned length, then that many protobuf bytes.
 *
 * - The decoder is a pure state machine (header → body → header …) with no I/O of its own, so
 *   the host and the session runtime drive it from any byte source.
 * - A length above `maxFrameBytes` is rejected as soon as the 4 header bytes are known, before
 *   any body byte is buffered.
 * - Any chunking is accepted: 1-byte chunks, several frames per chunk, a header split across
 *   chunks.
 * - EOF at a frame boundary is an orderly end; EOF inside a frame (header included) is a
 *   {@link FrameError}.
 * - A zero-length frame is valid here; whether an empty envelope is acceptable is the caller's
 *   decision (the host rejects it, §3.5).
 *
 * This module is bundled into the session runtime, so it uses standard web APIs only.
 *
 * @module
 */

/** The largest length the 4-byte header can carry. */
const MAX_HEADER_LENGTH = 0xffff_ffff;

/** Bytes in a frame header. */
const HEADER_BYTES = 4;

/** Up to this many body bytes are copied byte by byte rather than with `subarray` + `set`. */
const SMALL_COPY_BYTES = 16;

/**
 * A violation of the framing rules: an oversized length, or EOF inside a frame.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const error = new FrameError("frame length 70000000 exceeds 68157440 bytes");
 * assert.equal(error.detail, error.message);
 * assert.equal(error.name, "FrameError");
 * ```
 */
export class FrameError extends Error {
  /** What was violated, lower-case and specific; the same text as `message`. */
  readonly detail: string;

  /**
   * Creates a framing error.
   *
   * @param detail what was violated, e.g. `frame length 70000000 exceeds 68157440 bytes`
   * @param options the standard error options (`cause`)
   */
  constructor(detail: string, options?: ErrorOptions) {
    super(detail, options);
    this.name = "FrameError";
    this.detail = detail;
  }
}

/** Options of {@link FrameDecoder} and {@link readFrames}. */
export interface FrameDecoderOptions {
  /**
   * Whether a frame that lies wholly inside one pushed chunk is returned as a copy (`true`) or
   * as a `subarray` view of that chunk (`false`).
   *
   * Default `true`: a view is wrong if the producer reuses or mutates its buffer after the push,
   * and it keeps the whole chunk (often 64 KiB) alive for as long as a small frame is queued.
   * Pass `false` only when every chunk is freshly allocated and never touched again.
   * A frame spread over several chunks is always a fresh buffer of its own.
   */
  copy?: boolean;
}

function checkMaxFrameBytes(maxFrameBytes: number): void {
  if (
    !Number.isInteger(maxFrameBytes) || maxFrameBytes < 0 || maxFrameBytes > MAX_HEADER_LENGTH
  ) {
    throw new RangeError(
      `maxFrameBytes must be an integer from 0 to ${MAX_HEADER_LENGTH}, got ${maxFrameBytes}`,
    );
  }
}

function oversize(length: number, maxFrameBytes: number): FrameError {
  return new FrameError(`frame length ${length} exceeds ${maxFrameBytes} bytes`);
}

/**
 * Encodes one frame: the 4-byte big-endian length of `body`, then `body`.
 *
 * One allocation and one copy; `body` is not retained.
 *
 * @param body the protobuf bytes of one envelope (may be empty)
 * @param maxFrameBytes the largest body length allowed (`maxWorkerFrameBytes`)
 * @returns a new buffer of `4 + body.length` bytes
 * @throws {FrameError} if `body.length` exceeds `maxFrameBytes`
 * @throws {RangeError} if `maxFrameBytes` is not an integer from 0 to 2^32 - 1
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const frame = encodeFrame(new Uint8Array([7, 8]), 1024);
 * assert.deepEqual(frame, new Uint8Array([0, 0, 0, 2, 7, 8]));
 * assert.throws(() => encodeFrame(new Uint8Array(5), 4), FrameError);
 * ```
 */
export function encodeFrame(body: Uint8Array, maxFrameBytes: number): Uint8Array {
  const frame = new Uint8Array(HEADER_BYTES + body.length);
  writeFrameHeader(frame, 0, body.length, maxFrameBytes);
  frame.set(body, HEADER_BYTES);
  return frame;
}

/** The bytes of a frame's length header. */
export const FRAME_HEADER_BYTES = HEADER_BYTES;

/**
 * Writes a frame's length header in place, for a body the caller writes right after it.
 *
 * @param out the buffer
 * @param pos where the header goes
 * @param length the body's length
 * @param maxFrameBytes the largest body length allowed
 * @returns the position after the header
 * @throws {FrameError} if `length` exceeds `maxFrameBytes`
 * @throws {RangeError} if `maxFrameBytes` is not an integer from 0 to 2^32 - 1
 */
export function writeFrameHeader(
  out: Uint8Array,
  pos: number,
  length: number,
  maxFrameBytes: number,
): number {
  checkMaxFrameBytes(maxFrameBytes);
  if (length > maxFrameBytes) throw oversize(length, maxFrameBytes);
  out[pos] = length >>> 24;
  out[pos + 1] = (length >>> 16) & 0xff;
  out[pos + 2] = (length >>> 8) & 0xff;
  out[pos + 3] = length & 0xff;
  return pos + HEADER_BYTES;
}

/**
 * Incremental decoder of a framed byte stream: push chunks in, get complete frame bodies out.
 *
 * - `push` returns every frame the chunk completes, in stream order, and buffers the rest.
 * - A header announcing more than `maxFrameBytes` throws at once; no body byte is buffered
 *   (`buffered` is 0 afterwards). Frames completed earlier in the same chunk are dropped with
 *   it: a violation ends the stream, so nothing after the last successful `push` is delivered.
 * - Once the body length is known the body buffer is allocated once and filled in place, so a
 *   large frame fed in many small chunks costs linear time.
 * - After a {@link FrameError} the decoder stays failed: every later `push` or `finish` throws.
 * - `finish` declares EOF: it returns quietly at a frame boundary and throws inside a frame.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const bytes = new Uint8Array([...encodeFrame(new Uint8Array([1]), 16), 0, 0, 0, 0]);
 * const decoder = new FrameDecoder(16);
 * assert.deepEqual(decoder.push(bytes.subarray(0, 3)), []);
 * assert.deepEqual(decoder.push(bytes.subarray(3)), [new Uint8Array([1]), new Uint8Array(0)]);
 * decoder.finish();
 * ```
 */
export class FrameDecoder {
  #maxFrameBytes: number;
  readonly #copy: boolean;
  /** Header bytes received so far when the header is split across chunks. */
  readonly #header = new Uint8Array(HEADER_BYTES);
  #headerFilled = 0;
  /** The preallocated body of the current frame, or `null` while reading a header. */
  #body: Uint8Array | null = null;
  #bodyFilled = 0;
  #error: FrameError | null = null;
  #finished = false;

  /**
   * Creates a decoder at a frame boundary.
   *
   * @param maxFrameBytes the largest body length accepted (`maxWorkerFrameBytes`)
   * @param options see {@link FrameDecoderOptions}; default `{ copy: true }`
   * @throws {RangeError} if `maxFrameBytes` is not an integer from 0 to 2^32 - 1
   */
  constructor(maxFrameBytes: number, options: FrameDecoderOptions = {}) {
    checkMaxFrameBytes(maxFrameBytes);
    this.#maxFrameBytes = maxFrameBytes;
    this.#copy = options.copy ?? true;
  }

  /**
   * Changes the largest body length accepted, from the next header on (a session runtime learns
   * its limit from the host's `Configure`, which arrives through this decoder).
   *
   * @param maxFrameBytes the new limit
   * @throws {RangeError} if `maxFrameBytes` is not an integer from 0 to 2^32 - 1
   */
  setMaxFrameBytes(maxFrameBytes: number): void {
    checkMaxFrameBytes(maxFrameBytes);
    this.#maxFrameBytes = maxFrameBytes;
  }

  /**
   * The number of bytes held for the frame in progress (header and body); 0 at a boundary.
   *
   * @returns the buffered byte count
   */
  get buffered(): number {
    return this.#body === null ? this.#headerFilled : this.#bodyFilled;
  }

  /**
   * Feeds the next chunk of the stream.
   *
   * @param chunk the next bytes, of any length (the decoder keeps no reference to it unless
   *   `copy: false`)
   * @returns the frame bodies this chunk completes, in order (possibly none)
   * @throws {FrameError} on a header above `maxFrameBytes`, or if the decoder already failed
   * @throws {TypeError} if `chunk` is not a `Uint8Array` or `finish` was already called
   */
  push(chunk: Uint8Array): Uint8Array[] {
    this.#checkUsable();
    if (!(chunk instanceof Uint8Array)) {
      throw new TypeError("frame decoder chunk must be a Uint8Array");
    }
    const frames: Uint8Array[] = [];
    const end = chunk.length;
    let offset = 0;
    while (offset < end) {
      let body = this.#body;
      if (body === null) {
        let length: number;
        if (this.#headerFilled === 0 && end - offset >= HEADER_BYTES) {
          // The whole header is in this chunk: read it in place.
          length = readLength(chunk, offset);
          offset += HEADER_BYTES;
        } else {
          while (this.#headerFilled < HEADER_BYTES && offset < end) {
            this.#header[this.#headerFilled++] = chunk[offset++];
          }
          if (this.#headerFilled < HEADER_BYTES) break;
          length = readLength(this.#header, 0);
          this.#headerFilled = 0;
        }
        if (length > this.#maxFrameBytes) {
          throw this.#fail(oversize(length, this.#maxFrameBytes));
        }
        if (end - offset >= length) {
          // The whole body is in this chunk (including the empty body).
          const next = offset + length;
          frames.push(this.#copy ? chunk.slice(offset, next) : chunk.subarray(offset, next));
          offset = next;
          continue;
        }
        body = this.#body = new Uint8Array(length);
        this.#bodyFilled = 0;
      }
      const take = Math.min(end - offset, body.length - this.#bodyFilled);
      if (take <= SMALL_COPY_BYTES) {
        // A few bytes copy faster in a loop than through a `subarray` view and `set`.
        let filled = this.#bodyFilled;
        for (const stop = offset + take; offset < stop;) body[filled++] = chunk[offset++];
        this.#bodyFilled = filled;
      } else {
        body.set(chunk.subarray(offset, offset + take), this.#bodyFilled);
        this.#bodyFilled += take;
        offset += take;
      }
      if (this.#bodyFilled === body.length) {
        frames.push(body);
        this.#body = null;
        this.#bodyFilled = 0;
      }
    }
    return frames;
  }

  /**
   * Declares the end of the stream.
   *
   * @throws {FrameError} if the stream ended inside a frame, or if the decoder already failed
   * @throws {TypeError} if `finish` was already called
   */
  finish(): void {
    this.#checkUsable();
    const body = this.#body;
    if (body !== null) {
      throw this.#fail(
        new FrameError(
          `unexpected end of stream inside a frame (body: ${this.#bodyFilled} of ${body.length} bytes)`,
        ),
      );
    }
    if (this.#headerFilled > 0) {
      throw this.#fail(
        new FrameError(
          `unexpected end of stream inside a frame (header: ${this.#headerFilled} of ${HEADER_BYTES} bytes)`,
        ),
      );
    }
    this.#finished = true;
  }

  #checkUsable(): void {
    const error = this.#error;
    if (error !== null) {
      throw new FrameError(`frame decoder already failed: ${error.detail}`, { cause: error });
    }
    if (this.#finished) throw new TypeError("frame decoder already finished");
  }

  #fail(error: FrameError): FrameError {
    this.#error = error;
    this.#body = null;
    this.#bodyFilled = 0;
    this.#headerFilled = 0;
    return error;
  }
}

function readLength(bytes: Uint8Array, offset: number): number {
  // `* 2 ** 24` instead of `<< 24` keeps lengths ≥ 2^31 positive.
  return bytes[offset] * 0x100_0000 + (bytes[offset + 1] << 16) + (bytes[offset + 2] << 8) +
    bytes[offset + 3];
}

/**
 * Reads the frames of a byte stream, yielding each frame body as soon as its last byte arrives.
 *
 * - Pull-based: the next chunk is read only after every frame of the previous one was taken, so
 *   a slow consumer stops reading and buffering stays at one chunk plus one partial frame.
 * - Ends when the stream ends at a frame boundary.
 * - The reader lock is released when the generator finishes, throws, or is returned early. The
 *   stream is never cancelled here: its owner decides (e.g. kills the process).
 *
 * @param stream the framed bytes (e.g. the session runtime's stdout)
 * @param maxFrameBytes the largest body length accepted (`maxWorkerFrameBytes`)
 * @param options see {@link FrameDecoderOptions}; default `{ copy: true }`
 * @returns an async generator of frame bodies, in order
 * @throws {FrameError} on a header above `maxFrameBytes` or EOF inside a frame
 * @throws {RangeError} if `maxFrameBytes` is not an integer from 0 to 2^32 - 1
 * @throws {TypeError} if the stream is locked or yields a chunk that is not a `Uint8Array`;
 *   an error of the stream itself is rethrown as is
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const bytes = new Uint8Array([
 *   ...encodeFrame(new Uint8Array([1, 2]), 64),
 *   ...encodeFrame(new Uint8Array([3]), 64),
 * ]);
 * const stream = new ReadableStream<Uint8Array>({
 *   start(controller) {
 *     for (const byte of bytes) controller.enqueue(new Uint8Array([byte]));
 *     controller.close();
 *   },
 * });
 * const frames = await Array.fromAsync(readFrames(stream, 64));
 * assert.deepEqual(frames, [new Uint8Array([1, 2]), new Uint8Array([3])]);
 * ```
 */
export async function* readFrames(
  stream: ReadableStream<Uint8Array>,
  maxFrameBytes: number,
  options: FrameDecoderOptions = {},
): AsyncGenerator<Uint8Array, void, undefined> {
  const decoder = new FrameDecoder(maxFrameBytes, options);
  const reader = stream.getReader();
  try {
    while (true) {
      const { done, value } = await reader.read();
      if (done) {
        decoder.finish();
        return;
      }
      for (const frame of decoder.push(value)) yield frame;
    }
  } finally {
    reader.releaseLock();
  }
}

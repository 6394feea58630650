/**
 * What a V1 connection writes: messages encoded as frames into the bounded outgoing queue
 * (`framing.ts`), held to the frame limit as Codex's own host holds them, and the status of each
 * answered request for its debug line.
 *
 * - A response that does not fit in a frame is replaced by the error result `{what} exceeds the IPC
 *   frame limit: code-mode IPC frame length {n} exceeds {max} bytes`; any other oversized message
 *   is not sent (logged).
 * - Every producer waits for room in the queue, so a client that stops reading holds the host back.
 *
 * @module
 */
import type { Logger } from "../../ops/log.ts";
import { encodeFrame, frameTooLarge, FrameWriter } from "./framing.ts";
import { error, wireId } from "./host_messages.ts";

/** Options of an {@link Outbox}. */
export interface OutboxOptions {
  log: Logger;
  /** Payload limit, named in the messages. */
  maxFrameBytes: number;
  /** Outgoing queue capacity in frames (default 128). */
  queueFrames?: number;
}

/** The outgoing messages of one connection. */
export class Outbox {
  readonly maxFrameBytes: number;
  readonly #writer: FrameWriter;
  readonly #log: Logger;
  /** The status of each answered request, for its debug line (only at `debug`). */
  readonly #statuses = new Map<bigint, string>();

  /**
   * @param writable bytes to the client
   * @param options see {@link OutboxOptions}
   */
  constructor(writable: WritableStream<Uint8Array>, options: OutboxOptions) {
    this.#writer = new FrameWriter(writable, options.queueFrames);
    this.#log = options.log;
    this.maxFrameBytes = options.maxFrameBytes;
  }

  /**
   * Answers a request (`operation/response`).
   *
   * @param id the request's ID
   * @param result its result
   * @param oversizeBytes the result holds an outcome too large to send in its stand-in form
   *   (`oversizeStandIn`), whose frame is that much shorter than the real one
   */
  answer(id: bigint, result: Record<string, unknown>, oversizeBytes?: number): Promise<void> {
    if (this.#log.enabled("debug")) this.#statuses.set(id, String(result.status));
    return this.send(
      { type: "operation/response", id: wireId(id), result },
      "code-mode host response",
      oversizeBytes,
    )
      .then(() => {});
  }

  /**
   * Writes an Execute's initial response (`execute/initialResponse`).
   *
   * @param id the request's ID
   * @param result its result
   * @param oversizeBytes as for {@link Outbox.answer}
   */
  initial(id: bigint, result: Record<string, unknown>, oversizeBytes?: number): Promise<void> {
    return this.send(
      { type: "execute/initialResponse", id: wireId(id), result },
      "code-mode initial response",
      oversizeBytes,
    )
      .then(() => {});
  }

  /**
   * The status a request was answered with, forgotten as it is read (its debug line).
   *
   * @param id the request's ID
   * @returns `ok`, `error`, or `undefined` when not answered (or not at `debug`)
   */
  takeStatus(id: bigint): string | undefined {
    const status = this.#statuses.get(id);
    this.#statuses.delete(id);
    return status;
  }

  /**
   * Queues a message (see the module doc for an oversized one).
   *
   * - `oversizeBytes`: the message carries an outcome too large to send in its stand-in form
   *   (`oversizeStandIn`), never sent as it is: the real frame's length is the stand-in's plus
   *   these bytes. Its JSON form is never smaller than its protobuf form, so with the default
   *   limits it is always over the frame limit; if it is not (`maxMessageBytes` set below the
   *   frame limit), the answer is `{what} exceeds the message limit: {n} bytes`.
   *
   * @param message the message
   * @param what a response's name in the error that replaces it; none: a message that is dropped
   * @param oversizeBytes see above
   * @returns whether the message itself was queued
   */
  async send(message: Record<string, unknown>, what?: string, oversizeBytes?: number): Promise<boolean> {
    let frame = encodeFrame(message);
    const length = frame.length - 4 + (oversizeBytes ?? 0);
    if (oversizeBytes === undefined && length <= this.maxFrameBytes) {
      await this.#writer.send(frame);
      return true;
    }
    if (length <= this.maxFrameBytes) {
      // An outcome over a `maxMessageBytes` set below the frame limit: the message limit's error.
      frame = encodeFrame({
        ...message,
        result: error(`${what} exceeds the message limit: ${length} bytes`),
      });
      await this.#writer.send(frame);
      return false;
    }
    const detail = frameTooLarge(length, this.maxFrameBytes);
    if (what === undefined) {
      this.#log.error("code-mode host message exceeded the IPC frame limit", { error: detail });
      return false;
    }
    frame = encodeFrame({ ...message, result: error(`${what} exceeds the IPC frame limit: ${detail}`) });
    await this.#writer.send(frame);
    return false;
  }

  /**
   * Queues an encoded frame the caller has held to the limit itself.
   *
   * @param frame the frame
   */
  sendFrame(frame: Uint8Array): Promise<void> {
    return this.#writer.send(frame);
  }

  /** Resolves once every queued frame has been written (or dropped). */
  flushed(): Promise<void> {
    return this.#writer.flushed();
  }

  /** Stops writing: nothing queued or later is written (the connection ended). */
  stop(): void {
    this.#writer.stop();
  }

  /** Closes the sink after the queued frames. */
  close(): Promise<void> {
    return this.#writer.close();
  }
}

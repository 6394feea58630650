/**
 * The MCP stdio door's transport (issue 27, item 3): the SDK's `StdioServerTransport` with a bound
 * that does not end the connection. The SDK's own closes its transport when one line passes its
 * 10 MiB read buffer, which the door took for the end of its input: the host exited 0 and the
 * connection's stored values were lost without a word.
 *
 * - A line of at most {@link MCP_MAX_MESSAGE_BYTES} (4 MiB, the SDK's Streamable HTTP body limit,
 *   so both MCP doors take the same messages) is parsed as the SDK parses one (`JSON.parse`, then
 *   its JSON-RPC schema); one that does not parse is reported through `onerror`, as the SDK does.
 * - A longer line is never buffered whole: it is discarded as it arrives and answered, once its
 *   `\n` arrives, with the JSON-RPC error `-32600` (Invalid Request: the message was received but
 *   is not acceptable; nothing says it is not JSON)
 *   `code-mode MCP message of N bytes exceeds 4194304 bytes`, with the request's `id` when a
 *   top-level `"id"` (a number or a string) was seen while discarding it, else `null`. The next
 *   line is read as usual: the connection, its session and its stored values go on.
 * - The end of the input (or a read error) closes the transport: `onclose`, once.
 * - Writes are one JSON line each, in order, and wait for the output to take them.
 *
 * @module
 */
import { type JSONRPCMessage, JSONRPCMessageSchema, type Transport } from "./sdk.ts";
import { readLines } from "../proto/line_reader.ts";

/** The largest MCP message either MCP door reads (a stdio line, an HTTP body): 4 MiB. */
export const MCP_MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/** The JSON-RPC error code of a message over the limit (Invalid Request). */
export const MESSAGE_TOO_LARGE_CODE = -32600;

/** The error text of a stdio message over the limit. */
export function messageTooLarge(bytes: number, maxBytes: number = MCP_MAX_MESSAGE_BYTES): string {
  return `code-mode MCP message of ${bytes} bytes exceeds ${maxBytes} bytes`;
}

/** Options of {@link BoundedStdioServerTransport}. */
export interface BoundedStdioOptions {
  /** The longest line read as a message (default {@link MCP_MAX_MESSAGE_BYTES}). */
  maxMessageBytes?: number;
}

/**
 * An MCP server transport on a pair of byte streams (stdin and stdout) that answers an oversized
 * message with an error and goes on.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { BoundedStdioServerTransport } from "./stdio_transport.ts";
 *
 * const input = new TransformStream<Uint8Array, Uint8Array>();
 * const output = new TransformStream<Uint8Array, Uint8Array>();
 * const transport = new BoundedStdioServerTransport(input.readable, output.writable, { maxMessageBytes: 64 });
 * const received: unknown[] = [];
 * transport.onmessage = (message) => received.push(message);
 * await transport.start();
 * const writer = input.writable.getWriter();
 * await writer.write(new TextEncoder().encode(`{"jsonrpc":"2.0","id":7,"method":"${"x".repeat(99)}"}\n`));
 * const reply = await output.readable.pipeThrough(new TextDecoderStream()).getReader().read();
 * assert.equal(JSON.parse(reply.value!).id, 7);
 * await transport.close();
 * ```
 */
export class BoundedStdioServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  readonly #readable: ReadableStream<Uint8Array>;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #maxBytes: number;
  #writes: Promise<void> = Promise.resolve();
  #started = false;
  #closed = false;
  #stop = new AbortController();
  /** The read loop: never rejects; ends at the input's end or once {@link close} cancels it. */
  #reading: Promise<void> | undefined;

  /**
   * @param readable what the client writes (stdin)
   * @param writable what the client reads (stdout); the transport takes its writer
   * @param options the message bound
   */
  constructor(
    readable: ReadableStream<Uint8Array>,
    writable: WritableStream<Uint8Array>,
    options: BoundedStdioOptions = {},
  ) {
    this.#readable = readable;
    this.#writer = writable.getWriter();
    this.#maxBytes = options.maxMessageBytes ?? MCP_MAX_MESSAGE_BYTES;
  }

  /**
   * Starts reading messages.
   *
   * @throws {Error} when already started
   */
  start(): Promise<void> {
    if (this.#started) throw new Error("BoundedStdioServerTransport already started");
    this.#started = true;
    this.#reading = this.#read();
    return Promise.resolve();
  }

  async #read(): Promise<void> {
    const decoder = new TextDecoder();
    let scanner = new TopLevelIdScanner();
    try {
      for await (const part of readLines(this.#readable, this.#maxBytes, { signal: this.#stop.signal })) {
        if ("line" in part) {
          this.#deliver(decoder.decode(part.line));
        } else if ("overlong" in part) {
          scanner.push(part.overlong);
        } else {
          const message = messageTooLarge(part.overlongEnd, this.#maxBytes);
          this.onerror?.(new Error(`${message}; answered and discarded`));
          await this.#write({
            jsonrpc: "2.0",
            id: scanner.id,
            error: { code: MESSAGE_TOO_LARGE_CODE, message },
          })
            .catch(() => {});
          scanner = new TopLevelIdScanner();
        }
      }
    } catch (error) {
      if (!this.#stop.signal.aborted) this.onerror?.(error as Error);
    }
    this.#end();
  }

  #deliver(text: string): void {
    if (text.trim() === "") return;
    let message: JSONRPCMessage;
    try {
      message = JSONRPCMessageSchema.parse(JSON.parse(text)) as JSONRPCMessage;
    } catch (error) {
      this.onerror?.(error as Error);
      return;
    }
    this.onmessage?.(message);
  }

  /**
   * Writes one message as a JSON line, after the ones before it.
   *
   * @param message the JSON-RPC message
   * @returns once the output has taken it
   */
  send(message: JSONRPCMessage): Promise<void> {
    return this.#write(message);
  }

  #write(message: unknown): Promise<void> {
    const bytes = new TextEncoder().encode(JSON.stringify(message) + "\n");
    const write = this.#writes.then(() => this.#writer.write(bytes));
    this.#writes = write.catch(() => {});
    return write;
  }

  /**
   * Stops reading (the input is cancelled) and reports `onclose`, once. Writes already queued go
   * on. Idempotent; never throws.
   */
  async close(): Promise<void> {
    this.#end();
    await this.#reading;
  }

  #end(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#stop.abort(new Error("transport closed"));
    this.onclose?.();
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const OPEN_ARRAY = 0x5b;
const CLOSE_OBJECT = 0x7d;
const CLOSE_ARRAY = 0x5d;
const COLON = 0x3a;
const COMMA = 0x2c;
/** An `id` longer than this is not kept (the answer then says `null`). */
const MAX_ID_BYTES = 1024;

/**
 * Finds the top-level `"id"` of a JSON object streamed through it in pieces, in constant memory:
 * string and nesting state, the current top-level key (up to 4 bytes: only `id` matters), and the
 * `id` value's text. The last `"id"` wins, as with `JSON.parse`. Anything unusual (an escaped key, a
 * top-level array, an `id` that is no number or string) leaves it `null`.
 */
class TopLevelIdScanner {
  #depth = 0;
  #inString = false;
  #escape = false;
  #topIsObject: boolean | undefined;
  /** At depth 1: reading a key, waiting for its colon, or reading its value. */
  #phase: "key" | "colon" | "value" = "key";
  #key: number[] | undefined;
  #keyIsId = false;
  #value: number[] | undefined;
  #found: string | number | null = null;

  get id(): string | number | null {
    this.#finishValue();
    return this.#found;
  }

  push(bytes: Uint8Array): void {
    for (let i = 0; i < bytes.length; i++) {
      const b = bytes[i];
      if (this.#inString) {
        if (this.#escape) this.#escape = false;
        else if (b === BACKSLASH) this.#escape = true;
        else if (b === QUOTE) {
          this.#inString = false;
          if (this.#key) {
            this.#keyIsId = this.#key.length === 2 && this.#key[0] === 0x69 && this.#key[1] === 0x64;
            this.#key = undefined;
            this.#phase = "colon";
            continue;
          }
        }
        if (this.#key && this.#key.length <= 4) this.#key.push(b);
        if (this.#value) this.#capture(b);
        continue;
      }
      if (b === QUOTE) {
        this.#inString = true;
        if (this.#depth === 1 && this.#topIsObject) {
          if (this.#phase === "key") this.#key = [];
          else if (this.#phase === "value" && this.#keyIsId && !this.#value) this.#value = [b];
        }
        continue;
      }
      if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
        this.#depth++;
        if (this.#depth === 1) this.#topIsObject ??= b === OPEN_OBJECT;
        else if (this.#depth === 2 && this.#keyIsId) this.#keyIsId = false; // an object or array id
        continue;
      }
      if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) {
        if (this.#depth === 1) this.#finishValue();
        this.#depth--;
        continue;
      }
      if (this.#depth !== 1 || !this.#topIsObject) continue;
      if (b === COLON && this.#phase === "colon") this.#phase = "value";
      else if (b === COMMA) {
        this.#finishValue();
        this.#phase = "key";
        this.#keyIsId = false;
      } else if (this.#phase === "value" && this.#keyIsId) {
        if (b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d) {
          if (this.#value) this.#finishValue();
        } else {
          this.#value ??= [];
          this.#capture(b);
        }
      }
    }
  }

  #capture(b: number): void {
    if (this.#value!.length < MAX_ID_BYTES) this.#value!.push(b);
    else this.#keyIsId = false;
  }

  #finishValue(): void {
    const value = this.#value;
    if (!value || this.#inString) return;
    this.#value = undefined;
    if (!this.#keyIsId) return;
    this.#keyIsId = false;
    try {
      const parsed = JSON.parse(new TextDecoder().decode(new Uint8Array(value)));
      this.#found = typeof parsed === "number" || typeof parsed === "string" ? parsed : null;
    } catch {
      this.#found = null;
    }
  }
}

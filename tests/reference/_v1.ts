/**
 * A thin client of Codex's JSON "host V1" protocol for the conformance suite (SPEC §9.10): 4-byte
 * little-endian length frames of UTF-8 JSON over a child's stdin/stdout. Folder-private; it keeps
 * every frame in arrival order so that scenarios can observe frame order.
 *
 * @module
 */

// deno-lint-ignore no-explicit-any
export type Json = any;

/** The largest frame payload either host writes (64 MiB) plus headroom; a larger length is not a frame. */
const MAX_FRAME_BYTES = 64 * 1024 * 1024 + 1024 * 1024;

/** Encodes one frame. */
export function v1Frame(message: unknown): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(message));
  const out = new Uint8Array(4 + json.length);
  new DataView(out.buffer).setUint32(0, json.length, true);
  out.set(json, 4);
  return out;
}

/** One V1 connection (a host's stdin and stdout). */
export class V1Connection {
  /** Every frame received, in order. */
  readonly received: Json[] = [];
  /** Resolves when stdout ended (cleanly or not); the value says how. */
  readonly ended: Promise<string>;
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #watchers: { predicate: (m: Json) => boolean; resolve: (m: Json | undefined) => void }[] = [];
  #done = false;
  #nextId = 1;
  /** Called for every frame as it arrives (after it was recorded). */
  onFrame: (message: Json) => void = () => {};

  constructor(readable: ReadableStream<Uint8Array>, writable: WritableStream<Uint8Array>) {
    this.#writer = writable.getWriter();
    this.ended = this.#read(readable.getReader());
  }

  async #read(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
    let buffer = new Uint8Array(0);
    let how = "eof";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const joined = new Uint8Array(buffer.length + value.length);
        joined.set(buffer);
        joined.set(value, buffer.length);
        buffer = joined;
        while (buffer.length >= 4) {
          const n = new DataView(buffer.buffer, buffer.byteOffset, 4).getUint32(0, true);
          if (n > MAX_FRAME_BYTES) {
            // Not a frame: something else wrote to the host's stdout. Nothing after it can be read.
            this.#dispatch({
              type: "<corrupt stdout>",
              text: new TextDecoder().decode(buffer.subarray(0, 200)),
            });
            await reader.cancel().catch(() => {});
            throw new Error("the host's stdout is not V1 frames");
          }
          if (buffer.length < 4 + n) break;
          const text = new TextDecoder().decode(buffer.subarray(4, 4 + n));
          buffer = buffer.slice(4 + n);
          let message: Json;
          try {
            message = JSON.parse(text);
          } catch {
            message = { type: "<undecodable>", text: text.slice(0, 200) };
          }
          this.#dispatch(message);
        }
      }
      if (buffer.length) how = `eof inside a frame (${buffer.length} bytes left)`;
    } catch (error) {
      how = `read error: ${(error as Error).message}`;
    }
    this.#done = true;
    for (const w of this.#watchers.splice(0)) w.resolve(undefined);
    return how;
  }

  /** Whether stdout has ended (or stopped being frames). */
  get isEnded(): boolean {
    return this.#done;
  }

  #dispatch(message: Json): void {
    this.received.push(message);
    this.onFrame(message);
    for (const w of this.#watchers.slice()) {
      if (w.predicate(message)) {
        this.#watchers.splice(this.#watchers.indexOf(w), 1);
        w.resolve(message);
      }
    }
  }

  /** The first frame (already received or later) that matches; undefined if stdout ends first. */
  next(predicate: (m: Json) => boolean, after = 0): Promise<Json | undefined> {
    const seen = this.received.slice(after).find(predicate);
    if (seen !== undefined) return Promise.resolve(seen);
    if (this.#done) return Promise.resolve(undefined);
    return new Promise((resolve) => this.#watchers.push({ predicate, resolve }));
  }

  /** Writes one message (errors when stdin is closed are reported, not thrown). */
  async send(message: unknown): Promise<void> {
    await this.sendBytes(v1Frame(message));
  }

  /** Writes raw bytes. */
  async sendBytes(bytes: Uint8Array): Promise<void> {
    try {
      await this.#writer.write(bytes);
    } catch {
      // The host has gone; what it wrote before is what the scenario observes.
    }
  }

  /** Allocates a request id. */
  nextId(): number {
    return this.#nextId++;
  }

  /** Sends `operation/request` and resolves with its `operation/response` (undefined if none came). */
  async request(request: Json, id = this.nextId()): Promise<Json | undefined> {
    const answer = this.next((m) => m.type === "operation/response" && m.id === id);
    await this.send({ type: "operation/request", id, request });
    return await answer;
  }

  /** Closes the host's stdin. */
  async end(): Promise<void> {
    await this.#writer.close().catch(() => {});
  }
}

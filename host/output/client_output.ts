/**
 * The Client-mode collector (SPEC §8.3).
 *
 * Contract:
 * - Items are kept exactly as pushed while the window's encoded content fits `maxMessageBytes`;
 *   past that the window retains nothing and only counts encoded bytes
 *   ({@link OutputCollector.encodedBytes}), because it cannot be delivered anyway.
 * - A text of {@link UTF8_FROM} UTF-16 units or more that is not all ASCII is kept as its UTF-8 bytes
 *   until rendered (it is only forwarded): V8 keeps a text with one character past Latin-1 as two
 *   bytes per unit. An ASCII text is kept as it is (one byte per unit either way: converting a
 *   16 MiB outcome there and back cost ~15 ms and 32 MiB of garbage).
 *
 * @module
 */
import { MAX_MESSAGE_BYTES, rememberUtf8, utf8ByteLength } from "../../proto/bytes.ts";
import {
  contentItemEncodedBytes,
  contentJsonOf,
  type ContentJsonSize,
  type OutputCollector,
  type OutputItem,
  type OutputLimits,
  type PushedItem,
  type RenderedEntry,
} from "./output_items.ts";

/** Texts of this many UTF-16 units or more are kept as UTF-8 bytes. */
export const UTF8_FROM = 1_024;

/** A text kept as its UTF-8 bytes. */
interface Utf8Text {
  type: "utf8";
  bytes: Uint8Array;
}

type Kept = PushedItem | Utf8Text;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function keep(item: PushedItem): Kept {
  // An ASCII text (its UTF-8 length, remembered from the push, equals its length) stays a string.
  return item.type === "text" && item.text.length >= UTF8_FROM &&
      utf8ByteLength(item.text) !== item.text.length && item.text.isWellFormed()
    ? { type: "utf8", bytes: encoder.encode(item.text) }
    : item;
}

function pushed(item: Kept): PushedItem {
  if (item.type !== "utf8") return item;
  const text = decoder.decode(item.bytes);
  rememberUtf8(text, item.bytes); // the gRPC encoder copies these bytes instead of encoding it again
  return { type: "text", text };
}

function* pushedAll(items: Iterable<Kept>): Iterable<PushedItem> {
  for (const item of items) yield pushed(item);
}

/** A list of items, kept exactly as produced while they fit one message (SPEC §8.3). */
export class ClientOutputCollector implements OutputCollector {
  readonly mode = "client";
  readonly #limit: number;
  #items: Kept[] = [];
  #encoded = 0;
  #pushed = 0;
  /** Counted from the push that took the window over its limit (before that, the items are there). */
  #json: ContentJsonSize | undefined;

  constructor(limits: OutputLimits) {
    this.#limit = limits.maxMessageBytes ?? MAX_MESSAGE_BYTES;
  }

  get contentJson(): ContentJsonSize | undefined {
    return this.#json;
  }

  /** Adds items to the JSON count (started with the retained items when the window outgrows its limit). */
  #countJson(items: Iterable<Kept>): void {
    this.#addJsonSize(contentJsonOf(pushedAll(items)));
  }

  #addJsonSize(size: ContentJsonSize): void {
    const json = this.#json ??= { payloadBytes: 0, shapes: new Map() };
    json.payloadBytes += size.payloadBytes;
    for (const [shape, n] of size.shapes) json.shapes.set(shape, (json.shapes.get(shape) ?? 0) + n);
  }

  /** Adds another window's JSON count (or its retained items') to this one's. */
  #addJson(other: ClientOutputCollector): void {
    this.#addJsonSize(other.#json ?? contentJsonOf(pushedAll(other.#items)));
  }

  get isEmpty(): boolean {
    return this.#pushed === 0;
  }

  get encodedBytes(): number {
    return this.#encoded;
  }

  get omittedTextBytes(): number {
    return 0;
  }

  push(item: PushedItem): void {
    this.#pushed++;
    this.#encoded += contentItemEncodedBytes(item);
    if (this.#encoded <= this.#limit) {
      this.#items.push(keep(item));
      return;
    }
    if (this.#json === undefined) this.#countJson(this.#items);
    this.#countJson([item]);
    this.#items = [];
  }

  #retained(): OutputItem[] {
    if (this.#encoded > this.#limit) {
      throw new RangeError(`a Client window of ${this.#encoded} bytes exceeds ${this.#limit} bytes`);
    }
    return this.#items.map(pushed) as OutputItem[];
  }

  render(): OutputItem[] {
    return this.#retained();
  }

  entries(): RenderedEntry[] {
    return this.#retained().map((item, owner) =>
      item.type === "text" ? { kind: "text", text: item.text, owner } : { kind: "anchor", item }
    );
  }

  take(): OutputCollector {
    const taken = new ClientOutputCollector({ maxMessageBytes: this.#limit });
    taken.#items = this.#items;
    taken.#encoded = this.#encoded;
    taken.#pushed = this.#pushed;
    taken.#json = this.#json;
    this.#items = [];
    this.#encoded = 0;
    this.#pushed = 0;
    this.#json = undefined;
    return taken;
  }

  restore(taken: OutputCollector): void {
    if (!(taken instanceof ClientOutputCollector)) throw new TypeError("restore needs a Client collector");
    this.#encoded += taken.#encoded;
    this.#pushed += taken.#pushed;
    if (this.#encoded > this.#limit) {
      if (this.#json === undefined) this.#countJson(this.#items);
      this.#addJson(taken);
      this.#items = [];
    } else {
      this.#items = this.#items.length === 0 ? taken.#items : [...taken.#items, ...this.#items];
    }
    taken.#items = [];
    taken.#encoded = 0;
    taken.#pushed = 0;
    taken.#json = undefined;
  }
}

/**
 * Encoding of the internal host ↔ runtime protocol (`codemode.worker.v1`, SPEC §9.4), shared by
 * the host and the bundled session runtime.
 *
 * The codec is a small table-driven protobuf encoder/decoder written for this one schema, so the
 * session runtime needs no protobuf library: `proto/codemode/worker/v1/worker.proto` stays the
 * contract, and `worker_codec_test.ts` checks the table against it and the bytes against
 * protobufjs. Loading protobufjs and parsing the `.proto` text cost each runtime ~14 MiB of
 * resident memory and ~15 ms of its start (measured on Deno 2.9.6).
 *
 * Decoded objects follow protobufjs's `toObject({longs: Number, enums: Number, oneofs: true,
 * defaults: false})`: camelCase fields, only the fields present on the wire, 64-bit integers as
 * numbers, and each set oneof named by a virtual field (`message`, `event`, `item`, …). Encoding
 * writes every field that is neither `undefined` nor `null`, zero values included.
 *
 * @module
 */
import { varintBytes } from "./bytes.ts";

export { WORKER_PROTOCOL_VERSION } from "./worker_ready.ts";

/** Content item as it crosses the frame channel. */
export type WireItem =
  | { text: string }
  | { image: { imageUrl: string; detail: string } }
  | { audioUrl: string }
  | { trimmedText: WireTrimmedText }
  | { droppedMedia: { kind: string; bytes: number; detail?: string; jsonExtraBytes?: number } };

/** A text in reduced form; `jsonExtraBytes` (absent: 0) is what JSON escaping adds to the whole text. */
export interface WireTrimmedText {
  head: string;
  tail: string;
  totalBytes: number;
  jsonExtraBytes?: number;
}

/** One runtime event of a cell (exactly one member set). */
export interface WireCellEvent {
  cellId: string;
  started?: Record<string, never>;
  contentItem?: WireItem;
  yieldRequested?: Record<string, never>;
  toolCall?: { runtimeToolCallId: string; globalName: string; inputJson?: string };
  toolResultConsumed?: string;
  notify?: string;
  pending?: Record<string, never>;
  storedWrite?: { key: string; valueJson: string };
  result?: {
    errorText?: string;
    trimmedError?: WireTrimmedText;
  };
  exited?: { reason: string; detail?: string };
  event?: string;
}

/** Host → runtime envelope (exactly one member set). */
export interface HostToWorker {
  configure?: {
    sessionId: string;
    outputTruncation: number;
    cellHeapLimitMb: number;
    maxMessageBytes: number;
    maxStoredValueBytes: number;
    outputEventCredit?: number;
    outputByteCredit?: number;
    /** The host's `maxWorkerFrameBytes`; 0 or absent: the default. */
    maxFrameBytes?: number;
    /** Reduced texts and media carry what JSON escaping adds to them (a JSON door's session). */
    jsonSizes?: boolean;
  };
  storeUpdate?: { version: number; reset?: boolean; entries: { key: string; valueJson: string }[] };
  startCell?: {
    cellId: string;
    source: string;
    tools: { globalName: string; description: string }[];
    storeVersion: number;
  };
  toolResult?: {
    cellId: string;
    runtimeToolCallId: string;
    outputJson?: string;
    errorMessage?: string;
  };
  credit?: { cellId: string; events: number; bytes: number };
  stopCell?: { cellId: string };
  shutdown?: Record<string, never>;
  /** Liveness: the runtime answers with a `pong` of the same `seq`. */
  ping?: { seq: number };
  message?: string;
}

/** Runtime → host envelope (exactly one member set). */
export interface WorkerToHost {
  ready?: { denoVersion: string; protocolVersion: number };
  cellEvent?: WireCellEvent;
  runtimeFault?: { detail: string };
  /** The answer to a `ping`, from the runtime's main thread. */
  pong?: { seq: number };
  message?: string;
  /** 10 (a newline byte) when set, so that Deno's line-buffered stdout writes a frame at once (see `worker.proto`); ignored by the host. */
  lineEnd?: number;
}

/** Encoders and decoders of both envelopes. */
export interface WorkerCodec {
  encodeHostToWorker(message: HostToWorker): Uint8Array;
  decodeHostToWorker(bytes: Uint8Array): HostToWorker;
  encodeWorkerToHost(message: WorkerToHost): Uint8Array;
  decodeWorkerToHost(bytes: Uint8Array): WorkerToHost;
}

// ---- the schema -------------------------------------------------------------------------------

/** Scalar field types used by worker.proto. */
export type ScalarType = "string" | "bool" | "int32" | "uint32" | "uint64";

/** One field: number, camelCase name, and a scalar type or a message schema. */
export interface FieldSchema {
  no: number;
  name: string;
  type: ScalarType | MessageSchema;
  repeated?: boolean;
  /** The oneof this field belongs to (`_name` for a proto3 `optional`, which is not reported). */
  oneof?: string;
}

/** One message: its fully qualified name (for the schema test) and its fields. */
export interface MessageSchema {
  name: string;
  fields: FieldSchema[];
  /** Filled in by {@link message}: field number → field. */
  byNo: Map<number, FieldSchema>;
}

function message(name: string, fields: FieldSchema[]): MessageSchema {
  return { name, fields, byNo: new Map(fields.map((f) => [f.no, f])) };
}

const f = (no: number, name: string, type: FieldSchema["type"], oneof?: string): FieldSchema => ({
  no,
  name,
  type,
  ...(oneof === undefined ? {} : { oneof }),
});

const P = "codemode.worker.v1.";
const EMPTY = (name: string) => message(P + name, []);
const TRIMMED_TEXT = message(P + "TrimmedText", [
  f(1, "head", "string"),
  f(2, "tail", "string"),
  f(3, "totalBytes", "uint64"),
  f(4, "jsonExtraBytes", "uint64"),
]);
const STORE_ENTRY = message(P + "StoreEntry", [f(1, "key", "string"), f(2, "valueJson", "string")]);
const CELL_TOOL = message(P + "CellTool", [f(1, "globalName", "string"), f(2, "description", "string")]);

/** `HostToWorker`, with every message it contains. */
export const HOST_TO_WORKER: MessageSchema = message(P + "HostToWorker", [
  f(
    1,
    "configure",
    message(P + "Configure", [
      f(1, "sessionId", "string"),
      f(2, "outputTruncation", "int32"),
      f(3, "cellHeapLimitMb", "uint32"),
      f(4, "maxMessageBytes", "uint64"),
      f(5, "maxStoredValueBytes", "uint64"),
      f(7, "outputEventCredit", "uint32"),
      f(8, "outputByteCredit", "uint64"),
      f(9, "maxFrameBytes", "uint64"),
      f(10, "jsonSizes", "bool"),
    ]),
    "message",
  ),
  f(
    2,
    "storeUpdate",
    message(P + "StoreUpdate", [
      f(1, "version", "uint64"),
      f(2, "reset", "bool"),
      { no: 3, name: "entries", type: STORE_ENTRY, repeated: true },
    ]),
    "message",
  ),
  f(
    3,
    "startCell",
    message(P + "StartCell", [
      f(1, "cellId", "string"),
      f(2, "source", "string"),
      { no: 3, name: "tools", type: CELL_TOOL, repeated: true },
      f(4, "storeVersion", "uint64"),
    ]),
    "message",
  ),
  f(
    4,
    "toolResult",
    message(P + "ToolResult", [
      f(1, "cellId", "string"),
      f(2, "runtimeToolCallId", "string"),
      f(3, "outputJson", "string", "result"),
      f(4, "errorMessage", "string", "result"),
    ]),
    "message",
  ),
  f(
    5,
    "credit",
    message(P + "Credit", [f(1, "cellId", "string"), f(2, "events", "uint32"), f(3, "bytes", "uint64")]),
    "message",
  ),
  f(6, "stopCell", message(P + "StopCell", [f(1, "cellId", "string")]), "message"),
  f(8, "shutdown", EMPTY("Shutdown"), "message"),
  f(10, "ping", message(P + "Ping", [f(1, "seq", "uint32")]), "message"),
]);

/** `WorkerToHost`, with every message it contains. */
export const WORKER_TO_HOST: MessageSchema = message(P + "WorkerToHost", [
  f(
    1,
    "ready",
    message(P + "Ready", [f(1, "denoVersion", "string"), f(2, "protocolVersion", "uint32")]),
    "message",
  ),
  f(
    2,
    "cellEvent",
    message(P + "CellEvent", [
      f(1, "cellId", "string"),
      f(2, "started", EMPTY("Empty"), "event"),
      f(
        3,
        "contentItem",
        message(P + "ContentItem", [
          f(1, "text", "string", "item"),
          f(
            2,
            "image",
            message(P + "ImageItem", [f(1, "imageUrl", "string"), f(2, "detail", "string")]),
            "item",
          ),
          f(3, "audioUrl", "string", "item"),
          f(4, "trimmedText", TRIMMED_TEXT, "item"),
          f(
            5,
            "droppedMedia",
            message(P + "DroppedMedia", [
              f(1, "kind", "string"),
              f(2, "bytes", "uint64"),
              f(3, "detail", "string"),
              f(4, "jsonExtraBytes", "uint64"),
            ]),
            "item",
          ),
        ]),
        "event",
      ),
      f(4, "yieldRequested", EMPTY("Empty"), "event"),
      f(
        5,
        "toolCall",
        message(P + "ToolCallEvent", [
          f(1, "runtimeToolCallId", "string"),
          f(2, "globalName", "string"),
          f(3, "inputJson", "string", "_inputJson"),
        ]),
        "event",
      ),
      f(6, "toolResultConsumed", "string", "event"),
      f(7, "notify", "string", "event"),
      f(8, "pending", EMPTY("Empty"), "event"),
      f(
        9,
        "storedWrite",
        message(P + "StoredWrite", [f(1, "key", "string"), f(2, "valueJson", "string")]),
        "event",
      ),
      f(
        10,
        "result",
        message(P + "CellResult", [
          f(1, "errorText", "string", "error"),
          f(2, "trimmedError", TRIMMED_TEXT, "error"),
        ]),
        "event",
      ),
      f(
        11,
        "exited",
        message(P + "Exited", [f(1, "reason", "string"), f(2, "detail", "string", "_detail")]),
        "event",
      ),
    ]),
    "message",
  ),
  f(3, "runtimeFault", message(P + "RuntimeFault", [f(1, "detail", "string")]), "message"),
  f(4, "pong", message(P + "Pong", [f(1, "seq", "uint32")]), "message"),
  f(15, "lineEnd", "uint32"),
]);

// ---- encoding ---------------------------------------------------------------------------------

const utf8 = new TextEncoder();
const MAX_UINT32 = 0xffff_ffff;

/** The unsigned varint value of an integer field (negative int32: 64-bit two's complement). */
function integer(value: unknown, type: ScalarType, field: string): number | bigint {
  const n = Number(value);
  if (!Number.isFinite(n)) throw new TypeError(`${field}: not a number`);
  const i = Math.trunc(n);
  if (type === "int32") {
    const v = i | 0;
    return v < 0 ? BigInt.asUintN(64, BigInt(v)) : v;
  }
  if (type === "uint32") return i >>> 0;
  if (i < 0 || i > Number.MAX_SAFE_INTEGER) {
    throw new RangeError(`${field}: ${i} is not a uint64 this codec carries`);
  }
  return i;
}

/** Pre-computed pieces of one encoding, consumed in the same order by the write pass. */
interface Plan {
  /** Long strings already encoded; short ones stay strings and are written in place. */
  strings: (Uint8Array | string)[];
  /** UTF-8 lengths of the strings, and byte lengths of the nested messages, in visiting order. */
  lengths: number[];
}

/** Strings up to this many UTF-16 units are measured and written in JavaScript (no native call). */
const SHORT_STRING = 64;

/** UTF-8 length of a short string (a lone surrogate counts 3 bytes, as U+FFFD). */
function shortUtf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

function planMessage(value: Record<string, unknown>, schema: MessageSchema, plan: Plan): number {
  let size = 0;
  for (const field of schema.fields) {
    const v = value[field.name];
    if (v === undefined || v === null) continue;
    if (field.repeated) {
      for (const item of v as unknown[]) size += planField(item, field, plan);
    } else {
      size += planField(v, field, plan);
    }
  }
  return size;
}

function planField(value: unknown, field: FieldSchema, plan: Plan): number {
  const tag = varintBytes(field.no * 8);
  const type = field.type;
  if (typeof type === "object") {
    const slot = plan.lengths.length;
    plan.lengths.push(0);
    const length = planMessage(value as Record<string, unknown>, type, plan);
    plan.lengths[slot] = length;
    return tag + varintBytes(length) + length;
  }
  switch (type) {
    case "string": {
      const text = String(value);
      if (text.length <= SHORT_STRING) {
        const length = shortUtf8Length(text);
        plan.strings.push(text);
        plan.lengths.push(length);
        return tag + varintBytes(length) + length;
      }
      const bytes = utf8.encode(text);
      plan.strings.push(bytes);
      plan.lengths.push(bytes.length);
      return tag + varintBytes(bytes.length) + bytes.length;
    }
    case "bool":
      return tag + 1;
    default: {
      const v = integer(value, type, field.name);
      return tag + (typeof v === "bigint" ? 10 : varintBytes(v));
    }
  }
}

class Writer {
  pos = 0;
  stringAt = 0;
  lengthAt = 0;
  constructor(readonly out: Uint8Array, readonly plan: Plan) {}

  varint(value: number | bigint): void {
    const out = this.out;
    if (typeof value === "bigint") {
      for (let i = 0; i < 9; i++) {
        out[this.pos++] = Number(value & 0x7fn) | 0x80;
        value >>= 7n;
      }
      out[this.pos++] = Number(value);
      return;
    }
    while (value > MAX_UINT32) {
      out[this.pos++] = (value % 128) | 0x80;
      value = Math.floor(value / 128);
    }
    while (value >= 128) {
      out[this.pos++] = (value & 0x7f) | 0x80;
      value >>>= 7;
    }
    out[this.pos++] = value;
  }

  /** Writes a short string as UTF-8 (lone surrogates as U+FFFD, like `TextEncoder`). */
  shortUtf8(text: string): void {
    const out = this.out;
    let pos = this.pos;
    for (let i = 0; i < text.length; i++) {
      let c = text.charCodeAt(i);
      if (c < 0x80) {
        out[pos++] = c;
        continue;
      }
      if (c < 0x800) {
        out[pos++] = 0xc0 | (c >> 6);
        out[pos++] = 0x80 | (c & 0x3f);
        continue;
      }
      if (c >= 0xd800 && c <= 0xdfff) {
        const next = i + 1 < text.length ? text.charCodeAt(i + 1) : 0;
        if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
          i++;
          out[pos++] = 0xf0 | (c >> 18);
          out[pos++] = 0x80 | ((c >> 12) & 0x3f);
          out[pos++] = 0x80 | ((c >> 6) & 0x3f);
          out[pos++] = 0x80 | (c & 0x3f);
          continue;
        }
        c = 0xfffd;
      }
      out[pos++] = 0xe0 | (c >> 12);
      out[pos++] = 0x80 | ((c >> 6) & 0x3f);
      out[pos++] = 0x80 | (c & 0x3f);
    }
    this.pos = pos;
  }

  message(value: Record<string, unknown>, schema: MessageSchema): void {
    for (const field of schema.fields) {
      const v = value[field.name];
      if (v === undefined || v === null) continue;
      if (field.repeated) {
        for (const item of v as unknown[]) this.field(item, field);
      } else {
        this.field(v, field);
      }
    }
  }

  field(value: unknown, field: FieldSchema): void {
    const type = field.type;
    if (typeof type === "object") {
      this.varint(field.no * 8 + 2);
      this.varint(this.plan.lengths[this.lengthAt++]);
      this.message(value as Record<string, unknown>, type);
      return;
    }
    switch (type) {
      case "string": {
        const piece = this.plan.strings[this.stringAt++];
        const length = this.plan.lengths[this.lengthAt++];
        this.varint(field.no * 8 + 2);
        this.varint(length);
        if (typeof piece === "string") this.shortUtf8(piece);
        else {
          this.out.set(piece, this.pos);
          this.pos += length;
        }
        return;
      }
      case "bool":
        this.varint(field.no * 8);
        this.out[this.pos++] = value ? 1 : 0;
        return;
      default:
        this.varint(field.no * 8);
        this.varint(integer(value, type, field.name));
    }
  }
}

/**
 * Encodes `value` as the protobuf message `schema`.
 *
 * @param value a plain object with camelCase fields; virtual oneof fields are ignored
 * @param schema {@link HOST_TO_WORKER}, {@link WORKER_TO_HOST} or one of their messages
 * @returns the message bytes
 * @throws {TypeError} a non-numeric integer field
 * @throws {RangeError} a uint64 beyond `Number.MAX_SAFE_INTEGER`
 */
export function encodeMessage(value: object, schema: MessageSchema): Uint8Array {
  const plan: Plan = { strings: [], lengths: [] };
  const size = planMessage(value as Record<string, unknown>, schema, plan);
  const writer = new Writer(new Uint8Array(size), plan);
  writer.message(value as Record<string, unknown>, schema);
  return writer.out;
}

// ---- decoding ---------------------------------------------------------------------------------

const utf8Decoder = new TextDecoder();

class Reader {
  pos: number;
  constructor(readonly bytes: Uint8Array, start: number, readonly end: number) {
    this.pos = start;
  }

  /** An unsigned varint, exact up to 2^53; larger values lose precision like protobufjs's Number longs. */
  varint(): number {
    const bytes = this.bytes;
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new RangeError("truncated varint");
      const b = bytes[this.pos++];
      result += (b & 0x7f) * scale;
      if (b < 0x80) return result;
      scale *= 128;
    }
    throw new RangeError("varint longer than 10 bytes");
  }

  /** A varint as int32: its low 32 bits, signed. */
  int32(): number {
    const start = this.pos;
    this.varint();
    let low = 0;
    for (let i = 0, p = start; i < 5 && p < this.pos; i++, p++) low |= (this.bytes[p] & 0x7f) << (7 * i);
    return low | 0;
  }

  length(): number {
    const n = this.varint();
    if (n > this.end - this.pos) throw new RangeError("length exceeds the message");
    return n;
  }

  skip(wireType: number): void {
    switch (wireType) {
      case 0:
        this.varint();
        return;
      case 1:
        this.advance(8);
        return;
      case 2:
        this.advance(this.length());
        return;
      case 5:
        this.advance(4);
        return;
      default:
        throw new RangeError(`unsupported wire type ${wireType}`);
    }
  }

  advance(n: number): void {
    if (n > this.end - this.pos) throw new RangeError("truncated field");
    this.pos += n;
  }
}

/** Decodes a short UTF-8 string: ASCII in JavaScript, anything else by `TextDecoder`. */
function shortString(bytes: Uint8Array, start: number, length: number): string {
  let text = "";
  for (let i = start; i < start + length; i++) {
    const b = bytes[i];
    if (b >= 0x80) return utf8Decoder.decode(bytes.subarray(start, start + length));
    text += String.fromCharCode(b);
  }
  return text;
}

function wireTypeOf(field: FieldSchema): number {
  return typeof field.type === "object" || field.type === "string" ? 2 : 0;
}

function decodeInto(reader: Reader, schema: MessageSchema): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  while (reader.pos < reader.end) {
    const key = reader.varint();
    const no = Math.floor(key / 8);
    const wireType = key & 7;
    const field = schema.byNo.get(no);
    if (no === 0) throw new RangeError("field number 0");
    if (field === undefined || wireTypeOf(field) !== wireType) {
      reader.skip(wireType);
      continue;
    }
    let value: unknown;
    const type = field.type;
    if (typeof type === "object") {
      const length = reader.length();
      const end = reader.pos + length;
      value = decodeInto(new Reader(reader.bytes, reader.pos, end), type);
      reader.pos = end;
    } else if (type === "string") {
      const length = reader.length();
      value = length <= SHORT_STRING
        ? shortString(reader.bytes, reader.pos, length)
        : utf8Decoder.decode(reader.bytes.subarray(reader.pos, reader.pos + length));
      reader.pos += length;
    } else if (type === "bool") {
      value = reader.varint() !== 0;
    } else if (type === "int32") {
      value = reader.int32();
    } else if (type === "uint32") {
      value = reader.varint() % 4_294_967_296;
    } else {
      value = reader.varint();
    }
    if (field.repeated) {
      ((out[field.name] ??= []) as unknown[]).push(value);
      continue;
    }
    if (field.oneof !== undefined) {
      // Last member wins: the others of its oneof are cleared.
      for (const other of schema.fields) {
        if (other.oneof === field.oneof && other !== field) delete out[other.name];
      }
      if (!field.oneof.startsWith("_")) out[field.oneof] = field.name;
    }
    out[field.name] = value;
  }
  return out;
}

/**
 * Decodes the protobuf message `schema` from `bytes`.
 *
 * @param bytes the message bytes
 * @param schema {@link HOST_TO_WORKER}, {@link WORKER_TO_HOST} or one of their messages
 * @returns the fields present on the wire, camelCase, with virtual oneof names
 * @throws {RangeError} malformed bytes (truncated, over-long varint, bad wire type)
 */
export function decodeMessage(bytes: Uint8Array, schema: MessageSchema): Record<string, unknown> {
  return decodeInto(new Reader(bytes, 0, bytes.length), schema);
}

/**
 * The codec of both envelopes.
 *
 * @returns encoders/decoders of plain objects (camelCase fields; `message`/`event` name the set
 *   oneof member after decoding)
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const codec = createWorkerCodec();
 * const bytes = codec.encodeHostToWorker({ stopCell: { cellId: "7" } });
 * assert.deepEqual(codec.decodeHostToWorker(bytes), { message: "stopCell", stopCell: { cellId: "7" } });
 * ```
 */
export function createWorkerCodec(): WorkerCodec {
  return {
    encodeHostToWorker: (m) => encodeMessage(m, HOST_TO_WORKER),
    decodeHostToWorker: (b) => decodeMessage(b, HOST_TO_WORKER) as HostToWorker,
    encodeWorkerToHost: (m) => encodeMessage(m, WORKER_TO_HOST),
    decodeWorkerToHost: (b) => decodeMessage(b, WORKER_TO_HOST) as WorkerToHost,
  };
}

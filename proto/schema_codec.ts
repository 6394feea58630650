/**
 * A small table-driven protobuf encoder and decoder for the messages of a {@link MessageSchema}
 * (the worker protocol's, `worker_schema.ts`), so that the session runtime needs no protobuf
 * library. `worker_codec_test.ts` checks the bytes against protobufjs.
 *
 * Decoded objects follow protobufjs's `toObject({longs: Number, enums: Number, oneofs: true,
 * defaults: false})`: camelCase fields, only the fields present on the wire, 64-bit integers as
 * numbers, and each set oneof named by a virtual field (`message`, `event`, `item`, …). Encoding
 * writes every field that is neither `undefined` nor `null`, zero values included.
 *
 * @module
 */
import { rememberUtf8, varintBytes } from "./bytes.ts";
import type { FieldSchema, MessageSchema, ScalarType } from "./worker_schema.ts";

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
 * @param schema `HOST_TO_WORKER`, `WORKER_TO_HOST` (`worker_schema.ts`) or one of their messages
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

/**
 * Decodes a long UTF-8 string and remembers it with its bytes (`rememberUtf8`: the host measures a
 * long output text several times, and its gRPC encoder copies the bytes instead of encoding it) when the bytes were surely well-formed: no replacement
 * character came out (a malformed sequence gives one) and no byte-order mark was dropped.
 */
function longString(bytes: Uint8Array): string {
  const text = utf8Decoder.decode(bytes);
  if (bytes[0] !== 0xef && !text.includes("\ufffd")) rememberUtf8(text, bytes);
  return text;
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
        : longString(reader.bytes.subarray(reader.pos, reader.pos + length));
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
 * @param schema `HOST_TO_WORKER`, `WORKER_TO_HOST` (`worker_schema.ts`) or one of their messages
 * @returns the fields present on the wire, camelCase, with virtual oneof names
 * @throws {RangeError} malformed bytes (truncated, over-long varint, bad wire type)
 */
export function decodeMessage(bytes: Uint8Array, schema: MessageSchema): Record<string, unknown> {
  return decodeInto(new Reader(bytes, 0, bytes.length), schema);
}

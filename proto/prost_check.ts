/**
 * Request bytes checked the way Codex's host decodes them (Rust's `prost`), so that bytes which
 * are no message of the request type are refused with the reference's exact text:
 * `failed to decode Protobuf message: {path}{description}`.
 *
 * - `{description}` is prost's: `invalid varint`, `invalid key value: N`, `invalid wire type
 *   value: N`, `invalid tag value: 0`, `invalid wire type: Varint (expected LengthDelimited)`,
 *   `buffer underflow`, `delimited length exceeded`, `invalid string value: data is not UTF-8
 *   encoded`, `unexpected end group tag`, `recursion limit reached`.
 * - `{path}` names the field being decoded, innermost first: `ToolName.name:
 *   ToolDefinition.tool_name: ExecuteRequest.enabled_tools: ` (a oneof member is named by its
 *   oneof). An error while skipping an unknown field, or in a key, has no path.
 * - Unknown fields of every wire type are skipped (groups included), as prost does; a field seen
 *   twice is read twice.
 *
 * @module
 */
import { isUtf8 } from "node:buffer";
import protobuf from "./protobuf_runtime.ts";

/** The prefix of every refusal (tonic answers it with status INTERNAL). */
export const DECODE_ERROR_PREFIX = "failed to decode Protobuf message: ";

/** prost's `RECURSION_LIMIT`. */
const RECURSION_LIMIT = 100;

/** prost's `WireType` names, by number. */
const WIRE_TYPE_NAMES = [
  "Varint",
  "SixtyFourBit",
  "LengthDelimited",
  "StartGroup",
  "EndGroup",
  "ThirtyTwoBit",
];

const SCALAR_WIRE_TYPE: Record<string, number> = {
  double: 1,
  float: 5,
  int32: 0,
  uint32: 0,
  sint32: 0,
  int64: 0,
  uint64: 0,
  sint64: 0,
  fixed32: 5,
  sfixed32: 5,
  fixed64: 1,
  sfixed64: 1,
  bool: 0,
  string: 2,
  bytes: 2,
};

class DecodeError {
  readonly path: string[] = [];
  constructor(readonly description: string) {}
}

function snake(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** The name prost's error path gives a field: its oneof's for a real oneof member. */
function pathName(field: protobuf.Field): string {
  const oneof = field.partOf;
  const synthetic = oneof && oneof.fieldsArray.length === 1 && field.options?.proto3_optional === true;
  return snake(oneof && !synthetic ? oneof.name : field.name);
}

class Reader {
  pos = 0;
  constructor(readonly bytes: Uint8Array) {}

  get remaining(): number {
    return this.bytes.length - this.pos;
  }

  varint(): bigint {
    let value = 0n;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.bytes.length) throw new DecodeError("invalid varint");
      const b = this.bytes[this.pos++];
      if (i === 9 && b > 1) throw new DecodeError("invalid varint");
      value |= BigInt(b & 0x7f) << BigInt(7 * i);
      if (b < 0x80) return value;
    }
    throw new DecodeError("invalid varint");
  }

  key(): { tag: number; wireType: number } {
    const key = this.varint();
    if (key > 0xffffffffn) throw new DecodeError(`invalid key value: ${key}`);
    const wireType = Number(key & 7n);
    if (wireType > 5) throw new DecodeError(`invalid wire type value: ${wireType}`);
    const tag = Number(key >> 3n);
    if (tag < 1) throw new DecodeError("invalid tag value: 0");
    return { tag, wireType };
  }

  /** A length-delimited payload's bounds (prost's `buffer underflow` when it overruns). */
  delimited(): number {
    const length = this.varint();
    if (length > BigInt(this.remaining)) throw new DecodeError("buffer underflow");
    return Number(length);
  }
}

function checkWireType(expected: number, actual: number): void {
  if (expected !== actual) {
    throw new DecodeError(
      `invalid wire type: ${WIRE_TYPE_NAMES[actual]} (expected ${WIRE_TYPE_NAMES[expected]})`,
    );
  }
}

function skipField(reader: Reader, wireType: number, tag: number, depth: number): void {
  if (depth === 0) throw new DecodeError("recursion limit reached");
  let length = 0;
  switch (wireType) {
    case 0:
      reader.varint();
      break;
    case 1:
      length = 8;
      break;
    case 5:
      length = 4;
      break;
    case 2:
      length = Number(reader.varint());
      break;
    case 3:
      for (;;) {
        const inner = reader.key();
        if (inner.wireType === 4) {
          if (inner.tag !== tag) throw new DecodeError("unexpected end group tag");
          break;
        }
        skipField(reader, inner.wireType, inner.tag, depth - 1);
      }
      break;
    default:
      throw new DecodeError("unexpected end group tag");
  }
  if (length > reader.remaining) throw new DecodeError("buffer underflow");
  reader.pos += length;
}

/** One message's fields, up to `end` (prost's `merge_loop` body). */
function mergeFields(type: protobuf.Type, reader: Reader, end: number, depth: number): void {
  while (reader.pos < end) {
    const { tag, wireType } = reader.key();
    const field = type.fieldsById[tag];
    if (field === undefined) {
      skipField(reader, wireType, tag, depth);
      continue;
    }
    try {
      mergeField(field, wireType, reader, depth);
    } catch (error) {
      if (error instanceof DecodeError) error.path.push(`${type.name}.${pathName(field)}`);
      throw error;
    }
  }
}

function mergeField(field: protobuf.Field, wireType: number, reader: Reader, depth: number): void {
  field.resolve();
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) {
    checkWireType(2, wireType);
    if (depth === 0) throw new DecodeError("recursion limit reached");
    const length = reader.delimited();
    const end = reader.pos + length;
    mergeFields(resolved, reader, end, depth - 1);
    if (reader.pos !== end) throw new DecodeError("delimited length exceeded");
    return;
  }
  const own = resolved instanceof protobuf.Enum ? 0 : SCALAR_WIRE_TYPE[field.type] ?? 2;
  if (field.repeated && own !== 2 && wireType === 2) {
    // A packed run of numbers.
    const length = reader.delimited();
    const end = reader.pos + length;
    while (reader.pos < end) {
      if (own === 0) reader.varint();
      else reader.pos += own === 1 ? 8 : 4;
    }
    if (reader.pos !== end) throw new DecodeError("delimited length exceeded");
    return;
  }
  checkWireType(own, wireType);
  if (own === 0) reader.varint();
  else if (own !== 2) {
    const size = own === 1 ? 8 : 4;
    if (size > reader.remaining) throw new DecodeError("buffer underflow");
    reader.pos += size;
  } else {
    const length = reader.delimited();
    const start = reader.pos;
    reader.pos += length;
    if (field.type === "string" && !isUtf8(reader.bytes.subarray(start, reader.pos))) {
      throw new DecodeError("invalid string value: data is not UTF-8 encoded");
    }
  }
}

/**
 * Checks that bytes decode as a message of `type` under prost's rules.
 *
 * @param type the message type
 * @param bytes the encoded message
 * @returns `undefined` when they do, else the reference's refusal text (with its prefix)
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { publicProtoRoot } from "./loader.ts";
 *
 * const wait = publicProtoRoot().lookupType("codex.code_mode.v1.WaitRequest");
 * assert.equal(prostDecodeError(wait, new Uint8Array([0x0a, 0x01, 0x61])), undefined);
 * assert.equal(
 *   prostDecodeError(wait, new Uint8Array([0x08, 0x01])),
 *   "failed to decode Protobuf message: WaitRequest.session_id: invalid wire type: Varint (expected LengthDelimited)",
 * );
 * ```
 */
export function prostDecodeError(type: protobuf.Type, bytes: Uint8Array): string | undefined {
  const reader = new Reader(bytes);
  try {
    mergeFields(type, reader, bytes.length, RECURSION_LIMIT);
    return undefined;
  } catch (error) {
    if (!(error instanceof DecodeError)) throw error;
    return DECODE_ERROR_PREFIX + error.path.map((p) => `${p}: `).join("") + error.description;
  }
}

// proto/frame_codec.ts
var MAX_HEADER_LENGTH = 4294967295;
var HEADER_BYTES = 4;
var SMALL_COPY_BYTES = 16;
var FrameError = class extends Error {
  /** What was violated, lower-case and specific; the same text as `message`. */
  detail;
  /**
   * Creates a framing error.
   *
   * @param detail what was violated, e.g. `frame length 70000000 exceeds 68157440 bytes`
   * @param options the standard error options (`cause`)
   */
  constructor(detail, options) {
    super(detail, options);
    this.name = "FrameError";
    this.detail = detail;
  }
};
function checkMaxFrameBytes(maxFrameBytes) {
  if (!Number.isInteger(maxFrameBytes) || maxFrameBytes < 0 || maxFrameBytes > MAX_HEADER_LENGTH) {
    throw new RangeError(`maxFrameBytes must be an integer from 0 to ${MAX_HEADER_LENGTH}, got ${maxFrameBytes}`);
  }
}
function oversize(length, maxFrameBytes) {
  return new FrameError(`frame length ${length} exceeds ${maxFrameBytes} bytes`);
}
function encodeFrame(body, maxFrameBytes) {
  const frame = new Uint8Array(HEADER_BYTES + body.length);
  writeFrameHeader(frame, 0, body.length, maxFrameBytes);
  frame.set(body, HEADER_BYTES);
  return frame;
}
function writeFrameHeader(out, pos, length, maxFrameBytes) {
  checkMaxFrameBytes(maxFrameBytes);
  if (length > maxFrameBytes) throw oversize(length, maxFrameBytes);
  out[pos] = length >>> 24;
  out[pos + 1] = length >>> 16 & 255;
  out[pos + 2] = length >>> 8 & 255;
  out[pos + 3] = length & 255;
  return pos + HEADER_BYTES;
}
var FrameDecoder = class {
  #maxFrameBytes;
  #copy;
  /** Header bytes received so far when the header is split across chunks. */
  #header = new Uint8Array(HEADER_BYTES);
  #headerFilled = 0;
  /** The preallocated body of the current frame, or `null` while reading a header. */
  #body = null;
  #bodyFilled = 0;
  #error = null;
  #finished = false;
  /**
   * Creates a decoder at a frame boundary.
   *
   * @param maxFrameBytes the largest body length accepted (`maxWorkerFrameBytes`)
   * @param options see {@link FrameDecoderOptions}; default `{ copy: true }`
   * @throws {RangeError} if `maxFrameBytes` is not an integer from 0 to 2^32 - 1
   */
  constructor(maxFrameBytes, options = {}) {
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
  setMaxFrameBytes(maxFrameBytes) {
    checkMaxFrameBytes(maxFrameBytes);
    this.#maxFrameBytes = maxFrameBytes;
  }
  /**
   * The number of bytes held for the frame in progress (header and body); 0 at a boundary.
   *
   * @returns the buffered byte count
   */
  get buffered() {
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
  push(chunk) {
    this.#checkUsable();
    if (!(chunk instanceof Uint8Array)) {
      throw new TypeError("frame decoder chunk must be a Uint8Array");
    }
    const frames = [];
    const end = chunk.length;
    let offset = 0;
    while (offset < end) {
      let body = this.#body;
      if (body === null) {
        let length;
        if (this.#headerFilled === 0 && end - offset >= HEADER_BYTES) {
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
        let filled = this.#bodyFilled;
        for (const stop = offset + take; offset < stop; ) body[filled++] = chunk[offset++];
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
  finish() {
    this.#checkUsable();
    const body = this.#body;
    if (body !== null) {
      throw this.#fail(new FrameError(`unexpected end of stream inside a frame (body: ${this.#bodyFilled} of ${body.length} bytes)`));
    }
    if (this.#headerFilled > 0) {
      throw this.#fail(new FrameError(`unexpected end of stream inside a frame (header: ${this.#headerFilled} of ${HEADER_BYTES} bytes)`));
    }
    this.#finished = true;
  }
  #checkUsable() {
    const error = this.#error;
    if (error !== null) {
      throw new FrameError(`frame decoder already failed: ${error.detail}`, {
        cause: error
      });
    }
    if (this.#finished) throw new TypeError("frame decoder already finished");
  }
  #fail(error) {
    this.#error = error;
    this.#body = null;
    this.#bodyFilled = 0;
    this.#headerFilled = 0;
    return error;
  }
};
function readLength(bytes, offset) {
  return bytes[offset] * 16777216 + (bytes[offset + 1] << 16) + (bytes[offset + 2] << 8) + bytes[offset + 3];
}

// proto/bytes.ts
import { Buffer } from "node:buffer";
var MIB = 1048576;
var MAX_INT32 = 2147483647;
var MAX_TEXT_BYTES = 1048576;
var MAX_MEDIA_BYTES = 16777216;
var MAX_MESSAGE_BYTES = 67108864;
function varintBytes(n) {
  let bytes = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    bytes++;
  }
  return bytes;
}
function utf8ByteLength(s) {
  if (s.length < REMEMBER_FROM) return Buffer.byteLength(s, "utf8");
  if (s === remembered.text) return remembered.bytes;
  const bytes = Buffer.byteLength(s, "utf8");
  remembered = {
    text: s,
    bytes
  };
  return bytes;
}
var REMEMBER_FROM = 4096;
var remembered = {
  text: "",
  bytes: 0
};
function rememberUtf8(text, utf83) {
  if (text.length >= REMEMBER_FROM) remembered = {
    text,
    bytes: utf83.length,
    utf8: utf83
  };
}

// worker/cell_protocol.ts
var CREDIT_EVENTS = 0;
var CREDIT_BYTES = 1;
var CREDIT_GENERATION = 2;
var CREDIT_STOP = 3;
var CELL_DOORBELL = 4;
var CREDIT_ACKED = 5;
var CELL_PROGRESS = 6;
var CELL_RESULT = 7;
var CELL_STOPPED = 8;
var CELL_BUSY = 9;
var CELL_BUSY_REPORTED = 10;
var CELL_WORDS = 11;
var SINK_LOCK = 0;
var SINK_WORDS = 2;
var RETIRE_HEAP_SHARE = 0.5;
var RETIRE_HEAP_BYTES = 64 * 1024 * 1024;

// proto/store_batches.ts
var STORE_BATCH_UNITS = 65536;
function storeBatchEnd(entries, from, maxUnits = STORE_BATCH_UNITS) {
  let units = 0;
  let end = from;
  while (end < entries.length && (end === from || units < maxUnits)) {
    const [key, value] = entries[end++];
    units += key.length + value.length;
  }
  return end;
}

// worker/cell_events.ts
var LINE_END = 10;
var DEFAULT_MAX_FRAME_BYTES = MAX_MESSAGE_BYTES + MIB;
function wireCellEvents(cellId, output) {
  switch (output.t) {
    case "started":
      return [
        {
          cellId,
          started: {}
        }
      ];
    case "text":
      return [
        {
          cellId,
          contentItem: {
            text: output.text
          }
        }
      ];
    case "trimmedText":
      return [
        {
          cellId,
          contentItem: {
            trimmedText: wireTrimmed(output.text)
          }
        }
      ];
    case "image":
      return [
        {
          cellId,
          contentItem: {
            image: {
              imageUrl: output.image.url,
              detail: output.image.detail
            }
          }
        }
      ];
    case "droppedImage":
      return [
        {
          cellId,
          contentItem: {
            droppedMedia: {
              kind: "image",
              bytes: output.bytes,
              detail: output.detail,
              ...output.jsonExtra ? {
                jsonExtraBytes: output.jsonExtra
              } : {}
            }
          }
        }
      ];
    case "audio":
      return [
        {
          cellId,
          contentItem: {
            audioUrl: output.url
          }
        }
      ];
    case "droppedAudio":
      return [
        {
          cellId,
          contentItem: {
            droppedMedia: {
              kind: "audio",
              bytes: output.bytes,
              ...output.jsonExtra ? {
                jsonExtraBytes: output.jsonExtra
              } : {}
            }
          }
        }
      ];
    case "yield":
      return [
        {
          cellId,
          yieldRequested: {}
        }
      ];
    case "toolCall":
      return [
        {
          cellId,
          toolCall: output.input === void 0 ? {
            runtimeToolCallId: output.id,
            globalName: output.name
          } : {
            runtimeToolCallId: output.id,
            globalName: output.name,
            inputJson: output.input
          }
        }
      ];
    case "toolResultConsumed":
      return [
        {
          cellId,
          toolResultConsumed: output.id
        }
      ];
    case "notify":
      return [
        {
          cellId,
          notify: output.text
        }
      ];
    case "result": {
      const events = [];
      const writes = output.writes;
      for (let from = 0; from < writes.length; ) {
        const end = storeBatchEnd(writes, from);
        events.push(storedWritesEvent(cellId, writes, from, end));
        from = end;
      }
      events.push({
        cellId,
        result: output.trimmedError ? {
          trimmedError: wireTrimmed(output.trimmedError)
        } : output.error === void 0 ? {} : {
          errorText: output.error
        }
      });
      return events;
    }
    case "storedWrites":
      return [
        storedWritesEvent(cellId, output.writes, 0, output.writes.length)
      ];
    case "idle":
      return [
        {
          cellId,
          idle: output.stretch >>> 0
        }
      ];
    case "stopped":
    case "pong":
      return [];
  }
}
function storedWritesEvent(cellId, writes, from, end) {
  const entries = [];
  for (let i = from; i < end; i++) entries.push({
    key: writes[i][0],
    valueJson: writes[i][1]
  });
  return {
    cellId,
    storedWrites: {
      entries
    }
  };
}
var utf8 = new TextEncoder();
function wireTrimmed(text) {
  const { head, tail, total, jsonExtra } = text;
  return jsonExtra ? {
    head,
    tail,
    totalBytes: total,
    jsonExtraBytes: jsonExtra
  } : {
    head,
    tail,
    totalBytes: total
  };
}
function tryLock(sink, id) {
  return Atomics.compareExchange(sink, SINK_LOCK, 0, id) === 0;
}
function unlock(sink, id) {
  if (Atomics.compareExchange(sink, SINK_LOCK, id, 0) !== id) return false;
  Atomics.notify(sink, SINK_LOCK);
  return true;
}
function writeAllSync(bytes) {
  const length = bytes.length;
  let offset = Deno.stdout.writeSync(bytes);
  while (offset < length) offset += Deno.stdout.writeSync(bytes.subarray(offset));
}

// worker/runtime.ts
import process from "node:process";

// proto/schema_codec.ts
var utf82 = new TextEncoder();
var MAX_UINT32 = 4294967295;
function integer(value, type, field) {
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
var SHORT_STRING = 64;
function shortUtf8Length(text) {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 128) bytes += 1;
    else if (c < 2048) bytes += 2;
    else if (c >= 55296 && c <= 56319 && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 56320 && next <= 57343) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}
function planMessage(value, schema, plan) {
  let size = 0;
  for (const field of schema.fields) {
    const v = value[field.name];
    if (v === void 0 || v === null) continue;
    if (field.repeated) {
      for (const item of v) size += planField(item, field, plan);
    } else {
      size += planField(v, field, plan);
    }
  }
  return size;
}
function planField(value, field, plan) {
  const tag = varintBytes(field.no * 8);
  const type = field.type;
  if (typeof type === "object") {
    const slot = plan.lengths.length;
    plan.lengths.push(0);
    const length = planMessage(value, type, plan);
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
      const bytes = utf82.encode(text);
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
var Writer = class {
  out;
  plan;
  pos;
  stringAt;
  lengthAt;
  constructor(out, plan) {
    this.out = out;
    this.plan = plan;
    this.pos = 0;
    this.stringAt = 0;
    this.lengthAt = 0;
  }
  varint(value) {
    const out = this.out;
    if (typeof value === "bigint") {
      for (let i = 0; i < 9; i++) {
        out[this.pos++] = Number(value & 0x7fn) | 128;
        value >>= 7n;
      }
      out[this.pos++] = Number(value);
      return;
    }
    while (value > MAX_UINT32) {
      out[this.pos++] = value % 128 | 128;
      value = Math.floor(value / 128);
    }
    while (value >= 128) {
      out[this.pos++] = value & 127 | 128;
      value >>>= 7;
    }
    out[this.pos++] = value;
  }
  /** Writes a short string as UTF-8 (lone surrogates as U+FFFD, like `TextEncoder`). */
  shortUtf8(text) {
    const out = this.out;
    let pos = this.pos;
    for (let i = 0; i < text.length; i++) {
      let c = text.charCodeAt(i);
      if (c < 128) {
        out[pos++] = c;
        continue;
      }
      if (c < 2048) {
        out[pos++] = 192 | c >> 6;
        out[pos++] = 128 | c & 63;
        continue;
      }
      if (c >= 55296 && c <= 57343) {
        const next = i + 1 < text.length ? text.charCodeAt(i + 1) : 0;
        if (c <= 56319 && next >= 56320 && next <= 57343) {
          c = 65536 + (c - 55296 << 10) + (next - 56320);
          i++;
          out[pos++] = 240 | c >> 18;
          out[pos++] = 128 | c >> 12 & 63;
          out[pos++] = 128 | c >> 6 & 63;
          out[pos++] = 128 | c & 63;
          continue;
        }
        c = 65533;
      }
      out[pos++] = 224 | c >> 12;
      out[pos++] = 128 | c >> 6 & 63;
      out[pos++] = 128 | c & 63;
    }
    this.pos = pos;
  }
  message(value, schema) {
    for (const field of schema.fields) {
      const v = value[field.name];
      if (v === void 0 || v === null) continue;
      if (field.repeated) {
        for (const item of v) this.field(item, field);
      } else {
        this.field(v, field);
      }
    }
  }
  field(value, field) {
    const type = field.type;
    if (typeof type === "object") {
      this.varint(field.no * 8 + 2);
      this.varint(this.plan.lengths[this.lengthAt++]);
      this.message(value, type);
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
};
function encodeMessage(value, schema) {
  const plan = {
    strings: [],
    lengths: []
  };
  const size = planMessage(value, schema, plan);
  const writer = new Writer(new Uint8Array(size), plan);
  writer.message(value, schema);
  return writer.out;
}
var utf8Decoder = new TextDecoder();
var Reader = class {
  bytes;
  end;
  pos;
  constructor(bytes, start, end) {
    this.bytes = bytes;
    this.end = end;
    this.pos = start;
  }
  /** An unsigned varint, exact up to 2^53; larger values lose precision like protobufjs's Number longs. */
  varint() {
    const bytes = this.bytes;
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new RangeError("truncated varint");
      const b = bytes[this.pos++];
      result += (b & 127) * scale;
      if (b < 128) return result;
      scale *= 128;
    }
    throw new RangeError("varint longer than 10 bytes");
  }
  /** A varint as int32: its low 32 bits, signed. */
  int32() {
    const start = this.pos;
    this.varint();
    let low = 0;
    for (let i = 0, p = start; i < 5 && p < this.pos; i++, p++) low |= (this.bytes[p] & 127) << 7 * i;
    return low | 0;
  }
  length() {
    const n = this.varint();
    if (n > this.end - this.pos) throw new RangeError("length exceeds the message");
    return n;
  }
  skip(wireType) {
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
  advance(n) {
    if (n > this.end - this.pos) throw new RangeError("truncated field");
    this.pos += n;
  }
};
function longString(bytes) {
  const text = utf8Decoder.decode(bytes);
  if (bytes[0] !== 239 && !text.includes("\uFFFD")) rememberUtf8(text, bytes);
  return text;
}
function shortString(bytes, start, length) {
  let text = "";
  for (let i = start; i < start + length; i++) {
    const b = bytes[i];
    if (b >= 128) return utf8Decoder.decode(bytes.subarray(start, start + length));
    text += String.fromCharCode(b);
  }
  return text;
}
function wireTypeOf(field) {
  return typeof field.type === "object" || field.type === "string" ? 2 : 0;
}
function decodeInto(reader, schema) {
  const out = {};
  while (reader.pos < reader.end) {
    const key = reader.varint();
    const no = Math.floor(key / 8);
    const wireType = key & 7;
    const field = schema.byNo.get(no);
    if (no === 0) throw new RangeError("field number 0");
    if (field === void 0 || wireTypeOf(field) !== wireType) {
      reader.skip(wireType);
      continue;
    }
    let value;
    const type = field.type;
    if (typeof type === "object") {
      const length = reader.length();
      const end = reader.pos + length;
      value = decodeInto(new Reader(reader.bytes, reader.pos, end), type);
      reader.pos = end;
    } else if (type === "string") {
      const length = reader.length();
      value = length <= SHORT_STRING ? shortString(reader.bytes, reader.pos, length) : longString(reader.bytes.subarray(reader.pos, reader.pos + length));
      reader.pos += length;
    } else if (type === "bool") {
      value = reader.varint() !== 0;
    } else if (type === "int32") {
      value = reader.int32();
    } else if (type === "uint32") {
      value = reader.varint() % 4294967296;
    } else {
      value = reader.varint();
    }
    if (field.repeated) {
      (out[field.name] ??= []).push(value);
      continue;
    }
    if (field.oneof !== void 0) {
      for (const other of schema.fields) {
        if (other.oneof === field.oneof && other !== field) delete out[other.name];
      }
      if (!field.oneof.startsWith("_")) out[field.oneof] = field.name;
    }
    out[field.name] = value;
  }
  return out;
}
function decodeMessage(bytes, schema) {
  return decodeInto(new Reader(bytes, 0, bytes.length), schema);
}

// proto/worker_schema.ts
function message(name, fields) {
  return {
    name,
    fields,
    byNo: new Map(fields.map((f2) => [
      f2.no,
      f2
    ]))
  };
}
var f = (no, name, type, oneof) => ({
  no,
  name,
  type,
  ...oneof === void 0 ? {} : {
    oneof
  }
});
var P = "codemode.worker.v1.";
var EMPTY = (name) => message(P + name, []);
var TRIMMED_TEXT = message(P + "TrimmedText", [
  f(1, "head", "string"),
  f(2, "tail", "string"),
  f(3, "totalBytes", "uint64"),
  f(4, "jsonExtraBytes", "uint64")
]);
var STORE_ENTRY = message(P + "StoreEntry", [
  f(1, "key", "string"),
  f(2, "valueJson", "string")
]);
var STORED_WRITES = message(P + "StoredWrites", [
  {
    no: 1,
    name: "entries",
    type: STORE_ENTRY,
    repeated: true
  }
]);
var CELL_TOOL = message(P + "CellTool", [
  f(1, "globalName", "string"),
  f(2, "description", "string")
]);
var HOST_TO_WORKER = message(P + "HostToWorker", [
  f(1, "configure", message(P + "Configure", [
    f(1, "sessionId", "string"),
    f(2, "outputTruncation", "int32"),
    f(3, "cellHeapLimitMb", "uint32"),
    f(4, "maxMessageBytes", "uint64"),
    f(5, "maxStoredValueBytes", "uint64"),
    f(7, "outputEventCredit", "uint32"),
    f(8, "outputByteCredit", "uint64"),
    f(9, "maxFrameBytes", "uint64"),
    f(10, "jsonSizes", "bool")
  ]), "message"),
  f(2, "storeUpdate", message(P + "StoreUpdate", [
    f(1, "version", "uint64"),
    f(2, "reset", "bool"),
    {
      no: 3,
      name: "entries",
      type: STORE_ENTRY,
      repeated: true
    }
  ]), "message"),
  f(3, "startCell", message(P + "StartCell", [
    f(1, "cellId", "string"),
    f(2, "source", "string"),
    {
      no: 3,
      name: "tools",
      type: CELL_TOOL,
      repeated: true
    },
    f(4, "storeVersion", "uint64")
  ]), "message"),
  f(4, "toolResult", message(P + "ToolResult", [
    f(1, "cellId", "string"),
    f(2, "runtimeToolCallId", "string"),
    f(3, "outputJson", "string", "result"),
    f(4, "errorMessage", "string", "result")
  ]), "message"),
  f(5, "credit", message(P + "Credit", [
    f(1, "cellId", "string"),
    f(2, "events", "uint32"),
    f(3, "bytes", "uint64")
  ]), "message"),
  f(6, "stopCell", message(P + "StopCell", [
    f(1, "cellId", "string")
  ]), "message"),
  f(8, "shutdown", EMPTY("Shutdown"), "message"),
  f(10, "ping", message(P + "Ping", [
    f(1, "seq", "uint32")
  ]), "message")
]);
var WORKER_TO_HOST = message(P + "WorkerToHost", [
  f(1, "ready", message(P + "Ready", [
    f(1, "denoVersion", "string"),
    f(2, "protocolVersion", "uint32")
  ]), "message"),
  f(2, "cellEvent", message(P + "CellEvent", [
    f(1, "cellId", "string"),
    f(2, "started", EMPTY("Empty"), "event"),
    f(3, "contentItem", message(P + "ContentItem", [
      f(1, "text", "string", "item"),
      f(2, "image", message(P + "ImageItem", [
        f(1, "imageUrl", "string"),
        f(2, "detail", "string")
      ]), "item"),
      f(3, "audioUrl", "string", "item"),
      f(4, "trimmedText", TRIMMED_TEXT, "item"),
      f(5, "droppedMedia", message(P + "DroppedMedia", [
        f(1, "kind", "string"),
        f(2, "bytes", "uint64"),
        f(3, "detail", "string"),
        f(4, "jsonExtraBytes", "uint64")
      ]), "item")
    ]), "event"),
    f(4, "yieldRequested", EMPTY("Empty"), "event"),
    f(5, "toolCall", message(P + "ToolCallEvent", [
      f(1, "runtimeToolCallId", "string"),
      f(2, "globalName", "string"),
      f(3, "inputJson", "string", "_inputJson")
    ]), "event"),
    f(6, "toolResultConsumed", "string", "event"),
    f(7, "notify", "string", "event"),
    f(8, "pending", EMPTY("Empty"), "event"),
    f(9, "storedWrite", message(P + "StoredWrite", [
      f(1, "key", "string"),
      f(2, "valueJson", "string")
    ]), "event"),
    f(10, "result", message(P + "CellResult", [
      f(1, "errorText", "string", "error"),
      f(2, "trimmedError", TRIMMED_TEXT, "error")
    ]), "event"),
    f(11, "exited", message(P + "Exited", [
      f(1, "reason", "string"),
      f(2, "detail", "string", "_detail")
    ]), "event"),
    {
      no: 12,
      name: "storedWrites",
      type: STORED_WRITES,
      oneof: "event"
    },
    f(13, "busy", "uint32", "event"),
    f(14, "idle", "uint32", "event")
  ]), "message"),
  f(3, "runtimeFault", message(P + "RuntimeFault", [
    f(1, "detail", "string")
  ]), "message"),
  f(4, "pong", message(P + "Pong", [
    f(1, "seq", "uint32")
  ]), "message"),
  f(15, "lineEnd", "uint32")
]);

// proto/worker_codec.ts
function createWorkerCodec() {
  return {
    encodeHostToWorker: (m) => encodeMessage(m, HOST_TO_WORKER),
    decodeHostToWorker: (b) => decodeMessage(b, HOST_TO_WORKER),
    encodeWorkerToHost: (m) => encodeMessage(m, WORKER_TO_HOST),
    decodeWorkerToHost: (b) => decodeMessage(b, WORKER_TO_HOST)
  };
}

// worker/runtime_output.ts
var MAIN_LOCK_ID = 1;
var JOIN_BYTES = 256 * 1024;
var RETRY_MS = 1;
var FrameOutput = class {
  #codec = createWorkerCodec();
  #write;
  #clock;
  #maxFrameBytes;
  #onBroken;
  /** The stream words shared with every cell worker (`SINK_*`, `cell_events.ts`). */
  sink = new Int32Array(new SharedArrayBuffer(4 * SINK_WORDS));
  #nextLockId = MAIN_LOCK_ID + 1;
  /** Frames waiting for the stream lock, in order. */
  #pending = [];
  #flushQueued = false;
  #retry;
  /** @param options see {@link FrameOutputOptions} */
  constructor(options) {
    this.#write = options.write;
    this.#clock = options.clock;
    this.#maxFrameBytes = options.maxFrameBytes;
    this.#onBroken = options.onBroken;
  }
  /** A new cell worker's lock ID on {@link FrameOutput.sink}. */
  nextLockId() {
    return this.#nextLockId++;
  }
  /** Whether frames still wait for the stream lock. */
  get hasPending() {
    return this.#pending.length > 0;
  }
  /** Whether the cell worker with lock ID `lockId` holds the stream lock (it is writing). */
  isLockedBy(lockId) {
    return Atomics.load(this.sink, SINK_LOCK) === lockId;
  }
  /**
   * Frees the stream lock of a cell worker that ended, maybe while writing (terminated, or out of
   * memory), and writes the frames that waited for it. A frame cut short there breaks the stream,
   * which the host reports as a runtime failure.
   */
  releaseLock(lockId) {
    unlock(this.sink, lockId);
    if (this.#pending.length > 0) this.flush();
  }
  /** Encodes `message` (with its line end) and queues its frame. */
  send(message2) {
    message2.lineEnd = LINE_END;
    this.queue(encodeFrame(this.#codec.encodeWorkerToHost(message2), this.#maxFrameBytes()));
  }
  /** Sends one cell event. */
  sendCellEvent(event) {
    this.send({
      cellEvent: event
    });
  }
  /** Queues a complete frame; the queue is written at the end of this task's microtasks. */
  queue(frame) {
    this.#pending.push(frame);
    if (this.#flushQueued) return;
    this.#flushQueued = true;
    queueMicrotask(this.flush);
  }
  /**
   * Writes the pending frames in order, small ones joined, if the stream lock is free; else looks
   * again in {@link RETRY_MS} (a cell is writing). The write blocks this thread only while the host
   * is not reading: it always reads.
   */
  flush = () => {
    this.#flushQueued = false;
    if (this.#pending.length === 0) return;
    if (!tryLock(this.sink, MAIN_LOCK_ID)) {
      this.#retry ??= this.#clock.setTimeout(() => {
        this.#retry = void 0;
        this.flush();
      }, RETRY_MS);
      return;
    }
    const frames = this.#pending;
    this.#pending = [];
    try {
      this.#writeJoined(frames);
    } catch {
      this.#onBroken();
    } finally {
      unlock(this.sink, MAIN_LOCK_ID);
    }
  };
  #writeJoined(frames) {
    let group = [];
    let groupBytes = 0;
    const emit = () => {
      if (group.length === 0) return;
      const bytes = group.length === 1 ? group[0] : new Uint8Array(groupBytes);
      if (group.length > 1) {
        let offset = 0;
        for (const frame of group) {
          bytes.set(frame, offset);
          offset += frame.length;
        }
      }
      group = [];
      groupBytes = 0;
      this.#write(bytes);
    };
    for (const frame of frames) {
      if (groupBytes + frame.length > JOIN_BYTES) emit();
      group.push(frame);
      groupBytes += frame.length;
    }
    emit();
  }
};

// worker/store_snapshot.ts
var SMALL_OVERLAY = 4096;
var HEADER_WORDS = 2;
function hash(key) {
  let h = 2166136261;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 16777619);
  return h >>> 0;
}
function buildSnapshot(entries) {
  const count = entries.size;
  let units = 0;
  for (const [key, value] of entries) units += key.length + value.length;
  let tableSize = 2;
  while (tableSize < count * 2) tableSize *= 2;
  const wordsBytes = 4 * (HEADER_WORDS + tableSize + 3 * count);
  const buffer = new SharedArrayBuffer(wordsBytes + 2 * units);
  const words = new Int32Array(buffer, 0, HEADER_WORDS + tableSize + 3 * count);
  const chars = new Uint16Array(buffer, wordsBytes, units);
  words[0] = count;
  words[1] = tableSize;
  const mask = tableSize - 1;
  const table = HEADER_WORDS;
  const index = HEADER_WORDS + tableSize;
  let at = 0;
  let i = 0;
  for (const [key, value] of entries) {
    words[index + 3 * i] = at;
    words[index + 3 * i + 1] = key.length;
    words[index + 3 * i + 2] = value.length;
    for (let j = 0; j < key.length; j++) chars[at++] = key.charCodeAt(j);
    for (let j = 0; j < value.length; j++) chars[at++] = value.charCodeAt(j);
    let slot = hash(key) & mask;
    while (words[table + slot] !== 0) slot = slot + 1 & mask;
    words[table + slot] = ++i;
  }
  return buffer;
}
var StoreReplica = class {
  #values = /* @__PURE__ */ new Map();
  #bytes = 0;
  #base;
  /** Entries set since the base was built (all of them while there is none). */
  #overlay = /* @__PURE__ */ new Map();
  /** Applies one `StoreUpdate` frame (a `reset` one empties the replica first). */
  update(reset, entries) {
    if (reset) {
      this.#values.clear();
      this.#overlay.clear();
      this.#base = void 0;
      this.#bytes = 0;
    }
    const values = this.#values;
    for (const { key, valueJson } of entries) {
      const value = valueJson ?? "null";
      const old = values.get(key);
      const keyBytes = utf8ByteLength(key);
      if (old !== void 0) this.#bytes -= keyBytes + utf8ByteLength(old);
      this.#bytes += keyBytes + utf8ByteLength(value);
      values.set(key, value);
      this.#overlay.set(key, value);
    }
  }
  /**
   * What the next cell start carries: the base, rebuilt first when the overlay has grown past
   * its bound, the overlay and the size.
   */
  start() {
    const overlay = this.#overlay;
    if (overlay.size > SMALL_OVERLAY && overlay.size * 8 > this.#values.size) {
      this.#base = buildSnapshot(this.#values);
      overlay.clear();
    }
    const start = {
      store: [
        ...overlay
      ],
      storeBytes: this.#bytes
    };
    if (this.#base !== void 0) start.storeBase = this.#base;
    return start;
  }
};

// worker/runtime_pool.ts
import { MessageChannel, Worker } from "node:worker_threads";

// worker/collect_garbage.ts
import v8 from "node:v8";
import vm from "node:vm";
function collectGarbage() {
  try {
    v8.setFlagsFromString("--expose-gc");
    const gc = vm.runInNewContext("gc");
    v8.setFlagsFromString("--no-expose-gc");
    gc();
  } catch {
  }
}

// worker/runtime_pool.ts
var cellUrl = new URL("./cell.js", import.meta.url);
var RETIRE_AFTER_CELLS = 1e3;
var RECYCLE_WAIT_MS = 1e3;
var SPARE_WHILE_RUNNING_MS = 1e3;
var PREWARM_IDLE_MS = 50;
var CellWorkerPool = class {
  #options;
  /** Whether the first spare was prepared (and {@link CellWorkerPoolOptions.rehearse} run). */
  #firstPrepared = false;
  #clock;
  #createThread;
  #spare;
  /** A cell started while another ran: the session runs cells concurrently. */
  #concurrent = false;
  /** The timer of {@link SPARE_WHILE_RUNNING_MS}. */
  #spareWhileRunning;
  /** The timer of {@link PREWARM_IDLE_MS}. */
  #prewarming;
  /** @param options see {@link CellWorkerPoolOptions} */
  constructor(options) {
    this.#options = options;
    this.#clock = options.clock;
    this.#createThread = options.createThread ?? ((heapMb) => new Worker(cellUrl, {
      resourceLimits: {
        maxOldGenerationSizeMb: heapMb
      }
    }));
  }
  /** Whether a spare is ready (or booting). */
  get hasSpare() {
    return this.#spare !== void 0;
  }
  /** Creates the first spare after {@link PREWARM_IDLE_MS}, unless a `Configure` comes first. */
  armPrewarm() {
    this.#prewarming = this.#clock.setTimeout(() => this.#prepareFirstSpare(), PREWARM_IDLE_MS);
  }
  /**
   * A `Configure` arrived: a spare of another heap limit is replaced, the first spare created. A
   * runtime that made its first spare already (one handed over to another session) gets its next
   * spare by the usual rules: its last cell's worker is recycled, or a new one comes a turn later.
   * That cell wrote its result itself, so this Configure can come before this thread has read the
   * result (the host hands the runtime over as soon as the result reaches its client); creating a
   * spare here then blocked this thread for a Worker's start (100–200 ms) and retired the recycled
   * worker (bench:scale's turns across 100 sessions: two or three such stalls per 100 turns).
   */
  configured() {
    this.#clock.clearTimeout(this.#prewarming);
    const heapMb = this.#options.config().heapMb;
    const spare = this.#spare;
    const replaced = spare !== void 0 && spare.heapMb !== heapMb;
    if (replaced) {
      this.discard(spare);
      this.#spare = void 0;
    }
    if (!this.#firstPrepared) return this.#prepareFirstSpare();
    if (replaced) return this.#refillSpare();
    if (!this.#spare && !this.#options.anyRunning()) this.scheduleSpare();
  }
  /** Ends the spare and the prewarm (the in-process runtime's end). */
  dispose() {
    this.#clock.clearTimeout(this.#prewarming);
    if (this.#spare) this.release(this.#spare);
    this.#spare = void 0;
  }
  /** The worker for a starting cell run: the spare if it fits, else a new one. */
  take() {
    const spare = this.#spare;
    const heapMb = this.#options.config().heapMb;
    const taken = spare && !spare.dead && !spare.retired && spare.heapMb === heapMb ? spare : void 0;
    if (spare && spare !== taken) this.discard(spare);
    this.#spare = void 0;
    return taken ?? this.create(heapMb);
  }
  /**
   * A cell run started with `running` runs unfinished: once two ran at the same time, a worker is
   * kept ready for the next concurrent one too.
   */
  noteRunning(running) {
    if (running > 1) this.#concurrent = true;
    if (this.#spare === void 0 && this.#concurrent) this.#armSpareWhileRunning();
  }
  /** Creates a cell worker: it boots, gets `warm` with its ports, and parks (see `ready`). */
  create(heapMb) {
    const thread = this.#createThread(heapMb);
    const output = new MessageChannel();
    const control = new MessageChannel();
    const worker = {
      thread,
      heapMb,
      ready: Promise.resolve(),
      settled: false,
      dead: false,
      closed: false,
      output: output.port1,
      control: control.port1,
      words: new Int32Array(new SharedArrayBuffer(4 * CELL_WORDS)),
      sinkId: this.#options.output.nextLockId(),
      onOutput: () => {
      },
      served: 0,
      retired: false
    };
    output.port1.on("message", (message2) => worker.onOutput(message2));
    worker.ready = new Promise((settle) => {
      const resolve = () => {
        worker.settled = true;
        settle();
      };
      worker.onOutput = () => resolve();
      this.#warmWhenReady(worker, output.port2, control.port2);
      thread.once("exit", () => {
        worker.dead = true;
        this.#options.output.releaseLock(worker.sinkId);
        resolve();
        const run = worker.run;
        if (run) this.#clock.setTimeout(() => this.#options.onExit(run), 0);
      });
    });
    thread.on("error", (error) => {
      worker.dead = true;
      const run = worker.run;
      if (!run) return;
      if (error?.code === "ERR_WORKER_OUT_OF_MEMORY") run.exitReason = "heap_limit";
      else {
        run.exitReason = "fault";
        run.exitDetail = String(error?.message ?? error);
      }
    });
    return worker;
  }
  /** Hands a booted worker (`ready`) its ports and words with `warm`, so that it parks. */
  #warmWhenReady(worker, output, control) {
    const thread = worker.thread;
    const onMessage = (message2) => {
      if (message2?.t !== "ready") return;
      thread.off("message", onMessage);
      if (worker.closed) return;
      thread.postMessage({
        t: "warm",
        // The cell protocol names the web MessagePort type; these are node:worker_threads ports,
        // which Deno implements as the same class.
        port: output,
        control,
        words: worker.words,
        ...this.#options.cellsWriteFrames ? {
          sink: this.#options.output.sink,
          sinkId: worker.sinkId
        } : {}
      }, [
        output,
        control
      ]);
    };
    thread.on("message", onMessage);
  }
  /** Wakes a parked worker for good: a thread asleep in `Atomics.wait` ignores `terminate()`. */
  unpark(worker) {
    Atomics.store(worker.words, CELL_DOORBELL, 2);
    Atomics.notify(worker.words, CELL_DOORBELL);
  }
  /** Ends a worker that will never serve a cell run (a spare, or one stopped before it started). */
  discard(worker) {
    worker.run = void 0;
    worker.retired = true;
    this.unpark(worker);
    worker.closed = true;
    worker.output.close();
    worker.control.close();
    this.#terminate(worker);
  }
  /**
   * Ends a worker and lets go of it: it no longer keeps the process alive, even if Deno cannot stop
   * it (a spinning thread, in-process isolation: see `Runtime.abandonCell`).
   */
  release(worker) {
    this.unpark(worker);
    worker.closed = true;
    worker.output.close();
    worker.control.close();
    worker.thread.unref?.();
    this.#terminate(worker);
  }
  /**
   * Closes the control of a cell run's worker that will not be reused, before its thread is
   * terminated: also a worker that built a fresh realm on its own and parked (the runtime did not
   * reuse it) is woken for good.
   */
  close(worker) {
    this.unpark(worker);
    worker.closed = true;
    worker.control.close();
  }
  /** Terminates a worker's thread without waiting for its end (see {@link terminated}). */
  #terminate(worker) {
    worker.thread.terminate().then(ignoreOutcome, ignoreOutcome);
  }
  /** Whether a cell run's worker may serve the next cell run (SPEC §5.1): it completed, cleanly. */
  reusable(run) {
    const worker = run.worker;
    return !run.stopRequested && run.exitReason === "normal" && !worker.dead && !worker.retired && !this.#options.exiting() && worker.heapMb === this.#options.config().heapMb && Atomics.load(worker.words, CREDIT_STOP) === 0;
  }
  /**
   * Keeps a completed cell run's worker for the next cell run: it is the spare again once it
   * confirms its fresh realm (`recycled`), unless the retire policy ends it then. A start that
   * comes first waits for that confirmation (usually well under a millisecond).
   */
  recycle(run) {
    const worker = run.worker;
    worker.run = void 0;
    worker.settled = false;
    let timer;
    worker.ready = new Promise((settle) => {
      const onExit = () => done();
      const done = () => {
        this.#clock.clearTimeout(timer);
        worker.thread.off("exit", onExit);
        worker.settled = true;
        settle();
      };
      worker.thread.once("exit", onExit);
      timer = this.#clock.setTimeout(() => {
        this.retire(worker);
        done();
      }, RECYCLE_WAIT_MS);
      worker.onOutput = (output) => {
        if (Array.isArray(output) || output.t !== "recycled") return;
        const limit = Math.min(RETIRE_HEAP_BYTES, worker.heapMb * MIB * RETIRE_HEAP_SHARE);
        if (worker.served >= this.#options.retireAfterCells || output.heap > limit) this.retire(worker);
        done();
      };
      if (worker.dead) done();
    });
    if (this.#spare === void 0 && !this.#options.exiting()) {
      this.#spare = worker;
      this.#clock.clearTimeout(this.#spareWhileRunning);
      this.#spareWhileRunning = void 0;
    } else if (this.#spare !== worker) {
      this.retire(worker);
    }
  }
  /** Ends a worker that will serve no further cell run; a new spare follows if it was the spare. */
  retire(worker) {
    if (worker.retired) return;
    const wasSpare = this.#spare === worker;
    if (wasSpare) this.#spare = void 0;
    this.discard(worker);
    if (wasSpare) this.scheduleSpare();
  }
  /**
   * Creates the next spare after a turn of the event loop. On Deno 2.9.6 `new Worker()` blocks the
   * calling thread for ~30 ms, in which this thread neither reads host frames (a start, a stop,
   * credit) nor writes its own (cells still write theirs); between cells the time is usually free
   * (a model thinks for seconds between cells).
   */
  scheduleSpare() {
    this.#clock.setTimeout(() => this.#refillSpare(), 0);
  }
  #refillSpare() {
    if (!this.#spare && !this.#options.exiting()) this.#spare = this.create(this.#options.config().heapMb);
  }
  /** Creates a spare if a cell still runs with none ready after {@link SPARE_WHILE_RUNNING_MS}. */
  #armSpareWhileRunning() {
    this.#spareWhileRunning ??= this.#clock.setTimeout(() => {
      this.#spareWhileRunning = void 0;
      if (this.#options.anyRunning()) this.#refillSpare();
    }, SPARE_WHILE_RUNNING_MS);
  }
  /**
   * Collects the runtime's own start-up garbage, then creates its first spare: no other isolate of
   * the process creates a context meanwhile (see collect_garbage.ts).
   */
  #prepareFirstSpare() {
    if (this.#spare) return;
    if (this.#options.collectGarbage) collectGarbage();
    this.#refillSpare();
    if (this.#firstPrepared) return;
    this.#firstPrepared = true;
    this.#options.rehearse?.();
  }
};
function terminated(thread) {
  return thread.terminate().then(ignoreOutcome, ignoreOutcome);
}
function ignoreOutcome() {
}

// worker/runtime_records.ts
var DEFAULT_RUNTIME_CONFIG = Object.freeze({
  heapMb: 1024,
  maxMessageBytes: MAX_MESSAGE_BYTES,
  maxStoredValueBytes: MAX_MESSAGE_BYTES,
  maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
  server: false,
  jsonSizes: false,
  creditEvents: 128,
  creditBytes: 2 * MIB
});

// proto/clock.ts
var MAX_TIMER_MS = MAX_INT32;
var realClock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, Math.min(MAX_TIMER_MS, Math.max(0, ms))),
  clearTimeout: (handle) => clearTimeout(handle)
};
var TIMED_OUT = Symbol("timed out");

// worker/runtime_runs.ts
import { setImmediate } from "node:timers";
import { receiveMessageOnPort } from "node:worker_threads";
var NOTE_WAIT_MS = 50;
var STOP_WAIT_MS = 1;
var STOP_HOLD_MS = 40;
var BUSY_LOOK_MS = 5;
var CellRuns = class {
  #clock;
  #pool;
  #output;
  #options;
  #runs = /* @__PURE__ */ new Map();
  /** Cells whose StartCell waits for the note of the last cell's result (not yet in `#runs`). */
  #startsWaiting = /* @__PURE__ */ new Set();
  /** Of those, the ones a StopCell named meanwhile. */
  #stopsWhileWaiting = /* @__PURE__ */ new Set();
  /** The next look at the busy stretches, while cells run. */
  #busyTimer;
  /** A stopped cell that is not running code and has not confirmed yet (see {@link CellRuns.answer}). */
  #unconfirmed;
  /** @param options see {@link CellRunsOptions} */
  constructor(options) {
    this.#clock = options.clock;
    this.#pool = options.pool;
    this.#output = options.output;
    this.#options = options;
  }
  /** The runs whose exit is not reported yet. */
  values() {
    return this.#runs.values();
  }
  /** Whether a run has not finished. */
  anyRunning() {
    for (const run of this.#runs.values()) if (!run.finished) return true;
    return false;
  }
  /**
   * Starts a cell run on the spare, a recycled worker, or a new one, then posts its start and sends
   * `started` (from here the host counts the yield time of its first observation).
   */
  async start(start) {
    const note = this.#pool.hasSpare ? void 0 : this.#noteOfLastResult();
    if (note !== void 0) {
      let timer;
      this.#startsWaiting.add(start.cellId);
      await Promise.race([
        note,
        new Promise((resolve) => timer = this.#clock.setTimeout(resolve, NOTE_WAIT_MS))
      ]);
      this.#clock.clearTimeout(timer);
      this.#startsWaiting.delete(start.cellId);
    }
    let worker = this.#pool.take();
    const run = this.#newRun(start.cellId, worker);
    this.#runs.set(start.cellId, run);
    worker.run = run;
    if (this.#stopsWhileWaiting.delete(start.cellId)) this.stop(start.cellId);
    if (!worker.settled) await worker.ready;
    if (worker.retired && !run.finished && !run.exited) {
      worker.run = void 0;
      worker = run.worker = this.#pool.create(this.#options.config().heapMb);
      worker.run = run;
      await worker.ready;
    }
    if (worker.dead) return;
    worker.served++;
    let running = 0;
    for (const other of this.#runs.values()) if (!other.finished) running++;
    this.#pool.noteRunning(running);
    worker.onOutput = (output) => {
      run.lastSeen = this.#clock.now();
      run.ping = void 0;
      this.#forward(run, output);
    };
    if (run.finished) return;
    this.#post(worker, this.#startMessage(start));
    run.started = true;
    this.#output.sendCellEvent({
      cellId: start.cellId,
      started: {}
    });
    run.lastSeen = this.#clock.now();
    this.#options.onStarted();
    this.#busyTimer ??= this.#clock.setTimeout(this.#lookBusy, BUSY_LOOK_MS);
  }
  /**
   * Reports each running cell's busy stretch that lasted {@link BUSY_LOOK_MS} (`cell_busy.ts`): after
   * what the cell posted before, and only while the stretch goes on and the cell has not written its
   * result. The host may stop such a cell at once; the cell writes `idle` as the stretch ends.
   */
  #lookBusy = () => {
    this.#busyTimer = void 0;
    let running = false;
    for (const run of this.#runs.values()) {
      if (!run.started || run.finished) continue;
      running = true;
      const words = run.worker.words;
      const stretch = Atomics.load(words, CELL_BUSY);
      const seen = run.busySeen;
      run.busySeen = stretch;
      if ((stretch & 1) === 0 || stretch !== seen || run.busyReported === stretch) continue;
      this.#drain(run);
      if (run.finished) continue;
      Atomics.store(words, CELL_BUSY_REPORTED, stretch);
      if (Atomics.load(words, CELL_BUSY) !== stretch || Atomics.load(words, CELL_RESULT) !== 0) continue;
      run.busyReported = stretch;
      this.#output.sendCellEvent({
        cellId: run.id,
        busy: stretch >>> 0
      });
    }
    if (running) this.#busyTimer ??= this.#clock.setTimeout(this.#lookBusy, BUSY_LOOK_MS);
  };
  /**
   * A back-to-back start can overtake the note of the last cell's result: the cell wrote its result
   * to the host itself, the harness sent the next cell, and this thread has not run the note's
   * message event yet, or the cell has not even posted it (a pipe write hands the CPU to the host).
   * Reads the queued notes; the note of a run whose result is written is worth a short wait, so
   * that the run's worker is reused (seen under load: a new worker every ~30 cells, and two workers
   * for one sequential session).
   *
   * @returns the note's settlement, or undefined when no run's result waits for its note
   */
  #noteOfLastResult() {
    for (const run of [
      ...this.#runs.values()
    ]) {
      if (!run.started || run.finished) continue;
      this.#drain(run);
      if (run.finished || Atomics.load(run.worker.words, CELL_RESULT) !== 1) continue;
      return (run.noted ??= Promise.withResolvers()).promise;
    }
    return void 0;
  }
  #newRun(id, worker) {
    return {
      id,
      worker,
      finished: false,
      exited: false,
      exitWritten: false,
      started: false,
      lastSeen: this.#clock.now(),
      exitReason: "normal",
      progress: 0,
      stopRequested: false,
      reuse: false,
      busySeen: 0,
      busyReported: 0
    };
  }
  #startMessage(start) {
    const config = this.#options.config();
    return {
      t: "start",
      cellId: start.cellId,
      source: start.source ?? "",
      tools: (start.tools ?? []).map((t) => ({
        name: t.globalName,
        description: t.description ?? ""
      })),
      ...this.#options.store(),
      maxStoredValueBytes: config.maxStoredValueBytes,
      maxMessageBytes: config.maxMessageBytes,
      maxFrameBytes: config.maxFrameBytes,
      credit: {
        maxEvents: config.creditEvents,
        maxBytes: config.creditBytes,
        // Server: what the collector could keep of a text or an image; Client: one message.
        trimTextOver: config.server ? 2 * MAX_TEXT_BYTES : config.maxMessageBytes,
        keepTextBytes: MAX_TEXT_BYTES,
        dropMediaOver: config.server ? MAX_MEDIA_BYTES : config.maxMessageBytes,
        jsonSizes: config.jsonSizes
      }
    };
  }
  /** Hands `message` to a parked worker: it takes it from its control port once the doorbell rings. */
  #post(worker, message2) {
    if (worker.served > 1) {
      for (const word of [
        CREDIT_EVENTS,
        CREDIT_BYTES,
        CREDIT_ACKED,
        CELL_PROGRESS,
        CELL_RESULT,
        CELL_STOPPED,
        CELL_BUSY,
        CELL_BUSY_REPORTED
      ]) {
        Atomics.store(worker.words, word, 0);
      }
    }
    worker.control.postMessage(message2);
    Atomics.store(worker.words, CELL_DOORBELL, 1);
    Atomics.notify(worker.words, CELL_DOORBELL);
  }
  /** Posts a control message to a cell that has not finished (a tool's result). */
  postToCell(cellId, message2) {
    const run = this.#runs.get(cellId);
    if (!run || run.finished) return;
    run.worker.thread.postMessage(message2);
  }
  /**
   * A host `StopCell`. A started cell is asked to stop, and this thread waits up to
   * {@link STOP_WAIT_MS} for its answer, so that a cell that stops cooperatively has reported its
   * exit before the host's next frame is answered (the host's ping after a StopCell: a cell not
   * ended by then is running code, and the host may restart the runtime at once).
   */
  stop(cellId) {
    const run = this.#runs.get(cellId);
    if (!run && this.#startsWaiting.has(cellId)) this.#stopsWhileWaiting.add(cellId);
    if (!run || run.finished) return;
    if (!run.started) {
      run.finished = true;
      this.reportExit(run);
      this.#pool.discard(run.worker);
      this.#pool.scheduleSpare();
      return;
    }
    run.stopRequested = true;
    Atomics.store(run.worker.words, CREDIT_STOP, 1);
    this.#wake(run);
    this.#drain(run);
    run.worker.thread.postMessage({
      t: "stop",
      cell: run.id
    });
    const until = performance.now() + STOP_WAIT_MS;
    while (Atomics.load(run.worker.words, CELL_STOPPED) === 0 && performance.now() < until) {
    }
    this.#drain(run);
    const words = run.worker.words;
    if (!run.finished && (Atomics.load(words, CELL_BUSY) & 1) === 0) {
      this.#release();
      this.#unconfirmed = {
        run,
        until: performance.now() + STOP_WAIT_MS + STOP_HOLD_MS,
        held: []
      };
    }
  }
  /**
   * Answers a host ping (`answer` sends the pong). The host takes a stopped cell that has not
   * confirmed by the answer to the ping after its StopCell for a cell running code, and restarts
   * the runtime; so while a stopped cell that was not running code has not confirmed, the answer
   * waits for its confirmation, for it to enter its code, or {@link STOP_HOLD_MS}, whichever comes
   * first. A cell that runs code is answered for at once.
   */
  answer(send) {
    const waiting = this.#unconfirmed;
    if (!waiting) return send();
    const first = waiting.held.length === 0;
    waiting.held.push(send);
    if (first) this.#watchUnconfirmed();
  }
  #watchUnconfirmed = () => {
    const waiting = this.#unconfirmed;
    if (!waiting) return;
    const { run } = waiting;
    if (!run.finished) this.#drain(run);
    const words = run.worker.words;
    if (run.finished || run.worker.dead || (Atomics.load(words, CELL_BUSY) & 1) === 1 || performance.now() >= waiting.until) {
      return this.#release();
    }
    setTimeout(this.#watchUnconfirmed, 1);
  };
  /** Sends the answers held for an unconfirmed stop. */
  #release() {
    const waiting = this.#unconfirmed;
    this.#unconfirmed = void 0;
    for (const send of waiting?.held ?? []) send();
  }
  /** A host `Credit`: the cell's next `events` counted outputs are acknowledged (it settles them). */
  credit(cellId, events) {
    const run = this.#runs.get(cellId);
    if (!run) return;
    Atomics.add(run.worker.words, CREDIT_ACKED, events);
    this.#wake(run);
  }
  #wake(run) {
    Atomics.add(run.worker.words, CREDIT_GENERATION, 1);
    Atomics.notify(run.worker.words, CREDIT_GENERATION);
  }
  /** Whether the cell is over its credit, i.e. its helper call is (or is about to be) waiting. */
  overCredit(run) {
    const words = run.worker.words;
    const config = this.#options.config();
    const unacked = Atomics.load(words, CREDIT_EVENTS) - Atomics.load(words, CREDIT_ACKED) | 0;
    return unacked > config.creditEvents || unacked > 0 && Atomics.load(words, CREDIT_BYTES) > config.creditBytes;
  }
  /**
   * Ends a running cell's worker without its result: the host gets `exited` with `reason` (the
   * heap-limit watchdog ends cells this way).
   */
  abort(cellId, reason, detail) {
    const run = this.#runs.get(cellId);
    if (!run || run.finished) return;
    run.finished = true;
    run.exitReason = reason;
    if (detail !== void 0) run.exitDetail = detail;
    this.#options.background(this.#end(run), "failed to end cell");
  }
  /**
   * Gives up on a cell that did not confirm its stop: nothing more of it is forwarded, no `exited`
   * is sent, and its worker is terminated and released.
   */
  abandon(cellId) {
    const run = this.#runs.get(cellId);
    if (!run) return;
    run.finished = true;
    run.exited = true;
    this.#runs.delete(cellId);
    this.#pool.release(run.worker);
    this.#pool.scheduleSpare();
  }
  /** Forwards what every run's cell posted so far (the runtime's shutdown). */
  drainAll() {
    for (const run of this.#runs.values()) this.#drain(run);
  }
  #drain(run) {
    for (; ; ) {
      const next = receiveMessageOnPort(run.worker.output);
      if (!next) return;
      this.#forward(run, next.message);
    }
  }
  /** Reports a run's exit to the host, once, after what its cell posted before it. */
  reportExit(run) {
    if (run.exited) return;
    this.#drain(run);
    if (run.exited) return;
    run.exited = true;
    this.#runs.delete(run.id);
    if (!run.reuse) {
      run.worker.closed = true;
      run.worker.output.close();
    }
    if (run.exitWritten) return;
    this.#output.sendCellEvent({
      cellId: run.id,
      exited: run.exitDetail === void 0 ? {
        reason: run.exitReason
      } : {
        reason: run.exitReason,
        detail: run.exitDetail
      }
    });
  }
  /** Ends a finished run's worker (not reused), then reports its exit and makes a new spare. */
  async #end(run) {
    this.#pool.close(run.worker);
    await terminated(run.worker.thread);
    this.reportExit(run);
    this.#pool.scheduleSpare();
  }
  /**
   * Ends a finished run's worker once the frames just queued are on their way: `terminate()` costs
   * its caller ~0.1 ms, which the run's result would otherwise wait for.
   */
  #endSoon(run) {
    setImmediate(() => this.#options.background(this.#end(run), "failed to end cell"));
  }
  #forward(run, output) {
    if (Array.isArray(output)) {
      for (const one of output) this.#forward(run, one);
      return;
    }
    if (output.t === "warmed") return;
    if (output.t === "recycled") {
      if (run.reuse) run.worker.onOutput(output);
      return;
    }
    const final = output.t === "result" || output.t === "stopped";
    if (final && run.finished) return;
    if (!("w" in output)) {
      for (const event of wireCellEvents(run.id, output)) this.#output.sendCellEvent(event);
    }
    if (final) {
      run.finished = true;
      if ("w" in output) run.exitWritten = true;
      run.reuse = output.t === "result" && this.#pool.reusable(run);
      run.noted?.resolve();
      if (run.reuse) this.#pool.recycle(run);
      this.reportExit(run);
      if (!run.reuse) this.#endSoon(run);
    }
  }
};

// worker/runtime_watchdog.ts
var WATCHDOG_MS = 250;
var SILENCE_MS = 500;
var PARKED_WINDOW_MS = 1e3;
var PARKED_CPU_SHARE = 0.02;
var RSS_ALLOWANCE_MB = 512;
var ParkedCellWatchdog = class {
  #options;
  #clock;
  #timer;
  /** @param options see {@link ParkedCellWatchdogOptions} */
  constructor(options) {
    this.#options = options;
    this.#clock = options.clock;
  }
  /** Looks again in {@link WATCHDOG_MS} (a cell run started), unless a look is due already. */
  arm() {
    this.#timer ??= this.#clock.setTimeout(this.#watch, WATCHDOG_MS);
  }
  #watch = () => {
    this.#timer = void 0;
    if (this.#check() > 0) this.arm();
  };
  /** One look at the running cells; returns how many were running. */
  #check() {
    const options = this.#options;
    const now = this.#clock.now();
    let active = 0;
    for (const run of options.runs()) if (run.started && !run.finished) active++;
    const rssMb = options.rssBytes() / MIB;
    const overBudget = rssMb > active * options.config().heapMb * 2 + RSS_ALLOWANCE_MB;
    for (const run of options.runs()) {
      if (!run.started || run.finished) continue;
      const progress = Atomics.load(run.worker.words, CELL_PROGRESS);
      if (progress !== run.progress || options.overCredit(run) || options.writing(run)) {
        run.progress = progress;
        run.lastSeen = now;
        run.ping = void 0;
        continue;
      }
      if (overBudget && run.ping && now - run.ping.at >= SILENCE_MS) {
        options.abort(run);
        continue;
      }
      if (!run.ping) {
        if (now - run.lastSeen < SILENCE_MS) continue;
        run.ping = {
          at: now,
          cpu: options.cpuMicros()
        };
        run.worker.thread.postMessage({
          t: "ping"
        });
        continue;
      }
      const elapsedMs = now - run.ping.at;
      if (elapsedMs < PARKED_WINDOW_MS) continue;
      const cpuMs = (options.cpuMicros() - run.ping.cpu) / 1e3;
      if (cpuMs < elapsedMs * PARKED_CPU_SHARE) {
        options.abort(run);
      } else {
        run.ping = void 0;
      }
    }
    return active;
  }
};

// worker/runtime_rehearsal.ts
import { MessageChannel as MessageChannel2 } from "node:worker_threads";
var CELL_ID = "rehearsal";
function rehearseMainThread(codec, maxFrameBytes) {
  const channel = new MessageChannel2();
  try {
    const decoder = new FrameDecoder(maxFrameBytes);
    const input = [
      codec.encodeHostToWorker({
        storeUpdate: {
          version: 1,
          reset: true,
          entries: [
            {
              key: "k",
              valueJson: "1"
            }
          ]
        }
      }),
      codec.encodeHostToWorker({
        startCell: {
          cellId: CELL_ID,
          source: 'text("x")',
          tools: [],
          storeVersion: 1
        }
      }),
      codec.encodeHostToWorker({
        ping: {
          seq: 1
        }
      }),
      codec.encodeHostToWorker({
        configure: {
          sessionId: CELL_ID,
          outputTruncation: 2,
          cellHeapLimitMb: 1,
          maxMessageBytes: 1,
          maxStoredValueBytes: 1,
          outputEventCredit: 1,
          outputByteCredit: 1,
          maxFrameBytes
        }
      })
    ].map((body) => encodeFrame(body, maxFrameBytes));
    for (const bytes of input) {
      for (const frame of decoder.push(bytes)) codec.decodeHostToWorker(frame);
    }
    const replica = new StoreReplica();
    replica.update(true, [
      {
        key: "k",
        valueJson: "1"
      }
    ]);
    replica.update(false, [
      {
        key: "k"
      }
    ]);
    const start = {
      t: "start",
      cellId: CELL_ID,
      source: 'text("x")',
      tools: [],
      ...replica.start(),
      maxStoredValueBytes: 1,
      maxMessageBytes: 1,
      maxFrameBytes,
      credit: {
        maxEvents: 1,
        maxBytes: 1,
        trimTextOver: 1,
        keepTextBytes: 1,
        dropMediaOver: 1,
        jsonSizes: false
      }
    };
    channel.port1.postMessage(start);
    for (const event of [
      {
        cellId: CELL_ID,
        started: {}
      },
      {
        cellId: CELL_ID,
        exited: {
          reason: "normal"
        }
      }
    ]) {
      encodeFrame(codec.encodeWorkerToHost({
        cellEvent: event,
        lineEnd: LINE_END
      }), maxFrameBytes);
    }
    encodeFrame(codec.encodeWorkerToHost({
      pong: {
        seq: 1
      },
      lineEnd: LINE_END
    }), maxFrameBytes);
  } catch {
  } finally {
    channel.port1.close();
    channel.port2.close();
  }
}

// worker/runtime.ts
var EXIT_FLUSH_MS = 1e3;
var STDIN_CHUNK_BYTES = 65536;
var Runtime = class {
  #codec = createWorkerCodec();
  #input;
  #exit;
  #clock;
  #output;
  #pool;
  #runs;
  #watchdog;
  #config = {
    ...DEFAULT_RUNTIME_CONFIG
  };
  /** The session's stored values (key → JSON text), as the host's store updates leave them. */
  #store = new StoreReplica();
  #decoder;
  #exiting = false;
  /** @param options see {@link RuntimeOptions} */
  constructor(options) {
    this.#input = options.input;
    this.#exit = options.exit;
    const clock = this.#clock = options.clock ?? realClock;
    const config = () => this.#config;
    const exiting = () => this.#exiting;
    const output = this.#output = new FrameOutput({
      write: options.output,
      clock,
      maxFrameBytes: () => this.#config.maxFrameBytes,
      onBroken: () => {
        this.#exiting = true;
        this.#exit(1);
      }
    });
    const pool = this.#pool = new CellWorkerPool({
      clock,
      createThread: options.createWorker,
      output,
      config,
      cellsWriteFrames: options.cellsWriteFrames ?? true,
      collectGarbage: options.collectGarbage ?? true,
      retireAfterCells: options.retireAfterCells ?? RETIRE_AFTER_CELLS,
      exiting,
      onExit: (run) => runs.reportExit(run),
      anyRunning: () => runs.anyRunning(),
      rehearse: () => rehearseMainThread(this.#codec, this.#config.maxFrameBytes)
    });
    const runs = this.#runs = new CellRuns({
      clock,
      pool,
      output,
      config,
      store: () => this.#store.start(),
      onStarted: () => this.#watchdog.arm(),
      background: (task, what) => this.#background(task, what)
    });
    this.#watchdog = new ParkedCellWatchdog({
      clock,
      cpuMicros: options.cpuMicros ?? (() => {
        const usage = process.cpuUsage();
        return usage.user + usage.system;
      }),
      rssBytes: options.rssBytes ?? (() => Deno.memoryUsage().rss),
      config,
      runs: () => runs.values(),
      overCredit: (run) => runs.overCredit(run),
      writing: (run) => output.isLockedBy(run.worker.sinkId),
      abort: (run) => runs.abort(run.id, "heap_limit")
    });
  }
  /** The settings in force (the last `Configure`'s, or the defaults). */
  get config() {
    return this.#config;
  }
  /**
   * Reads and handles host frames until the input ends, then shuts down: the cells' outputs are
   * drained, the pending frames written, and the process exits with 0. A broken frame stream is a
   * `RuntimeFault` and exit code 1. Arms the prewarm of the first spare.
   */
  async run() {
    this.#pool.armPrewarm();
    try {
      const decoder = this.#decoder = new FrameDecoder(this.#config.maxFrameBytes);
      const chunk = new Uint8Array(STDIN_CHUNK_BYTES);
      for (; ; ) {
        const n = await this.#input.read(chunk);
        if (n === null) {
          decoder.finish();
          break;
        }
        for (const frame of decoder.push(chunk.subarray(0, n))) {
          this.receive(this.#codec.decodeHostToWorker(frame));
          if (this.#exiting) return;
        }
      }
    } catch (error) {
      return await this.fail(`host frame stream failed: ${error}`);
    }
    await this.#shutdown();
  }
  /**
   * Handles one host message.
   *
   * @param message a decoded `HostToWorker`
   */
  receive(message2) {
    switch (message2.message) {
      case "configure":
        return this.#configure(message2.configure);
      case "storeUpdate":
        return this.#updateStore(message2.storeUpdate);
      case "startCell":
        return this.#background(this.#runs.start(message2.startCell), "failed to start cell");
      case "toolResult": {
        const r = message2.toolResult;
        const result = r.errorMessage !== void 0 ? {
          t: "toolResult",
          id: r.runtimeToolCallId,
          error: r.errorMessage,
          cell: r.cellId
        } : {
          t: "toolResult",
          id: r.runtimeToolCallId,
          json: r.outputJson ?? "null",
          cell: r.cellId
        };
        return this.#runs.postToCell(r.cellId, result);
      }
      case "stopCell":
        return this.#runs.stop(message2.stopCell.cellId);
      case "credit":
        return this.#runs.credit(message2.credit.cellId, message2.credit.events ?? 0);
      case "shutdown":
        return this.#background(this.#shutdown(), "failed to shut down");
      case "ping":
        return this.#runs.answer(() => this.#output.send({
          pong: {
            seq: message2.ping.seq ?? 0
          }
        }));
      default:
        return;
    }
  }
  /**
   * Reports a `RuntimeFault` with `detail` and exits with code 1 once the frames pending are out.
   *
   * @param detail the fault's text
   */
  fail(detail) {
    this.#output.send({
      runtimeFault: {
        detail
      }
    });
    return this.#exitAfterFlush(1);
  }
  /**
   * Writes a complete frame to the host, in order with this thread's own frames and under the
   * stream lock.
   *
   * @param frame the frame's bytes, header included
   */
  writeFrame(frame) {
    this.#output.queue(frame);
  }
  /**
   * Gives up on a cell that did not confirm its stop (in-process isolation has no hard stop, SPEC
   * §9.8): nothing more of it is forwarded, no `exited` is sent (the host has ended the cell), and
   * its cell worker is terminated and unreferenced. Deno's `terminate()` does not stop a spinning
   * Worker: it may keep a core busy until the process exits, but it no longer keeps the process
   * alive.
   *
   * @param cellId the cell
   */
  abandonCell(cellId) {
    this.#runs.abandon(cellId);
  }
  /** Abandons every cell and the spare (the in-process runtime's end). */
  dispose() {
    this.#exiting = true;
    for (const run of [
      ...this.#runs.values()
    ]) this.#runs.abandon(run.id);
    this.#pool.dispose();
  }
  /**
   * Ends a running cell's worker without its result: the host gets `exited` with `reason`. The
   * heap-limit watchdog ends cells this way.
   *
   * @param cellId the cell
   * @param reason the exit reason
   * @param detail the exit's detail, if any
   */
  abortCell(cellId, reason, detail) {
    this.#runs.abort(cellId, reason, detail);
  }
  /** Runs `task` without waiting for it: its failure is a `RuntimeFault` (`what: error`). */
  #background(task, what) {
    task.catch((error) => this.fail(`${what}: ${error}`));
  }
  #configure(c) {
    const config = this.#config;
    this.#config = {
      heapMb: c.cellHeapLimitMb || config.heapMb,
      maxMessageBytes: c.maxMessageBytes || config.maxMessageBytes,
      maxStoredValueBytes: c.maxStoredValueBytes || config.maxStoredValueBytes,
      maxFrameBytes: c.maxFrameBytes || config.maxFrameBytes,
      server: c.outputTruncation === 2,
      jsonSizes: c.jsonSizes === true,
      creditEvents: c.outputEventCredit || config.creditEvents,
      creditBytes: c.outputByteCredit || config.creditBytes
    };
    this.#decoder?.setMaxFrameBytes(this.#config.maxFrameBytes);
    this.#pool.configured();
  }
  /** A host `StoreUpdate`: the stored values the next cell runs start from. */
  #updateStore(update) {
    this.#store.update(update.reset === true, update.entries ?? []);
  }
  async #exitAfterFlush(code) {
    if (this.#exiting) return;
    this.#exiting = true;
    const deadline = this.#clock.now() + EXIT_FLUSH_MS;
    this.#output.flush();
    while (this.#output.hasPending && this.#clock.now() < deadline) {
      await new Promise((resolve) => this.#clock.setTimeout(resolve, RETRY_MS));
      this.#output.flush();
    }
    this.#exit(code);
  }
  async #shutdown() {
    this.#runs.drainAll();
    return await this.#exitAfterFlush(0);
  }
};

// worker/runtime_main.ts
await new Runtime({
  input: Deno.stdin,
  output: writeAllSync,
  exit: (code) => Deno.exit(code)
}).run();

// worker/runtime.ts
import process from "node:process";
import { setImmediate } from "node:timers";
import { MessageChannel, receiveMessageOnPort, Worker } from "node:worker_threads";

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
var MAX_TEXT_BYTES = 1048576;
var MAX_MEDIA_BYTES = 16777216;
function varintBytes(n) {
  let bytes = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    bytes++;
  }
  return bytes;
}

// worker/cell_protocol.ts
var CREDIT_EVENTS = 0;
var CREDIT_BYTES = 1;
var CREDIT_GENERATION = 2;
var CREDIT_STOP = 3;
var CELL_DOORBELL = 4;
var CREDIT_ACKED = 5;
var CELL_PROGRESS = 6;
var CELL_WORDS = 8;
var SINK_LOCK = 0;
var SINK_WORDS = 2;

// worker/cell_events.ts
var LINE_END = 10;
var MAX_FRAME_BYTES = 68157440;
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
            trimmedText: {
              head: output.text.head,
              tail: output.text.tail,
              totalBytes: output.text.total
            }
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
              bytes: output.bytes
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
      const events = output.writes.map(([key, valueJson]) => ({
        cellId,
        storedWrite: {
          key,
          valueJson
        }
      }));
      events.push({
        cellId,
        result: output.trimmedError ? {
          trimmedError: {
            head: output.trimmedError.head,
            tail: output.trimmedError.tail,
            totalBytes: output.trimmedError.total
          }
        } : output.error === void 0 ? {} : {
          errorText: output.error
        }
      });
      return events;
    }
    case "stopped":
    case "pong":
      return [];
  }
}
var utf8 = new TextEncoder();
function tryLock(sink2, id) {
  return Atomics.compareExchange(sink2, SINK_LOCK, 0, id) === 0;
}
function unlock(sink2, id) {
  if (Atomics.compareExchange(sink2, SINK_LOCK, id, 0) !== id) return false;
  Atomics.notify(sink2, SINK_LOCK);
  return true;
}
function writeAllSync(bytes) {
  let offset = Deno.stdout.writeSync(bytes);
  while (offset < bytes.length) offset += Deno.stdout.writeSync(bytes.subarray(offset));
}

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

// proto/worker_codec.ts
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
  f(3, "totalBytes", "uint64")
]);
var STORE_ENTRY = message(P + "StoreEntry", [
  f(1, "key", "string"),
  f(2, "valueJson", "string")
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
    f(6, "runtimeMode", "int32"),
    f(7, "outputEventCredit", "uint32"),
    f(8, "outputByteCredit", "uint64")
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
  f(7, "control", message(P + "Control", [
    f(1, "cellId", "string"),
    f(2, "continue", "bool", "action"),
    f(3, "resume", "bool", "action"),
    f(4, "terminate", "bool", "action")
  ]), "message"),
  f(8, "shutdown", EMPTY("Shutdown"), "message"),
  f(9, "testHook", message(P + "TestHook", [
    f(1, "garbageFrame", "bool", "action"),
    f(3, "exhaustMainHeap", "bool", "action"),
    f(4, "delayStopMs", "uint32", "action"),
    f(5, "faultCell", "string", "action"),
    f(6, "runtimeFault", "string", "action"),
    f(7, "blockMainMs", "uint32", "action")
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
        f(2, "bytes", "uint64")
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
    ]), "event")
  ]), "message"),
  f(3, "runtimeFault", message(P + "RuntimeFault", [
    f(1, "detail", "string")
  ]), "message"),
  f(15, "lineEnd", "uint32")
]);
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
      value = length <= SHORT_STRING ? shortString(reader.bytes, reader.pos, length) : utf8Decoder.decode(reader.bytes.subarray(reader.pos, reader.pos + length));
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
function createWorkerCodec() {
  return {
    encodeHostToWorker: (m) => encodeMessage(m, HOST_TO_WORKER),
    decodeHostToWorker: (b) => decodeMessage(b, HOST_TO_WORKER),
    encodeWorkerToHost: (m) => encodeMessage(m, WORKER_TO_HOST),
    decodeWorkerToHost: (b) => decodeMessage(b, WORKER_TO_HOST)
  };
}

// worker/runtime.ts
var codec = createWorkerCodec();
var cellUrl = new URL("./cell.js", import.meta.url);
var config = {
  heapMb: 1024,
  maxMessageBytes: 67108864,
  maxStoredValueBytes: 67108864,
  server: false,
  creditEvents: 128,
  creditBytes: 2097152
};
var store = /* @__PURE__ */ new Map();
var sink = new Int32Array(new SharedArrayBuffer(4 * SINK_WORDS));
var MAIN_LOCK_ID = 1;
var nextSinkId = MAIN_LOCK_ID + 1;
var pending = [];
var flushQueued = false;
var retry;
var JOIN_BYTES = 256 * 1024;
var RETRY_MS = 1;
function send(message2) {
  message2.lineEnd = LINE_END;
  enqueue(encodeFrame(codec.encodeWorkerToHost(message2), MAX_FRAME_BYTES));
}
function enqueue(frame) {
  pending.push(frame);
  if (flushQueued) return;
  flushQueued = true;
  queueMicrotask(flush);
}
function flush() {
  flushQueued = false;
  if (pending.length === 0) return;
  if (!tryLock(sink, MAIN_LOCK_ID)) {
    retry ??= setTimeout(() => {
      retry = void 0;
      flush();
    }, RETRY_MS);
    return;
  }
  const frames = pending;
  pending = [];
  try {
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
      writeAllSync(bytes);
    };
    for (const frame of frames) {
      if (groupBytes + frame.length > JOIN_BYTES) emit();
      group.push(frame);
      groupBytes += frame.length;
    }
    emit();
  } catch {
    Deno.exit(1);
  } finally {
    unlock(sink, MAIN_LOCK_ID);
  }
}
function sendCellEvent(event) {
  send({
    cellEvent: event
  });
}
var EXIT_FLUSH_MS = 1e3;
async function exitAfterFlush(code) {
  const deadline = performance.now() + EXIT_FLUSH_MS;
  flush();
  while (pending.length > 0 && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    flush();
  }
  Deno.exit(code);
}
function createCellWorker(heapMb) {
  const worker = new Worker(cellUrl, {
    resourceLimits: {
      maxOldGenerationSizeMb: heapMb
    }
  });
  const output = new MessageChannel();
  const control2 = new MessageChannel();
  const cell = {
    worker,
    heapMb,
    ready: Promise.resolve(),
    settled: false,
    dead: false,
    closed: false,
    output: output.port1,
    control: control2.port1,
    words: new Int32Array(new SharedArrayBuffer(4 * CELL_WORDS)),
    sinkId: nextSinkId++,
    onOutput: () => {
    }
  };
  output.port1.on("message", (message2) => cell.onOutput(message2));
  cell.ready = new Promise((settle) => {
    const resolve = () => {
      cell.settled = true;
      settle();
    };
    cell.onOutput = () => resolve();
    const onMessage = (message2) => {
      if (message2?.t !== "ready") return;
      worker.off("message", onMessage);
      if (cell.closed) return;
      worker.postMessage({
        t: "warm",
        port: output.port2,
        control: control2.port2,
        words: cell.words,
        sink,
        sinkId: cell.sinkId
      }, [
        output.port2,
        control2.port2
      ]);
    };
    worker.on("message", onMessage);
    worker.once("exit", () => {
      cell.dead = true;
      unlock(sink, cell.sinkId);
      if (pending.length > 0) flush();
      resolve();
    });
  });
  worker.on("error", () => {
    cell.dead = true;
  });
  return cell;
}
var spare;
function unpark(cell) {
  Atomics.store(cell.words, CELL_DOORBELL, 2);
  Atomics.notify(cell.words, CELL_DOORBELL);
}
function discard(cell) {
  unpark(cell);
  cell.closed = true;
  cell.output.close();
  cell.control.close();
  void cell.worker.terminate();
}
function takeCellWorker() {
  const taken = spare && !spare.dead && spare.heapMb === config.heapMb ? spare : void 0;
  if (spare && spare !== taken) discard(spare);
  spare = void 0;
  return taken ?? createCellWorker(config.heapMb);
}
function refillSpare() {
  if (!spare) spare = createCellWorker(config.heapMb);
}
var cells = /* @__PURE__ */ new Map();
function forward(running, output) {
  if (Array.isArray(output)) {
    for (const one of output) forward(running, one);
    return;
  }
  const final = output.t === "result" || output.t === "stopped";
  if (final && running.finished) return;
  if (!("w" in output)) {
    for (const event of wireCellEvents(running.id, output)) sendCellEvent(event);
  }
  if (final) {
    running.finished = true;
    if ("w" in output) running.exitWritten = true;
    reportExit(running);
    endCellSoon(running);
  }
}
function credit(cellId, events) {
  const running = cells.get(cellId);
  if (!running) return;
  Atomics.add(running.cell.words, CREDIT_ACKED, events);
  wake(running);
}
function wake(running) {
  Atomics.add(running.cell.words, CREDIT_GENERATION, 1);
  Atomics.notify(running.cell.words, CREDIT_GENERATION);
}
function overCredit(running) {
  const words = running.cell.words;
  const unacked = Atomics.load(words, CREDIT_EVENTS) - Atomics.load(words, CREDIT_ACKED) | 0;
  return unacked > config.creditEvents || unacked > 0 && Atomics.load(words, CREDIT_BYTES) > config.creditBytes;
}
function drain(running) {
  for (; ; ) {
    const next = receiveMessageOnPort(running.cell.output);
    if (!next) return;
    forward(running, next.message);
  }
}
function reportExit(running) {
  if (running.exited) return;
  drain(running);
  if (running.exited) return;
  running.exited = true;
  cells.delete(running.id);
  running.cell.closed = true;
  running.cell.output.close();
  if (running.exitWritten) return;
  sendCellEvent({
    cellId: running.id,
    exited: running.exitDetail === void 0 ? {
      reason: running.exitReason
    } : {
      reason: running.exitReason,
      detail: running.exitDetail
    }
  });
}
function endCellSoon(running) {
  setImmediate(() => void endCell(running));
}
async function endCell(running) {
  if (!running.started) unpark(running.cell);
  running.cell.closed = true;
  running.cell.control.close();
  await running.cell.worker.terminate().catch(() => {
  });
  reportExit(running);
  scheduleSpare();
}
function scheduleSpare() {
  setTimeout(refillSpare, 0);
}
async function startCell(start) {
  const cell = takeCellWorker();
  const running = {
    id: start.cellId,
    cell,
    finished: false,
    exited: false,
    exitWritten: false,
    started: false,
    lastSeen: performance.now(),
    exitReason: "normal",
    progress: 0
  };
  cells.set(start.cellId, running);
  cell.worker.on("error", (error) => {
    if (error?.code === "ERR_WORKER_OUT_OF_MEMORY") running.exitReason = "heap_limit";
    else {
      running.exitReason = "fault";
      running.exitDetail = String(error?.message ?? error);
    }
  });
  cell.worker.once("exit", () => {
    setTimeout(() => reportExit(running), 0);
  });
  if (!cell.settled) await cell.ready;
  if (cell.dead) return;
  cell.onOutput = (output) => {
    running.lastSeen = performance.now();
    running.ping = void 0;
    forward(running, output);
  };
  if (running.finished) return;
  const message2 = {
    t: "start",
    cellId: start.cellId,
    source: start.source ?? "",
    tools: (start.tools ?? []).map((t) => ({
      name: t.globalName,
      description: t.description ?? ""
    })),
    store: [
      ...store
    ],
    maxStoredValueBytes: config.maxStoredValueBytes,
    maxMessageBytes: config.maxMessageBytes,
    credit: {
      maxEvents: config.creditEvents,
      maxBytes: config.creditBytes,
      // Server: what the collector could keep of a text or an image; Client: one message.
      trimTextOver: config.server ? 2 * MAX_TEXT_BYTES : config.maxMessageBytes,
      keepTextBytes: MAX_TEXT_BYTES,
      dropMediaOver: config.server ? MAX_MEDIA_BYTES : config.maxMessageBytes
    }
  };
  cell.control.postMessage(message2);
  Atomics.store(cell.words, CELL_DOORBELL, 1);
  Atomics.notify(cell.words, CELL_DOORBELL);
  running.started = true;
  running.lastSeen = performance.now();
  armWatchdog();
}
var SILENCE_MS = 500;
var PARKED_WINDOW_MS = 1e3;
var PARKED_CPU_SHARE = 0.02;
var RSS_ALLOWANCE_MB = 512;
var watchdog;
function cpuMicros() {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
}
function armWatchdog() {
  watchdog ??= setInterval(checkParkedCells, 250);
}
function checkParkedCells() {
  const now = performance.now();
  let active = 0;
  for (const running of cells.values()) if (running.started && !running.finished) active++;
  const rssMb = Deno.memoryUsage().rss / 1048576;
  const overBudget = rssMb > active * config.heapMb * 2 + RSS_ALLOWANCE_MB;
  for (const running of cells.values()) {
    if (!running.started || running.finished) continue;
    const progress = Atomics.load(running.cell.words, CELL_PROGRESS);
    if (progress !== running.progress || overCredit(running) || Atomics.load(sink, SINK_LOCK) === running.cell.sinkId) {
      running.progress = progress;
      running.lastSeen = now;
      running.ping = void 0;
      continue;
    }
    if (overBudget && running.ping && now - running.ping.at >= SILENCE_MS) {
      running.finished = true;
      running.exitReason = "heap_limit";
      void endCell(running);
      continue;
    }
    if (!running.ping) {
      if (now - running.lastSeen < SILENCE_MS) continue;
      running.ping = {
        at: now,
        cpu: cpuMicros()
      };
      running.cell.worker.postMessage({
        t: "ping"
      });
      continue;
    }
    const elapsedMs = now - running.ping.at;
    if (elapsedMs < PARKED_WINDOW_MS) continue;
    const cpuMs = (cpuMicros() - running.ping.cpu) / 1e3;
    if (cpuMs < elapsedMs * PARKED_CPU_SHARE) {
      running.finished = true;
      running.exitReason = "heap_limit";
      void endCell(running);
    } else {
      running.ping = void 0;
    }
  }
  if (active === 0 && watchdog !== void 0) {
    clearInterval(watchdog);
    watchdog = void 0;
  }
}
function control(cellId, message2) {
  const running = cells.get(cellId);
  if (!running || running.finished) return;
  running.cell.worker.postMessage(message2);
}
var stopDelayMs = 0;
function stopCell(cellId) {
  const running = cells.get(cellId);
  if (!running || running.finished) return;
  if (!running.started) {
    running.finished = true;
    reportExit(running);
    discard(running.cell);
    scheduleSpare();
    return;
  }
  Atomics.store(running.cell.words, CREDIT_STOP, 1);
  wake(running);
  const stop = () => {
    if (running.finished) return;
    drain(running);
    running.cell.worker.postMessage({
      t: "stop"
    });
  };
  if (stopDelayMs > 0) setTimeout(stop, stopDelayMs);
  else stop();
}
function testHook(hook) {
  switch (hook.action) {
    case "garbageFrame":
      enqueue(encodeFrame(new Uint8Array([
        255,
        255,
        255
      ]), MAX_FRAME_BYTES));
      return;
    case "exhaustMainHeap": {
      const hoard = [];
      for (; ; ) hoard.push(new Array(1e6).fill(hoard.length));
    }
    case "delayStopMs":
      stopDelayMs = hook.delayStopMs ?? 0;
      return;
    case "faultCell": {
      const running = cells.get(hook.faultCell ?? "");
      if (!running || running.finished) return;
      running.finished = true;
      running.exitReason = "fault";
      running.exitDetail = "test hook: cell bootstrap fault";
      void endCell(running);
      return;
    }
    case "runtimeFault":
      send({
        runtimeFault: {
          detail: hook.runtimeFault ?? "test hook"
        }
      });
      void exitAfterFlush(1);
      return;
    case "blockMainMs": {
      const until = performance.now() + (hook.blockMainMs ?? 0);
      while (performance.now() < until) {
      }
      return;
    }
  }
}
async function shutdown() {
  for (const running of cells.values()) drain(running);
  return await exitAfterFlush(0);
}
function dispatch(message2) {
  switch (message2.message) {
    case "configure": {
      const c = message2.configure;
      config = {
        heapMb: c.cellHeapLimitMb || config.heapMb,
        maxMessageBytes: c.maxMessageBytes || config.maxMessageBytes,
        maxStoredValueBytes: c.maxStoredValueBytes || config.maxStoredValueBytes,
        server: c.outputTruncation === 2,
        creditEvents: c.outputEventCredit || config.creditEvents,
        creditBytes: c.outputByteCredit || config.creditBytes
      };
      clearTimeout(prewarming);
      if (spare && spare.heapMb !== config.heapMb) {
        discard(spare);
        spare = void 0;
      }
      prepareFirstSpare();
      return;
    }
    case "storeUpdate": {
      const u = message2.storeUpdate;
      if (u.reset) store.clear();
      for (const entry of u.entries ?? []) store.set(entry.key, entry.valueJson ?? "null");
      return;
    }
    case "startCell":
      void startCell(message2.startCell).catch((error) => {
        send({
          runtimeFault: {
            detail: `failed to start cell: ${error}`
          }
        });
        void exitAfterFlush(1);
      });
      return;
    case "toolResult": {
      const r = message2.toolResult;
      const result = r.errorMessage !== void 0 ? {
        t: "toolResult",
        id: r.runtimeToolCallId,
        error: r.errorMessage
      } : {
        t: "toolResult",
        id: r.runtimeToolCallId,
        json: r.outputJson ?? "null"
      };
      return control(r.cellId, result);
    }
    case "stopCell":
      return stopCell(message2.stopCell.cellId);
    case "credit":
      return credit(message2.credit.cellId, message2.credit.events ?? 0);
    case "shutdown":
      void shutdown();
      return;
    case "testHook":
      return testHook(message2.testHook);
    default:
      return;
  }
}
function prepareFirstSpare() {
  if (spare) return;
  collectGarbage();
  refillSpare();
}
var PREWARM_IDLE_MS = 50;
var STDIN_CHUNK_BYTES = 65536;
var prewarming = setTimeout(prepareFirstSpare, PREWARM_IDLE_MS);
try {
  const decoder = new FrameDecoder(MAX_FRAME_BYTES);
  const chunk = new Uint8Array(STDIN_CHUNK_BYTES);
  for (; ; ) {
    const n = await Deno.stdin.read(chunk);
    if (n === null) {
      decoder.finish();
      break;
    }
    for (const frame of decoder.push(chunk.subarray(0, n))) dispatch(codec.decodeHostToWorker(frame));
  }
} catch (error) {
  send({
    runtimeFault: {
      detail: `host frame stream failed: ${error}`
    }
  });
  await exitAfterFlush(1);
}
await shutdown();

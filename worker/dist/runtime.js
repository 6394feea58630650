// proto/frame_codec.ts
var MAX_HEADER_LENGTH = 4294967295;
var HEADER_BYTES = 4;
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

// proto/worker_ready.ts
var WORKER_PROTOCOL_VERSION = 4;
function varint(value, out) {
  while (value > 127) {
    out.push(value & 127 | 128);
    value = Math.floor(value / 128);
  }
  out.push(value);
}
function encodeReadyFrame(denoVersion, protocolVersion = WORKER_PROTOCOL_VERSION) {
  const version = new TextEncoder().encode(denoVersion);
  const ready2 = [
    10
  ];
  varint(version.length, ready2);
  ready2.push(...version, 16);
  varint(protocolVersion, ready2);
  const message = [
    10
  ];
  varint(ready2.length, message);
  message.push(...ready2);
  return encodeFrame(new Uint8Array(message), message.length);
}

// worker/runtime_entry.ts
var ready = encodeReadyFrame(Deno.version.deno);
for (let offset = 0; offset < ready.length; ) offset += Deno.stdout.writeSync(ready.subarray(offset));
var main = new URL("./runtime_main.js", import.meta.url).href;
await import(main);

/**
 * The one protobufjs instance of this repository, set up to use Node's `Buffer` for strings.
 *
 * Under Deno, protobufjs cannot find `Buffer` by itself and falls back to UTF-8 loops in
 * JavaScript: decoding the output of a flooding cell then spent most of the host's time in
 * `utf8_read`. With `Buffer` configured, readers and writers use the native UTF-8 codec; a reader
 * is only chosen for a `Buffer`, so decoders wrap their input with {@link asBuffer} (no copy).
 *
 * @module
 */
import { Buffer } from "node:buffer";
import protobuf from "protobufjs";

protobuf.util.Buffer = Buffer;
protobuf.configure();

export default protobuf;

/**
 * Views bytes as a `Buffer` without copying, so protobufjs decodes their strings natively.
 *
 * @param bytes the encoded message
 * @returns a `Buffer` over the same memory
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { asBuffer } from "./protobuf_runtime.ts";
 *
 * const bytes = new Uint8Array([1, 2, 3]);
 * const view = asBuffer(bytes.subarray(1));
 * bytes[2] = 9;
 * assert.deepEqual([...view], [2, 9]);
 * ```
 */
export function asBuffer(bytes: Uint8Array): Uint8Array {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

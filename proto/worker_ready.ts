/**
 * The worker protocol's version and its `Ready` frame, written by hand so that a runtime can send
 * `Ready` before it loads anything else: it imports only the frame codec, which imports nothing (see
 * `worker/runtime_entry.ts`). The varint is its own because the collector's imports `node:buffer`.
 * `proto/worker_codec_test.ts` checks the bytes against the codec.
 *
 * @module
 */

import { encodeFrame } from "./frame_codec.ts";

/** Bumped whenever worker.proto or its semantics change; checked at `Ready` (SPEC §9.3). */
export const WORKER_PROTOCOL_VERSION = 4;

function varint(value: number, out: number[]): void {
  while (value > 0x7f) {
    out.push((value & 0x7f) | 0x80);
    value = Math.floor(value / 128);
  }
  out.push(value);
}

/**
 * The framed `WorkerToHost{ready: Ready{deno_version, protocol_version}}`: field 1 of
 * `WorkerToHost`, holding fields 1 and 2 of `Ready`.
 *
 * @param denoVersion the runtime's `Deno.version.deno`
 * @param protocolVersion the protocol version it speaks
 * @returns the frame's bytes
 */
export function encodeReadyFrame(denoVersion: string, protocolVersion = WORKER_PROTOCOL_VERSION): Uint8Array {
  const version = new TextEncoder().encode(denoVersion);
  const ready: number[] = [0x0a];
  varint(version.length, ready);
  ready.push(...version, 0x10);
  varint(protocolVersion, ready);
  const message: number[] = [0x0a];
  varint(ready.length, message);
  message.push(...ready);
  return encodeFrame(new Uint8Array(message), message.length);
}

/**
 * The worker protocol's version and its `Ready` frame, written by hand so that a runtime can send
 * `Ready` before it loads anything else: this module imports nothing (see `worker/runtime_entry.ts`).
 * `proto/worker_codec_test.ts` checks the bytes against the codec.
 *
 * @module
 */

/** Bumped whenever worker.proto or its semantics change; checked at `Ready` (SPEC §9.3). */
export const WORKER_PROTOCOL_VERSION = 2;

function varint(value: number, out: number[]): void {
  while (value > 0x7f) {
    out.push((value & 0x7f) | 0x80);
    value = Math.floor(value / 128);
  }
  out.push(value);
}

/**
 * The framed `WorkerToHost{ready: Ready{deno_version, protocol_version}}`: a 4-byte big-endian
 * length, then the message (field 1 of `WorkerToHost`; fields 1 and 2 of `Ready`).
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
  const n = message.length;
  return new Uint8Array([n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff, ...message]);
}

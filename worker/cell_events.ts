/**
 * What a cell's output becomes on the runtime's frame stream, and how a cell isolate writes it
 * there itself (`cell_protocol.ts` item 3).
 *
 * - {@link wireCellEvents} maps one {@link CellOutput} to its `CellEvent`s; the runtime uses it for
 *   outputs posted to it, a cell isolate for the frames it writes.
 * - {@link encodeCellFrames} encodes them as framed `WorkerToHost` messages with the worker codec.
 * - {@link writeLocked} writes bytes to the runtime's stdout under the stream lock shared by the
 *   runtime's main thread and every cell isolate of the process, so frames never interleave.
 *
 * @module
 */
import { encodeFrame } from "../proto/frame_codec.ts";
import { encodeMessage, type WireCellEvent, WORKER_TO_HOST } from "../proto/worker_codec.ts";
import type { CellOutput } from "./cell_protocol.ts";
import { SINK_LOCK } from "./cell_protocol.ts";

/** The largest frame a runtime writes (and its host reads): a 64 MiB value plus its envelope. */
export const MAX_FRAME_BYTES = 68_157_440;

/**
 * The `CellEvent`s of one cell output, in stream order: a `result` is its stored writes, one per
 * key, then the result itself (SPEC §9.3). `stopped` and `pong` are for the runtime only: none.
 *
 * @param cellId the cell's ID
 * @param output what the cell posted
 * @returns the events to send
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { wireCellEvents } from "./cell_events.ts";
 * assert.deepEqual(wireCellEvents("1", { t: "text", text: "x", n: 1 }), [
 *   { cellId: "1", contentItem: { text: "x" } },
 * ]);
 * ```
 */
export function wireCellEvents(cellId: string, output: CellOutput): WireCellEvent[] {
  switch (output.t) {
    case "started":
      return [{ cellId, started: {} }];
    case "text":
      return [{ cellId, contentItem: { text: output.text } }];
    case "trimmedText":
      return [{
        cellId,
        contentItem: {
          trimmedText: { head: output.text.head, tail: output.text.tail, totalBytes: output.text.total },
        },
      }];
    case "image":
      return [{
        cellId,
        contentItem: { image: { imageUrl: output.image.url, detail: output.image.detail } },
      }];
    case "droppedImage":
      return [{ cellId, contentItem: { droppedMedia: { kind: "image", bytes: output.bytes } } }];
    case "yield":
      return [{ cellId, yieldRequested: {} }];
    case "toolCall":
      return [{
        cellId,
        toolCall: output.input === undefined
          ? { runtimeToolCallId: output.id, globalName: output.name }
          : { runtimeToolCallId: output.id, globalName: output.name, inputJson: output.input },
      }];
    case "toolResultConsumed":
      return [{ cellId, toolResultConsumed: output.id }];
    case "notify":
      return [{ cellId, notify: output.text }];
    case "result": {
      const events: WireCellEvent[] = output.writes.map(([key, valueJson]) => ({
        cellId,
        storedWrite: { key, valueJson },
      }));
      events.push({
        cellId,
        result: output.trimmedError
          ? {
            trimmedError: {
              head: output.trimmedError.head,
              tail: output.trimmedError.tail,
              totalBytes: output.trimmedError.total,
            },
          }
          : output.error === undefined
          ? {}
          : { errorText: output.error },
      });
      return events;
    }
    case "stopped":
    case "pong":
      return [];
  }
}

/**
 * The framed `WorkerToHost{cell_event}` messages of `outputs`, joined; after a `result`, the
 * cell's normal `exited` too (nothing more can come from the cell).
 *
 * @param cellId the cell's ID
 * @param outputs the outputs, in order
 * @returns the bytes to write
 * @throws {FrameError} a frame over {@link MAX_FRAME_BYTES}
 */
export function encodeCellFrames(cellId: string, outputs: readonly CellOutput[]): Uint8Array {
  const frames: Uint8Array[] = [];
  let total = 0;
  const add = (event: WireCellEvent) => {
    const frame = encodeFrame(encodeMessage({ cellEvent: event }, WORKER_TO_HOST), MAX_FRAME_BYTES);
    frames.push(frame);
    total += frame.length;
  };
  for (const output of outputs) {
    for (const event of wireCellEvents(cellId, output)) add(event);
    if (output.t === "result") add({ cellId, exited: { reason: "normal" } });
  }
  if (frames.length === 1) return frames[0];
  const bytes = new Uint8Array(total);
  let offset = 0;
  for (const frame of frames) {
    bytes.set(frame, offset);
    offset += frame.length;
  }
  return bytes;
}

/** How long a writer waits on the stream lock before it looks again (a dead holder is released). */
const LOCK_WAIT_MS = 20;

/**
 * Takes the stream lock for `id` (waiting while another thread holds it), writes all of `bytes`
 * to stdout, and releases it. For threads that may block: cell isolates. The runtime's main
 * thread uses {@link tryLock} and never waits.
 *
 * @param sink the runtime's shared stream words (`SINK_*`)
 * @param id the writer's lock ID (non-zero, unique in the process)
 * @param bytes complete frames
 * @param write what writes them (tests pass their own)
 */
export function writeLocked(
  sink: Int32Array,
  id: number,
  bytes: Uint8Array,
  write: (bytes: Uint8Array) => void = writeAllSync,
): void {
  for (;;) {
    const holder = Atomics.compareExchange(sink, SINK_LOCK, 0, id);
    if (holder === 0) break;
    Atomics.wait(sink, SINK_LOCK, holder, LOCK_WAIT_MS);
  }
  try {
    write(bytes);
  } finally {
    unlock(sink, id);
  }
}

/**
 * Takes the stream lock for `id` if it is free.
 *
 * @returns whether the caller now holds it
 */
export function tryLock(sink: Int32Array, id: number): boolean {
  return Atomics.compareExchange(sink, SINK_LOCK, 0, id) === 0;
}

/**
 * Releases the stream lock if `id` holds it (also how the runtime frees the lock of a Worker that
 * ended while holding it).
 *
 * @returns whether `id` held it
 */
export function unlock(sink: Int32Array, id: number): boolean {
  if (Atomics.compareExchange(sink, SINK_LOCK, id, 0) !== id) return false;
  Atomics.notify(sink, SINK_LOCK);
  return true;
}

/** Writes all of `bytes` to stdout, blocking (a pipe write of the runtime blocks until taken). */
export function writeAllSync(bytes: Uint8Array): void {
  let offset = Deno.stdout.writeSync(bytes);
  while (offset < bytes.length) offset += Deno.stdout.writeSync(bytes.subarray(offset));
}

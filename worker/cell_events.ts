/**
 * What a cell's output becomes on the runtime's frame stream, and how a cell worker writes it
 * there itself (`cell_protocol.ts` item 3).
 *
 * - {@link wireCellEvents} maps one {@link CellOutput} to its `CellEvent`s; the runtime uses it for
 *   outputs posted to it, a cell worker for the frames it writes.
 * - {@link encodeCellFrames} encodes them as framed `WorkerToHost` messages, by hand: a cell worker
 *   loads this module, not the worker codec (less to load and compile per cell, and faster in a
 *   fresh isolate). `cell_events_test.ts` checks the bytes against the codec for every event.
 * - {@link writeLocked} writes bytes to the runtime's stdout under the stream lock shared by the
 *   runtime's main thread and every cell worker of the process, so frames never interleave.
 *
 * @module
 */
import { FRAME_HEADER_BYTES, writeFrameHeader } from "../proto/frame_codec.ts";
import { fieldBytes, MAX_MESSAGE_BYTES, MIB, utf8ByteLength, varintBytes } from "../proto/bytes.ts";
import type { WireCellEvent, WireTrimmedText } from "../proto/worker_codec.ts";
import type { CellOutput, CellTrimmedText } from "./cell_protocol.ts";
import { SINK_LOCK } from "./cell_protocol.ts";
import { storeBatchEnd } from "../proto/store_batches.ts";

/**
 * `WorkerToHost.line_end`: a newline byte that ends every frame a runtime writes, so that Deno's
 * line-buffered stdout writes the frame in one `write()` (see `worker.proto`). Defined here, not in
 * the worker codec, which a cell worker does not load.
 */
export const LINE_END = 10;

/**
 * The host's default `maxWorkerFrameBytes` (SPEC §2.8: a 64 MiB value plus its envelope): the
 * frame limit of a runtime until its `Configure` gives it the host's own, and of a cell started
 * without one (a hand-driven isolate).
 */
export const DEFAULT_MAX_FRAME_BYTES = MAX_MESSAGE_BYTES + MIB;

/**
 * The `CellEvent`s of one cell output, in stream order: a `result` is its stored writes, in
 * `StoredWrites` batches (`proto/store_batches.ts`), then the result itself (SPEC §9.3). `stopped`
 * and `pong` are for the runtime only: none.
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
          trimmedText: wireTrimmed(output.text),
        },
      }];
    case "image":
      return [{
        cellId,
        contentItem: { image: { imageUrl: output.image.url, detail: output.image.detail } },
      }];
    case "droppedImage":
      return [{
        cellId,
        contentItem: {
          droppedMedia: {
            kind: "image",
            bytes: output.bytes,
            detail: output.detail,
            ...(output.jsonExtra ? { jsonExtraBytes: output.jsonExtra } : {}),
          },
        },
      }];
    case "audio":
      return [{ cellId, contentItem: { audioUrl: output.url } }];
    case "droppedAudio":
      return [{
        cellId,
        contentItem: {
          droppedMedia: {
            kind: "audio",
            bytes: output.bytes,
            ...(output.jsonExtra ? { jsonExtraBytes: output.jsonExtra } : {}),
          },
        },
      }];
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
      const events: WireCellEvent[] = [];
      const writes = output.writes;
      for (let from = 0; from < writes.length;) {
        const end = storeBatchEnd(writes, from);
        events.push(storedWritesEvent(cellId, writes, from, end));
        from = end;
      }
      events.push({
        cellId,
        result: output.trimmedError
          ? {
            trimmedError: wireTrimmed(output.trimmedError),
          }
          : output.error === undefined
          ? {}
          : { errorText: output.error },
      });
      return events;
    }
    case "storedWrites":
      return [storedWritesEvent(cellId, output.writes, 0, output.writes.length)];
    case "idle":
      return [{ cellId, idle: output.stretch >>> 0 }];
    case "stopped":
    case "pong":
      return [];
  }
}

/**
 * The framed `WorkerToHost{cell_event, line_end}` messages of `outputs`, joined; after a `result`,
 * the cell's normal `exited` too (nothing more can come from the cell). Strings are encoded straight
 * into one buffer, reused from call to call when `scratch` is given: a cell printing 64 KiB pieces
 * then makes no garbage per piece beyond its own strings.
 *
 * @param cellId the cell's ID
 * @param outputs the outputs, in order
 * @param maxFrameBytes the largest frame body (the host's `maxWorkerFrameBytes`, from `Configure`)
 * @param scratch a reusable buffer (see {@link FrameScratch}); without it the result is fresh
 * @returns the bytes to write: valid until the next call with the same `scratch`
 * @throws {FrameError} a frame over `maxFrameBytes`
 */
export function encodeCellFrames(
  cellId: string,
  outputs: readonly CellOutput[],
  maxFrameBytes: number,
  scratch?: FrameScratch,
): Uint8Array {
  const messages: Field[][] = [];
  for (const output of outputs) {
    for (const event of wireCellEvents(cellId, output)) {
      messages.push([[2, eventFields(event)], LINE_END_FIELD]);
    }
    if (output.t === "result") {
      messages.push([[2, eventFields({ cellId, exited: { reason: "normal" } })], LINE_END_FIELD]);
    }
  }
  return encodeMessages(messages, maxFrameBytes, scratch);
}

/**
 * The one framed `StoredWrites` event of `writes[from … end)` (a batch, see
 * `proto/store_batches.ts`): how a cell writes its write set ahead of its result, one batch per
 * write, so that a million keys never become one buffer (or a million objects) in its heap.
 *
 * @param cellId the cell's ID
 * @param writes the cell's write set
 * @param from the batch's first index
 * @param end the index after its last
 * @param maxFrameBytes the largest frame body
 * @param scratch a reusable buffer, as for {@link encodeCellFrames}
 * @returns the bytes to write
 * @throws {FrameError} a frame over `maxFrameBytes`
 */
export function encodeStoredWrites(
  cellId: string,
  writes: readonly (readonly [string, string])[],
  from: number,
  end: number,
  maxFrameBytes: number,
  scratch?: FrameScratch,
): Uint8Array {
  const event = storedWritesEvent(cellId, writes, from, end);
  return encodeMessages([[[2, eventFields(event)], LINE_END_FIELD]], maxFrameBytes, scratch);
}

function storedWritesEvent(
  cellId: string,
  writes: readonly (readonly [string, string])[],
  from: number,
  end: number,
): WireCellEvent {
  const entries: { key: string; valueJson: string }[] = [];
  for (let i = from; i < end; i++) entries.push({ key: writes[i][0], valueJson: writes[i][1] });
  return { cellId, storedWrites: { entries } };
}

function encodeMessages(messages: Field[][], maxFrameBytes: number, scratch?: FrameScratch): Uint8Array {
  const plans = messages.map(plan);
  let total = 0;
  for (const { size } of plans) total += FRAME_HEADER_BYTES + size;
  const out = scratch ? scratch.take(total) : new Uint8Array(total);
  let pos = 0;
  messages.forEach((fields, i) => {
    const { size, lengths } = plans[i];
    pos = writeFrameHeader(out, pos, size, maxFrameBytes);
    pos = writeFields(out, pos, fields, lengths, { at: 0 });
  });
  return out;
}

/** A scratch buffer larger than this is not kept after use. */
const KEEP_SCRATCH_BYTES = MIB;

/** A buffer reused by {@link encodeCellFrames} (one per writing thread). */
export class FrameScratch {
  #buffer = new Uint8Array(4096);

  /**
   * A view of `bytes` bytes, valid until the next call.
   *
   * @param bytes the size needed
   * @returns the view (a fresh buffer when it is over the size kept)
   */
  take(bytes: number): Uint8Array {
    if (bytes > this.#buffer.length) {
      const size = Math.max(bytes, this.#buffer.length * 2);
      if (size > KEEP_SCRATCH_BYTES) return new Uint8Array(bytes);
      this.#buffer = new Uint8Array(size);
    }
    return this.#buffer.subarray(0, bytes);
  }
}

// ---- a protobuf encoder for CellEvent (field numbers: proto/codemode/worker/v1/worker.proto) -----

/**
 * One field: its number (all under 16: one tag byte) and a varint, string or submessage. Like the
 * worker codec, every field present is written, defaults included.
 */
type Field = [no: number, value: number | string | Field[]];

const utf8 = new TextEncoder();

/** `WorkerToHost.line_end`: every frame ends with a newline byte (see `worker.proto`). */
const LINE_END_FIELD: Field = [15, LINE_END];

/** The fields of the events a cell writes (never `pending` or an `exited` detail). */
function eventFields(event: WireCellEvent): Field[] {
  const fields: Field[] = [[1, event.cellId]];
  if (event.started) fields.push([2, []]);
  else if (event.contentItem) fields.push([3, itemFields(event.contentItem)]);
  else if (event.yieldRequested) fields.push([4, []]);
  else if (event.toolCall) {
    const call: Field[] = [[1, event.toolCall.runtimeToolCallId], [2, event.toolCall.globalName]];
    if (event.toolCall.inputJson !== undefined) call.push([3, event.toolCall.inputJson]);
    fields.push([5, call]);
  } else if (event.toolResultConsumed !== undefined) fields.push([6, event.toolResultConsumed]);
  else if (event.notify !== undefined) fields.push([7, event.notify]);
  else if (event.storedWrite) {
    fields.push([9, [[1, event.storedWrite.key], [2, event.storedWrite.valueJson]]]);
  } else if (event.storedWrites) {
    fields.push([12, event.storedWrites.entries.map((e): Field => [1, [[1, e.key], [2, e.valueJson]]])]);
  } else if (event.result) {
    const { errorText, trimmedError } = event.result;
    fields.push([
      10,
      trimmedError ? [[2, trimmedFields(trimmedError)]] : errorText !== undefined ? [[1, errorText]] : [],
    ]);
  } else if (event.exited) fields.push([11, [[1, event.exited.reason]]]);
  else if (event.idle !== undefined) fields.push([14, event.idle]);
  return fields;
}

/** A reduced text as a frame carries it (`jsonExtraBytes` only when not 0). */
function wireTrimmed(text: CellTrimmedText): WireTrimmedText {
  const { head, tail, total, jsonExtra } = text;
  return jsonExtra
    ? { head, tail, totalBytes: total, jsonExtraBytes: jsonExtra }
    : { head, tail, totalBytes: total };
}

function trimmedFields(text: WireTrimmedText): Field[] {
  const fields: Field[] = [[1, text.head], [2, text.tail], [3, text.totalBytes]];
  if (text.jsonExtraBytes) fields.push([4, text.jsonExtraBytes]);
  return fields;
}

function itemFields(item: NonNullable<WireCellEvent["contentItem"]>): Field[] {
  if ("text" in item) return [[1, item.text]];
  if ("image" in item) return [[2, [[1, item.image.imageUrl], [2, item.image.detail]]]];
  if ("trimmedText" in item) return [[4, trimmedFields(item.trimmedText)]];
  if ("droppedMedia" in item) {
    const { kind, bytes, detail, jsonExtraBytes } = item.droppedMedia;
    const media: Field[] = [[1, kind], [2, bytes]];
    if (detail !== undefined) media.push([3, detail]);
    if (jsonExtraBytes) media.push([4, jsonExtraBytes]);
    return [[5, media]];
  }
  return [[3, item.audioUrl]];
}

/**
 * The encoded size of a message, and the byte lengths of its strings and submessages in writing
 * order (a submessage's before its own fields'): each string is measured once, and written once,
 * straight into the frame.
 */
function plan(fields: Field[]): { size: number; lengths: number[] } {
  const lengths: number[] = [];
  return { size: measure(fields, lengths), lengths };
}

function measure(fields: Field[], lengths: number[]): number {
  let size = 0;
  for (const [, value] of fields) {
    if (typeof value === "number") {
      size += 1 + varintBytes(value);
      continue;
    }
    let length: number;
    if (typeof value === "string") {
      length = utf8ByteLength(value);
      lengths.push(length);
    } else {
      const at = lengths.length;
      lengths.push(0);
      length = lengths[at] = measure(value, lengths);
    }
    size += fieldBytes(length);
  }
  return size;
}

function writeVarint(out: Uint8Array, pos: number, value: number): number {
  while (value >= 128) {
    out[pos++] = (value % 128) | 0x80;
    value = Math.floor(value / 128);
  }
  out[pos++] = value;
  return pos;
}

/** Writes `fields` as measured by {@link plan}; `next.at` walks `lengths`. */
function writeFields(
  out: Uint8Array,
  pos: number,
  fields: Field[],
  lengths: number[],
  next: { at: number },
): number {
  for (const [no, value] of fields) {
    if (typeof value === "number") {
      out[pos++] = no << 3;
      pos = writeVarint(out, pos, value);
      continue;
    }
    const length = lengths[next.at++];
    out[pos++] = (no << 3) | 2;
    pos = writeVarint(out, pos, length);
    if (typeof value !== "string") {
      pos = writeFields(out, pos, value, lengths, next);
    } else if (length === value.length && length <= 32) {
      for (let i = 0; i < length; i++) out[pos++] = value.charCodeAt(i); // ASCII
    } else {
      utf8.encodeInto(value, out.subarray(pos, pos + length));
      pos += length;
    }
  }
  return pos;
}

/** How long a writer waits on the stream lock before it looks again (a dead holder is released). */
const LOCK_WAIT_MS = 20;

/**
 * Takes the stream lock for `id` (waiting while another thread holds it), writes all of `bytes`
 * to stdout, and releases it. For threads that may block: cell workers. The runtime's main
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
    // Our own: only after a write of this thread that ran out of stack (see below).
    if (holder === 0 || holder === id) break;
    Atomics.wait(sink, SINK_LOCK, holder, LOCK_WAIT_MS);
  }
  try {
    write(bytes);
  } finally {
    // A cell's write may run with almost no stack left, where any call can throw a stack
    // overflow, even of a built-in. The one that took the lock just ran at this depth, so it
    // runs here too: the lock is released. A waiter not woken by a failed notify looks again
    // after LOCK_WAIT_MS, and a throw after the write must not fail it (its retry would repeat
    // the frames).
    if (Atomics.compareExchange(sink, SINK_LOCK, id, 0) === id) {
      try {
        Atomics.notify(sink, SINK_LOCK);
      } catch {
        // See above.
      }
    }
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
 * Releases the stream lock if `id` holds it (also how the runtime frees the lock of a cell worker that
 * ended while holding it).
 *
 * @returns whether `id` held it
 */
export function unlock(sink: Int32Array, id: number): boolean {
  if (Atomics.compareExchange(sink, SINK_LOCK, id, 0) !== id) return false;
  Atomics.notify(sink, SINK_LOCK);
  return true;
}

/**
 * Writes all of `bytes` to stdout, blocking (a pipe write of the runtime blocks until taken). Deno
 * writes stdout through a line buffer, which sends the bytes after a write's last newline in a
 * second `write()`: every frame ends with one (`WorkerToHost.line_end`), so it leaves in one.
 */
export function writeAllSync(bytes: Uint8Array): void {
  // Read before the write: after it, not even a getter may run (see `writeLocked`).
  const length = bytes.length;
  let offset = Deno.stdout.writeSync(bytes);
  while (offset < length) offset += Deno.stdout.writeSync(bytes.subarray(offset));
}

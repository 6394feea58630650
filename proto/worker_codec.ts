/**
 * Encoding of the internal host ↔ runtime protocol (`codemode.worker.v1`, SPEC §9.4), shared by
 * the host and the bundled session runtime: the envelopes' types and their codec.
 *
 * The codec is the small table-driven protobuf encoder/decoder of `schema_codec.ts` over the
 * tables of `worker_schema.ts`, so the session runtime needs no protobuf library:
 * `proto/codemode/worker/v1/worker.proto` stays the contract, and `worker_codec_test.ts` checks the
 * tables against it and the bytes against protobufjs. Loading protobufjs and parsing the `.proto`
 * text cost each runtime ~14 MiB of resident memory and ~15 ms of its start (measured on Deno
 * 2.9.6).
 *
 * Decoded objects follow protobufjs's `toObject({longs: Number, enums: Number, oneofs: true,
 * defaults: false})`: camelCase fields, only the fields present on the wire, 64-bit integers as
 * numbers, and each set oneof named by a virtual field (`message`, `event`, `item`, …).
 *
 * @module
 */
import { decodeMessage, encodeMessage } from "./schema_codec.ts";
import { HOST_TO_WORKER, WORKER_TO_HOST } from "./worker_schema.ts";

export { WORKER_PROTOCOL_VERSION } from "./worker_ready.ts";

/** Content item as it crosses the frame channel. */
export type WireItem =
  | { text: string }
  | { image: { imageUrl: string; detail: string } }
  | { audioUrl: string }
  | { trimmedText: WireTrimmedText }
  | { droppedMedia: { kind: string; bytes: number; detail?: string; jsonExtraBytes?: number } };

/** A text in reduced form; `jsonExtraBytes` (absent: 0) is what JSON escaping adds to the whole text. */
export interface WireTrimmedText {
  head: string;
  tail: string;
  totalBytes: number;
  jsonExtraBytes?: number;
}

/** One runtime event of a cell (exactly one member set). */
export interface WireCellEvent {
  cellId: string;
  started?: Record<string, never>;
  contentItem?: WireItem;
  yieldRequested?: Record<string, never>;
  toolCall?: { runtimeToolCallId: string; globalName: string; inputJson?: string };
  toolResultConsumed?: string;
  notify?: string;
  pending?: Record<string, never>;
  storedWrite?: { key: string; valueJson: string };
  /** A batch of stored writes (see `worker.proto`); a cell writes these, not `storedWrite`. */
  storedWrites?: { entries: { key: string; valueJson: string }[] };
  result?: {
    errorText?: string;
    trimmedError?: WireTrimmedText;
  };
  exited?: { reason: string; detail?: string };
  /** A busy stretch of the cell's thread (odd number), reported by the runtime (see `worker.proto`). */
  busy?: number;
  /** The end of a reported busy stretch, written by the cell. */
  idle?: number;
  event?: string;
}

/** Host → runtime envelope (exactly one member set). */
export interface HostToWorker {
  configure?: {
    sessionId: string;
    outputTruncation: number;
    cellHeapLimitMb: number;
    maxMessageBytes: number;
    maxStoredValueBytes: number;
    outputEventCredit?: number;
    outputByteCredit?: number;
    /** The host's `maxWorkerFrameBytes`; 0 or absent: the default. */
    maxFrameBytes?: number;
    /** Reduced texts and media carry what JSON escaping adds to them (a JSON door's session). */
    jsonSizes?: boolean;
  };
  storeUpdate?: { version: number; reset?: boolean; entries: { key: string; valueJson: string }[] };
  startCell?: {
    cellId: string;
    source: string;
    tools: { globalName: string; description: string }[];
    storeVersion: number;
  };
  toolResult?: {
    cellId: string;
    runtimeToolCallId: string;
    outputJson?: string;
    errorMessage?: string;
  };
  credit?: { cellId: string; events: number; bytes: number };
  stopCell?: { cellId: string };
  shutdown?: Record<string, never>;
  /** Liveness: the runtime answers with a `pong` of the same `seq`. */
  ping?: { seq: number };
  message?: string;
}

/** Runtime → host envelope (exactly one member set). */
export interface WorkerToHost {
  ready?: { denoVersion: string; protocolVersion: number };
  cellEvent?: WireCellEvent;
  runtimeFault?: { detail: string };
  /** The answer to a `ping`, from the runtime's main thread. */
  pong?: { seq: number };
  message?: string;
  /** 10 (a newline byte) when set, so that Deno's line-buffered stdout writes a frame at once (see `worker.proto`); ignored by the host. */
  lineEnd?: number;
}

/** Encoders and decoders of both envelopes. */
export interface WorkerCodec {
  encodeHostToWorker(message: HostToWorker): Uint8Array;
  decodeHostToWorker(bytes: Uint8Array): HostToWorker;
  encodeWorkerToHost(message: WorkerToHost): Uint8Array;
  decodeWorkerToHost(bytes: Uint8Array): WorkerToHost;
}

/**
 * The codec of both envelopes.
 *
 * @returns encoders/decoders of plain objects (camelCase fields; `message`/`event` name the set
 *   oneof member after decoding)
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const codec = createWorkerCodec();
 * const bytes = codec.encodeHostToWorker({ stopCell: { cellId: "7" } });
 * assert.deepEqual(codec.decodeHostToWorker(bytes), { message: "stopCell", stopCell: { cellId: "7" } });
 * ```
 */
export function createWorkerCodec(): WorkerCodec {
  return {
    encodeHostToWorker: (m) => encodeMessage(m, HOST_TO_WORKER),
    decodeHostToWorker: (b) => decodeMessage(b, HOST_TO_WORKER) as HostToWorker,
    encodeWorkerToHost: (m) => encodeMessage(m, WORKER_TO_HOST),
    decodeWorkerToHost: (b) => decodeMessage(b, WORKER_TO_HOST) as WorkerToHost,
  };
}

/**
 * Encoding of the internal host ↔ runtime protocol (`codemode.worker.v1`, SPEC §9.4), shared by
 * the host and the bundled session runtime. The caller supplies the `.proto` text (the host reads
 * it from `proto/`, the runtime from its own runtime directory).
 *
 * @module
 */
import protobuf, { asBuffer } from "./protobuf_runtime.ts";

/** Bumped whenever worker.proto or its semantics change; checked at `Ready` (SPEC §9.3). */
export const WORKER_PROTOCOL_VERSION = 2;

/** Content item as it crosses the frame channel. */
export type WireItem =
  | { text: string }
  | { image: { imageUrl: string; detail: string } }
  | { audioUrl: string }
  | { trimmedText: { head: string; tail: string; totalBytes: number } }
  | { droppedMedia: { kind: string; bytes: number } };

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
  result?: {
    errorText?: string;
    trimmedError?: { head: string; tail: string; totalBytes: number };
  };
  exited?: { reason: string; detail?: string };
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
    runtimeMode?: number;
    outputEventCredit?: number;
    outputByteCredit?: number;
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
  control?: { cellId: string; continue?: boolean; resume?: boolean; terminate?: boolean };
  shutdown?: Record<string, never>;
  testHook?: {
    garbageFrame?: boolean;
    exhaustMainHeap?: boolean;
    delayStopMs?: number;
    faultCell?: string;
    runtimeFault?: string;
    action?: string;
  };
  message?: string;
}

/** Runtime → host envelope (exactly one member set). */
export interface WorkerToHost {
  ready?: { denoVersion: string; protocolVersion: number };
  cellEvent?: WireCellEvent;
  runtimeFault?: { detail: string };
  message?: string;
}

/** Encoders and decoders of both envelopes. */
export interface WorkerCodec {
  encodeHostToWorker(message: HostToWorker): Uint8Array;
  decodeHostToWorker(bytes: Uint8Array): HostToWorker;
  encodeWorkerToHost(message: WorkerToHost): Uint8Array;
  decodeWorkerToHost(bytes: Uint8Array): WorkerToHost;
}

const OPTIONS: protobuf.IConversionOptions = {
  longs: Number,
  enums: Number,
  oneofs: true,
  defaults: false,
};

/**
 * Builds the codec from the text of `worker.proto`.
 *
 * @param protoText the contents of `proto/codemode/worker/v1/worker.proto`
 * @returns encoders/decoders of plain objects (camelCase fields; `message`/`event` name the set
 *   oneof member after decoding)
 * @throws {Error} when the text does not parse
 */
export function createWorkerCodec(protoText: string): WorkerCodec {
  const root = protobuf.parse(protoText, { keepCase: false }).root;
  root.resolveAll();
  const hostToWorker = root.lookupType("codemode.worker.v1.HostToWorker");
  const workerToHost = root.lookupType("codemode.worker.v1.WorkerToHost");
  return {
    encodeHostToWorker: (m) => hostToWorker.encode(m).finish(),
    decodeHostToWorker: (b) =>
      hostToWorker.toObject(hostToWorker.decode(asBuffer(b)), OPTIONS) as HostToWorker,
    encodeWorkerToHost: (m) => workerToHost.encode(m).finish(),
    decodeWorkerToHost: (b) =>
      workerToHost.toObject(workerToHost.decode(asBuffer(b)), OPTIONS) as WorkerToHost,
  };
}

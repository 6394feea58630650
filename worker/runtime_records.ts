/**
 * What the parts of the session runtime share (`runtime.ts` composes them): its clock, its
 * settings, and the two records it keeps — a {@link CellWorker} per cell worker it created and a
 * {@link CellRun} per cell run it started. The glossary is at the top of `runtime.ts`.
 *
 * @module
 */
import type { MessagePort, Worker } from "node:worker_threads";
import { MAX_MESSAGE_BYTES, MIB } from "../proto/bytes.ts";
import { DEFAULT_MAX_FRAME_BYTES } from "./cell_events.ts";
import type { CellOutput, CellRecycled, WrittenOutput } from "./cell_protocol.ts";

/** The settings a `Configure` frame gives a runtime. */
export interface RuntimeConfig {
  heapMb: number;
  maxMessageBytes: number;
  maxStoredValueBytes: number;
  /** The largest frame read or written (`maxWorkerFrameBytes`). */
  maxFrameBytes: number;
  server: boolean;
  /** The session's door writes outcomes as JSON (`Configure.json_sizes`). */
  jsonSizes: boolean;
  creditEvents: number;
  creditBytes: number;
}

/** The settings of a runtime that has not been configured yet (the host's defaults). */
export const DEFAULT_RUNTIME_CONFIG: Readonly<RuntimeConfig> = Object.freeze({
  heapMb: 1024,
  maxMessageBytes: MAX_MESSAGE_BYTES,
  maxStoredValueBytes: MAX_MESSAGE_BYTES,
  maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
  server: false,
  jsonSizes: false,
  creditEvents: 128,
  creditBytes: 2 * MIB,
});

/**
 * The thread of a cell worker: the parts of a `node:worker_threads` Worker the runtime uses (a
 * test passes a fake).
 */
export type CellWorkerThread = Pick<Worker, "on" | "off" | "once" | "postMessage" | "terminate">;

/**
 * What arrives on a cell worker's output port: a cell's outputs posted whole (one, or several at
 * once), notes of written ones, and the worker's own answers to `warm` and to a recycling.
 */
export type PortOutput =
  | CellOutput
  | WrittenOutput
  | (CellOutput | WrittenOutput)[]
  | { t: "warmed" }
  | CellRecycled;

/** The runtime's record of one cell worker (see `runtime_pool.ts` for its life). */
export interface CellWorker {
  thread: CellWorkerThread;
  heapMb: number;
  /** Settles once the spare is warmed and parked, or dead. */
  ready: Promise<void>;
  /** Set as `ready` settles: a start then goes out without awaiting it (one turn less). */
  settled: boolean;
  /** Set once the thread failed or exited before it was used. */
  dead: boolean;
  /** Set once its ports are closed (discarded, or its cell run ended): it is never warmed. */
  closed: boolean;
  /** The cell's output port (ours), handed to the thread with `warm`. */
  output: MessagePort;
  /** Where its `start` is posted (ours), before the doorbell rings. */
  control: MessagePort;
  /** `CREDIT_*` and `CELL_DOORBELL`, shared with the thread. */
  words: Int32Array;
  /** Its lock ID on the stream words. */
  sinkId: number;
  /** Receives the cell's output; until a cell run starts, it waits for `warmed` (or `recycled`). */
  onOutput: (output: PortOutput) => void;
  /** The cell run it serves, if any: its error and exit are that run's. */
  run?: CellRun;
  /** Cell runs started on it so far (the retire policy). */
  served: number;
  /** Set when it will serve no further cell run (retired, or its recycling timed out). */
  retired: boolean;
}

/** The runtime's record of one cell run (see `runtime_runs.ts`). */
export interface CellRun {
  /** The cell's ID. */
  id: string;
  worker: CellWorker;
  /** `result` or `stopped` seen: nothing more comes from the cell. */
  finished: boolean;
  /** `exited` sent to the host. */
  exited: boolean;
  /** The cell wrote its own `exited` (with its result). */
  exitWritten: boolean;
  /** The start message was posted to the cell worker. */
  started: boolean;
  /** Clock time of the last message from the cell. */
  lastSeen: number;
  /** An unanswered ping: when it was sent and the process CPU time (µs) then. */
  ping?: { at: number; cpu: number };
  exitReason: "normal" | "heap_limit" | "fault";
  exitDetail?: string;
  /** `CELL_PROGRESS` as last seen by the watchdog. */
  progress: number;
  /** A stop was requested: its cell worker is never reused. */
  stopRequested: boolean;
  /** Its cell worker is kept for the next cell run (the cell completed). */
  reuse: boolean;
  /** Settles when its result's note arrives (a start waits for it, see `CellRuns.start`). */
  noted?: PromiseWithResolvers<void>;
  /** `CELL_BUSY` at the last look (`CellRuns`, `cell_busy.ts`). */
  busySeen: number;
  /** The busy stretch reported to the host, if any (0: none). */
  busyReported: number;
}

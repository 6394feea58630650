/**
 * Messages between a session runtime's main thread ("the runtime") and one cell worker (a
 * `node:worker_threads` Worker running `cell_bootstrap.ts`). Internal to `worker/`; the glossary of
 * `worker/` is at the top of `runtime.ts`.
 *
 * Lifecycle:
 * 1. The runtime creates the cell worker (with `resourceLimits.maxOldGenerationSizeMb`) ahead of time,
 *    as a spare. The bootstrap boots (imports, nothing user-visible) and posts `{t: "ready"}` on
 *    `parentPort`.
 *    The runtime then sends `warm` (see {@link CellControl}): it hands the spare its output port,
 *    a control port and its shared words, and the spare pays its lazy first-use costs, answers
 *    `warmed` on the output port and *parks*: inside a macrotask it sleeps in `Atomics.wait` on
 *    `CELL_DOORBELL`, waking every `PARK_MS` to let its event loop turn.
 * 2. The runtime posts a {@link CellStart} on the control port and rings the doorbell
 *    (`Atomics.store` + `Atomics.notify`). The parked spare takes it with `receiveMessageOnPort`
 *    and evaluates the cell right there, in the parking macrotask: no event-loop turn and no
 *    thread wake-up through the message queue (~1 ms less on an idle 2-core machine). A spare that
 *    was never warmed can still be started by `worker.postMessage(start, [start.output])`.
 *    The bootstrap builds a fresh `node:vm` context, creates the helpers inside it, posts
 *    `{t: "started"}` on its output port, and evaluates the source once.
 * 3. Everything the cell produces travels as {@link CellOutput} on the output port, a dedicated
 *    `MessagePort`, in production order, so the runtime can drain it with `receiveMessageOnPort`
 *    before terminating the cell worker. `result` is always the last message of a cell that finished.
 *    A cell handed the runtime's stream words (`sink` in `warm`) writes its frames to the runtime's
 *    stdout itself, under the stream lock (`cell_events.ts`), and bumps `CELL_PROGRESS`: two thread
 *    hops less between a cell and its host (~0.6 ms of a warm Execute on an idle 2-core machine).
 *    Of what it wrote it posts only its `result`, as a {@link WrittenOutput} and after the frames
 *    (with the cell's normal `exited`). `stopped` and `pong` are always posted.
 * 3a. Reuse (SPEC 1.2 §5.1): a cell that *completed* (its `result` sent, never stopped) leaves a
 *    cell worker that may run the next cell of the same session in a new realm. In the macrotask after
 *    the one that finished the cell (so no microtask of that cell is left: the drain ran to its
 *    end), the bootstrap drops the cell (its timers are already cleared, its context is never
 *    entered again), builds a fresh context with fresh helpers, posts {@link CellRecycled} and
 *    parks again on the same doorbell, which it reset to 0 when it took the start. The runtime
 *    hands it the next cell only after that message; it ends the cell worker instead after a stopped
 *    or failed cell, a heap-limit exit or a fault, or when its retire policy says so.
 * 4. Output is credit-based (SPEC §8.10): the cell counts every {@link CountedOutput} in
 *    `CREDIT_EVENTS` and keeps its `n` payload bytes until the host acknowledges it: the runtime
 *    adds each host `Credit{events}` to `CREDIT_ACKED`. A helper call whose item leaves the cell
 *    over either credit waits (`Atomics.wait`) until the runtime relays a `Credit` or sets the
 *    stop word. Oversized items are posted in their reduced forms.
 * 5. The runtime posts {@link CellControl} messages on the cell worker's thread (`postMessage`).
 *    `stop` is answered with `{t: "stopped"}` on the output port as soon as the bootstrap is not
 *    running user code (the liveness handshake), then `CELL_STOPPED` is set; after that it
 *    dispatches nothing more into the context (no timers, no tool results) and every helper call
 *    throws.
 * 6. The cell counts its synchronous stretches in `CELL_BUSY`; the runtime reports one that lasts
 *    (`busy`), and the cell writes `idle` when a reported stretch ends (`cell_busy.ts`).
 *
 * @module
 */

/** A tool exposed to the cell as `tools[name]`; `name` is already normalised (SPEC §11.3). */
export interface CellTool {
  /** The JS-facing identifier (`tools.<name>`), also listed in `ALL_TOOLS`. */
  name: string;
  /** The definition's description, listed in `ALL_TOOLS`. */
  description: string;
}

/** Starts the cell: sent once to a ready bootstrap, with `output` in the transfer list. */
export interface CellStart {
  t: "start";
  /** The cell ID (decimal string), for diagnostics only. */
  cellId: string;
  /** The checked JavaScript source (never TypeScript: the host stripped types already). */
  source: string;
  /** Enabled tools in `enabled_tools` order; later duplicates overwrite earlier ones in `tools`. */
  tools: CellTool[];
  /**
   * The stored-value snapshot the cell starts from: key → JSON text; with `storeBase`, only the
   * entries not in the base or changed since it was built (`store_snapshot.ts`).
   */
  store: [string, string][];
  /** The shared base of the snapshot (`store_snapshot.ts`), if any. */
  storeBase?: SharedArrayBuffer;
  /** UTF-8 bytes of keys plus JSON texts of the whole snapshot; absent: counted from `store`. */
  storeBytes?: number;
  /** Cap on the UTF-8 bytes of keys plus JSON texts of the cell's view (SPEC §6 rule 5). */
  maxStoredValueBytes: number;
  /** Cap on a notification's UTF-8 bytes and on a tool input's JSON bytes (SPEC §5.3, §7.1). */
  maxMessageBytes: number;
  /**
   * The largest frame the cell writes (the host's `maxWorkerFrameBytes`, from `Configure`);
   * absent: the host's default.
   */
  maxFrameBytes?: number;
  /** The port every {@link CellOutput} is posted on; absent when the `warm` message handed it over. */
  output?: MessagePort;
  /**
   * Output credit and pre-trimming (SPEC §8.10). Without `words`, the words of `warm` are used;
   * without `credit`, the cell has unlimited credit (a hand-driven isolate).
   */
  credit?: Omit<CellCredit, "words"> & { words?: Int32Array };
}

/**
 * Indices of the `Int32Array` words shared by a cell and its runtime. Counted outputs posted so
 * far (written by the cell; wraps at 2^31, so compare differences).
 */
export const CREDIT_EVENTS = 0;
/** Unacknowledged payload bytes, as the cell last settled them (written by the cell). */
export const CREDIT_BYTES = 1;
/** Bumped (and notified) whenever the runtime changes a word; the cell waits on it. */
export const CREDIT_GENERATION = 2;
/** Set to 1 by a stop request; every helper call throws from then on. */
export const CREDIT_STOP = 3;
/** 1 = a `start` waits on the control port; 2 = a parked spare is discarded (it exits its park). */
export const CELL_DOORBELL = 4;
/**
 * Counted outputs the host has acknowledged so far (written by the runtime on each `Credit`). The
 * cell keeps the payload bytes of its unacknowledged outputs itself and settles them against this.
 */
export const CREDIT_ACKED = 5;
/** Bumped by the cell for every output it writes itself: the runtime's sign of life (watchdog). */
export const CELL_PROGRESS = 6;
/**
 * Set to 1 by the cell just before it writes its result: its note may still be on its way when the
 * host, and so the harness, already has the result (a back-to-back start waits for it, not for a
 * new cell worker). Reset by the runtime when it hands the cell worker its next cell.
 */
export const CELL_RESULT = 7;
/**
 * Set to 1 (and notified) by the cell once it has posted `stopped`: the runtime, which waits on it
 * briefly after a `stop`, drains that answer before it answers the host's next frame.
 */
export const CELL_STOPPED = 8;
/**
 * The cell's busy stretches (`cell_busy.ts`): bumped by the cell as it enters synchronous code (odd:
 * the stretch's number) and as it leaves it or waits for credit (even). The runtime reports a stretch
 * that lasts to the host ahead of any stop (`CellRuns`), which can then stop a spinning cell at once.
 */
export const CELL_BUSY = 9;
/** The stretch the runtime reported to the host: the cell writes `idle` as that stretch ends. */
export const CELL_BUSY_REPORTED = 10;
/** Int32 words of the shared buffer of a cell (the indices above). */
export const CELL_WORDS = 11;
/** The stream lock in the runtime's shared stream words: 0, or the lock ID of the thread writing. */
export const SINK_LOCK = 0;
/** Int32 words of the runtime's shared stream buffer. */
export const SINK_WORDS = 2;
/**
 * A reused cell worker is retired when its used V8 heap, after its fresh realm is built (and, when over
 * the bound, after a collection), exceeds this share of its heap limit or {@link RETIRE_HEAP_BYTES}.
 */
export const RETIRE_HEAP_SHARE = 0.5;
/** The absolute heap bound of the retire policy, bytes. */
export const RETIRE_HEAP_BYTES = 64 * 1024 * 1024;
/** A parked spare wakes this often, so its event loop still turns now and then. */
export const PARK_MS = 1_000;

/** Credit and reduced-form settings of one cell. */
export interface CellCredit {
  /** Four `Int32Array` words over a `SharedArrayBuffer`: see `CREDIT_*`. */
  words: Int32Array;
  /** The most unacknowledged events a cell may have before a helper call waits. */
  maxEvents: number;
  /** The most unacknowledged payload bytes before a helper call waits. */
  maxBytes: number;
  /** A text (or error text) longer than this many UTF-8 bytes is sent as `trimmedText`. */
  trimTextOver: number;
  /** The bytes kept at each end of a trimmed text. */
  keepTextBytes: number;
  /** A media URL longer than this is sent as `droppedMedia`. */
  dropMediaOver: number;
  /** Reduced texts and media carry what JSON escaping adds to them (`jsonExtra`); else 0. */
  jsonSizes?: boolean;
}

/** Runtime → cell control messages, posted on the cell worker's thread. */
export type CellControl =
  | CellStart
  /** Settles the JS promise of `tools.x()` call `id` (`"tool-1"`, …): `json` parsed in the context, or rejected with the string `error`. */
  | { t: "toolResult"; id: string; json: string; cell?: string }
  | { t: "toolResult"; id: string; error: string; cell?: string }
  /**
   * Stop: answer `stopped`, dispatch nothing more into the context, make helpers throw. `cell` (on
   * this and on `toolResult`) names the cell it is meant for: a reused cell worker ignores a message
   * for the cell it ran before.
   */
  | { t: "stop"; cell?: string }
  /** Liveness probe: answered with `pong` whenever the isolate is not running code. */
  | { t: "ping" }
  /**
   * Sent to a booted spare before its `start`: answered with `{t: "warmed"}` on `port`. With
   * `control` and `words`, `port` becomes the cell's output port and the spare parks (step 1);
   * without them, `port` is closed after the answer.
   */
  | {
    t: "warm";
    port: MessagePort;
    control?: MessagePort;
    words?: Int32Array;
    /** The runtime's stream words (`SINK_*`): the cell writes its own frames (item 3). */
    sink?: Int32Array;
    /** The cell's non-zero lock ID for `SINK_LOCK`, with `sink`. */
    sinkId?: number;
  };

/** An image item as produced by `image()`, `generatedImage()` or `content()`. */
export interface CellImage {
  url: string;
  /** Always set by the helpers: `auto`, `low`, `high` or `original`. */
  detail: "auto" | "low" | "high" | "original";
}

/** A text in reduced form: its first and last bytes and its true UTF-8 length. */
export interface CellTrimmedText {
  head: string;
  tail: string;
  total: number;
  /** The bytes `JSON.stringify` adds to the whole text (`jsonEscapeExtraBytes`). */
  jsonExtra: number;
}

/** Cell → runtime messages that consume output credit; `n` is the payload bytes as posted. */
export type CountedOutput =
  | { t: "text"; text: string; n: number }
  | { t: "trimmedText"; text: CellTrimmedText; n: number }
  | { t: "image"; image: CellImage; n: number }
  /** An image whose URL was too large to send: its size only. */
  | { t: "droppedImage"; bytes: number; detail: CellImage["detail"]; jsonExtra: number; n: number }
  /** An audio item as produced by `audio()` or `content()`: its data URL. */
  | { t: "audio"; url: string; n: number }
  /** An audio item whose URL was too large to send: its size only. */
  | { t: "droppedAudio"; bytes: number; jsonExtra: number; n: number }
  /** `yield_control()` was called. */
  | { t: "yield"; n: number }
  /** `tools.<name>(arg)` was called; `input` is the JSON text, absent when the value stringified to `undefined`. */
  | { t: "toolCall"; id: string; name: string; input?: string; n: number }
  /** The result of tool call `id` was delivered into the context. */
  | { t: "toolResultConsumed"; id: string; n: number }
  | { t: "notify"; text: string; n: number };

/** Cell → runtime messages, posted on the output port in production order. */
export type CellOutput =
  | { t: "started" }
  | CountedOutput
  /**
   * The cell finished: evaluation settled, `exit()`, or a failure. `writes` is the cell's write
   * set (one entry per key, its last value as JSON text). `error` (or, when too long, its reduced
   * form `trimmedError`) is set when the cell failed.
   */
  | { t: "result"; writes: [string, string][]; error?: string; trimmedError?: CellTrimmedText }
  /**
   * A batch of the result's writes, posted ahead of it by a cell that posts its outputs whole
   * (`proto/store_batches.ts`): each crosses and is forwarded on its own.
   */
  | { t: "storedWrites"; writes: [string, string][] }
  /** Answer to `stop` (liveness handshake). */
  | { t: "stopped" }
  /** Answer to `ping`; never forwarded to the host. */
  | { t: "pong" }
  /** The end of busy stretch `stretch`, which the runtime reported to the host (`CELL_BUSY`). */
  | { t: "idle"; stretch: number };

/** A `result` the cell wrote to the frame stream itself (item 3). */
export interface WrittenOutput {
  t: "result";
  w: true;
}

/**
 * Posted on the output port when a cell worker whose cell completed is ready for the next cell of its
 * session (item 3a): a fresh context is built and the cell worker parks on its doorbell again.
 */
export interface CellRecycled {
  t: "recycled";
  /** The isolate's used V8 heap, bytes, after the fresh context was built (the retire policy). */
  heap: number;
}

/** Posted once on `parentPort` when the bootstrap has booted and waits for its `start`. */
export interface CellReady {
  t: "ready";
}

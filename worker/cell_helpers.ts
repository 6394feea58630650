/**
 * The helpers of a cell (`text`, `image`, `audio`, `generatedImage`, `content`, `store`, `load`,
 * `notify`, `yield_control`, `exit`, `tools`, `ALL_TOOLS`, the timers, and through
 * `./cell_combinators.ts` `as_settled` and `stream_settled`): what they and the cell worker's
 * outer realm agree on. The helpers are made by factories whose *source text* the cell worker
 * evaluates inside each cell's `node:vm` context (`cell_realm.ts`), so that every function and
 * object they create belongs to that context. The factories reach the cell worker's realm only
 * through the bridge functions they are given ({@link CellBridges}: primitives in, primitives out)
 * and are driven through the {@link CellController} they return.
 *
 * The factories, one job each:
 * - `cell_helper_kit.ts`: the bridge calls, the description of a thrown value, the cell's end, the
 *   look of a native function;
 * - `cell_helper_json.ts`: JSON texts checked the way the reference host reads them back;
 * - `cell_helper_content.ts`: `text`, `image`, `audio`, `generatedImage` and `content`'s blocks;
 * - `cell_helper_store.ts`: `store` and `load`;
 * - `cell_helper_control.ts`: `notify`, `yield_control`, `exit` and the timers;
 * - `cell_helper_tools.ts`: `tools`, `ALL_TOOLS`, tool calls and their results;
 * - `cell_helper_stacks.ts`: stack traces that show only the cell's frames;
 * - `cell_helper_globals.ts`: the context's globals, composed from all of them.
 *
 * A factory must not refer to anything outside its own body except the context's built-ins, so
 * each module's job is one function; values and numbers the outer realm shares (the opcodes below)
 * are repeated in their bodies as literals.
 *
 * What a cell sees is Codex's own host, byte for byte, as measured by running the same cells on
 * both (tests/reference/cells/): the helpers look native (`function () { [native code] }`, name
 * `""`, length 0, a `prototype`, enumerable globals), every argument error is the reference's
 * string, user exceptions caught by a helper come back as their description (a string), and stack
 * traces show only the cell's frames.
 *
 * @module
 */

// Bridge opcodes, shared by the outer realm and the helper source (which cannot import them, so
// it repeats the numbers; keep both in sync).
export const PHASE_RUNNING = 0;
export const PHASE_STOPPED = 1;
export const PHASE_FINISHED = 2;
export const EMIT_TEXT = 0;
export const EMIT_IMAGE = 1;
export const EMIT_YIELD = 2;
export const EMIT_NOTIFY = 3;
export const EMIT_CONSUMED = 4;
export const EMIT_AUDIO = 5;
export const STORE_OK = 0;
export const STORE_OVER_LIMIT = 1;
export const TIMER_SET = 0;
export const TIMER_CLEAR = 1;
/** `finish` kinds: the cell completed, failed, or called `exit()` (which ends it at once). */
export const FINISH_COMPLETED = 0;
export const FINISH_FAILED = 1;
export const FINISH_EXIT = 2;

/** The outer-realm functions the helpers are created with; primitives in, primitives out. */
export interface CellBridges {
  phase: () => number;
  emit: (kind: number, a: string, b: string) => number;
  callTool: (name: string, input: string | undefined) => string;
  byteLength: (text: string) => number;
  load: (key: string) => string | undefined;
  store: (key: string, json: string) => number;
  timer: (op: number, id: number, delayMs: number) => void;
  /**
   * Reports the cell's end: `FINISH_EXIT` ends it at once; a completion or failure is taken once
   * the context's microtask queue has drained (microtasks queued before it still run and output).
   */
  finish: (kind: number, errorText: string) => void;
}

/** The three helpers of `./cell_combinators.ts`, made for one context around its block emitter. */
export type CellCombinators = (emitBlock: (block: unknown) => undefined) => {
  as_settled: unknown;
  stream_settled: unknown;
  content: unknown;
};

/** The context-realm functions the outer realm drives the cell with. */
export interface CellController {
  /** Watches the module's evaluation promise: its settlement ends the cell. */
  watch: (evaluation: unknown) => void;
  /** Ends the cell with a value thrown while the cell was being started. */
  fail: (thrown: unknown) => void;
  /** Reports the cell completed (its evaluation promise cannot be watched). */
  complete: () => void;
  /**
   * Whether `Promise.prototype.then`, `Promise.prototype.constructor` and `Promise[Symbol.species]`
   * are still the originals: Deno settles the module's evaluation promise through them.
   */
  promiseIntact: () => boolean;
  /** Queues timer `id`'s callback (a context microtask) unless it was cleared. */
  fireTimer: (id: number) => void;
  /** Settles tool call `id`: parse `payload` as JSON, or reject with it when `isError`. */
  deliver: (id: string, isError: boolean, payload: string) => void;
  /** Installs `tools` and `ALL_TOOLS` and the size limits of the cell that is starting. */
  configure: (toolsJson: string, maxMessageBytes: number, maxStoredValueBytes: number) => void;
  /** `error.stack` as the cell would read it (stack frames filtered): for the bootstrap's tests. */
  describe: (value: unknown) => string;
}

/**
 * The size limits of the cell that is starting, set by {@link CellController.configure} (the
 * context is built ahead, in the spare cell worker). A dictionary without a prototype.
 */
export interface HelperLimits {
  __proto__?: null;
  maxMessageBytes: number;
  maxStoredValueBytes: number;
}

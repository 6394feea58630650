/**
 * The realm a cell run evaluates its module in: a fresh `node:vm` context holding only the
 * ECMAScript built-ins (SPEC §5.2) and the helpers of SPEC §5.3, created *inside* that context
 * (`cell_helpers.ts`).
 *
 * - The context has a microtask queue of its own (`microtaskMode: "afterEvaluate"`), drained at the
 *   end of each `runInContext` ({@link DRAIN_CONTEXT}): `cell_bootstrap.ts` says why.
 * - The helpers' and the combinators' scripts are compiled once per isolate and run in each
 *   context, so the contexts share V8's compiled functions.
 *
 * @module
 */
import vm from "node:vm";
import { CELL_FILE_NAME } from "../proto/cell_source.ts";
import { CELL_COMBINATORS_SOURCE } from "./cell_combinators.ts";
import { type CellHelperFactories, cellHelpersSource } from "./cell_helper_globals.ts";
import type { CellBridges, CellCombinators, CellController } from "./cell_helpers.ts";

/** The string `exit()` throws; a cell it ends completes successfully (SPEC §5.3). */
export const CELL_EXIT_SENTINEL = "__codex_code_mode_exit__";

/** What every helper call throws once the cell has been stopped. */
export const CELL_STOPPED_ERROR = "code-mode cell was stopped";

/** What every helper call throws once the cell has posted its `result`. */
export const CELL_FINISHED_ERROR = "code-mode cell has finished";

/** The file name of the helpers' own stack frames (user frames name `exec_main.mjs`). */
export const CELL_HELPERS_FILE_NAME = "code_mode_helpers.js";

/**
 * The global names a cell's context keeps (SPEC §5.2), besides the helpers; every other own
 * property of a fresh context's global (`console`, `queueMicrotask`, `Atomics`,
 * `SharedArrayBuffer`, `WebAssembly`, …) is deleted before user code runs.
 */
export const CELL_GLOBAL_ALLOWLIST: readonly string[] = Object.freeze([
  "globalThis",
  "Infinity",
  "NaN",
  "undefined",
  "eval",
  "isFinite",
  "isNaN",
  "parseFloat",
  "parseInt",
  "decodeURI",
  "decodeURIComponent",
  "encodeURI",
  "encodeURIComponent",
  "escape",
  "unescape",
  "AggregateError",
  "Array",
  "ArrayBuffer",
  "BigInt",
  "BigInt64Array",
  "BigUint64Array",
  "Boolean",
  "DataView",
  "Date",
  "Error",
  "EvalError",
  "FinalizationRegistry",
  "Float16Array",
  "Float32Array",
  "Float64Array",
  "Function",
  "Int8Array",
  "Int16Array",
  "Int32Array",
  "Iterator",
  "JSON",
  "Map",
  "Math",
  "Number",
  "Object",
  "Promise",
  "Proxy",
  "RangeError",
  "ReferenceError",
  "Reflect",
  "RegExp",
  "Set",
  "String",
  "Symbol",
  "SyntaxError",
  "TypeError",
  "Uint8Array",
  "Uint8ClampedArray",
  "Uint16Array",
  "Uint32Array",
  "URIError",
  "WeakMap",
  "WeakRef",
  "WeakSet",
  "Intl",
  // Further ECMAScript-standard globals V8 provides.
  "AsyncDisposableStack",
  "DisposableStack",
  "SuppressedError",
]);

/**
 * Run in the context after each entry: with `microtaskMode: "afterEvaluate"` the end of every
 * `runInContext` drains the context's microtask queue, synchronously, in the current macrotask.
 */
export const DRAIN_CONTEXT: vm.Script = new vm.Script("0", { filename: CELL_HELPERS_FILE_NAME });

/**
 * The helpers' factories, compiled once per isolate and run in each context: the contexts then
 * share V8's compiled functions, so what the rehearsal (`cell_rehearsal.ts`) compiles is compiled
 * for the real cell too.
 */
let helpersScript: vm.Script | undefined;

/**
 * The combinators (`as_settled`, `stream_settled`, `content`), compiled once per isolate under an
 * empty file name: their frames read `<anonymous>:LINE:COL`, as the reference host's do.
 */
let combinatorsScript: vm.Script | undefined;

/** A cell's realm: its context, and the controller of the helpers made inside it. */
export interface CellRealm {
  context: vm.Context;
  controller: CellController;
}

/**
 * Builds a fresh context and makes the helpers inside it, around the outer realm's `bridges`.
 *
 * @param bridges the outer-realm functions the helpers call (primitives in, primitives out)
 * @returns the context and the helpers' controller
 */
export function createCellRealm(bridges: CellBridges): CellRealm {
  // DONT_CONTEXTIFY gives the context an ordinary global object: no interceptors, no sandbox
  // object of this realm behind it, and global lookups ~20x faster than a contextified object.
  // `afterEvaluate` gives it a microtask queue of its own, drained at the end of each
  // `runInContext` (see `DRAIN_CONTEXT`).
  const context = vm.createContext(vm.constants.DONT_CONTEXTIFY, { microtaskMode: "afterEvaluate" });
  helpersScript ??= new vm.Script(cellHelpersSource(), { filename: CELL_HELPERS_FILE_NAME });
  combinatorsScript ??= new vm.Script(CELL_COMBINATORS_SOURCE, { filename: "" });
  const factories = helpersScript.runInContext(context) as CellHelperFactories;
  const combinators = combinatorsScript.runInContext(context) as CellCombinators;
  const b = bridges;
  // tests/os_sandbox_test.ts patches the bundle right after this call (its last line), where
  // `context` is in scope: keep both.
  const controller = factories.createCellHelpers(
    factories,
    b.phase,
    b.emit,
    b.callTool,
    b.byteLength,
    b.load,
    b.store,
    b.timer,
    b.finish,
    combinators,
    JSON.stringify(CELL_GLOBAL_ALLOWLIST),
    CELL_FILE_NAME,
    CELL_HELPERS_FILE_NAME,
  );
  return { context, controller };
}

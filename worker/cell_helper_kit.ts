/**
 * The pieces every cell helper is made of (`cell_helpers.ts` explains how helpers are made): the
 * bridge calls, which turn any failure into a context string, the description of a thrown value,
 * the cell's end, and the look of the reference host's native functions.
 *
 * @module
 */
import type { CellBridges } from "./cell_helpers.ts";

/** What {@link createHelperKit} makes: functions of the cell's context. */
export interface HelperKit {
  /** What a helper throws when a bridge call failed. */
  INTERNAL: string;
  /** Queues `job` as a context microtask, never consulting a hook the cell can replace. */
  queueJob: (job: () => void) => void;
  /** The cell's phase (0 running, 1 stopped, 2 finished). */
  phase: () => number;
  /** Throws the stopped or finished error unless the cell runs. */
  live: () => void;
  /** Emits an output (an `EMIT_*` kind); throws once the cell no longer runs. */
  emit: (kind: number, a: string, b: string) => void;
  /** UTF-8 bytes of `text`. */
  byteLength: (text: string) => number;
  /** Reports the cell's end (a `FINISH_*` kind). */
  finish: (kind: number, errorText: string) => void;
  /** The text a thrown value ends a cell with, and a helper throws when user code it ran threw. */
  describe: (value: unknown) => string;
  /** Ends the cell, completed or failed with `value`'s description, unless it ended already. */
  settle: (failed: boolean, value: unknown) => void;
  /** Whether `text` starts with the lower-case `prefix`, in any case. */
  startsWithIgnoreCase: (text: string, prefix: string) => boolean;
  /** Whether `value` is an object or a function. */
  isObjectLike: (value: unknown) => value is Record<string, unknown>;
  /** `fn` as the reference's native functions look. */
  nativeLike: (fn: (...args: never[]) => unknown) => unknown;
  /** Defines an enumerable, writable, configurable global. */
  installGlobal: (name: string, value: unknown) => void;
  /** The controller's `watch`, `fail`, `complete` and `promiseIntact` (`CellController`). */
  watch: (evaluation: unknown) => void;
  fail: (thrown: unknown) => void;
  complete: () => void;
  promiseIntact: () => boolean;
}

/**
 * Makes the {@link HelperKit} inside a cell's context. Its source text is evaluated there, so it
 * refers to nothing outside its own body but the context's built-ins: the reason this module's
 * whole job is one function longer than most.
 */
export function createHelperKit(
  bridgePhase: CellBridges["phase"],
  bridgeEmit: CellBridges["emit"],
  bridgeByteLength: CellBridges["byteLength"],
  bridgeFinish: CellBridges["finish"],
): HelperKit {
  // Originals, captured before user code can replace them.
  const global = globalThis;
  const ReflectApply = Reflect.apply;
  const defineProperty = Object.defineProperty;
  const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const getPrototypeOf = Object.getPrototypeOf;
  const PromiseCtor = Promise;
  const promiseThen = Promise.prototype.then;
  const PromiseProto = Promise.prototype;
  const speciesKey = Symbol.species;
  const speciesGetter = getOwnPropertyDescriptor(Promise, speciesKey)?.get;
  const ObjectProto = Object.prototype;
  const stringToLowerCase = String.prototype.toLowerCase;
  const stringSlice = String.prototype.slice;
  const functionBind = Function.prototype.bind;

  const STOPPED = "code-mode cell was stopped";
  const FINISHED = "code-mode cell has finished";
  const INTERNAL = "code-mode internal error";

  // A settled promise whose `then` never consults user-replaceable species/constructor hooks:
  // its own `constructor` is undefined, so derived promises use the intrinsic %Promise%.
  const settledPromise = PromiseCtor.resolve();
  defineProperty(settledPromise, "constructor", { __proto__: null, value: undefined } as never);

  function queueJob(job: () => void): void {
    ReflectApply(promiseThen, settledPromise, [job]);
  }

  // Bridge calls: a failure (even a stack overflow on entry) becomes a context string.
  function phase(): number {
    try {
      return bridgePhase();
    } catch {
      throw INTERNAL;
    }
  }
  function live(): void {
    const p = phase();
    if (p === 1) throw STOPPED;
    if (p !== 0) throw FINISHED;
  }
  function emit(kind: number, a: string, b: string): void {
    let posted: number;
    try {
      posted = bridgeEmit(kind, a, b);
    } catch {
      throw INTERNAL;
    }
    if (posted !== 0) live();
  }
  function byteLength(text: string): number {
    try {
      return bridgeByteLength(text);
    } catch {
      throw INTERNAL;
    }
  }
  function finish(kind: number, errorText: string): void {
    try {
      bridgeFinish(kind, errorText);
    } catch {
      // Nothing sensible is left to do in the context.
    }
  }

  // The text a thrown value ends a cell with, and what a helper throws when user code it ran threw:
  // a string as-is, else a string `stack`, else ToString(value) (so a symbol, or an object whose
  // conversion throws, describes as "").
  function describe(value: unknown): string {
    if (typeof value === "string") return value;
    if (value !== null && (typeof value === "object" || typeof value === "function")) {
      let stack: unknown;
      try {
        stack = (value as { stack?: unknown }).stack;
      } catch {
        stack = undefined;
      }
      if (typeof stack === "string") return stack;
    }
    try {
      return `${value as string}`;
    } catch {
      return "";
    }
  }

  function settle(failed: boolean, value: unknown): void {
    if (phase() !== 0) return;
    if (!failed) finish(0, "");
    else finish(1, describe(value));
  }

  function startsWithIgnoreCase(text: string, prefix: string): boolean {
    return ReflectApply(
      stringToLowerCase,
      ReflectApply(stringSlice, text, [0, prefix.length]),
      [],
    ) === prefix;
  }

  function isObjectLike(value: unknown): value is Record<string, unknown> {
    return value !== null && (typeof value === "object" || typeof value === "function");
  }

  function installGlobal(name: string, value: unknown): void {
    defineProperty(global, name, {
      __proto__: null,
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    } as never);
  }

  // A helper as the reference's native functions look: `function () { [native code] }`, name "",
  // length 0, and a prototype object (they are constructors: `new text(x)` works too).
  function nativeLike(fn: (...args: never[]) => unknown): unknown {
    const bound = ReflectApply(functionBind, fn, [undefined]) as object;
    defineProperty(bound, "length", { __proto__: null, value: 0 } as never);
    defineProperty(bound, "name", { __proto__: null, value: "" } as never);
    const prototype = {};
    defineProperty(prototype, "constructor", {
      __proto__: null,
      value: bound,
      writable: true,
      enumerable: false,
      configurable: true,
    } as never);
    defineProperty(bound, "prototype", {
      __proto__: null,
      value: prototype,
      writable: true,
      enumerable: false,
      configurable: false,
    } as never);
    return bound;
  }

  // The module's evaluation promise belongs to the outer realm; `then` of this realm's Promise
  // works on it, and its reactions are jobs of this context's queue.
  function watch(evaluation: unknown): void {
    try {
      ReflectApply(promiseThen, evaluation, [
        () => settle(false, undefined),
        // After exit() the cell is over already, and its sentinel is ignored (settle checks).
        (reason: unknown) => settle(true, reason),
      ]);
    } catch (e) {
      settle(true, e);
    }
  }

  function fail(thrown: unknown): void {
    settle(true, thrown);
  }

  function complete(): void {
    settle(false, undefined);
  }

  function promiseIntact(): boolean {
    try {
      const then = getOwnPropertyDescriptor(PromiseProto, "then");
      const ctor = getOwnPropertyDescriptor(PromiseProto, "constructor");
      const species = getOwnPropertyDescriptor(PromiseCtor, speciesKey);
      return then?.value === promiseThen && ctor?.value === PromiseCtor && species?.get === speciesGetter &&
        getPrototypeOf(PromiseProto) === ObjectProto;
    } catch {
      return false;
    }
  }

  return {
    INTERNAL,
    queueJob,
    phase,
    live,
    emit,
    byteLength,
    finish,
    describe,
    settle,
    startsWithIgnoreCase,
    isObjectLike,
    nativeLike,
    installGlobal,
    watch,
    fail,
    complete,
    promiseIntact,
  };
}

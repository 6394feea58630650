/**
 * The code that runs inside one cell isolate: a `node:worker_threads` Worker created by the session
 * runtime (SPEC §5, message contract in `./cell_protocol.ts`).
 *
 * - On load it installs a private `unhandledRejection` handler, posts `{t: "ready"}` on
 *   `parentPort` and waits for its {@link CellStart}.
 * - On `start` it builds a fresh `node:vm` context holding only the ECMAScript built-ins, creates the
 *   helpers of SPEC §5.3 *inside* that context, posts `started` and evaluates the cell's source once.
 * - Helpers reach this (outer) realm only through private bridge functions that take and return
 *   primitives and never throw into the context; every call into a bridge is wrapped so that not
 *   even a stack overflow can hand an outer-realm error to user code.
 * - The cell ends with exactly one `result` (SPEC §5.6), or with `stopped` after a `stop` control
 *   message; afterwards nothing is dispatched into the context and every helper call throws.
 * - Heap limit (SPEC §5.1 item 5): on Deno 2.9.6 a Worker that reaches
 *   `resourceLimits.maxOldGenerationSizeMb` only ends (with `ERR_WORKER_OUT_OF_MEMORY`) when the
 *   allocation happens inside a macrotask; inside a microtask of the Worker's main queue (any
 *   promise continuation, or a `message` handler) it parks forever. So the context has its own
 *   microtask queue (`microtaskMode: "afterEvaluate"`), and every entry into it (evaluating the
 *   cell, firing a timer, delivering a tool result) happens inside a macrotask (`setImmediate`, or
 *   the host timer's own callback) and is followed, in that same macrotask, by a drain of the
 *   context's queue, so user code and all of its continuations run there.
 * - Because of that, the outer realm's frames (the drain, the timer machinery) sit below user
 *   frames on the stack. A private `Error.prepareStackTrace` in the context leaves them out of
 *   `stack`, so stack traces still hold only the context's own frames.
 *
 * - Output is credit-based (SPEC §8.10, `cell_protocol.ts` item 4): a helper call posts its item,
 *   then waits in `Atomics.wait` while the cell is over its credit. The runtime wakes it when the
 *   host returns credit, or after setting the stop word, which makes this and every later helper
 *   call throw without posting anything.
 * - Items too large for one frame are posted in their reduced forms (first and last bytes plus the
 *   true length; an image URL as its size only), so a 65 MiB string never crosses a thread.
 *
 * This file is bundled with `deno bundle` and runs with `--no-npm --no-remote`, so it imports only
 * `node:` built-ins and its sibling protocol modules.
 *
 * @module
 */

import process from "node:process";
import {
  clearTimeout as clearHostTimer,
  setImmediate as setHostImmediate,
  setTimeout as setHostTimer,
} from "node:timers";
import v8 from "node:v8";
import vm from "node:vm";
import {
  MessageChannel,
  type MessagePort as NodePort,
  parentPort,
  receiveMessageOnPort,
} from "node:worker_threads";
import { CELL_FILE_NAME } from "../proto/cell_source.ts";
import { CELL_COMBINATORS_SOURCE } from "./cell_combinators.ts";
import { collectGarbage } from "./collect_garbage.ts";
import {
  jsonEscapeExtraBytes,
  MAX_INT32,
  MIB,
  utf8ByteLength,
  utf8Prefix,
  utf8Suffix,
} from "../proto/bytes.ts";
import {
  CELL_DOORBELL,
  CELL_PROGRESS,
  CELL_RESULT,
  CELL_WORDS,
  type CellControl,
  type CellCredit,
  type CellOutput,
  type CellRecycled,
  type CellStart,
  type CellTool,
  type CellTrimmedText,
  type CountedOutput,
  CREDIT_ACKED,
  CREDIT_BYTES,
  CREDIT_EVENTS,
  CREDIT_GENERATION,
  CREDIT_STOP,
  PARK_MS,
  RETIRE_HEAP_BYTES,
  RETIRE_HEAP_SHARE,
  type WrittenOutput,
} from "./cell_protocol.ts";
import { FrameError } from "../proto/frame_codec.ts";
import { DEFAULT_MAX_FRAME_BYTES, encodeCellFrames, FrameScratch, writeLocked } from "./cell_events.ts";
import {
  type CellBridges,
  type CellCombinators,
  type CellController,
  createCellHelpers,
  EMIT_AUDIO,
  EMIT_CONSUMED,
  EMIT_IMAGE,
  EMIT_NOTIFY,
  EMIT_TEXT,
  EMIT_YIELD,
  FINISH_EXIT,
  FINISH_FAILED,
  PHASE_FINISHED,
  PHASE_RUNNING,
  PHASE_STOPPED,
  STORE_OK,
  STORE_OVER_LIMIT,
  TIMER_CLEAR,
  TIMER_SET,
} from "./cell_helpers.ts";

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

/** The largest delay a host timer accepts; longer delays are armed in steps. */
const MAX_HOST_TIMER_MS = MAX_INT32;

/**
 * Run in the context after each entry: with `microtaskMode: "afterEvaluate"` the end of every
 * `runInContext` drains the context's microtask queue, synchronously, in the current macrotask.
 */
const DRAIN_CONTEXT = new vm.Script("0", { filename: CELL_HELPERS_FILE_NAME });

/**
 * The helpers' factory, compiled once per isolate and run in each context: the contexts then share
 * V8's compiled functions, so what {@link rehearse} compiles is compiled for the real cell too.
 */
let helpersScript: vm.Script | undefined;

/**
 * The combinators (`as_settled`, `stream_settled`, `content`), compiled once per isolate under an
 * empty file name: their frames read `<anonymous>:LINE:COL`, as the reference host's do.
 */
let combinatorsScript: vm.Script | undefined;

/**
 * Deno 2.9.6's `vm.SourceTextModule`, with the synchronous linking API of recent Node
 * (`moduleRequests`, `linkRequests`, `instantiate`) that the bundled Node types lack.
 */
interface CellModule {
  readonly moduleRequests: readonly { readonly specifier: string }[];
  readonly status: string;
  readonly error: unknown;
  linkRequests(modules: readonly unknown[]): void;
  instantiate(): void;
  evaluate(): Promise<void>;
}
const SourceTextModule = vm.SourceTextModule as unknown as new (
  source: string,
  options: { context: vm.Context; identifier: string; importModuleDynamically?: () => Promise<never> },
) => CellModule;

/** An `import()` was refused since the last drain (see `CellRun.#enter`); one cell runs at a time. */
let importRefused = false;

/** What a dynamic `import()` in a cell rejects with (a string, as in the reference host). */
export const DYNAMIC_IMPORT_ERROR = "unsupported import in exec";

/**
 * The `importModuleDynamically` of every cell module of this isolate. Deno settles the context's
 * `import()` promise from the Worker's main microtask queue, after the entry that called `import()`
 * has drained the context: `#enter` then schedules one more entry to run the continuation. One
 * function for the isolate, closing over nothing of a cell. Deno 2.9.6 registers, for each module,
 * a callback that closes over the `SourceTextModule` object and keeps it for the life of the
 * isolate, and that object holds the module (and through it the cell's whole realm): a finished
 * cell's module object is emptied (see `CellRun.dispose`), so a reused Worker keeps only the small
 * husk (~200 KiB of heap per cell otherwise).
 */
function refuseImport(): Promise<never> {
  importRefused = true;
  return Promise.reject(DYNAMIC_IMPORT_ERROR);
}

/** The outer-realm state of the one cell this isolate runs. */
class CellRun {
  #start!: CellStart;
  #output: MessagePort | undefined;
  /** Payload bytes of the counted outputs not yet acknowledged, oldest first from `#unackedHead`. */
  #unacked: number[] = [];
  #unackedHead = 0;
  #unackedBytes = 0;
  /** `CREDIT_ACKED` as last settled. */
  #ackedSeen = 0;
  /** The largest frame this cell writes (the host's `maxWorkerFrameBytes`). */
  #maxFrameBytes = DEFAULT_MAX_FRAME_BYTES;
  /** Writes frames to the runtime's stream; unset for a cell that posts its outputs whole. */
  #write: FrameWriter | undefined;
  #phase = PHASE_RUNNING;
  #hostTimers = new Map<number, ReturnType<typeof setHostTimer>>();
  #nextToolId = 0;
  #view = new Map<string, string>();
  /** UTF-8 bytes of the view; computed on the first `store` (`-1` until then). */
  #viewBytes = -1;
  #writes = new Map<string, string>();
  #context: vm.Context | undefined;
  #controller: CellController | undefined;
  /** The cell's module, until it is disposed. */
  #module: CellModule | undefined;
  /** A completion or failure reported during a drain: taken when the drain is over. */
  #pendingFinish: [failed: number, errorText: string] | undefined;
  #credit: CellCredit | undefined;
  #startedPending = false;
  /** A posted output's credit wait was cut short by a stack overflow: the next output waits first. */
  #owesWait = false;
  /** The result, until it has been sent (`#finish` may run short of stack; `#enter` retries). */
  #unsentResult: CellOutput | undefined;
  /** The result's frames are written but the runtime has not been told yet. */
  #noticeOwed = false;
  /** Called in the macrotask after the one that finished the cell (reuse, `cell_protocol.ts` 3a). */
  #onFinished: (() => void) | undefined;

  /** The cell's ID, once it began. */
  get cellId(): string | undefined {
    return this.#start?.cellId;
  }

  /**
   * Whether the cell *completed* and its Worker may run another cell (SPEC §5.1): its result is
   * sent, it was never stopped (no stop word, no `stop`), and its timers are cleared.
   */
  get reusable(): boolean {
    return this.#phase === PHASE_FINISHED && this.#unsentResult === undefined && !this.#noticeOwed &&
      this.#hostTimers.size === 0 &&
      (this.#credit === undefined || Atomics.load(this.#credit.words, CREDIT_STOP) === 0);
  }

  /**
   * Builds the context and the helpers ahead of the cell, while this Worker waits as the session's
   * spare: only `tools`, `ALL_TOOLS` and the limits depend on the cell (see `begin`).
   */
  prepare(): void {
    // DONT_CONTEXTIFY gives the context an ordinary global object: no interceptors, no sandbox
    // object of this realm behind it, and global lookups ~20x faster than a contextified object.
    // `afterEvaluate` gives it a microtask queue of its own, drained at the end of each
    // `runInContext` (see `#enter`).
    const context = vm.createContext(vm.constants.DONT_CONTEXTIFY, { microtaskMode: "afterEvaluate" });
    this.#context = context;
    helpersScript ??= new vm.Script(`"use strict";(${createCellHelpers.toString()})`, {
      filename: CELL_HELPERS_FILE_NAME,
    });
    combinatorsScript ??= new vm.Script(CELL_COMBINATORS_SOURCE, { filename: "" });
    const factory = helpersScript.runInContext(context) as typeof createCellHelpers;
    const combinators = combinatorsScript.runInContext(context) as CellCombinators;
    const b = this.#bridges();
    this.#controller = factory(
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
  }

  /**
   * Runs, once, the platform code every cell needs, so that its lazy set-up (Deno's `node:timers`,
   * compiling, linking and evaluating a module in the context, ~0.7 ms in all) is not paid by the
   * first cell. It evaluates an empty module in the context and arms and clears one host timer:
   * nothing a cell can observe.
   */
  warmUp(): void {
    const context = this.#context;
    if (context === undefined) return;
    clearHostTimer(setHostTimer(() => {}, 1_000));
    const module = new SourceTextModule("", { context, identifier: CELL_FILE_NAME });
    module.linkRequests([]);
    module.instantiate();
    void module.evaluate();
  }

  /**
   * Lets go of what Deno keeps of the cell's module after the cell: the object its dynamic-import
   * callback closes over is emptied, so it no longer holds the module and, through it, the realm.
   */
  dispose(): void {
    const module = this.#module;
    this.#module = undefined;
    if (module === undefined) return;
    for (const key of Reflect.ownKeys(module)) Reflect.deleteProperty(module, key);
  }

  /**
   * Starts the prepared cell: installs its tools and limits, posts `started`, and compiles and
   * evaluates the source once, inside a macrotask (module doc: heap limit): the current one when
   * `inMacrotask` (the park of a warmed spare), else a new one.
   *
   * @param start the runtime's `start` message
   * @param warm the output port and words handed over by `warm`, if any
   * @param inMacrotask the caller runs in a macrotask and nothing follows the call in it
   * @param write writes the cell's frames to the runtime's stream (`cell_protocol.ts` item 3);
   *   without it every output is posted whole
   */
  begin(
    start: CellStart,
    warm: Warmed | undefined,
    inMacrotask: boolean,
    write: FrameWriter | undefined = warm?.write,
    onFinished?: () => void,
  ): void {
    this.#start = start;
    this.#onFinished = onFinished;
    this.#maxFrameBytes = start.maxFrameBytes || DEFAULT_MAX_FRAME_BYTES;
    this.#output = start.output ?? warm?.port;
    this.#write = write;
    // A start without credit (a hand-driven isolate) gets unlimited credit and no reduced forms.
    const words = start.credit?.words ?? warm?.words;
    this.#credit = start.credit && words ? { ...start.credit, words } : {
      words: new Int32Array(new SharedArrayBuffer(4 * CELL_WORDS)),
      maxEvents: Infinity,
      maxBytes: Infinity,
      trimTextOver: Infinity,
      keepTextBytes: 0,
      dropMediaOver: Infinity,
    };
    this.#view = new Map(start.store);
    const tools = start.tools.map((tool: CellTool) => ({
      name: String(tool.name),
      description: String(tool.description),
    }));
    this.#controller!.configure(JSON.stringify(tools), start.maxMessageBytes, start.maxStoredValueBytes);
    // `started` leaves with the cell's first output (one message, one frame write): see #post.
    this.#startedPending = true;
    const run = () => {
      this.#evaluate();
      // A cell still running without output yet: report its start now.
      if (this.#startedPending) {
        this.#startedPending = false;
        this.#post({ t: "started" });
      }
    };
    if (inMacrotask) run();
    else setHostImmediate(run);
  }

  /**
   * Compiles the source as the ES module `exec_main.mjs` and evaluates it once; runs inside a
   * macrotask. The module's synchronous part, and every microtask it queues, run inside
   * `evaluate()` (the context drains its queue at the end of each evaluation); the module's
   * promise, settled or not, is then watched from the context.
   */
  #evaluate(): void {
    const context = this.#context;
    if (context === undefined || this.#phase !== PHASE_RUNNING) return;
    let module: CellModule;
    try {
      module = new SourceTextModule(this.#start.source, {
        context,
        identifier: CELL_FILE_NAME,
        importModuleDynamically: refuseImport,
      });
    } catch (e) {
      this.#finish(1, describeCompileError(e));
      return;
    }
    this.#module = module;
    const requests = module.moduleRequests;
    if (requests.length > 0) {
      // The host refuses these before the cell starts; this is the runtime's own guard.
      this.#finish(1, `Unsupported import in exec: ${requests[0].specifier}`);
      return;
    }
    let evaluation: unknown;
    try {
      module.linkRequests([]);
      module.instantiate();
      evaluation = module.evaluate();
    } catch (e) {
      this.#enter((c) => c.fail(e));
      return;
    }
    // Deno settles the evaluation promise through the context's `then` (inside `evaluate()`,
    // after the module's synchronous part): a cell that replaced it, or the promise species, has
    // a promise that may never settle. Its module's own status then decides: errored, or
    // completed once its microtasks are done (a pending top-level await of such a cell is not
    // waited for).
    if (module.status === "errored") {
      const error = module.error;
      this.#enter((c) => c.fail(error));
    } else if (!this.#controller!.promiseIntact()) {
      this.#enter((c) => c.complete());
    } else {
      this.#enter((c) => c.watch(evaluation));
    }
  }

  /** Handles a control message other than `start`. */
  control(message: CellControl): void {
    if (message.t === "ping") {
      this.#post({ t: "pong" });
      return;
    }
    // A message for the cell this (reused) Worker ran before: that cell is gone.
    const target = (message as { cell?: string }).cell;
    if (target !== undefined && target !== this.#start?.cellId) return;
    if (message.t === "stop") {
      if (this.#phase === PHASE_RUNNING) this.#phase = PHASE_STOPPED;
      this.#clearHostTimers();
      this.#post({ t: "stopped" });
    } else if (message.t === "toolResult") {
      if (this.#phase !== PHASE_RUNNING) return;
      const isError = "error" in message && typeof message.error === "string";
      const payload = isError
        ? (message as { error: string }).error
        : String((message as { json: string }).json);
      const id = String(message.id);
      // A `message` handler is not a macrotask (see the module doc): deliver from one.
      setHostImmediate(() => this.#enter((c) => c.deliver(id, isError, payload)));
    }
  }

  #bridges(): CellBridges {
    return {
      phase: () => this.#livePhase(),
      emit: (kind, a, b) => {
        if (this.#livePhase() !== PHASE_RUNNING) return 1;
        const first = typeof a === "string" ? a : "";
        switch (kind) {
          case EMIT_TEXT:
            this.#postText(first);
            break;
          case EMIT_IMAGE: {
            const detail = typeof b === "string" ? b as "high" : "high";
            const n = utf8ByteLength(first);
            this.#postCounted(
              n > this.#credit!.dropMediaOver
                ? { t: "droppedImage", bytes: n, detail, jsonExtra: this.#jsonExtra(first), n: 0 }
                : { t: "image", image: { url: first, detail }, n },
            );
            break;
          }
          case EMIT_AUDIO: {
            const n = utf8ByteLength(first);
            this.#postCounted(
              n > this.#credit!.dropMediaOver
                ? { t: "droppedAudio", bytes: n, jsonExtra: this.#jsonExtra(first), n: 0 }
                : { t: "audio", url: first, n },
            );
            break;
          }
          case EMIT_YIELD:
            this.#postCounted({ t: "yield", n: 0 });
            break;
          case EMIT_NOTIFY:
            this.#postCounted({ t: "notify", text: first, n: utf8ByteLength(first) });
            break;
          case EMIT_CONSUMED:
            // Posted by the delivery of a tool result, not by a helper call: it never waits.
            this.#postCounted({ t: "toolResultConsumed", id: first, n: 0 });
            return 0;
        }
        // The output is out: a stack overflow from here must not fail the helper call (its retry
        // would duplicate the output), so the wait is owed to the next output instead. No call
        // of ours before the `try`.
        try {
          return this.#awaitCredit() ? 0 : 1;
        } catch {
          this.#owesWait = true;
          return 0;
        }
      },
      callTool: (name, input) => {
        if (this.#livePhase() !== PHASE_RUNNING) return "";
        const id = `tool-${++this.#nextToolId}`;
        this.#postCounted(
          typeof input === "string"
            ? { t: "toolCall", id, name: String(name), input, n: utf8ByteLength(input) }
            : { t: "toolCall", id, name: String(name), n: 0 },
        );
        try {
          return this.#awaitCredit() ? id : "";
        } catch {
          this.#owesWait = true; // as in `emit`
          return id;
        }
      },
      byteLength: (text) => typeof text === "string" ? utf8ByteLength(text) : 0,
      load: (key) => typeof key === "string" ? this.#view.get(key) : undefined,
      store: (key, json) => {
        if (this.#phase !== PHASE_RUNNING) return 2;
        if (typeof key !== "string" || typeof json !== "string") return 2;
        if (this.#viewBytes < 0) {
          let total = 0;
          for (const [k, v] of this.#view) total += utf8ByteLength(k) + utf8ByteLength(v);
          this.#viewBytes = total;
        }
        const keyBytes = utf8ByteLength(key);
        const previous = this.#view.get(key);
        const next = this.#viewBytes + keyBytes + utf8ByteLength(json) -
          (previous === undefined ? 0 : keyBytes + utf8ByteLength(previous));
        if (next > this.#start.maxStoredValueBytes) return STORE_OVER_LIMIT;
        this.#viewBytes = next;
        this.#view.set(key, json);
        this.#writes.set(key, json);
        return STORE_OK;
      },
      timer: (op, id, delayMs) => {
        if (this.#phase !== PHASE_RUNNING || typeof id !== "number") return;
        if (op === TIMER_SET) {
          this.#armTimer(id, typeof delayMs === "number" ? delayMs : 0);
        } else if (op === TIMER_CLEAR) {
          const handle = this.#hostTimers.get(id);
          if (handle !== undefined) clearHostTimer(handle);
          this.#hostTimers.delete(id);
        }
      },
      finish: (kind, errorText) => {
        if (kind === FINISH_EXIT) {
          this.#finish(0, "");
        } else if (this.#pendingFinish === undefined && this.#phase === PHASE_RUNNING) {
          this.#pendingFinish = [
            kind === FINISH_FAILED ? 1 : 0,
            typeof errorText === "string" ? errorText : "",
          ];
        }
      },
    };
  }

  #armTimer(id: number, remainingMs: number): void {
    const step = Math.min(remainingMs, MAX_HOST_TIMER_MS);
    const handle = setHostTimer(() => {
      if (this.#phase !== PHASE_RUNNING) return;
      if (remainingMs > step) {
        this.#armTimer(id, remainingMs - step);
        return;
      }
      this.#hostTimers.delete(id);
      // A host timer callback is a macrotask: enter the context right here.
      this.#enter((c) => c.fireTimer(id));
    }, step);
    this.#hostTimers.set(id, handle);
  }

  #clearHostTimers(): void {
    for (const handle of this.#hostTimers.values()) clearHostTimer(handle);
    this.#hostTimers.clear();
  }

  /**
   * The one way into the context once the cell runs: `call` the controller, then drain the
   * context's microtask queue, where user code and all its continuations run. MUST be called
   * inside a macrotask (a host timer or immediate callback), never from a microtask or a `message`
   * handler (see the module doc). The drain runs to the end even if the cell finishes on the way:
   * microtasks queued before completion still run (SPEC §5.6), and helpers throw from then on.
   */
  #enter(call: (controller: CellController) => void): void {
    const controller = this.#controller;
    const context = this.#context;
    if (controller === undefined || context === undefined || this.#phase !== PHASE_RUNNING) return;
    try {
      call(controller);
      DRAIN_CONTEXT.runInContext(context);
    } catch {
      // Only a fault of the bootstrap itself lands here (the controller catches user errors).
      this.#finish(1, "code-mode internal error");
    }
    // The cell's end, reported during the drain, counts once the queue is empty (a chain of
    // microtasks queued before it still ran and wrote its output, as in the reference), and once
    // a refused `import()` has settled in the context (see below).
    const pending = this.#pendingFinish;
    if (pending !== undefined && !importRefused) {
      this.#pendingFinish = undefined;
      this.#finish(pending[0], pending[1]);
    }
    // A result whose post ran out of stack (the cell's settle ran deep): sent from here.
    if (this.#unsentResult !== undefined || this.#noticeOwed) {
      try {
        this.#sendResult();
      } catch {
        // The runtime's watchdog finds a cell that neither writes nor runs.
      }
    }
    if (importRefused) {
      // The main queue settles the `import()` promise once this macrotask is over; drain the
      // continuation it queued in the context from the next one.
      importRefused = false;
      setHostImmediate(() => this.#enter(() => {}));
    }
  }

  #finish(failed: number, errorText: string): void {
    if (this.#phase !== PHASE_RUNNING) return;
    const writes = [...this.#writes];
    let result: CellOutput = { t: "result", writes };
    if (failed === 1) {
      const trimmed = this.#trim(errorText);
      result = trimmed === undefined
        ? { t: "result", writes, error: errorText }
        : { t: "result", writes, trimmedError: trimmed };
    }
    // From here the cell is over even if the post below runs out of stack: `#enter` then sends
    // the result from its own (shallow) frame.
    this.#phase = PHASE_FINISHED;
    this.#unsentResult = result;
    this.#clearHostTimers();
    this.#sendResult();
    // After this macrotask, whose drain still runs the microtasks queued so far (SPEC §5.6): a
    // microtask that never ends keeps this from running, and the runtime then ends the Worker.
    const onFinished = this.#onFinished;
    this.#onFinished = undefined;
    try {
      if (onFinished !== undefined) setHostImmediate(onFinished);
    } catch {
      // Out of stack: the Worker is simply not reused (the runtime ends it).
    }
  }

  #sendResult(): void {
    const result = this.#unsentResult;
    if (result !== undefined) {
      this.#post(result);
      this.#unsentResult = undefined;
    }
    if (this.#noticeOwed) this.#sendNotice();
  }

  /** The phase as helpers see it: a stop word set by the runtime stops the cell at once. */
  #livePhase(): number {
    if (
      this.#phase === PHASE_RUNNING && this.#credit && Atomics.load(this.#credit.words, CREDIT_STOP) !== 0
    ) {
      this.#phase = PHASE_STOPPED;
      this.#clearHostTimers();
    }
    return this.#phase;
  }

  /** The reduced form of a text over the trimming threshold, else undefined. */
  #trim(text: string): CellTrimmedText | undefined {
    const credit = this.#credit!;
    // UTF-16 length × 3 bounds the UTF-8 length: skip counting short texts.
    if (text.length * 3 <= credit.trimTextOver) return undefined;
    const total = utf8ByteLength(text);
    if (total <= credit.trimTextOver) return undefined;
    const head = text.slice(0, utf8Prefix(text, credit.keepTextBytes).units);
    const tail = text.slice(text.length - utf8Suffix(text, credit.keepTextBytes).units);
    return { head, tail, total, jsonExtra: this.#jsonExtra(text) };
  }

  /** What JSON escaping adds to a text sent in reduced form, when the session's door writes JSON. */
  #jsonExtra(text: string): number {
    return this.#credit!.jsonSizes ? jsonEscapeExtraBytes(text) : 0;
  }

  #postText(text: string): void {
    const trimmed = this.#trim(text);
    if (trimmed === undefined) return this.#postCounted({ t: "text", text, n: utf8ByteLength(text) });
    this.#postCounted({
      t: "trimmedText",
      text: trimmed,
      n: utf8ByteLength(trimmed.head) + utf8ByteLength(trimmed.tail),
    });
  }

  /**
   * Counts and posts an output. A helper call may run with almost no stack left (a cell at stack
   * exhaustion), where any call, even of a built-in, can throw a stack overflow: the output is
   * counted first and the count undone if the post throws (with the same built-ins at the same
   * depth, which cannot overflow there: they just ran), so it is either sent and counted or
   * neither, and the helper call throws only in the second case.
   */
  #postCounted(message: CountedOutput): void {
    const words = this.#credit!.words;
    if (this.#credit!.maxEvents === Infinity) {
      // Unlimited credit (a hand-driven isolate): nothing to settle.
      Atomics.add(words, CREDIT_EVENTS, 1);
      try {
        this.#post(message);
      } catch (e) {
        Atomics.add(words, CREDIT_EVENTS, -1);
        throw e;
      }
      return;
    }
    // A call that posted but could not wait for credit (see the `emit` bridge) waits first.
    if (this.#owesWait) {
      // Stopped while waiting: nothing is posted, and the helper call sees the stop.
      if (!this.#awaitCredit()) return;
      this.#owesWait = false;
    }
    this.#settleCredit();
    const unacked = this.#unacked;
    const length = unacked.length;
    unacked[length] = message.n;
    this.#unackedBytes += message.n;
    Atomics.store(words, CREDIT_BYTES, this.#unackedBytes);
    Atomics.add(words, CREDIT_EVENTS, 1);
    try {
      this.#post(message);
    } catch (e) {
      unacked.length = length;
      this.#unackedBytes -= message.n;
      Atomics.store(words, CREDIT_BYTES, this.#unackedBytes);
      Atomics.add(words, CREDIT_EVENTS, -1);
      throw e;
    }
  }

  /** Settles the outputs the host has acknowledged since the last look (`CREDIT_ACKED`). */
  #settleCredit(): void {
    const words = this.#credit!.words;
    const acked = Atomics.load(words, CREDIT_ACKED);
    const unacked = this.#unacked;
    let head = this.#unackedHead;
    while (this.#ackedSeen !== acked && head < unacked.length) {
      this.#unackedBytes -= unacked[head++];
      this.#ackedSeen = (this.#ackedSeen + 1) | 0;
    }
    // More acknowledged than posted never happens; if it did, the surplus is ignored.
    if (head === unacked.length) this.#ackedSeen = acked;
    if (head > 1024 && head * 2 > unacked.length) {
      this.#unacked = unacked.slice(head);
      head = 0;
    }
    this.#unackedHead = head;
    Atomics.store(words, CREDIT_BYTES, this.#unackedBytes);
  }

  /**
   * Waits while the cell is over its output credit (the item is already posted).
   *
   * @returns false when the stop word was set: the helper call throws
   */
  #awaitCredit(): boolean {
    const credit = this.#credit!;
    const words = credit.words;
    for (;;) {
      const generation = Atomics.load(words, CREDIT_GENERATION);
      if (this.#livePhase() !== PHASE_RUNNING) return false;
      this.#settleCredit();
      if (
        this.#unacked.length - this.#unackedHead <= credit.maxEvents &&
        this.#unackedBytes <= credit.maxBytes
      ) return true;
      Atomics.wait(words, CREDIT_GENERATION, generation);
    }
  }

  /**
   * Sends `message` (after `started`, when that is still pending): as frames written to the
   * runtime's stream when the cell has a writer, else posted whole (`cell_protocol.ts` item 3).
   */
  #post(message: CellOutput): void {
    const outputs: CellOutput[] = this.#startedPending ? [{ t: "started" }, message] : [message];
    // A helper call may run with almost no stack left: every step below may throw a stack
    // overflow, which reaches the helper (it throws, nothing was sent) until the frames are out;
    // `started` stays pending until then.
    try {
      if (this.#write !== undefined && message.t !== "stopped" && message.t !== "pong") {
        let frames: Uint8Array | undefined;
        try {
          frames = encodeCellFrames(this.#start.cellId, outputs, this.#maxFrameBytes, FRAMES);
        } catch (e) {
          // Over the frame limit (reduced forms keep items under it): posted whole, the runtime's
          // own encoding then fails the same way.
          if (!(e instanceof FrameError)) throw e;
        }
        if (frames !== undefined) {
          // Before the write: nothing that can throw may follow it (see `#postCounted`).
          Atomics.add(this.#credit!.words, CELL_PROGRESS, 1);
          const result = message.t === "result";
          if (result) Atomics.store(this.#credit!.words, CELL_RESULT, 1);
          this.#noticeOwed = result;
          this.#write(frames);
          this.#startedPending = false;
          if (result) {
            this.#unsentResult = undefined;
            // The runtime ends the Worker once it reads this: the frames went first. If this
            // runs out of stack, `#enter` sends it.
            this.#sendNotice();
          }
          return;
        }
      }
      this.#output?.postMessage(outputs.length === 1 ? outputs[0] : outputs);
      this.#startedPending = false;
    } catch (e) {
      // A closed port or stream means the runtime has gone; nothing to report to.
      if (e instanceof RangeError) throw e;
    }
  }

  /** Tells the runtime the result is written (retried by `#enter` if this ran out of stack). */
  #sendNotice(): void {
    this.#output?.postMessage(WRITTEN_RESULT);
    this.#noticeOwed = false;
  }
}

/** This isolate's frame buffer: frames are written synchronously, before the next encoding. */
const FRAMES = new FrameScratch();

/** Writes complete frames of a cell to the runtime's stream. */
type FrameWriter = (frames: Uint8Array) => void;

/** What the runtime is told of a result the cell wrote itself. */
const WRITTEN_RESULT: WrittenOutput = { t: "result", w: true };

/** `SyntaxError: <V8 message>` for a compile failure (SPEC §5.6). */
function describeCompileError(error: unknown): string {
  if (error !== null && typeof error === "object") {
    const { name, message } = error as { name?: unknown; message?: unknown };
    if (typeof name === "string" && typeof message === "string") return `${name}: ${message}`;
  }
  return String(error);
}

/**
 * The throwaway cell of {@link rehearse}: the helpers and paths most cells take (text output, a
 * stored value, a notification, an awaited promise, a caught error, the result).
 */
const REHEARSAL_SOURCE = [
  'text("x");',
  "text({ a: [1] });",
  'store("k", { a: 1 });',
  'load("k");',
  'notify("n");',
  "await 0;",
  'try { JSON.parse("{"); } catch (e) { text(String(e)); }',
].join("\n");

/** What the rehearsal writes: nothing. */
const NO_BYTES = new Uint8Array(0);

/**
 * Runs one throwaway cell in a throwaway context of this isolate, its output posted into a
 * channel that is closed right after. Every cell runs in a fresh isolate, and V8 compiles each
 * function on its first call, so without this the first `text()`, `postMessage` and result of
 * the real cell compile the helpers, the bootstrap's output path and Deno's `MessagePort` code:
 * ~0.9 ms of a warm Execute, measured with per-hop timestamps. Both contexts run the one compiled
 * helpers script (`helpersScript`), so the real context gets the functions compiled here.
 * Nothing of the rehearsal is reachable from the real context: its own `CellRun`, context and
 * shared words, and no timers (its source sets none).
 */
function rehearse(): void {
  const channel = new MessageChannel();
  try {
    const run = new CellRun();
    run.prepare();
    run.begin(
      {
        t: "start",
        cellId: "rehearsal",
        source: REHEARSAL_SOURCE,
        tools: [],
        store: [["s", "1"]],
        maxStoredValueBytes: MIB,
        maxMessageBytes: MIB,
        output: channel.port2 as unknown as MessagePort,
        credit: {
          words: new Int32Array(new SharedArrayBuffer(4 * CELL_WORDS)),
          maxEvents: 1_000,
          maxBytes: MIB,
          trimTextOver: 65_536,
          keepTextBytes: 1_024,
          dropMediaOver: 65_536,
        },
      },
      undefined,
      true,
      // The frame encoding and the stdout op, compiled here too; nothing is written.
      () => Deno.stdout.writeSync(NO_BYTES),
    );
  } catch {
    // A rehearsal only saves time; a failure of it changes nothing for the real cell.
  } finally {
    channel.port1.close();
    channel.port2.close();
  }
}

/** How long a warmed spare waits for a cell before it collects its garbage (see `park`). */
const COLLECT_AFTER_MS = 25;
/**
 * How long a reused Worker waits for the next cell before it collects the old realms' garbage: longer
 * than a harness's pause between back-to-back cells, so that a full collection (~12 ms, far more on
 * a loaded machine) does not meet the next cell (it showed as 100–200 ms p95 back to back).
 */
const RECYCLED_COLLECT_AFTER_MS = 250;
/**
 * A reused Worker whose used heap passes this (or its retire bound) collects before the next cell:
 * memory stays flat in a long run of back-to-back cells (a cell leaves ~0.2 MiB of garbage).
 */
const COLLECT_OVER_BYTES = 24 * MIB;

/** What a `warm` message with a control port handed over (see `cell_protocol.ts`, step 1). */
interface Warmed {
  port: MessagePort;
  control: NodePort;
  words: Int32Array;
  /** Writes the cell's frames under the stream lock, when the runtime handed its stream words. */
  write?: FrameWriter;
}

/** Boots the cell isolate on `port`: posts `ready`, then serves cells, one at a time. */
function boot(port: NonNullable<typeof parentPort>): void {
  // Unhandled rejections in the context never fail the cell (SPEC §5.2).
  process.on("unhandledRejection", () => {});
  // The context and helpers are built before `ready`, so a spare Worker starts its cell at once.
  let prepared = new CellRun();
  prepared.prepare();
  let cell: CellRun | undefined;
  let warmed: Warmed | undefined;
  const start = (message: CellStart, inMacrotask: boolean) => {
    if (cell !== undefined) return;
    cell = prepared;
    cell.begin(message, warmed, inMacrotask, warmed?.write, warmed && recycle);
  };
  // Parked inside a macrotask until the doorbell rings (module doc of cell_protocol.ts, step 2).
  // The first park is short: a spare that is not taken at once collects its start-up garbage
  // (~12 ms, ~4 MiB less resident while it waits), which a cell waiting for it should not pay.
  let collected = false;
  let collectAfterMs = COLLECT_AFTER_MS;
  const park = () => {
    const { control, words } = warmed!;
    if (cell !== undefined) return;
    Atomics.wait(words, CELL_DOORBELL, 0, collected ? PARK_MS : collectAfterMs);
    const received = receiveMessageOnPort(control);
    const message = received?.message as CellControl | undefined;
    if (message?.t === "start") {
      // Ready for the next ring once this cell is over (reuse); a discard (2) stays.
      Atomics.compareExchange(words, CELL_DOORBELL, 1, 0);
      return start(message, true);
    }
    if (Atomics.load(words, CELL_DOORBELL) === 2) return;
    if (!collected) {
      collected = true;
      collectGarbage();
    }
    setHostImmediate(park);
  };
  // The cell completed (cell_protocol.ts item 3a): this runs in the macrotask after the one that
  // finished it. Nothing of it is referenced from here on: its timers are cleared, its `CellRun`
  // (and with it its context, helpers and pending tool calls) is dropped, and messages naming it
  // are ignored. A fresh realm is built before the runtime may hand over the next cell.
  const recycle = () => {
    const finished = cell;
    if (finished === undefined || !finished.reusable || warmed === undefined) return;
    if (Atomics.load(warmed.words, CELL_DOORBELL) === 2) return;
    cell = undefined;
    finished.dispose();
    // The old realm is garbage now: collected once the Worker waits (see `park`), or by V8 when the
    // next cell needs the room (a cell gets its whole heap limit: tests/fresh_realm_test.ts). A heap
    // over COLLECT_OVER_BYTES or the runtime's retire bound is collected first, so that memory stays
    // flat and only what is really kept counts for the retire policy (garbage of back-to-back cells
    // passed 64 MiB every few hundred cells and retired good Workers).
    const { used_heap_size: used, heap_size_limit: limit } = v8.getHeapStatistics();
    if (used > Math.min(COLLECT_OVER_BYTES, RETIRE_HEAP_BYTES, limit * RETIRE_HEAP_SHARE)) collectGarbage();
    prepared = new CellRun();
    prepared.prepare();
    collected = false;
    collectAfterMs = RECYCLED_COLLECT_AFTER_MS;
    warmed.port.postMessage(
      { t: "recycled", heap: v8.getHeapStatistics().used_heap_size } satisfies CellRecycled,
    );
    setHostImmediate(park);
  };
  port.on("message", (message: CellControl) => {
    if (message === null || typeof message !== "object") return;
    if (message.t === "warm") {
      // From a macrotask, like a cell's own evaluation.
      setHostImmediate(() => {
        prepared.warmUp();
        rehearse();
        const { control, words, sink, sinkId } = message;
        message.port.postMessage({ t: "warmed" });
        if (control === undefined || words === undefined) return message.port.close();
        warmed = {
          port: message.port,
          control: control as unknown as NodePort,
          words,
          write: sink !== undefined && sinkId ? (frames) => writeLocked(sink, sinkId, frames) : undefined,
        };
        setHostImmediate(park);
      });
    } else if (message.t === "start") {
      start(message, false);
    } else {
      cell?.control(message);
    }
  });
  port.postMessage({ t: "ready" });
}

if (parentPort !== null) boot(parentPort);

/**
 * One cell run inside its cell worker: the outer-realm state of the one cell the worker runs (its
 * start, phase, host timers, view of the stored values) and the bridges its helpers call.
 *
 * - `prepare` builds the realm and the helpers ahead of the cell, while the worker waits as the
 *   session's spare; `begin` installs the cell's tools and limits and evaluates its module once.
 * - Helpers reach this realm only through the bridges ({@link CellBridges}), which take and return
 *   primitives and never throw into the context.
 * - Every entry into the context happens inside a macrotask and is followed, in that macrotask, by
 *   a drain of the context's microtask queue (`#enter`; `cell_bootstrap.ts` says why).
 * - The cell ends with exactly one `result` (SPEC §5.6), or with `stopped` after a `stop` control
 *   message; afterwards nothing is dispatched into the context and every helper call throws.
 *
 * @module
 */
import {
  clearTimeout as clearHostTimer,
  setImmediate as setHostImmediate,
  setTimeout as setHostTimer,
} from "node:timers";
import type vm from "node:vm";
import type { MessagePort as NodePort } from "node:worker_threads";
import { MAX_INT32, utf8ByteLength } from "../proto/bytes.ts";
import { DEFAULT_MAX_FRAME_BYTES } from "./cell_events.ts";
import {
  type CellModule,
  compileCellModule,
  describeCompileError,
  disposeCellModule,
  forgetRefusedImport,
  importRefused,
  warmUpModules,
} from "./cell_module.ts";
import { CellOutbox, type FrameWriter } from "./cell_outbox.ts";
import { BusyStretches } from "./cell_busy.ts";
import {
  CELL_STOPPED,
  CELL_WORDS,
  type CellControl,
  type CellCredit,
  type CellOutput,
  type CellStart,
  type CellTool,
  CREDIT_STOP,
} from "./cell_protocol.ts";
import { createCellRealm, DRAIN_CONTEXT } from "./cell_realm.ts";
import { SnapshotReader } from "./store_snapshot.ts";
import {
  type CellBridges,
  type CellController,
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

/** The largest delay a host timer accepts; longer delays are armed in steps. */
const MAX_HOST_TIMER_MS = MAX_INT32;

/** What a `warm` message with a control port handed over (see `cell_protocol.ts`, step 1). */
export interface Warmed {
  port: MessagePort;
  control: NodePort;
  words: Int32Array;
  /** Writes the cell's frames under the stream lock, when the runtime handed its stream words. */
  write?: FrameWriter;
}

/** The outer-realm state of the one cell run a cell worker runs. */
export class CellRun {
  #start!: CellStart;
  readonly #outbox = new CellOutbox(this);
  /** The cell's synchronous stretches; the end of a reported one is written as `idle`. */
  readonly busy = new BusyStretches((stretch) => {
    if (this.#phase !== PHASE_RUNNING) return;
    try {
      this.#outbox.post({ t: "idle", stretch });
    } catch {
      // Out of stack: the host then asks the runtime, as for a cell it never saw busy.
    }
  });
  #credit: CellCredit | undefined;
  #phase = PHASE_RUNNING;
  #hostTimers = new Map<number, ReturnType<typeof setHostTimer>>();
  #nextToolId = 0;
  /** The cell's view of the stored values: its snapshot's overlay and its own writes, over `#base`. */
  #view = new Map<string, string>();
  /** The snapshot's shared base, if any (`store_snapshot.ts`). */
  #base: SnapshotReader | undefined;
  /** UTF-8 bytes of the view; computed on the first `store` (`-1` until then). */
  #viewBytes = -1;
  #writes = new Map<string, string>();
  #context: vm.Context | undefined;
  #controller: CellController | undefined;
  /** The cell's module, until it is disposed. */
  #module: CellModule | undefined;
  /** A completion or failure reported during a drain: taken when the drain is over. */
  #pendingFinish: [failed: number, errorText: string] | undefined;
  /** Called in the macrotask after the one that finished the cell (reuse, `cell_protocol.ts` 3a). */
  #onFinished: (() => void) | undefined;

  /** The cell's ID, once it began. */
  get cellId(): string | undefined {
    return this.#start?.cellId;
  }

  /**
   * Whether the cell *completed* and its cell worker may run another cell (SPEC §5.1): its result
   * is sent, it was never stopped (no stop word, no `stop`), and its timers are cleared.
   */
  get reusable(): boolean {
    return this.#phase === PHASE_FINISHED && !this.#outbox.resultOwed && this.#hostTimers.size === 0 &&
      (this.#credit === undefined || Atomics.load(this.#credit.words, CREDIT_STOP) === 0);
  }

  /**
   * Builds the context and the helpers ahead of the cell, while this cell worker waits as the
   * session's spare: only `tools`, `ALL_TOOLS` and the limits depend on the cell (see `begin`).
   */
  prepare(): void {
    const realm = createCellRealm(this.#bridges());
    this.#context = realm.context;
    this.#controller = realm.controller;
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
    warmUpModules(context);
  }

  /** Lets go of what Deno keeps of the cell's module after the cell (see `disposeCellModule`). */
  dispose(): void {
    const module = this.#module;
    this.#module = undefined;
    if (module !== undefined) disposeCellModule(module);
  }

  /**
   * Starts the prepared cell: installs its tools and limits, posts `started`, and compiles and
   * evaluates the source once, inside a macrotask (`cell_bootstrap.ts`: heap limit): the current
   * one when `inMacrotask` (the park of a warmed spare), else a new one.
   *
   * @param start the runtime's `start` message
   * @param warm the output port and words handed over by `warm`, if any
   * @param inMacrotask the caller runs in a macrotask and nothing follows the call in it
   * @param write writes the cell's frames to the runtime's stream (`cell_protocol.ts` item 3);
   *   without it every output is posted whole
   * @param onFinished called in the macrotask after the one that finished the cell
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
    // A start without credit (a hand-driven isolate) gets unlimited credit and no reduced forms.
    const words = start.credit?.words ?? warm?.words;
    const credit: CellCredit = this.#credit = start.credit && words ? { ...start.credit, words } : {
      words: new Int32Array(new SharedArrayBuffer(4 * CELL_WORDS)),
      maxEvents: Infinity,
      maxBytes: Infinity,
      trimTextOver: Infinity,
      keepTextBytes: 0,
      dropMediaOver: Infinity,
    };
    this.busy.open(start.credit && words ? words : undefined);
    this.#outbox.open({
      cellId: start.cellId,
      maxFrameBytes: start.maxFrameBytes || DEFAULT_MAX_FRAME_BYTES,
      output: start.output ?? warm?.port,
      write,
      credit,
    });
    this.#view = new Map(start.store);
    this.#base = start.storeBase === undefined ? undefined : new SnapshotReader(start.storeBase);
    if (start.storeBytes !== undefined) this.#viewBytes = start.storeBytes;
    const tools = start.tools.map((tool: CellTool) => ({
      name: String(tool.name),
      description: String(tool.description),
    }));
    this.#controller!.configure(JSON.stringify(tools), start.maxMessageBytes, start.maxStoredValueBytes);
    if (Atomics.load(credit.words, CREDIT_STOP) !== 0) {
      // Stopped before it ran: the runtime's `stop` overtook this start (a parked spare turns its
      // event loop between two waits, and a message event can come before the park takes the start)
      // and was dropped as naming no cell of this worker. The stop word, set before it, still tells.
      this.control({ t: "stop", cell: start.cellId });
      return;
    }
    // `started` leaves with the cell's first output (one message, one frame write).
    this.#outbox.holdStarted();
    const run = () => {
      this.#evaluate();
      // A cell still running without output yet: report its start now.
      this.#outbox.sendStartedIfPending();
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
    this.busy.enter();
    try {
      this.#evaluateNow();
    } finally {
      this.busy.leave();
    }
  }

  #evaluateNow(): void {
    const context = this.#context;
    if (context === undefined || this.#phase !== PHASE_RUNNING) return;
    let module: CellModule;
    try {
      module = compileCellModule(this.#start.source, context);
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
      this.#outbox.post({ t: "pong" });
      return;
    }
    // A message for the cell this (reused) cell worker ran before: that cell is gone.
    const target = (message as { cell?: string }).cell;
    if (target !== undefined && target !== this.#start?.cellId) return;
    if (message.t === "stop") {
      if (this.#phase === PHASE_RUNNING) this.#phase = PHASE_STOPPED;
      this.#clearHostTimers();
      this.#outbox.post({ t: "stopped" });
      const words = this.#credit?.words;
      if (words) {
        Atomics.store(words, CELL_STOPPED, 1);
        Atomics.notify(words, CELL_STOPPED);
      }
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
      phase: () => this.livePhase(),
      emit: this.#emitBridge,
      callTool: this.#callToolBridge,
      byteLength: (text) => typeof text === "string" ? utf8ByteLength(text) : 0,
      load: (key) => typeof key === "string" ? this.#view.get(key) ?? this.#base?.get(key) : undefined,
      store: this.#storeBridge,
      timer: this.#timerBridge,
      finish: this.#finishBridge,
    };
  }

  readonly #emitBridge: CellBridges["emit"] = (kind, a, b) => {
    if (this.livePhase() !== PHASE_RUNNING) return 1;
    const first = typeof a === "string" ? a : "";
    const outbox = this.#outbox;
    switch (kind) {
      case EMIT_TEXT:
        outbox.postText(first);
        break;
      case EMIT_IMAGE: {
        const detail = typeof b === "string" ? b as "high" : "high";
        const n = utf8ByteLength(first);
        outbox.postCounted(
          n > this.#credit!.dropMediaOver
            ? { t: "droppedImage", bytes: n, detail, jsonExtra: outbox.jsonExtra(first), n: 0 }
            : { t: "image", image: { url: first, detail }, n },
        );
        break;
      }
      case EMIT_AUDIO: {
        const n = utf8ByteLength(first);
        outbox.postCounted(
          n > this.#credit!.dropMediaOver
            ? { t: "droppedAudio", bytes: n, jsonExtra: outbox.jsonExtra(first), n: 0 }
            : { t: "audio", url: first, n },
        );
        break;
      }
      case EMIT_YIELD:
        outbox.postCounted({ t: "yield", n: 0 });
        break;
      case EMIT_NOTIFY:
        outbox.postCounted({ t: "notify", text: first, n: utf8ByteLength(first) });
        break;
      case EMIT_CONSUMED:
        // Posted by the delivery of a tool result, not by a helper call: it never waits.
        outbox.postCounted({ t: "toolResultConsumed", id: first, n: 0 });
        return 0;
    }
    // The output is out: a stack overflow from here must not fail the helper call (its retry
    // would duplicate the output), so the wait is owed to the next output instead. No call
    // of ours before the `try`.
    try {
      return outbox.awaitCredit() ? 0 : 1;
    } catch {
      outbox.owesWait = true;
      return 0;
    }
  };

  readonly #callToolBridge: CellBridges["callTool"] = (name, input) => {
    if (this.livePhase() !== PHASE_RUNNING) return "";
    const id = `tool-${++this.#nextToolId}`;
    this.#outbox.postCounted(
      typeof input === "string"
        ? { t: "toolCall", id, name: String(name), input, n: utf8ByteLength(input) }
        : { t: "toolCall", id, name: String(name), n: 0 },
    );
    try {
      return this.#outbox.awaitCredit() ? id : "";
    } catch {
      this.#outbox.owesWait = true; // as in `emit`
      return id;
    }
  };

  readonly #storeBridge: CellBridges["store"] = (key, json) => {
    if (this.#phase !== PHASE_RUNNING) return 2;
    if (typeof key !== "string" || typeof json !== "string") return 2;
    if (this.#viewBytes < 0) {
      let total = 0;
      for (const [k, v] of this.#view) total += utf8ByteLength(k) + utf8ByteLength(v);
      this.#viewBytes = total;
    }
    const keyBytes = utf8ByteLength(key);
    const previous = this.#view.get(key) ?? this.#base?.get(key);
    const next = this.#viewBytes + keyBytes + utf8ByteLength(json) -
      (previous === undefined ? 0 : keyBytes + utf8ByteLength(previous));
    if (next > this.#start.maxStoredValueBytes) return STORE_OVER_LIMIT;
    this.#viewBytes = next;
    this.#view.set(key, json);
    this.#writes.set(key, json);
    return STORE_OK;
  };

  readonly #timerBridge: CellBridges["timer"] = (op, id, delayMs) => {
    if (this.#phase !== PHASE_RUNNING || typeof id !== "number") return;
    if (op === TIMER_SET) {
      this.#armTimer(id, typeof delayMs === "number" ? delayMs : 0);
    } else if (op === TIMER_CLEAR) {
      const handle = this.#hostTimers.get(id);
      if (handle !== undefined) clearHostTimer(handle);
      this.#hostTimers.delete(id);
    }
  };

  readonly #finishBridge: CellBridges["finish"] = (kind, errorText) => {
    if (kind === FINISH_EXIT) {
      this.#finish(0, "");
    } else if (this.#pendingFinish === undefined && this.#phase === PHASE_RUNNING) {
      this.#pendingFinish = [
        kind === FINISH_FAILED ? 1 : 0,
        typeof errorText === "string" ? errorText : "",
      ];
    }
  };

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
   * handler (see `cell_bootstrap.ts`). The drain runs to the end even if the cell finishes on the
   * way: microtasks queued before completion still run (SPEC §5.6), and helpers throw from then on.
   */
  #enter(call: (controller: CellController) => void): void {
    const controller = this.#controller;
    const context = this.#context;
    if (controller === undefined || context === undefined || this.#phase !== PHASE_RUNNING) return;
    this.busy.enter();
    try {
      call(controller);
      DRAIN_CONTEXT.runInContext(context);
    } catch {
      // Only a fault of the bootstrap itself lands here (the controller catches user errors).
      this.#finish(1, "code-mode internal error");
    } finally {
      this.busy.leave();
    }
    // The cell's end, reported during the drain, counts once the queue is empty (a chain of
    // microtasks queued before it still ran and wrote its output, as in the reference), and once
    // a refused `import()` has settled in the context (see below).
    const pending = this.#pendingFinish;
    if (pending !== undefined && !importRefused()) {
      this.#pendingFinish = undefined;
      this.#finish(pending[0], pending[1]);
    }
    // A result whose post ran out of stack (the cell's settle ran deep): sent from here.
    if (this.#outbox.resultOwed) {
      try {
        this.#outbox.sendOwedResult();
      } catch {
        // The runtime's watchdog finds a cell that neither writes nor runs.
      }
    }
    if (importRefused()) {
      // The main queue settles the `import()` promise once this macrotask is over; drain the
      // continuation it queued in the context from the next one.
      forgetRefusedImport();
      setHostImmediate(() => this.#enter(() => {}));
    }
  }

  #finish(failed: number, errorText: string): void {
    if (this.#phase !== PHASE_RUNNING) return;
    const writes = [...this.#writes];
    let result: CellOutput = { t: "result", writes };
    if (failed === 1) {
      const trimmed = this.#outbox.trim(errorText);
      result = trimmed === undefined
        ? { t: "result", writes, error: errorText }
        : { t: "result", writes, trimmedError: trimmed };
    }
    // From here the cell is over even if the post below runs out of stack: `#enter` then sends
    // the result from its own (shallow) frame.
    this.#phase = PHASE_FINISHED;
    this.#outbox.unsentResult = result;
    this.#clearHostTimers();
    this.#outbox.sendOwedResult();
    // After this macrotask, whose drain still runs the microtasks queued so far (SPEC §5.6): a
    // microtask that never ends keeps this from running, and the runtime then ends the worker.
    const onFinished = this.#onFinished;
    this.#onFinished = undefined;
    try {
      if (onFinished !== undefined) setHostImmediate(onFinished);
    } catch {
      // Out of stack: the worker is simply not reused (the runtime ends it).
    }
  }

  /** The phase as helpers see it: a stop word set by the runtime stops the cell at once. */
  livePhase(): number {
    if (
      this.#phase === PHASE_RUNNING && this.#credit && Atomics.load(this.#credit.words, CREDIT_STOP) !== 0
    ) {
      this.#phase = PHASE_STOPPED;
      this.#clearHostTimers();
    }
    return this.#phase;
  }
}

/**
 * The entry of a cell worker: the code that runs inside one `node:worker_threads` Worker created by
 * the session runtime (SPEC §5, message contract in `./cell_protocol.ts`), serving cell runs one at
 * a time.
 *
 * - On load it installs a private `unhandledRejection` handler, prepares its first cell run's realm,
 *   posts `{t: "ready"}` on `parentPort` and waits for `warm`, then parks until its {@link CellStart}.
 * - On `start` the prepared cell run (`cell_run.ts`) begins: the helpers of SPEC §5.3 already live
 *   *inside* a fresh `node:vm` context holding only the ECMAScript built-ins (`cell_realm.ts`); it
 *   posts `started` and evaluates the cell's source once (`cell_module.ts`).
 * - Helpers reach this (outer) realm only through private bridge functions that take and return
 *   primitives and never throw into the context; every call into a bridge is wrapped so that not
 *   even a stack overflow can hand an outer-realm error to user code.
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
 *   `stack` (`cell_helper_stacks.ts`), so stack traces still hold only the context's own frames.
 * - Output is credit-based and reduced when too large (SPEC §8.10, `cell_outbox.ts`).
 * - Reuse (`cell_protocol.ts` item 3a): a cell worker whose cell completed builds a fresh realm for
 *   the next cell run of its session, reports `recycled` and parks again.
 *
 * This file is bundled with `deno bundle` and runs with `--no-npm --no-remote`, so it imports only
 * `node:` built-ins and its sibling protocol modules.
 *
 * @module
 */

import process from "node:process";
import { setImmediate as setHostImmediate } from "node:timers";
import v8 from "node:v8";
import { type MessagePort as NodePort, parentPort, receiveMessageOnPort } from "node:worker_threads";
import { MIB } from "../proto/bytes.ts";
import { writeLocked } from "./cell_events.ts";
import {
  CELL_DOORBELL,
  type CellControl,
  type CellRecycled,
  type CellStart,
  PARK_MS,
  RETIRE_HEAP_BYTES,
  RETIRE_HEAP_SHARE,
} from "./cell_protocol.ts";
import { rehearse } from "./cell_rehearsal.ts";
import { CellRun, type Warmed } from "./cell_run.ts";
import { collectGarbage } from "./collect_garbage.ts";

/** How long a warmed spare waits for a cell before it collects its garbage (see `#park`). */
const COLLECT_AFTER_MS = 25;
/**
 * How long a reused cell worker waits for the next cell before it collects the old realms' garbage:
 * longer than a harness's pause between back-to-back cells, so that a full collection (~12 ms, far
 * more on a loaded machine) does not meet the next cell (it showed as 100–200 ms p95 back to back).
 */
const RECYCLED_COLLECT_AFTER_MS = 250;
/**
 * A reused cell worker whose used heap passes this (or its retire bound) collects before the next
 * cell: memory stays flat in a long run of back-to-back cells (a cell leaves ~0.2 MiB of garbage).
 */
const COLLECT_OVER_BYTES = 24 * MIB;

/** A cell worker's message loop: it serves cell runs one at a time, parked between them. */
class CellWorkerLoop {
  /** The next cell run, its realm built before it is needed (a spare starts its cell at once). */
  #prepared = new CellRun();
  /** The cell run that began, until its worker is recycled. */
  #run: CellRun | undefined;
  #warmed: Warmed | undefined;
  /**
   * Whether the parked worker collected its garbage. The first park is short: a spare that is not
   * taken at once collects its start-up garbage (~12 ms, ~4 MiB less resident while it waits),
   * which a cell waiting for it should not pay.
   */
  #collected = false;
  #collectAfterMs = COLLECT_AFTER_MS;

  /** Boots on `port`: prepares the first cell run, serves messages, posts `ready`. */
  constructor(port: NonNullable<typeof parentPort>) {
    // Unhandled rejections in the context never fail the cell (SPEC §5.2).
    process.on("unhandledRejection", () => {});
    // The context and helpers are built before `ready`, so a spare worker starts its cell at once.
    this.#prepared.prepare();
    port.on("message", (message: CellControl) => this.#receive(message));
    port.postMessage({ t: "ready" });
  }

  #receive(message: CellControl): void {
    if (message === null || typeof message !== "object") return;
    if (message.t === "warm") {
      // From a macrotask, like a cell's own evaluation.
      setHostImmediate(() => this.#warm(message));
    } else if (message.t === "start") {
      this.#start(message, false);
    } else {
      this.#run?.control(message);
    }
  }

  /** Pays the lazy first-use costs, answers `warmed`, and parks on the handed-over doorbell. */
  #warm(message: Extract<CellControl, { t: "warm" }>): void {
    this.#prepared.warmUp();
    rehearse();
    const { control, words, sink, sinkId } = message;
    message.port.postMessage({ t: "warmed" });
    if (control === undefined || words === undefined) return message.port.close();
    this.#warmed = {
      port: message.port,
      // The cell protocol names the web MessagePort type; Deno's node:worker_threads port is the
      // same class, declared differently.
      control: control as unknown as NodePort,
      words,
      write: sink !== undefined && sinkId ? (frames) => writeLocked(sink, sinkId, frames) : undefined,
    };
    setHostImmediate(this.#park);
  }

  #start(message: CellStart, inMacrotask: boolean): void {
    if (this.#run !== undefined) return;
    const warmed = this.#warmed;
    this.#run = this.#prepared;
    this.#run.begin(message, warmed, inMacrotask, warmed?.write, warmed && this.#recycle);
  }

  /** Parked inside a macrotask until the doorbell rings (module doc of cell_protocol.ts, step 2). */
  readonly #park = (): void => {
    const { control, words } = this.#warmed!;
    if (this.#run !== undefined) return;
    Atomics.wait(words, CELL_DOORBELL, 0, this.#collected ? PARK_MS : this.#collectAfterMs);
    const received = receiveMessageOnPort(control);
    const message = received?.message as CellControl | undefined;
    if (message?.t === "start") {
      // Ready for the next ring once this cell is over (reuse); a discard (2) stays.
      Atomics.compareExchange(words, CELL_DOORBELL, 1, 0);
      return this.#start(message, true);
    }
    if (Atomics.load(words, CELL_DOORBELL) === 2) return;
    if (!this.#collected) {
      this.#collected = true;
      collectGarbage();
    }
    setHostImmediate(this.#park);
  };

  /**
   * The cell completed (cell_protocol.ts item 3a): this runs in the macrotask after the one that
   * finished it. Nothing of it is referenced from here on: its timers are cleared, its `CellRun`
   * (and with it its context, helpers and pending tool calls) is dropped, and messages naming it
   * are ignored. A fresh realm is built before the runtime may hand over the next cell.
   */
  readonly #recycle = (): void => {
    const finished = this.#run;
    const warmed = this.#warmed;
    if (finished === undefined || !finished.reusable || warmed === undefined) return;
    if (Atomics.load(warmed.words, CELL_DOORBELL) === 2) return;
    this.#run = undefined;
    finished.dispose();
    // The old realm is garbage now: collected once the worker waits (see `#park`), or by V8 when
    // the next cell needs the room (a cell gets its whole heap limit: tests/fresh_realm_test.ts). A
    // heap over COLLECT_OVER_BYTES or the runtime's retire bound is collected first, so that memory
    // stays flat and only what is really kept counts for the retire policy (garbage of back-to-back
    // cells passed 64 MiB every few hundred cells and retired good workers).
    const { used_heap_size: used, heap_size_limit: limit } = v8.getHeapStatistics();
    if (used > Math.min(COLLECT_OVER_BYTES, RETIRE_HEAP_BYTES, limit * RETIRE_HEAP_SHARE)) collectGarbage();
    this.#prepared = new CellRun();
    this.#prepared.prepare();
    this.#collected = false;
    this.#collectAfterMs = RECYCLED_COLLECT_AFTER_MS;
    warmed.port.postMessage(
      { t: "recycled", heap: v8.getHeapStatistics().used_heap_size } satisfies CellRecycled,
    );
    setHostImmediate(this.#park);
  };
}

if (parentPort !== null) new CellWorkerLoop(parentPort);

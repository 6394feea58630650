/**
 * A session runtime for the host's crash and lifecycle tests: the production {@link Runtime} with
 * faults that a test arms through a cell's source and fires with a signal. `_harness.ts` bundles it
 * at test time (`faultRuntimeFiles()`) as the `runtime.js` of a runtime directory, which a test
 * host runs through the `runtimeFiles` option; it loads whole and writes `Ready` itself once its
 * signal listener is in place (the directory's `runtime_main.js` and `cell.js` are the production
 * files). Folder-private: never shipped, and nothing of it is in the worker protocol.
 *
 * A cell whose source starts with `/*fault {…}*\/` (`faultSource()` of `_faults.ts`) arms the
 * `Faults` of the JSON when its `StartCell` arrives; the cell itself then starts as usual.
 *
 * @module
 */
import { encodeFrame } from "../proto/frame_codec.ts";
import type { HostToWorker } from "../proto/worker_codec.ts";
import { encodeReadyFrame } from "../proto/worker_ready.ts";
import { DEFAULT_MAX_FRAME_BYTES, writeAllSync } from "../worker/cell_events.ts";
import { Runtime, type RuntimeOptions } from "../worker/runtime.ts";
import { FAULT_SIGNAL, type Faults } from "./_faults.ts";

const MARKER = /^\/\*fault (\{.*?\})\*\//;

class FaultRuntime extends Runtime {
  #delayStopMs = 0;
  /** Frames read while a delayed StopCell waits (see {@link FaultRuntime.receive}). */
  #held: HostToWorker[] | undefined;
  #onSignal: (() => void) | undefined;
  /** The signal came before the cell that arms its fault (the host counts a cell as running first). */
  #signalled = false;

  constructor(options: RuntimeOptions) {
    super(options);
    Deno.addSignalListener(FAULT_SIGNAL, () => {
      if (this.#onSignal) this.#onSignal();
      else this.#signalled = true;
    });
  }

  override receive(message: HostToWorker): void {
    const start = message.startCell;
    const marker = start && MARKER.exec(start.source ?? "");
    if (start && marker) this.#arm(start.cellId, JSON.parse(marker[1]) as Faults);
    // A runtime busy for `delayStopMs` as a StopCell comes: it reads the frames after it (a ping)
    // only once it has handled the stop, in order.
    if (this.#held) {
      this.#held.push(message);
      return;
    }
    if (message.stopCell && this.#delayStopMs > 0) {
      const held: HostToWorker[] = this.#held = [];
      setTimeout(() => {
        this.#held = undefined;
        super.receive(message);
        for (const later of held) this.receive(later);
      }, this.#delayStopMs);
      return;
    }
    super.receive(message);
    if (marker && this.#signalled && this.#onSignal) {
      this.#signalled = false;
      this.#onSignal();
    }
  }

  #arm(cellId: string, faults: Faults): void {
    if (faults.delayStopMs !== undefined) this.#delayStopMs = faults.delayStopMs;
    switch (faults.onSignal) {
      case "garbageFrame":
        this.#onSignal = () =>
          this.writeFrame(encodeFrame(new Uint8Array([0xff, 0xff, 0xff]), DEFAULT_MAX_FRAME_BYTES));
        break;
      case "exhaustMainHeap":
        this.#onSignal = () => {
          const hoard: unknown[] = [];
          for (;;) hoard.push(new Array(1_000_000).fill(hoard.length));
        };
        break;
      case "faultCell":
        this.#onSignal = () => this.abortCell(cellId, "fault", "fault runtime: cell bootstrap fault");
        break;
      case "runtimeFault":
        this.#onSignal = () => void this.fail(faults.detail ?? "fault runtime");
        break;
    }
    if (faults.blockMainMs !== undefined) {
      const until = performance.now() + faults.blockMainMs;
      while (performance.now() < until) { /* busy, as `new Worker()` keeps this thread */ }
    }
  }
}

const runtime = new FaultRuntime({
  input: Deno.stdin,
  output: writeAllSync,
  exit: (code) => Deno.exit(code),
});
// `Ready` goes out once the signal listener is in place: a signal before it would end the process.
writeAllSync(encodeReadyFrame(Deno.version.deno));
await runtime.run();

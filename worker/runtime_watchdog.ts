/**
 * The runtime's heap-limit watchdog: it turns a cell worker that reached its heap limit without
 * ending into the heap-limit exit.
 *
 * On Deno 2.9.6 a Worker that reaches its heap limit does not always end with
 * ERR_WORKER_OUT_OF_MEMORY (measured on a loaded 2-core machine: a few per cent of limit hits).
 * Two other outcomes were seen, and this watchdog turns both into the heap-limit exit:
 * - the thread *parks*: no CPU, no report, forever;
 * - the limit is *lifted*: the cell keeps allocating and the process grows by ~200 MiB/s.
 *
 * A cell that has been silent for a while is pinged; an idle cell answers at once. A cell that does
 * not answer is running code, parked, or over its limit:
 * - parked: this whole process used almost no CPU for a second while the ping went unanswered;
 * - over its limit: the process's resident memory exceeds twice the heap limits of its running
 *   cells plus a fixed allowance, while the cell does not answer.
 *
 * A cell spinning in synchronous code within its heap is neither; Terminate stops it.
 *
 * @module
 */
import { MIB } from "../proto/bytes.ts";
import { CELL_PROGRESS, type CellControl } from "./cell_protocol.ts";
import type { CellRun, RuntimeConfig } from "./runtime_records.ts";
import type { Clock } from "../proto/clock.ts";

const WATCHDOG_MS = 250;
const SILENCE_MS = 500;
const PARKED_WINDOW_MS = 1_000;
const PARKED_CPU_SHARE = 0.02;
/** Resident memory of the runtime itself, beyond its cells' heaps, before the limit check bites. */
const RSS_ALLOWANCE_MB = 512;

/** Options of a {@link ParkedCellWatchdog}. */
export interface ParkedCellWatchdogOptions {
  clock: Clock;
  /** The process's CPU time, µs: the parked test. */
  cpuMicros: () => number;
  /** The process's resident memory, bytes: the budget test. */
  rssBytes: () => number;
  /** The settings in force (the cells' heap limit). */
  config: () => Readonly<RuntimeConfig>;
  /** The cell runs whose exit is not reported yet. */
  runs: () => Iterable<CellRun>;
  /** Whether a run's cell waits for the host's credit. */
  overCredit: (run: CellRun) => boolean;
  /** Whether a run's cell holds the stream lock (the host has not taken its frame yet). */
  writing: (run: CellRun) => boolean;
  /** Ends a run's cell with the heap-limit exit. */
  abort: (run: CellRun) => void;
}

/** Looks at the running cells every {@link WATCHDOG_MS} while any runs. */
export class ParkedCellWatchdog {
  readonly #options: ParkedCellWatchdogOptions;
  readonly #clock: Clock;
  #timer: unknown;

  /** @param options see {@link ParkedCellWatchdogOptions} */
  constructor(options: ParkedCellWatchdogOptions) {
    this.#options = options;
    this.#clock = options.clock;
  }

  /** Looks again in {@link WATCHDOG_MS} (a cell run started), unless a look is due already. */
  arm(): void {
    this.#timer ??= this.#clock.setTimeout(this.#watch, WATCHDOG_MS);
  }

  readonly #watch = (): void => {
    this.#timer = undefined;
    if (this.#check() > 0) this.arm();
  };

  /** One look at the running cells; returns how many were running. */
  #check(): number {
    const options = this.#options;
    const now = this.#clock.now();
    let active = 0;
    for (const run of options.runs()) if (run.started && !run.finished) active++;
    const rssMb = options.rssBytes() / MIB;
    const overBudget = rssMb > active * options.config().heapMb * 2 + RSS_ALLOWANCE_MB;
    for (const run of options.runs()) {
      if (!run.started || run.finished) continue;
      const progress = Atomics.load(run.worker.words, CELL_PROGRESS);
      if (progress !== run.progress || options.overCredit(run) || options.writing(run)) {
        run.progress = progress;
        // New output, waiting for the host's credit, or for the host to take a frame: not parked.
        run.lastSeen = now;
        run.ping = undefined;
        continue;
      }
      if (overBudget && run.ping && now - run.ping.at >= SILENCE_MS) {
        options.abort(run);
        continue;
      }
      if (!run.ping) {
        if (now - run.lastSeen < SILENCE_MS) continue;
        run.ping = { at: now, cpu: options.cpuMicros() };
        run.worker.thread.postMessage({ t: "ping" } satisfies CellControl);
        continue;
      }
      const elapsedMs = now - run.ping.at;
      if (elapsedMs < PARKED_WINDOW_MS) continue;
      const cpuMs = (options.cpuMicros() - run.ping.cpu) / 1000;
      if (cpuMs < elapsedMs * PARKED_CPU_SHARE) {
        options.abort(run);
      } else {
        run.ping = undefined; // busy (spinning or another cell's work): look again later
      }
    }
    return active;
  }
}

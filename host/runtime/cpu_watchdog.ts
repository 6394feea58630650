/**
 * The idle CPU bound (`runtimeIdleCpuPercent`, issue 27): one timer per host samples the CPU time
 * of every watched runtime's process tree while none of its session's cells runs, and reports a
 * runtime that keeps burning CPU then.
 *
 * Why: on Deno 2.9.6 `Worker.terminate()` returns, and fires `exit`, while a thread running
 * JavaScript keeps running (docs/deno-platform.md). Microtasks a cell queued before it completed
 * (a spinning promise chain, a promise fork bomb) run on after its result, in a Worker the runtime
 * has retired; the host sees the cell completed. The only stop that works is ending the process,
 * which the session does (`SessionRuntime.replaceRuntime`).
 *
 * - Only idle runtimes are judged: a runtime with a live cell (running, yielded, awaiting a tool) may
 *   use what CPU it likes. Each change of idleness starts a new baseline.
 * - Busy means at least `percent` % of one core in each of {@link BUSY_SAMPLES} samples in a row
 *   ({@link CPU_WATCH_INTERVAL_MS} apart, ~0.8 s) and at least {@link BUSY_MIN_CPU_MS} of CPU over
 *   them: a sustained burn, not the runtime's own start or the burst of a new spare cell worker and
 *   a collection after a cell, which a loaded machine stretches over several samples.
 * - A runtime is reported once (`onBusy`), with its mean use over the busy samples.
 * - A runtime quiet for {@link QUIET_SAMPLES} samples (~4 s) is sampled every ~1 s only; a busy sample
 *   puts it back on every tick, so a burn that starts late is reported ~1 s later than an early one.
 * - Why the process and not the thread: Deno names a cell worker's thread `worker-N`, but a runtime
 *   may not read `/proc` (it has `--allow-read=<runtimeDir>` only), and stopping one thread is
 *   impossible anyway: the whole runtime is replaced, so judging it only while it is idle kills no
 *   running cell. The process's `utime + stime` also counts V8's helper threads (a fork bomb's
 *   garbage collection) and, with `/proc/<pid>/task/<pid>/children`, the bubblewrap sandbox's
 *   processes.
 *
 * Cost: per idle runtime and sample one `stat` read per process of its tree (1 without the OS
 * sandbox, 3 with bubblewrap), ~40 µs each on a loaded 2-core machine; a quiet runtime is sampled
 * once a second, so 256 quiet sandboxed runtimes cost ~3 % of a core. Without `/proc` (not Linux)
 * nothing is measured and nothing is reported.
 *
 * @module
 */
import { processTree } from "./memory_watchdog.ts";

/** Sampling interval, ms. */
export const CPU_WATCH_INTERVAL_MS = 200;
/** Busy samples in a row that make a runtime busy (with the interval: ~0.8 s). */
export const BUSY_SAMPLES = 4;
/**
 * CPU time a busy run must also reach, ms: more than a runtime's own bursts while idle (its start,
 * 220–290 ms of CPU to a booted spare on an idle machine since the runtime rehearses its cell path,
 * more on a loaded one; a retired cell's collection and the next spare, ~100 ms), which a loaded
 * machine can spread over several samples at ≥ 10 % each. At 300 ms a loaded CI run replaced a
 * freshly started runtime as burning CPU. A spinning thread reaches it in the 4 samples on an idle
 * machine (~800 ms of CPU), in ~1 s at half a core.
 */
export const BUSY_MIN_CPU_MS = 500;
/** Linux's `USER_HZ`: the unit of `utime` and `stime` in `/proc/<pid>/stat` (100 on every arch Deno runs on). */
const TICKS_PER_SECOND = 100;
/** The bound of a thread that outlived its `terminate()` ({@link IdleCpuWatchdog.watchThread}), % of a core. */
export const THREAD_PERCENT = 1;
/** The process tree of a runtime is re-walked every this many ticks. */
const TREE_EVERY = 8;
/** Quiet samples in a row (~5 s) after which an idle runtime is sampled on every {@link SLOW_EVERY}th tick only. */
export const QUIET_SAMPLES = 20;
/** The tick spacing of a quiet runtime's samples (~1 s); a busy one puts it back on every tick. */
export const SLOW_EVERY = 4;

/**
 * CPU time (user + system) of a set of processes, ms, from `/proc/<pid>/stat`; a process that is
 * gone counts 0.
 *
 * @param pids the processes
 * @returns the sum, or undefined when no process could be read (gone, or no `/proc`)
 */
export function processesCpuMs(pids: readonly (number | string)[]): number | undefined {
  let ticks = 0;
  let read = 0;
  for (const pid of pids) {
    let stat: string;
    try {
      stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    } catch {
      continue;
    }
    // The command name (2nd field) may hold spaces and parentheses: fields count from its `)`.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    ticks += Number(fields[11]) + Number(fields[12]);
    read++;
  }
  return read === 0 ? undefined : (ticks * 1000) / TICKS_PER_SECOND;
}

/** One watched runtime (see {@link IdleCpuWatchdog.watch}). */
export interface IdleCpuWatch {
  /**
   * Whether none of the runtime's session's cells runs: only then is it judged.
   *
   * @param idle whether it is idle now
   * @param settleMs judged only this long after it became idle (a runtime that tears down a cell
   *   Worker ended by its heap limit: V8's last collections before the end run on, ~1 s on a
   *   loaded machine)
   */
  setIdle(idle: boolean, settleMs?: number): void;
  /** Stops watching (idempotent). */
  stop(): void;
}

/**
 * CPU time (user + system) of one thread of this process, ms (`/proc/self/task/<tid>/stat`).
 *
 * @param tid the thread's kernel ID
 * @returns the time, or undefined once the thread is gone (or there is no `/proc`)
 */
export function ownThreadCpuMs(tid: number): number | undefined {
  return processesCpuMs([`self/task/${tid}`]);
}

/**
 * The kernel ID of the thread of a `node:worker_threads` Worker of this process that still runs:
 * Deno names a Worker's thread `worker-<threadId>`.
 *
 * @param threadId the Worker's `threadId`
 * @returns the thread's ID, or undefined when it has ended (or there is no `/proc`)
 */
export function workerThreadTid(threadId: number): number | undefined {
  const name = `worker-${threadId}\n`;
  try {
    for (const task of Deno.readDirSync("/proc/self/task")) {
      try {
        if (Deno.readTextFileSync(`/proc/self/task/${task.name}/comm`) === name) return Number(task.name);
      } catch {
        // That thread ended meanwhile.
      }
    }
  } catch {
    // No /proc.
  }
  return undefined;
}

interface Watched {
  /** Reads the watched CPU time, ms (re-walking a process tree when `walk`). */
  read: (walk: boolean) => number | undefined;
  /** A thread: once it cannot be read it has ended, and the watch stops. */
  thread: boolean;
  /** The bound, % of one core. */
  percent: number;
  stop: () => void;
  idle: boolean;
  /** Not judged before this time (see {@link IdleCpuWatch.setIdle}'s `settleMs`). */
  judgeFrom: number;
  /** The last sample: when, and the tree's CPU time then. */
  last: { at: number; cpuMs: number } | undefined;
  /** Quiet samples in a row (see {@link QUIET_SAMPLES}). */
  quiet: number;
  /** Busy samples in a row, and their CPU and wall time. */
  streak: number;
  busyCpuMs: number;
  busyMs: number;
  fired: boolean;
  onBusy: (cpuPercent: number) => void;
}

/** Options of an {@link IdleCpuWatchdog}. */
export interface IdleCpuWatchdogOptions {
  /** Reads a process tree's CPU time, ms (default: {@link processesCpuMs} over {@link processTree}). */
  readCpuMs?: (tree: readonly number[]) => number | undefined;
  /** Reads a thread's CPU time, ms (default {@link ownThreadCpuMs}). */
  readThreadCpuMs?: (tid: number) => number | undefined;
  /** Walks a process tree (default {@link processTree}). */
  walk?: (pid: number) => number[];
  /** The time, ms (default `performance.now`). */
  now?: () => number;
}

/** One timer judging every watched runtime while it is idle; it runs only while something is watched. */
export class IdleCpuWatchdog {
  /** The bound, % of one core. */
  readonly percent: number;
  #watched = new Set<Watched>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #tick = 0;
  #readCpuMs: (tree: readonly number[]) => number | undefined;
  #walk: (pid: number) => number[];
  #readThreadCpuMs: (tid: number) => number | undefined;
  #now: () => number;

  /**
   * @param percent the bound, % of one core (> 0)
   * @param options see {@link IdleCpuWatchdogOptions}
   */
  constructor(percent: number, options: IdleCpuWatchdogOptions = {}) {
    this.percent = percent;
    this.#readCpuMs = options.readCpuMs ?? processesCpuMs;
    this.#walk = options.walk ?? processTree;
    this.#readThreadCpuMs = options.readThreadCpuMs ?? ownThreadCpuMs;
    this.#now = options.now ?? (() => performance.now());
  }

  /**
   * Watches the process tree rooted at `pid` (not judged until {@link IdleCpuWatch.setIdle}).
   *
   * @param pid the spawned process
   * @param onBusy called once, with the mean % of a core over the busy samples
   * @returns the watch
   */
  watch(pid: number, onBusy: (cpuPercent: number) => void): IdleCpuWatch {
    let tree = this.#walk(pid);
    return this.#add(
      (walk) => {
        if (walk) tree = this.#walk(pid);
        return this.#readCpuMs(tree);
      },
      false,
      onBusy,
      this.percent,
    );
  }

  /**
   * Watches one thread of this process, judged at once (a cell Worker's thread that outlived its
   * `terminate()`, in-process isolation); the watch ends by itself once the thread has.
   *
   * A thread is known to be one that should have ended, so any use counts: it is reported when its
   * mean over {@link BUSY_SAMPLES} samples is at least {@link THREAD_PERCENT}, not the runtime's bound.
   *
   * @param tid the thread's kernel ID ({@link workerThreadTid})
   * @param onBusy called once, with the mean % of a core over the busy samples
   * @returns the watch
   */
  watchThread(tid: number, onBusy: (cpuPercent: number) => void): IdleCpuWatch {
    const watch = this.#add(() => this.#readThreadCpuMs(tid), true, onBusy, THREAD_PERCENT);
    watch.setIdle(true);
    return watch;
  }

  #add(
    read: Watched["read"],
    thread: boolean,
    onBusy: (cpuPercent: number) => void,
    percent: number,
  ): IdleCpuWatch {
    const entry: Watched = {
      read,
      thread,
      percent,
      stop: () => {},
      idle: false,
      judgeFrom: 0,
      last: undefined,
      quiet: 0,
      streak: 0,
      busyCpuMs: 0,
      busyMs: 0,
      fired: false,
      onBusy,
    };
    this.#watched.add(entry);
    if (this.#timer === undefined) {
      const timer = setInterval(() => this.sample(), CPU_WATCH_INTERVAL_MS);
      Deno.unrefTimer(timer);
      this.#timer = timer;
    }
    entry.stop = () => {
      this.#watched.delete(entry);
      if (this.#watched.size === 0 && this.#timer !== undefined) {
        clearInterval(this.#timer);
        this.#timer = undefined;
      }
    };
    return {
      setIdle: (idle, settleMs = 0) => {
        if (entry.idle === idle && settleMs <= 0) return;
        entry.idle = idle;
        entry.judgeFrom = idle && settleMs > 0 ? this.#now() + settleMs : 0;
        entry.last = undefined;
        entry.streak = entry.quiet = 0;
      },
      stop: entry.stop,
    };
  }

  /** Takes one sample of every idle runtime (the timer's tick; public for tests). */
  sample(): void {
    const tick = this.#tick++;
    const walk = tick % TREE_EVERY === 0;
    const slowTick = tick % SLOW_EVERY === 0;
    for (const entry of this.#watched) {
      if (!entry.idle || entry.fired) continue;
      // Settling: the first sample after it is the baseline.
      if (entry.judgeFrom > 0 && this.#now() < entry.judgeFrom) continue;
      if (entry.quiet >= QUIET_SAMPLES && !slowTick) continue;
      const cpuMs = entry.read(walk);
      const at = this.#now();
      if (cpuMs === undefined) {
        if (entry.thread) entry.stop();
        continue;
      }
      const last = entry.last;
      entry.last = { at, cpuMs };
      if (last === undefined || at <= last.at) continue;
      const used = cpuMs - last.cpuMs;
      if (entry.thread) {
        this.#judgeThread(entry, used, at - last.at);
        continue;
      }
      if (used * 100 < entry.percent * (at - last.at)) {
        entry.streak = entry.busyCpuMs = entry.busyMs = 0;
        entry.quiet++;
        continue;
      }
      entry.quiet = 0;
      entry.streak++;
      entry.busyCpuMs += used;
      entry.busyMs += at - last.at;
      if (entry.streak >= BUSY_SAMPLES && entry.busyCpuMs >= BUSY_MIN_CPU_MS) {
        entry.fired = true;
        entry.onBusy(Math.round((entry.busyCpuMs * 100) / entry.busyMs));
      }
    }
  }

  /**
   * A thread that outlived its `terminate()` runs in bursts (seen: 0–4 clock ticks a sample), so it
   * is judged on its mean over {@link BUSY_SAMPLES} samples, not sample by sample.
   */
  #judgeThread(entry: Watched, used: number, ms: number): void {
    entry.streak++;
    entry.busyCpuMs += used;
    entry.busyMs += ms;
    if (entry.streak < BUSY_SAMPLES) return;
    if (entry.busyCpuMs * 100 >= entry.percent * entry.busyMs) {
      entry.fired = true;
      entry.onBusy(Math.round((entry.busyCpuMs * 100) / entry.busyMs));
      return;
    }
    entry.streak = entry.busyCpuMs = entry.busyMs = 0;
  }
}

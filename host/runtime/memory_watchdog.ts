/**
 * The runtime memory bound (`runtimeMemoryMb`, SPEC §3.5): one timer per host samples the
 * resident memory of every runtime's process tree and reports a runtime that exceeds the limit.
 *
 * Why a watchdog and not a cgroup: a cgroup v2 `memory.max` is stronger (the kernel refuses the
 * page instead of the host noticing it within a tick), but it needs a delegated cgroup v2 subtree
 * with the `memory` controller, which most containers and unprivileged hosts do not have (this
 * machine: cgroup v1 memory, v2 with `hugetlb` only). {@link memoryBoundMechanism} says which is
 * available; this build always uses the watchdog and logs why.
 *
 * Cost: per runtime and tick one `statm` read per process in its tree (1 without the OS sandbox,
 * 3 with bubblewrap's two processes), ~8 µs each; the tree itself (one `children` read per
 * process) is re-read on each of a runtime's first {@link TREE_EVERY} ticks and then every
 * {@link TREE_EVERY} ticks. 256 unsandboxed runtimes: ~2 % of a core.
 *
 * @module
 */

/** Sampling interval, ms: a crossing is noticed within this plus one read. */
export const MEMORY_WATCH_INTERVAL_MS = 100;
/** The process tree of a runtime is re-walked every this many ticks. */
const TREE_EVERY = 10;

/** The page size of `statm`, found once from this process's own `statm` and `status`. */
let pageSize: number | undefined;

function readText(path: string): string | undefined {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return undefined;
  }
}

function systemPageSize(): number {
  if (pageSize !== undefined) return pageSize;
  pageSize = 4096;
  const statm = readText("/proc/self/statm");
  const status = readText("/proc/self/status");
  const pages = Number(statm?.split(" ")[1]);
  const kib = Number(/VmRSS:\s+(\d+)/.exec(status ?? "")?.[1]);
  if (pages > 0 && kib > 0) {
    // The two reads are not simultaneous: round the ratio to a power of two.
    pageSize = 2 ** Math.round(Math.log2((kib * 1024) / pages));
  }
  return pageSize;
}

/** Resident bytes of one process, or undefined when it is gone. */
export function residentBytes(pid: number): number | undefined {
  const statm = readText(`/proc/${pid}/statm`);
  if (statm === undefined) return undefined;
  return Number(statm.split(" ")[1]) * systemPageSize();
}

/** `pid` and its descendants through each process's main task (runtimes fork from it). */
export function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length && out.length < 64; i++) {
    const children = readText(`/proc/${out[i]}/task/${out[i]}/children`);
    if (!children) continue;
    for (const c of children.trim().split(/\s+/)) if (c !== "") out.push(Number(c));
  }
  return out;
}

interface Watched {
  pid: number;
  tree: number[];
  onExceeded: (bytes: number) => void;
  fired: boolean;
  /** Ticks seen; a young runtime's tree (a sandbox still starting) is walked on every tick. */
  ticks: number;
}

/** Which memory bound is in force, for the start-up log. */
export function memoryBoundMechanism(limitMb: number): string {
  if (limitMb === 0) return "runtime memory bound: off (runtimeMemoryMb=0)";
  const controllers = readText("/sys/fs/cgroup/cgroup.controllers");
  const why = controllers === undefined
    ? "no cgroup v2 hierarchy at /sys/fs/cgroup"
    : controllers.split(/\s+/).includes("memory")
    ? "cgroup v2 memory.max is not used by this build"
    : "the cgroup v2 memory controller is not delegated here";
  return `runtime memory bound: ${limitMb} MiB per runtime by an RSS watchdog every ` +
    `${MEMORY_WATCH_INTERVAL_MS} ms (${why})`;
}

/** One timer sampling every watched runtime; it runs only while something is watched. */
export class MemoryWatchdog {
  readonly limitBytes: number;
  #watched = new Set<Watched>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #tick = 0;

  /** @param limitMb the bound in MiB (> 0) */
  constructor(limitMb: number) {
    this.limitBytes = limitMb * 1024 * 1024;
  }

  /**
   * Watches the process tree rooted at `pid`.
   *
   * @param pid the spawned process
   * @param onExceeded called once, with the tree's resident bytes, when it exceeds the limit
   * @returns a function that stops watching
   */
  watch(pid: number, onExceeded: (bytes: number) => void): () => void {
    const entry: Watched = { pid, tree: [pid], onExceeded, fired: false, ticks: 0 };
    this.#watched.add(entry);
    if (this.#timer === undefined) {
      const timer = setInterval(() => this.#sample(), MEMORY_WATCH_INTERVAL_MS);
      Deno.unrefTimer(timer);
      this.#timer = timer;
    }
    return () => {
      this.#watched.delete(entry);
      if (this.#watched.size === 0 && this.#timer !== undefined) {
        clearInterval(this.#timer);
        this.#timer = undefined;
      }
    };
  }

  #sample(): void {
    const walk = this.#tick++ % TREE_EVERY === 0;
    for (const entry of this.#watched) {
      if (entry.fired) continue;
      if (walk || ++entry.ticks <= TREE_EVERY) entry.tree = processTree(entry.pid);
      let total = 0;
      for (const pid of entry.tree) total += residentBytes(pid) ?? 0;
      if (total > this.limitBytes) {
        entry.fired = true;
        entry.onExceeded(total);
      }
    }
  }
}

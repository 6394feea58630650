/**
 * The size of the warm runtime pool, from the recent demand (issue 29). Pure: no timers, no
 * processes; `session_manager.ts` asks it how many warm runtimes to hold and how many may start at
 * once.
 *
 * - The floor is `--warm-sessions`: the pool never holds fewer (while it can spawn). A floor of 0
 *   is no pool at all, whatever the demand (`--warm-sessions 0` spawns each runtime when needed).
 * - A burst of acquisitions (OpenSession, or a turn of a session that gave its runtime back) raises
 *   the target to the floor plus the runtimes taken during one spawn's time to `Ready`, at the rate
 *   seen over the last {@link WARM_RATE_WINDOW_MS}; never above `warmRuntimesMax` (the limit; a
 *   floor above it wins).
 * - No more acquisitions within the window than the floor holds (and a single one) is no burst: the
 *   target stays at the floor. A burst is over once no runtime was taken for
 *   {@link BURST_OVER_GAPS} of its mean gaps between acquisitions (at least {@link MIN_SPAN_MS}):
 *   the target is the floor again, and no spawn starts for a demand that has stopped (8 sessions
 *   opened within 0.2 s went on growing the pool for 0.4 s, three runtimes that were never taken
 *   and whose ~250 ms of start-up CPU each fell into the cells that followed: `bench:compare`'s
 *   8-session rate lost ~15%). Once no runtime was taken for a window, the manager stops the surplus.
 * - Spawns that have not reached `Ready` are bounded by `runtimeSpawnConcurrency` (0: the number of
 *   cores): starting runtimes share the cores, and more at once only makes each later.
 *
 * @module
 */

/** The window over which the acquisition rate is measured, ms. */
export const WARM_RATE_WINDOW_MS = 2_000;

/** The spawn-to-`Ready` time assumed before the first is measured, ms. */
const INITIAL_READY_MS = 150;

/** The shortest span a rate is measured over (two takes 1 ms apart are no rate of 2,000/s), ms. */
const MIN_SPAN_MS = 100;

/** A burst is over after this many of its mean gaps between takes with no take (see the module doc). */
const BURST_OVER_GAPS = 3;

/** The spawns a host may have starting at once: `runtimeSpawnConcurrency`, or the cores when 0. */
export function spawnConcurrency(limit: number, cores = navigator.hardwareConcurrency ?? 1): number {
  return limit > 0 ? limit : Math.max(1, cores);
}

/** The adaptive target of a warm pool. */
export class WarmPoolSizer {
  #takes: number[] = [];
  #readyMs = INITIAL_READY_MS;

  /**
   * @param max `warmRuntimesMax`: the most warm runtimes a burst grows the pool to
   * @param now the clock, ms
   */
  constructor(readonly max: number, private readonly now: () => number) {}

  /** Records one acquisition of a runtime. */
  took(): void {
    this.#takes.push(this.now());
    this.#prune();
  }

  /** Records how long one spawn took to `Ready` (a moving average of recent spawns). */
  readyAfter(ms: number): void {
    this.#readyMs = this.#readyMs * 0.7 + Math.max(0, ms) * 0.3;
  }

  /** The current spawn-to-`Ready` estimate, ms. */
  get readyMs(): number {
    return this.#readyMs;
  }

  /** Acquisitions within the window. */
  get recentTakes(): number {
    this.#prune();
    return this.#takes.length;
  }

  /**
   * How many warm runtimes to hold now.
   *
   * @param floor `--warm-sessions` (the pool's size without demand)
   * @returns the target, between `floor` and `max(floor, max)`
   */
  target(floor: number): number {
    this.#prune();
    const n = this.#takes.length;
    // `--warm-sessions 0` is no pool at all: every runtime is spawned when it is needed.
    if (floor === 0 || n <= Math.max(1, floor) || this.max <= floor) return floor;
    const first = this.#takes[0];
    const last = this.#takes[n - 1];
    const meanGap = (last - first) / (n - 1);
    if (this.now() - last > Math.max(MIN_SPAN_MS, BURST_OVER_GAPS * meanGap)) return floor;
    const span = Math.max(MIN_SPAN_MS, this.now() - first);
    const demand = Math.ceil((n / span) * this.#readyMs);
    return Math.min(this.max, floor + demand);
  }

  #prune(): void {
    const since = this.now() - WARM_RATE_WINDOW_MS;
    let drop = 0;
    while (drop < this.#takes.length && this.#takes[drop] <= since) drop++;
    if (drop > 0) this.#takes.splice(0, drop);
  }
}

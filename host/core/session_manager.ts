/**
 * The session registry, admission permits (SPEC §9.5) and the warm runtime pool (SPEC §9.3).
 *
 * @module
 */
import { createWorkerCodec, type WorkerCodec } from "../../proto/worker_codec.ts";
import type { Clock } from "./clock.ts";
import { HostError } from "./errors.ts";
import type { Limits } from "./limits.ts";
import { HostMemoryBudget } from "./memory_budget.ts";
import type { Logger } from "../ops/log.ts";
import { type Permit, Permits, RecentIds } from "./permits.ts";
import type { RuntimeTransport } from "../runtime/runtime_transport.ts";
import type { Session } from "./session.ts";
import { parseUuid, validateIdentifier } from "./validate.ts";
import { type RuntimeFactory, spawnRuntimeProcess } from "../runtime/runtime_process.ts";
import { MemoryWatchdog } from "../runtime/memory_watchdog.ts";
import { IdleCpuWatchdog } from "../runtime/cpu_watchdog.ts";
import type { OsSandbox } from "../runtime/os_sandbox.ts";
import { type AdmissionLimit, NO_TELEMETRY, type Telemetry } from "../ops/telemetry.ts";
import { spawnConcurrency, WARM_RATE_WINDOW_MS, WarmPoolSizer } from "./warm_pool.ts";

/**
 * The session module (and with it the rest of the session core), loaded by the first manager after
 * its warm runtimes have been spawned: a host's first runtime starts ~40 ms of this thread sooner.
 */
let sessionModule: Promise<typeof import("./session.ts")> | undefined;
/** The `Session` class once its module is loaded. */
let SessionClass: typeof Session | undefined;

function loadSession(): Promise<typeof import("./session.ts")> {
  return sessionModule ??= import("./session.ts").then((module) => {
    SessionClass = module.Session;
    return module;
  });
}

/**
 * How long a taken warm runtime's replacement waits at most while the pool still holds others. It
 * starts sooner, {@link PULLED_REFILL_DELAY_MS} after the taking session's first outcome is ready or
 * its closure, whichever comes first (`bench:reference`'s open and open + first cell rows: a
 * replacement started at a fixed 250 ms booted during the next session's open and first cell).
 */
const REFILL_DELAY_MS = 250;
/** A deferred refill's delay once pulled forward: after the outcome's reply has been written. */
const PULLED_REFILL_DELAY_MS = 5;
/**
 * While idle sessions hand their runtimes over (`runtimeHandover`), a refill of a pool that still
 * holds a runtime waits until no handover came for this long: the handovers serve the new sessions,
 * and a runtime's start (~250 ms of CPU) during them slowed each of them (bench:scale's turn in
 * every session, where one runtime passes from session to session).
 */
const HANDOVER_QUIET_MS = 100;

/** How session runtimes are made. */
export interface RuntimeFactoryOptions {
  deno: string;
  prefix?: readonly string[];
  /** Argv that starts this program as a session runtime, instead of `deno run` (SPEC §9.9). */
  self?: readonly string[];
  runtimeDir: string;
  workParent: string;
  /** The OS sandbox around each runtime (`--os-sandbox`), when in force. */
  sandbox?: OsSandbox;
  /** The protocol version the host expects in `Ready` (default the current one). */
  protocolVersion?: number;
}

/** Construction options of a {@link SessionManager}. */
export interface SessionManagerOptions {
  limits: Limits;
  log: Logger;
  clock: Clock;
  runtime: RuntimeFactoryOptions;
  warmSessions: number;
  /**
   * Makes one session runtime from its resolved options (default {@link spawnRuntimeProcess}: a
   * runtime subprocess); in-process isolation and a host's `runtimeFactory` come in here.
   */
  spawn?: RuntimeFactory;
  /** Metrics and tracing (default off). */
  telemetry?: Telemetry;
}

/** What OpenSession asks for. */
export interface OpenOptions {
  /** A caller-chosen session ID (already validated); default a fresh UUIDv4. */
  sessionId?: string;
  outputMode: number;
  maxYieldTimeMs?: bigint;
  cellHeapMb: number;
  /** The session's own delegate capacity (default `maxPendingDelegateCallsPerSession`). */
  maxPendingDelegateCalls?: number;
  /** The delegate pool the session shares (default the host-wide {@link SessionManager.delegates}). */
  delegatePermits?: Permits;
  /** Outcomes are written as JSON (`OpenSessionRequest.jsonOutcomeSizes`); default false. */
  jsonOutcomeSizes?: boolean;
  /** Outcomes and delegate requests share one ordered channel (`OpenSessionRequest.serialOutcomes`). */
  serialOutcomes?: boolean;
  /** A Wait pending at the closure gets its cell's Terminated outcome (`OpenSessionRequest.closureTerminatesWaits`). */
  closureTerminatesWaits?: boolean;
  /** The session's client (`OpenSessionRequest.client`); default one client for the host. */
  client?: string;
}

/** Registry and admission. */
export class SessionManager implements AsyncDisposable {
  readonly limits: Limits;
  /** The host's memory budget (`hostBufferedBytes`): unread output and stored values of every session. */
  readonly memory: HostMemoryBudget;
  readonly requests: Permits;
  readonly controls: Permits;
  readonly activeCells: Permits;
  /** Host-wide delegate permits: outstanding tool invocations and notifications being published. */
  readonly delegates: Permits;
  /** Metrics and tracing (no-ops when off). */
  readonly telemetry: Telemetry;

  #options: SessionManagerOptions;
  #codec: WorkerCodec;
  #sessions = new Map<string, Session>();
  /** Each session's client (`runtimeHandover=1` hands runtimes over only among one client's sessions). */
  #clients = new WeakMap<Session, string>();
  /** The session each runtime was last handed over from (it gets it back at the taker's close). */
  #lentBy = new WeakMap<RuntimeTransport, Session>();
  /** IDs of sessions that were removed, so that a caller-chosen ID is never reused. */
  #removedIds: RecentIds;
  #slots: Permits;
  #nextRef = 0;
  #warm: RuntimeTransport[] = [];
  #requestPathSpawns = 0;
  #allRuntimes = new Set<RuntimeTransport>();
  #draining = false;
  #spawned = 0;
  /** The pool's adaptive target (`warm_pool.ts`). */
  #sizer: WarmPoolSizer;
  /** Spawns not yet `Ready` (or failed), bounded by `runtimeSpawnConcurrency` for refills. */
  #starting = 0;
  #spawnCap: number;
  /** Stops the surplus of a burst once demand has passed. */
  #trimTimer: ReturnType<typeof setTimeout> | undefined;
  /** The one memory timer of this host's runtimes (`runtimeMemoryMb`), when the bound is on. */
  #memoryWatchdog: MemoryWatchdog | undefined;
  /** The one idle CPU timer of this host's runtimes (`runtimeIdleCpuPercent`), when the bound is on. */
  #cpuWatchdog: IdleCpuWatchdog | undefined;

  /** @param options see {@link SessionManagerOptions} */
  constructor(options: SessionManagerOptions) {
    this.#options = options;
    this.limits = options.limits;
    this.telemetry = options.telemetry ?? NO_TELEMETRY;
    this.#slots = new Permits(options.limits.maxSessions);
    this.memory = new HostMemoryBudget(options.limits.hostBufferedBytes);
    this.#removedIds = new RecentIds(options.limits.maxRecentIds);
    this.requests = new Permits(options.limits.maxInFlightRequests);
    this.controls = new Permits(options.limits.maxInFlightControlRequests);
    this.activeCells = new Permits(options.limits.maxActiveCells);
    this.delegates = new Permits(options.limits.maxPendingDelegateCalls);
    this.#codec = createWorkerCodec();
    if (options.limits.runtimeMemoryMb > 0) {
      this.#memoryWatchdog = new MemoryWatchdog(options.limits.runtimeMemoryMb);
    }
    if (options.limits.runtimeIdleCpuPercent > 0) {
      this.#cpuWatchdog = new IdleCpuWatchdog(options.limits.runtimeIdleCpuPercent);
    }
    this.#sizer = new WarmPoolSizer(options.limits.warmRuntimesMax, () => options.clock.now());
    this.#spawnCap = spawnConcurrency(options.limits.runtimeSpawnConcurrency);
    this.#refill();
    loadSession();
  }

  /** Whether the host is draining (no new sessions). */
  get draining(): boolean {
    return this.#draining;
  }

  /** Open sessions (also read by `HostState`, the diagnostics view). */
  get sessions(): ReadonlyMap<string, Session> {
    return this.#sessions;
  }

  /** Warm runtimes waiting to be handed out (a gauge; `HostState`). */
  get warmCount(): number {
    return this.#warm.length;
  }

  /** Every runtime this manager still owns (`HostState`). */
  get runtimes(): ReadonlySet<RuntimeTransport> {
    return this.#allRuntimes;
  }

  /** A resize of the warm pool that waits ({@link resizeWarmPool}); cleared when the host drains. */
  #resizeTimer: ReturnType<typeof setTimeout> | undefined;

  /**
   * Resizes the warm pool to `count` runtimes in `delayMs`, then fills it. Until then the replacement
   * of a runtime taken from the pool waits too (as while other warm runtimes remain). A host starts
   * with one warm runtime and the others later (`assembleHost`): runtimes that start together share
   * the cores with the host's own start-up and with its first session's first cells.
   *
   * @param count the pool's new size
   * @param delayMs how long to wait
   */
  resizeWarmPool(count: number, delayMs: number): void {
    clearTimeout(this.#resizeTimer);
    if (this.#draining) return;
    this.#resizeTimer = setTimeout(() => {
      this.#resizeTimer = undefined;
      this.#options = { ...this.#options, warmSessions: count };
      this.#refill();
    }, delayMs);
  }

  /** Runtimes spawned so far (`HostState`). */
  get spawnCount(): number {
    return this.#spawned;
  }

  /** Runtimes spawned on a request's path because no warm one was there (`HostState`, SPEC §12 113). */
  get requestPathSpawnCount(): number {
    return this.#requestPathSpawns;
  }

  #spawn(): RuntimeTransport {
    this.#spawned++;
    this.telemetry.metrics.runtimeSpawned();
    const o = this.#options;
    const runtime = (o.spawn ?? spawnRuntimeProcess)({
      codec: this.#codec,
      deno: o.runtime.deno,
      prefix: o.runtime.prefix,
      self: o.runtime.self,
      runtimeDir: o.runtime.runtimeDir,
      workParent: o.runtime.workParent,
      protocolVersion: o.runtime.protocolVersion,
      workerMainHeapMb: o.limits.workerMainHeapMb,
      maxWorkerFrameBytes: o.limits.maxWorkerFrameBytes,
      stderrTailBytes: o.limits.stderrTailBytes,
      workerKillGraceMs: o.limits.workerKillGraceMs,
      memoryWatchdog: this.#memoryWatchdog,
      cpuWatchdog: this.#cpuWatchdog,
      sandbox: o.runtime.sandbox,
      unresponsiveMs: o.limits.runtimeUnresponsiveMs,
      log: o.log,
    });
    this.#allRuntimes.add(runtime);
    // `ended` never rejects: every runtime's end is watched here, from its spawn.
    runtime.ended.then(() => this.#ended(runtime));
    this.#starting++;
    const started = this.#options.clock.now();
    const settled = (ok: boolean) => {
      this.#starting--;
      if (ok) this.#sizer.readyAfter(this.#options.clock.now() - started);
      // A slot for the next spawn of a growing pool.
      if (!this.#draining && this.#refillTimer === undefined) this.#refill();
    };
    runtime.ready.then(() => settled(true), () => settled(false));
    return runtime;
  }

  #ended(runtime: RuntimeTransport): void {
    this.#allRuntimes.delete(runtime);
    const at = this.#warm.indexOf(runtime);
    if (at < 0) return;
    // A warm runtime that dies is replaced and never handed out.
    this.#warm.splice(at, 1);
    if (!this.#draining) this.#options.log.warn("warm session runtime ended; replacing it");
    this.#refill();
  }

  /** A refill deferred by {@link takeRuntime}; cleared when the host drains. */
  #refillTimer: ReturnType<typeof setTimeout> | undefined;
  /** Whether the deferred refill was already pulled forward (by a first outcome or a closure). */
  #refillPulled = false;
  /** When a runtime was last handed over ({@link HANDOVER_QUIET_MS}). */
  #lastHandoverAt = -Infinity;

  /**
   * Starts a deferred refill soon: the session whose open deferred it (`timer`) has its first
   * outcome ready or is closed, so the host is quiet for a moment.
   */
  #pullRefill(timer: ReturnType<typeof setTimeout> | undefined): void {
    if (timer === undefined || this.#refillTimer !== timer || this.#refillPulled || this.#draining) return;
    this.#scheduleRefill(PULLED_REFILL_DELAY_MS, true);
  }

  /** (Re)arms the deferred refill: it runs after `delayMs`; `pulled` once it may not be pulled forward. */
  #scheduleRefill(delayMs: number, pulled: boolean): void {
    clearTimeout(this.#refillTimer);
    this.#refillPulled = pulled;
    this.#refillTimer = setTimeout(() => {
      this.#refillTimer = undefined;
      const quiet = this.#lastHandoverAt + HANDOVER_QUIET_MS - this.#options.clock.now();
      if (quiet > 0 && this.#warm.length > 0) return this.#scheduleRefill(quiet, true);
      this.#refill();
    }, delayMs);
  }

  /** The pool's size now: `--warm-sessions`, or more during a burst (`warm_pool.ts`). */
  get warmTarget(): number {
    return this.#sizer.target(this.#options.warmSessions);
  }

  #refill(): void {
    const target = this.warmTarget;
    const floor = this.#options.warmSessions;
    // The floor is always kept; growth beyond it waits for a free spawn slot.
    while (
      !this.#draining && this.#warm.length < target &&
      (this.#warm.length < floor || this.#starting < this.#spawnCap)
    ) {
      const runtime = this.#spawn();
      runtime.ready.catch((error) => {
        // A spare stopped by the host's own shutdown is no failure.
        if (!this.#draining) this.#options.log.error(String((error as Error).message));
        // Never rejects; its end is watched from the spawn.
        runtime.kill();
      });
      this.#warm.push(runtime);
    }
  }

  /**
   * Takes a runtime: with `runtimeHandover`, an idle session's; else a warm one when available,
   * else a fresh spawn; waits for its `Ready`.
   *
   * @param client the taking session's client (`runtimeHandover=1` takes only from its sessions)
   * @returns a ready runtime
   * @throws {HostError} `runtime_failed` when it failed to start (e.g. version mismatch)
   */
  async takeRuntime(client = ""): Promise<RuntimeTransport> {
    const handed = this.#handOver(client);
    if (handed) return handed;
    this.#sizer.took();
    this.#armTrim();
    let runtime = this.#warm.shift();
    const burst = this.warmTarget > this.#options.warmSessions;
    if (!runtime) {
      this.#requestPathSpawns++;
      runtime = this.#spawn();
      this.#refill();
    } else {
      // The replacement is spawned after this request's reply went out: a spawn (two directories,
      // fork and exec) holds the host's thread for a few milliseconds, and a starting runtime then
      // takes a core for ~100 ms, which the new session's first cells would share (first Execute
      // ~15 ms instead of ~8 on 2 cores). While other warm runtimes remain, it waits
      // REFILL_DELAY_MS; an emptied pool is refilled at once.
      // During a burst the pool grows at once.
      const delay = !burst && (this.#warm.length > 0 || this.#resizeTimer !== undefined)
        ? REFILL_DELAY_MS
        : 0;
      if (delay === 0 || this.#refillTimer === undefined) this.#scheduleRefill(delay, delay === 0);
    }
    try {
      await runtime.ready;
    } catch (error) {
      await runtime.kill();
      throw new HostError("runtime_failed", (error as Error).message, { cause: error });
    }
    if (!runtime.alive) throw new HostError("runtime_failed", "code-mode session runtime ended before use");
    return runtime;
  }

  /**
   * With `runtimeHandover`: the runtime of the session idle the longest (no live cell), handed over
   * at once, before a warm one is taken. A warm runtime taken costs a replacement's start, ~250 ms
   * of CPU (a Deno process and its first `node:worker_threads` Worker, `bench/README.md`), and one
   * still booting makes the first cell wait; a handover costs the new session's `Configure` and
   * stored values, and the old session's next cell a handover in turn. The warm pool serves when no
   * session is idle, and the pool grows only with the acquisitions it serves.
   */
  #handOver(client: string): RuntimeTransport | undefined {
    const scope = this.limits.runtimeHandover;
    if (scope === 0 || this.#draining) return undefined;
    let donor: Session | undefined;
    let since = Infinity;
    for (const session of this.#sessions.values()) {
      if (scope === 1 && this.#clients.get(session) !== client) continue;
      const idle = session.handover.handoverIdleSince;
      if (idle !== undefined && idle < since) [donor, since] = [session, idle];
    }
    const runtime = donor?.handover.handOver();
    if (runtime) {
      this.#lastHandoverAt = this.#options.clock.now();
      this.telemetry.metrics.runtimeHandedOver();
      this.#lentBy.set(runtime, donor!);
    }
    return runtime;
  }

  /**
   * A session closed with a runtime it was handed (`runtimeHandover`): the runtime goes back to
   * the session it was taken from, if that one is still open and has none (it would otherwise take
   * another's, or a start, for its next cell).
   */
  #giveBack(runtime: RuntimeTransport, detach: () => RuntimeTransport): boolean {
    const lender = this.#lentBy.get(runtime);
    this.#lentBy.delete(runtime);
    if (!lender || this.#draining || this.#sessions.get(lender.id) !== lender) return false;
    if (!lender.handover.canAdopt) return false;
    const detached = detach();
    if (lender.handover.adopt(detached)) this.telemetry.metrics.runtimeHandedOver();
    // Never rejects; its end is watched from its spawn.
    else detached.stop();
    return true;
  }

  /**
   * Once a window passes with no acquisition (the timer restarts with each), the warm runtimes
   * above the floor are stopped.
   */
  #armTrim(): void {
    clearTimeout(this.#trimTimer);
    this.#trimTimer = setTimeout(() => {
      this.#trimTimer = undefined;
      if (this.#draining) return;
      const surplus = this.#warm.splice(this.warmTarget);
      for (const runtime of surplus) runtime.stop();
    }, WARM_RATE_WINDOW_MS + 50);
    Deno.unrefTimer(this.#trimTimer);
  }

  /**
   * Takes a session slot (SPEC §3.1 step 1).
   *
   * @returns the slot, held until the session is removed
   * @throws {HostError} `shutting_down` while draining, `overloaded` when full
   */
  acquireSlot(): Permit {
    if (this.#draining) throw new HostError("shutting_down", "code-mode host is shutting down");
    const slot = this.#slots.tryAcquire();
    if (!slot) throw this.overloaded("maxSessions", "code-mode host has too many sessions");
    return slot;
  }

  /**
   * Opens and registers a session on a ready runtime.
   *
   * @param options mode and limits
   * @param slot the session slot (released when the session is removed)
   * @returns the registered session
   */
  async open(options: OpenOptions, slot: Permit): Promise<Session> {
    let runtime: RuntimeTransport;
    try {
      const taken = this.#chosenIdRefusal(options.sessionId);
      if (taken) throw taken;
      runtime = await this.takeRuntime(options.client);
      SessionClass ?? await loadSession();
    } catch (error) {
      slot.release();
      throw error;
    }
    const refusal = this.#draining
      ? new HostError("shutting_down", "code-mode host is shutting down")
      : this.#chosenIdRefusal(options.sessionId);
    if (refusal) {
      slot.release();
      await runtime.stop();
      throw refusal;
    }
    const ref = ++this.#nextRef;
    const memory = this.memory;
    const refill = this.#refillTimer;
    const session = new SessionClass!({
      id: options.sessionId ?? crypto.randomUUID(),
      ref,
      outputMode: options.outputMode,
      maxYieldTimeMs: options.maxYieldTimeMs,
      cellHeapMb: options.cellHeapMb,
      runtime,
      limits: this.limits,
      log: this.#options.log,
      clock: this.#options.clock,
      replaceRuntime: () => this.takeRuntime(options.client),
      giveBackRuntime: (given, detach) => this.#giveBack(given, detach),
      hostDelegatePermits: options.delegatePermits ?? this.delegates,
      sessionDelegateCapacity: options.maxPendingDelegateCalls,
      jsonOutcomeSizes: options.jsonOutcomeSizes,
      serialOutcomes: options.serialOutcomes,
      closureTerminatesWaits: options.closureTerminatesWaits,
      telemetry: this.telemetry,
      budget: memory.account(() =>
        this.#options.log.warn("host memory budget reached: a session's output or stored values refused", {
          session_ref: ref,
          budget_bytes: memory.total,
          used_bytes: memory.used,
        })
      ),
      onRemoved: (removed) => {
        if (this.#sessions.get(removed.id) === removed) this.#sessions.delete(removed.id);
        this.#removedIds.add(removed.id);
        slot.release();
        this.#pullRefill(refill);
      },
      onObserved: () => this.#pullRefill(refill),
    });
    this.#sessions.set(session.id, session);
    this.#clients.set(session, options.client ?? "");
    this.#options.log.debug("session opened", { session_id: session.id, session_ref: session.ref });
    return session;
  }

  /** The refusal of a caller-chosen session ID that is open or was used before, if any. */
  #chosenIdRefusal(id: string | undefined): HostError | undefined {
    if (id === undefined) return undefined;
    if (this.#sessions.has(id)) {
      return new HostError("session_exists", `code-mode session ID \`${id}\` is already open`);
    }
    if (this.#removedIds.has(id)) {
      return new HostError("id_reused", `code-mode session ID \`${id}\` was reused`);
    }
    return undefined;
  }

  /**
   * Validates a session ID and finds its session (SPEC §2.6–§2.7).
   *
   * @param sessionId the request's `session_id`
   * @param options `uuid`: the ID must parse as a UUID (default true: host-generated IDs);
   *   `unchecked`: no identifier check at all (JSON host V1's lenient IDs)
   * @returns the session
   * @throws {HostError} `invalid_request` for a malformed ID, `unknown_session` for an unknown one
   */
  lookup(sessionId: string | undefined, options: { uuid?: boolean; unchecked?: boolean } = {}): Session {
    const uuid = !options.unchecked && (options.uuid ?? true);
    const id = options.unchecked ? sessionId ?? "" : validateIdentifier(
      sessionId,
      "session ID",
      this.limits.maxIdentifierBytes,
      { uuid },
    );
    // Any form of the UUID names the session; the refusal quotes the ID as it was sent.
    const session = this.#sessions.get(uuid ? parseUuid(id)! : id);
    if (!session) throw new HostError("unknown_session", `unknown code-mode session ${id}`);
    session.touch();
    return session;
  }

  /**
   * Takes a permit or fails with `overloaded`.
   *
   * @param kind which permit
   * @returns the permit
   */
  permit(kind: "request" | "control"): Permit {
    const permit = (kind === "request" ? this.requests : this.controls).tryAcquire();
    if (!permit) {
      throw kind === "request"
        ? this.overloaded("maxInFlightRequests", "code-mode host has too many in-flight requests")
        : this.overloaded(
          "maxInFlightControlRequests",
          "code-mode host has too many in-flight control requests",
        );
    }
    return permit;
  }

  /**
   * An admission refusal (SPEC §9.5), counted by the limit that refused.
   *
   * @param limit the limit
   * @param message the SPEC's message
   * @returns the `overloaded` error to throw
   */
  overloaded(limit: AdmissionLimit, message: string): HostError {
    this.telemetry.metrics.admissionRefused(limit);
    return new HostError("overloaded", message);
  }

  /**
   * Starts draining: new sessions are refused; every session is closed as for shutdown, and
   * every runtime (warm ones included) is stopped and reaped.
   */
  async drain(): Promise<void> {
    this.#draining = true;
    clearTimeout(this.#refillTimer);
    clearTimeout(this.#resizeTimer);
    clearTimeout(this.#trimTimer);
    const warm = this.#warm.splice(0);
    await Promise.all([
      ...[...this.#sessions.values()].map((s) => s.close("shutdown")),
      ...warm.map((r) => r.stop()),
    ]);
    await Promise.all([...this.#allRuntimes].map((r) => r.stop()));
  }

  /** Kills every runtime at once and reaps them. */
  async killAll(): Promise<void> {
    this.#draining = true;
    clearTimeout(this.#refillTimer);
    clearTimeout(this.#resizeTimer);
    clearTimeout(this.#trimTimer);
    await Promise.all([...this.#allRuntimes].map((r) => r.kill()));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.drain();
  }
}

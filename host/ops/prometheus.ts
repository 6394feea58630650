/**
 * The host's metrics in Prometheus text format, kept with `prom-client` (a maintained registry
 * that runs unchanged on Deno 2.9.6): {@link PrometheusMetrics} implements the core's
 * {@link HostMetrics} and renders every metric for `GET /metrics` (`ops_server.ts`).
 *
 * - Every labelled series exists from the start with the value 0, so a scrape names all of them.
 * - Gauges (open sessions, warm runtimes) are read from the engine at scrape time.
 * - Counting is an increment on a map: it never waits and never throws.
 *
 * @module
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type {
  AdmissionLimit,
  CellOutcomeLabel,
  CrashLabel,
  HostMetrics,
  TimedMethod,
  ToolCallOutcome,
} from "./telemetry.ts";

/** Where the gauges read their values at scrape time. */
export interface MetricsGauges {
  /** Open sessions. */
  sessionsOpen(): number;
  /** Warm runtimes waiting in the pool. */
  warmRuntimes(): number;
}

const OUTCOMES: CellOutcomeLabel[] = [
  "completed",
  "failed",
  "terminated",
  "heap_limit",
  "restart",
  "crashed",
];
const METHODS: TimedMethod[] = ["Execute", "Wait", "Terminate"];
const CRASHES: CrashLabel[] = ["exit", "signal", "heap", "memory", "unresponsive", "protocol", "fault"];
const TOOL_OUTCOMES: ToolCallOutcome[] = ["succeeded", "failed", "cancelled"];
const LIMITS: AdmissionLimit[] = [
  "maxSessions",
  "maxInFlightRequests",
  "maxInFlightControlRequests",
  "maxActiveCells",
  "maxActiveCellsPerSession",
  "maxSubscriptionsPerSession",
];

/** Latency buckets, seconds: a warm Execute takes a few ms, a runtime restart ~100 ms, a yield up to 30 s. */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * The host's Prometheus registry.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { PrometheusMetrics } from "./prometheus.ts";
 *
 * const metrics = new PrometheusMetrics({ sessionsOpen: () => 2, warmRuntimes: () => 1 });
 * metrics.cellClosed("completed");
 * const text = await metrics.render();
 * assert.match(text, /^code_mode_cells_total\{outcome="completed"\} 1$/m);
 * assert.match(text, /^code_mode_sessions_open 2$/m);
 * ```
 */
export class PrometheusMetrics implements HostMetrics {
  /** The registry holding every metric of this host. */
  readonly registry: Registry = new Registry();
  readonly #cells: Counter<"outcome">;
  readonly #latency: Histogram<"method">;
  readonly #spawns: Counter;
  readonly #restarts: Counter;
  readonly #idleCpuReplacements: Counter;
  readonly #releases: Counter;
  readonly #handovers: Counter;
  readonly #threadsLeftRunning: Counter;
  readonly #crashes: Counter<"reason">;
  readonly #output: Counter<"disposition">;
  readonly #tools: Counter<"outcome">;
  readonly #refusals: Counter<"limit">;
  readonly #spansDropped: Counter;

  /** @param gauges where the gauges read their values */
  constructor(gauges: MetricsGauges) {
    const registers = [this.registry];
    new Gauge({
      name: "code_mode_sessions_open",
      help: "Open code-mode sessions.",
      registers,
      collect() {
        this.set(gauges.sessionsOpen());
      },
    });
    new Gauge({
      name: "code_mode_warm_runtimes",
      help: "Pre-spawned session runtimes waiting in the warm pool.",
      registers,
      collect() {
        this.set(gauges.warmRuntimes());
      },
    });
    this.#cells = new Counter({
      name: "code_mode_cells_total",
      help: "Cells closed, by outcome.",
      labelNames: ["outcome"],
      registers,
    });
    this.#latency = new Histogram({
      name: "code_mode_request_duration_seconds",
      help: "Latency of Execute (to its initial outcome), Wait and Terminate, seconds.",
      labelNames: ["method"],
      buckets: BUCKETS,
      registers,
    });
    this.#spawns = new Counter({
      name: "code_mode_runtime_spawns_total",
      help: "Session runtimes spawned.",
      registers,
    });
    this.#restarts = new Counter({
      name: "code_mode_runtime_restarts_total",
      help: "Session runtimes restarted to stop a cell.",
      registers,
    });
    this.#idleCpuReplacements = new Counter({
      name: "code_mode_runtime_cpu_replacements_total",
      help: "Session runtimes replaced because they burned CPU while none of their session's cells ran.",
      registers,
    });
    this.#releases = new Counter({
      name: "code_mode_runtime_releases_total",
      help: "Session runtimes given back by idle sessions (idleRuntimeReleaseMs).",
      registers,
    });
    this.#handovers = new Counter({
      name: "code_mode_runtime_handovers_total",
      help:
        "Idle sessions' runtimes handed to sessions that needed one while none was warm (runtimeHandover).",
      registers,
    });
    this.#threadsLeftRunning = new Counter({
      name: "code_mode_cell_threads_left_running_total",
      help:
        "Cell Worker threads that kept burning CPU after their cell ended and could not be stopped (in-process isolation).",
      registers,
    });
    this.#crashes = new Counter({
      name: "code_mode_runtime_crashes_total",
      help: "Session runtimes that ended on their own, by reason.",
      labelNames: ["reason"],
      registers,
    });
    this.#output = new Counter({
      name: "code_mode_output_bytes_total",
      help: "Cell output bytes delivered in outcomes, and left out of them (limits, oversized outcomes).",
      labelNames: ["disposition"],
      registers,
    });
    this.#tools = new Counter({
      name: "code_mode_tool_calls_total",
      help: "Tool calls of cells, by outcome.",
      labelNames: ["outcome"],
      registers,
    });
    this.#refusals = new Counter({
      name: "code_mode_admission_refusals_total",
      help: "Requests refused RESOURCE_EXHAUSTED, by admission limit.",
      labelNames: ["limit"],
      registers,
    });
    this.#spansDropped = new Counter({
      name: "code_mode_spans_dropped_total",
      help: "Trace spans dropped: the export queue was full or the export failed.",
      registers,
    });
    for (const outcome of OUTCOMES) this.#cells.inc({ outcome }, 0);
    for (const method of METHODS) this.#latency.zero({ method });
    for (const reason of CRASHES) this.#crashes.inc({ reason }, 0);
    for (const disposition of ["delivered", "dropped"]) this.#output.inc({ disposition }, 0);
    for (const outcome of TOOL_OUTCOMES) this.#tools.inc({ outcome }, 0);
    for (const limit of LIMITS) this.#refusals.inc({ limit }, 0);
  }

  /** The metrics' content type. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /**
   * Renders every metric in Prometheus text format.
   *
   * @returns the exposition text
   */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  cellClosed(outcome: CellOutcomeLabel): void {
    this.#cells.inc({ outcome });
  }
  requestDone(method: TimedMethod, seconds: number): void {
    this.#latency.observe({ method }, seconds);
  }
  runtimeSpawned(): void {
    this.#spawns.inc();
  }
  runtimeRestarted(): void {
    this.#restarts.inc();
  }
  runtimeReplacedIdleCpu(): void {
    this.#idleCpuReplacements.inc();
  }
  runtimeReleased(): void {
    this.#releases.inc();
  }
  runtimeHandedOver(): void {
    this.#handovers.inc();
  }
  cellThreadLeftRunning(): void {
    this.#threadsLeftRunning.inc();
  }
  runtimeCrashed(reason: CrashLabel): void {
    this.#crashes.inc({ reason });
  }
  output(delivered: number, dropped: number): void {
    if (delivered > 0) this.#output.inc({ disposition: "delivered" }, delivered);
    if (dropped > 0) this.#output.inc({ disposition: "dropped" }, dropped);
  }
  toolCall(outcome: ToolCallOutcome): void {
    this.#tools.inc({ outcome });
  }
  admissionRefused(limit: AdmissionLimit): void {
    this.#refusals.inc({ limit });
  }
  /**
   * Counts trace spans that were dropped.
   *
   * @param count how many
   */
  spansDropped(count: number): void {
    if (count > 0) this.#spansDropped.inc(count);
  }
}

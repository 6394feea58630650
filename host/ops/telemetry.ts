/**
 * The small interfaces through which the core and the front doors report what operators watch:
 * counters and latencies ({@link HostMetrics}) and trace spans ({@link HostTracer}). This file
 * imports nothing: the Prometheus registry (`prometheus.ts`) and the OpenTelemetry exporter
 * (`otel.ts`) are loaded only when they are switched on, and otherwise every call lands on
 * {@link NO_TELEMETRY}, whose methods do nothing.
 *
 * - Nothing here throws or waits: a report is a counter increment or a span kept in a bounded
 *   queue, so telemetry can never block or fail a cell.
 *
 * @module
 */

/** How a cell ended, as counted by `code_mode_cells_total{outcome}`. */
export type CellOutcomeLabel =
  /** Completed without an error text. */
  | "completed"
  /** Completed with an error text (a thrown error, a refused source, the stored-value cap). */
  | "failed"
  /** Ended by Terminate (or by its session's close) before it completed. */
  | "terminated"
  /** Its isolate reached its heap limit. */
  | "heap_limit"
  /** Its runtime was restarted to stop another cell of the session. */
  | "restart"
  /** Its session runtime crashed. */
  | "crashed";

/** The operations whose latency is measured (`code_mode_request_duration_seconds{method}`). */
export type TimedMethod = "Execute" | "Wait" | "Terminate";

/** How a tool call ended (`code_mode_tool_calls_total{outcome}`). */
export type ToolCallOutcome = "succeeded" | "failed" | "cancelled";

/** What ended a session runtime on its own (`code_mode_runtime_crashes_total{reason}`). */
export type CrashLabel = "exit" | "signal" | "heap" | "memory" | "unresponsive" | "protocol" | "fault";

/** The admission limits of SPEC §9.5 whose refusals are counted (`…_admission_refusals_total{limit}`). */
export type AdmissionLimit =
  | "maxSessions"
  | "maxInFlightRequests"
  | "maxInFlightControlRequests"
  | "maxActiveCells"
  | "maxActiveCellsPerSession"
  | "maxSubscriptionsPerSession";

/** The counters and histograms the core and the doors feed. */
export interface HostMetrics {
  /** A cell closed (its `CellClosed`). */
  cellClosed(outcome: CellOutcomeLabel): void;
  /** An Execute (to its initial outcome), Wait or Terminate ended, successfully or not. */
  requestDone(method: TimedMethod, seconds: number): void;
  /** A session runtime was spawned (warm or on a request's path). */
  runtimeSpawned(): void;
  /** A session runtime was restarted to stop a cell (SPEC §4.5). */
  runtimeRestarted(): void;
  /**
   * A session runtime was replaced because it kept burning CPU while none of its session's cells
   * ran (`runtimeIdleCpuPercent`: a thread a completed cell left spinning).
   */
  runtimeReplacedIdleCpu(): void;
  /** An idle session gave its runtime back (`idleRuntimeReleaseMs`). */
  runtimeReleased(): void;
  /** An idle session's runtime was handed to a session that needed one (`runtimeHandover`). */
  runtimeHandedOver(): void;
  /**
   * A cell Worker thread kept burning CPU after its cell ended, in a runtime that cannot be
   * replaced to stop it (in-process isolation).
   */
  cellThreadLeftRunning(): void;
  /** A session runtime ended on its own: its session crashed (SPEC §3.5). */
  runtimeCrashed(reason: CrashLabel): void;
  /** An outcome was delivered: `delivered` content bytes sent, `dropped` output bytes left out of it. */
  output(delivered: number, dropped: number): void;
  /** A tool call of a cell ended. */
  toolCall(outcome: ToolCallOutcome): void;
  /** A request was refused `RESOURCE_EXHAUSTED` by an admission limit. */
  admissionRefused(limit: AdmissionLimit): void;
}

/** One span in progress. */
export interface HostSpan {
  /** This span's W3C `traceparent` (`00-trace-span-01`), or `undefined` when not recording. */
  readonly traceparent: string | undefined;
  /** Adds attributes (values `undefined` are skipped). */
  set(attributes: Record<string, string | number | boolean | undefined>): void;
  /** Ends the span; `error` marks it failed with that message. Later calls do nothing. */
  end(error?: string): void;
}

/** Starts spans. */
export interface HostTracer {
  /** Whether spans are recorded at all (when false, `start` returns {@link NO_SPAN}). */
  readonly enabled: boolean;
  /**
   * Starts a span.
   *
   * @param name the span's name (`Execute`, `Cell`, …)
   * @param parent a parent span, or the W3C `traceparent` a client sent; none starts a new trace
   * @param attributes its first attributes
   */
  start(
    name: string,
    parent?: HostSpan | string,
    attributes?: Record<string, string | number | boolean | undefined>,
  ): HostSpan;
}

/** The telemetry handed to the core: metrics and tracing, each possibly off. */
export interface Telemetry {
  readonly metrics: HostMetrics;
  readonly tracer: HostTracer;
}

/** Where and how trace spans are exported (`--otel-trace-exporter`, `EngineOptions.otelTraceExporter`). */
export interface TraceExportOptions {
  /**
   * The OTLP/HTTP traces endpoint. A URL whose path is `/` gets `/v1/traces` appended, as with
   * `OTEL_EXPORTER_OTLP_ENDPOINT`.
   */
  url: string;
  /** How long one export may take, retries included (default 10,000 ms). */
  timeoutMs?: number;
  /** Ended spans kept waiting for export before new ones are dropped (default 2,048). */
  maxQueueSize?: number;
  /** How long an ended span waits for its batch (default 1,000 ms). */
  scheduledDelayMs?: number;
}

/** A span that records nothing. */
export const NO_SPAN: HostSpan = Object.freeze({ traceparent: undefined, set() {}, end() {} });

/** Metrics that count nothing. */
export const NO_METRICS: HostMetrics = Object.freeze({
  cellClosed() {},
  requestDone() {},
  runtimeSpawned() {},
  runtimeRestarted() {},
  runtimeReplacedIdleCpu() {},
  runtimeReleased() {},
  runtimeHandedOver() {},
  cellThreadLeftRunning() {},
  runtimeCrashed() {},
  output() {},
  toolCall() {},
  admissionRefused() {},
});

/** A tracer that records nothing. */
export const NO_TRACER: HostTracer = Object.freeze({ enabled: false, start: () => NO_SPAN });

/**
 * Telemetry switched off: every call is a no-op.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { NO_SPAN, NO_TELEMETRY } from "./telemetry.ts";
 *
 * NO_TELEMETRY.metrics.cellClosed("completed");
 * assert.equal(NO_TELEMETRY.tracer.start("Execute"), NO_SPAN);
 * ```
 */
export const NO_TELEMETRY: Telemetry = Object.freeze({ metrics: NO_METRICS, tracer: NO_TRACER });

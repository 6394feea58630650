/**
 * Trace spans exported as OTLP/HTTP JSON with the OpenTelemetry JS SDK (`@opentelemetry/sdk-trace`
 * 3.1, the successor of `sdk-trace-base`, and `exporter-trace-otlp-http` 0.301; both run on Deno
 * 2.9.6 unchanged): {@link OtelTracer} implements the core's {@link HostTracer}.
 *
 * - Spans carry the resource attribute `service.name` = `code-mode-host`.
 * - A client's W3C `traceparent` is continued: the span joins the client's trace as a child of
 *   the client's span. An invalid one starts a new trace.
 * - Ended spans wait in a bounded queue (`maxQueueSize`, 2,048) and leave in batches from a
 *   timer; a full queue drops the span, and a batch whose export fails (after the exporter's
 *   retries, within `timeoutMs`) is dropped: both are counted through `onDropped`. Nothing here
 *   waits for the receiver, so a receiver that hangs or refuses never slows a cell.
 * - The SDK's own diagnostics go to the host's logger as rate-limited JSON warnings.
 *
 * @module
 */
import {
  context,
  type Counter,
  createNoopMeter,
  defaultTextMapGetter,
  diag,
  DiagLogLevel,
  type Meter,
  type MeterProvider,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import { BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import type { HostSpan, HostTracer, TraceExportOptions } from "./telemetry.ts";
import type { Logger } from "./log.ts";

/** The service name spans carry. */
export const SERVICE_NAME = "code-mode-host";

/** Options of {@link OtelTracer}. */
export interface OtelTracerOptions extends TraceExportOptions {
  /** Called with the number of spans dropped (queue full or export failed). */
  onDropped?: (count: number) => void;
  /** Where the SDK's diagnostics go (rate-limited warnings). */
  log?: Logger;
}

/** The SDK's counter of processed spans: an `error.type` attribute means they were dropped. */
const PROCESSED = "otel.sdk.processor.span.processed";

/** A meter provider that only watches the batch processor's dropped spans. */
function dropWatcher(onDropped: (count: number) => void): MeterProvider {
  const noop = createNoopMeter();
  const meter: Meter = Object.create(noop);
  meter.createCounter = ((name: string, options?: unknown) => {
    if (name !== PROCESSED) return noop.createCounter(name, options as never);
    const counter: Counter = {
      add(value: number, attributes?: Record<string, unknown>) {
        if (attributes?.["error.type"] !== undefined) onDropped(value);
      },
    };
    return counter;
  }) as Meter["createCounter"];
  return { getMeter: () => meter };
}

class OtelSpan implements HostSpan {
  readonly span: Span;
  #ended = false;
  constructor(span: Span) {
    this.span = span;
  }
  get traceparent(): string {
    const c = this.span.spanContext();
    return `00-${c.traceId}-${c.spanId}-${c.traceFlags.toString(16).padStart(2, "0")}`;
  }
  set(attributes: Record<string, string | number | boolean | undefined>): void {
    for (const [key, value] of Object.entries(attributes)) {
      if (value !== undefined) this.span.setAttribute(key, value);
    }
  }
  end(error?: string): void {
    if (this.#ended) return;
    this.#ended = true;
    if (error !== undefined) this.span.setStatus({ code: SpanStatusCode.ERROR, message: error });
    this.span.end();
  }
}

/**
 * A tracer that exports OTLP/HTTP JSON.
 *
 * @example
 * ```ts ignore
 * const tracer = new OtelTracer({ url: "http://127.0.0.1:4318/v1/traces" });
 * const span = tracer.start("Execute", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
 * span.end();
 * await tracer.shutdown();
 * ```
 */
export class OtelTracer implements HostTracer {
  readonly enabled = true;
  readonly #provider: TracerProvider;
  readonly #log?: Logger;
  readonly #tracer;
  readonly #propagator = new W3CTraceContextPropagator();

  /** @param options see {@link OtelTracerOptions} */
  constructor(options: OtelTracerOptions) {
    const url = new URL(options.url);
    if (url.pathname === "/") url.pathname = "/v1/traces";
    const timeoutMs = options.timeoutMs ?? 10_000;
    const exporter = new OTLPTraceExporter({ url: url.href, timeoutMillis: timeoutMs });
    const processor = new BatchSpanProcessor({
      exporter,
      maxQueueSize: options.maxQueueSize ?? 2_048,
      maxExportBatchSize: Math.min(512, options.maxQueueSize ?? 2_048),
      scheduledDelayMillis: options.scheduledDelayMs ?? 1_000,
      exportTimeoutMillis: timeoutMs + 1_000,
      selfObsMeterProvider: dropWatcher(options.onDropped ?? (() => {})),
    });
    this.#provider = new TracerProvider({
      resource: resourceFromAttributes({ "service.name": SERVICE_NAME }),
      spanProcessors: [processor],
    });
    this.#tracer = this.#provider.getTracer(SERVICE_NAME);
    const log = options.log;
    this.#log = log;
    if (log) {
      const warn = (message: string) => log.repeated("warn", "otel", "trace export: " + message);
      diag.setLogger({
        error: warn,
        warn,
        info: () => {},
        debug: () => {},
        verbose: () => {},
      }, { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });
    }
  }

  start(
    name: string,
    parent?: HostSpan | string,
    attributes?: Record<string, string | number | boolean | undefined>,
  ): HostSpan {
    let ctx = ROOT_CONTEXT;
    if (parent instanceof OtelSpan) ctx = trace.setSpan(ROOT_CONTEXT, parent.span);
    else if (typeof parent === "string") {
      ctx = this.#propagator.extract(ROOT_CONTEXT, { traceparent: parent }, defaultTextMapGetter);
    }
    const kind = typeof parent === "object" ? SpanKind.INTERNAL : SpanKind.SERVER;
    const span = new OtelSpan(context.with(ctx, () => this.#tracer.startSpan(name, { kind }, ctx)));
    if (attributes) span.set(attributes);
    return span;
  }

  /**
   * Exports what is queued and waits for it (or for its failure).
   *
   * @returns when the queue has been handed to the exporter and answered
   */
  flush(): Promise<void> {
    return this.#provider.forceFlush().catch((error) => this.#exportFailed("flush", error));
  }

  /**
   * Exports what is queued, then stops; never throws.
   *
   * @returns when done
   */
  shutdown(): Promise<void> {
    return this.#provider.shutdown().catch((error) => this.#exportFailed("shutdown", error));
  }

  /** A failed export is the collector's problem, never the host's: logged, then the call resolves. */
  #exportFailed(what: string, error: unknown): void {
    this.#log?.repeated(
      "warn",
      "otel",
      `trace export: ${what} failed: ${String((error as Error)?.message ?? error)}`,
    );
  }
}

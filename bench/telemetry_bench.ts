/**
 * Micro costs of what one warm Execute reports: with telemetry off (the no-op objects), with
 * Prometheus metrics, and with metrics and OTLP spans (Execute and its Cell; the exporter's
 * receiver answers every batch in this process).
 */
import { NO_TELEMETRY, type Telemetry } from "../host/ops/telemetry.ts";
import { PrometheusMetrics } from "../host/ops/prometheus.ts";
import { OtelTracer } from "../host/ops/otel.ts";

const sink = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (request) => {
  await request.arrayBuffer();
  return new Response("{}", { headers: { "content-type": "application/json" } });
});
const metrics = new PrometheusMetrics({ sessionsOpen: () => 1, warmRuntimes: () => 2 });
const tracer = new OtelTracer({ url: `http://127.0.0.1:${sink.addr.port}/v1/traces`, scheduledDelayMs: 100 });
const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/** The reports of one Execute that completes: its span, its cell's span, latency, output, outcome. */
function execute(t: Telemetry): void {
  const span = t.tracer.enabled
    ? t.tracer.start("Execute", traceparent, { "code_mode.session_ref": 1 })
    : undefined;
  const cell = span ? t.tracer.start("Cell", span, { "code_mode.cell_id": "1" }) : undefined;
  span?.set({ "code_mode.cell_id": "1", "code_mode.outcome": "completed" });
  t.metrics.output(1, 0);
  t.metrics.requestDone("Execute", 0.004);
  span?.end();
  t.metrics.cellClosed("completed");
  cell?.set({ "code_mode.outcome": "completed" });
  cell?.end();
}

Deno.bench({ name: "off (no-op objects)", group: "telemetry of one Execute", baseline: true }, () => {
  execute(NO_TELEMETRY);
});
Deno.bench({ name: "Prometheus metrics", group: "telemetry of one Execute" }, () => {
  execute({ metrics, tracer: NO_TELEMETRY.tracer });
});
Deno.bench({ name: "metrics and two OTLP spans", group: "telemetry of one Execute" }, () => {
  execute({ metrics, tracer });
});
Deno.bench({ name: "render /metrics", group: "scrape" }, async () => {
  await metrics.render();
});

globalThis.addEventListener("unload", () => {
  void tracer.shutdown();
  void sink.shutdown();
});

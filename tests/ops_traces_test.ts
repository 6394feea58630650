/**
 * Issue 19 part 2: OTLP/HTTP JSON spans reach a local receiver (a small HTTP server in the test)
 * with their names, parent/child links, the service name and the client's trace ID; a receiver
 * that hangs or refuses neither blocks nor fails a cell (checked by events, not by time).
 *
 * @module
 */
import assert from "node:assert/strict";
import { Metadata } from "nice-grpc";
import { eventually, execute, type Msg, openSession, run, startHost } from "./_harness.ts";
import { answerTools, scrape } from "./_ops.ts";

const TRACE_ID = "0af7651916cd43dd8448eb211c80319c";
const CLIENT_SPAN = "b7ad6b7169203331";
const TRACEPARENT = `00-${TRACE_ID}-${CLIENT_SPAN}-01`;

interface Span {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: { key: string; value: Record<string, unknown> }[];
}

/** An OTLP/HTTP receiver: records each export; `hold` keeps requests unanswered until released. */
function receiver(options: { hold?: boolean } = {}) {
  const bodies: Msg[] = [];
  const contentTypes: string[] = [];
  const release = Promise.withResolvers<void>();
  const firstRequest = Promise.withResolvers<void>();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (request) => {
    contentTypes.push(request.headers.get("content-type") ?? "");
    bodies.push(await request.json());
    firstRequest.resolve();
    if (options.hold) await release.promise;
    return new Response("{}", { headers: { "content-type": "application/json" } });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}/v1/traces`,
    bodies,
    contentTypes,
    firstRequest: firstRequest.promise,
    /** Answers the held requests. */
    release: () => release.resolve(),
    spans(): Span[] {
      return bodies.flatMap((b) =>
        b.resourceSpans.flatMap((r: Msg) => r.scopeSpans.flatMap((s: Msg) => s.spans))
      );
    },
    async [Symbol.asyncDispose]() {
      release.resolve();
      await server.shutdown();
    },
  };
}

const attribute = (span: Span, key: string) => {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value?.stringValue ?? value?.intValue;
};

Deno.test("Spans for OpenSession, Execute (its cell a child), Wait, Terminate and a tool call continue the client's traceparent", async () => {
  await using sink = receiver();
  await using h = await startHost({ otelTraceExporter: { url: sink.url, scheduledDelayMs: 60_000 } });
  const metadata = new Metadata({ traceparent: TRACEPARENT });
  const s = await openSession(h.client, {}, metadata);
  s.pump();
  const calls: Msg[] = [];
  const tools = answerTools(h.client, s.id, 7, calls);
  await tools.ready;
  const toolCell = await execute(h.client, s.id, "text(String(await tools.seven({})))", {
    enabledTools: [{ name: "seven", toolName: { name: "seven" }, description: "seven", kind: 1 }],
  }, { metadata });
  assert.ok(toolCell.outcome.completed);
  // The tool call still carries the Execute's traceparent, as the SPEC says (§2.5).
  assert.equal(calls[0].traceparent, TRACEPARENT);
  await tools.stop();
  const parked = await execute(h.client, s.id, "yield_control(); await new Promise(() => {})", {}, {
    metadata,
  });
  assert.ok(parked.outcome.yielded);
  const cellId = parked.started.cellId;
  const waited = await h.client.wait({ sessionId: s.id, cellId, waitId: "w1", yieldTimeMs: 0 }, { metadata });
  assert.ok(waited.liveCell.yielded);
  assert.ok((await h.client.terminate({ sessionId: s.id, cellId }, { metadata })).liveCell.terminated);
  assert.ok(await eventually(() => s.events.filter((e) => e.cellClosed).length === 2, 5_000));
  await h.host.flushTelemetry();

  assert.ok(sink.contentTypes.every((type) => type.startsWith("application/json")), sink.contentTypes.join());
  const resource = sink.bodies[0].resourceSpans[0].resource.attributes;
  assert.deepEqual(resource.find((a: Msg) => a.key === "service.name")?.value, {
    stringValue: "code-mode-host",
  });
  const spans = sink.spans();
  const named = (name: string) => spans.filter((span) => span.name === name);
  assert.deepEqual(
    [...new Set(spans.map((span) => span.name))].sort(),
    ["Cell", "Execute", "OpenSession", "Terminate", "ToolCall", "Wait"],
  );
  assert.equal(named("Execute").length, 2);
  assert.equal(named("Cell").length, 2);
  // Every span is in the client's trace; the request spans are children of the client's span.
  assert.ok(spans.every((span) => span.traceId === TRACE_ID));
  for (const name of ["OpenSession", "Execute", "Wait", "Terminate"]) {
    for (const span of named(name)) assert.equal(span.parentSpanId, CLIENT_SPAN, name);
  }
  // Each cell's lifetime is a child of its Execute; the tool call a child of its cell.
  for (const cell of named("Cell")) {
    const execute = named("Execute").find((e) => e.spanId === cell.parentSpanId);
    assert.ok(execute, "a Cell span's parent is an Execute span");
    assert.equal(attribute(execute, "code_mode.cell_id"), attribute(cell, "code_mode.cell_id"));
  }
  const toolSpan = named("ToolCall")[0];
  const toolCellSpan = named("Cell").find((c) =>
    attribute(c, "code_mode.cell_id") === toolCell.started.cellId
  )!;
  assert.equal(toolSpan.parentSpanId, toolCellSpan.spanId);
  assert.equal(attribute(toolSpan, "code_mode.tool_outcome"), "succeeded");
  assert.equal(attribute(toolCellSpan, "code_mode.outcome"), "completed");
  s.cancel();
});

Deno.test("A receiver that hangs does not hold back cells: they complete while its export is unanswered", async () => {
  await using sink = receiver({ hold: true });
  await using h = await startHost({
    otelTraceExporter: { url: sink.url, scheduledDelayMs: 1, timeoutMs: 60_000 },
  });
  const s = await openSession(h.client);
  assert.deepEqual((await run(h.client, s.id, "text(1)")).texts, ["1"]);
  await sink.firstRequest; // an export is in flight, and it will not be answered
  for (let i = 2; i <= 4; i++) assert.deepEqual((await run(h.client, s.id, `text(${i})`)).texts, [String(i)]);
  assert.equal(sink.bodies.length, 1, "the first export is still unanswered");
  await s[Symbol.asyncDispose]();
  sink.release();
});

Deno.test("A receiver that refuses connections fails no cell; the lost spans are counted as dropped", async () => {
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (closed.addr as Deno.NetAddr).port;
  closed.close();
  await using h = await startHost({
    metricsListen: "127.0.0.1:0",
    otelTraceExporter: {
      url: `http://127.0.0.1:${port}/v1/traces`,
      timeoutMs: 200,
      scheduledDelayMs: 60_000,
    },
  });
  const s = await openSession(h.client);
  s.pump();
  assert.deepEqual((await run(h.client, s.id, "text(1)")).texts, ["1"]);
  assert.deepEqual((await run(h.client, s.id, "text(2)")).texts, ["2"]);
  assert.ok(await eventually(() => s.events.filter((e) => e.cellClosed).length === 2, 5_000));
  await h.host.flushTelemetry();
  // OpenSession, two Executes and their two cells.
  assert.equal((await scrape(h.host.metricsUrl!)).get("code_mode_spans_dropped_total"), 5);
  s.cancel();
});

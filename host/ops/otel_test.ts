import assert from "node:assert/strict";
import { OtelTracer } from "./otel.ts";

/** A loopback port nothing listens on. */
function closedPort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  return port;
}

Deno.test("OtelTracer: a full queue drops an ended span at once and counts it; failed exports count the rest", async () => {
  let dropped = 0;
  const tracer = new OtelTracer({
    url: `http://127.0.0.1:${closedPort()}/v1/traces`,
    maxQueueSize: 2,
    scheduledDelayMs: 60_000,
    timeoutMs: 200,
    onDropped: (count) => dropped += count,
  });
  // The second span starts an export of the first two (a batch is at most the queue), the next two
  // wait in the queue, and the fifth finds it full.
  for (let i = 0; i < 5; i++) tracer.start("Execute").end();
  assert.equal(dropped, 1, "the fifth span found the queue of two full");
  await tracer.shutdown();
  assert.equal(dropped, 5, "the other four were lost with their exports");
});

Deno.test("OtelTracer: a client's traceparent is continued; an invalid one starts a new trace; children link", async () => {
  const tracer = new OtelTracer({
    url: `http://127.0.0.1:${closedPort()}`,
    scheduledDelayMs: 60_000,
    timeoutMs: 200,
  });
  const parent = tracer.start("Execute", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  assert.match(parent.traceparent!, /^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/);
  const child = tracer.start("Cell", parent);
  assert.equal(child.traceparent!.slice(3, 35), "0af7651916cd43dd8448eb211c80319c");
  const fresh = tracer.start("Execute", "not a traceparent");
  assert.notEqual(fresh.traceparent!.slice(3, 35), "0af7651916cd43dd8448eb211c80319c");
  for (const span of [child, parent, fresh]) span.end();
  parent.end("ended twice: ignored");
  await tracer.shutdown();
});

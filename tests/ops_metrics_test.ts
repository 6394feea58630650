/**
 * Issue 19 part 1: `GET /metrics` after a scripted workload, every counter checked exactly, and
 * `/healthz` and `/readyz` through a drain. Real host, real runtimes, real gRPC and HTTP clients.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Metadata, Status } from "nice-grpc";
import {
  eventually,
  execute,
  grpcError,
  type Msg,
  openSession,
  run,
  SPIN,
  startHost,
  texts,
} from "./_harness.ts";
import { answerTools, scrape } from "./_ops.ts";
import { InProcessCodeModeSessionProvider } from "../embedded/provider.ts";
import { NoopCodeModeSessionDelegate } from "../client/session.ts";

const encoder = new TextEncoder();

const bytes = (outcome: Msg) => texts(outcome).reduce((n, t) => n + encoder.encode(t).length, 0);

Deno.test("GET /metrics after a workload: every counter exactly (cells of each outcome, a tool call, a restart, a crash, a refusal, dropped output)", async () => {
  await using h = await startHost({
    warmSessions: 0,
    metricsListen: "127.0.0.1:0",
    limits: { maxSessions: 3 },
  });
  const url = h.host.metricsUrl!;
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
  const before = await scrape(url);
  assert.equal(before.get('code_mode_cells_total{outcome="completed"}'), 0);
  assert.equal(before.get("code_mode_sessions_open"), 0);
  let delivered = 0;

  // Session a: completed, failed, a tool call, and a restart that ends another cell.
  const a = await openSession(h.client);
  a.pump();
  delivered += bytes((await run(h.client, a.id, 'text("hi")')).outcome);
  const failed = await run(h.client, a.id, 'throw new Error("boom")');
  assert.match(failed.error!, /^Error: boom/);
  delivered += bytes(failed.outcome);
  const tools = answerTools(h.client, a.id, { value: 42 });
  await tools.ready;
  const toolCell = await execute(h.client, a.id, "text(String((await tools.echo({})).value))", {
    enabledTools: [{ name: "echo", toolName: { name: "echo" }, description: "echo", kind: 1 }],
  });
  assert.deepEqual(texts(toolCell.outcome), ["42"]);
  delivered += bytes(toolCell.outcome);
  await tools.stop();
  const waiting = await execute(h.client, a.id, "yield_control(); await new Promise(() => {})");
  assert.ok(waiting.outcome.yielded);
  const spinning = await execute(h.client, a.id, SPIN);
  assert.ok(spinning.outcome.yielded);
  const stopped = await h.client.terminate({ sessionId: a.id, cellId: spinning.started.cellId });
  assert.ok(stopped.liveCell.terminated, "the spinning cell is terminated by a runtime restart");
  const other = await h.client.wait({ sessionId: a.id, cellId: waiting.started.cellId, waitId: "w1" });
  assert.match(other.liveCell.completed.errorText, /restarted to stop cell/);
  for (const outcome of [waiting.outcome, spinning.outcome, stopped.liveCell, other.liveCell]) {
    delivered += bytes(outcome);
  }

  // Session b: a cell over its heap limit.
  const b = await openSession(h.client, { cellExecutionLimits: { maxHeapSizeBytes: 16_777_216 } });
  const heap = await run(
    h.client,
    b.id,
    "const a = []; while (true) a.push({ x: new Array(1000).fill(a.length) });",
  );
  assert.equal(heap.error, "exec runtime ended unexpectedly: cell heap limit of 16 MiB reached");

  // Session c, the third: a fourth is refused by maxSessions; then its runtime is killed.
  const c = await openSession(h.client);
  c.pump();
  assert.equal((await grpcError(openSession(h.client))).code, Status.RESOURCE_EXHAUSTED);
  const parked = await execute(h.client, c.id, "yield_control(); await new Promise(() => {})");
  assert.ok(parked.outcome.yielded);
  Deno.kill(h.host.state.session(c.id)!.runtimePid!, "SIGKILL");
  assert.ok((await c.end)?.details.includes("killed by signal SIGKILL"));

  // Session d (Server mode): 1,000 text bytes beyond its window are left out.
  const d = await openSession(h.client, { outputTruncation: 2 });
  const flood = await run(h.client, d.id, 'text("x".repeat(1_048_576 + 1_000))');
  delivered += bytes(flood.outcome);

  // Cells are counted at their CellClosed, which may follow their outcome: wait until all 8 are.
  assert.ok(await eventually(() => a.events.filter((e) => e.cellClosed).length === 5, 10_000));
  let m = await scrape(url);
  const closedCells = (m: Map<string, number>) =>
    [...m].filter(([key]) => key.startsWith("code_mode_cells_total")).reduce((n, [, v]) => n + v, 0);
  assert.ok(await eventually(async () => closedCells(m = await scrape(url)) === 8, 10_000));
  const expected: Record<string, number> = {
    "code_mode_sessions_open": 3,
    "code_mode_warm_runtimes": 0,
    'code_mode_cells_total{outcome="completed"}': 3,
    'code_mode_cells_total{outcome="failed"}': 1,
    'code_mode_cells_total{outcome="terminated"}': 1,
    'code_mode_cells_total{outcome="heap_limit"}': 1,
    'code_mode_cells_total{outcome="restart"}': 1,
    'code_mode_cells_total{outcome="crashed"}': 1,
    'code_mode_request_duration_seconds_count{method="Execute"}': 8,
    'code_mode_request_duration_seconds_count{method="Wait"}': 1,
    'code_mode_request_duration_seconds_count{method="Terminate"}': 1,
    // a, b, c, d, and a's replacement runtime.
    "code_mode_runtime_spawns_total": 5,
    "code_mode_runtime_restarts_total": 1,
    'code_mode_runtime_crashes_total{reason="signal"}': 1,
    'code_mode_runtime_crashes_total{reason="exit"}': 0,
    'code_mode_output_bytes_total{disposition="delivered"}': delivered,
    'code_mode_output_bytes_total{disposition="dropped"}': 1_000,
    'code_mode_tool_calls_total{outcome="succeeded"}': 1,
    'code_mode_tool_calls_total{outcome="failed"}': 0,
    'code_mode_tool_calls_total{outcome="cancelled"}': 0,
    'code_mode_admission_refusals_total{limit="maxSessions"}': 1,
    'code_mode_admission_refusals_total{limit="maxActiveCells"}': 0,
    "code_mode_spans_dropped_total": 0,
  };
  const actual = Object.fromEntries(Object.keys(expected).map((key) => [key, m.get(key)]));
  assert.deepEqual(actual, expected);
  // Histograms: the count of the +Inf bucket is the count.
  assert.equal(m.get('code_mode_request_duration_seconds_bucket{le="+Inf",method="Execute"}'), 8);
  a.cancel();
});

Deno.test("/healthz and /readyz need no token; /readyz turns 503 draining while the host drains", async () => {
  await using h = await startHost({
    warmSessions: 1,
    metricsListen: "127.0.0.1:0",
    authToken: "secret",
    osSandbox: "off",
    // A stopped runtime holds the drain until the test kills the host (no timing involved).
    limits: { workerKillGraceMs: 60_000, shutdownGraceMs: 60_000, runtimeUnresponsiveMs: 60_000 },
  });
  const url = h.host.metricsUrl!;
  const get = async (path: string) => {
    const response = await fetch(url + path);
    return { status: response.status, body: await response.text() };
  };
  assert.deepEqual(await get("/healthz"), { status: 200, body: "ok\n" });
  assert.deepEqual(await get("/readyz"), { status: 200, body: "ready\n" });
  assert.equal((await get("/nothing")).status, 404);
  const post = await fetch(`${url}/metrics`, { method: "POST" });
  await post.body?.cancel();
  assert.equal(post.status, 405);
  assert.ok(await eventually(async () => (await scrape(url)).get("code_mode_warm_runtimes") === 1, 10_000));
  const authorized = new Metadata({ authorization: "Bearer secret" });

  // A session whose runtime is stopped (SIGSTOP): its stop waits for workerKillGraceMs.
  const s = await openSession(h.client, {}, authorized);
  s.pump();
  Deno.kill(h.host.state.session(s.id)!.runtimePid!, "SIGSTOP");
  const stopping = h.host.shutdown();
  assert.deepEqual(await get("/readyz"), { status: 503, body: "draining\n" });
  assert.deepEqual(await get("/healthz"), { status: 200, body: "ok\n" });
  await h.host.kill();
  await stopping;
  await assert.rejects(fetch(`${url}/healthz`));
  assert.equal((await s.end)?.code, Status.UNAVAILABLE);
});

Deno.test("The embedded provider feeds the same metrics and serves the same listener", async () => {
  await using provider = new InProcessCodeModeSessionProvider({
    isolation: "subprocess",
    warmSessions: 0,
    log: "warn",
    metricsListen: "127.0.0.1:0",
  });
  await using session = await provider.createSession();
  const cell = await session.execute(
    { toolCallId: "call-1", enabledTools: [], source: 'text("xyz")' },
    new NoopCodeModeSessionDelegate(),
  );
  assert.equal((await cell.initialResponse()).type, "result");
  const url = provider.metricsUrl!;
  assert.equal(await fetch(`${url}/readyz`).then((r) => r.text()), "ready\n");
  // The cell is counted at its CellClosed, which may follow its result.
  assert.ok(
    await eventually(async () => (await scrape(url)).get('code_mode_cells_total{outcome="completed"}') === 1),
  );
  const m = await scrape(url);
  assert.equal(m.get("code_mode_sessions_open"), 1);
  assert.equal(m.get("code_mode_runtime_spawns_total"), 1);
  assert.equal(m.get('code_mode_request_duration_seconds_count{method="Execute"}'), 1);
  assert.equal(m.get('code_mode_output_bytes_total{disposition="delivered"}'), 3);
});

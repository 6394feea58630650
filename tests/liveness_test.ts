/**
 * Runtime liveness (issue 20, item 2; SPEC §3.5): a session runtime that stops answering (SIGSTOP)
 * is killed and its session reported crashed with `session runtime stopped responding`; one that
 * is merely busy (a cell spinning in its isolate, isolates being created) keeps its session.
 */
import assert from "node:assert/strict";
import { Status } from "nice-grpc";
import {
  eventually,
  execute,
  FOREVER,
  openSession,
  processExists,
  run,
  SPIN,
  startHost,
} from "./_harness.ts";

/** The limit of these tests: what a loaded 2-core machine needs (pings answered in ≤ 0.5 s seen). */
const LIMIT_MS = 1_000;

Deno.test("A stopped runtime (SIGSTOP) is killed after runtimeUnresponsiveMs and reported as a session crash", async () => {
  await using h = await startHost({ limits: { runtimeUnresponsiveMs: LIMIT_MS } });
  await using s = await openSession(h.client);
  s.pump();
  await using bystander = await openSession(h.client);
  const pending = execute(h.client, s.id, FOREVER, { yieldTimeMs: 60_000 });
  await eventually(() => (h.host.state.session(s.id)?.runningCells ?? 0) > 0, 5_000);
  const pid = h.host.state.session(s.id)!.runtimePid!;
  const stoppedAt = performance.now();
  Deno.kill(pid, "SIGSTOP");
  const { outcome } = await pending;
  const detectedMs = performance.now() - stoppedAt;
  console.log(`SIGSTOP: reported ${Math.round(detectedMs)} ms after (limit ${LIMIT_MS} ms)`);
  assert.equal(outcome.completed?.errorText, "exec runtime ended unexpectedly");
  const end = await s.end;
  assert.deepEqual({ code: end?.code, details: end?.details }, {
    code: Status.INTERNAL,
    details: "code-mode V8 runtime thread ended unexpectedly: session runtime stopped responding",
  });
  assert.ok(detectedMs >= LIMIT_MS, `reported after ${detectedMs} ms, before the limit`);
  // Within the limit and a half, plus slack for a loaded machine.
  assert.ok(detectedMs < LIMIT_MS * 1.5 + 2_000, `reported after ${detectedMs} ms`);
  assert.ok(await eventually(() => !processExists(pid)), "the stopped runtime was killed and reaped");
  assert.ok(
    h.log.lines.some((l) => l.msg === "code-mode host session failed: session runtime stopped responding"),
  );
  // Another session is unaffected.
  assert.deepEqual((await run(h.client, bystander.id, 'text("ok")')).texts, ["ok"]);
});

Deno.test("A runtime whose cell spins, and which creates isolates, for longer than runtimeUnresponsiveMs keeps its session", async () => {
  const limit = LIMIT_MS * 1.5;
  await using h = await startHost({ limits: { runtimeUnresponsiveMs: limit } });
  await using s = await openSession(h.client);
  s.pump();
  // A cell spins in its isolate (the runtime's main thread stays free to answer)...
  await execute(h.client, s.id, SPIN, { yieldTimeMs: 1 });
  // ...while more cells start (each in a new isolate: the runtime creates one per cell), for more
  // than three times the limit.
  const until = performance.now() + limit * 3;
  let cells = 0;
  while (performance.now() < until) {
    assert.deepEqual((await run(h.client, s.id, `text(${cells})`)).texts, [String(cells)]);
    cells++;
  }
  assert.ok(h.host.state.session(s.id), "the session is still there");
  // The last completed cell counts as running until its isolate's end is reported, just after its
  // outcome (a loaded machine stretches that): the spinning cell is the one left.
  const running = () => h.host.state.session(s.id)!.runningCells;
  assert.ok(
    await eventually(() => running() === 1, 2_000),
    `the spinning cell still runs (${running()} running)`,
  );
  assert.ok(!s.events.some((e) => e.closed), "the lease did not end");
});

/**
 * Faults of a session runtime (issue 20, fault suite), against a real host: kill -9 mid-cell ends
 * the lease `INTERNAL` with the reason within 1 s and leaves a bystander session working; a
 * SIGSTOP shorter than `runtimeUnresponsiveMs` followed by SIGCONT is no crash, and the cell that
 * was running completes.
 */
import assert from "node:assert/strict";
import { Status } from "nice-grpc";
import { eventually, execute, FOREVER, openSession, run, startHost } from "../_harness.ts";

Deno.test("fault: kill -9 of a runtime mid-cell ends its lease INTERNAL with the reason within 1 s; a bystander is unaffected", async () => {
  await using h = await startHost({ warmSessions: 2 });
  await using s = await openSession(h.client);
  s.pump();
  await using bystander = await openSession(h.client);
  const pending = execute(h.client, s.id, `text("before"); ${FOREVER}`, { yieldTimeMs: 60_000 });
  assert.ok(await eventually(() => (h.host.state.session(s.id)?.runningCells ?? 0) > 0, 5_000));
  const bystanderCell = execute(
    h.client,
    bystander.id,
    'await new Promise((r) => setTimeout(r, 300)); text("b")',
  );
  const killedAt = performance.now();
  Deno.kill(h.host.state.session(s.id)!.runtimePid!, "SIGKILL");
  const { outcome } = await pending;
  const end = await s.end;
  const ms = performance.now() - killedAt;
  console.log(`kill -9 of a runtime: lease ended ${Math.round(ms)} ms after`);
  assert.equal(outcome.completed?.errorText, "exec runtime ended unexpectedly");
  assert.deepEqual({ code: end?.code, details: end?.details }, {
    code: Status.INTERNAL,
    details: "code-mode V8 runtime thread ended unexpectedly: worker process killed by signal SIGKILL",
  });
  assert.ok(ms < 1_000, `reported after ${ms} ms`);
  assert.deepEqual(
    (await bystanderCell).outcome.contentItems.map((i: { text: { text: string } }) => i.text.text),
    [
      "b",
    ],
  );
  assert.deepEqual((await run(h.client, bystander.id, 'text("still")')).texts, ["still"]);
});

Deno.test("fault: SIGSTOP for less than runtimeUnresponsiveMs, then SIGCONT, is no crash", async () => {
  const limit = 3_000;
  await using h = await startHost({ limits: { runtimeUnresponsiveMs: limit } });
  await using s = await openSession(h.client);
  s.pump();
  const pending = execute(h.client, s.id, 'await new Promise((r) => setTimeout(r, 200)); text("done")', {
    yieldTimeMs: 60_000,
  });
  assert.ok(await eventually(() => (h.host.state.session(s.id)?.runningCells ?? 0) > 0, 5_000));
  const pid = h.host.state.session(s.id)!.runtimePid!;
  Deno.kill(pid, "SIGSTOP");
  await new Promise((r) => setTimeout(r, limit / 3));
  Deno.kill(pid, "SIGCONT");
  const { outcome } = await pending;
  assert.equal(outcome.completed?.errorText, undefined);
  assert.deepEqual(outcome.contentItems.map((i: { text: { text: string } }) => i.text.text), ["done"]);
  // Past the limit: still there.
  await new Promise((r) => setTimeout(r, limit));
  assert.deepEqual((await run(h.client, s.id, 'text("alive")')).texts, ["alive"]);
  assert.ok(!s.events.some((e) => e.closed));
});

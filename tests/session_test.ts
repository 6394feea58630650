/**
 * Sessions, closure and stored values against a real host (SPEC §3, §6, scenarios 16, 17, 21c,
 * 81, 82, 83a).
 */
import assert from "node:assert/strict";
import { Status } from "nice-grpc";
import {
  collect,
  eventually,
  execute,
  grpcError,
  inFlight,
  notified,
  openSession,
  processExists,
  run,
  startHost,
  texts,
} from "./_harness.ts";

Deno.test("CloseSession cancels a pending Wait, ends the lease OK, and later calls are NOT_FOUND (scenario 16)", async () => {
  await using h = await startHost();
  const s = await openSession(h.client);
  s.pump();
  const { started, outcome } = await execute(h.client, s.id, "await new Promise(() => {})", {
    yieldTimeMs: 1,
  });
  assert.ok(outcome.yielded);
  const pid = h.host.state.session(s.id)!.runtimePid!;
  const wait = grpcError(
    h.client.wait({ sessionId: s.id, cellId: started.cellId, waitId: "w", yieldTimeMs: 60_000 }),
  );
  assert.ok(await inFlight(h, s.id, 1));
  await h.client.closeSession({ sessionId: s.id });
  // Codex's host's words (SPEC §2.7 had `code-mode session is closed`).
  assert.deepEqual(await wait, { code: Status.CANCELLED, details: "code-mode wait was cancelled" });
  assert.equal(await s.end, undefined);
  assert.deepEqual(await grpcError(execute(h.client, s.id, "text(1)")), {
    code: Status.NOT_FOUND,
    details: `unknown code-mode session ${s.id}`,
  });
  assert.equal(processExists(pid), false, "the session's runtime was reaped");
});

// As Codex's own host answers it (SPEC §3.4 had a `terminated` outcome with the drained output).
Deno.test("An Execute awaiting its outcome ends OK without one when the session closes", async () => {
  await using h = await startHost();
  const s = await openSession(h.client);
  s.pump();
  const pending = execute(h.client, s.id, 'text("drained"); notify("ready"); await new Promise(() => {})', {
    yieldTimeMs: 60_000,
  });
  assert.ok(await notified(s, "ready"));
  await h.client.closeSession({ sessionId: s.id });
  const { started, outcome } = await pending;
  assert.equal(started.cellId, "1");
  assert.equal(outcome, undefined);
});

Deno.test("Sessions are isolated, and shutting one down leaves the other working (scenario 17)", async () => {
  await using h = await startHost();
  const a = await openSession(h.client);
  await using b = await openSession(h.client);
  await run(h.client, a.id, 'store("key", "A")');
  assert.deepEqual((await run(h.client, b.id, 'text(typeof load("key"))')).texts, ["undefined"]);
  assert.deepEqual((await run(h.client, a.id, 'text(load("key"))')).texts, ["A"]);
  await h.client.closeSession({ sessionId: a.id });
  assert.deepEqual((await run(h.client, b.id, "text(1)")).texts, ["1"]);
});

Deno.test("Cancelling the lease closes the session (scenario 15)", async () => {
  await using h = await startHost();
  const s = await openSession(h.client);
  s.cancel();
  assert.ok(
    await eventually(
      async () => (await grpcError(execute(h.client, s.id, "text(1)"))).code === Status.NOT_FOUND,
      5_000,
    ),
  );
});

Deno.test("maxSessions bounds open sessions; closing one frees a slot (scenario 21c)", async () => {
  await using h = await startHost({ limits: { maxSessions: 2 } });
  const one = await openSession(h.client);
  await using _two = await openSession(h.client);
  assert.deepEqual(await grpcError(collect(h.client.openSession({}))), {
    code: Status.RESOURCE_EXHAUSTED,
    details: "code-mode host has too many sessions",
  });
  await h.client.closeSession({ sessionId: one.id });
  await using three = await openSession(h.client);
  assert.deepEqual((await run(h.client, three.id, "text(3)")).texts, ["3"]);
});

Deno.test("A value stored by one cell is loaded by the next (scenario 81)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  await run(h.client, s.id, 'store("key", "visible")');
  assert.deepEqual((await run(h.client, s.id, 'text(load("key"))')).texts, ["visible"]);
});

Deno.test("Writes made before a failure are committed (scenario 82)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const failed = await run(h.client, s.id, 'store("k", "v"); throw new Error("boom")');
  assert.ok(failed.error?.includes("boom"));
  assert.deepEqual((await run(h.client, s.id, 'text(load("k"))')).texts, ["v"]);
});

Deno.test("store() refuses to grow the session's values past maxStoredValueBytes (scenario 83a)", async () => {
  await using h = await startHost({ limits: { maxStoredValueBytes: 1_048_576 } });
  await using s = await openSession(h.client);
  const r = await run(
    h.client,
    s.id,
    'store("a", "x".repeat(600000)); try { store("b", "y".repeat(600000)) } catch (e) { text(e) }',
  );
  assert.deepEqual(r.texts, ["stored values exceed the 1048576-byte session limit"]);
  assert.deepEqual((await run(h.client, s.id, 'text(typeof load("a") + "," + typeof load("b"))')).texts, [
    "string,undefined",
  ]);
});

Deno.test("A cell started after a commit sees it; a cell running before it keeps its snapshot", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  s.pump();
  await run(h.client, s.id, 'store("k", 1)');
  const early = execute(
    h.client,
    s.id,
    'const before = load("k"); notify("loaded"); await new Promise((r) => setTimeout(r, 300)); text(before + "," + load("k"))',
  );
  assert.ok(await notified(s, "loaded"));
  await run(h.client, s.id, 'store("k", 2)');
  assert.deepEqual(texts((await early).outcome), ["1,1"]);
  assert.deepEqual((await run(h.client, s.id, 'text(load("k"))')).texts, ["2"]);
});

Deno.test("113: with a warm pool of 2, OpenSession spawns no process on its path, with or without max_heap_size_bytes", async () => {
  await using h = await startHost({ warmSessions: 2 });
  assert.ok(await eventually(() => h.host.state.warmCount === 2, 10_000));
  await using plain = await openSession(h.client);
  assert.ok(await eventually(() => h.host.state.warmCount === 2, 10_000));
  await using limited = await openSession(h.client, {
    cellExecutionLimits: { maxHeapSizeBytes: 32 * 1024 * 1024 },
  });
  assert.equal(h.host.state.requestPathSpawnCount, 0);
  // Both sessions run cells, the limited one within its own heap limit.
  assert.deepEqual((await run(h.client, plain.id, 'text("a")')).texts, ["a"]);
  const big = await run(h.client, limited.id, "const a = []; for (;;) a.push(new Array(1e6).fill(1))");
  assert.equal(big.error, "exec runtime ended unexpectedly: cell heap limit of 32 MiB reached");
});

Deno.test("113 (control): with the pool disabled, OpenSession spawns on its path and the hook counts it", async () => {
  await using h = await startHost({ warmSessions: 0 });
  await using s = await openSession(h.client);
  assert.equal(h.host.state.requestPathSpawnCount, 1);
  assert.deepEqual((await run(h.client, s.id, 'text("a")')).texts, ["a"]);
});

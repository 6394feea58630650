/**
 * Runtime handover (issue 29, `--limit runtimeHandover=1`): a session that needs a runtime while
 * none is warm takes the runtime of the session idle the longest; each session still sees only its
 * own stored values and globals, a session with a live cell keeps its runtime, and the idle-CPU rule
 * follows the runtime to its new session. Real hosts, real runtimes, a real gRPC client.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  eventually,
  execute,
  openSession,
  processExists,
  rawClient,
  run,
  startHost,
  texts,
} from "./_harness.ts";

const HANDOVER = { runtimeHandover: 1 };

Deno.test("Handover: with no warm runtime, a new session takes the idle session's runtime; stored values and globals stay each session's own; a session in a burst keeps its runtime", async () => {
  await using h = await startHost({ warmSessions: 0, metricsListen: "127.0.0.1:0", limits: HANDOVER });
  await using a = await openSession(h.client);
  a.pump();
  await run(h.client, a.id, `store("k", "a's"); globalThis.leak = "a"; text("ok")`);
  const pid = h.host.state.session(a.id)!.runtimePid!;
  assert.equal(h.host.state.spawnCount, 1);

  await using b = await openSession(h.client);
  b.pump();
  assert.equal(h.host.state.session(b.id)!.runtimePid, pid, "b runs on a's runtime");
  assert.equal(h.host.state.session(a.id)!.runtimePid, undefined, "a holds no runtime now");
  const seen = await run(
    h.client,
    b.id,
    `text(String(load("k"))); text(typeof globalThis.leak); store("k", "b's")`,
  );
  assert.deepEqual(seen.texts, ["undefined", "undefined"], "nothing of a's reaches b");

  // a's next cell takes the runtime back from b (idle now), with a's values replayed and b's gone.
  const back = await run(h.client, a.id, 'text(load("k"))');
  assert.deepEqual(back.texts, ["a's"]);
  assert.equal(h.host.state.session(a.id)!.runtimePid, pid);
  // a runs two cells back to back (a burst: within a second even on a loaded machine, where b's open
  // and cell between a's first two may take longer): its runtime stays with it, and b gets a new one.
  await run(h.client, a.id, 'text("again")');
  assert.deepEqual((await run(h.client, b.id, 'text(load("k"))')).texts, ["b's"]);
  assert.equal(h.host.state.session(a.id)!.runtimePid, pid, "a keeps its runtime in a burst");
  assert.equal(h.host.state.spawnCount, 2, "two handovers, then a spawn");
  assert.ok(processExists(pid));
  const metrics = await (await fetch(`${h.host.metricsUrl}/metrics`)).text();
  assert.match(metrics, /^code_mode_runtime_handovers_total 2$/m);
  assert.ok(h.log.lines.every((l) => l.level !== "error" && l.level !== "warn"), JSON.stringify(h.log.lines));
});

Deno.test("Handover off (the default of a listener): each session gets a runtime of its own", async () => {
  await using h = await startHost({ warmSessions: 0 });
  await using a = await openSession(h.client);
  await run(h.client, a.id, 'store("k", 1)');
  await using b = await openSession(h.client);
  await run(h.client, b.id, 'text("b")');
  const [pa, pb] = [h.host.state.session(a.id)!.runtimePid, h.host.state.session(b.id)!.runtimePid];
  assert.ok(pa !== undefined && pb !== undefined && pa !== pb && processExists(pa) && processExists(pb));
  assert.equal(h.host.state.spawnCount, 2);
});

Deno.test("Handover: a session whose cell is still running (yielded) keeps its runtime; the new session gets another", async () => {
  await using h = await startHost({ warmSessions: 0, limits: HANDOVER });
  await using a = await openSession(h.client);
  a.pump();
  const slow = await execute(
    h.client,
    a.id,
    'text("start"); await new Promise((r) => setTimeout(r, 1500)); text("end")',
    { yieldTimeMs: 50 },
  );
  assert.ok(slow.outcome.yielded);
  const pid = h.host.state.session(a.id)!.runtimePid;
  await using b = await openSession(h.client);
  assert.deepEqual((await run(h.client, b.id, 'text("b")')).texts, ["b"]);
  assert.notEqual(h.host.state.session(b.id)!.runtimePid, pid);
  assert.equal(h.host.state.spawnCount, 2);
  const rest = await h.client.wait({
    sessionId: a.id,
    cellId: slow.started.cellId,
    waitId: "w",
    yieldTimeMs: 10_000,
  });
  assert.ok(rest.liveCell.completed, JSON.stringify(rest));
  assert.deepEqual(texts(rest.liveCell), ["end"]);
});

Deno.test("Handover: the idle-CPU rule reports a handed-over runtime to its new session, which gets a fresh one", async () => {
  await using h = await startHost({ warmSessions: 0, limits: HANDOVER });
  await using a = await openSession(h.client);
  await run(h.client, a.id, 'text("a")');
  await using b = await openSession(h.client);
  const pid = h.host.state.session(b.id)!.runtimePid!;
  assert.equal(h.host.state.spawnCount, 1, "b took a's runtime");
  await run(h.client, b.id, 'store("kept", 7)');
  const spin = "const spin = () => Promise.resolve().then(spin); spin(); exit();";
  assert.equal((await run(h.client, b.id, spin)).error, undefined);
  assert.ok(
    await eventually(() => !processExists(pid), 10_000),
    "the spinning runtime was replaced: " + JSON.stringify(h.log.lines.filter((l) => l.level !== "info")),
  );
  assert.deepEqual((await run(h.client, b.id, 'text(String(load("kept")))')).texts, ["7"]);
  assert.ok(
    h.log.lines.some((l) => String(l.msg).startsWith("session runtime replaced: it kept burning CPU")),
  );
});

Deno.test("Handover: an idle session's runtime is taken before a warm one, which stays in the pool for when no session is idle", async () => {
  await using h = await startHost({ warmSessions: 1, limits: HANDOVER });
  await using a = await openSession(h.client);
  await run(h.client, a.id, 'text("a")');
  assert.ok(await eventually(() => h.host.state.warmCount === 1, 10_000), "the pool refilled");
  const pid = h.host.state.session(a.id)!.runtimePid;
  const onRequestPath = h.host.state.requestPathSpawnCount;
  await using b = await openSession(h.client);
  assert.equal(h.host.state.session(b.id)!.runtimePid, pid, "b took a's runtime");
  assert.equal(h.host.state.warmCount, 1, "the warm runtime was not taken");
  // b runs a cell (not idle now): a's next cell takes the warm runtime.
  const slow = await execute(h.client, b.id, "await new Promise((r) => setTimeout(r, 300))", {
    yieldTimeMs: 10,
  });
  assert.ok(slow.outcome.yielded);
  assert.deepEqual((await run(h.client, a.id, 'text("a again")')).texts, ["a again"]);
  const taken = h.host.state.session(a.id)!.runtimePid;
  assert.ok(taken !== undefined && taken !== pid, "a runs on the warm runtime");
  assert.equal(h.host.state.requestPathSpawnCount, onRequestPath, "no runtime was spawned for a request");
});

Deno.test("Handover 1 stays within one client (a gRPC connection); 2 crosses clients", async (t) => {
  for (const scope of [1, 2]) {
    await t.step(`runtimeHandover=${scope}`, async () => {
      await using h = await startHost({ warmSessions: 0, limits: { runtimeHandover: scope } });
      await using a = await openSession(h.client);
      await run(h.client, a.id, 'store("k", 1)');
      const pid = h.host.state.session(a.id)!.runtimePid;
      using other = rawClient(h.address);
      await using b = await openSession(other.client);
      assert.deepEqual((await run(other.client, b.id, 'text(String(load("k")))')).texts, ["undefined"]);
      const taken = h.host.state.session(b.id)!.runtimePid === pid;
      assert.equal(taken, scope === 2, `another connection's session took a's runtime: ${taken}`);
      assert.equal(h.host.state.spawnCount, scope === 2 ? 1 : 2);
    });
  }
});

Deno.test("Handover: a session that closes gives the runtime back to the session it took it from", async () => {
  await using h = await startHost({ warmSessions: 0, limits: HANDOVER });
  await using a = await openSession(h.client);
  await run(h.client, a.id, 'store("k", "a-value")');
  const pid = h.host.state.session(a.id)!.runtimePid!;
  const b = await openSession(h.client);
  await run(h.client, b.id, 'store("k", "b-value")');
  assert.equal(h.host.state.session(b.id)!.runtimePid, pid);
  await h.client.closeSession({ sessionId: b.id });
  await b[Symbol.asyncDispose]();
  assert.ok(
    await eventually(() => h.host.state.session(a.id)?.runtimePid === pid),
    "a holds its runtime again",
  );
  assert.ok(processExists(pid));
  assert.deepEqual((await run(h.client, a.id, 'text(load("k"))')).texts, ["a-value"]);
  assert.equal(h.host.state.spawnCount, 1, "no runtime was started");
});

Deno.test("Handover: a session that has run no cell yet keeps its runtime; the next session gets another", async () => {
  await using h = await startHost({ warmSessions: 0, limits: HANDOVER });
  await using a = await openSession(h.client);
  a.pump();
  const pid = h.host.state.session(a.id)!.runtimePid!;
  await using b = await openSession(h.client);
  b.pump();
  assert.notEqual(h.host.state.session(b.id)!.runtimePid, pid, "b did not take a's runtime");
  assert.equal(h.host.state.session(a.id)!.runtimePid, pid, "a still holds its runtime");
  assert.equal(h.host.state.spawnCount, 2);
  assert.deepEqual((await run(h.client, a.id, 'text("a")')).texts, ["a"]);
  assert.equal(h.host.state.session(a.id)!.runtimePid, pid, "a's first cell ran on its own runtime");
  assert.equal(h.host.state.spawnCount, 2, "no runtime was started for a's first cell");
});

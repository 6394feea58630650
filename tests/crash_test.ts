/**
 * Crash detection and session limits against a real host (SPEC §3.3–§3.5, §2.8, §5.1; scenarios
 * 10, 18–20, 21a, 21b, 21d–21h, 83b) and the crash matrix: SIGKILL, a garbage frame, a closed
 * stdout and a main-isolate out-of-memory, each detected within 1 s with the right reason.
 */
import assert from "node:assert/strict";
import { Status } from "nice-grpc";
import {
  CapturedLog,
  eventually,
  execute,
  faultRuntimeFiles,
  faultSource,
  fireFault,
  FOREVER,
  grpcError,
  inFlight,
  notified,
  type OpenSession,
  openSession,
  processExists,
  rawClient,
  run,
  settledWithin,
  startHost,
  type TestHost,
} from "./_harness.ts";
import { startH2Proxy } from "./_h2_proxy.ts";
import { FakeClock } from "../host/testing.ts";

/** Starts a never-ending cell whose Execute still awaits its outcome (wrapped, so not awaited). */
async function observedForever(h: TestHost, s: OpenSession, source = FOREVER) {
  const pending = execute(h.client, s.id, source, { yieldTimeMs: 60_000 });
  await eventually(() => (h.host.state.session(s.id)?.runningCells ?? 0) > 0, 5_000);
  return { pending };
}

/**
 * SPEC §3.4's table for closures, as Codex's own host answers it (it wins over the SPEC): sets up
 * an Execute awaiting its outcome (cell 1, which printed "drained") and a 60 s Wait on cell 2, runs
 * `trigger`, and checks that the Execute ends OK without an outcome, the Wait fails `CANCELLED`
 * `code-mode wait was cancelled`, and the lease carries no `CellClosed` for the two cells.
 */
async function assertClosureResults(h: TestHost, s: OpenSession, trigger: () => Promise<unknown> | void) {
  const { pending: first } = await observedForever(h, s, `text("drained"); notify("ready"); ${FOREVER}`);
  assert.ok(await notified(s, "ready"));
  await execute(h.client, s.id, FOREVER, { yieldTimeMs: 1 });
  const wait = grpcError(h.client.wait({ sessionId: s.id, cellId: "2", waitId: "w", yieldTimeMs: 60_000 }));
  assert.ok(await inFlight(h, s.id, 2));
  const triggered = trigger();
  const { started, outcome } = await first;
  assert.equal(started.cellId, "1");
  assert.equal(outcome, undefined, "the Execute ends without an outcome");
  assert.deepEqual(await wait, { code: Status.CANCELLED, details: "code-mode wait was cancelled" });
  await triggered;
  await s.end;
  assert.deepEqual(s.events.filter((e) => e.cellClosed), [], "no CellClosed for cells the closure ended");
}

async function expectCrash(
  h: TestHost,
  s: OpenSession,
  reasonPrefix: string,
  trigger: () => Promise<void> | void,
  source = FOREVER,
): Promise<void> {
  const pid = h.host.state.session(s.id)!.runtimePid!;
  const { pending } = await observedForever(h, s, source);
  const started = performance.now();
  await trigger();
  const { outcome } = await pending;
  assert.ok(performance.now() - started < 1_000, `detected after ${performance.now() - started} ms`);
  assert.equal(outcome.completed?.errorText, "exec runtime ended unexpectedly");
  const end = await s.end;
  assert.equal(end?.code, Status.INTERNAL);
  assert.ok(
    end?.details.startsWith(`code-mode V8 runtime thread ended unexpectedly: ${reasonPrefix}`),
    end?.details,
  );
  assert.deepEqual(await grpcError(execute(h.client, s.id, "text(1)")), {
    code: Status.NOT_FOUND,
    details: `unknown code-mode session ${s.id}`,
  });
  assert.ok(await eventually(() => !processExists(pid)), "the crashed runtime was reaped");
}

Deno.test("Crash matrix: each failure is detected within 1 s with its reason; other sessions live on", async (t) => {
  await using h = await startHost({ warmSessions: 2, runtimeFiles: await faultRuntimeFiles() });
  await using bystander = await openSession(h.client);
  const cases: [string, string, (s: OpenSession) => Promise<void> | void, string?][] = [
    ["SIGKILL by another process (scenario 18)", "worker process killed by signal SIGKILL", (s) => {
      Deno.kill(h.host.state.session(s.id)!.runtimePid!, "SIGKILL");
    }],
    [
      "a garbage frame",
      "worker protocol error: ",
      (s) => fireFault(h, s.id),
      faultSource({ onSignal: "garbageFrame" }, FOREVER),
    ],
    [
      "an exit code",
      "worker process exited with code 1",
      (s) => fireFault(h, s.id),
      faultSource({ onSignal: "runtimeFault", detail: "x" }, FOREVER),
    ],
  ];
  for (const [name, reason, trigger, source] of cases) {
    await t.step(name, async () => {
      const s = await openSession(h.client);
      s.pump();
      if (name === "an exit code") {
        // A RuntimeFault is reported as a panic (owner text `panicked`).
        const { pending } = await observedForever(h, s, source);
        await trigger(s);
        assert.equal((await pending).outcome.completed?.errorText, "exec runtime ended unexpectedly");
        const end = await s.end;
        assert.equal(
          end?.details,
          "code-mode V8 runtime thread panicked: worker reported an internal fault: x",
        );
        return;
      }
      await expectCrash(h, s, reason, () => trigger(s), source);
    });
  }
  assert.deepEqual((await run(h.client, bystander.id, "text(1)")).texts, ["1"]);
});

Deno.test("A runtime process that closes its stdout is a protocol error, detected within 1 s", async () => {
  const relay = new URL("./_stdout_closer.py", import.meta.url).pathname;
  await using h = await startHost({ warmSessions: 1, workerPrefix: ["python3", relay] });
  const s = await openSession(h.client);
  s.pump();
  await expectCrash(h, s, "worker protocol error: unexpected end of stream", () => {
    Deno.kill(h.host.state.session(s.id)!.runtimePid!, "SIGUSR1");
  });
});

Deno.test("A runtime whose main isolate runs out of heap is a crash with 'V8 heap limit reached' (scenario 21h)", async () => {
  await using h = await startHost({
    warmSessions: 1,
    limits: { workerMainHeapMb: 32 },
    runtimeFiles: await faultRuntimeFiles(),
  });
  const s = await openSession(h.client);
  s.pump();
  await using other = await openSession(h.client);
  const { pending } = await observedForever(h, s, faultSource({ onSignal: "exhaustMainHeap" }, FOREVER));
  fireFault(h, s.id);
  assert.equal((await pending).outcome.completed?.errorText, "exec runtime ended unexpectedly");
  const end = await s.end;
  assert.equal(end?.code, Status.INTERNAL);
  assert.ok(end?.details.includes("V8 heap limit reached"), end?.details);
  assert.equal((await grpcError(execute(h.client, s.id, "text(1)"))).code, Status.NOT_FOUND);
  assert.deepEqual((await run(h.client, other.id, "text(1)")).texts, ["1"]);
});

Deno.test("A crash is logged as a JSON error line and the runtime is reaped (scenario 20)", async () => {
  const log = new CapturedLog();
  await using h = await startHost({ log });
  const s = await openSession(h.client);
  s.pump();
  const pid = h.host.state.session(s.id)!.runtimePid!;
  Deno.kill(pid, "SIGKILL");
  await s.end;
  const line = log.lines.find((l) => String(l.msg).startsWith("code-mode host session failed: "));
  assert.ok(line);
  assert.equal(line.exit_code, 137);
  assert.ok(await eventually(() => !processExists(pid)));
});

Deno.test("A cell over a 16 MiB heap fails alone; the session and others go on (scenario 19)", async (t) => {
  await using h = await startHost({ warmSessions: 2 });
  await using s = await openSession(h.client, { cellExecutionLimits: { maxHeapSizeBytes: 16_777_216 } });
  await using other = await openSession(h.client);
  const exhaust = "const a = []; while (true) a.push({ x: new Array(1000).fill(a.length) });";
  // Where the allocation runs matters on Deno 2.9.6 (see worker/cell_bootstrap.ts and the
  // runtime's parked-isolate watchdog): every entry into a cell must end the same way.
  const variants: [string, string][] = [
    ["at the top of the cell", exhaust],
    ["after await", `await null; ${exhaust}`],
    ["in a timer callback", `setTimeout(() => { ${exhaust} }, 0); await new Promise(() => {})`],
    ["in a promise reaction", `await Promise.resolve().then(() => { ${exhaust} })`],
    ["after a tool call settled", `try { await tools.nothing() } catch {} ${exhaust}`],
  ];
  let cellId = 0;
  for (const [name, source] of variants) {
    await t.step(name, async () => {
      const r = await run(h.client, s.id, source);
      cellId++;
      assert.equal(r.error, "exec runtime ended unexpectedly: cell heap limit of 16 MiB reached");
      const next = await run(h.client, s.id, "text(1)");
      cellId++;
      assert.deepEqual(next.texts, ["1"]);
      assert.equal(next.outcome.cellId, String(cellId));
    });
  }
  assert.deepEqual((await run(h.client, other.id, "text(1)")).texts, ["1"]);
});

Deno.test("One allocation far over a 16 MiB cell heap ends the runtime, not the session: the cell fails as over its limit, stored values stay", async () => {
  await using h = await startHost({ warmSessions: 2 });
  await using s = await openSession(h.client, { cellExecutionLimits: { maxHeapSizeBytes: 16_777_216 } });
  s.pump();
  assert.deepEqual((await run(h.client, s.id, 'store("k", "kept"); text("stored")')).texts, ["stored"]);
  const pid = h.host.state.session(s.id)!.runtimePid!;
  // 80 MB of doubles in one allocation: V8 ends the whole runtime process (a Worker's heap limit
  // cannot contain it), where a gradual overrun ends only the cell's Worker.
  const r = await run(h.client, s.id, "const a = new Array(1e7).fill(1.5); text(a.length)");
  assert.equal(r.error, "exec runtime ended unexpectedly: cell heap limit of 16 MiB reached");
  assert.ok(await eventually(() => !processExists(pid)), "the old runtime is gone");
  assert.deepEqual((await run(h.client, s.id, 'text(load("k"))')).texts, ["kept"]);
  assert.notEqual(h.host.state.session(s.id)!.runtimePid, pid);
  assert.equal(s.events.filter((e) => e.cellClosed).length, 3);
});

Deno.test("A cell isolate fault stays a cell error (scenario 21g)", async () => {
  await using h = await startHost({ runtimeFiles: await faultRuntimeFiles() });
  const s = await openSession(h.client);
  s.pump();
  const { pending } = await observedForever(h, s, faultSource({ onSignal: "faultCell" }, FOREVER));
  fireFault(h, s.id);
  assert.equal((await pending).outcome.completed?.errorText, "exec runtime ended unexpectedly");
  const next = await run(h.client, s.id, "text(1)");
  assert.deepEqual(next.texts, ["1"]);
  assert.equal(next.outcome.cellId, "2");
  s.cancel();
});

Deno.test("A cell terminated while its spare isolate still boots ends at once, and the runtime lives on", async () => {
  // A generous cooperative budget, as in scenario 39b: on a loaded machine a cell that began just
  // before its Terminate can wait over 100 ms for a core before it confirms (measured 50–310 ms with
  // four busy loops beside on 2 cores), and this test is about which path the cell takes.
  await using h = await startHost({ warmSessions: 0, limits: { cooperativeStopMs: 2_000 } });
  await using s = await openSession(h.client);
  const pid = h.host.state.session(s.id)!.runtimePid!;
  // Each Execute arrives while the session's next spare is still booting (~50 ms): its StartCell
  // waits for the spare, and the Terminate lands before the cell ever started.
  for (let i = 1; i <= 4; i++) {
    const started = await execute(h.client, s.id, FOREVER, { yieldTimeMs: 1 });
    const cellId = started.outcome.cellId;
    const terminated = await h.client.terminate({ sessionId: s.id, cellId });
    assert.ok(terminated.liveCell.terminated, `cell ${cellId}`);
  }
  assert.deepEqual((await run(h.client, s.id, "text(5)")).texts, ["5"]);
  assert.equal(h.host.state.session(s.id)!.runtimePid, pid, "the runtime was not restarted");
});

Deno.test("maxActiveCells bounds cells host-wide until their CellClosed (scenario 10)", async () => {
  await using h = await startHost({ limits: { maxActiveCells: 2 }, warmSessions: 2 });
  const a = await openSession(h.client);
  a.pump();
  await using b = await openSession(h.client);
  await execute(h.client, a.id, FOREVER, { yieldTimeMs: 1 });
  await execute(h.client, b.id, FOREVER, { yieldTimeMs: 1 });
  assert.deepEqual(await grpcError(execute(h.client, b.id, "text(1)")), {
    code: Status.RESOURCE_EXHAUSTED,
    details: "code-mode host has too many active cells",
  });
  await h.client.terminate({ sessionId: a.id, cellId: "1" });
  assert.ok(await eventually(() => a.events.some((e) => e.cellClosed), 5_000));
  assert.deepEqual((await run(h.client, a.id, "text(3)")).texts, ["3"]);
  a.cancel();
});

Deno.test("maxActiveCellsPerSession bounds one session without starving another (scenario 21d)", async () => {
  await using h = await startHost({ limits: { maxActiveCellsPerSession: 1 }, warmSessions: 2 });
  await using a = await openSession(h.client);
  await using b = await openSession(h.client);
  await execute(h.client, a.id, FOREVER, { yieldTimeMs: 1 });
  assert.deepEqual(await grpcError(execute(h.client, a.id, "text(1)")), {
    code: Status.RESOURCE_EXHAUSTED,
    details: "code-mode session has too many active cells",
  });
  assert.deepEqual((await run(h.client, b.id, "text(1)")).texts, ["1"]);
});

Deno.test("CloseSession: the Execute ends without an outcome, the Wait is cancelled, a Terminate returns (scenario 21a)", async () => {
  await using h = await startHost({ warmSessions: 2, runtimeFiles: await faultRuntimeFiles() });
  const s = await openSession(h.client);
  s.pump();
  await assertClosureResults(h, s, () => h.client.closeSession({ sessionId: s.id }));
  assert.equal((await grpcError(execute(h.client, s.id, "text(1)"))).code, Status.NOT_FOUND);

  const t = await openSession(h.client);
  t.pump();
  // Its runtime handles StopCell 300 ms late.
  await execute(h.client, t.id, faultSource({ delayStopMs: 300 }, FOREVER), { yieldTimeMs: 1 });
  const terminating = h.client.terminate({ sessionId: t.id, cellId: "1" });
  assert.ok(await inFlight(h, t.id, 1));
  await h.client.closeSession({ sessionId: t.id });
  assert.ok((await terminating).liveCell.terminated);
});

Deno.test("Cancelling the lease gives the Execute and the Wait the results of CloseSession (scenario 21b)", async () => {
  await using h = await startHost({ warmSessions: 2 });
  const s = await openSession(h.client);
  s.pump();
  await assertClosureResults(h, s, () => s.cancel());
});

Deno.test("An idle session is closed after idleSessionTimeoutMs; a running cell keeps it (scenario 21e)", async () => {
  // The host's timers run on a fake clock: the idle second passes at once.
  const clock = new FakeClock();
  await using h = await startHost({ clock, limits: { idleSessionTimeoutMs: 500 }, warmSessions: 2 });
  const idle = await openSession(h.client);
  idle.pump();
  const busy = await openSession(h.client);
  busy.pump();
  await clock.runUntil(execute(h.client, busy.id, FOREVER, { yieldTimeMs: 1 }));
  clock.advance(1_000);
  assert.equal(await idle.end, undefined, "the idle lease ended OK");
  assert.equal((await grpcError(execute(h.client, idle.id, "text(1)"))).code, Status.NOT_FOUND);
  assert.ok(h.host.state.session(busy.id), "a session with a running cell stays");
  busy.cancel();
});

Deno.test("Concurrent commits over maxStoredValueBytes: the second fails with the cap message (scenario 83b)", async () => {
  await using h = await startHost({ limits: { maxStoredValueBytes: 1_048_576 } });
  await using s = await openSession(h.client);
  const a = execute(
    h.client,
    s.id,
    'store("a", "x".repeat(600000)); await new Promise(r => setTimeout(r, 50))',
  );
  const b = execute(
    h.client,
    s.id,
    'store("b", "y".repeat(600000)); await new Promise(r => setTimeout(r, 300))',
  );
  const [ra, rb] = await Promise.all([a, b]);
  assert.equal(ra.outcome.completed.errorText, undefined);
  assert.equal(rb.outcome.completed.errorText, "stored values exceed the 1048576-byte session limit");
  assert.deepEqual((await run(h.client, s.id, 'text(typeof load("a") + "," + typeof load("b"))')).texts, [
    "string,undefined",
  ]);
});

Deno.test("OpenSession while draining is UNAVAILABLE", async () => {
  // The race runs in a child process. On Deno 2.9.6 a grpc-js *client* whose new stream meets the
  // server's GOAWAY often crashes the whole process (SIGSEGV, or an nghttp2 assertion in
  // `find_stream_on_goaway_func`); a client-only process crashes the same way against a host in
  // another process, so the fault is Deno's HTTP/2 client, not the host. The same client can also
  // spin: `session.request()` throws on the GOAWAY'd session, grpc-js's transport calls
  // `handleDisconnect()` and the call is picked again on the same subchannel, synchronously, until
  // the process runs out of memory (seen with a debugger attached: `handleDisconnect` ←
  // `createCall` ← `generateCallCredentialsMetadata`). Such a crash or spin says nothing about the
  // host and is retried (a spin is stopped after 30 s); any other failure fails the test.
  for (let attempt = 1;; attempt++) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-all", "tests/_drain_open.ts"],
      cwd: new URL("..", import.meta.url).pathname,
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(30_000),
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    const clientCrash = out.signal === "SIGSEGV" || out.signal === "SIGABRT" || out.signal === "SIGTERM" ||
      stderr.includes("nghttp2");
    if (!out.success && clientCrash && attempt < 10) continue;
    assert.ok(
      out.success,
      `exit ${out.code} ${out.signal ?? ""}: ${stderr} ${new TextDecoder().decode(out.stdout)}`,
    );
    const code = Number(/^refused (-?\d+)$/m.exec(new TextDecoder().decode(out.stdout))?.[1]);
    assert.ok([Status.UNAVAILABLE, -1].includes(code), `refused with ${code}`);
    return;
  }
});

Deno.test("A client that stops acknowledging keep-alive PINGs loses its session (scenario 21f)", async () => {
  await using h = await startHost({ limits: { serverKeepaliveTimeMs: 1000, serverKeepaliveTimeoutMs: 500 } });
  await using proxy = startH2Proxy(h.address, { dropPingAcks: true });
  using raw = rawClient(proxy.address);
  const s = await openSession(raw.client);
  s.pump();
  const pid = h.host.state.session(s.id)!.runtimePid!;
  // The server's first keep-alive PING (after 1 s) is answered, and its answer dropped.
  await settledWithin(proxy.pingAckDropped, 10_000);
  assert.ok(proxy.droppedPingAcks > 0, "the server sent PINGs");
  assert.ok(await eventually(() => !h.host.state.session(s.id), 2_000), "the session was closed");
  assert.ok(await eventually(() => !processExists(pid)), "its runtime was reaped");
  await s.end;
});

Deno.test("Request permits are try-acquired: the next request fails at once with RESOURCE_EXHAUSTED (SPEC §9.5)", async () => {
  await using h = await startHost({ limits: { maxInFlightRequests: 1 } });
  await using s = await openSession(h.client);
  await execute(h.client, s.id, FOREVER, { yieldTimeMs: 1 });
  const holding = h.client.wait({ sessionId: s.id, cellId: "1", waitId: "w1", yieldTimeMs: 60_000 });
  assert.ok(await inFlight(h, s.id, 1));
  assert.deepEqual(
    await grpcError(h.client.wait({ sessionId: s.id, cellId: "1", waitId: "w2", yieldTimeMs: 1 })),
    {
      code: Status.RESOURCE_EXHAUSTED,
      details: "code-mode host has too many in-flight requests",
    },
  );
  await h.client.yieldObservation({ sessionId: s.id, waitId: "w1" });
  assert.ok((await holding).liveCell.yielded);
  assert.ok(
    (await h.client.wait({ sessionId: s.id, cellId: "1", waitId: "w3", yieldTimeMs: 1 })).liveCell.yielded,
  );
});

Deno.test("Host shutdown (what SIGTERM runs) gives the Execute and the Wait the results of CloseSession (scenario 21b)", async () => {
  const h = await startHost({ warmSessions: 2 });
  const s = await openSession(h.client);
  s.pump();
  await assertClosureResults(h, s, () => h.host.shutdown());
  const end = await s.end;
  assert.deepEqual({ code: end?.code, details: end?.details }, {
    code: Status.UNAVAILABLE,
    details: "code-mode host is shutting down",
  });
  await h[Symbol.asyncDispose]();
});

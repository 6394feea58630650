/**
 * A fresh realm per cell in a reused cell Worker (SPEC 1.2 §5.1), through a real host, real runtimes
 * and a real gRPC client. Each matrix row changes something in one cell and shows that the next
 * cell of the same session, run back to back in the same Worker, does not see it. That the Worker
 * really is the same is read from the runtime process's threads: Deno names each Worker's thread
 * `worker-N`, with a new N for every Worker.
 */
import assert from "node:assert/strict";
import {
  execute,
  type Msg,
  openSession,
  type RawClient,
  run,
  startHost,
  type TestHost,
  texts,
} from "./_harness.ts";

/** The Worker threads (`worker-N:tid`) of the session's runtime process. */
function workerThreads(h: TestHost, sessionId: string): Set<string> {
  const pid = h.host.state.session(sessionId)!.runtimePid!;
  const names = new Set<string>();
  for (const entry of Deno.readDirSync(`/proc/${pid}/task`)) {
    try {
      const comm = Deno.readTextFileSync(`/proc/${pid}/task/${entry.name}/comm`).trim();
      if (comm.startsWith("worker-")) names.add(`${comm}:${entry.name}`);
    } catch {
      // The thread ended meanwhile.
    }
  }
  return names;
}

/** The threads of `after` that `before` did not have. */
function added(before: Set<string>, after: Set<string>): string[] {
  return [...after].filter((name) => !before.has(name));
}

/** Answers every tool call of the session with `{"for": <its input>}`, and keeps the calls. */
function answerTools(client: RawClient, sessionId: string, hold: (call: Msg) => boolean = () => false) {
  const abort = new AbortController();
  const calls: Msg[] = [];
  const stream = client.subscribeToToolCalls({ sessionId, toolNames: [] }, { signal: abort.signal });
  const done = (async () => {
    try {
      for await (const call of stream as AsyncIterable<Msg>) {
        calls.push(call);
        if (hold(call)) continue;
        const input = new TextDecoder().decode(call.inputJson ?? new Uint8Array());
        await client.completeToolCall({
          sessionId,
          invocationId: call.invocationId,
          succeeded: { outputJson: new TextEncoder().encode(JSON.stringify({ for: input })) },
        }).catch(() => {});
      }
    } catch {
      // Cancelled at the end of the test.
    }
  })();
  return {
    calls,
    async [Symbol.asyncDispose]() {
      abort.abort();
      await done;
    },
  };
}

// A cell that waits for a later timer of its own: timers of one Worker fire in deadline order, so an
// earlier timer of the previous cell, had it survived, would have fired first.
const LET_TIMERS_RUN = "await new Promise((r) => setTimeout(r, 30));";

Deno.test("Back-to-back cells of a session run in one reused Worker, each in a fresh realm", async (t) => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  s.pump();
  await using tools = answerTools(
    h.client,
    s.id,
    (call) => JSON.parse(new TextDecoder().decode(call.inputJson)) === "held",
  );
  const baseline = await run(h.client, s.id, "text(Object.getOwnPropertyNames(globalThis).sort().join())");
  const before = workerThreads(h, s.id);
  const cell = (source: string) => run(h.client, s.id, source);
  const ECHO = { name: "echo", toolName: { name: "echo" }, description: "the echo tool", kind: 1 };
  const withEcho = async (source: string) => {
    const { outcome } = await execute(h.client, s.id, source, { enabledTools: [ECHO] });
    assert.ok(outcome?.completed, JSON.stringify(outcome));
    return { texts: texts(outcome), error: outcome.completed.errorText };
  };

  await t.step("globals and globalThis properties", async () => {
    await cell(
      'globalThis.leak = 1; var v = 2; Object.defineProperty(globalThis, "hidden", { value: 3 });' +
        "delete globalThis.JSON; delete globalThis.Array; globalThis.Math = 4;",
    );
    const r = await cell(
      "text(Object.getOwnPropertyNames(globalThis).sort().join());" +
        "text([typeof leak, typeof v, typeof hidden, typeof JSON, typeof Array, typeof Math].join())",
    );
    assert.deepEqual(r.texts, [baseline.texts[0], "undefined,undefined,undefined,object,function,object"]);
  });

  await t.step("prototype changes of every built-in", async () => {
    await cell(`
      for (const name of Object.getOwnPropertyNames(globalThis)) {
        const value = globalThis[name];
        if ((typeof value !== "function" && typeof value !== "object") || value === null) continue;
        try { value.__leak = name; } catch {}
        if (value.prototype) { try { value.prototype.__leak = name; } catch {} }
      }
      Array.prototype.push = () => 0;
      Object.prototype.toString = () => "hijacked";
      Object.freeze(Object.prototype);
      Object.setPrototypeOf(Array.prototype, null);`);
    const r = await cell(`
      const seen = [];
      for (const name of Object.getOwnPropertyNames(globalThis)) {
        const value = globalThis[name];
        if ((typeof value !== "function" && typeof value !== "object") || value === null) continue;
        if (Object.hasOwn(value, "__leak") || (value.prototype && Object.hasOwn(value.prototype, "__leak"))) {
          seen.push(name);
        }
      }
      const a = []; a.push(1);
      text(JSON.stringify(seen)); text(a.length); text({}.toString());
      text(Object.isFrozen(Object.prototype)); text(Object.getPrototypeOf(Array.prototype) === Object.prototype);`);
    assert.deepEqual(r.texts, ["[]", "1", "[object Object]", "false", "true"]);
  });

  await t.step("Error.prepareStackTrace and Error.stackTraceLimit", async () => {
    await cell('Error.prepareStackTrace = () => "hijacked"; Error.stackTraceLimit = 0;');
    const r = await cell('text(new Error("e").stack.split("\\n")[0]); text(Error.stackTraceLimit)');
    // A fresh realm's limit is the host's own (64: V8 counts the host's frames below the cell's;
    // a stack shows at most the reference's 10 frames of the cell).
    assert.deepEqual(r.texts, ["Error: e", "64"]);
  });

  await t.step("pending timers", async () => {
    await cell('setTimeout(() => text("late"), 0); setTimeout(() => notify("timer-leak"), 1); text("a")');
    const r = await cell(`${LET_TIMERS_RUN} text("b")`);
    assert.deepEqual(r.texts, ["b"]);
  });

  await t.step("unresolved promises and their then callbacks", async () => {
    await cell(
      "globalThis.p = new Promise((r) => setTimeout(r, 0));" +
        'p.then(() => notify("then-leak")); new Promise(() => {}).then(() => notify("never"));' +
        'Promise.resolve().then(() => text("queued before completion"));',
    );
    const r = await cell(`${LET_TIMERS_RUN} text(typeof p)`);
    assert.deepEqual(r.texts, ["undefined"]);
  });

  await t.step("pending tool calls", async () => {
    const a = await withEcho(
      'tools.echo("held").then((v) => notify("tool-leak " + JSON.stringify(v))); text("a")',
    );
    assert.deepEqual(a.texts, ["a"]);
    const b = await withEcho(`text(JSON.stringify(await tools.echo("b"))); ${LET_TIMERS_RUN}`);
    assert.deepEqual(b.texts, ['{"for":"\\"b\\""}']);
    // The held call of the first cell, answered now, reaches nothing.
    const held = tools.calls.find((c) => new TextDecoder().decode(c.inputJson) === '"held"');
    assert.ok(held);
    await h.client.completeToolCall({
      sessionId: s.id,
      invocationId: held.invocationId,
      succeeded: { outputJson: new TextEncoder().encode('"late"') },
    }).catch(() => {});
    const c = await withEcho(`text(JSON.stringify(await tools.echo("c")))`);
    assert.deepEqual(c.texts, ['{"for":"\\"c\\""}']);
  });

  await t.step("WeakRef and FinalizationRegistry callbacks", async () => {
    await cell(`
      const registry = new FinalizationRegistry((held) => { notify("fr-leak " + held); throw new Error("fr"); });
      for (let i = 0; i < 10_000; i++) registry.register({ i }, i);
      globalThis.registry = registry;
      globalThis.ref = new WeakRef({});`);
    // Garbage enough for several collections, then turns of the Worker's event loop in which V8 runs
    // finalization tasks: the next cell completes normally.
    const r = await cell(`
      let sum = 0;
      for (let i = 0; i < 200; i++) sum += new Array(50_000).fill(i).length;
      for (let i = 0; i < 5; i++) ${LET_TIMERS_RUN}
      text(typeof registry, typeof ref, sum > 0);`);
    assert.deepEqual(r.texts, ["undefined"]);
    assert.equal(r.error, undefined);
  });

  await t.step("closures captured by helpers", async () => {
    await cell(`
      const original = text;
      globalThis.text = (v) => original("hijacked " + v);
      JSON.stringify = () => "hijacked";
      Array.prototype.map = () => [];
      globalThis.setTimeout = () => 0;
      String.prototype.trim = () => "hijacked";`);
    const r = await cell('text({ a: [1] }); await new Promise((r) => setTimeout(r, 0)); text(" x ".trim())');
    assert.deepEqual(r.texts, ['{"a":[1]}', "x"]);
  });

  await t.step("stored values stay, as SPEC §6 says; a failed cell's Worker is reused too", async () => {
    await cell('store("kept", 1); throw new Error("boom")').then((r) =>
      assert.match(r.error!, /^Error: boom/)
    );
    assert.deepEqual((await cell('text(load("kept"))')).texts, ["1"]);
  });

  // Every cell above ran back to back in the Worker of the first: none was created meanwhile (allow
  // one: a Worker that does not confirm its fresh realm within a second, on a loaded machine, is
  // replaced).
  const fresh = added(before, workerThreads(h, s.id));
  assert.ok(fresh.length <= 1, `new Worker threads: ${fresh.join(", ")}`);
  // No notification of any earlier cell reached the lease.
  await run(h.client, s.id, 'notify("barrier")');
  const deadline = Date.now() + 10_000;
  while (!s.events.some((e) => e.notification?.text === "barrier") && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.deepEqual(s.events.filter((e) => e.notification).map((e) => e.notification.text), ["barrier"]);
});

Deno.test("Stored values of another session never reach a cell", async () => {
  await using h = await startHost();
  await using a = await openSession(h.client);
  await using b = await openSession(h.client);
  await run(h.client, a.id, 'store("secret", 42)');
  assert.deepEqual((await run(h.client, b.id, 'text(String(load("secret")))')).texts, ["undefined"]);
  assert.deepEqual((await run(h.client, a.id, 'text(load("secret"))')).texts, ["42"]);
});

Deno.test("A cell after a heavy allocating cell in the same Worker gets its full heap limit", async () => {
  await using h = await startHost();
  // 64 MiB per cell; ~20 MiB of doubles kept by the first cell (under the retire policy's half of
  // the limit), ~46 MiB allocated by the second: over the limit if the first realm were reachable.
  await using s = await openSession(h.client, {
    cellExecutionLimits: { maxHeapSizeBytes: 64 * 1024 * 1024 },
  });
  await run(h.client, s.id, 'text("warm")');
  const before = workerThreads(h, s.id);
  const chunks = (n: number) => `Array.from({ length: ${n} }, () => new Array(3_000).fill(0.5))`;
  const first = await run(h.client, s.id, `globalThis.big = ${chunks(850)}; text(big.length)`);
  assert.deepEqual(first.texts, ["850"]);
  const second = await run(h.client, s.id, `const a = ${chunks(1_950)}; text(a.length)`);
  assert.deepEqual(second.texts, ["1950"], String(second.error));
  assert.equal(second.error, undefined);
  assert.ok(added(before, workerThreads(h, s.id)).length <= 1, "the same Worker ran both cells");
});

Deno.test("A Worker is never reused after a terminated cell or a heap-limit exit", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client, {
    cellExecutionLimits: { maxHeapSizeBytes: 16 * 1024 * 1024 },
  });
  await run(h.client, s.id, 'text("warm")');
  // Terminated: the Worker that ran the cell ends; the next cell runs in a new one.
  {
    const before = workerThreads(h, s.id);
    const stream = h.client.execute({
      sessionId: s.id,
      executionId: crypto.randomUUID(),
      toolCallId: "c",
      source: 'text("a"); await new Promise(() => {})',
      yieldTimeMs: 60_000,
    }) as AsyncIterable<Msg>;
    const iterator = stream[Symbol.asyncIterator]();
    const started = (await iterator.next()).value.started;
    assert.ok((await h.client.terminate({ sessionId: s.id, cellId: started.cellId })).liveCell.terminated);
    for (let r = await iterator.next(); !r.done; r = await iterator.next()) { /* drain */ }
    assert.deepEqual((await run(h.client, s.id, 'text("after stop")')).texts, ["after stop"]);
    const deadline = Date.now() + 10_000;
    while ([...before].some((name) => workerThreads(h, s.id).has(name)) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.deepEqual([...before].filter((name) => workerThreads(h, s.id).has(name)), []);
  }
  // Heap limit: the cell's Worker ends; the next cell completes in a new one.
  {
    const r = await run(h.client, s.id, "const a = []; for (;;) a.push(new Array(1000).fill(a.length))");
    assert.equal(r.error, "exec runtime ended unexpectedly: cell heap limit of 16 MiB reached");
    assert.deepEqual((await run(h.client, s.id, 'text("after heap")')).texts, ["after heap"]);
  }
});

/**
 * Tool calls, notifications and images over real subscriptions and leases (SPEC §7, §12.7, and the
 * image scenarios of §12.5), with a raw gRPC client acting as the harness's delegate.
 */
import assert from "node:assert/strict";
import { Metadata, Status } from "nice-grpc";
import {
  collect,
  eventually,
  execute,
  FOREVER,
  grpcError,
  type Msg,
  type OpenSession,
  openSession,
  type RawClient,
  run,
  SPIN,
  startHost,
  texts,
} from "./_harness.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A tool definition for `enabled_tools`. */
function tool(name: string, toolName: Msg = { name }, kind = 1): Msg {
  return { name, toolName, description: `the ${name} tool`, kind };
}

/** What a delegate answers: JSON value, a failure, or nothing (leave the call pending). */
type Answer = { json: unknown } | { failed: string } | undefined;

/** A raw subscription that records calls and answers them with `answer`. */
interface Delegate extends AsyncDisposable {
  calls: Msg[];
  /** Resolves once the stream's response headers arrived (the subscription is registered). */
  ready: Promise<void>;
  /** Answers a recorded call later. */
  complete(call: Msg, answer: Answer): Promise<unknown>;
  cancel(): void;
  ended: Promise<unknown>;
}

function subscribe(
  client: RawClient,
  sessionId: string,
  options: { filters?: Msg[]; answer?: (call: Msg) => Answer; paused?: boolean } = {},
): Delegate {
  const abort = new AbortController();
  const calls: Msg[] = [];
  const ready = Promise.withResolvers<void>();
  const complete = (call: Msg, answer: Answer) => {
    if (answer === undefined) return Promise.resolve();
    return client.completeToolCall({
      sessionId,
      invocationId: call.invocationId,
      ...("json" in answer
        ? { succeeded: { outputJson: encoder.encode(JSON.stringify(answer.json)) } }
        : { failed: { message: answer.failed } }),
    });
  };
  const stream = client.subscribeToToolCalls(
    { sessionId, toolNames: options.filters ?? [] },
    { signal: abort.signal, onHeader: () => ready.resolve() },
  ) as AsyncIterable<Msg>;
  const ended = (async () => {
    if (options.paused) return await new Promise((r) => abort.signal.addEventListener("abort", r));
    try {
      for await (const call of stream) {
        calls.push(call);
        if (options.answer) void complete(call, options.answer(call)).catch(() => {});
      }
    } catch (error) {
      return error;
    }
  })();
  if (options.paused) {
    // Open the stream (headers) without reading any call.
    const iterator = stream[Symbol.asyncIterator]();
    void iterator.next().catch(() => {});
  }
  return {
    calls,
    ready: ready.promise,
    complete,
    cancel: () => abort.abort(),
    ended,
    async [Symbol.asyncDispose]() {
      abort.abort();
      await ended;
    },
  };
}

const input = (call: Msg) =>
  call.inputJson === undefined ? undefined : JSON.parse(decoder.decode(call.inputJson));

async function session(h: { client: RawClient }): Promise<OpenSession> {
  const s = await openSession(h.client);
  s.pump();
  return s;
}

Deno.test("A tool call reaches the subscription with every field and its result reaches the cell (scenario 84)", async () => {
  await using h = await startHost();
  const s = await session(h);
  await using d = subscribe(h.client, s.id, { answer: () => ({ json: { value: "output" } }) });
  await d.ready;
  await run(h.client, s.id, 'store("key", "persisted")');
  const { outcome } = await execute(
    h.client,
    s.id,
    'const r = await tools.echo({value: String(load("key"))}); notify("notice"); text(r.value)',
    { toolCallId: "call-2", enabledTools: [tool("echo")] },
  );
  assert.deepEqual(texts(outcome), ["output"]);
  assert.equal(d.calls.length, 1);
  const call = d.calls[0];
  assert.equal(call.sessionId, s.id);
  assert.equal(call.cellId, "2");
  assert.equal(call.runtimeToolCallId, "tool-1");
  assert.deepEqual(call.toolName, { name: "echo" });
  assert.equal(call.toolKind, 1);
  assert.deepEqual(input(call), { value: "persisted" });
  assert.equal(String(call.sequence), "1");
  assert.match(call.invocationId, /^[0-9a-f-]{36}$/);
  assert.ok(await eventually(() => s.events.filter((e) => e.cellClosed).length === 2));
  const note = s.events.find((e) => e.notification)?.notification;
  assert.deepEqual([note.callId, note.cellId, note.text], ["call-2", "2", "notice"]);
  const closedAt = s.events.findIndex((e) => e.cellClosed?.cellId === "2");
  assert.ok(s.events.findIndex((e) => e.notification) < closedAt, "notification before CellClosed");
  s.cancel();
});

/** Runs a cell with tools enabled and returns its texts and error. */
async function runTools(
  client: RawClient,
  sessionId: string,
  source: string,
  tools: Msg[],
  extra: Msg = {},
): Promise<{ texts: string[]; error?: string; outcome: Msg }> {
  const { outcome } = await execute(client, sessionId, source, { enabledTools: tools, ...extra });
  assert.ok(outcome.completed, JSON.stringify(outcome));
  return { texts: texts(outcome), error: outcome.completed.errorText, outcome };
}

Deno.test("Filters route calls; sequences count per execution; CellClosed carries the last (scenario 85)", async () => {
  await using h = await startHost();
  const s = await session(h);
  await using echo = subscribe(h.client, s.id, { filters: [{ name: "echo" }], answer: () => ({ json: 1 }) });
  await using other = subscribe(h.client, s.id, {
    filters: [{ name: "other" }],
    answer: () => ({ json: 2 }),
  });
  await Promise.all([echo.ready, other.ready]);
  await runTools(h.client, s.id, "await tools.echo({value: 1}); await tools.echo({value: 2})", [
    tool("echo"),
    tool("other"),
  ]);
  assert.equal(other.calls.length, 0);
  assert.deepEqual(echo.calls.map((c) => [String(c.sequence), input(c)]), [["1", { value: 1 }], ["2", {
    value: 2,
  }]]);
  assert.ok(await eventually(() => s.events.some((e) => e.cellClosed)));
  assert.equal(String(s.events.find((e) => e.cellClosed).cellClosed.finalToolCallSequence), "2");
  s.cancel();
});

Deno.test("Absent, empty and `functions` namespaces are the same default namespace (scenarios 14a, 86)", async (t) => {
  await using h = await startHost();
  const forms: (string | undefined)[] = [undefined, "", "functions"];
  for (const definitionNs of forms) {
    for (const filterNs of forms) {
      await t.step(
        `definition ${JSON.stringify(definitionNs)}, filter ${JSON.stringify(filterNs)}`,
        async () => {
          await using s = await openSession(h.client);
          const filter = filterNs === undefined ? { name: "echo" } : { name: "echo", namespace: filterNs };
          await using d = subscribe(h.client, s.id, { filters: [filter], answer: () => ({ json: "ok" }) });
          await d.ready;
          const toolName = definitionNs === undefined
            ? { name: "echo" }
            : { name: "echo", namespace: definitionNs };
          const r = await runTools(h.client, s.id, "text(await tools.echo())", [tool("echo", toolName)]);
          assert.deepEqual(r.texts, ["ok"]);
          assert.equal(d.calls.length, 1);
        },
      );
    }
  }
});

Deno.test("No matching subscription rejects in JS and the session stays usable (scenario 87)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  await using d = subscribe(h.client, s.id, { filters: [{ name: "other" }] });
  await d.ready;
  const r = await runTools(h.client, s.id, "try { await tools.echo() } catch (e) { text(e) }", [
    tool("echo"),
  ]);
  assert.deepEqual(r.texts, ["no code-mode tool subscription matches the requested tool"]);
  assert.deepEqual((await run(h.client, s.id, "text(1)")).texts, ["1"]);
});

Deno.test("A 64 MiB tool input is refused in JS and uses no sequence number (scenario 88)", async () => {
  await using h = await startHost();
  const s = await session(h);
  await using d = subscribe(h.client, s.id, { answer: () => ({ json: "small" }) });
  await d.ready;
  const r = await runTools(
    h.client,
    s.id,
    'try { await tools.echo("x".repeat(64 * 1024 * 1024)) } catch (e) { text(e) } text(await tools.echo(1))',
    [tool("echo")],
  );
  assert.deepEqual(r.texts, [
    "code-mode tool invocation exceeds the 67108864-byte gRPC message limit",
    "small",
  ]);
  assert.deepEqual(d.calls.map((c) => String(c.sequence)), ["1"]);
  s.cancel();
});

Deno.test("A subscription whose client stops reading never blocks dispatch to another (scenario 89; the full-queue rule is unit-tested in host/tool_bridge_test.ts)", async () => {
  await using h = await startHost({ limits: { subscriptionQueueCapacity: 1 } });
  const s = await session(h);
  await using stuck = subscribe(h.client, s.id, { paused: true });
  await stuck.ready;
  await using live = subscribe(h.client, s.id, { answer: () => ({ json: "live" }) });
  await live.ready;
  // Fill the paused subscription: calls that land there wait in its queue, never answered.
  const r = await runTools(
    h.client,
    s.id,
    "const results = []; for (let i = 0; i < 4; i++) { tools.echo(i).then((v) => results.push(v)) } " +
      "while (results.length === 0) await new Promise((r) => setTimeout(r, 5)); text(results[0])",
    [tool("echo")],
  );
  assert.deepEqual(r.texts, ["live"]);
  s.cancel();
});

Deno.test("A failed tool result rejects the call with its message (scenario 90)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  await using d = subscribe(h.client, s.id, { answer: () => ({ failed: "delegate exploded" }) });
  await d.ready;
  const r = await runTools(
    h.client,
    s.id,
    'try { await tools.echo() } catch (e) { text(e); text("tool recovered") }',
    [tool("echo")],
  );
  assert.deepEqual(r.texts, ["delegate exploded", "tool recovered"]);
  const next = await run(h.client, s.id, 'text("still alive")');
  assert.deepEqual(next.texts, ["still alive"]);
});

Deno.test("Parallel calls, yield, and cancellation of an unawaited call at completion (scenario 91)", async () => {
  await using h = await startHost();
  const s = await session(h);
  await using d = subscribe(h.client, s.id);
  await d.ready;
  const first = await execute(
    h.client,
    s.id,
    'text("hello world"); yield_control(); await Promise.all([tools.a(), tools.b()]); text("hello"); tools.slow(); await tools.barrier()',
    { enabledTools: [tool("a"), tool("b"), tool("slow"), tool("barrier")], yieldTimeMs: 60_000 },
  );
  assert.ok(first.outcome.yielded);
  assert.deepEqual(texts(first.outcome), ["hello world"]);
  assert.ok(await eventually(() => d.calls.length === 2), "a and b are both in flight at once");
  for (const call of d.calls) await d.complete(call, { json: null });
  assert.ok(await eventually(() => d.calls.length === 4));
  const slow = d.calls.find((c) => c.toolName.name === "slow");
  const barrier = d.calls.find((c) => c.toolName.name === "barrier");
  await d.complete(barrier, { json: null });
  const waited = await h.client.wait({ sessionId: s.id, cellId: "1", waitId: "w", yieldTimeMs: 60_000 });
  assert.ok(waited.liveCell.completed);
  assert.deepEqual(texts(waited.liveCell), ["hello"]);
  assert.ok(
    await eventually(() => s.events.some((e) => e.toolCallCancelled?.invocationId === slow.invocationId)),
  );
  // CellClosed follows once the isolate has exited, possibly after the test saw the cancellation.
  assert.ok(await eventually(() => s.events.some((e) => e.cellClosed)));
  const cancelledAt = s.events.findIndex((e) => e.toolCallCancelled);
  assert.ok(cancelledAt < s.events.findIndex((e) => e.cellClosed), "cancellation before CellClosed");
  // A late completion of the cancelled call is accepted and ignored.
  assert.deepEqual(await d.complete(slow, { json: 1 }), {});
  s.cancel();
});

Deno.test("An 8 MiB result of one call never delays other calls or sessions (scenarios 92, 93)", async () => {
  await using h = await startHost({ warmSessions: 2 });
  const slow = await session(h);
  await using fast = await openSession(h.client);
  const big = "y".repeat(8 * 1024 * 1024);
  await using slowDelegate = subscribe(h.client, slow.id);
  await using fastDelegate = subscribe(h.client, fast.id, { answer: () => ({ json: "isolated" }) });
  await Promise.all([slowDelegate.ready, fastDelegate.ready]);
  const large = execute(h.client, slow.id, "text((await tools.large()).length)", {
    enabledTools: [tool("large")],
    yieldTimeMs: 60_000,
  });
  assert.ok(await eventually(() => slowDelegate.calls.length === 1));
  assert.deepEqual((await runTools(h.client, fast.id, "text(await tools.fast())", [tool("fast")])).texts, [
    "isolated",
  ]);
  const completing = slowDelegate.complete(slowDelegate.calls[0], { json: big });
  assert.deepEqual((await runTools(h.client, fast.id, "text(await tools.fast())", [tool("fast")])).texts, [
    "isolated",
  ]);
  await completing;
  assert.deepEqual(texts((await large).outcome), ["8388608"]);
  slow.cancel();
});

Deno.test("Notifications reach the lease before CellClosed and are never awaited (scenarios 94, 95, 12)", async () => {
  await using h = await startHost();
  const s = await session(h);
  const r = await run(h.client, s.id, 'notify("notice"); text("done")');
  assert.deepEqual(r.texts, ["done"]);
  const crab = await run(h.client, s.id, 'notify("🦀".repeat(512))');
  assert.equal(crab.error, undefined);
  assert.ok(await eventually(() => s.events.filter((e) => e.cellClosed).length === 2));
  const notes = s.events.filter((e) => e.notification).map((e) => e.notification);
  assert.deepEqual(notes.map((n) => [n.text, n.cellId, n.callId]), [
    ["notice", "1", "call-1"],
    ["🦀".repeat(512), "2", "call-1"],
  ]);
  assert.ok(s.events.findIndex((e) => e.notification) < s.events.findIndex((e) => e.cellClosed));
  assert.deepEqual(
    await h.client.acknowledgeNotification({ sessionId: s.id, notificationId: notes[0].notificationId }),
    {},
  );
  s.cancel();
});

Deno.test("notify() with blank text fails the cell (scenario 66)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  assert.equal((await run(h.client, s.id, 'notify("   ")')).error, "notify expects non-empty text");
});

Deno.test("A lease nobody reads never blocks Terminate or the session's next cell (scenario 96a)", async () => {
  await using h = await startHost();
  const s = await openSession(h.client); // never read past `opened`
  await execute(
    h.client,
    s.id,
    `for (let i = 0; i < 10000; i++) notify("n" + i); yield_control(); ${FOREVER}`,
    {
      yieldTimeMs: 60_000,
    },
  );
  const started = performance.now();
  const terminated = await h.client.terminate({ sessionId: s.id, cellId: "1" });
  assert.ok(terminated.liveCell.terminated);
  assert.ok(performance.now() - started < 1_000);
  assert.deepEqual((await run(h.client, s.id, "text(1)")).texts, ["1"]);
  s.cancel();
});

Deno.test("Delegate permits bound one session's pending calls, not another's (scenario 96b)", async () => {
  await using h = await startHost({ limits: { maxPendingDelegateCallsPerSession: 2 }, warmSessions: 2 });
  const a = await session(h);
  await using b = await openSession(h.client);
  await using silent = subscribe(h.client, a.id);
  await using answering = subscribe(h.client, b.id, { answer: () => ({ json: "ok" }) });
  await Promise.all([silent.ready, answering.ready]);
  const first = await execute(
    h.client,
    a.id,
    "tools.t(1); tools.t(2); try { await tools.t(3) } catch (e) { text(e) } yield_control(); " + FOREVER,
    { enabledTools: [tool("t")], yieldTimeMs: 60_000 },
  );
  assert.deepEqual(texts(first.outcome), ["code-mode session has too many pending delegate calls"]);
  assert.deepEqual((await runTools(h.client, b.id, "text(await tools.t())", [tool("t")])).texts, ["ok"]);
  a.cancel();
});

Deno.test("Terminating a cell blocked in a tool call cancels the call and discards its writes (scenario 34)", async () => {
  await using h = await startHost();
  const s = await session(h);
  await using d = subscribe(h.client, s.id);
  await d.ready;
  await execute(h.client, s.id, 'store("k", 1); await tools.block()', {
    enabledTools: [tool("block")],
    yieldTimeMs: 100,
  });
  assert.ok(await eventually(() => d.calls.length === 1));
  assert.ok((await h.client.terminate({ sessionId: s.id, cellId: "1" })).liveCell.terminated);
  const next = await run(h.client, s.id, 'text(String(load("k")))');
  assert.deepEqual(next.texts, ["undefined"]);
  assert.equal(next.outcome.cellId, "2");
  assert.ok(
    await eventually(() =>
      s.events.some((e) => e.toolCallCancelled?.invocationId === d.calls[0].invocationId)
    ),
  );
  s.cancel();
});

Deno.test("Dropping a subscription that owes a result retires the session; an idle one does not (scenario 21)", async () => {
  await using h = await startHost({ warmSessions: 2 });
  const s = await session(h);
  const idle = subscribe(h.client, s.id);
  await idle.ready;
  idle.cancel();
  await idle.ended;
  assert.deepEqual((await run(h.client, s.id, "text(1)")).texts, ["1"]);

  const d = subscribe(h.client, s.id);
  await d.ready;
  const pending = execute(h.client, s.id, "await tools.block()", {
    enabledTools: [tool("block")],
    yieldTimeMs: 60_000,
  });
  assert.ok(await eventually(() => d.calls.length === 1));
  d.cancel();
  // As on Codex's own host: the Execute ends OK without an outcome (the SPEC had `terminated`).
  const { started, outcome } = await pending;
  assert.ok(started);
  assert.equal(outcome, undefined, JSON.stringify(outcome));
  assert.equal(await s.end, undefined, "the lease ended OK");
  assert.equal((await grpcError(execute(h.client, s.id, "text(1)"))).code, Status.NOT_FOUND);
});

// The order of Codex's own host (it wins over SPEC §2.6): the invocation ID, the outcome's
// presence, the output JSON, and only then whether the invocation was ever issued.
Deno.test("CompleteToolCall validation order and exact messages (scenarios 6, 14c)", async () => {
  await using h = await startHost();
  const s = await session(h);
  await using d = subscribe(h.client, s.id);
  await d.ready;
  assert.deepEqual(await grpcError(h.client.completeToolCall({ sessionId: s.id, invocationId: "nope" })), {
    code: Status.INVALID_ARGUMENT,
    details: "code-mode tool invocation ID must be a UUID",
  });
  const unknown = crypto.randomUUID();
  assert.deepEqual(await grpcError(h.client.completeToolCall({ sessionId: s.id, invocationId: unknown })), {
    code: Status.INVALID_ARGUMENT,
    details: "tool completion is missing its outcome",
  });
  assert.deepEqual(
    await grpcError(
      h.client.completeToolCall({ sessionId: s.id, invocationId: unknown, failed: { message: "x" } }),
    ),
    { code: Status.NOT_FOUND, details: `unknown code-mode tool invocation ${unknown}` },
  );
  const pending = execute(h.client, s.id, "text(await tools.echo())", {
    enabledTools: [tool("echo")],
    yieldTimeMs: 60_000,
  });
  assert.ok(await eventually(() => d.calls.length === 1));
  const invocationId = d.calls[0].invocationId;
  assert.deepEqual(await grpcError(h.client.completeToolCall({ sessionId: s.id, invocationId })), {
    code: Status.INVALID_ARGUMENT,
    details: "tool completion is missing its outcome",
  });
  const bad = await grpcError(
    h.client.completeToolCall({
      sessionId: s.id,
      invocationId,
      succeeded: { outputJson: encoder.encode("{") },
    }),
  );
  assert.deepEqual(bad, {
    code: Status.INVALID_ARGUMENT,
    details: "invalid code-mode tool output JSON: EOF while parsing an object at line 1 column 1",
  });
  await d.complete(d.calls[0], { json: "done" });
  assert.deepEqual(texts((await pending).outcome), ["done"]);
  assert.deepEqual(await grpcError(h.client.completeToolCall({ sessionId: s.id, invocationId })), {
    code: Status.INVALID_ARGUMENT,
    details: "tool completion is missing its outcome",
  });
  assert.deepEqual(
    await d.complete(d.calls[0], { json: "again" }),
    {},
    "a second completion is accepted and ignored",
  );
  s.cancel();
});

Deno.test("A session takes 128 subscriptions and refuses the 129th; 64 filters are accepted (scenarios 5, 11)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const filters = Array.from({ length: 64 }, (_, i) => ({ name: `t${i}` }));
  const subscriptions = [subscribe(h.client, s.id, { filters })];
  for (let i = 1; i < 128; i++) subscriptions.push(subscribe(h.client, s.id));
  await Promise.all(subscriptions.map((d) => d.ready));
  assert.deepEqual(
    await grpcError(collect(h.client.subscribeToToolCalls({ sessionId: s.id, toolNames: [] }))),
    {
      code: Status.RESOURCE_EXHAUSTED,
      details: "code-mode session has too many tool subscriptions",
    },
  );
  for (const d of subscriptions) d.cancel();
  await Promise.all(subscriptions.map((d) => d.ended));
});

Deno.test("ALL_TOOLS and tools use normalised names; results are plain objects of the context (scenarios 80, 80a)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  await using d = subscribe(h.client, s.id, { answer: () => ({ json: { ok: true } }) });
  await d.ready;
  const r = await runTools(
    h.client,
    s.id,
    "text(JSON.stringify(ALL_TOOLS.map(t => t.name))); text(typeof tools.hidden_dynamic_tool); " +
      "text((await tools.echo({})).constructor === Object)",
    [tool("hidden-dynamic-tool"), tool("echo")],
  );
  assert.deepEqual(r.texts, ['["hidden_dynamic_tool","echo"]', "function", "true"]);
});

Deno.test("Images through the host: forms, details, errors and data-URL rules (scenarios 59–64, 80g)", async (t) => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const image = (outcome: Msg) =>
    outcome.contentItems.map((i: Msg) => i.image ? [i.image.imageUrl, i.image.detail] : i.text.text);
  const cases: [string, string, unknown[]][] = [
    ["URL, default detail high", 'image("data:image/png;base64,AAA")', [["data:image/png;base64,AAA", 3]]],
    ["detail argument", 'image("data:image/png;base64,AAA", "LOW")', [["data:image/png;base64,AAA", 2]]],
    [
      "argument overrides object detail",
      'image({image_url: "data:image/png;base64,AAA", detail: "high"}, "original")',
      [["data:image/png;base64,AAA", 4]],
    ],
    [
      "MCP block",
      'image({type: "image", data: "AAA", mimeType: "image/png", _meta: {"codex/imageDetail": "original"}})',
      [["data:image/png;base64,AAA", 4]],
    ],
    [
      "generatedImage with hint",
      'generatedImage({image_url: "data:image/png;base64,AAA", output_hint: "generated image save hint"})',
      [["data:image/png;base64,AAA", 3], "generated image save hint"],
    ],
  ];
  for (const [name, source, items] of cases) {
    await t.step(name, async () => {
      const r = await run(h.client, s.id, source);
      assert.equal(r.error, undefined);
      assert.deepEqual(image(r.outcome), items);
    });
  }
  const failures: [string, string][] = [
    [
      'image("https://example.com/a.png")',
      "Tool call failed: remote image URLs are not supported in tool outputs. Pass a base64 data URI instead",
    ],
    [
      'generatedImage({image_url: "http://x/y.png"})',
      "Tool call failed: remote image URLs are not supported in tool outputs. Pass a base64 data URI instead",
    ],
    [
      'image("data:image/png;base64,AAA", "medium")',
      "image detail must be one of: auto, low, high, original",
    ],
    [
      'image({content: [{type: "image", data: "AAA", mimeType: "image/png"}]})',
      "image expects a non-empty image URL string, an object with image_url and optional detail, or a raw MCP image block",
    ],
  ];
  for (const [source, message] of failures) {
    await t.step(source, async () => {
      const r = await run(h.client, s.id, source);
      assert.equal(r.error, message);
      assert.deepEqual(r.texts, []);
    });
  }
  await t.step("image_url is read, then the block as its JSON, as the reference does (80g)", async () => {
    const r = await run(
      h.client,
      s.id,
      "const log = []; const o = { get image_url() { log.push('image_url') }, get type() { log.push('type'); return 'image' }, " +
        "get data() { log.push('data'); return 'AAA' }, get mimeType() { log.push('mimeType'); return 'image/png' }, " +
        "get mime_type() { log.push('mime_type') }, get _meta() { log.push('_meta') } }; image(o); text(log.join())",
    );
    assert.deepEqual(image(r.outcome), [
      ["data:image/png;base64,AAA", 3],
      "image_url,image_url,type,data,mimeType,mime_type,_meta",
    ]);
  });
});

Deno.test("8 cells in 4 sessions make 50 concurrent tool calls each: every call answered once", async () => {
  await using h = await startHost({ warmSessions: 4 });
  const sessions = await Promise.all(Array.from({ length: 4 }, () => session(h)));
  const delegates = sessions.map((s) =>
    subscribe(h.client, s.id, { answer: (call) => ({ json: input(call).n * 2 }) })
  );
  await Promise.all(delegates.map((d) => d.ready));
  const source =
    "const results = await Promise.all(Array.from({length: 50}, (_, n) => tools.double({n}))); " +
    "text(results.reduce((a, b) => a + b, 0))";
  const cells = sessions.flatMap((s) => [0, 1].map(() => runTools(h.client, s.id, source, [tool("double")])));
  const results = await Promise.all(cells);
  for (const r of results) assert.deepEqual(r.texts, [String(2 * (49 * 50) / 2)]);
  const ids = delegates.flatMap((d) => d.calls.map((c) => c.invocationId));
  assert.equal(ids.length, 8 * 50);
  assert.equal(new Set(ids).size, ids.length, "each call delivered to exactly one subscription, once");
  for (const d of delegates) d.cancel();
  await Promise.all(delegates.map((d) => d.ended));
  for (const s of sessions) s.cancel();
});

Deno.test("A ToolCall carries the traceparent of the Execute that created its cell (SPEC §2.5, §7.3)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  await using d = subscribe(h.client, s.id, { answer: () => ({ json: 1 }) });
  await d.ready;
  const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const { outcome } = await execute(h.client, s.id, "text(await tools.echo())", {
    enabledTools: [tool("echo")],
  }, {
    metadata: Metadata({ traceparent }),
  });
  assert.deepEqual(texts(outcome), ["1"]);
  assert.equal(d.calls[0].traceparent, traceparent);
  const untraced = await execute(h.client, s.id, "text(await tools.echo())", {
    enabledTools: [tool("echo")],
  });
  assert.deepEqual(texts(untraced.outcome), ["1"]);
  assert.equal(d.calls[1].traceparent, undefined);
});

Deno.test("A runtime restart cancels the tool calls of the other cells (scenario 39a, tool part)", async () => {
  await using h = await startHost({ warmSessions: 2 });
  const s = await session(h);
  await using d = subscribe(h.client, s.id);
  await d.ready;
  const blocked = execute(h.client, s.id, "await tools.block()", {
    enabledTools: [tool("block")],
    yieldTimeMs: 60_000,
  });
  assert.ok(await eventually(() => d.calls.length === 1));
  const spin = await execute(h.client, s.id, SPIN, { yieldTimeMs: 60_000 });
  assert.ok((await h.client.terminate({ sessionId: s.id, cellId: spin.started.cellId })).liveCell.terminated);
  assert.equal(
    (await blocked).outcome.completed?.errorText,
    "exec runtime ended unexpectedly: the session runtime was restarted to stop cell 2",
  );
  assert.ok(
    await eventually(() =>
      s.events.some((e) => e.toolCallCancelled?.invocationId === d.calls[0].invocationId)
    ),
  );
  s.cancel();
});

Deno.test("A runtime killed while a cell waits on a tool call: completion error, INTERNAL lease, NOT_FOUND (scenario 18)", async () => {
  await using h = await startHost();
  const s = await session(h);
  const d = subscribe(h.client, s.id);
  await d.ready;
  const blocked = execute(h.client, s.id, "await tools.block()", {
    enabledTools: [tool("block")],
    yieldTimeMs: 60_000,
  });
  assert.ok(await eventually(() => d.calls.length === 1));
  const started = performance.now();
  Deno.kill(h.host.state.session(s.id)!.runtimePid!, "SIGKILL");
  assert.equal((await blocked).outcome.completed?.errorText, "exec runtime ended unexpectedly");
  assert.ok(performance.now() - started < 1_000);
  const end = await s.end;
  assert.ok(
    end?.details.startsWith(
      "code-mode V8 runtime thread ended unexpectedly: worker process killed by signal SIGKILL",
    ),
  );
  const subscriptionEnd = await d.ended as { code?: number } | undefined;
  assert.equal(subscriptionEnd?.code, Status.INTERNAL, "the subscription ends like the lease");
  assert.equal((await grpcError(execute(h.client, s.id, "text(1)"))).code, Status.NOT_FOUND);
});

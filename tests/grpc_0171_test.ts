/**
 * What Codex 0.171 sends a gRPC host and what its own host (`codex-code-mode-host` 0.171) answers,
 * against a real host over raw gRPC on 127.0.0.1 (docs/codex-0.171-wire.md). Every expected value
 * here was first observed on the reference with the same request.
 */
import assert from "node:assert/strict";
import { type Metadata, Status } from "nice-grpc";
import * as grpc from "@grpc/grpc-js";
import { Buffer } from "node:buffer";
import {
  collect,
  execute,
  FOREVER,
  grpcError,
  inFlight,
  type Msg,
  type OpenSession,
  openSession,
  rawClient,
  run,
  startHost,
  type TestHost,
  texts,
} from "./_harness.ts";
import { grpcMessages, startRecordingRelay } from "./_h2_record.ts";
import { publicProtoRoot } from "../proto/loader.ts";

const RESULT_BUFFERED = "codex-code-mode-result-buffered-for-ns";
const enc = new TextEncoder();

function tool(name: string): Msg {
  return { name, toolName: { name }, description: "", kind: 1 };
}

/** Reads lease events until `predicate` matches one; returns every event read. */
async function leaseUntil(s: OpenSession, predicate: (event: Msg) => boolean): Promise<Msg[]> {
  const seen: Msg[] = [];
  for (;;) {
    const r = await s.next();
    if (r.done) throw new Error("lease ended");
    seen.push(r.value);
    if (predicate(r.value)) return seen;
  }
}

/** A tool subscription read one call at a time (its first read starts the call). */
function subscribe(h: TestHost, request: Msg) {
  const abort = new AbortController();
  const headers = Promise.withResolvers<void>();
  const stream = h.client.subscribeToToolCalls(request, {
    signal: abort.signal,
    onHeader: () => headers.resolve(),
  }) as AsyncIterable<Msg>;
  const iterator = stream[Symbol.asyncIterator]();
  let pending: Promise<IteratorResult<Msg>> | undefined = iterator.next();
  pending.catch(() => {});
  return {
    registered: headers.promise,
    next: async () => {
      const read = pending ?? iterator.next();
      pending = undefined;
      return (await read).value as Msg;
    },
    [Symbol.dispose]: () => abort.abort(),
  };
}

Deno.test("OpenSession: SessionOpened names the mode only for SERVER and always supports catalog revisions; other modes are refused", async (t) => {
  await using h = await startHost();
  for (const asked of [undefined, 0, 1]) {
    await t.step(`output_truncation ${asked}`, async () => {
      await using s = await openSession(h.client, asked === undefined ? {} : { outputTruncation: asked });
      assert.equal(s.opened.outputTruncation, undefined);
      assert.equal(s.opened._outputTruncation, undefined, "absent, not CLIENT");
      assert.equal(s.opened.supportsCatalogRevision, true);
    });
  }
  await t.step("SERVER", async () => {
    await using s = await openSession(h.client, { outputTruncation: 2, maxPendingDelegateCalls: 4096 });
    assert.equal(s.opened.outputTruncation, 2);
    assert.equal(s.opened.supportsCatalogRevision, true);
  });
  for (const asked of [3, 99, -1]) {
    await t.step(`output_truncation ${asked} is refused`, async () => {
      assert.deepEqual(await grpcError(collect(h.client.openSession({ outputTruncation: asked }))), {
        code: Status.INVALID_ARGUMENT,
        details: "unknown code-mode output truncation mode",
      });
    });
  }
});

Deno.test("OpenSession: max_pending_delegate_calls is a uint32, 0 is refused before the mode", async () => {
  await using h = await startHost();
  const refused = { code: Status.INVALID_ARGUMENT, details: "callback capacity must be positive" };
  assert.deepEqual(await grpcError(collect(h.client.openSession({ maxPendingDelegateCalls: 0 }))), refused);
  assert.deepEqual(
    await grpcError(collect(h.client.openSession({ maxPendingDelegateCalls: 0, outputTruncation: 3 }))),
    refused,
  );
  // A uint32 field: 2^32 reads as 0, 2^32 + 1 as 1 (raw bytes: the encoder would refuse them).
  const raw = new grpc.Client(h.address, grpc.credentials.createInsecure());
  try {
    const first = (bytes: number[]) =>
      new Promise<{ code: number; details: string; message?: Uint8Array }>((resolve) => {
        const call = raw.makeServerStreamRequest(
          "/codex.code_mode.v1.CodeModeHost/OpenSession",
          (b: Uint8Array) => Buffer.from(b),
          (b: Buffer) => new Uint8Array(b),
          new Uint8Array(bytes),
        );
        call.on("data", (message: Uint8Array) => {
          resolve({ code: 0, details: "", message });
          call.cancel();
        });
        call.on("error", () => {});
        call.on("status", (s) => resolve({ code: s.code, details: s.details }));
      });
    assert.deepEqual(await first([0x18, 0x80, 0x80, 0x80, 0x80, 0x10]), {
      code: 3,
      details: refused.details,
    });
    assert.ok((await first([0x18, 0x81, 0x80, 0x80, 0x80, 0x10])).message, "2^32 + 1 opens a session");
  } finally {
    raw.close();
  }
});

Deno.test("OpenSession: max_pending_delegate_calls caps the session's pending tool calls; a notify past the cap is dropped", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client, { maxPendingDelegateCalls: 1 });
  using sub = subscribe(h, { sessionId: s.id });
  await sub.registered;
  // The cell yields once the second call was refused, while the first one is still pending.
  const { started, outcome } = await execute(
    h.client,
    s.id,
    `const first = tools.a({}); notify("dropped");
     const second = await tools.b({}).then(() => "called", (e) => String(e));
     text(second); yield_control(); text(await first)`,
    { enabledTools: [tool("a"), tool("b")] },
  );
  assert.deepEqual(texts(outcome), ["code-mode session has too many pending delegate calls"]);
  const call = await sub.next();
  assert.equal(call.toolName.name, "a");
  await h.client.completeToolCall({
    sessionId: s.id,
    invocationId: call.invocationId,
    succeeded: { outputJson: enc.encode('"ok"') },
  });
  const rest = await h.client.wait({
    sessionId: s.id,
    cellId: started.cellId,
    waitId: "w",
    yieldTimeMs: 10_000,
  });
  assert.deepEqual(texts(rest.liveCell), ["ok"]);
  const events = await leaseUntil(s, (e) => e.cellClosed);
  assert.deepEqual(events.filter((e) => e.notification), [], "the notify found no free permit");
  // Another session, without a cap of its own, runs both calls.
  await using other = await openSession(h.client, {});
  using sub2 = subscribe(h, { sessionId: other.id });
  await sub2.registered;
  const both = execute(
    h.client,
    other.id,
    `text((await Promise.all([tools.a({}), tools.b({})])).join())`,
    { enabledTools: [tool("a"), tool("b")] },
  );
  for (let i = 0; i < 2; i++) {
    const c = await sub2.next();
    await h.client.completeToolCall({
      sessionId: other.id,
      invocationId: c.invocationId,
      succeeded: { outputJson: enc.encode(JSON.stringify(c.toolName.name)) },
    });
  }
  assert.deepEqual(texts((await both).outcome), ["a,b"]);
});

Deno.test("Execute: catalog_revision is accepted with the tools it names", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client, { maxPendingDelegateCalls: 4096 });
  const { outcome } = await execute(h.client, s.id, "text(typeof tools.a)", {
    enabledTools: [tool("a")],
    catalogRevision: 1,
  });
  assert.deepEqual(texts(outcome), ["function"]);
});

Deno.test("Execute: max_output_tokens and yield_time_ms take any uint64", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client, { outputTruncation: 2 });
  const huge = "18446744073709551615";
  const { outcome } = await execute(h.client, s.id, "text(1)", { maxOutputTokens: huge, yieldTimeMs: huge });
  assert.deepEqual(texts(outcome), ["1"]);
});

Deno.test("OpenSession: every max_heap_size_bytes is accepted, as the reference accepts it", async () => {
  await using h = await startHost();
  for (const heap of [0, 1_048_576, 16_777_215, "9007199254740992", "18446744073709551615"]) {
    await using s = await openSession(h.client, { cellExecutionLimits: { maxHeapSizeBytes: heap } });
    assert.deepEqual((await run(h.client, s.id, "text(1)")).texts, ["1"], `heap ${heap}`);
  }
});

Deno.test("Wait and Terminate carry codex-code-mode-result-buffered-for-ns with a cell's completion only", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const headerOf = async (call: (options: Msg) => Promise<Msg>) => {
    let header: string | undefined;
    const response = await call({ onHeader: (m: Metadata) => header = m.get(RESULT_BUFFERED) });
    return { response, header };
  };
  const wait = (cellId: string, yieldTimeMs = 0) => (options: Msg) =>
    h.client.wait({ sessionId: s.id, cellId, waitId: crypto.randomUUID(), yieldTimeMs }, options);
  const terminate = (cellId: string) => (options: Msg) =>
    h.client.terminate({ sessionId: s.id, cellId }, options);

  // 1. The cell completes while nothing observes it: the Wait that takes the completion says how
  //    long it was buffered.
  const background = await execute(h.client, s.id, 'text("a"); yield_control(); text("b")');
  assert.ok(background.outcome.yielded);
  await leaseUntil(s, (e) => e.cellClosed?.cellId === background.started.cellId);
  const buffered = await headerOf(wait(background.started.cellId));
  assert.deepEqual(texts(buffered.response.liveCell), ["b"]);
  assert.ok(buffered.header !== undefined && BigInt(buffered.header) > 0n, `header ${buffered.header}`);

  // 2. A Wait that is attached when the cell completes: "0".
  using sub = subscribe(h, { sessionId: s.id });
  await sub.registered;
  const live = await execute(h.client, s.id, 'yield_control(); await tools.a({}); text("c")', {
    enabledTools: [tool("a")],
  });
  const call = await sub.next();
  const attached = headerOf(wait(live.started.cellId, 60_000));
  assert.ok(await inFlight(h, s.id, 1));
  await h.client.completeToolCall({
    sessionId: s.id,
    invocationId: call.invocationId,
    succeeded: { outputJson: enc.encode("1") },
  });
  const liveResult = await attached;
  assert.deepEqual(texts(liveResult.response.liveCell), ["c"]);
  assert.equal(liveResult.header, "0");

  // 3. Yielded, terminated and missing outcomes carry none; a Terminate that takes a buffered
  //    completion does.
  const running = await execute(h.client, s.id, `text("x"); yield_control(); ${FOREVER}`);
  const yielded = await headerOf(wait(running.started.cellId));
  assert.ok(yielded.response.liveCell.yielded);
  assert.equal(yielded.header, undefined);
  const terminated = await headerOf(terminate(running.started.cellId));
  assert.ok(terminated.response.liveCell.terminated);
  assert.equal(terminated.header, undefined);
  const missing = await headerOf(wait("999"));
  assert.ok(missing.response.missingCell);
  assert.equal(missing.header, undefined);
  const finished = await execute(h.client, s.id, 'yield_control(); text("d")');
  await leaseUntil(s, (e) => e.cellClosed?.cellId === finished.started.cellId);
  const takenByTerminate = await headerOf(terminate(finished.started.cellId));
  assert.deepEqual(texts(takenByTerminate.response.liveCell), ["d"]);
  assert.ok(takenByTerminate.response.liveCell.completed);
  assert.ok(takenByTerminate.header !== undefined && BigInt(takenByTerminate.header) > 0n);

  // 4. Execute never carries it.
  let executeHeader: string | undefined = "unset";
  for await (
    const _ of h.client.execute(
      { sessionId: s.id, executionId: crypto.randomUUID(), toolCallId: "c", source: "text(1)" },
      { onHeader: (m: Metadata) => executeHeader = m.get(RESULT_BUFFERED) },
    ) as AsyncIterable<Msg>
  ) { /* drain */ }
  assert.equal(executeHeader, undefined);
});

Deno.test("SubscribeToToolCalls: heartbeat_interval_s sends a heartbeat after each idle interval, with the canonical session ID only", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  // Subscription A: no heartbeats, tool a. Subscription B: 1 s heartbeats, tool b; named with the
  // session ID in upper case (the heartbeat carries the canonical form).
  using a = subscribe(h, { sessionId: s.id, toolNames: [{ name: "a" }] });
  using b = subscribe(h, {
    sessionId: s.id.toUpperCase(),
    toolNames: [{ name: "b" }],
    heartbeatIntervalS: 1,
  });
  await a.registered;
  await b.registered;
  const heartbeat = await b.next();
  assert.deepEqual(heartbeat, { sessionId: s.id, heartbeat: {}, _heartbeat: "heartbeat" });
  assert.deepEqual(await b.next(), heartbeat, "another after the next idle second");
  // A has been idle for more than a second too, and its first message is the call itself.
  const cell = execute(h.client, s.id, "await tools.a({}); text(String(await tools.b({})))", {
    enabledTools: [tool("a"), tool("b")],
  });
  const callA = await a.next();
  assert.equal(callA.toolName.name, "a");
  await h.client.completeToolCall({
    sessionId: s.id,
    invocationId: callA.invocationId,
    succeeded: { outputJson: enc.encode("1") },
  });
  // B: the call (heartbeats may come before it), then heartbeats again while it is pending.
  let callB = await b.next();
  while (callB.heartbeat) callB = await b.next();
  assert.equal(callB.toolName.name, "b");
  assert.equal(callB.heartbeat, undefined);
  assert.deepEqual(await b.next(), heartbeat, "a heartbeat while the call is pending");
  await h.client.completeToolCall({
    sessionId: s.id,
    invocationId: callB.invocationId,
    succeeded: { outputJson: enc.encode("2") },
  });
  assert.deepEqual(texts((await cell).outcome), ["2"]);
});

Deno.test("GetProcessMetrics answers UNIMPLEMENTED as the reference does on Linux", async () => {
  await using h = await startHost();
  assert.deepEqual(await grpcError(h.client.getProcessMetrics({})), {
    code: Status.UNIMPLEMENTED,
    details: "process metrics are unsupported",
  });
});

Deno.test("UUIDs: a session is named by any form the reference parses; the refusal quotes the form sent", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const upper = s.id.toUpperCase();
  for (const form of [upper, `{${s.id}}`, `urn:uuid:${s.id}`, s.id.replaceAll("-", "")]) {
    const { outcome } = await execute(h.client, form, "text(1)");
    assert.deepEqual(texts(outcome), ["1"], form);
  }
  const unknown = "ABCDEF12-2222-4333-8444-555555555555";
  for (const form of [unknown, `{${unknown}}`]) {
    assert.deepEqual(await grpcError(h.client.closeSession({ sessionId: form })), {
      code: Status.NOT_FOUND,
      details: `unknown code-mode session ${form}`,
    });
  }
  assert.deepEqual(await grpcError(h.client.closeSession({ sessionId: `{${s.id.replaceAll("-", "")}}` })), {
    code: Status.INVALID_ARGUMENT,
    details: "code-mode session ID must be a UUID",
  });
  // Invocation IDs too; their refusal quotes the canonical form.
  assert.deepEqual(
    await grpcError(
      h.client.completeToolCall({
        sessionId: s.id,
        invocationId: `urn:uuid:${unknown}`,
        failed: { message: "x" },
      }),
    ),
    { code: Status.NOT_FOUND, details: `unknown code-mode tool invocation ${unknown.toLowerCase()}` },
  );
  using sub = subscribe(h, { sessionId: `{${upper}}` });
  await sub.registered;
  const cell = execute(h.client, upper, "text(await tools.a({}))", { enabledTools: [tool("a")] });
  const call = await sub.next();
  assert.equal(call.sessionId, s.id);
  await h.client.completeToolCall({
    sessionId: upper,
    invocationId: `{${call.invocationId.toUpperCase()}}`,
    succeeded: { outputJson: enc.encode('"done"') },
  });
  assert.deepEqual(texts((await cell).outcome), ["done"]);
});

Deno.test("CompleteToolCall checks the outcome and its JSON before whether the invocation was issued, with serde_json's texts", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const never = crypto.randomUUID();
  const complete = (outcome: Msg) =>
    grpcError(h.client.completeToolCall({ sessionId: s.id, invocationId: never, ...outcome }));
  assert.deepEqual(await complete({}), {
    code: Status.INVALID_ARGUMENT,
    details: "tool completion is missing its outcome",
  });
  const json = (text: string | Uint8Array) =>
    complete({ succeeded: { outputJson: typeof text === "string" ? enc.encode(text) : text } });
  const badJson = (details: string) => ({
    code: Status.INVALID_ARGUMENT,
    details: `invalid code-mode tool output JSON: ${details}`,
  });
  assert.deepEqual(await json("{"), badJson("EOF while parsing an object at line 1 column 1"));
  assert.deepEqual(await json(""), badJson("EOF while parsing a value at line 1 column 0"));
  assert.deepEqual(await json("{} x"), badJson("trailing characters at line 1 column 4"));
  assert.deepEqual(
    await json(new Uint8Array([0x22, 0xc3, 0x22])),
    badJson("invalid unicode code point at line 1 column 3"),
  );
  assert.deepEqual(await json("1e400"), {
    code: Status.NOT_FOUND,
    details: `unknown code-mode tool invocation ${never}`,
  });
  assert.deepEqual(await complete({ failed: { message: "x" } }), {
    code: Status.NOT_FOUND,
    details: `unknown code-mode tool invocation ${never}`,
  });
  // Tool schemas get the same texts.
  assert.deepEqual(
    await grpcError(
      execute(h.client, s.id, "text(1)", {
        enabledTools: [{ ...tool("a"), inputSchemaJson: enc.encode("nope") }],
      }),
    ),
    {
      code: Status.INVALID_ARGUMENT,
      details: "invalid tool input schema: expected ident at line 1 column 2",
    },
  );
});

Deno.test("A successful call ends with an empty status message, as the reference's do", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const raw = new grpc.Client(h.address, grpc.credentials.createInsecure());
  try {
    const details = await new Promise<string>((resolve) => {
      const call = raw.makeServerStreamRequest(
        "/codex.code_mode.v1.CodeModeHost/Execute",
        (b: Uint8Array) => Buffer.from(b),
        (b: Buffer) => b,
        // session_id, execution_id, tool_call_id, source
        new Uint8Array([
          ...[0x0a, s.id.length, ...enc.encode(s.id)],
          ...[0x12, 2, ...enc.encode("e1")],
          ...[0x1a, 1, ...enc.encode("c")],
          ...[0x22, 7, ...enc.encode("text(1)")],
        ]),
      );
      call.on("data", () => {});
      call.on("status", (status) => resolve(`${status.code} ${JSON.stringify(status.details)}`));
    });
    assert.equal(details, '0 ""');
  } finally {
    raw.close();
  }
});

Deno.test("A lease that is not read holds a cell's outcome back only briefly; its notifications follow, in order", async () => {
  await using h = await startHost();
  // The lease on its own connection, paused after `opened`: HTTP/2 flow control stops the host's
  // writes once the client's window is full (500 notifications of 1 kB are more than that).
  const raw = new grpc.Client(h.address, grpc.credentials.createInsecure(), {
    "grpc.use_local_subchannel_pool": 1,
  });
  const lease = raw.makeServerStreamRequest(
    "/codex.code_mode.v1.CodeModeHost/OpenSession",
    (b: Uint8Array) => Buffer.from(b),
    (b: Buffer) => new Uint8Array(b),
    new Uint8Array(),
  );
  try {
    lease.on("error", () => {});
    const opened: Uint8Array = await new Promise((resolve) => lease.once("data", resolve));
    lease.pause();
    const sessionId = new TextDecoder().decode(opened.subarray(4, 40)); // SessionOpened.session_id
    const received: Uint8Array[] = [];
    const closed = Promise.withResolvers<void>();
    lease.on("data", (m: Uint8Array) => {
      received.push(m);
      if (m[0] === 0x2a) closed.resolve(); // SessionEvent.cell_closed
    });
    const { outcome } = await execute(
      h.client,
      sessionId,
      'for (let i = 0; i < 500; i++) notify("n" + i + "x".repeat(1000)); text("done")',
    );
    assert.deepEqual(texts(outcome), ["done"], "the outcome came while the lease was stalled");
    lease.resume();
    await closed.promise;
    const notes = received.filter((m) => m[0] === 0x1a).map((m) =>
      new TextDecoder().decode(m).match(/n\d+/)![0]
    );
    assert.deepEqual(notes, Array.from({ length: 500 }, (_, i) => `n${i}`));
  } finally {
    lease.cancel();
    raw.close();
  }
});

Deno.test("On the wire, a cell's notifications precede its Execute outcome and its Wait outcome (issue 25 item 4)", async () => {
  await using h = await startHost();
  // A relay in front of the host that records what the host sends.
  await using relay = startRecordingRelay(h.address);
  const { client, channel } = rawClient(relay.address);
  const cells = 30;
  try {
    await using s = await openSession(client);
    s.pump();
    for (let i = 0; i < cells; i++) {
      const viaWait = i % 2 === 1;
      const source = viaWait
        ? 'yield_control(); notify("a"); notify("b"); notify("c"); text("done")'
        : 'notify("a"); notify("b"); notify("c"); text("done")';
      const { started, outcome } = await execute(client, s.id, source);
      if (viaWait) {
        assert.ok(outcome.yielded);
        const r = await client.wait({
          sessionId: s.id,
          cellId: started.cellId,
          waitId: crypto.randomUUID(),
          yieldTimeMs: 10_000,
        });
        assert.deepEqual(texts(r.liveCell), ["done"]);
      } else assert.deepEqual(texts(outcome), ["done"]);
    }
  } finally {
    channel.close();
  }
  await relay[Symbol.asyncDispose]();
  const root = publicProtoRoot();
  const SessionEvent = root.lookupType("codex.code_mode.v1.SessionEvent");
  const ExecuteEvent = root.lookupType("codex.code_mode.v1.ExecuteEvent");
  const WaitResponse = root.lookupType("codex.code_mode.v1.WaitResponse");
  const messages = grpcMessages(relay.serverBytes());
  const leaseStream = messages[0].stream;
  const notes = new Map<string, number>();
  let checked = 0;
  for (const { stream, message } of messages) {
    if (stream === leaseStream) {
      const event = SessionEvent.decode(message) as Msg;
      if (event.notification) {
        notes.set(event.notification.cellId, (notes.get(event.notification.cellId) ?? 0) + 1);
      }
      continue;
    }
    // An Execute stream carries `started` then its outcome; a Wait stream its one response.
    const single = messages.filter((m) => m.stream === stream).length === 1;
    // deno-lint-ignore no-explicit-any
    const outcome: any = single
      ? (WaitResponse.decode(message) as Msg).liveCell
      : (ExecuteEvent.decode(message) as Msg).outcome;
    if (!outcome?.completed) continue;
    assert.equal(
      notes.get(outcome.cellId),
      3,
      `cell ${outcome.cellId}: its notifications before its outcome`,
    );
    checked++;
  }
  assert.equal(checked, cells);
});

Deno.test("SubscribeToToolCalls: its header block comes at registration, with no header of ours, as the reference sends it", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const header = Promise.withResolvers<Metadata>();
  const abort = new AbortController();
  const stream = h.client.subscribeToToolCalls({ sessionId: s.id }, {
    signal: abort.signal,
    onHeader: (m: Metadata) => header.resolve(m),
  }) as AsyncIterable<Msg>;
  const reading = (async () => {
    try {
      for await (const _ of stream) { /* no calls */ }
    } catch { /* aborted */ }
  })();
  const metadata = await header.promise;
  assert.deepEqual([...metadata].filter(([key]) => key.startsWith("x-")), []);
  abort.abort();
  await reading;
});

Deno.test("Field presence as prost writes it: an empty text item's text is left out, an empty error_text is kept", async () => {
  await using h = await startHost();
  await using relay = startRecordingRelay(h.address);
  const { client, channel } = rawClient(relay.address);
  try {
    await using s = await openSession(client);
    assert.deepEqual((await execute(client, s.id, 'text(""); text("x")')).outcome.completed, {});
    await execute(client, s.id, 'throw ""');
  } finally {
    channel.close();
  }
  await relay[Symbol.asyncDispose]();
  const ExecuteEvent = publicProtoRoot().lookupType("codex.code_mode.v1.ExecuteEvent");
  const outcomes = grpcMessages(relay.serverBytes())
    .map(({ message }) => {
      try {
        return ExecuteEvent.decode(message) as Msg;
      } catch {
        return undefined;
      }
    })
    .filter((e) => e?.outcome?.cellId);
  const has = (o: object, key: string) => Object.prototype.hasOwnProperty.call(o, key);
  const [first, second] = outcomes.map((e) => e!.outcome);
  assert.equal(first.contentItems.length, 2);
  assert.ok(!has(first.contentItems[0].text, "text"), "an empty text is not on the wire");
  assert.equal(first.contentItems[1].text.text, "x");
  assert.ok(has(second.completed, "errorText"), "error_text has presence: an empty one is written");
  assert.equal(second.completed.errorText, "");
});

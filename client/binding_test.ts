import assert from "node:assert/strict";
import type { ToolCall } from "../proto/code_mode_types.ts";
import { CodeModeError } from "../proto/errors.ts";
import type { CellRecord } from "./binding.ts";
import { FakeHost, openBinding, RecordingDelegate, until } from "./_fake_host_test.ts";
import type { ToolDefinition } from "./types.ts";

const encoder = new TextEncoder();
const STALE = "cell belongs to a stale code-mode host generation";

const lookup: ToolDefinition = {
  name: "lookup",
  toolName: { name: "lookup" },
  description: "looks things up",
  kind: "function",
};

/** Registers an execution as `execute` does before sending it. */
function execution(
  binding: Awaited<ReturnType<typeof openBinding>>["binding"],
  delegate = new RecordingDelegate(),
  enabledTools: ToolDefinition[] = [lookup],
): { cell: CellRecord; delegate: RecordingDelegate } {
  const cell = binding.addExecution({
    executionId: crypto.randomUUID(),
    toolCallId: "call-1",
    delegate,
    enabledTools,
  });
  return { cell, delegate };
}

function toolCall(cell: CellRecord, fields: Partial<ToolCall> = {}): ToolCall {
  return {
    sessionId: "session-1",
    executionId: cell.executionId,
    cellId: "1",
    invocationId: crypto.randomUUID(),
    runtimeToolCallId: "tool-1",
    toolName: { name: "lookup" },
    toolKind: 1,
    inputJson: encoder.encode(JSON.stringify({ q: 1 })),
    ...fields,
  };
}

async function completion(host: FakeHost, count = 1) {
  return (await host.called("completeToolCall", count)).request;
}

Deno.test("Binding maps host cell IDs to public IDs by generation and refuses another generation's ID", async () => {
  const first = await openBinding(new FakeHost(), { generation: 1 });
  assert.equal(first.binding.publicId("3"), "3");
  assert.equal(first.binding.hostId("3"), "3");
  const second = await openBinding(new FakeHost(), { generation: 2 });
  assert.equal(second.binding.publicId("3"), "g2:3");
  assert.equal(second.binding.hostId("g2:3"), "3");
  for (const stale of ["3", "g1:3", "g2:", "g3:3"]) {
    assert.throws(() => second.binding.hostId(stale), { message: STALE }, stale);
  }
  first.binding.fail(new CodeModeError(undefined, "done"));
  second.binding.fail(new CodeModeError(undefined, "done"));
});

Deno.test("Binding.catalogFor: a new tool set takes the next revision and goes alone once an Execute carrying it started", async () => {
  const { binding } = await openBinding(new FakeHost(), { supportsCatalogRevision: true });
  assert.deepEqual(binding.catalogFor("A"), { revision: 1, withTools: true });
  assert.deepEqual(binding.catalogFor("A"), { revision: 1, withTools: true }, "not confirmed yet");
  binding.confirmCatalog(1);
  assert.deepEqual(binding.catalogFor("A"), { revision: 1, withTools: false });
  assert.deepEqual(binding.catalogFor("B"), { revision: 2, withTools: true });
  binding.confirmCatalog(1); // a stale confirmation changes nothing
  assert.deepEqual(binding.catalogFor("B"), { revision: 2, withTools: true });
  binding.forgetCatalog();
  assert.deepEqual(binding.catalogFor("B"), { revision: 3, withTools: true });
  assert.equal(binding.catalogFor("[]"), undefined, "no tools: no revision");
  binding.fail(new CodeModeError(undefined, "done"));

  const plain = await openBinding(new FakeHost(), { supportsCatalogRevision: false });
  assert.equal(plain.binding.catalogFor("A"), undefined, "the host does not take revisions");
  plain.binding.fail(new CodeModeError(undefined, "done"));
});

Deno.test("a tool call runs on the delegate with the public cell ID, and its JSON result completes the invocation", async () => {
  const host = new FakeHost();
  const { binding, subscription } = await openBinding(host, { generation: 2 });
  const { cell, delegate } = execution(binding);
  const call = toolCall(cell, { toolName: { name: "lookup", namespace: "functions" } });
  subscription.push(call);
  const request = await completion(host);
  assert.deepEqual(delegate.toolCalls, [{
    cellId: "g2:1",
    runtimeToolCallId: "tool-1",
    toolName: { name: "lookup", namespace: "functions" },
    toolKind: "function",
    input: { q: 1 },
  }]);
  assert.equal(request.sessionId, "session-1");
  assert.equal(request.invocationId, call.invocationId);
  assert.deepEqual(request.succeeded?.outputJson, encoder.encode('{"q":1}'));
  assert.equal(binding.cell("1"), cell, "the tool call named the cell before `started`");
  assert.equal(cell.publicId, "g2:1");
  binding.fail(new CodeModeError(undefined, "done"));
});

Deno.test("a tool call the cell may not make is failed without reaching the delegate", async (t) => {
  const cases: [string, (cell: CellRecord) => ToolCall, string][] = [
    [
      "an unknown execution",
      (cell) => toolCall(cell, { executionId: "other" }),
      "code-mode cell 1 is closed",
    ],
    [
      "no tool name",
      (cell) => toolCall(cell, { toolName: {} }),
      "code-mode tool invocation omitted its tool name",
    ],
    [
      "a tool not enabled",
      (cell) => toolCall(cell, { toolName: { name: "other" } }),
      "code-mode tool other is not enabled for this execution",
    ],
    [
      "an enabled name of another kind",
      (cell) => toolCall(cell, { toolKind: 2 }),
      "code-mode tool lookup is not enabled for this execution",
    ],
    [
      "invalid JSON",
      (cell) => toolCall(cell, { inputJson: encoder.encode("{") }),
      "code-mode tool invocation contains invalid JSON: ",
    ],
  ];
  for (const [name, make, message] of cases) {
    await t.step(name, async () => {
      const host = new FakeHost();
      const { binding, subscription } = await openBinding(host);
      const { cell, delegate } = execution(binding);
      subscription.push(make(cell));
      const request = await completion(host);
      assert.ok(request.failed?.message?.startsWith(message), String(request.failed?.message));
      assert.deepEqual(delegate.toolCalls, []);
      assert.ok(binding.live);
      binding.fail(new CodeModeError(undefined, "done"));
    });
  }
});

Deno.test("a delegate's failure or unencodable result completes the invocation as failed", async () => {
  const host = new FakeHost();
  const { binding, subscription } = await openBinding(host);
  const { cell, delegate } = execution(binding);
  delegate.tool = () => Promise.reject(new Error("lookup is down"));
  subscription.push(toolCall(cell));
  assert.deepEqual((await completion(host)).failed, { message: "lookup is down" });
  delegate.tool = () => Promise.resolve(10n);
  subscription.push(toolCall(cell));
  assert.match(
    (await completion(host, 2)).failed?.message ?? "",
    /^failed to encode code-mode tool result: /,
  );
  binding.fail(new CodeModeError(undefined, "done"));
});

Deno.test("tool calls beyond the pending delegate limit are failed at once", async () => {
  const host = new FakeHost();
  const { binding, subscription } = await openBinding(host, { maxPendingDelegateCalls: 1 });
  const { cell, delegate } = execution(binding);
  const held = Promise.withResolvers<unknown>();
  delegate.tool = () => held.promise;
  subscription.push(toolCall(cell), toolCall(cell));
  assert.deepEqual((await completion(host)).failed, {
    message: "code-mode host exceeded its pending delegate callback limit",
  });
  held.resolve("late");
  assert.deepEqual((await completion(host, 2)).succeeded?.outputJson, encoder.encode('"late"'));
  binding.fail(new CodeModeError(undefined, "done"));
});

Deno.test("a cancelled invocation's delegate call sees its signal abort and sends no completion", async () => {
  const host = new FakeHost();
  const { binding, lease, subscription } = await openBinding(host);
  const { cell, delegate } = execution(binding);
  const aborted = Promise.withResolvers<void>();
  delegate.tool = (_call, signal) =>
    new Promise((_, reject) =>
      signal.addEventListener("abort", () => {
        aborted.resolve();
        reject(new Error("cancelled"));
      })
    );
  const cancelled = toolCall(cell);
  subscription.push(cancelled);
  await until(() => delegate.toolCalls.length === 1, "the delegate has the call");
  lease.push({ event: "toolCallCancelled", toolCallCancelled: { invocationId: cancelled.invocationId } });
  await aborted.promise;
  // A call cancelled before it arrives never reaches the delegate.
  const early = toolCall(cell);
  lease.push({ event: "toolCallCancelled", toolCallCancelled: { invocationId: early.invocationId } });
  delegate.tool = () => Promise.resolve("ok");
  const later = toolCall(cell);
  subscription.push(early, later);
  const request = await completion(host);
  assert.equal(request.invocationId, later.invocationId, "the cancelled calls sent nothing");
  assert.equal(delegate.toolCalls.length, 2);
  binding.fail(new CodeModeError(undefined, "done"));
});

Deno.test("a tool call of another session, or with a non-UUID or reused invocation ID, fails the binding", async (t) => {
  const cases: [string, (cell: CellRecord, first: ToolCall) => ToolCall, string][] = [
    [
      "another session",
      (cell) => toolCall(cell, { sessionId: "session-2" }),
      "gRPC code-mode tool invocation belongs to session session-2 instead of session-1",
    ],
    [
      "a non-UUID ID",
      (cell) => toolCall(cell, { invocationId: "7" }),
      "code-mode tool invocation ID must be a UUID",
    ],
    [
      "a reused ID",
      (cell, first) => toolCall(cell, { invocationId: first.invocationId }),
      "code-mode tool invocation ID was reused",
    ],
  ];
  for (const [name, make, message] of cases) {
    await t.step(name, async () => {
      const host = new FakeHost();
      const { binding, subscription, releases } = await openBinding(host);
      const { cell, delegate } = execution(binding);
      const first = toolCall(cell);
      subscription.push(first);
      await completion(host);
      subscription.push(make(cell, first));
      assert.equal((await binding.ended).message, message);
      assert.equal(delegate.toolCalls.length, 1);
      assert.deepEqual(delegate.closed, ["1"], "the cell it named is reported closed");
      assert.equal(releases(), 1);
      assert.ok(subscription.cancelled, "the streams are cancelled locally");
    });
  }
});

Deno.test("a notification reaches the delegate and is acknowledged; CellClosed reports the cell once, after its notifications", async () => {
  const host = new FakeHost();
  const { binding, lease } = await openBinding(host, { generation: 2 });
  const { cell, delegate } = execution(binding);
  const delivered = Promise.withResolvers<void>();
  const notified = Promise.withResolvers<void>();
  delegate.notify = (callId, cellId, text) => {
    delegate.notifications.push({ callId, cellId, text });
    notified.resolve();
    return delivered.promise;
  };
  const notificationId = crypto.randomUUID();
  lease.push(
    {
      event: "notification",
      notification: {
        notificationId,
        executionId: cell.executionId,
        cellId: "4",
        callId: "call-1",
        text: "hi",
      },
    },
    { event: "cellClosed", cellClosed: { executionId: cell.executionId, cellId: "4" } },
  );
  const ack = await host.called("acknowledgeNotification");
  assert.deepEqual(ack.request, { sessionId: "session-1", notificationId });
  await notified.promise;
  assert.deepEqual(delegate.notifications, [{ callId: "call-1", cellId: "g2:4", text: "hi" }]);
  assert.deepEqual(delegate.closed, [], "CellClosed waits for the notification in flight");
  delivered.resolve();
  await delegate.closedCell("g2:4");
  await cell.closed.promise;
  binding.fail(new CodeModeError(undefined, "done"));
  assert.deepEqual(delegate.closed, ["g2:4"], "reported once");
});

Deno.test("a notification that is not a UUID or names another call fails the binding", async (t) => {
  const cases: [string, { notificationId: string; callId: string }, string][] = [
    [
      "a non-UUID ID",
      { notificationId: "n-1", callId: "call-1" },
      "code-mode notification ID must be a UUID",
    ],
    [
      "another call",
      { notificationId: crypto.randomUUID(), callId: "call-2" },
      "code-mode notification call ID does not match its execution",
    ],
  ];
  for (const [name, fields, message] of cases) {
    await t.step(name, async () => {
      const { binding, lease } = await openBinding(new FakeHost());
      const { cell } = execution(binding);
      lease.push({
        event: "notification",
        notification: { ...fields, executionId: cell.executionId, cellId: "1" },
      });
      assert.equal((await binding.ended).message, message);
    });
  }
});

Deno.test("the lease's end, a repeated opening and an empty event fail the binding with their texts", async (t) => {
  const cases: [string, (lease: Awaited<ReturnType<typeof openBinding>>["lease"]) => void, string][] = [
    ["the lease ends", (lease) => lease.end(), "gRPC code-mode session lease closed unexpectedly"],
    [
      "a second opening event",
      (lease) => lease.push({ event: "opened", opened: { sessionId: "session-1" } }),
      "gRPC code-mode host repeated the session opening event",
    ],
    ["an empty event", (lease) => lease.push({}), "gRPC code-mode host sent an empty session event"],
  ];
  for (const [name, act, message] of cases) {
    await t.step(name, async () => {
      const { binding, lease, releases } = await openBinding(new FakeHost());
      act(lease);
      assert.equal((await binding.ended).message, message);
      assert.equal(binding.failure?.message, message);
      assert.ok(!binding.live);
      assert.equal(releases(), 1);
    });
  }
});

Deno.test("fail(): named cells are reported closed once, delegate calls abort, racing calls get the failure, the hold goes once", async () => {
  const host = new FakeHost();
  const { binding, subscription, lease, releases } = await openBinding(host);
  const named = execution(binding);
  binding.bindCell(named.cell, "1");
  const unnamed = execution(binding);
  const aborted = Promise.withResolvers<void>();
  named.delegate.tool = (_call, signal) =>
    new Promise(() => signal.addEventListener("abort", () => aborted.resolve(), { once: true }));
  subscription.push(toolCall(named.cell));
  await until(() => named.delegate.toolCalls.length === 1, "the delegate has the call");
  const racing = binding.orFailure(new Promise(() => {}));
  const failure = new CodeModeError(undefined, "gone");
  binding.fail(failure);
  binding.fail(new CodeModeError(undefined, "again"));
  await aborted.promise;
  await assert.rejects(racing, failure);
  assert.equal(await binding.ended, failure);
  assert.equal(binding.failure, failure, "the first failure stays");
  assert.deepEqual(named.delegate.closed, ["1"]);
  assert.deepEqual(unnamed.delegate.closed, [], "a cell never named is not reported");
  await unnamed.cell.closed.promise;
  assert.equal(releases(), 1);
  assert.ok(lease.cancelled && subscription.cancelled);
  assert.equal(host.callsOf("completeToolCall").length, 0);
});

Deno.test("subscribe() fails when the subscription ends before its headers", async () => {
  const host = new FakeHost();
  host.headers.subscribeToToolCalls = false;
  const { binding } = await openBinding(host, { subscribe: false });
  const subscribed = binding.subscribe();
  host.streams("subscribeToToolCalls")[0].end();
  await assert.rejects(subscribed, { message: "gRPC code-mode tool subscription closed unexpectedly" });
  assert.ok(host.streams("subscribeToToolCalls")[0].cancelled);
  binding.fail(new CodeModeError(undefined, "done"));
});

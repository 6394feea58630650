import assert from "node:assert/strict";
import { Permits } from "./permits.ts";
import { type DispatchRequest, ToolBridge } from "./tool_bridge.ts";

function bridge(options: { capacity?: number; perSession?: number } = {}) {
  const closing = new AbortController();
  const cancelled: string[] = [];
  const b = new ToolBridge({
    sessionId: "00000000-0000-4000-8000-000000000000",
    maxMessageBytes: 67_108_864,
    maxRecentIds: 16,
    maxSubscriptions: 4,
    subscriptionQueueCapacity: options.capacity ?? 8,
    hostDelegatePermits: new Permits(64),
    sessionDelegatePermits: new Permits(options.perSession ?? 64),
    isOpen: () => !closing.signal.aborted,
    closed: closing.signal,
    onCancelled: (id) => cancelled.push(id),
  });
  return { b, closing, cancelled };
}

let sequence = 0;
function call(id: string, name = "echo"): DispatchRequest {
  return {
    executionId: "e",
    cellId: "1",
    runtimeToolCallId: id,
    definition: { toolName: { name }, kind: 1 },
    inputJson: "{}",
    nextSequence: () => ++sequence,
  };
}

/** Takes the next queued call of a subscription without waiting. */
async function take(
  stream: AsyncGenerator<unknown>,
): Promise<{ invocationId: string; runtimeToolCallId: string }> {
  return (await stream.next()).value as { invocationId: string; runtimeToolCallId: string };
}

Deno.test("ToolBridge skips a full subscription for another matching one (SPEC §7.6 rule 3)", async () => {
  const { b } = bridge({ capacity: 1 });
  const full = b.subscribe([]);
  const live = b.subscribe([]);
  const never = new AbortController();
  const liveStream = live.stream(never.signal);
  const signal = new AbortController().signal;
  const first = b.dispatch(call("tool-1"), signal); // round-robin: `full` (its queue now holds 1)
  const second = b.dispatch(call("tool-2"), signal); // `full` has no room: goes to `live`
  const third = b.dispatch(call("tool-3"), signal); // `full` still has no room: `live` again
  assert.equal(full.hasSpace, false);
  const got2 = await take(liveStream);
  const got3 = await take(liveStream);
  assert.deepEqual([got2.runtimeToolCallId, got3.runtimeToolCallId], ["tool-2", "tool-3"]);
  b.complete(got2.invocationId, { outputJson: "2" });
  b.complete(got3.invocationId, { outputJson: "3" });
  assert.deepEqual(await second, { outputJson: "2" });
  assert.deepEqual(await third, { outputJson: "3" });
  b.closeAll();
  assert.deepEqual(await first, { errorMessage: "code-mode session closed before returning tool output" });
  never.abort();
});

Deno.test("ToolBridge waits for room when every matching subscription is full, racing cancellation", async () => {
  const { b } = bridge({ capacity: 1 });
  const only = b.subscribe([]);
  const stream = only.stream(new AbortController().signal);
  const signal = new AbortController().signal;
  const first = b.dispatch(call("tool-1"), signal);
  const waiting = new AbortController();
  const second = b.dispatch(call("tool-2"), waiting.signal); // no room: waits
  waiting.abort();
  assert.deepEqual(await second, { errorMessage: "code mode delegate request cancelled" });
  const got = await take(stream);
  b.complete(got.invocationId, { failed: "boom" });
  assert.deepEqual(await first, { errorMessage: "boom" });
});

Deno.test("ToolBridge cancels an issued call once, and later completions are ignored", async () => {
  const { b, cancelled } = bridge();
  const sub = b.subscribe([]);
  const stream = sub.stream(new AbortController().signal);
  const abort = new AbortController();
  const result = b.dispatch(call("tool-1"), abort.signal);
  const got = await take(stream);
  abort.abort();
  assert.deepEqual(await result, { errorMessage: "code mode delegate request cancelled" });
  assert.deepEqual(cancelled, [got.invocationId]);
  assert.ok(b.issued(got.invocationId));
  b.complete(got.invocationId, { outputJson: "late" }); // accepted and ignored
  assert.deepEqual(cancelled, [got.invocationId]);
});

Deno.test("ToolBridge: dropping a subscription that owes results rejects them and asks to close", async () => {
  const { b } = bridge();
  const sub = b.subscribe([{ name: "echo" }]);
  const stream = sub.stream(new AbortController().signal);
  const result = b.dispatch(call("tool-1"), new AbortController().signal);
  await take(stream);
  assert.equal(b.unsubscribe(sub), true);
  assert.deepEqual(await result, {
    errorMessage: "code-mode tool subscription closed before returning tool output",
  });
  const idle = b.subscribe([]);
  assert.equal(b.unsubscribe(idle), false);
});

Deno.test("ToolBridge refuses calls beyond the delegate permits and with no matching subscription", async () => {
  const { b } = bridge({ perSession: 1 });
  b.subscribe([{ name: "other" }]);
  const signal = new AbortController().signal;
  assert.deepEqual(await b.dispatch(call("tool-1"), signal), {
    errorMessage: "no code-mode tool subscription matches the requested tool",
  });
  const sub = b.subscribe([]);
  void sub.stream(signal).next();
  const held = b.dispatch(call("tool-2"), signal);
  assert.deepEqual(await b.dispatch(call("tool-3"), signal), {
    errorMessage: "code-mode session has too many pending delegate calls",
  });
  b.closeAll();
  await held;
});

import assert from "node:assert/strict";
import { Status } from "nice-grpc";
import type { SessionOpened } from "../proto/code_mode_types.ts";
import { FakeHost, grpcError, ManualClock, RecordingDelegate, until } from "./_fake_host_test.ts";
import { GrpcCodeModeSessionProvider, type ProviderOptions, useConnector } from "./provider.ts";
import { rpcFailureText, timeoutText } from "./status_text.ts";

/** A provider whose bindings run on `host` (through its connector), counting holds and releases. */
function providerOn(host: FakeHost, options: ProviderOptions = {}) {
  const provider = new GrpcCodeModeSessionProvider("in-memory:", options);
  const counts = { holds: 0, releases: 0 };
  useConnector(provider, () => {
    counts.holds++;
    return { client: host.client, release: () => counts.releases++ };
  });
  return { provider, counts };
}

/** Answers the `n`th OpenSession with its opening event. */
async function answerOpening(
  host: FakeHost,
  n: number,
  opened: SessionOpened = { sessionId: `session-${n}` },
) {
  await host.called("openSession", n);
  host.streams("openSession")[n - 1].push({ event: "opened", opened });
}

Deno.test("createSession sends OpenSession as Codex 0.171 does and every RPC carries the token", async () => {
  const host = new FakeHost();
  const { provider } = providerOn(host, { authToken: "s3cret" });
  const opening = provider.createSession({
    outputTruncation: "server",
    cellExecutionLimits: { maxYieldTimeMs: 5, maxHeapSizeBytes: 1024 },
  });
  await answerOpening(host, 1, {
    sessionId: "s1",
    outputTruncation: 2,
    _outputTruncation: "outputTruncation",
  });
  const session = await opening;
  assert.equal(session.outputTruncation, "server");
  const [open] = host.callsOf("openSession");
  assert.deepEqual(open.request, {
    cellExecutionLimits: { maxYieldTimeMs: 5, maxHeapSizeBytes: 1024 },
    outputTruncation: 2,
    maxPendingDelegateCalls: 4096,
  });
  assert.equal(open.options.metadata?.get("authorization"), "Bearer s3cret");
  const [subscribe] = host.callsOf("subscribeToToolCalls");
  assert.deepEqual(subscribe.request, { sessionId: "s1", toolNames: [] });
  assert.equal(subscribe.options.metadata?.get("authorization"), "Bearer s3cret");
  await session.shutdown();

  // Client mode, the default: no output_truncation sent; a host that leaves it out selects Client mode.
  const plain = provider.createSession({ maxPendingDelegateCalls: 7 });
  await answerOpening(host, 2, { sessionId: "s2" });
  assert.equal((await plain).outputTruncation, "client");
  assert.deepEqual(host.callsOf("openSession")[1].request, { maxPendingDelegateCalls: 7 });
  await (await plain).shutdown();
});

Deno.test("invalid session options fail createSession before any RPC", async () => {
  const host = new FakeHost();
  const { provider } = providerOn(host);
  for (const capacity of [0, 1.5, 4_294_967_296]) {
    await assert.rejects(provider.createSession({ maxPendingDelegateCalls: capacity }), {
      message: `invalid code-mode delegate capacity: ${capacity}`,
    });
  }
  await assert.rejects(provider.createSession({ cellExecutionLimits: { maxHeapSizeBytes: 2 ** 60 } }), {
    message: `invalid code-mode heap size limit: ${2 ** 60} exceeds ${Number.MAX_SAFE_INTEGER}`,
  });
  assert.deepEqual(host.calls, []);
});

Deno.test("a refused opening is retried: UNAVAILABLE and RESOURCE_EXHAUSTED after 0, 50, 100, 200 ms (±10 %) on the provider clock; the fifth failure is final", async () => {
  const host = new FakeHost();
  const clock = new ManualClock();
  const { provider, counts } = providerOn(host, { clock });
  const opening = provider.createSession();
  const refuse = async (n: number, code: Status) => {
    await host.called("openSession", n);
    host.streams("openSession")[n - 1].fail(grpcError(code, `busy ${n}`));
  };
  await refuse(1, Status.UNAVAILABLE);
  await refuse(2, Status.RESOURCE_EXHAUSTED); // the second attempt follows at once
  const sleeps = () => clock.delays.filter((ms) => ms < 1_000);
  for (const [n, delay] of [[3, 50], [4, 100], [5, 200]]) {
    await until(() => sleeps().length === n - 2, `the delay before attempt ${n} is armed`);
    const armed = sleeps().at(-1)!;
    assert.ok(armed >= delay * 0.9 && armed <= delay * 1.1, `${armed} ms before attempt ${n}`);
    clock.advance(delay * 0.9 - 1);
    assert.equal(host.callsOf("openSession").length, n - 1, `attempt ${n} waits for its delay`);
    clock.advance(delay * 0.2 + 1);
    await refuse(n, Status.RESOURCE_EXHAUSTED);
  }
  await assert.rejects(opening, {
    message: rpcFailureText("session opening", Status.RESOURCE_EXHAUSTED, "busy 5"),
  });
  assert.equal(host.callsOf("openSession").length, 5);
  assert.ok(host.streams("openSession").every((s) => s.cancelled));
  assert.equal(counts.releases, counts.holds, "every attempt released its hold");
});

Deno.test("an opening refused with another status is not retried", async () => {
  const host = new FakeHost();
  const { provider } = providerOn(host);
  const opening = provider.createSession();
  await host.called("openSession");
  host.streams("openSession")[0].fail(grpcError(Status.PERMISSION_DENIED, "no"));
  await assert.rejects(opening, {
    message: rpcFailureText("session opening", Status.PERMISSION_DENIED, "no"),
  });
  assert.equal(host.callsOf("openSession").length, 1);
});

Deno.test("a lease that ends before its opening event is retried as UNAVAILABLE", async () => {
  const host = new FakeHost();
  const { provider } = providerOn(host);
  const opening = provider.createSession();
  await host.called("openSession");
  host.streams("openSession")[0].end();
  await answerOpening(host, 2);
  const session = await opening;
  assert.equal(host.callsOf("openSession").length, 2);
  await session.shutdown();
});

Deno.test("an opening event that is missing or names no usable session fails the opening", async (t) => {
  const cases: [string, (n: number, host: FakeHost) => void, string][] = [
    [
      "another event first",
      (n, host) =>
        host.streams("openSession")[n].push({ event: "notificationCancelled", notificationCancelled: {} }),
      "gRPC code-mode session lease omitted its opening event",
    ],
    [
      "an empty session ID",
      (n, host) => host.streams("openSession")[n].push({ event: "opened", opened: {} }),
      "gRPC code-mode host returned an empty session ID",
    ],
    [
      "a session ID over 256 bytes",
      (n, host) =>
        host.streams("openSession")[n].push({ event: "opened", opened: { sessionId: "é".repeat(129) } }),
      "gRPC code-mode host returned session ID exceeding 256 bytes",
    ],
  ];
  const host = new FakeHost();
  const { provider } = providerOn(host);
  for (const [i, [name, act, message]] of cases.entries()) {
    await t.step(name, async () => {
      const opening = provider.createSession();
      await host.called("openSession", i + 1);
      act(i, host);
      await assert.rejects(opening, { message });
      assert.ok(host.streams("openSession")[i].cancelled);
    });
  }
});

Deno.test("the route header goes with the binding's RPCs; one over 256 bytes fails the opening", async () => {
  const host = new FakeHost();
  host.headers.openSession = { "x-code-mode-route": "pod-7" };
  const { provider } = providerOn(host);
  const opening = provider.createSession();
  await answerOpening(host, 1);
  const session = await opening;
  assert.equal(host.callsOf("subscribeToToolCalls")[0].options.metadata?.get("x-code-mode-route"), "pod-7");
  await session.shutdown();
  assert.equal(host.callsOf("closeSession")[0].options.metadata?.get("x-code-mode-route"), "pod-7");

  host.headers.openSession = { "x-code-mode-route": "r".repeat(257) };
  const refused = provider.createSession();
  await answerOpening(host, 2);
  await assert.rejects(refused, { message: "session routing token is too long" });
});

Deno.test("the session opening times out after transportTimeoutMs on the provider clock", async () => {
  const host = new FakeHost();
  const clock = new ManualClock();
  const { provider, counts } = providerOn(host, { clock, transportTimeoutMs: 1_000 });
  const opening = provider.createSession();
  await host.called("openSession");
  assert.equal(clock.timers, 1, "the deadline is armed");
  clock.advance(999);
  assert.ok(!host.streams("openSession")[0].cancelled);
  clock.advance(1);
  await assert.rejects(opening, { code: "DEADLINE_EXCEEDED", message: timeoutText("session opening") });
  assert.ok(host.streams("openSession")[0].cancelled);
  assert.equal(counts.releases, 1);
  assert.equal(host.callsOf("openSession").length, 1, "a timed-out opening is not retried");
});

Deno.test("a binding holds the client from its opening until it fails; the next call opens a new generation", async () => {
  const host = new FakeHost();
  const { provider, counts } = providerOn(host);
  const opening = provider.createSession();
  await answerOpening(host, 1);
  const session = await opening;
  assert.deepEqual(counts, { holds: 1, releases: 0 });
  host.streams("openSession")[0].end(); // the host dropped the lease
  await until(() => counts.releases === 1, "the failed binding released its hold");
  const delegate = new RecordingDelegate();
  const reopened = session.execute({ toolCallId: "call-1", enabledTools: [], source: "1" }, delegate);
  await answerOpening(host, 2);
  await assert.rejects(reopened, { message: /^The exec runtime was replaced\./ });
  assert.deepEqual(counts, { holds: 2, releases: 1 });
  assert.deepEqual(host.callsOf("openSession")[1].request, { maxPendingDelegateCalls: 4096 });
  await session.shutdown();
  assert.deepEqual(counts, { holds: 2, releases: 2 });
});

Deno.test("a reopened binding whose host selects another output mode fails with the mode-changed text", async () => {
  const host = new FakeHost();
  const { provider } = providerOn(host);
  const opening = provider.createSession({ outputTruncation: "server" });
  await answerOpening(host, 1, {
    sessionId: "s1",
    outputTruncation: 2,
    _outputTruncation: "outputTruncation",
  });
  const session = await opening;
  host.streams("openSession")[0].end();
  await until(() => host.streams("openSession")[0].cancelled, "the first binding failed");
  const call = session.execute(
    { toolCallId: "call-1", enabledTools: [], source: "1" },
    new RecordingDelegate(),
  );
  await answerOpening(host, 2, { sessionId: "s2" });
  await assert.rejects(call, {
    message: "gRPC code-mode host changed the session output truncation mode on reconnect",
  });
  assert.equal(host.callsOf("openSession")[1].request.outputTruncation, 2, "the pinned mode was asked for");
  await session.shutdown();
});

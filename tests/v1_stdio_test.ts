/**
 * End-to-end: Codex's launch of its code-mode host. A V1 client written from SPEC §9.10
 * (tests/_v1_client.ts) spawns `bin/codex-code-mode-host` with no arguments, a nearly empty
 * environment and cwd `/`, and speaks JSON host V1 over the child's real stdin/stdout.
 */
import assert from "node:assert/strict";
import { failure, type Json, parseFrames, texts, toolResult, V1Client } from "./_v1_client.ts";
import { alive, descendants, rssBytes, sleep, tool } from "./_v1_helpers.ts";

const BOTH = ["session-cell-execution-resource-limits", "yield-observation"];

/** Closes stdin, expects exit 0, stdout made of whole frames, and no runtime left. */
async function finishCleanly(c: V1Client, runtimes: number[]): Promise<void> {
  const status = await c.finish();
  assert.equal(status.code, 0, await c.stderr);
  assert.deepEqual(parseFrames(c.stdoutBytes()), c.received);
  for (const pid of runtimes) assert.ok(!alive(pid), `runtime ${pid} outlived the host`);
}

Deno.test("V1: handshake, two isolated sessions, stored values, tools, notifications, yield/wait/terminate, cancel, shutdown and ID reuse", async () => {
  await using c = V1Client.spawn();
  const ready = await c.hello({
    requiredCapabilities: ["session-cell-execution-resource-limits"],
    optionalCapabilities: ["yield-observation", "some-future-capability"],
  });
  assert.deepEqual(ready, { type: "connection/ready", selectedVersion: 1, capabilities: BOTH });

  assert.deepEqual(await c.open("session-1"), {
    status: "ok",
    value: { type: "session/ready", sessionId: "session-1" },
  });
  assert.deepEqual(await c.open("session-2"), {
    status: "ok",
    value: { type: "session/ready", sessionId: "session-2" },
  });
  assert.deepEqual(await c.open("session-1"), failure("code-mode session ID `session-1` is already open"));
  const pid = c.child!.pid;
  const runtimes = descendants(pid);
  assert.ok(runtimes.length >= 2, "two session runtimes");

  // Stored values survive across the cells of one session and are not seen by another.
  let r = await c.run("session-1", `store("k", 41); text("stored")`);
  assert.deepEqual(r, {
    status: "ok",
    value: {
      Result: { cell_id: "1", content_items: [{ type: "input_text", text: "stored" }], error_text: null },
    },
  });
  r = await c.run("session-2", `text(String(load("k")))`);
  assert.deepEqual(texts(r.value), ["undefined"]);
  r = await c.run("session-1", `text(String(load("k") + 1))`);
  assert.deepEqual(texts(r.value), ["42"]);
  assert.equal(r.value.Result.cell_id, "2");

  // A tool call answered through delegate/response, ok and error; a notification delivered.
  const invocations: Json[] = [];
  const notifications: Json[] = [];
  c.onDelegate = (m) => {
    if (m.request.type === "notification/send") {
      notifications.push(m);
      return { status: "ok", value: { type: "notification/delivered" } };
    }
    invocations.push(m);
    const input = m.request.invocation.input;
    return input.fail ? failure("tool said no") : toolResult({ echoed: input.n });
  };
  r = await c.run(
    "session-1",
    `notify("ping"); const a = await tools.echo({ n: 7 }); text(JSON.stringify(a));
     try { await tools.echo({ fail: true }); } catch (e) { text("caught " + e); }`,
    { enabled_tools: [tool("echo")], tool_call_id: "exec-call-3" },
  );
  assert.deepEqual(texts(r.value), ['{"echoed":7}', "caught tool said no"]);
  assert.equal(invocations.length, 2);
  assert.deepEqual(invocations[0].request.invocation, {
    cell_id: "3",
    runtime_tool_call_id: "tool-1",
    tool_name: { name: "echo", namespace: null },
    tool_kind: "function",
    input: { n: 7 },
  });
  assert.equal(invocations[0].sessionId, "session-1");
  assert.deepEqual(notifications.map((n) => [n.sessionId, n.request]), [
    ["session-1", { type: "notification/send", callId: "exec-call-3", cellId: "3", text: "ping" }],
  ]);
  assert.equal(typeof notifications[0].id, "number");

  // The cell yields, a wait gets the rest.
  const slow = c.execute("session-1", `text("a"); yield_control(); await new Promise((r) => setTimeout(r, 300)); text("b")`, {
    yield_time_ms: 30_000,
  });
  const slowStarted = await slow.started;
  assert.equal(slowStarted.value.type, "execution/started");
  const slowCell = slowStarted.value.cellId;
  assert.deepEqual(await slow.initial, {
    status: "ok",
    value: { Yielded: { cell_id: slowCell, content_items: [{ type: "input_text", text: "a" }] } },
  });
  const waited = await c.wait("session-1", slowCell, 30_000);
  assert.deepEqual(waited, {
    status: "ok",
    value: {
      type: "wait/completed",
      outcome: {
        LiveCell: {
          Result: { cell_id: slowCell, content_items: [{ type: "input_text", text: "b" }], error_text: null },
        },
      },
    },
  });
  assert.deepEqual((await c.wait("session-1", "99")).value.outcome, {
    MissingCell: { Result: { cell_id: "99", content_items: [], error_text: "exec cell 99 not found" } },
  });

  // operation/cancel of a wait; then terminate.
  const forever = c.execute("session-1", `text("f"); yield_control(); await new Promise(() => {})`, {
    yield_time_ms: 30_000,
  });
  const foreverCell = (await forever.started).value.cellId;
  assert.ok("Yielded" in (await forever.initial).value);
  const waitId = c.nextId();
  const cancelled = c.wait("session-1", foreverCell, 600_000, waitId);
  await sleep(100);
  await c.send({ type: "operation/cancel", id: waitId });
  assert.deepEqual(await cancelled, failure("code-mode request cancelled"));
  assert.deepEqual((await c.terminate("session-1", foreverCell)).value.outcome, {
    LiveCell: { Terminated: { cell_id: foreverCell, content_items: [] } },
  });

  // operation/yield of an execute: the cell keeps running.
  const y = c.execute("session-2", `text("y"); await new Promise((r) => setTimeout(r, 200)); text("z")`, {
    yield_time_ms: 600_000,
  });
  const yCell = (await y.started).value.cellId;
  await sleep(50);
  await c.send({ type: "operation/yield", id: y.id });
  assert.deepEqual(await y.initial, {
    status: "ok",
    value: { Yielded: { cell_id: yCell, content_items: [{ type: "input_text", text: "y" }] } },
  });
  assert.deepEqual(texts((await c.wait("session-2", yCell, 30_000)).value.outcome.LiveCell), ["z"]);

  // session/shutdown answers session/closed after the session's cell/closed.
  const closed = await c.shutdown("session-1");
  assert.deepEqual(closed, { status: "ok", value: { type: "session/closed", sessionId: "session-1" } });
  const at = c.received.findIndex((m) =>
    m.type === "operation/response" && m.result?.value?.type === "session/closed"
  );
  const cellClosed = c.received.filter((m, i) =>
    m.type === "cell/closed" && m.sessionId === "session-1" && i < at
  );
  assert.deepEqual(cellClosed.map((m) => m.cellId).sort(), ["1", "2", "3", slowCell, foreverCell].sort());
  // Each cell's cell/closed comes after its initial response.
  for (const m of c.received.filter((m) => m.type === "cell/closed")) {
    const closedAt = c.received.indexOf(m);
    const initialAt = c.received.findIndex((x) =>
      x.type === "execute/initialResponse" && Object.values(x.result.value ?? {}).some((v: Json) =>
        v.cell_id === m.cellId
      ) &&
      c.received.some((s) =>
        s.type === "operation/response" && s.id === x.id && s.result.value?.cellId === m.cellId
      )
    );
    assert.ok(
      initialAt >= 0 && initialAt < closedAt,
      `cell ${m.sessionId}/${m.cellId} closed before its initial response`,
    );
  }

  // Session IDs are not reused; unknown sessions are named.
  assert.deepEqual(await c.open("session-1"), failure("code-mode session ID `session-1` was reused"));
  assert.deepEqual(await c.wait("session-7", "1"), failure("unknown code-mode session session-7"));
  assert.deepEqual(texts((await c.run("session-2", `text("still here")`)).value), ["still here"]);

  await finishCleanly(c, runtimes);
});

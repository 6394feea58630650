/**
 * End-to-end: the scenarios Codex runs against its own code-mode host over stdio, here through
 * `bin/codex-code-mode-host` (no arguments) and the V1 client written from SPEC §9.10.
 */
import assert from "node:assert/strict";
import { failure, type Json, parseFrames, texts, toolResult, V1Client } from "./_v1_client.ts";
import { sleep, tool } from "./_v1_helpers.ts";

async function finish(c: V1Client): Promise<void> {
  const status = await c.finish();
  assert.equal(status.code, 0, await c.stderr);
  assert.deepEqual(parseFrames(c.stdoutBytes()), c.received);
}

Deno.test("V1 (Codex): a limited (1 ms) and an unlimited session on one host", async () => {
  await using c = V1Client.spawn();
  await c.hello();
  assert.equal((await c.open("session-1", { max_yield_time_ms: 1 })).status, "ok");
  assert.equal((await c.open("session-2")).status, "ok");
  const source = `await new Promise((r) => setTimeout(r, 300)); text("done")`;
  const limited = await c.run("session-1", source, { yield_time_ms: 30_000 });
  assert.deepEqual(limited.value, { Yielded: { cell_id: "1", content_items: [] } });
  const unlimited = await c.run("session-2", source, { yield_time_ms: 30_000 });
  assert.deepEqual(texts(unlimited.value), ["done"]);
  assert.ok("Result" in unlimited.value);
  // The limited session's cell still finishes; its waits are capped too, so poll.
  let outcome: Json;
  do outcome = (await c.wait("session-1", "1", 30_000)).value.outcome.LiveCell; while (
    !("Result" in outcome)
  );
  assert.deepEqual(texts(outcome), ["done"]);
  // Codex's host opens a session whatever heap size it asks (issue 25: the core no longer refuses).
  assert.equal((await c.open("session-3", { max_heap_size_bytes: 1 })).status, "ok");
  assert.equal(
    (await c.open("session-4", { max_yield_time_ms: -1 })).message,
    "invalid code-mode session execution limits: max_yield_time_ms must be a non-negative integer",
  );
  await finish(c);
});

Deno.test("V1 (Codex): dropping a long wait releases the observer before the next wait", async () => {
  await using c = V1Client.spawn();
  await c.hello();
  await c.open("session-1");
  const e = c.execute(
    "session-1",
    `text("a"); yield_control(); await new Promise((r) => setTimeout(r, 500)); text("b")`,
  );
  const cell = (await e.started).value.cellId;
  await e.initial;
  const id = c.nextId();
  const long = c.wait("session-1", cell, 600_000, id);
  await sleep(50);
  await c.send({ type: "operation/cancel", id });
  assert.deepEqual(await long, failure("code-mode request cancelled"));
  const next = await c.wait("session-1", cell, 30_000);
  assert.equal(next.status, "ok", JSON.stringify(next));
  assert.deepEqual(texts(next.value.outcome.LiveCell), ["b"]);
  await finish(c);
});

Deno.test("V1 (Codex): an unawaited slow tool is cancelled (delegate/cancel) after parallel tools complete", async () => {
  await using c = V1Client.spawn();
  await c.hello();
  await c.open("session-1");
  const calls: Json[] = [];
  c.onDelegate = (m) => {
    calls.push(m);
    const { tool_name, input } = m.request.invocation;
    return tool_name.name === "slow" ? undefined : toolResult(input.n * 10);
  };
  const r = await c.run(
    "session-1",
    `void tools.slow({}); const [a, b] = await Promise.all([tools.fast({ n: 1 }), tools.fast({ n: 2 })]); text(String(a + b))`,
    { enabled_tools: [tool("slow"), tool("fast")] },
  );
  assert.deepEqual(texts(r.value), ["30"]);
  const slow = calls.find((m) => m.request.invocation.tool_name.name === "slow");
  const cancel = await c.waitFor((m) => m.type === "delegate/cancel");
  assert.deepEqual(cancel, { type: "delegate/cancel", id: slow.id });
  assert.ok(c.received.indexOf(slow) < c.received.indexOf(cancel));
  // A late answer to the cancelled call is ignored.
  await c.send({ type: "delegate/response", id: slow.id, result: toolResult(1) });
  assert.deepEqual(texts((await c.run("session-1", `text("ok")`)).value), ["ok"]);
  await finish(c);
});

Deno.test("V1 (Codex): an oversized delegate argument and an oversized result fail only that tool call", async () => {
  await using c = V1Client.spawn();
  await c.hello();
  await c.open("session-1");
  c.onDelegate = (m) => {
    const input = m.request.invocation.input;
    return toolResult(input.big ? "y".repeat(67_108_864) : "small");
  };
  const r = await c.run(
    "session-1",
    `try { await tools.echo({ arg: "x".repeat(67_108_864) }); } catch (e) { text("argument: " + e); }
     try { await tools.echo({ big: true }); } catch (e) { text("result: " + e); }
     text("after: " + await tools.echo({}))`,
    { enabled_tools: [tool("echo")] },
  );
  const [argument, result, after] = texts(r.value);
  assert.equal(argument, "argument: code-mode tool invocation exceeds the 67108864-byte gRPC message limit");
  assert.match(result, /^result: code-mode IPC frame length \d+ exceeds 67108864 bytes$/);
  assert.equal(after, "after: small");
  await finish(c);
});

/**
 * End-to-end: the scenarios Codex runs against its own code-mode host over stdio, here through
 * `bin/codex-code-mode-host` (no arguments) and the V1 client written from SPEC §9.10.
 */
import assert from "node:assert/strict";
import { failure, type Json, parseFrames, texts, toolResult, untimed, V1Client } from "./_v1_client.ts";
import { tool } from "./_v1_helpers.ts";

async function finish(c: V1Client): Promise<void> {
  const status = await c.finish();
  assert.equal(status.code, 0, await c.stderr);
  assert.deepEqual(parseFrames(c.stdoutBytes()), c.received);
}

Deno.test("V1 (Codex): a limited (1 ms) and an unlimited session on one host", async () => {
  await using c = V1Client.spawn();
  await c.hello();
  // Codex's host names the limits in camelCase.
  assert.equal((await c.open("session-1", { maxYieldTimeMs: 1 })).status, "ok");
  assert.equal((await c.open("session-2")).status, "ok");
  const source = `await new Promise((r) => setTimeout(r, 300)); text("done")`;
  const limited = await c.run("session-1", source, { yield_time_ms: 30_000 });
  assert.deepEqual(untimed(limited.value), {
    Yielded: { cell_id: "1", content_items: [], code_mode_host_duration_ns: 0 },
  });
  const unlimited = await c.run("session-2", source, { yield_time_ms: 30_000 });
  assert.deepEqual(texts(unlimited.value), ["done"]);
  assert.ok("Result" in unlimited.value);
  // The limited session's cell still finishes; its waits are capped too, so poll.
  let outcome: Json;
  do outcome = (await c.wait("session-1", "1", 30_000)).value.outcome.LiveCell; while (
    !("Result" in outcome)
  );
  assert.deepEqual(texts(outcome), ["done"]);
  // Codex's host takes any heap size (this host raises one under 16 MiB to 16 MiB).
  assert.equal((await c.open("session-3", { maxHeapSizeBytes: 1 })).status, "ok");
  assert.deepEqual(texts((await c.run("session-3", `text("small heap")`)).value), ["small heap"]);
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
  // No wait needed: the host reads its stdin in order and starts a wait (the core observing the
  // cell) as it reads it, so the cancel written after it always finds it observing.
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

Deno.test("V1 (Codex): an oversized delegate argument fails only that tool call; an oversized result ends the host", async () => {
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
     text("after: " + await tools.echo({}))`,
    { enabled_tools: [tool("echo")] },
  );
  const [argument, after] = texts(r.value);
  // Codex's host fails this call with the length of the frame it would have written (`code-mode
  // IPC frame length 67109103 exceeds 67108864 bytes`); this host refuses it before (gRPC's limit).
  assert.equal(argument, "argument: code-mode tool invocation exceeds the 67108864-byte gRPC message limit");
  assert.equal(after, "after: small");
  // A delegate response over 64 MiB is refused by its length, as Codex's host does: fatal.
  const e = c.execute("session-1", `await tools.echo({ big: true })`, { enabled_tools: [tool("echo")] });
  await e.started;
  await c.closed;
  const status = await c.child!.status;
  assert.equal(status.code, 1);
  assert.match(
    await c.stderr,
    /failed to read code-mode client message: code-mode IPC frame length \d+ exceeds 67108864 bytes/,
  );
  assert.deepEqual(parseFrames(c.stdoutBytes()), c.received);
});

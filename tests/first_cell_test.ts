/**
 * The first cell of a freshly launched host (issue 25 item 5), launched exactly as Codex launches it:
 * `bin/codex-code-mode-host --listen grpc+stdio://` (gRPC over the child's pipes) and
 * `bin/codex-code-mode-host` (JSON host V1). Codex's own test `code_mode_yield_timeout_works_for_busy_loop`
 * runs `text("first"); while (true) {}` with `yield_time_ms` 100 as the session's first cell and expects
 * "first" in its first result, as the reference host gives it. Here the session runtime's first Worker is
 * still being created when the cell arrives (a few hundred milliseconds on a loaded machine): the yield
 * time counts from the moment the runtime hands the cell to its Worker.
 */
import assert from "node:assert/strict";
import { ProcessOwnedGrpcCodeModeSessionProvider } from "../client/process_provider.ts";
import { NoopCodeModeSessionDelegate } from "../client/session.ts";
import { LAUNCHER, texts, V1Client } from "./_v1_client.ts";

const BUSY = 'text("first"); while (true) {}';

Deno.test("grpc+stdio: a fresh host's first cell, a busy loop with yield_time_ms 100, yields with its first text", async () => {
  await using provider = new ProcessOwnedGrpcCodeModeSessionProvider({
    command: LAUNCHER,
    args: ["--listen", "grpc+stdio://"],
    stderr: "null",
  });
  for (const outputTruncation of ["server", "client"] as const) {
    // The provider's first session spawns the host; the second gets a runtime that was warm.
    const session = await provider.createSession({ outputTruncation });
    const cell = await session.execute(
      { toolCallId: "call-1", enabledTools: [], source: BUSY, yieldTimeMs: 100 },
      new NoopCodeModeSessionDelegate(),
    );
    const first = await cell.initialResponse();
    assert.equal(first.type, "yielded", outputTruncation);
    assert.deepEqual(first.contentItems, [{ type: "input_text", text: "first" }], outputTruncation);
    assert.equal((await session.terminate(cell.cellId)).response.type, "terminated");
    await session.shutdown();
  }
});

Deno.test("JSON V1: a fresh host's first cell, a busy loop with yield_time_ms 100, yields with its first text", async () => {
  await using c = V1Client.spawn();
  await c.hello();
  assert.equal((await c.open("session-1")).status, "ok");
  const response = await c.run("session-1", BUSY, { yield_time_ms: 100 });
  assert.equal(response.status, "ok", JSON.stringify(response));
  assert.ok(response.value.Yielded, JSON.stringify(response));
  assert.deepEqual(texts(response.value), ["first"]);
  const terminated = await c.terminate("session-1", "1");
  assert.equal(terminated.status, "ok", JSON.stringify(terminated));
  await c.end();
  assert.equal((await c.finish()).code, 0);
});

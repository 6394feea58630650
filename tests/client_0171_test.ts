/**
 * The client library speaks Codex 0.171's gRPC (issue 25): OpenSession carries
 * `max_pending_delegate_calls`, and Executes name their tools by catalog revision when the host
 * supports it, as Codex does (the requests are read off the wire through a recording relay). The
 * same catalog scenario runs against Codex's own host in `tests/reference/client_catalog.ts`.
 */
import assert from "node:assert/strict";
import { GrpcCodeModeSessionProvider } from "../client/provider.ts";
import { catalogScenario, delegate, type Msg, startServer, tool } from "./_client_catalog.ts";
import { startHost } from "./_harness.ts";

Deno.test("client: OpenSession sends max_pending_delegate_calls (4096 by default, as Codex); the host applies the session's value", async () => {
  const opens: Msg[] = [];
  await using h = await startHost({
    middleware: async function* (call: Msg, context: Msg) {
      if (call.method.path.endsWith("/OpenSession")) opens.push(call.request);
      return yield* call.next(call.request, context);
    },
  });
  const provider = new GrpcCodeModeSessionProvider(`http://${h.address}`);
  const plain = await provider.createSession();
  const capped = await provider.createSession({ maxPendingDelegateCalls: 1 });
  const d = delegate(new Set(["slow"]));
  const cell = await capped.execute({
    toolCallId: "call-1",
    enabledTools: [tool("slow"), tool("fast")],
    source: 'void tools.slow({}); text(await tools.fast({}).catch((e) => "refused: " + e))',
  }, d);
  const response = await cell.initialResponse();
  assert.deepEqual(response.contentItems, [
    { type: "input_text", text: "refused: code-mode session has too many pending delegate calls" },
  ]);
  await capped.shutdown();
  await plain.shutdown();
  assert.deepEqual(opens.map((o) => o.maxPendingDelegateCalls), [4096, 1]);
  for (const bad of [0, -1, 1.5, 2 ** 32]) {
    await assert.rejects(
      provider.createSession({ maxPendingDelegateCalls: bad }),
      { message: `invalid code-mode delegate capacity: ${bad}` },
    );
  }
});

Deno.test({
  name: "client: with this host, tools travel once per catalog revision and again after the host forgot it",
  async fn() {
    const main = new URL("../cli/main.ts", import.meta.url).pathname;
    const { address, child } = await startServer(Deno.execPath(), [
      "run",
      "-A",
      main,
      "--listen",
      "grpc://127.0.0.1:0",
    ]);
    try {
      await catalogScenario(address);
    } finally {
      child.kill();
      await child.status;
    }
  },
});

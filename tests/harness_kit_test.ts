/**
 * The harness kit of SPEC §11 driving a real host through the client library, as a harness does: the
 * pragma's overrides reach the cell, augmented tool definitions reach `ALL_TOOLS` and `tools.<name>`, a
 * yielded cell continues through `wait`, and Client-mode formatting gives what the host's Server mode gives.
 */
import assert from "node:assert/strict";
import {
  augmentToolDefinition,
  type CodeModeSession,
  type CodeModeSessionDelegate,
  type CodeModeToolCall,
  createHost,
  formatRuntimeResponse,
  GrpcCodeModeSessionProvider,
  NoopCodeModeSessionDelegate,
  normalizeCodeModeIdentifier,
  parseExecSource,
  type RuntimeResponse,
  type ToolDefinition,
} from "../mod.ts";

/** A delegate that records calls and answers each with `answer(call)`. */
class ToolDelegate implements CodeModeSessionDelegate {
  readonly calls: CodeModeToolCall[] = [];
  constructor(readonly answer: (call: CodeModeToolCall) => Promise<unknown>) {}
  invokeTool(call: CodeModeToolCall): Promise<unknown> {
    this.calls.push(call);
    return this.answer(call);
  }
  notify(): Promise<void> {
    return Promise.resolve();
  }
  cellClosed(): void {}
}

async function execParsed(
  session: CodeModeSession,
  input: string,
  delegate: CodeModeSessionDelegate,
  enabledTools: ToolDefinition[] = [],
): Promise<{ response: RuntimeResponse; maxOutputTokens?: number }> {
  const parsed = parseExecSource(input);
  assert.ok(typeof parsed !== "string", String(parsed));
  const cell = await session.execute({
    toolCallId: "call-1",
    enabledTools,
    source: parsed.code,
    ...(parsed.yieldTimeMs === undefined ? {} : { yieldTimeMs: parsed.yieldTimeMs }),
    ...(parsed.maxOutputTokens === undefined ? {} : { maxOutputTokens: parsed.maxOutputTokens }),
  }, delegate);
  return { response: await cell.initialResponse(), maxOutputTokens: parsed.maxOutputTokens };
}

Deno.test("harness kit over a real host: augmented tools, pragma, yield and wait, and formatting", async (t) => {
  await using host = await createHost({ listen: "127.0.0.1:0", log: "error", warmSessions: 0 });
  const provider = new GrpcCodeModeSessionProvider(host.url);

  await t.step(
    "an augmented tool is called by its normalised name and ALL_TOOLS shows its declaration",
    async () => {
      await using session = await provider.createSession();
      const definition: ToolDefinition = {
        name: "hidden-dynamic-tool",
        toolName: { name: "hidden-dynamic-tool" },
        description: "Test tool",
        kind: "function",
        inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        outputSchema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] },
      };
      const global = normalizeCodeModeIdentifier(definition.name);
      const delegate = new ToolDelegate(() => Promise.resolve({ ok: true }));
      const { response } = await execParsed(
        session,
        `const r = await tools.${global}({ city: "Oslo" });\ntext(r.ok);\ntext(ALL_TOOLS[0].description);`,
        delegate,
        [augmentToolDefinition(definition)],
      );
      assert.deepEqual(delegate.calls.map((call) => [call.toolName.name, call.input]), [
        ["hidden-dynamic-tool", { city: "Oslo" }],
      ]);
      const formatted = formatRuntimeResponse(response, { outputTruncation: "client", wallTimeMs: 0 });
      assert.deepEqual(
        formatted.contentItems.map((item) => item.type === "input_text" ? item.text : item.type),
        [
          "Script completed\nWall time 0.0 seconds\nOutput:\n",
          "true",
          augmentToolDefinition(definition).description,
        ],
      );
      assert.equal(formatted.success, true);
    },
  );

  await t.step("a yielded cell is `Script running with cell ID`; wait brings its completion", async () => {
    await using session = await provider.createSession();
    const gate = Promise.withResolvers<unknown>();
    const delegate = new ToolDelegate(() => gate.promise);
    const { response } = await execParsed(
      session,
      '// @exec: {"yield_time_ms": 60000}\ntext("first"); yield_control(); text(await tools.gate());',
      delegate,
      [{ name: "gate", toolName: { name: "gate" }, description: "waits", kind: "function" }],
    );
    const running = formatRuntimeResponse(response, { outputTruncation: "client", wallTimeMs: 5 });
    assert.deepEqual(running, {
      contentItems: [
        {
          type: "input_text",
          text: `Script running with cell ID ${response.cellId}\nWall time 0.0 seconds\nOutput:\n`,
        },
        { type: "input_text", text: "first" },
      ],
      success: true,
    });
    gate.resolve("second");
    const outcome = await session.wait({ cellId: response.cellId, yieldTimeMs: 60_000 });
    assert.equal(outcome.type, "liveCell");
    const done = formatRuntimeResponse(outcome.response, { outputTruncation: "client", wallTimeMs: 1_500 });
    assert.deepEqual(done.contentItems, [
      { type: "input_text", text: "Script completed\nWall time 1.5 seconds\nOutput:\n" },
      { type: "input_text", text: "second" },
    ]);
  });

  await t.step(
    "Client-mode formatting equals the host's Server-mode output for a flood and for an error",
    async () => {
      await using client = await provider.createSession({ outputTruncation: "client" });
      await using server = await provider.createSession({ outputTruncation: "server" });
      assert.equal(server.outputTruncation, "server");
      const delegate = new NoopCodeModeSessionDelegate();
      for (
        const input of [
          '// @exec: {"max_output_tokens": 5}\ntext("a".repeat(50) + "b".repeat(50));',
          '// @exec: {"max_output_tokens": 7}\ntext("line 1\\nline 2\\n" + "é🦀".repeat(30))',
          "text('small'); throw new Error('boom')",
        ]
      ) {
        const fromClient = await execParsed(client, input, delegate);
        const fromServer = await execParsed(server, input, delegate);
        const clientFormatted = formatRuntimeResponse(fromClient.response, {
          outputTruncation: "client",
          maxOutputTokens: fromClient.maxOutputTokens,
          wallTimeMs: 0,
        });
        const serverFormatted = formatRuntimeResponse(fromServer.response, {
          outputTruncation: "server",
          wallTimeMs: 0,
        });
        assert.deepEqual(clientFormatted, serverFormatted, input);
      }
      const flood = await execParsed(
        client,
        '// @exec: {"max_output_tokens": 5}\ntext("x".repeat(100))',
        delegate,
      );
      const formatted = formatRuntimeResponse(flood.response, {
        outputTruncation: "client",
        maxOutputTokens: flood.maxOutputTokens,
        wallTimeMs: 0,
      });
      assert.equal(formatted.contentItems.length, 2);
      assert.ok((formatted.contentItems[1] as { text: string }).text.includes("…20 tokens truncated…"));
    },
  );
});

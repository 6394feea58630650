/**
 * A runnable example of the client library (`deno task example`): it starts a host, opens a
 * session, runs a cell that calls a tool implemented right here, and prints what a model would
 * see. Pass `--endpoint URL` to use a host that is already running instead.
 *
 * @module
 */
import { parseArgs } from "node:util";
import {
  type CodeModeSessionDelegate,
  type CodeModeToolCall,
  createHost,
  GrpcCodeModeSessionProvider,
  type Host,
} from "../mod.ts";

/** The harness side: one tool, `add`, and notifications printed as they come. */
const delegate: CodeModeSessionDelegate = {
  invokeTool(call: CodeModeToolCall): Promise<unknown> {
    if (call.toolName.name !== "add") return Promise.reject(new Error(`unknown tool ${call.toolName.name}`));
    const { a, b } = call.input as { a: number; b: number };
    return Promise.resolve({ sum: a + b });
  },
  notify(_callId: string, cellId: string, text: string): Promise<void> {
    console.log(`[notification from cell ${cellId}] ${text}`);
    return Promise.resolve();
  },
  cellClosed() {},
};

const { values } = parseArgs({ args: Deno.args, options: { endpoint: { type: "string" } } });
let host: Host | undefined;
if (values.endpoint === undefined) host = await createHost({ listen: "127.0.0.1:0", log: "warn" });
try {
  await using session = await new GrpcCodeModeSessionProvider(values.endpoint ?? host!.url).createSession();
  const cell = await session.execute({
    toolCallId: "call-1",
    enabledTools: [{
      name: "add",
      toolName: { name: "add" },
      description: "Adds two numbers: { a, b } → { sum }",
      kind: "function",
      inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } },
    }],
    source: `
      notify("adding…");
      const { sum } = await tools.add({ a: 2, b: 40 });
      text(\`2 + 40 = \${sum}\`);
    `,
  }, delegate);
  const response = await cell.initialResponse();
  console.log(`cell ${response.cellId}: ${response.type}`);
  for (const item of response.contentItems) {
    console.log(item.type === "input_text" ? item.text : JSON.stringify(item));
  }
} finally {
  await host?.shutdown();
}

/**
 * The client library's catalog-revision scenario (issue 25), shared by `tests/client_0171_test.ts`
 * (this host) and `tests/reference/client_catalog.ts` (Codex's own host), and the small helpers of
 * both. Folder-private: never re-exported.
 *
 * @module
 */
import assert from "node:assert/strict";
import { GrpcCodeModeSessionProvider } from "../client/provider.ts";
import type { CodeModeSessionDelegate, CodeModeToolCall, ToolDefinition } from "../client/types.ts";
import { publicProtoRoot } from "../proto/loader.ts";
import { grpcMessages, type RecordingRelay, startRecordingRelay } from "./_h2_record.ts";
import { rawClient } from "./_harness.ts";

// deno-lint-ignore no-explicit-any
export type Msg = any;

const root = publicProtoRoot();
const ExecuteRequest = root.lookupType("codex.code_mode.v1.ExecuteRequest");

export function tool(name: string, description = "a tool"): ToolDefinition {
  return { name, toolName: { name }, description, kind: "function", inputSchema: { type: "object" } };
}

/** A delegate whose tools answer their name, or stay pending while `hold` has it. */
export function delegate(hold = new Set<string>()): CodeModeSessionDelegate & { calls: CodeModeToolCall[] } {
  const calls: CodeModeToolCall[] = [];
  return {
    calls,
    invokeTool(call, signal) {
      calls.push(call);
      if (!hold.has(call.toolName.name)) return Promise.resolve(call.toolName.name);
      return new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
    },
    notify: () => Promise.resolve(),
    cellClosed: () => {},
  };
}

/** The Execute requests the client sent through the relay, decoded. */
function executesSent(relay: RecordingRelay): Msg[] {
  const out: Msg[] = [];
  for (const { message } of grpcMessages(relay.clientBytes(), true)) {
    try {
      const decoded = ExecuteRequest.toObject(ExecuteRequest.decode(message), { longs: Number });
      // Other requests decode too, but none with this tool call ID.
      if (decoded.toolCallId?.startsWith("call-")) out.push(decoded);
    } catch { /* another method's request */ }
  }
  return out;
}

async function textOf(
  session: Msg,
  source: string,
  tools: ToolDefinition[],
  d = delegate(),
): Promise<string> {
  const cell = await session.execute({ toolCallId: "call-1", enabledTools: tools, source }, d);
  const response = await cell.initialResponse();
  assert.equal(response.type, "result", JSON.stringify(response));
  return response.contentItems.map((i: Msg) => i.text).join("|");
}

/** Starts a host process listening on 127.0.0.1:0; returns its address and its child. */
export async function startServer(
  command: string,
  args: string[],
): Promise<{ address: string; child: Deno.ChildProcess }> {
  const child = new Deno.Command(command, { args, stdin: "null", stdout: "piped", stderr: "null" }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let line = "";
  while (!line.includes("\n")) line += (await reader.read()).value ?? "";
  reader.releaseLock();
  return { address: line.trim().replace(/^http:\/\//, ""), child };
}

/** Executes with tool sets X, X, Y, X, none, X, then X after another client replaced the revision. */
export async function catalogScenario(address: string): Promise<void> {
  await using relay = startRecordingRelay(address);
  const provider = new GrpcCodeModeSessionProvider(`http://${relay.address}`);
  const session = await provider.createSession({ outputTruncation: "server" });
  const keys = "text(Object.keys(tools).join())";
  const x = [tool("a"), tool("b")];
  const y = [tool("c")];
  assert.equal(await textOf(session, keys, x), "a,b"); // revision 1 with its tools
  assert.equal(await textOf(session, keys, x), "a,b"); // revision 1 alone
  assert.equal(await textOf(session, keys, y), "c"); // revision 2 with its tools
  assert.equal(await textOf(session, keys, x), "a,b"); // revision 3: the host keeps one revision
  assert.equal(await textOf(session, keys, []), ""); // no tools: no revision
  assert.equal(await textOf(session, `text(await tools.a({}))`, x), "a"); // revision 3 alone
  // Another client registers a revision in the same session: the host forgets revision 3, the
  // client's Execute naming it alone is refused and sent again with its tools.
  const sessionId = executesSent(relay)[0].sessionId;
  const other = rawClient(address);
  try {
    for await (
      const _ of other.client.execute({
        sessionId,
        executionId: crypto.randomUUID(),
        toolCallId: "call-x",
        source: "text(1)",
        enabledTools: [{ name: "z", toolName: { name: "z" }, description: "", kind: 1 }],
        catalogRevision: 9,
      })
    ) { /* drain */ }
  } finally {
    other.channel.close();
  }
  assert.equal(await textOf(session, keys, x), "a,b");
  await session.shutdown();
  await relay[Symbol.asyncDispose]();
  const shape = executesSent(relay).map((
    e,
  ) => [e.catalogRevision, (e.enabledTools ?? []).map((t: Msg) => t.name).join()]);
  assert.deepEqual(shape, [
    [1, "a,b"],
    [1, ""],
    [2, "c"],
    [3, "a,b"],
    [undefined, ""],
    [3, ""],
    [3, ""], // refused: `unknown code-mode catalog revision`
    [4, "a,b"], // sent again with its tools, under the next revision
  ]);
}

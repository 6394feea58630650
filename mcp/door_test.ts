import assert from "node:assert/strict";
import { McpFrontDoor, toMcpContent } from "./door.ts";
import { type CallToolResult, Client, InMemoryTransport } from "./sdk.ts";
import { Logger } from "../host/ops/log.ts";
import type { CodeModeSession, CodeModeSessionProvider } from "../client/types.ts";

Deno.test("toMcpContent() turns data: URLs into MCP image and audio blocks and keeps text", () => {
  assert.deepEqual(toMcpContent({ type: "input_text", text: "hi" }), { type: "text", text: "hi" });
  assert.deepEqual(
    toMcpContent({ type: "input_image", image_url: "data:image/jpeg;base64,/9j/", detail: "low" }),
    {
      type: "image",
      data: "/9j/",
      mimeType: "image/jpeg",
    },
  );
  assert.deepEqual(toMcpContent({ type: "input_image", image_url: "data:image/svg+xml,%3Csvg%2F%3E" }), {
    type: "image",
    data: btoa("<svg/>"),
    mimeType: "image/svg+xml",
  });
  assert.deepEqual(toMcpContent({ type: "input_audio", audio_url: "data:audio/mp3;base64,AAAA" }), {
    type: "audio",
    data: "AAAA",
    mimeType: "audio/mp3",
  });
  assert.deepEqual(toMcpContent({ type: "input_image", image_url: "https://x/y.png" }), {
    type: "text",
    text: "[image: https://x/y.png]",
  });
});

Deno.test("bad exec and wait arguments are error results and reach no session", async () => {
  let opened = 0;
  let shutdowns = 0;
  const used: string[] = [];
  // A session that records any use but shutdown: bad arguments must never reach it.
  const session = new Proxy({}, {
    get: (_, key) => {
      if (key === "shutdown") return () => Promise.resolve(void shutdowns++);
      if (key === "then") return undefined;
      used.push(String(key));
      return () => Promise.reject(new Error("used"));
    },
  }) as CodeModeSession;
  const provider: CodeModeSessionProvider = {
    createSession: () => {
      opened++;
      return Promise.resolve(session);
    },
  };
  const door = new McpFrontDoor({ provider, log: new Logger("error") });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const connection = await door.connect(serverSide);
  const client = new Client({ name: "unit", version: "1" });
  await client.connect(clientSide);
  const call = async (name: string, args: Record<string, unknown>) => {
    const result = await client.callTool({ name, arguments: args }) as CallToolResult;
    assert.equal(result.isError, true);
    return result.content.map((block) => block.type === "text" ? block.text : "");
  };
  assert.deepEqual(await call("exec", {}), ["exec expects `code`: the JavaScript source, a string"]);
  assert.deepEqual(await call("exec", { code: "  " }), [
    "exec expects raw JavaScript source text (non-empty). Provide JS only, optionally with first-line " +
    '`// @exec: {"yield_time_ms": 10000, "max_output_tokens": 1000}`.',
  ]);
  assert.deepEqual(await call("wait", {}), [
    "wait expects `cell_id`: the ID of a running exec cell, a non-empty string",
  ]);
  assert.deepEqual(await call("wait", { cell_id: "1", yield_time_ms: -1 }), [
    "wait expects `yield_time_ms` to be a non-negative number, got -1",
  ]);
  assert.deepEqual(await call("wait", { cell_id: "1", terminate: "yes" }), [
    'wait expects `terminate` to be a boolean, got "yes"',
  ]);
  assert.deepEqual(await call("wait", { cell_id: "1", extra: 1 }), ["wait does not take `extra`"]);
  await assert.rejects(client.callTool({ name: "nope", arguments: {} }), /Unknown tool: nope/);
  await client.close();
  await connection.closed;
  assert.deepEqual(used, []);
  assert.equal(opened, 1, "the connection's session opens when it starts");
  assert.equal(shutdowns, 1, "and shuts down when it closes");
  assert.equal(door.connectionCount, 0);
});

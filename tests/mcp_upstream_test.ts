/**
 * Upstream MCP tools: the fixture server (stdio and Streamable HTTP) behind the MCP front door and
 * behind the embedded provider, through `McpToolBridge`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { InProcessCodeModeSessionProvider, McpToolBridge } from "../mod.ts";
import {
  connectStdio,
  exec,
  FIXTURE,
  FixtureEvents,
  ROOT,
  texts,
  writeFixtureConfig,
} from "./_mcp_helpers.ts";

/** Starts the fixture server over Streamable HTTP (`--http portFile`, then `args`). */
function spawnHttpFixture(events: FixtureEvents, portFile: string, args: string[] = []): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--allow-net=127.0.0.1",
      "--allow-env",
      "--allow-write",
      "--config",
      join(ROOT, "deno.json"),
      FIXTURE,
      "--http",
      portFile,
      ...args,
    ],
    env: { FIXTURE_EVENTS_URL: events.url },
    stdin: "null",
  }).spawn();
}

Deno.test("an upstream server killed during a call fails that call with a clear message; the next call reconnects", async () => {
  await using events = new FixtureEvents();
  const dir = Deno.makeTempDirSync();
  try {
    const config = writeFixtureConfig(dir, events);
    await using connection = await connectStdio(["--mcp-config", config]);
    const first = await events.next("started", 0);
    const mark = events.count;
    const result = exec(
      connection.client,
      `try {
         await tools.mcp__fixture__slow_sum({ a: 1, b: 2, delay_ms: 60000 });
       } catch (error) { text("failed: " + error); }
       text(await tools.mcp__fixture__slow_sum({ a: 2, b: 3, delay_ms: 0 }));`,
    );
    const serving = await events.next("slow_sum", mark);
    assert.equal(serving, first);
    Deno.kill(serving, "SIGKILL");
    const output = texts(await result).slice(1);
    assert.deepEqual(output, [
      "failed: MCP server `fixture` went away during the call of `slow_sum` (its connection closed); " +
      "it is reconnected on the next call",
      "5",
    ]);
    const second = await events.next("started", mark);
    assert.notEqual(second, first);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("the embedded provider calls upstream tools over stdio and Streamable HTTP through McpToolBridge", async () => {
  await using events = new FixtureEvents();
  const dir = Deno.makeTempDirSync();
  const portFile = join(dir, "url");
  const httpServer = spawnHttpFixture(events, portFile);
  try {
    await events.next("started", 0);
    const stdioConfig = JSON.parse(Deno.readTextFileSync(writeFixtureConfig(dir, events))).mcpServers.fixture;
    await using bridge = await McpToolBridge.connect({
      local: { ...stdioConfig, cwd: dir },
      remote: { url: Deno.readTextFileSync(portFile), headers: {} },
    }, { log: "warn" });
    assert.deepEqual(bridge.tools.map((tool) => tool.name), [
      "mcp__local__lookup",
      "mcp__local__slow_sum",
      "mcp__remote__lookup",
      "mcp__remote__slow_sum",
    ]);
    await using provider = new InProcessCodeModeSessionProvider({ warmSessions: 0, log: "warn" });
    await using session = await provider.createSession();
    const cell = await session.execute({
      toolCallId: "call-1",
      enabledTools: bridge.tools,
      source: `const [a, b] = await Promise.all([
                 tools.mcp__local__lookup({ key: "dozen" }),
                 tools.mcp__remote__slow_sum({ a: 20, b: 22, delay_ms: 50 }),
               ]);
               text(JSON.stringify(a) + " " + b);
               text(await tools.mcp__remote__lookup({ key: "x" }).catch((e) => "rejected: " + e));`,
    }, bridge.delegate());
    const response = await cell.initialResponse();
    assert.deepEqual(response.contentItems, [
      { type: "input_text", text: '{"key":"dozen","value":12} 42' },
      { type: "input_text", text: 'rejected: no entry for key "x"' },
    ]);
  } finally {
    httpServer.kill("SIGTERM");
    await httpServer.status;
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("an HTTP upstream that dies fails the next call with a clear message and is reconnected once it is back", async () => {
  await using events = new FixtureEvents();
  const dir = Deno.makeTempDirSync();
  const portFile = join(dir, "url");
  const free = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = free.addr.port;
  free.close();
  // Stateful, so that a restarted server answers the former session's id with 404.
  const start = async () => {
    const mark = events.count;
    const child = spawnHttpFixture(events, portFile, ["--port", String(port), "--stateful"]);
    await events.next("started", mark);
    return child;
  };
  const kill = async (child: Deno.ChildProcess) => {
    try {
      child.kill("SIGKILL");
    } catch { /* it has ended already */ }
    await child.status;
  };
  let httpServer = await start();
  try {
    await using bridge = await McpToolBridge.connect({
      remote: { url: Deno.readTextFileSync(portFile), headers: {} },
    }, { log: "error" });
    const lookup = () =>
      bridge.invoke({
        cellId: "cell-1",
        runtimeToolCallId: "tool-1",
        toolName: { name: "lookup", namespace: "mcp__remote" },
        toolKind: "function",
        input: { key: "answer" },
      }, new AbortController().signal);
    const wentAway = (cause: RegExp) =>
      new RegExp(
        "^MCP server `remote` went away during the call of `lookup` \\(" + cause.source +
          "\\); it is reconnected on the next call$",
      );
    assert.deepEqual(await lookup(), { key: "answer", value: 42 });

    // Dead: the fetch fails.
    await kill(httpServer);
    await assert.rejects(lookup(), { message: wentAway(/its HTTP endpoint failed: .+/) });
    httpServer = await start();
    assert.deepEqual(await lookup(), { key: "answer", value: 42 });

    // Restarted behind the client's back: its session is unknown (404).
    await kill(httpServer);
    httpServer = await start();
    await assert.rejects(lookup(), { message: wentAway(/its HTTP endpoint answered 404: .+/) });
    assert.deepEqual(await lookup(), { key: "answer", value: 42 });
  } finally {
    await kill(httpServer);
    Deno.removeSync(dir, { recursive: true });
  }
});

/**
 * The MCP Streamable HTTP listener closes sessions idle longer than `sessionIdleTimeoutMs` (a
 * client that went away without `DELETE`), code-mode session included, and never one with a
 * request in flight or an open GET stream.
 *
 * @module
 */
import assert from "node:assert/strict";
import { serveMcpHttp } from "../mcp/serve.ts";
import { connectHttp, exec, texts } from "./_mcp_helpers.ts";
import { eventually, settledWithin } from "./_harness.ts";
import { scrape } from "./_ops.ts";
import { Logger } from "../host/ops/log.ts";

const HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" };

/** Posts one JSON-RPC message (in session `id` if given): the response and its whole body. */
async function post(
  url: string,
  message: unknown,
  id?: string,
): Promise<{ response: Response; body: string }> {
  const response = await fetch(url, {
    method: "POST",
    headers: id === undefined ? HEADERS : { ...HEADERS, "mcp-session-id": id },
    body: JSON.stringify(message),
  });
  return { response, body: await response.text() };
}

/** Initializes a session by raw requests (no GET stream): its ID. */
async function initialize(url: string): Promise<string> {
  const { response } = await post(url, {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
  });
  const id = response.headers.get("mcp-session-id");
  assert.ok(id, "the initialize response names the session");
  assert.equal(
    (await post(url, { jsonrpc: "2.0", method: "notifications/initialized" }, id)).response.status,
    202,
  );
  return id;
}

Deno.test("MCP HTTP sessions idle past the bound close (code-mode session too); busy ones stay", async () => {
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const metricsPort = probe.addr.port;
  probe.close();
  const metrics = `http://127.0.0.1:${metricsPort}`;
  // Warnings go to stderr as before; the idle sweep's info lines are events the test waits for.
  const idleClosed = new Map<string, PromiseWithResolvers<void>>();
  const closing = (id: string) => idleClosed.get(id) ?? idleClosed.set(id, Promise.withResolvers()).get(id)!;
  const log = new Logger("info", (line) => {
    const { level, msg } = JSON.parse(line);
    const idle = /^MCP session (\S+) closed after \d+ ms idle$/.exec(msg);
    if (idle) closing(idle[1]).resolve();
    if (level === "warn" || level === "error") console.error(line);
  });
  await using host = await serveMcpHttp({
    hostname: "127.0.0.1",
    port: 0,
    isolation: "subprocess",
    warmSessions: 0,
    log,
    metricsListen: `127.0.0.1:${metricsPort}`,
    sessionIdleTimeoutMs: 400,
  });
  const open = async () => (await scrape(metrics)).get("code_mode_sessions_open");

  // A client that initializes and goes away: its session closes, code-mode session included.
  const abandoned = await initialize(host.url);
  assert.ok(await eventually(async () => await open() === 1, 10_000), "the abandoned session opened");
  assert.ok(await eventually(() => host.sessionCount === 0, 10_000), "the idle MCP session closed");
  assert.ok(await eventually(async () => await open() === 0, 10_000), "its code-mode session shut down");
  assert.equal(
    (await post(host.url, { jsonrpc: "2.0", id: 2, method: "tools/list" }, abandoned)).response.status,
    404,
  );

  // A request in flight longer than the bound keeps its session.
  const busy = await initialize(host.url);
  const { body } = await post(host.url, {
    jsonrpc: "2.0",
    id: 2,
    method: "tools/call",
    params: {
      name: "exec",
      arguments: { code: 'await new Promise((r) => setTimeout(r, 1500)); text("slept")' },
    },
  }, busy);
  assert.match(body, /slept/);
  assert.equal(host.sessionCount, 1);
  assert.ok(await eventually(() => host.sessionCount === 0, 10_000), "the busy session closed once idle");

  // The SDK client keeps its GET stream open: its session stays past the bound.
  {
    await using connection = await connectHttp(host.url);
    // A session opened after it, idle from then on, is closed by the sweep: by then the bound has
    // passed for the first one too.
    const witness = await initialize(host.url);
    await settledWithin(closing(witness).promise, 10_000);
    assert.equal(host.sessionCount, 1);
    assert.deepEqual(texts(await exec(connection.client, 'text("still here")')).slice(1), ["still here"]);
  }
  assert.ok(await eventually(() => host.sessionCount === 0, 10_000));
  assert.ok(await eventually(async () => await open() === 0, 10_000));
});

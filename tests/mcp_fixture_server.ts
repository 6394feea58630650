/**
 * An upstream MCP server for the MCP front door's tests and for `deno task mcp` (the example config
 * in `deploy/mcp/`), written with the official SDK: stdio by default, Streamable HTTP with
 * `--http PORT_FILE` (it listens on 127.0.0.1:0, or on `--port N`, and writes its URL to that
 * file). Over HTTP it is stateless, or with `--stateful` it keeps sessions (`Mcp-Session-Id`), so
 * that a restarted server answers its former clients' requests with 404.
 *
 * Two tools:
 * - `lookup` (fast): `{ key: string }` → structured content `{ key, value }` from a fixed table;
 *   an unknown key is a tool error (`isError`) whose text is `no entry for key "{key}"`.
 * - `slow_sum` (slow): `{ a: number, b: number, delay_ms?: number }` → the text `{a + b}` after
 *   `delay_ms` (default 200) milliseconds.
 *
 * With `FIXTURE_EVENTS_URL` set, it POSTs `{"pid", "event"}` there when it starts (`started`) and
 * when a `slow_sum` call begins (`slow_sum`), so that a test can act on these moments without
 * sleeping.
 *
 * @module
 */
// Straight from the SDK's server modules (not ../mcp/sdk.ts, which also loads the client's,
// whose process spawning reads environment variables this server is not granted).
// @ts-types="@modelcontextprotocol/sdk/server/mcp"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
// @ts-types="@modelcontextprotocol/sdk/server/stdio"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
// @ts-types="@modelcontextprotocol/sdk/server/webStandardStreamableHttp"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import * as z from "zod";

const TABLE: Record<string, number> = { answer: 42, dozen: 12 };

async function report(event: string): Promise<void> {
  const url = Deno.env.get("FIXTURE_EVENTS_URL");
  if (!url) return;
  const response = await fetch(url, { method: "POST", body: JSON.stringify({ pid: Deno.pid, event }) });
  await response.body?.cancel();
}

function createServer(): McpServer {
  const server = new McpServer(
    { name: "fixture", version: "1.0.0" },
    { instructions: "A fixture server: a fast table lookup and a slow sum." },
  );
  server.registerTool("lookup", {
    description: "Looks a key up in a fixed table.",
    inputSchema: { key: z.string().describe("The key to look up.") },
    outputSchema: { key: z.string(), value: z.number() },
  }, ({ key }) => {
    if (!(key in TABLE)) {
      return { isError: true, content: [{ type: "text", text: `no entry for key "${key}"` }] };
    }
    const result = { key, value: TABLE[key] };
    return { content: [{ type: "text", text: JSON.stringify(result) }], structuredContent: result };
  });
  server.registerTool("slow_sum", {
    description: "Adds two numbers, slowly.",
    inputSchema: { a: z.number(), b: z.number(), delay_ms: z.number().optional() },
  }, async ({ a, b, delay_ms }, extra) => {
    await report("slow_sum");
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, delay_ms ?? 200);
      extra.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        resolve();
      }, { once: true });
    });
    return { content: [{ type: "text", text: String(a + b) }] };
  });
  return server;
}

const httpAt = Deno.args.indexOf("--http");
if (httpAt >= 0) {
  // Stateless Streamable HTTP: a fresh server and transport per request; stateful: one per session.
  const portFile = Deno.args[httpAt + 1];
  const portAt = Deno.args.indexOf("--port");
  const port = portAt >= 0 ? Number(Deno.args[portAt + 1]) : 0;
  const stateful = Deno.args.includes("--stateful");
  const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();
  const served = Deno.serve({ hostname: "127.0.0.1", port, onListen: () => {} }, async (request) => {
    const id = request.headers.get("mcp-session-id");
    if (stateful && id !== null) {
      return await sessions.get(id)?.handleRequest(request) ??
        new Response("Session not found", { status: 404 });
    }
    const transport = new WebStandardStreamableHTTPServerTransport({
      enableJsonResponse: true,
      sessionIdGenerator: stateful ? () => crypto.randomUUID() : undefined,
      onsessioninitialized: (sessionId) => void sessions.set(sessionId, transport),
    });
    const server = createServer();
    await server.connect(transport);
    return await transport.handleRequest(request);
  });
  Deno.writeTextFileSync(portFile, `http://127.0.0.1:${served.addr.port}/mcp`);
  await report("started");
} else {
  await createServer().connect(new StdioServerTransport());
  await report("started");
}

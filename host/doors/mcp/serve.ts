/**
 * The MCP front door's two listeners: `--listen mcp+stdio` ({@link serveMcpStdio}: one MCP
 * connection on stdin/stdout) and `--listen mcp+http://IP:PORT` ({@link serveMcpHttp}: Streamable
 * HTTP at `/mcp`, one MCP session per `Mcp-Session-Id`). Both run the door over the embedded
 * provider (an engine in this process, runtimes as usual) and the upstream servers of
 * `--mcp-config`.
 *
 * - stdio: stdout carries only MCP messages (logs go to stderr); stdin's end closes the
 *   connection, shuts its session down, stops the upstream servers and the engine.
 * - HTTP: with a token, every request must carry `authorization: Bearer {token}`, else `401` with
 *   the JSON-RPC error `code-mode host requires a valid token`; on a loopback address the `Host`
 *   header must name that address (DNS-rebinding protection). A session ends with the client's
 *   `DELETE` or with the host; an unknown session ID gets `404`, as MCP asks.
 *
 * @module
 */
import process from "node:process";
import { Readable, Writable } from "node:stream";
import type {
  ReadableStream as NodeReadableStream,
  WritableStream as NodeWritableStream,
} from "node:stream/web";
import { InProcessCodeModeSessionProvider, type InProcessProviderOptions } from "../embedded.ts";
import { bearerTokenCheck, UNAUTHENTICATED_MESSAGE } from "../grpc/access.ts";
import { Logger } from "../../ops/log.ts";
import { McpFrontDoor } from "./door.ts";
import {
  isInitializeRequest,
  StdioServerTransport,
  WebStandardStreamableHTTPServerTransport,
} from "./sdk.ts";
import type { McpServersConfig } from "./config.ts";
import { McpToolBridge } from "./upstream.ts";

/** Options of the MCP listeners: the embedded provider's, plus the upstream servers. */
export interface McpServeOptions extends Omit<InProcessProviderOptions, "outputTruncation" | "log"> {
  /** The upstream MCP servers whose tools cells may call (default none). */
  mcpServers?: McpServersConfig;
  /** The logger (default `info` on stderr). */
  log?: Logger;
}

/** The byte streams of the stdio connection (default the process's stdin and stdout). */
export interface McpIo {
  /** What the client writes. */
  readable: ReadableStream<Uint8Array>;
  /** What the client reads. */
  writable: WritableStream<Uint8Array>;
}

/** A started door: the provider, the upstream bridge and the door over them. */
interface McpStack {
  door: McpFrontDoor;
  log: Logger;
  /** Closes every connection, the upstream servers and the engine. Idempotent. */
  shutdown(): Promise<void>;
}

async function startStack(options: McpServeOptions): Promise<McpStack> {
  const log = options.log ?? new Logger("info");
  const bridge = await McpToolBridge.connect(options.mcpServers ?? {}, { log });
  const provider = new InProcessCodeModeSessionProvider({ ...options, log, outputTruncation: "server" });
  const door = new McpFrontDoor({ provider, bridge, log });
  let stopping: Promise<void> | undefined;
  const shutdown = () =>
    stopping ??= (async () => {
      log.info("code-mode-host shutting down");
      await door.closeAll();
      await Promise.all([bridge.close(), provider.shutdown()]);
      log.info("code-mode-host shut down");
    })();
  return { door, log, shutdown };
}

/**
 * Serves one MCP connection on stdin/stdout (or `io`) until the client closes its end.
 *
 * @param options engine, provider and upstream options
 * @param io the streams (default the process's stdin and stdout)
 * @returns the exit code, 0
 * @throws {Error} when the engine cannot start
 */
export async function serveMcpStdio(options: McpServeOptions, io?: McpIo): Promise<number> {
  const stack = await startStack(options);
  const input = io ? Readable.fromWeb(io.readable as NodeReadableStream) : process.stdin;
  const output = io ? Writable.fromWeb(io.writable as NodeWritableStream) : process.stdout;
  const transport = new StdioServerTransport(input, output);
  const stdin = input;
  const ended = Promise.withResolvers<void>();
  // The SDK's stdio transport does not watch for the end of its input: the client's EOF closes it.
  stdin.once("end", () => ended.resolve());
  stdin.once("close", () => ended.resolve());
  const connection = await stack.door.connect(transport);
  stack.log.info("code-mode-host serving MCP on stdio");
  await Promise.race([ended.promise, connection.closed]);
  await connection.close();
  await stack.shutdown();
  return 0;
}

/** A running Streamable HTTP listener. */
export interface McpHttpHost extends AsyncDisposable {
  /** The endpoint, `http://IP:PORT/mcp`. */
  readonly url: string;
  /** The bound port. */
  readonly port: number;
  /** MCP sessions open now. */
  readonly sessionCount: number;
  /** Closes every session, the upstream servers, the engine, then the listener. Idempotent. */
  shutdown(): Promise<void>;
}

/** Options of {@link serveMcpHttp}. */
export interface McpHttpOptions extends McpServeOptions {
  /** The IP literal to bind (IPv6 without brackets). */
  hostname: string;
  /** The port (0 picks a free one). */
  port: number;
  /** Require `authorization: Bearer {token}` on every request (default none). */
  authToken?: string;
  /** Whether `hostname` is a loopback address: then `Host` headers are checked (default true). */
  loopback?: boolean;
}

function jsonRpcError(status: number, code: number, message: string, headers: HeadersInit = {}): Response {
  return new Response(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

/**
 * Serves the MCP door over Streamable HTTP at `http://IP:PORT/mcp`.
 *
 * @param options the address, the token, and the engine, provider and upstream options
 * @returns the listener, once bound
 * @throws {Error} when the address cannot be bound or the engine cannot start
 */
export async function serveMcpHttp(options: McpHttpOptions): Promise<McpHttpHost> {
  const stack = await startStack(options);
  const check = options.authToken === undefined ? undefined : bearerTokenCheck(options.authToken);
  const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();
  let allowedHosts: string[] | undefined;
  const handler = async (request: Request): Promise<Response> => {
    if (new URL(request.url).pathname !== "/mcp") return new Response("not found", { status: 404 });
    const hostHeader = request.headers.get("host");
    if (allowedHosts && (hostHeader === null || !allowedHosts.includes(hostHeader))) {
      return jsonRpcError(403, -32000, `Invalid Host header: ${hostHeader}`);
    }
    if (check && !check(request.headers.get("authorization"))) {
      return jsonRpcError(401, -32001, UNAUTHENTICATED_MESSAGE, { "www-authenticate": "Bearer" });
    }
    const id = request.headers.get("mcp-session-id");
    if (id !== null) {
      const transport = sessions.get(id);
      if (!transport) return jsonRpcError(404, -32001, "Session not found");
      return await transport.handleRequest(request);
    }
    let body: unknown;
    if (request.method === "POST") {
      try {
        body = await request.json();
      } catch {
        return jsonRpcError(400, -32700, "Parse error: the body is not JSON");
      }
    }
    if (request.method !== "POST" || !isInitializeRequest(body)) {
      return jsonRpcError(400, -32000, "Bad Request: no valid session ID provided");
    }
    const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      onsessioninitialized: (sessionId) => void sessions.set(sessionId, transport),
      onsessionclosed: (sessionId) => void sessions.delete(sessionId),
      ...(allowedHosts ? { enableDnsRebindingProtection: true, allowedHosts } : {}),
    });
    const connection = await stack.door.connect(transport);
    void connection.closed.then(() => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
    });
    const response = await transport.handleRequest(request, { parsedBody: body });
    // An initialize the transport refused (headers, protocol version) leaves no session to keep.
    if (transport.sessionId === undefined) await connection.close();
    return response;
  };
  let server: Deno.HttpServer<Deno.NetAddr>;
  try {
    server = Deno.serve({ hostname: options.hostname, port: options.port, onListen: () => {} }, handler);
  } catch (error) {
    await stack.shutdown();
    const bind = options.hostname.includes(":")
      ? `[${options.hostname}]:${options.port}`
      : `${options.hostname}:${options.port}`;
    throw new Error(`failed to bind code-mode MCP host to ${bind}`, { cause: error });
  }
  const port = server.addr.port;
  const host = options.hostname.includes(":") ? `[${options.hostname}]` : options.hostname;
  if (options.loopback ?? true) {
    allowedHosts = [`${host}:${port}`, `localhost:${port}`];
  }
  let stopping: Promise<void> | undefined;
  const shutdown = () =>
    stopping ??= (async () => {
      await stack.shutdown();
      await server.shutdown();
    })();
  return {
    url: `http://${host}:${port}/mcp`,
    port,
    get sessionCount() {
      return sessions.size;
    },
    shutdown,
    [Symbol.asyncDispose]: shutdown,
  };
}

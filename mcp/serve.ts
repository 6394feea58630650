/**
 * The MCP front door's two listeners: `--listen mcp+stdio` ({@link serveMcpStdio}: one MCP
 * connection on stdin/stdout) and `--listen mcp+http://IP:PORT` ({@link serveMcpHttp}: Streamable
 * HTTP at `/mcp`, one MCP session per `Mcp-Session-Id`). Both run the door over the embedded
 * provider (an engine in this process, runtimes as usual) and the upstream servers of
 * `--mcp-config`.
 *
 * - stdio: stdout carries only MCP messages (logs go to stderr); stdin's end closes the
 *   connection, shuts its session down, stops the upstream servers and the engine. A line over
 *   {@link MCP_MAX_MESSAGE_BYTES} is answered with a JSON-RPC error and discarded, and the
 *   connection goes on (`stdio_transport.ts`).
 * - HTTP: every POST body is read within {@link MCP_MAX_MESSAGE_BYTES} (4 MiB) before anything
 *   parses it, the initialize request's included: a larger one (by its `Content-Length`, or as it
 *   arrives when chunked) gets `413` with the JSON-RPC error
 *   `Payload Too Large: Request body must not exceed 4194304 bytes`, and the rest is not read.
 * - HTTP: with a token, every request must carry `authorization: Bearer {token}`, else `401` with
 *   the JSON-RPC error `code-mode host requires a valid token`; on a loopback address the `Host`
 *   header must name that address (DNS-rebinding protection). A session ends with the client's
 *   `DELETE`, with the host, or once it has been idle (no request in flight, no open stream) for
 *   `sessionIdleTimeoutMs` (default 30 minutes), as a vanished client's would; an unknown session
 *   ID gets `404`, as MCP asks.
 *
 * @module
 */
import { InProcessCodeModeSessionProvider, type InProcessProviderOptions } from "../embedded/provider.ts";
import { bearerTokenCheck, UNAUTHENTICATED_MESSAGE } from "../host/doors/grpc/access.ts";
import { Logger } from "../host/ops/log.ts";
import { McpFrontDoor } from "./door.ts";
import { isInitializeRequest, WebStandardStreamableHTTPServerTransport } from "./sdk.ts";
import { BoundedStdioServerTransport, MCP_MAX_MESSAGE_BYTES } from "./stdio_transport.ts";
import type { McpServersConfig } from "./config.ts";
import { McpToolBridge } from "./upstream.ts";

/** Options of the MCP listeners: the embedded provider's, plus the upstream servers. */
export interface McpServeOptions extends Omit<InProcessProviderOptions, "outputTruncation" | "log"> {
  /** The upstream MCP servers whose tools cells may call (default none). */
  mcpServers?: McpServersConfig;
  /**
   * The largest message read: a stdio line, an HTTP request body (default
   * {@link MCP_MAX_MESSAGE_BYTES}, 4 MiB).
   */
  maxMessageBytes?: number;
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
  const provider = new InProcessCodeModeSessionProvider({ ...options, log, outputTruncation: "server" });
  // The engine starts before the door serves: the metrics and probes listener answers before the
  // first client, and a failure to start (a metrics port in use) is the listener's failure.
  let bridge: McpToolBridge;
  try {
    await provider.start();
    bridge = await McpToolBridge.connect(options.mcpServers ?? {}, { log });
  } catch (error) {
    await provider.shutdown().catch((cause) =>
      log.debug(`embedded provider shutdown failed: ${String(cause)}`)
    );
    throw error;
  }
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
  // Our own transport, not the SDK's: a line over the limit is answered and the door goes on.
  const transport = new BoundedStdioServerTransport(
    io?.readable ?? Deno.stdin.readable,
    io?.writable ?? Deno.stdout.writable,
    { maxMessageBytes: options.maxMessageBytes },
  );
  transport.onerror = (error) => stack.log.warn(`MCP stdio: ${error.message}`);
  // The end of the input closes the transport, so the connection and its session.
  const connection = await stack.door.connect(transport);
  stack.log.info("code-mode-host serving MCP on stdio");
  await connection.closed;
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
  /**
   * Close an MCP session (and its code-mode session) after this long with no request in flight
   * and no open stream, as its `DELETE` would; 0 turns it off (default
   * {@link DEFAULT_MCP_SESSION_IDLE_TIMEOUT_MS}).
   */
  sessionIdleTimeoutMs?: number;
}

/** The default of {@link McpHttpOptions.sessionIdleTimeoutMs}: 30 minutes. */
export const DEFAULT_MCP_SESSION_IDLE_TIMEOUT_MS = 30 * 60_000;

/** What the idle sweep knows of one MCP session. */
interface SessionActivity {
  /** Requests being handled and response bodies (SSE streams) not yet ended. */
  open: number;
  /** `performance.now()` of the last request's arrival or the last open body's end. */
  last: number;
}

/**
 * Counts `response` as open in `activity` until its body ends, is cancelled (the client went away)
 * or fails; a response without a body ends at once.
 */
function tracked(response: Response, activity: SessionActivity): Response {
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    activity.open--;
    activity.last = performance.now();
  };
  if (response.body === null) {
    end();
    return response;
  }
  const reader = response.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          end();
          controller.close();
        } else {
          controller.enqueue(value);
        }
      } catch (error) {
        end();
        controller.error(error);
      }
    },
    cancel(reason) {
      end();
      return reader.cancel(reason);
    },
  });
  return new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

function jsonRpcError(status: number, code: number, message: string, headers: HeadersInit = {}): Response {
  return new Response(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

/** The 413 answer's text: the SDK's own, so every request over the limit reads the same. */
export function bodyTooLarge(maxBytes: number): string {
  return `Payload Too Large: Request body must not exceed ${maxBytes} bytes`;
}

/**
 * Reads a POST body as JSON, never holding more than `maxBytes` of it: a declared `Content-Length`
 * over the limit is refused before anything is read, and a body without one (chunked) as soon as
 * more than the limit has arrived; the rest is not read (the stream is cancelled).
 *
 * @returns the parsed body, or the error response (413, or 400 for a body that is not JSON)
 */
async function readJsonBody(
  request: Request,
  maxBytes: number,
): Promise<{ json: unknown } | { refused: Response }> {
  const tooLarge = () => ({ refused: jsonRpcError(413, -32000, bodyTooLarge(maxBytes)) });
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > maxBytes) {
    await request.body?.cancel().catch(() => {});
    return tooLarge();
  }
  const chunks: Uint8Array[] = [];
  let received = 0;
  if (request.body !== null) {
    const reader = request.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        received += value.length;
        if (received > maxBytes) {
          await reader.cancel().catch(() => {});
          return tooLarge();
        }
        chunks.push(value);
      }
    } finally {
      reader.releaseLock();
    }
  }
  const bytes = new Uint8Array(received);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  try {
    return { json: JSON.parse(new TextDecoder().decode(bytes)) };
  } catch {
    return { refused: jsonRpcError(400, -32700, "Parse error: Invalid JSON") };
  }
}

/**
 * Serves the MCP door over Streamable HTTP at `http://IP:PORT/mcp`.
 *
 * @param options the address, the token, and the engine, provider and upstream options
 * @returns the listener, once bound
 * @throws {Error} when the address cannot be bound or the engine cannot start
 */
export async function serveMcpHttp(options: McpHttpOptions): Promise<McpHttpHost> {
  const maxBodyBytes = options.maxMessageBytes ?? MCP_MAX_MESSAGE_BYTES;
  const stack = await startStack(options);
  const check = options.authToken === undefined ? undefined : bearerTokenCheck(options.authToken);
  const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();
  const activity = new Map<string, SessionActivity>();
  const forget = (sessionId: string) => {
    sessions.delete(sessionId);
    activity.delete(sessionId);
  };
  /**
   * Handles one request of a session, counted as open until its response body ends; a POST's body
   * is read here, within the limit, and handed to the transport parsed.
   */
  const handle = async (
    sessionId: string,
    transport: WebStandardStreamableHTTPServerTransport,
    request: Request,
  ): Promise<Response> => {
    let state = activity.get(sessionId);
    if (!state) activity.set(sessionId, state = { open: 0, last: performance.now() });
    state.open++;
    state.last = performance.now();
    let response: Response;
    try {
      if (request.method === "POST") {
        const body = await readJsonBody(request, maxBodyBytes);
        response = "refused" in body
          ? body.refused
          : await transport.handleRequest(request, { parsedBody: body.json });
      } else {
        response = await transport.handleRequest(request);
      }
    } catch (error) {
      state.open--;
      throw error;
    }
    return tracked(response, state);
  };
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
      return await handle(id, transport, request);
    }
    let body: unknown;
    if (request.method === "POST") {
      const read = await readJsonBody(request, maxBodyBytes);
      if ("refused" in read) return read.refused;
      body = read.json;
    }
    if (request.method !== "POST" || !isInitializeRequest(body)) {
      return jsonRpcError(400, -32000, "Bad Request: no valid session ID provided");
    }
    const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      onsessioninitialized: (sessionId) => void sessions.set(sessionId, transport),
      onsessionclosed: (sessionId) => forget(sessionId),
      maxRequestBodySize: maxBodyBytes,
      ...(allowedHosts ? { enableDnsRebindingProtection: true, allowedHosts } : {}),
    });
    const connection = await stack.door.connect(transport);
    void connection.closed.then(() => {
      if (transport.sessionId !== undefined) forget(transport.sessionId);
    });
    const response = await transport.handleRequest(request, { parsedBody: body });
    // An initialize the transport refused (headers, protocol version) leaves no session to keep.
    if (transport.sessionId === undefined) {
      await connection.close();
      return response;
    }
    const state = { open: 1, last: performance.now() };
    activity.set(transport.sessionId, state);
    return tracked(response, state);
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
  // One timer closes the sessions idle longer than the bound, as their client's DELETE would: the
  // transport closes, the door's connection ends and its code-mode session shuts down.
  const idleMs = options.sessionIdleTimeoutMs ?? DEFAULT_MCP_SESSION_IDLE_TIMEOUT_MS;
  let sweeper: ReturnType<typeof setInterval> | undefined;
  if (idleMs > 0) {
    const timer = setInterval(() => {
      const now = performance.now();
      for (const [sessionId, state] of activity) {
        const transport = sessions.get(sessionId);
        if (!transport || state.open > 0 || now - state.last < idleMs) continue;
        forget(sessionId);
        stack.log.info(`MCP session ${sessionId} closed after ${idleMs} ms idle`);
        void transport.close().catch((error) =>
          stack.log.warn(`MCP session ${sessionId} did not close: ${(error as Error).message}`)
        );
      }
    }, Math.max(1, Math.min(Math.ceil(idleMs / 4), 60_000)));
    Deno.unrefTimer(timer);
    sweeper = timer;
  }
  let stopping: Promise<void> | undefined;
  const shutdown = () =>
    stopping ??= (async () => {
      clearInterval(sweeper);
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

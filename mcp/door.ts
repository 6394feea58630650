/**
 * The MCP server front door: {@link McpFrontDoor} serves code mode to any MCP client as two tools,
 * `exec` and `wait`, with the descriptions of SPEC §11, over a code-mode session provider (the
 * embedded one in `deno task mcp`, but any `CodeModeSessionProvider` does).
 *
 * - Each MCP connection is one code-mode session in Server output mode, opened when the
 *   connection starts (again by the next call if that failed) and shut down when it closes: stored values persist across `exec` calls of
 *   one connection, never between two.
 * - `exec` takes `{"code": string}`, the cell source with an optional `// @exec:` pragma
 *   (`parseExecSource`); its `yield_time_ms` and `max_output_tokens` (default 10,000 each) go to
 *   the cell's Execute, whose output the host truncates to that budget. A pragma error is returned
 *   as the tool's error result and runs nothing.
 * - `wait` takes `{"cell_id", "yield_time_ms"?, "max_tokens"?, "terminate"?}` (§11.1's
 *   `WAIT_TOOL_PARAMETERS`): it observes a yielded cell, or terminates it.
 * - A result is `formatRuntimeResponse`'s items as MCP content: text items as `text`, `data:`
 *   images as `image` (audio as `audio`); `isError` when the script failed. A cell that yields
 *   returns `Script running with cell ID {id}` for `wait` to continue.
 * - Cancelling an `exec` request (or closing the connection) terminates its cell, as Codex's
 *   abandonment does; the connection's next call starts only once that termination has finished
 *   (it may restart the session runtime), so it never meets the restart. Cancelling a `wait` only
 *   ends that observation (CancelWait); the cell runs on.
 * - A cell's tools are the upstream MCP tools of the bridge (declared in the `exec` description,
 *   grouped by server); a cell's `notify(text)` reaches the client as an MCP log message (`info`,
 *   logger `code-mode`).
 * - A session that cannot be opened, or a call the session refuses (a second observer, a session
 *   shutting down), is an error result with the session's message; the connection stays usable.
 *
 * @module
 */
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  Server,
  type Tool,
  type Transport,
} from "./sdk.ts";
import {
  buildExecToolDescription,
  DEFAULT_EXEC_YIELD_TIME_MS,
  DEFAULT_MAX_OUTPUT_TOKENS_PER_EXEC_CALL,
  DEFAULT_WAIT_YIELD_TIME_MS,
  formatRuntimeResponse,
  parseExecSource,
  PUBLIC_TOOL_NAME,
  WAIT_TOOL_DESCRIPTION,
  WAIT_TOOL_NAME,
  WAIT_TOOL_PARAMETERS,
} from "../client/harness/mod.ts";
import type {
  CodeModeSession,
  CodeModeSessionDelegate,
  CodeModeSessionProvider,
  FunctionCallOutputContentItem,
  RuntimeResponse,
  ToolDefinition,
} from "../client/types.ts";
import type { Logger } from "../host/ops/log.ts";
import { messageOf } from "../host/core/errors.ts";
import denoConfig from "../deno.json" with { type: "json" };
import type { McpToolBridge } from "./upstream.ts";

/** The JSON Schema of the `exec` tool's arguments (MCP has no freeform tools). */
export const EXEC_TOOL_PARAMETERS: Tool["inputSchema"] = {
  type: "object",
  additionalProperties: false,
  required: ["code"],
  properties: {
    code: {
      type: "string",
      description:
        "The JavaScript or TypeScript source of the cell; the first line may be an `// @exec:` pragma.",
    },
  },
};

/** Options of {@link McpFrontDoor}. */
export interface McpFrontDoorOptions {
  /** Where each connection's code-mode session is opened. */
  provider: CodeModeSessionProvider;
  /** The upstream MCP tools cells may call (default none). */
  bridge?: McpToolBridge;
  /** The host's logger. */
  log: Logger;
}

/** One MCP connection being served. */
export interface McpConnection {
  /** Resolves when the connection has closed and its session has shut down. */
  readonly closed: Promise<void>;
  /** Closes the connection (and so its session). Idempotent. */
  close(): Promise<void>;
}

const DATA_URL = /^data:([^;,]*)((?:;[^;,]*)*),(.*)$/s;

/** An image or audio `data:` URL as MCP's `{data, mimeType}` (base64), or undefined. */
function dataUrl(url: string, fallbackType: string): { data: string; mimeType: string } | undefined {
  const match = DATA_URL.exec(url);
  if (!match) return undefined;
  const mimeType = match[1] || fallbackType;
  if (match[2].split(";").includes("base64")) return { data: match[3], mimeType };
  try {
    const bytes = new TextEncoder().encode(decodeURIComponent(match[3]));
    let binary = "";
    for (const byte of bytes) binary += String.fromCharCode(byte);
    return { data: btoa(binary), mimeType };
  } catch {
    return undefined;
  }
}

/**
 * A formatted item as MCP content: images and audio from `data:` URLs become `image`/`audio`
 * blocks (MCP has no image detail); anything else is text.
 *
 * @param item a model-facing content item
 * @returns the MCP content block
 */
export function toMcpContent(item: FunctionCallOutputContentItem): CallToolResult["content"][number] {
  if (item.type === "input_text") return { type: "text", text: item.text };
  if (item.type === "input_image") {
    const data = dataUrl(item.image_url, "image/png");
    return data ? { type: "image", ...data } : { type: "text", text: `[image: ${item.image_url}]` };
  }
  const data = dataUrl(item.audio_url, "audio/wav");
  return data ? { type: "audio", ...data } : { type: "text", text: `[audio: ${item.audio_url}]` };
}

function errorResult(text: string): CallToolResult {
  return { content: [{ type: "text", text }], isError: true };
}

/**
 * Serves the `exec` and `wait` tools on MCP connections, one code-mode session per connection.
 *
 * @example
 * ```ts ignore
 * const door = new McpFrontDoor({ provider, bridge, log });
 * const connection = await door.connect(new StdioServerTransport());
 * await connection.closed;
 * ```
 */
export class McpFrontDoor {
  readonly #provider: CodeModeSessionProvider;
  readonly #bridge: McpToolBridge | undefined;
  readonly #log: Logger;
  readonly #tools: Tool[];
  readonly #enabledTools: ToolDefinition[];
  readonly #connections = new Set<McpConnection>();

  /**
   * Creates the door; the `exec` description is built once, from the bridge's tools.
   *
   * @param options the session provider, the upstream tools, the logger
   */
  constructor(options: McpFrontDoorOptions) {
    this.#provider = options.provider;
    this.#bridge = options.bridge;
    this.#log = options.log;
    this.#enabledTools = this.#bridge?.tools ?? [];
    const namespaceDescriptions = Object.fromEntries(
      (this.#bridge?.namespaces ?? []).map((n) => [n.name, n]),
    );
    this.#tools = [
      {
        name: PUBLIC_TOOL_NAME,
        description: buildExecToolDescription(this.#enabledTools, {
          codeModeOnly: true,
          namespaceDescriptions,
        }),
        inputSchema: EXEC_TOOL_PARAMETERS,
      },
      {
        name: WAIT_TOOL_NAME,
        description: WAIT_TOOL_DESCRIPTION,
        inputSchema: WAIT_TOOL_PARAMETERS,
      },
    ];
  }

  /** What `tools/list` returns: `exec` and `wait`. */
  get tools(): Tool[] {
    return structuredClone(this.#tools);
  }

  /** Connections open now. */
  get connectionCount(): number {
    return this.#connections.size;
  }

  /**
   * Serves one MCP connection on `transport` until it closes.
   *
   * @param transport a started-on-connect SDK transport (stdio, Streamable HTTP, in-memory)
   * @returns the connection
   */
  async connect(transport: Transport): Promise<McpConnection> {
    // The low-level Server: the tools' JSON Schemas and descriptions are given exactly (§11).
    const server = new Server(
      { name: "code-mode-host", version: denoConfig.version },
      { capabilities: { tools: {}, logging: {} } },
    );
    let session: Promise<CodeModeSession> | undefined;
    let ended = false;
    const openSession = () => {
      session ??= this.#provider.createSession({ outputTruncation: "server" });
      session.catch(() => session = undefined);
      return session;
    };
    let calls = 0;
    /** Terminations of cancelled cells still under way. */
    const stopping = new Set<Promise<void>>();
    const { promise: closed, resolve: resolveClosed } = Promise.withResolvers<void>();
    let shutting: Promise<void> | undefined;
    const shutdown = () =>
      shutting ??= (async () => {
        ended = true;
        const open = await session?.catch(() => undefined);
        await open?.shutdown().catch((error) =>
          this.#log.warn(`MCP session shutdown failed: ${messageOf(error)}`)
        );
        this.#connections.delete(connection);
        resolveClosed();
      })();
    const connection: McpConnection = {
      closed,
      close: async () => {
        await server.close().catch((error) =>
          this.#log.debug(`MCP server close failed: ${messageOf(error)}`)
        );
        await shutdown();
      },
    };

    // A cell's notify() goes on the stream of the exec request that started it while that request
    // is open (Streamable HTTP delivers it there), else as a notification of the connection.
    const delegateFor = (extra: { sendNotification: Server["notification"] }, open: { current: boolean }) => {
      const notifier: CodeModeSessionDelegate = {
        invokeTool: () => Promise.reject(new Error("code mode nested tools are unavailable")),
        notify: async (_callId, _cellId, text) => {
          const note = {
            method: "notifications/message" as const,
            params: { level: "info" as const, logger: "code-mode", data: text },
          };
          await (open.current ? extra.sendNotification(note) : server.notification(note))
            .catch((error: unknown) => this.#log.debug(`MCP notification not sent: ${messageOf(error)}`));
        },
        cellClosed: () => {},
      };
      return this.#bridge ? this.#bridge.delegate(notifier) : notifier;
    };

    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: this.tools }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const started = performance.now();
      await Promise.all(stopping);
      const args = (request.params.arguments ?? {}) as Record<string, unknown>;
      const wallTimeMs = () => performance.now() - started;
      const format = (response: RuntimeResponse): CallToolResult => {
        // Server mode: the host truncated the output to the exec's or the wait's budget.
        const formatted = formatRuntimeResponse(response, {
          outputTruncation: "server",
          wallTimeMs: wallTimeMs(),
        });
        return {
          content: formatted.contentItems.map(toMcpContent),
          ...(formatted.success ? {} : { isError: true }),
        };
      };
      if (request.params.name === PUBLIC_TOOL_NAME) {
        if (typeof args.code !== "string") {
          return errorResult("exec expects `code`: the JavaScript source, a string");
        }
        const parsed = parseExecSource(args.code);
        if (typeof parsed === "string") return errorResult(parsed);
        if (ended) return errorResult("code mode session is shutting down");
        const inFlight = { current: true };
        try {
          const open = await openSession();
          // Cancelled before the cell starts: the library abandons it (and terminates it once its ID is
          // known). After that, the door terminates it itself, below, so that it can wait for the end:
          // a second Terminate from the library would only be refused as `already terminating`.
          const early = new AbortController();
          const onEarlyAbort = () => early.abort(extra.signal.reason);
          if (extra.signal.aborted) onEarlyAbort();
          else extra.signal.addEventListener("abort", onEarlyAbort, { once: true });
          const cell = await open.execute(
            {
              toolCallId: `call-${++calls}`,
              enabledTools: this.#enabledTools,
              source: parsed.code,
              yieldTimeMs: parsed.yieldTimeMs ?? DEFAULT_EXEC_YIELD_TIME_MS,
              maxOutputTokens: parsed.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS_PER_EXEC_CALL,
            },
            delegateFor(extra, inFlight),
            { signal: early.signal },
          ).finally(() => extra.signal.removeEventListener("abort", onEarlyAbort));
          // A cancelled exec terminates its cell (as Codex's abandonment does), and the connection's
          // next call waits for that to finish, so that it never meets the cell's runtime restart.
          const stop = () => {
            const stopped: Promise<void> = open.terminate(cell.cellId).then(
              () => {},
              (error) => this.#log.debug(`MCP exec cell ${cell.cellId} not terminated: ${messageOf(error)}`),
            ).finally(() => stopping.delete(stopped));
            stopping.add(stopped);
          };
          if (extra.signal.aborted) stop();
          else extra.signal.addEventListener("abort", stop, { once: true });
          try {
            const response = await cell.initialResponse();
            extra.signal.throwIfAborted();
            return format(response);
          } finally {
            extra.signal.removeEventListener("abort", stop);
          }
        } catch (error) {
          if (extra.signal.aborted) throw error;
          return errorResult(messageOf(error));
        } finally {
          inFlight.current = false;
        }
      }
      if (request.params.name === WAIT_TOOL_NAME) {
        const invalid = waitArgumentsError(args);
        if (invalid !== undefined) return errorResult(invalid);
        const maxTokens = Math.floor(
          (args.max_tokens as number | undefined) ?? DEFAULT_MAX_OUTPUT_TOKENS_PER_EXEC_CALL,
        );
        if (ended) return errorResult("code mode session is shutting down");
        try {
          const open = await openSession();
          const outcome = args.terminate === true
            ? await open.terminate(args.cell_id as string)
            : await open.wait({
              cellId: args.cell_id as string,
              yieldTimeMs: Math.floor(
                (args.yield_time_ms as number | undefined) ?? DEFAULT_WAIT_YIELD_TIME_MS,
              ),
              maxTokens,
            }, { signal: extra.signal });
          return format(outcome.response);
        } catch (error) {
          if (extra.signal.aborted) throw error;
          return errorResult(messageOf(error));
        }
      }
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    });
    server.onclose = () => void shutdown();
    this.#connections.add(connection);
    await server.connect(transport);
    // The session opens now, while the client initializes, rather than on the first exec's path; a
    // failure is reported by that exec, which tries again.
    void openSession().catch((error) =>
      this.#log.warn(`MCP session could not be opened: ${messageOf(error)}`)
    );
    return connection;
  }

  /** Closes every open connection (and so its session). */
  async closeAll(): Promise<void> {
    await Promise.all([...this.#connections].map((c) => c.close()));
  }
}

/** Why `wait`'s arguments are not `WAIT_TOOL_PARAMETERS`, or undefined when they are. */
function waitArgumentsError(args: Record<string, unknown>): string | undefined {
  if (typeof args.cell_id !== "string" || args.cell_id === "") {
    return "wait expects `cell_id`: the ID of a running exec cell, a non-empty string";
  }
  for (const field of ["yield_time_ms", "max_tokens"]) {
    const value = args[field];
    if (
      value !== undefined && !(typeof value === "number" && value >= 0 && value <= Number.MAX_SAFE_INTEGER)
    ) {
      return `wait expects \`${field}\` to be a non-negative number, got ${JSON.stringify(value)}`;
    }
  }
  if (args.terminate !== undefined && typeof args.terminate !== "boolean") {
    return `wait expects \`terminate\` to be a boolean, got ${JSON.stringify(args.terminate)}`;
  }
  const unknown = Object.keys(args).find((key) => !(key in WAIT_TOOL_PARAMETERS.properties));
  return unknown === undefined ? undefined : `wait does not take \`${unknown}\``;
}

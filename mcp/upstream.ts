/**
 * The upstream MCP bridge: {@link McpToolBridge} connects, as an MCP client (the official SDK), to
 * every server of an `--mcp-config` file and turns their tools into ordinary code-mode tools
 * (`tools.mcp__{server}__{tool}(args)` in a cell) with a delegate that forwards each call.
 *
 * - Each tool becomes a function tool named `mcp__{server}__{tool}` in the namespace
 *   `mcp__{server}` (SPEC §11's naming of MCP tools); its input schema is the tool's, and its
 *   output schema says what the cell receives: the tool's output schema when it has one (the call
 *   resolves with the structured content), else `string` (the call resolves with the text).
 * - A call resolves with the result's `structuredContent` when present, else with its text blocks
 *   joined by `\n` (a non-text block appears there as its JSON). A result with `isError` rejects
 *   with the server's text; a JSON-RPC error rejects with the SDK's message of it.
 * - A server whose connection ends (its process died, its HTTP endpoint went away) fails the calls
 *   in flight with a message that says so, and is connected again by the next call.
 * - A server that cannot be reached at start is logged and left out; the others still serve.
 *
 * @module
 */
import {
  type CallToolResult,
  Client,
  StdioClientTransport,
  StreamableHTTPClientTransport,
  StreamableHTTPError,
  type Tool,
  type Transport,
} from "./sdk.ts";
import type { CodeModeSessionDelegate, CodeModeToolCall, ToolDefinition } from "../client/types.ts";
import { NoopCodeModeSessionDelegate } from "../client/session.ts";
import { Logger, type LogLevel } from "../host/ops/log.ts";
import denoConfig from "../deno.json" with { type: "json" };
import type { McpServerConfig, McpServersConfig } from "./config.ts";

/** Options of {@link McpToolBridge.connect}; every field has a default. */
export interface McpToolBridgeOptions {
  /** Log threshold (default `info`) or a logger. */
  log?: LogLevel | Logger;
  /** The longest a forwarded call may take, in ms (default 60,000, the SDK's and Codex's default). */
  callTimeoutMs?: number;
}

/** A code-mode namespace of upstream tools: one per server. */
export interface McpNamespace {
  /** `mcp__{server}`. */
  name: string;
  /** The server's `instructions`, else a sentence naming the server. */
  description: string;
}

/** The prefix of every upstream tool's code-mode name. */
const PREFIX = "mcp__";

/** The namespace of a server's tools. */
export function mcpNamespace(server: string): string {
  return `${PREFIX}${server}`;
}

/** A connection that ended while a call was in flight. */
class ConnectionLost extends Error {}

/**
 * Why an HTTP upstream's call failed when the failure says that its endpoint is gone, else
 * `undefined`: the SDK's Streamable HTTP client transport closes nothing (fires no `onclose`) when
 * a POST fails, so these are what tell a dead or restarted server. A failed fetch (connection
 * refused or reset) is a `TypeError`; a restarted server answers a stale `Mcp-Session-Id` with 404;
 * a gateway in front of a dead server answers 5xx.
 */
function endpointFailure(error: unknown): string | undefined {
  if (error instanceof TypeError) {
    const cause = error.cause instanceof Error ? ` (${error.cause.message})` : "";
    return `its HTTP endpoint failed: ${error.message}${cause}`;
  }
  if (error instanceof StreamableHTTPError && (error.code === 404 || (error.code ?? 0) >= 500)) {
    return `its HTTP endpoint answered ${error.code}: ${error.message}`;
  }
  return undefined;
}

/** One upstream server: a lazily (re)connected SDK client. */
class Upstream {
  readonly name: string;
  readonly #config: McpServerConfig;
  readonly #log: Logger;
  readonly #timeoutMs: number;
  #connecting: Promise<Client> | undefined;
  #client: Client | undefined;
  /** Ends the live connection of {@link Upstream.#client} (see `connect`). */
  #drop: ((reason: string) => void) | undefined;
  #closed = false;
  /** Called when a live connection ends by itself. */
  #lost = new Set<(reason: string) => void>();
  instructions: string | undefined;
  tools: Tool[] = [];

  constructor(name: string, config: McpServerConfig, log: Logger, timeoutMs: number) {
    this.name = name;
    this.#config = config;
    this.#log = log;
    this.#timeoutMs = timeoutMs;
  }

  #transport(): Transport {
    const c = this.#config;
    if ("command" in c) {
      return new StdioClientTransport({ command: c.command, args: c.args, env: c.env, cwd: c.cwd });
    }
    return new StreamableHTTPClientTransport(new URL(c.url), { requestInit: { headers: c.headers } });
  }

  /** The live client, connecting (again) when there is none. */
  connect(): Promise<Client> {
    if (this.#closed) return Promise.reject(new Error(`MCP server \`${this.name}\` is closed`));
    this.#connecting ??= (async () => {
      const client = new Client({ name: "code-mode-host", version: denoConfig.version });
      const transport = this.#transport();
      let live = true;
      /** Forgets this connection (the next call reconnects) and fails the calls in flight. */
      const drop = (reason: string) => {
        if (!live) return;
        live = false;
        if (this.#client === client) {
          this.#client = undefined;
          this.#drop = undefined;
        }
        this.#connecting = undefined;
        if (this.#closed) return;
        this.#log.warn(`MCP server \`${this.name}\` went away (${reason}); it is reconnected on next use`);
        for (const notify of this.#lost) notify(reason);
      };
      client.onclose = () => drop("its connection closed");
      client.onerror = (error) => this.#log.debug(`MCP server \`${this.name}\`: ${error.message}`);
      try {
        await client.connect(transport, { timeout: this.#timeoutMs });
        this.instructions = client.getInstructions();
        const tools: Tool[] = [];
        let cursor: string | undefined;
        do {
          const page = await client.listTools(cursor === undefined ? {} : { cursor }, {
            timeout: this.#timeoutMs,
          });
          tools.push(...page.tools);
          cursor = page.nextCursor;
        } while (cursor !== undefined);
        this.tools = tools;
      } catch (error) {
        live = false;
        this.#connecting = undefined;
        await this.#closeQuietly(client);
        throw error;
      }
      if (this.#closed) {
        live = false;
        await this.#closeQuietly(client);
        throw new Error(`MCP server \`${this.name}\` is closed`);
      }
      this.#client = client;
      this.#drop = drop;
      return client;
    })();
    return this.#connecting;
  }

  /**
   * Calls a tool, connecting first if needed.
   *
   * @returns the structured content, else the text
   * @throws {Error} the server's error text, or why the server could not answer
   */
  async call(tool: string, args: unknown, signal: AbortSignal): Promise<unknown> {
    let client: Client;
    try {
      client = await this.connect();
    } catch (error) {
      throw new Error(`MCP server \`${this.name}\` is unavailable: ${(error as Error).message}`);
    }
    const drop = this.#client === client ? this.#drop : undefined;
    // `lost` and `call` are raced at once, so a rejection of either is always handled.
    const { promise: lost, reject } = Promise.withResolvers<never>();
    const onLost = (reason: string) => reject(new ConnectionLost(reason));
    this.#lost.add(onLost);
    let result: CallToolResult;
    try {
      const call = client.callTool(
        { name: tool, arguments: (args ?? {}) as Record<string, unknown> },
        undefined,
        { signal, timeout: this.#timeoutMs, resetTimeoutOnProgress: true },
      );
      result = await Promise.race([call, lost]) as CallToolResult;
    } catch (error) {
      let cause = error instanceof ConnectionLost ? error.message : undefined;
      if (cause === undefined && !signal.aborted && !("command" in this.#config)) {
        cause = endpointFailure(error);
        if (cause !== undefined) {
          drop?.(cause);
          await this.#closeQuietly(client);
        }
      }
      if (cause === undefined && !this.#client && !signal.aborted) cause = (error as Error).message;
      if (cause !== undefined) {
        throw new Error(
          `MCP server \`${this.name}\` went away during the call of \`${tool}\` (${cause}); ` +
            "it is reconnected on the next call",
        );
      }
      throw error;
    } finally {
      this.#lost.delete(onLost);
    }
    return resultValue(this.name, tool, result);
  }

  async close(): Promise<void> {
    this.#closed = true;
    const connecting = this.#connecting;
    this.#connecting = undefined;
    const client = this.#client ?? await connecting?.catch(() => undefined);
    this.#client = undefined;
    this.#drop = undefined;
    if (client) await this.#closeQuietly(client);
  }

  /** Closes a client that is being given up; its failure changes nothing but is logged. */
  async #closeQuietly(client: Client): Promise<void> {
    try {
      await client.close();
    } catch (error) {
      this.#log.debug(
        `MCP server \`${this.name}\` did not close cleanly: ${
          error instanceof Error ? error.message : String(error)
        }`,
      );
    }
  }
}

/** What a cell receives for a tool's result (see the module's contract). */
function resultValue(server: string, tool: string, result: CallToolResult): unknown {
  const text = (result.content ?? []).map((block) =>
    block.type === "text" ? block.text : JSON.stringify(block)
  )
    .join("\n");
  if (result.isError) {
    throw new Error(text.trim() === "" ? `MCP tool \`${tool}\` of server \`${server}\` failed` : text);
  }
  return result.structuredContent ?? text;
}

function toolDefinition(server: string, tool: Tool): ToolDefinition {
  return {
    name: `${PREFIX}${server}__${tool.name}`,
    toolName: { name: tool.name, namespace: mcpNamespace(server) },
    description: tool.description ?? tool.title ?? "",
    kind: "function",
    inputSchema: tool.inputSchema,
    outputSchema: tool.outputSchema ?? { type: "string" },
  };
}

/**
 * The tools of a set of upstream MCP servers as code-mode tools, and the delegate that forwards
 * their calls: hand {@link McpToolBridge.tools} to `execute`'s `enabledTools` and
 * {@link McpToolBridge.delegate} as its delegate, with any provider (embedded, gRPC, or the MCP
 * front door's own sessions).
 *
 * @example
 * ```ts ignore
 * import { InProcessCodeModeSessionProvider, McpToolBridge } from "./mod.ts";
 *
 * await using bridge = await McpToolBridge.connect({ notes: { command: "notes-mcp", args: [], env: {} } });
 * await using provider = new InProcessCodeModeSessionProvider();
 * await using session = await provider.createSession();
 * const cell = await session.execute(
 *   { toolCallId: "call-1", enabledTools: bridge.tools, source: "text(await tools.mcp__notes__search({ q: 'x' }))" },
 *   bridge.delegate(),
 * );
 * console.log(await cell.initialResponse());
 * ```
 */
export class McpToolBridge implements AsyncDisposable {
  readonly #upstreams: Map<string, Upstream>;
  readonly #tools: ToolDefinition[];
  readonly #namespaces: McpNamespace[];

  private constructor(upstreams: Upstream[]) {
    this.#upstreams = new Map(upstreams.map((u) => [mcpNamespace(u.name), u]));
    this.#tools = upstreams.flatMap((u) => u.tools.map((tool) => toolDefinition(u.name, tool)));
    this.#namespaces = upstreams.map((u) => ({
      name: mcpNamespace(u.name),
      description: u.instructions?.trim() || `Tools of the MCP server \`${u.name}\`.`,
    }));
  }

  /**
   * Connects to every server (concurrently) and lists its tools.
   *
   * @param servers the servers by name (`readMcpConfig`, `parseMcpConfig`)
   * @param options logging and the call timeout
   * @returns the bridge; a server that could not be reached is logged and left out
   */
  static async connect(
    servers: McpServersConfig,
    options: McpToolBridgeOptions = {},
  ): Promise<McpToolBridge> {
    const log = options.log instanceof Logger ? options.log : new Logger(options.log ?? "info");
    const timeoutMs = options.callTimeoutMs ?? 60_000;
    const upstreams = Object.entries(servers).map(([name, config]) =>
      new Upstream(name, config, log, timeoutMs)
    );
    const connected = await Promise.all(upstreams.map(async (upstream) => {
      try {
        await upstream.connect();
        log.info(`MCP server \`${upstream.name}\`: ${upstream.tools.length} tools`);
        return upstream;
      } catch (error) {
        log.error(`MCP server \`${upstream.name}\` is left out: ${(error as Error).message}`);
        await upstream.close();
        return undefined;
      }
    }));
    return new McpToolBridge(connected.filter((u): u is Upstream => u !== undefined));
  }

  /** Every upstream tool as a code-mode function tool, server by server. */
  get tools(): ToolDefinition[] {
    return [...this.#tools];
  }

  /** One namespace per connected server, in the config's order. */
  get namespaces(): McpNamespace[] {
    return [...this.#namespaces];
  }

  /**
   * Forwards one call of an upstream tool.
   *
   * @param call the cell's call (its `toolName.namespace` names the server)
   * @param signal aborted when the cell no longer waits for the result
   * @returns the structured content, else the text
   * @throws {Error} the server's error text, or why the server could not answer
   */
  invoke(call: CodeModeToolCall, signal: AbortSignal): Promise<unknown> {
    const upstream = this.#upstreams.get(call.toolName.namespace ?? "");
    if (!upstream) {
      return Promise.reject(new Error(`no MCP server serves the tool \`${call.toolName.name}\``));
    }
    return upstream.call(call.toolName.name, call.input, signal);
  }

  /**
   * A delegate that forwards calls of upstream tools and hands everything else to `next`.
   *
   * @param next the harness's own delegate (default one with no tools)
   * @returns the delegate
   */
  delegate(next: CodeModeSessionDelegate = new NoopCodeModeSessionDelegate()): CodeModeSessionDelegate {
    return {
      invokeTool: (call, signal) =>
        this.#upstreams.has(call.toolName.namespace ?? "")
          ? this.invoke(call, signal)
          : next.invokeTool(call, signal),
      notify: (callId, cellId, text, signal) => next.notify(callId, cellId, text, signal),
      cellClosed: (cellId) => next.cellClosed(cellId),
    };
  }

  /** Closes every connection (stdio servers are asked to exit, then killed). Idempotent. */
  async close(): Promise<void> {
    await Promise.all([...this.#upstreams.values()].map((u) => u.close()));
  }

  /** Same as {@link McpToolBridge.close}. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

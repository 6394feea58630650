/**
 * Helpers of the MCP front door's tests: the host started as `deno task mcp` would (its own
 * process, `--listen mcp+stdio` or `mcp+http://127.0.0.1:0`), the SDK's own client on it, and the
 * fixture upstream server's events. Folder-private.
 *
 * @module
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type CallToolResult,
  Client,
  LoggingMessageNotificationSchema,
  StdioClientTransport,
  StreamableHTTPClientTransport,
} from "../mcp/sdk.ts";

export const ROOT: string = join(dirname(fileURLToPath(import.meta.url)), "..");
export const FIXTURE: string = join(ROOT, "tests", "mcp_fixture_server.ts");
const MAIN = join(ROOT, "cli", "main.ts");
const COMMON = ["--warm-sessions", "1", "--log-level", "warn"];

/** The fixture server's `{pid, event}` reports, awaited by name. */
export class FixtureEvents implements AsyncDisposable {
  readonly url: string;
  readonly #server: Deno.HttpServer<Deno.NetAddr>;
  readonly #seen: { pid: number; event: string }[] = [];
  readonly #waiters: { event: string; from: number; resolve: (pid: number) => void }[] = [];

  constructor() {
    this.#server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (request) => {
      const report = await request.json() as { pid: number; event: string };
      this.#seen.push(report);
      for (const w of [...this.#waiters]) {
        if (w.event === report.event && this.#seen.length > w.from) {
          this.#waiters.splice(this.#waiters.indexOf(w), 1);
          w.resolve(report.pid);
        }
      }
      return new Response("ok");
    });
    this.url = `http://127.0.0.1:${this.#server.addr.port}/`;
  }

  /** How many reports arrived so far (a mark for {@link FixtureEvents.next}). */
  get count(): number {
    return this.#seen.length;
  }

  /** The pid of the first `event` reported after mark `from` (now, by default). */
  next(event: string, from = this.count): Promise<number> {
    const seen = this.#seen.slice(from).find((r) => r.event === event);
    if (seen) return Promise.resolve(seen.pid);
    const { promise, resolve } = Promise.withResolvers<number>();
    this.#waiters.push({ event, from, resolve });
    return promise;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.#server.shutdown();
  }
}

/** Writes an `--mcp-config` file with the fixture server (stdio) reporting to `events`. */
export function writeFixtureConfig(dir: string, events: FixtureEvents): string {
  const path = join(dir, "mcp.json");
  Deno.writeTextFileSync(
    path,
    JSON.stringify({
      mcpServers: {
        fixture: {
          command: Deno.execPath(),
          args: [
            "run",
            "--quiet",
            "--allow-net=127.0.0.1",
            "--allow-env",
            "--config",
            join(ROOT, "deno.json"),
            FIXTURE,
          ],
          env: { FIXTURE_EVENTS_URL: events.url },
        },
      },
    }),
  );
  return path;
}

/** An SDK client connected to a host, with what it received. */
export interface McpTestClient extends AsyncDisposable {
  client: Client;
  /** The `data` of every MCP log message received (a cell's `notify()`). */
  notes: string[];
  /** Resolves with the next log message's data. */
  nextNote(): Promise<string>;
}

function wrap(client: Client, close: () => Promise<void>): McpTestClient {
  const notes: string[] = [];
  let waiter: ((text: string) => void) | undefined;
  client.setNotificationHandler(LoggingMessageNotificationSchema, (note) => {
    notes.push(String(note.params.data));
    waiter?.(String(note.params.data));
    waiter = undefined;
  });
  return {
    client,
    notes,
    nextNote: () => new Promise((resolve) => waiter = resolve),
    [Symbol.asyncDispose]: close,
  };
}

/** The argv of `cli/main.ts` with `--listen listen`, the tests' defaults, then `args` (later flags win). */
export function hostArgs(listen: string, args: string[] = []): string[] {
  return [
    "run",
    "--allow-all",
    "--config",
    join(ROOT, "deno.json"),
    MAIN,
    "--listen",
    listen,
    ...COMMON,
    ...args,
  ];
}

/** Starts `cli/main.ts --listen mcp+stdio` and connects the SDK's stdio client to it. */
export async function connectStdio(
  args: string[] = [],
): Promise<McpTestClient & { transport: StdioClientTransport }> {
  const transport = new StdioClientTransport({
    command: Deno.execPath(),
    args: hostArgs("mcp+stdio", args),
    env: { ...Deno.env.toObject() },
    stderr: "inherit",
  });
  const client = new Client({ name: "mcp-door-test", version: "1.0.0" });
  await client.connect(transport);
  return Object.assign(wrap(client, () => client.close()), { transport });
}

/** A host started in its own process that printed its endpoint line. */
export interface TestHostProcess extends AsyncDisposable {
  /** Its endpoint line. */
  url: string;
  child: Deno.ChildProcess;
}

/** Starts `cli/main.ts --listen listen` (a form with an endpoint line) and reads that line. */
export async function startHost(listen: string, args: string[] = []): Promise<TestHostProcess> {
  const child = new Deno.Command(Deno.execPath(), {
    args: hostArgs(listen, args),
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let line = "";
  while (!line.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the host (--listen ${listen}) ended before its endpoint line`);
    line += value;
  }
  reader.releaseLock();
  return {
    url: line.trim(),
    child,
    async [Symbol.asyncDispose]() {
      child.kill("SIGTERM");
      await child.stdout.cancel().catch(() => {});
      await child.status;
    },
  };
}

/** Connects the SDK's Streamable HTTP client (with a bearer token when given). */
export async function connectHttp(url: string, token?: string): Promise<McpTestClient> {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: "mcp-door-test", version: "1.0.0" });
  await client.connect(transport);
  return wrap(client, async () => {
    await transport.terminateSession().catch(() => {});
    await client.close();
  });
}

/** Runs `code` through `exec`. */
export async function exec(client: Client, code: string): Promise<CallToolResult> {
  return await client.callTool({ name: "exec", arguments: { code } }) as CallToolResult;
}

/** The text blocks of a result, in order. */
export function texts(result: CallToolResult): string[] {
  return result.content.flatMap((block) => block.type === "text" ? [block.text] : []);
}

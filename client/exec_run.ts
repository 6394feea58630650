/**
 * What a `deno task exec` command does on its own (`exec.ts` is the entry and the session keeper):
 * its flags and usage, the provider it runs on, running one cell until it ends and printing it as a
 * model sees it, Ctrl-C, and the exit code.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { parseEndpoint } from "./endpoint.ts";
import { GrpcCodeModeSessionProvider } from "./provider.ts";
import { defaultHostArgs, ProcessOwnedGrpcCodeModeSessionProvider } from "./process_provider.ts";
import { parseExecSource } from "./harness/exec_source.ts";
import { formatRuntimeResponse } from "./harness/format_response.ts";
import type {
  CodeModeSession,
  CodeModeSessionDelegate,
  FunctionCallOutputContentItem,
  RuntimeResponse,
} from "./types.ts";

export const USAGE =
  `usage: deno task exec [--endpoint URL] [--session-file F] [--json] [--yield-time-ms N] [--max-output-tokens N]
                      [--auth-token-file PATH] [--idle-minutes N] [--close] 'SOURCE'   (or SOURCE on stdin)`;

/** A usage error: exit code 2. */
export class UsageError extends Error {}

/** What one command asks for, after parsing. */
export interface Options {
  endpoint?: string;
  sessionFile?: string;
  json: boolean;
  yieldTimeMs?: number;
  maxOutputTokens?: number;
  authToken?: string;
  idleMinutes: number;
  close: boolean;
  source?: string;
}

/** One line of a cell's run, as printed (and as a keeper sends it over its socket). */
export type RunEvent =
  | { response: RuntimeResponse; wallTimeMs: number }
  | { notification: string; cellId: string }
  | { error: string };

function nonNegative(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(value)) {
    throw new UsageError(`${flag} must be a non-negative integer, got \`${text}\``);
  }
  return value;
}

/** Parses the command line; reads SOURCE from stdin when no argument gives it. */
export async function parseOptions(args: string[], keeper = false): Promise<Options> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      strict: true,
      allowPositionals: true,
      options: {
        "endpoint": { type: "string" },
        "session-file": { type: "string" },
        "json": { type: "boolean", default: false },
        "yield-time-ms": { type: "string" },
        "max-output-tokens": { type: "string" },
        "auth-token-file": { type: "string" },
        "idle-minutes": { type: "string" },
        "close": { type: "boolean", default: false },
        "help": { type: "boolean", default: false },
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const v = parsed.values;
  // `deno task` runs in the configuration's folder; paths are the user's, relative to INIT_CWD.
  const cwd = Deno.env.get("INIT_CWD");
  const resolve = (path: string | undefined) =>
    path === undefined || cwd === undefined || path.startsWith("/") ? path : `${cwd}/${path}`;
  v["session-file"] = resolve(v["session-file"]);
  v["auth-token-file"] = resolve(v["auth-token-file"]);
  if (v.help) {
    console.log(USAGE);
    Deno.exit(0);
  }
  if (v.endpoint !== undefined) {
    try {
      parseEndpoint(v.endpoint);
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
  }
  let authToken: string | undefined;
  if (v["auth-token-file"] !== undefined) {
    try {
      authToken = Deno.readTextFileSync(v["auth-token-file"]).trim();
    } catch {
      throw new UsageError(`failed to read --auth-token-file ${v["auth-token-file"]}`);
    }
  }
  const options: Options = {
    endpoint: v.endpoint,
    sessionFile: v["session-file"],
    json: v.json,
    yieldTimeMs: nonNegative("--yield-time-ms", v["yield-time-ms"]),
    maxOutputTokens: nonNegative("--max-output-tokens", v["max-output-tokens"]),
    authToken,
    idleMinutes: nonNegative("--idle-minutes", v["idle-minutes"]) ?? 30,
    close: v.close,
  };
  if (keeper) return options;
  if (options.close) {
    if (options.sessionFile === undefined) throw new UsageError("--close needs --session-file");
    if (parsed.positionals.length > 0) throw new UsageError("--close takes no SOURCE");
    return options;
  }
  if (parsed.positionals.length > 1) {
    throw new UsageError(`expected one SOURCE argument, got ${parsed.positionals.length} (quote the source)`);
  }
  let source = parsed.positionals[0];
  if (source === undefined || source === "-") {
    if (Deno.stdin.isTerminal()) throw new UsageError("no SOURCE: pass it as an argument or on stdin");
    source = await new Response(Deno.stdin.readable).text();
  }
  // SOURCE is what a model sends to its `exec` tool: an optional `// @exec:` pragma line, then code.
  const cell = parseExecSource(source);
  if (typeof cell === "string") throw new UsageError(cell);
  options.source = cell.code;
  options.yieldTimeMs ??= cell.yieldTimeMs;
  options.maxOutputTokens ??= cell.maxOutputTokens;
  return options;
}

/** The provider for `options`: the endpoint's, or a private host spawned over its pipes. */
export function providerFor(
  options: Options,
  quiet = false,
): GrpcCodeModeSessionProvider | ProcessOwnedGrpcCodeModeSessionProvider {
  if (options.endpoint !== undefined) {
    return new GrpcCodeModeSessionProvider(options.endpoint, { authToken: options.authToken });
  }
  return new ProcessOwnedGrpcCodeModeSessionProvider({
    args: defaultHostArgs("--warm-sessions", "0", "--log-level", "warn"),
    authToken: options.authToken,
    // A keeper's stderr leads nowhere once its starting command has gone.
    stderr: quiet ? "null" : "inherit",
  });
}

/**
 * Runs one cell on `session` and reports every observation (a yielded one is followed by a wait)
 * and every notification to `emit`. Aborting `signal` terminates the cell.
 */
export async function runCell(
  session: CodeModeSession,
  options: Pick<Options, "yieldTimeMs" | "maxOutputTokens"> & { source: string },
  emit: (event: RunEvent) => void,
  signal: AbortSignal,
): Promise<RuntimeResponse> {
  const delegate: CodeModeSessionDelegate = {
    invokeTool: () => Promise.reject(new Error("code mode nested tools are unavailable")),
    notify(_callId, cellId, text) {
      emit({ notification: text, cellId });
      return Promise.resolve();
    },
    cellClosed() {},
  };
  let started = performance.now();
  const cell = await session.execute({
    toolCallId: "exec-1",
    enabledTools: [],
    source: options.source,
    yieldTimeMs: options.yieldTimeMs,
    maxOutputTokens: options.maxOutputTokens,
  }, delegate);
  const stopped = Promise.withResolvers<"stop">();
  const onAbort = () => stopped.resolve("stop");
  signal.addEventListener("abort", onAbort, { once: true });
  if (signal.aborted) onAbort();
  try {
    let pending: Promise<RuntimeResponse> = cell.initialResponse();
    let first = true;
    for (;;) {
      // The race handles `pending`'s failure too when the stop wins it (the cell is terminated).
      const next = await Promise.race([pending, stopped.promise]);
      const response = next === "stop" ? (await session.terminate(cell.cellId)).response : next;
      // A yielded window with nothing in it is shown only once, the first time.
      if (response.type !== "yielded" || response.contentItems.length > 0 || first) {
        emit({ response, wallTimeMs: performance.now() - started });
      }
      if (response.type !== "yielded") return response;
      first = false;
      started = performance.now();
      pending = session.wait({ cellId: cell.cellId, yieldTimeMs: options.yieldTimeMs ?? 10_000 })
        .then((outcome) => outcome.response);
    }
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

/** Prints one event: an observation as a model sees it (or as JSON), a notification on stderr. */
export function printer(json: boolean): (event: RunEvent) => void {
  return (event) => {
    if ("notification" in event) {
      console.error(`[notification from cell ${event.cellId}] ${event.notification}`);
    } else if ("error" in event) {
      console.error(`exec: ${event.error}`);
    } else if (json) {
      console.log(JSON.stringify(event.response));
    } else {
      // The host has applied the Server-mode pipeline; the kit adds the header (SPEC §11.5).
      const { contentItems } = formatRuntimeResponse(event.response, {
        outputTruncation: "server",
        wallTimeMs: event.wallTimeMs,
      });
      const lines = contentItems.map(describe);
      lines[0] = lines[0].replace(/\n$/, ""); // the header ends `Output:\n`
      console.log(lines.join("\n"));
    }
  };
}

/** A content item as text for a terminal: texts as they are, media as a short description. */
function describe(item: FunctionCallOutputContentItem): string {
  if (item.type === "input_text") return item.text;
  const url = item.type === "input_image" ? item.image_url : item.audio_url;
  const detail = item.type === "input_image" ? `, detail ${item.detail}` : "";
  return `[${item.type} ${url.slice(0, 48)}… (${url.length} characters)${detail}]`;
}

export function exitCodeOf(response: RuntimeResponse): number {
  return response.type === "result" && response.errorText === undefined ? 0 : 1;
}

/**
 * An AbortSignal that aborts on the first SIGINT or SIGTERM (the cell is then terminated); a second
 * one exits at once (130). Dispose to stop listening.
 */
export function interrupted(): AbortController & Disposable {
  const controller = new AbortController();
  const onSignal = () => controller.signal.aborted ? Deno.exit(130) : controller.abort();
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  return Object.assign(controller, {
    [Symbol.dispose]() {
      Deno.removeSignalListener("SIGINT", onSignal);
      Deno.removeSignalListener("SIGTERM", onSignal);
    },
  });
}

/** One command without a session file: a session of its own, closed at the end. */
export async function runOnce(options: Options & { source: string }): Promise<number> {
  const emit = printer(options.json);
  const provider = providerFor(options);
  using stop = interrupted();
  try {
    await using session = await provider.createSession({ outputTruncation: "server" });
    return exitCodeOf(await runCell(session, options, emit, stop.signal));
  } catch (error) {
    emit({ error: (error as Error).message });
    return 1;
  } finally {
    await dispose(provider);
  }
}

/** Ends a provider that owns a host process (the endpoint's provider owns nothing to end). */
export async function dispose(provider: ReturnType<typeof providerFor>): Promise<void> {
  if (provider instanceof ProcessOwnedGrpcCodeModeSessionProvider) await provider[Symbol.asyncDispose]();
}

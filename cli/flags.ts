/**
 * The host's command line, read without side effects: {@link parseHostFlags} turns the arguments
 * into a {@link HostConfig}, a text to print (`--help`, `--version`) or a {@link UsageError}: the
 * exact message the host logs before it exits 2.
 *
 * - The checks run in one fixed order and the first that fails is the one reported (SPEC §9.1's
 *   messages for `--listen`).
 * - The files a flag names (`--tls-cert`, `--tls-key`, `--auth-token-file`) are read through the
 *   given {@link FlagFiles}, in that same order: the parser itself does no I/O and never exits.
 *   `--mcp-config` is only resolved here; the MCP door reads it (`cli/doors.ts`).
 * - A relative path means the file in the directory the user ran the command from
 *   ({@link FlagFiles.base}), which `deno task` does not make the working directory.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { isAbsolute, join } from "node:path";
import type { LogLevel } from "../host/ops/log.ts";
import type { Isolation } from "../host/assemble.ts";
import { ListenError, type ListenTarget, parseListenUrl, parseMetricsListen } from "../host/listen_url.ts";
import denoConfig from "../deno.json" with { type: "json" };

/** The `--help` text. */
export const HELP =
  `code-mode-host ${denoConfig.version}: a sandbox host for code-mode cells (Codex's CodeModeHost gRPC protocol)

Usage: deno task serve [FLAGS]     (or the compiled executable with the same flags)

Relative paths are resolved against the directory the command was run from.

  --listen URL                 transport (default grpc://127.0.0.1:50051):
                                 grpc://IP:PORT   gRPC over TCP (IPv6 in brackets; port 0 picks one)
                                 unix:PATH        gRPC on a Unix socket (mode 0600)
                                 grpc+stdio://    gRPC over one HTTP/2 connection on stdin/stdout
                                 stdio, stdio://  Codex's JSON host V1 on stdin/stdout
                                 mcp+stdio        an MCP server (tools exec and wait) on stdin/stdout
                                 mcp+http://IP:PORT  the same over MCP Streamable HTTP at /mcp
  --mcp-config FILE            MCP servers whose tools cells may call (mcp+ forms only):
                                 {"mcpServers": {NAME: {command, args, env} | {url, headers}}}
  --allow-non-loopback         permit a grpc://, mcp+http:// or --metrics-listen address outside loopback
  --tls-cert PATH              serve TLS with this PEM certificate chain (with --tls-key)
  --tls-key PATH               the PEM private key of --tls-cert
  --auth-token-file PATH       require "authorization: Bearer <file content>" on every RPC
  --isolation MODE             subprocess (default) or in-process (not for untrusted code)
  --deno PATH                  Deno binary for session runtimes (a compiled host spawns itself)
  --os-sandbox MODE            auto (default), bwrap or off: bubblewrap around each runtime
  --worker-prefix JSON         JSON array of strings placed before the runtime's argv
  --warm-sessions N            pre-spawned idle session runtimes (default 2; 0 disables)
  --route-token TOKEN          x-code-mode-route sent on OpenSession
  --limit NAME=VALUE           override a limit (repeatable); with mcp+http, also
                                 mcpSessionIdleTimeoutMs (default 1800000, 0 = off)
  --log-level LEVEL            debug, info, warn or error (default info; warn with --listen stdio);
                               JSON lines on stderr
  --metrics-listen IP:PORT     serve GET /metrics (Prometheus), /healthz and /readyz over HTTP/1.1
                                 (no token; port 0 picks one; logged as "metrics listening on …")
  --otel-trace-exporter URL    export trace spans as OTLP/HTTP JSON to URL (a path of / becomes
                                 /v1/traces), service name code-mode-host
  --no-exit-with-parent        keep running when the process that started the host ends
  --help                       print this help and exit
  --version                    print the version and exit
`;

/** Where the parser reads the files the flags name, and what relative paths are relative to. */
export interface FlagFiles {
  /** The directory the user ran the command from. */
  base: string;
  /** The process's working directory (a relative path stays relative when it equals `base`). */
  cwd: string;
  /** A file's text, or `undefined` when it cannot be read. */
  readTextFile(path: string): string | undefined;
}

/** What the engine of every door takes from the flags (the logger is the caller's). */
export interface HostEngineFlags {
  limits: Record<string, number>;
  isolation: Isolation;
  /** `--deno`: a path with a slash resolved, a bare name left for PATH. */
  deno: string | undefined;
  /** `--metrics-listen` as `IP:PORT` (IPv6 in brackets). */
  metricsListen: string | undefined;
  otelTraceExporter: string | undefined;
  workerPrefix: string[] | undefined;
  osSandbox: "auto" | "bwrap" | "off";
  warmSessions: number | undefined;
}

/** A command line that starts a host. */
export interface HostConfig {
  kind: "serve";
  /** The door; a `unix:` path is resolved. */
  listen: ListenTarget;
  logLevel: LogLevel;
  engine: HostEngineFlags;
  routeToken: string | undefined;
  /** The content of `--auth-token-file`, trimmed. */
  authToken: string | undefined;
  /** The contents of `--tls-cert` and `--tls-key`, checked to be a matching pair. */
  tls: { cert: string; key: string } | undefined;
  /** `--mcp-config`, resolved (read by the MCP door). */
  mcpConfig: string | undefined;
  /** `--limit mcpSessionIdleTimeoutMs` with `mcp+http` (not an engine limit). */
  mcpSessionIdleTimeoutMs: number | undefined;
  exitWithParent: boolean;
}

/** `--help` or `--version`: print `text` on stdout and exit 0. */
export interface PrintAndExit {
  kind: "print";
  text: string;
}

/** A command line the host refuses: `message` is logged as an `error` line, then it exits 2. */
export interface UsageError {
  kind: "usage";
  message: string;
}

const LEVELS = ["debug", "info", "warn", "error"];

/** Flags that take a value, so that `--warm-sessions -1` is read as a (refused) number, not a flag. */
const VALUE_FLAGS = new Set(["--warm-sessions", "--limit"]);

/** Joins `--flag -1` into `--flag=-1` for the flags whose value may look negative. */
function joinNegativeValues(args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (VALUE_FLAGS.has(args[i]) && /^-\d/.test(args[i + 1] ?? "")) out.push(`${args[i]}=${args[++i]}`);
    else out.push(args[i]);
  }
  return out;
}

/** Thrown inside the parser only; {@link parseHostFlags} returns it as a {@link UsageError}. */
class Refusal {
  constructor(readonly message: string) {}
}

function refuse(message: string): never {
  throw new Refusal(message);
}

function readOptions(args: string[]) {
  try {
    return parseArgs({
      args: joinNegativeValues(args),
      strict: true,
      options: {
        "listen": { type: "string", default: "grpc://127.0.0.1:50051" },
        "allow-non-loopback": { type: "boolean", default: false },
        "tls-cert": { type: "string" },
        "tls-key": { type: "string" },
        "auth-token-file": { type: "string" },
        "mcp-config": { type: "string" },
        "isolation": { type: "string", default: "subprocess" },
        "deno": { type: "string" },
        "worker-prefix": { type: "string" },
        "os-sandbox": { type: "string", default: "auto" },
        "warm-sessions": { type: "string" },
        "route-token": { type: "string" },
        "limit": { type: "string", multiple: true, default: [] },
        "log-level": { type: "string" },
        "metrics-listen": { type: "string" },
        "otel-trace-exporter": { type: "string" },
        "help": { type: "boolean", default: false },
        "version": { type: "boolean", default: false },
        "exit-with-parent": { type: "boolean", default: true },
      },
      allowNegative: true,
    }).values;
  } catch (error) {
    return refuse((error as Error).message);
  }
}

type Options = ReturnType<typeof readOptions>;

/**
 * Parses the host's arguments (`Deno.args` without the self-spawn marker).
 *
 * @param args the arguments
 * @param files where the named files are read and what relative paths are relative to
 * @returns the configuration, the `--help`/`--version` text, or the usage error
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseHostFlags } from "./flags.ts";
 *
 * const files = { base: "/w", cwd: "/w", readTextFile: () => undefined };
 * const config = await parseHostFlags(["--listen", "stdio"], files);
 * assert.equal(config.kind === "serve" && config.logLevel, "warn");
 * assert.deepEqual(await parseHostFlags(["--isolation", "x"], files), {
 *   kind: "usage",
 *   message: "--isolation `x` is not supported by this build",
 * });
 * ```
 */
export async function parseHostFlags(
  args: string[],
  files: FlagFiles,
): Promise<HostConfig | PrintAndExit | UsageError> {
  try {
    return await readConfig(args, files);
  } catch (error) {
    if (error instanceof Refusal) return { kind: "usage", message: error.message };
    throw error;
  }
}

async function readConfig(args: string[], files: FlagFiles): Promise<HostConfig | PrintAndExit> {
  const v = readOptions(args);
  if (v.help) return { kind: "print", text: HELP };
  if (v.version) return { kind: "print", text: `code-mode-host ${denoConfig.version}\n` };
  // A relative path means the same file wherever the host runs (unchanged when run from there).
  const resolve = (path: string) =>
    isAbsolute(path) || files.base === files.cwd ? path : join(files.base, path);
  // JSON host V1 (Codex's launch) logs only warnings by default: Codex's own host writes nothing to
  // stderr unless something goes wrong.
  const v1 = v.listen === "stdio" || v.listen === "stdio://";
  const logLevel = v["log-level"] ?? (v1 ? "warn" : "info");
  if (!LEVELS.includes(logLevel)) refuse(`invalid --log-level \`${logLevel}\``);
  let listen = listenTarget(v);
  if (listen.kind === "unix") listen = { kind: "unix", path: resolve(listen.path) };
  const metricsListen = metricsAddress(v);
  const otelTraceExporter = v["otel-trace-exporter"];
  if (otelTraceExporter !== undefined && !/^https?:$/.test(URL.parse(otelTraceExporter)?.protocol ?? "")) {
    refuse(`invalid --otel-trace-exporter URL \`${otelTraceExporter}\`; expected http://HOST:PORT/PATH`);
  }
  const tls = await readTls(v, listen, files, resolve);
  const authToken = readAuthToken(v, files, resolve);
  const engine = engineFlags(v, resolve, metricsListen, otelTraceExporter);
  // Not an engine limit: the MCP HTTP listener's idle bound on its sessions.
  const mcpSessionIdleTimeoutMs = listen.kind === "mcp-http"
    ? engine.limits.mcpSessionIdleTimeoutMs
    : undefined;
  if (listen.kind === "mcp-http") delete engine.limits.mcpSessionIdleTimeoutMs;
  const mcp = listen.kind === "mcp-stdio" || listen.kind === "mcp-http";
  if (v["mcp-config"] !== undefined && !mcp) refuse("--mcp-config needs an mcp+ --listen form");
  if (mcp && tls !== undefined) refuse("--tls-cert is not supported with the MCP --listen forms");
  return {
    kind: "serve",
    listen,
    logLevel: logLevel as LogLevel,
    engine,
    routeToken: v["route-token"],
    authToken,
    tls,
    mcpConfig: v["mcp-config"] === undefined ? undefined : resolve(v["mcp-config"]),
    mcpSessionIdleTimeoutMs,
    exitWithParent: v["exit-with-parent"],
  };
}

function listenTarget(v: Options): ListenTarget {
  try {
    return parseListenUrl(v.listen, v["allow-non-loopback"]);
  } catch (error) {
    if (error instanceof ListenError) refuse(error.message);
    throw error;
  }
}

function metricsAddress(v: Options): string | undefined {
  if (v["metrics-listen"] === undefined) return undefined;
  try {
    return parseMetricsListen(v["metrics-listen"], v["allow-non-loopback"]).address;
  } catch (error) {
    if (error instanceof ListenError) refuse(error.message);
    throw error;
  }
}

/** The TLS pair: refused beside a door that cannot serve it, read, and checked to match. */
async function readTls(
  v: Options,
  listen: ListenTarget,
  files: FlagFiles,
  resolve: (path: string) => string,
): Promise<{ cert: string; key: string } | undefined> {
  const certPath = v["tls-cert"];
  const keyPath = v["tls-key"];
  if (listen.kind === "stdio" && certPath !== undefined) {
    refuse("--tls-cert is not supported with --listen stdio");
  }
  if (listen.kind === "grpc-stdio" && certPath !== undefined) {
    refuse("--tls-cert is not supported with --listen grpc+stdio://");
  }
  if (listen.kind === "unix" && certPath !== undefined) {
    refuse("--tls-cert is not supported with --listen unix:PATH");
  }
  if ((certPath === undefined) !== (keyPath === undefined)) {
    refuse("--tls-cert and --tls-key must be given together");
  }
  if (certPath === undefined || keyPath === undefined) return undefined;
  const tls = {
    cert: read(files, resolve, "--tls-cert", certPath),
    key: read(files, resolve, "--tls-key", keyPath),
  };
  // Loaded only when TLS is asked for (node:crypto).
  const { checkTlsPem, TlsPemError } = await import("../host/doors/grpc/tls_terminator.ts");
  try {
    checkTlsPem(tls.cert, tls.key);
  } catch (error) {
    if (!(error instanceof TlsPemError)) throw error;
    refuse(
      error.part === "certificate"
        ? `invalid TLS certificate ${certPath}: ${error.detail}`
        : error.part === "key"
        ? `invalid TLS key ${keyPath}: ${error.detail}`
        : `invalid TLS key ${keyPath}: it does not match the certificate ${certPath}`,
    );
  }
  return tls;
}

function read(files: FlagFiles, resolve: (path: string) => string, flag: string, path: string): string {
  return files.readTextFile(resolve(path)) ?? refuse(`failed to read ${flag} ${path}`);
}

function readAuthToken(v: Options, files: FlagFiles, resolve: (path: string) => string): string | undefined {
  const path = v["auth-token-file"];
  if (path === undefined) return undefined;
  const token = read(files, resolve, "--auth-token-file", path).trim();
  if (token === "") refuse(`failed to read --auth-token-file ${path}`);
  return token;
}

function engineFlags(
  v: Options,
  resolve: (path: string) => string,
  metricsListen: string | undefined,
  otelTraceExporter: string | undefined,
): HostEngineFlags {
  if (v.isolation !== "subprocess" && v.isolation !== "in-process") {
    refuse(`--isolation \`${v.isolation}\` is not supported by this build`);
  }
  let workerPrefix: string[] | undefined;
  if (v["worker-prefix"] !== undefined) {
    try {
      workerPrefix = JSON.parse(v["worker-prefix"]);
      if (!Array.isArray(workerPrefix) || !workerPrefix.every((p) => typeof p === "string")) {
        throw new Error();
      }
    } catch {
      refuse("--worker-prefix must be a JSON array of strings");
    }
  }
  const osSandbox = v["os-sandbox"];
  if (osSandbox !== "auto" && osSandbox !== "bwrap" && osSandbox !== "off") {
    refuse(`invalid --os-sandbox \`${osSandbox}\`; expected auto, bwrap or off`);
  }
  let warmSessions: number | undefined;
  if (v["warm-sessions"] !== undefined) {
    warmSessions = Number(v["warm-sessions"]);
    if (!Number.isSafeInteger(warmSessions) || warmSessions < 0) {
      refuse("--warm-sessions must be a non-negative integer");
    }
  }
  const limits: Record<string, number> = {};
  for (const text of v.limit) {
    const at = text.indexOf("=");
    const value = Number(text.slice(at + 1));
    if (at <= 0 || !Number.isSafeInteger(value) || value < 0) refuse(`invalid --limit \`${text}\``);
    limits[text.slice(0, at)] = value;
  }
  return {
    limits,
    isolation: v.isolation,
    // A bare name is looked up on PATH; a path with a slash is the user's.
    deno: v.deno === undefined ? undefined : v.deno.includes("/") ? resolve(v.deno) : v.deno,
    metricsListen,
    otelTraceExporter,
    workerPrefix,
    osSandbox,
    warmSessions,
  };
}

/**
 * CLI entry of the host (`deno task serve`, or the compiled executable): the only place for
 * argument parsing, signals, stdout and process exit (SPEC §9.1, §9.7).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { ListenError, parseListenUrl, parseMetricsListen } from "./listen_url.ts";
import { isAbsolute, join } from "node:path";
import { Logger, type LogLevel } from "./ops/log.ts";
import { createHost } from "./doors/grpc/server.ts";
import { checkTlsPem, TlsPemError } from "./doors/grpc/tls_terminator.ts";
import { serveV1Stdio } from "./doors/v1/mod.ts";
import { McpConfigError, readMcpConfig, serveMcpHttp, serveMcpStdio } from "../mcp/mod.ts";
import { runSelfSpawnedRuntime, SELF_RUNTIME_ARG } from "./runtime/self_runtime.ts";
import denoConfig from "../deno.json" with { type: "json" };

const HELP =
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

const LEVELS = ["debug", "info", "warn", "error"];

function fail(log: Logger, message: string, code: number): never {
  log.error(message);
  Deno.exit(code);
}

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

/**
 * The directory the user ran the command from: `deno task` runs the host in the directory of
 * deno.json and passes the caller's directory as `INIT_CWD`.
 */
function userDirectory(): string {
  const cwd = Deno.cwd();
  const init = Deno.env.get("INIT_CWD");
  if (init === undefined || !isAbsolute(init)) return cwd;
  try {
    return Deno.statSync(init).isDirectory ? init : cwd;
  } catch {
    return cwd;
  }
}

async function main(args: string[]): Promise<void> {
  const base = userDirectory();
  // A relative path means the same file wherever the host runs (unchanged when run from there).
  const resolve = (path: string) => isAbsolute(path) || base === Deno.cwd() ? path : join(base, path);
  let parsed;
  try {
    parsed = parseArgs({
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
    });
  } catch (error) {
    fail(new Logger(), (error as Error).message, 2);
  }
  const v = parsed.values;
  if (v.help) {
    await Deno.stdout.write(new TextEncoder().encode(HELP));
    return;
  }
  if (v.version) {
    await Deno.stdout.write(new TextEncoder().encode(`code-mode-host ${denoConfig.version}\n`));
    return;
  }
  // JSON host V1 (Codex's launch) logs only warnings by default: Codex's own host writes nothing to
  // stderr unless something goes wrong.
  const v1 = v.listen === "stdio" || v.listen === "stdio://";
  const level = (v["log-level"] ?? (v1 ? "warn" : "info")) as string;
  if (!LEVELS.includes(level)) fail(new Logger(), `invalid --log-level \`${level}\``, 2);
  const log = new Logger(level as LogLevel);

  let listen;
  let metricsListen: string | undefined;
  try {
    listen = parseListenUrl(v.listen as string, v["allow-non-loopback"] as boolean);
    if (listen.kind === "unix") listen = { kind: "unix", path: resolve(listen.path) };
    if (v["metrics-listen"] !== undefined) {
      metricsListen = parseMetricsListen(v["metrics-listen"], v["allow-non-loopback"] as boolean).address;
    }
  } catch (error) {
    if (error instanceof ListenError) fail(log, error.message, 2);
    throw error;
  }
  const otelTraceExporter = v["otel-trace-exporter"];
  if (otelTraceExporter !== undefined && !URL.canParse(otelTraceExporter)) {
    fail(
      log,
      `invalid --otel-trace-exporter URL \`${otelTraceExporter}\`; expected http://HOST:PORT/PATH`,
      2,
    );
  }
  if (otelTraceExporter !== undefined && !/^https?:$/.test(new URL(otelTraceExporter).protocol)) {
    fail(
      log,
      `invalid --otel-trace-exporter URL \`${otelTraceExporter}\`; expected http://HOST:PORT/PATH`,
      2,
    );
  }
  if (listen.kind === "stdio" && v["tls-cert"] !== undefined) {
    fail(log, "--tls-cert is not supported with --listen stdio", 2);
  }
  const stdio = listen.kind === "grpc-stdio";
  if (stdio && v["tls-cert"] !== undefined) {
    fail(log, "--tls-cert is not supported with --listen grpc+stdio://", 2);
  }
  if (listen.kind === "unix" && v["tls-cert"] !== undefined) {
    fail(log, "--tls-cert is not supported with --listen unix:PATH", 2);
  }
  if ((v["tls-cert"] === undefined) !== (v["tls-key"] === undefined)) {
    fail(log, "--tls-cert and --tls-key must be given together", 2);
  }
  const read = (flag: string, path: string) => {
    try {
      return Deno.readTextFileSync(resolve(path));
    } catch {
      return fail(log, `failed to read ${flag} ${path}`, 2);
    }
  };
  let tls: { cert: string; key: string } | undefined;
  if (v["tls-cert"] !== undefined) {
    const certPath = v["tls-cert"] as string;
    const keyPath = v["tls-key"] as string;
    tls = { cert: read("--tls-cert", certPath), key: read("--tls-key", keyPath) };
    try {
      checkTlsPem(tls.cert, tls.key);
    } catch (error) {
      if (!(error instanceof TlsPemError)) throw error;
      fail(
        log,
        error.part === "certificate"
          ? `invalid TLS certificate ${certPath}: ${error.detail}`
          : error.part === "key"
          ? `invalid TLS key ${keyPath}: ${error.detail}`
          : `invalid TLS key ${keyPath}: it does not match the certificate ${certPath}`,
        2,
      );
    }
  }
  let authToken: string | undefined;
  if (v["auth-token-file"] !== undefined) {
    const path = v["auth-token-file"] as string;
    authToken = read("--auth-token-file", path).trim();
    if (authToken === "") fail(log, `failed to read --auth-token-file ${path}`, 2);
  }
  if (v.isolation !== "subprocess" && v.isolation !== "in-process") {
    fail(log, `--isolation \`${v.isolation}\` is not supported by this build`, 2);
  }
  const isolation = v.isolation as "subprocess" | "in-process";
  let prefix: string[] | undefined;
  if (v["worker-prefix"] !== undefined) {
    try {
      prefix = JSON.parse(v["worker-prefix"] as string);
      if (!Array.isArray(prefix) || !prefix.every((p) => typeof p === "string")) throw new Error();
    } catch {
      fail(log, "--worker-prefix must be a JSON array of strings", 2);
    }
  }
  const osSandbox = v["os-sandbox"] as "auto" | "bwrap" | "off";
  if (osSandbox !== "auto" && osSandbox !== "bwrap" && osSandbox !== "off") {
    fail(log, `invalid --os-sandbox \`${osSandbox}\`; expected auto, bwrap or off`, 2);
  }
  let warmSessions: number | undefined;
  if (v["warm-sessions"] !== undefined) {
    warmSessions = Number(v["warm-sessions"]);
    if (!Number.isSafeInteger(warmSessions) || warmSessions < 0) {
      fail(log, "--warm-sessions must be a non-negative integer", 2);
    }
  }
  const limitArgs = v.limit as string[];
  const limits: Record<string, number> = {};
  for (const text of limitArgs) {
    const at = text.indexOf("=");
    const value = Number(text.slice(at + 1));
    if (at <= 0 || !Number.isSafeInteger(value) || value < 0) fail(log, `invalid --limit \`${text}\``, 2);
    limits[text.slice(0, at)] = value;
  }
  // Not an engine limit: the MCP HTTP listener's idle bound on its sessions.
  const mcpSessionIdleTimeoutMs = listen.kind === "mcp-http" ? limits.mcpSessionIdleTimeoutMs : undefined;
  if (listen.kind === "mcp-http") delete limits.mcpSessionIdleTimeoutMs;

  // A bare name is looked up on PATH; a path with a slash is the user's.
  const denoPath = v.deno === undefined ? undefined : v.deno.includes("/") ? resolve(v.deno) : v.deno;

  // What every front door's engine takes.
  const engineOptions = {
    limits,
    isolation,
    deno: denoPath,
    metricsListen,
    otelTraceExporter,
    workerPrefix: prefix,
    osSandbox,
    warmSessions,
    log,
  };
  const mcp = listen.kind === "mcp-stdio" || listen.kind === "mcp-http";
  if (v["mcp-config"] !== undefined && !mcp) fail(log, "--mcp-config needs an mcp+ --listen form", 2);
  if (mcp) {
    // The MCP front door (stdio: stdout carries only MCP messages; HTTP: one endpoint line).
    if (v["tls-cert"] !== undefined) fail(log, "--tls-cert is not supported with the MCP --listen forms", 2);
    let mcpServers;
    try {
      mcpServers = v["mcp-config"] === undefined
        ? undefined
        : await readMcpConfig(resolve(v["mcp-config"] as string));
    } catch (error) {
      if (error instanceof McpConfigError) fail(log, error.message, 2);
      throw error;
    }
    const options = { ...engineOptions, mcpServers };
    if (listen.kind === "mcp-stdio") {
      if (authToken !== undefined) fail(log, "--auth-token-file is not supported with --listen mcp+stdio", 2);
      Deno.exit(await serveMcpStdio(options).catch((error) => fail(log, (error as Error).message, 1)));
    }
    const http = listen as { ip: string; port: number; loopback: boolean };
    const served = await serveMcpHttp({
      ...options,
      hostname: http.ip,
      port: http.port,
      loopback: http.loopback,
      authToken,
      ...(mcpSessionIdleTimeoutMs === undefined ? {} : { sessionIdleTimeoutMs: mcpSessionIdleTimeoutMs }),
    })
      .catch((error) => fail(log, (error as Error).message, 1));
    await Deno.stdout.write(new TextEncoder().encode(served.url + "\n"));
    log.info(`code-mode-host listening on ${served.url}`);
    const stop = () => void served.shutdown().then(() => Deno.exit(0), () => Deno.exit(1));
    Deno.addSignalListener("SIGINT", stop);
    Deno.addSignalListener("SIGTERM", stop);
    if (v["exit-with-parent"]) watchParent(stop);
    return;
  }

  if (listen.kind === "stdio") {
    // JSON host V1 on stdin/stdout (SPEC §9.10): stdout carries only frames.
    Deno.exit(
      await serveV1Stdio(engineOptions).catch((error) => {
        const message = (error as Error).message;
        return fail(log, message, message.startsWith("failed to bind") ? 1 : 2);
      }),
    );
  }

  let host;
  try {
    host = await createHost({
      listen: listen.kind === "grpc"
        ? listen.bind
        : listen.kind === "unix"
        ? `unix:${listen.path}`
        : undefined,
      connection: stdio ? { readable: Deno.stdin.readable, writable: Deno.stdout.writable } : undefined,
      ...engineOptions,
      routeToken: v["route-token"] as string | undefined,
      authToken,
      tls,
    });
  } catch (error) {
    if (error instanceof RangeError) fail(log, error.message, 2);
    fail(log, (error as Error).message, 1);
  }
  if (stdio) {
    // stdout carries only HTTP/2 bytes; the connection's end (stdin EOF) stops the host.
    log.info(`code-mode-host listening on ${host.url}`);
    void host.ended.then(() => host.shutdown()).then(() => Deno.exit(0), () => Deno.exit(0));
  } else {
    await Deno.stdout.write(new TextEncoder().encode(host.url + "\n"));
    log.info(`code-mode-host listening on ${host.url}`);
  }

  let signals = 0;
  const onSignal = () => {
    signals++;
    if (signals === 1) {
      void host.shutdown().then(() => Deno.exit(0), () => Deno.exit(0));
    } else {
      void host.kill().finally(() => Deno.exit(1));
    }
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  if (v["exit-with-parent"]) {
    watchParent(() => {
      log.warn("code-mode-host parent process ended; shutting down");
      onSignal();
    });
  }
}

/** How often the host looks whether the process that started it is still there. */
const PARENT_POLL_MS = 250;

/**
 * Calls `onGone` once when this process's parent ends (it is then re-parented: `Deno.ppid`
 * changes). A supervisor that kills `deno task serve`, which runs the host as its child, would
 * otherwise leave the host and its runtimes running. `--no-exit-with-parent` turns it off (a host
 * started in the background by a script that then exits).
 */
function watchParent(onGone: () => void): void {
  const parent = Deno.ppid;
  const timer = setInterval(() => {
    if (Deno.ppid === parent) return;
    clearInterval(timer);
    onGone();
  }, PARENT_POLL_MS);
  Deno.unrefTimer(timer);
}

if (import.meta.main) {
  // A compiled executable spawns itself as the session runtime (SPEC §9.9); only the host passes this.
  if (Deno.args[0] === SELF_RUNTIME_ARG) await runSelfSpawnedRuntime(Deno.args.slice(1));
  else await main(Deno.args);
}

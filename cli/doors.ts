/**
 * The doors the command line can open, one start function per `--listen` form ({@link DOORS}), as
 * the reference host's `transport.rs` has one per transport. Each loads what only it needs when it
 * starts ({@link DOOR_MODULES}): `--version`, `--help` and a usage error load no door, and the gRPC
 * and JSON V1 doors never load the MCP SDK.
 *
 * | `--listen`           | door              | endpoint                                    | stop (`drain.ts`) |
 * | -------------------- | ----------------- | ------------------------------------------- | ----------------- |
 * | `grpc://IP:PORT`     | gRPC over TCP     | stdout line, `listening` log                | two-stage         |
 * | `unix:PATH`          | gRPC on a socket  | stdout line, `listening` log                | two-stage         |
 * | `grpc+stdio://`      | gRPC on stdio     | `listening` log; stdin EOF ends it (exit 0) | two-stage         |
 * | `stdio`, `stdio://`  | JSON host V1      | none; stdin EOF ends it                     | none              |
 * | `mcp+stdio`          | MCP on stdio      | none; stdin EOF ends it                     | none              |
 * | `mcp+http://IP:PORT` | MCP over HTTP     | stdout line, `listening` log                | one-stage         |
 *
 * A door that cannot start throws a {@link StartFailure} with the message to log and the exit
 * code: 2 for what the user must change (an invalid `--limit`, an `--mcp-config` that cannot be
 * used), 1 for what failed (a port in use).
 *
 * @module
 */
import type { Logger } from "../host/ops/log.ts";
import type { ListenTarget } from "../host/listen_url.ts";
import type { HostConfig, HostEngineFlags } from "./flags.ts";
import type { Drainable } from "./drain.ts";

/**
 * The modules the doors load when they start, by computed specifiers: Deno loads the module graph of
 * a string literal's `import()` together with its importer's, before `main` runs, so literal ones
 * made every start read every door's graph (MCP SDK and zod included; ~15 ms of the main thread).
 * `deno task compile` embeds each with `--include` (`tests/standalone_test.ts` checks the list).
 */
export const DOOR_MODULES = {
  assemble: "host/assemble.ts",
  grpc: "host/doors/grpc/server.ts",
  v1: "host/doors/v1/mod.ts",
  mcp: "mcp/mod.ts",
} as const;

/** Loads one of {@link DOOR_MODULES} (a path from the repository's root). */
function load<T>(path: string): Promise<T> {
  return import(new URL(`../${path}`, import.meta.url).href);
}

/** A door that refused to start or failed: `message` is logged as an `error` line, then the process exits. */
export class StartFailure extends Error {
  override name = "StartFailure";
  /**
   * @param message the log line
   * @param exitCode the process's exit code
   */
  constructor(message: string, readonly exitCode: number) {
    super(message);
  }
}

/** A started door. */
export interface Door extends Drainable {
  /** Logged as `code-mode-host listening on {url}`; none for the stdio doors of V1 and MCP. */
  url: string | undefined;
  /** Whether `url` is also printed as the one line on stdout (not where stdout carries the protocol). */
  printsUrl: boolean;
}

/** Starts a door from the parsed flags. */
export type DoorStart = (config: HostConfig, log: Logger) => Promise<Door>;

/** A listener ends only when it is stopped. */
const NEVER = new Promise<number>(() => {});

/**
 * The engine's options. A runtime serves the sessions of one client in turn (`runtimeHandover=1`)
 * unless set: behind a stdio door every session is the launching process's (Codex, or its
 * app-server); behind the gRPC listener a client is a connection. Not behind a router
 * (`--route-token`: a proxy such as nginx pools its upstream connections, so one connection carries
 * many clients' calls) nor behind `mcp+http` (its sessions reach the host through one provider).
 */
function engineOptions(config: HostConfig, log: Logger): HostEngineFlags & { log: Logger } {
  const engine = config.engine;
  return { ...engine, limits: { ...engine.limits, runtimeHandover: runtimeHandover(config) }, log };
}

/** The `runtimeHandover` a door runs with: `--limit runtimeHandover`, else its default (above). */
export function runtimeHandover(config: HostConfig): number {
  const set = config.engine.limits.runtimeHandover;
  if (set !== undefined) return set;
  return config.routeToken !== undefined || config.listen.kind === "mcp-http" ? 0 : 1;
}

/** The message of a failure, as the log line gives it. */
function messageOf(error: unknown): string {
  return (error as Error).message;
}

/**
 * The door's host, assembled before the door's own modules load: its warm runtimes start (a
 * process each, ~100 ms until its first cell worker has booted) while the gRPC or JSON V1 stack
 * loads and evaluates (~150 ms of this process's thread), so that the first cell of a cold start
 * finds its runtime ready. Awaited before the door's import: an import's evaluation holds the
 * thread, and the runtimes' spawn waits for the OS sandbox's probe.
 */
async function assembleFirst(config: HostConfig, log: Logger, clientSessionIds: boolean) {
  const { assembleHost } = await load<typeof import("../host/assemble.ts")>(DOOR_MODULES.assemble);
  return await assembleHost({ ...engineOptions(config, log), clientSessionIds });
}

async function startGrpc(config: HostConfig, log: Logger): Promise<Door> {
  const { listen } = config;
  const stdio = listen.kind === "grpc-stdio";
  // With TLS the door checks the certificate before anything starts.
  let assembled;
  try {
    assembled = config.tls === undefined ? await assembleFirst(config, log, false) : undefined;
  } catch (error) {
    throw new StartFailure(messageOf(error), error instanceof RangeError ? 2 : 1);
  }
  const { startGrpcHost } = await load<typeof import("../host/doors/grpc/server.ts")>(
    DOOR_MODULES.grpc,
  );
  let host;
  try {
    host = await startGrpcHost({
      listen: listen.kind === "grpc"
        ? listen.bind
        : listen.kind === "unix"
        ? `unix:${listen.path}`
        : undefined,
      connection: stdio ? { readable: Deno.stdin.readable, writable: Deno.stdout.writable } : undefined,
      ...engineOptions(config, log),
      routeToken: config.routeToken,
      authToken: config.authToken,
      tls: config.tls,
    }, { assembled });
  } catch (error) {
    throw new StartFailure(messageOf(error), error instanceof RangeError ? 2 : 1);
  }
  return {
    url: host.url,
    // Over stdio, stdout carries only HTTP/2 bytes.
    printsUrl: !stdio,
    shutdown: () => host.shutdown(),
    kill: () => host.kill(),
    // The connection's end (stdin EOF) stops the host.
    ended: stdio ? host.ended.then(() => host.shutdown()).then(() => 0, () => 0) : NEVER,
    stop: "two-stage",
  };
}

/** A stdio door ends with its client; nothing stops it sooner (its `shutdown` and `kill` wait for that). */
function stdioDoor(ended: Promise<number>): Door {
  const waitForEnd = () => ended.then(() => {});
  return { url: undefined, printsUrl: false, shutdown: waitForEnd, kill: waitForEnd, ended, stop: "none" };
}

async function startV1(config: HostConfig, log: Logger): Promise<Door> {
  // An unknown --limit is the user's to change; an address that cannot be bound (the metrics
  // listener) is a failure.
  const failure = (error: unknown) => {
    const message = messageOf(error);
    return new StartFailure(message, message.startsWith("failed to bind") ? 1 : 2);
  };
  let assembled;
  try {
    assembled = await assembleFirst(config, log, true);
  } catch (error) {
    throw failure(error);
  }
  const { serveV1Stdio } = await load<typeof import("../host/doors/v1/mod.ts")>(DOOR_MODULES.v1);
  // JSON host V1 on stdin/stdout (SPEC §9.10): stdout carries only frames.
  return stdioDoor(
    serveV1Stdio(engineOptions(config, log), undefined, assembled).catch((error) => {
      throw failure(error);
    }),
  );
}

/** The MCP door's module and the upstream servers of `--mcp-config`. */
async function startMcpStack(config: HostConfig) {
  const mcp = await load<typeof import("../mcp/mod.ts")>(DOOR_MODULES.mcp);
  try {
    return {
      mcp,
      mcpServers: config.mcpConfig === undefined ? undefined : await mcp.readMcpConfig(config.mcpConfig),
    };
  } catch (error) {
    if (error instanceof mcp.McpConfigError) throw new StartFailure(error.message, 2);
    throw error;
  }
}

async function startMcpStdio(config: HostConfig, log: Logger): Promise<Door> {
  const { mcp, mcpServers } = await startMcpStack(config);
  if (config.authToken !== undefined) {
    throw new StartFailure("--auth-token-file is not supported with --listen mcp+stdio", 2);
  }
  // stdout carries only MCP messages.
  return stdioDoor(
    mcp.serveMcpStdio({ ...engineOptions(config, log), mcpServers }).catch((error) => {
      throw new StartFailure(messageOf(error), 1);
    }),
  );
}

async function startMcpHttp(config: HostConfig, log: Logger): Promise<Door> {
  const { mcp, mcpServers } = await startMcpStack(config);
  const http = config.listen as Extract<ListenTarget, { kind: "mcp-http" }>;
  const idle = config.mcpSessionIdleTimeoutMs;
  let served;
  try {
    served = await mcp.serveMcpHttp({
      ...engineOptions(config, log),
      mcpServers,
      hostname: http.ip,
      port: http.port,
      loopback: http.loopback,
      authToken: config.authToken,
      ...(idle === undefined ? {} : { sessionIdleTimeoutMs: idle }),
    });
  } catch (error) {
    throw new StartFailure(messageOf(error), 1);
  }
  // The listener has no harder stop than its shutdown.
  const shutdown = () => served.shutdown();
  return { url: served.url, printsUrl: true, shutdown, kill: shutdown, ended: NEVER, stop: "one-stage" };
}

/** The start function of every `--listen` form. */
export const DOORS: Record<ListenTarget["kind"], DoorStart> = {
  "grpc": startGrpc,
  "unix": startGrpc,
  "grpc-stdio": startGrpc,
  "stdio": startV1,
  "mcp-stdio": startMcpStdio,
  "mcp-http": startMcpHttp,
};

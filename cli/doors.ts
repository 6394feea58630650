/**
 * The doors the command line can open, one start function per `--listen` form ({@link DOORS}), as
 * the reference host's `transport.rs` has one per transport. Each loads what only it needs when it
 * starts (`await import`): `--version`, `--help` and a usage error load no door, and the gRPC and
 * JSON V1 doors never load the MCP SDK.
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

function engineOptions(config: HostConfig, log: Logger): HostEngineFlags & { log: Logger } {
  return { ...config.engine, log };
}

/** The message of a failure, as the log line gives it. */
function messageOf(error: unknown): string {
  return (error as Error).message;
}

async function startGrpc(config: HostConfig, log: Logger): Promise<Door> {
  const { createHost } = await import("../host/doors/grpc/server.ts");
  const { listen } = config;
  const stdio = listen.kind === "grpc-stdio";
  let host;
  try {
    host = await createHost({
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
    });
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
  const { serveV1Stdio } = await import("../host/doors/v1/mod.ts");
  // JSON host V1 on stdin/stdout (SPEC §9.10): stdout carries only frames.
  return stdioDoor(
    serveV1Stdio(engineOptions(config, log)).catch((error) => {
      // An address that cannot be bound (the metrics listener) is a failure; the rest, e.g. an
      // unknown --limit, is the user's to change.
      const message = messageOf(error);
      throw new StartFailure(message, message.startsWith("failed to bind") ? 1 : 2);
    }),
  );
}

/** The MCP door's module and the upstream servers of `--mcp-config`. */
async function startMcpStack(config: HostConfig) {
  const mcp = await import("../mcp/mod.ts");
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

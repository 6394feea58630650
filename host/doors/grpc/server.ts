/**
 * `createHost`: the gRPC server with the code-mode service, health and reflection, and the
 * session manager behind it (SPEC §9). Listening, draining and disposal live here; signals and
 * process exit live in `main.ts`.
 *
 * @module
 */
import { createServer, type Server, type ServerMiddleware } from "nice-grpc";
import { HealthDefinition, HealthServiceImpl, HealthState } from "nice-grpc-server-health";
import { ServerReflection, ServerReflectionService } from "nice-grpc-server-reflection";
import {
  CODE_MODE_SERVICE,
  codeModeHostDefinition,
  fileDescriptorSet,
  publicProtoRoot,
} from "../../../proto/loader.ts";
import { type Clock, realClock } from "../../core/clock.ts";
import { type Limits, resolveLimits } from "../../core/limits.ts";
import { Logger, type LogLevel } from "../../ops/log.ts";
import {
  hostTempParent,
  prepareRuntimeDirectory,
  removeStaleDirectories,
} from "../../runtime/runtime_files.ts";
import { createCodeModeService } from "./service.ts";
import { errorMiddleware } from "./errors.ts";
import { CodeModeCore } from "../../core/code_mode_core.ts";
import { bearerTokenMiddleware } from "./access.ts";
import { startTlsTerminator, type TlsTerminator } from "./tls_terminator.ts";
import { SessionManager } from "../../core/session_manager.ts";
import { memoryBoundMechanism } from "../../runtime/memory_watchdog.ts";
import { resolveOsSandbox } from "../../runtime/os_sandbox.ts";
import { GRANT_ALL_PERMISSIONS_FOR_TESTS } from "../../runtime/worker_command.ts";
import { withGoawayGuard } from "./http2_guard.ts";

/**
 * A nice-grpc `ServerMiddleware` (an async generator over `(call, context)`), typed loosely here
 * so that the host's public types stay self-contained.
 */
// deno-lint-ignore no-explicit-any
export type HostMiddleware = (call: any, context: any) => AsyncGenerator<any, any, undefined>;

/** Options of {@link createHost}; every field has a default. */
export interface HostOptions {
  /** `IP:PORT` to listen on (default `127.0.0.1:50051`; port 0 picks a free port). */
  listen?: string;
  /** Limit overrides (SPEC §2.8). */
  limits?: Partial<Limits>;
  /** Deno binary for session runtimes (default `Deno.execPath()`). */
  deno?: string;
  /** Argv placed before `<deno>` for every runtime (default none). */
  workerPrefix?: string[];
  /** Pre-spawned idle runtimes (default `limits.warmSessionWorkers`, 2). */
  warmSessions?: number;
  /** `x-code-mode-route` token sent on OpenSession (default none). */
  routeToken?: string;
  /** Require `authorization: Bearer {authToken}` on every RPC of every service (default none). */
  authToken?: string;
  /** Serve TLS with this PEM certificate chain and private key (default plaintext). */
  tls?: { cert: string; key: string };
  /**
   * A server middleware run on every call of every service, before the token check (default
   * none). Tests use it to inject statuses; deployments can use it for metrics.
   */
  middleware?: HostMiddleware;
  /** Log threshold (default `info`) or a logger. */
  log?: LogLevel | Logger;
  /** Injected clock (default real time). */
  clock?: Clock;
  /**
   * A directory holding the session runtime's files (`runtime.js`, `runtime_main.js`, `cell.js`),
   * to run instead of the bundled runtime (`worker/dist/`, the default): a patched or instrumented
   * runtime. They are copied into the host-private runtime directory, the runtimes' only readable
   * path (SPEC §9.3); the runtime must speak this host's worker protocol.
   */
  runtimeFiles?: string;
  /** Test hook: the protocol version expected from runtimes. */
  protocolVersion?: number;
  /**
   * The OS sandbox around each session runtime (issue 22): `auto` (the default) uses bubblewrap
   * when it is installed and works, else logs one warning and runs without; `bwrap` requires it
   * (createHost fails without it); `off` runs runtimes directly, walled by Deno's permissions alone.
   */
  osSandbox?: "auto" | "bwrap" | "off";
}

/** Read-only views of a host's state, for tests and diagnostics. */
export interface HostState {
  /** An open session's runtime process id, running cells, and observations in flight. */
  session(id: string): { runtimePid: number | undefined; runningCells: number; inFlight: number } | undefined;
  /** Live runtime processes, session and warm ones. */
  readonly runtimeCount: number;
  /** Warm runtimes waiting to be handed out. */
  readonly warmCount: number;
  /** Runtime processes spawned so far. */
  readonly spawnCount: number;
  /** Runtimes spawned on a request's path (OpenSession or a restart) because the pool was empty. */
  readonly requestPathSpawnCount: number;
}

/** A running host. */
export interface Host extends AsyncDisposable {
  /** The bound port. */
  readonly port: number;
  /** `http://IP:PORT`, or `https://IP:PORT` with TLS. */
  readonly url: string;
  /** Read-only views of the sessions and runtimes. */
  readonly state: HostState;
  /** Graceful shutdown (SPEC §9.7): drain, stop runtimes, stop serving; bounded by `shutdownGraceMs`. */
  shutdown(): Promise<void>;
  /** Immediate stop: kill every runtime, reap them, close the server. */
  kill(): Promise<void>;
}

/**
 * Starts a host.
 *
 * @param options see {@link HostOptions}
 * @returns the running host
 * @throws {Error} `failed to bind code-mode gRPC host to {addr}` when the address cannot be bound
 */
export async function createHost(options: HostOptions = {}): Promise<Host> {
  const limits = resolveLimits(options.limits ?? {});
  const log = options.log instanceof Logger ? options.log : new Logger(options.log ?? "info");
  const parent = hostTempParent();
  Deno.mkdirSync(parent, { recursive: true, mode: 0o700 });
  removeStaleDirectories(parent);
  const runtimeDir = prepareRuntimeDirectory(parent, options.runtimeFiles);
  log.info(memoryBoundMechanism(limits.runtimeMemoryMb));
  const deno = options.deno ?? Deno.execPath();
  const mode = options.osSandbox ?? "auto";
  if (!["auto", "bwrap", "off"].includes(mode)) throw new RangeError(`invalid --os-sandbox \`${mode}\``);
  let sandbox;
  try {
    const resolved = await resolveOsSandbox(mode, deno, runtimeDir, parent);
    sandbox = resolved.sandbox;
    if (sandbox) log.info(`OS sandbox: ${resolved.why} around each session runtime`);
    else if (mode === "off") log.info(`OS sandbox: off (${resolved.why})`);
    else log.warn(`OS sandbox: off, runtimes are walled by Deno's permissions alone: ${resolved.why}`);
  } catch (error) {
    Deno.removeSync(runtimeDir, { recursive: true });
    throw error;
  }
  const allowAllForTests = (options as Record<symbol, unknown>)[GRANT_ALL_PERMISSIONS_FOR_TESTS] === true;
  if (allowAllForTests) log.warn("TEST ONLY: session runtimes run with every Deno permission");

  const manager = new SessionManager({
    limits,
    log,
    clock: options.clock ?? realClock,
    warmSessions: options.warmSessions ?? limits.warmSessionWorkers,
    runtime: {
      deno,
      prefix: options.workerPrefix,
      sandbox,
      allowAllForTests,
      runtimeDir,
      workParent: parent,
      protocolVersion: options.protocolVersion,
    },
  });

  const plain: Server = createServer({
    "grpc.max_receive_message_length": limits.maxMessageBytes,
    "grpc.max_send_message_length": limits.maxMessageBytes,
    "grpc.keepalive_time_ms": limits.serverKeepaliveTimeMs,
    "grpc.keepalive_timeout_ms": limits.serverKeepaliveTimeoutMs,
    "grpc.keepalive_permit_without_calls": 1,
  });
  // The token check wraps every service added below (code mode, health, reflection).
  const outer: Server = options.middleware === undefined
    ? plain
    : plain.use(options.middleware as unknown as ServerMiddleware);
  const server: Server = options.authToken === undefined
    ? outer
    : outer.use(bearerTokenMiddleware(options.authToken));
  // The definition is built at run time from the .proto files, so its method types are not
  // known to the compiler: the implementation is typed against proto/code_mode_types.ts instead,
  // which a test keeps equal to the .proto file.
  type AnyDefinition = Parameters<Server["add"]>[0];
  type AnyImplementation = Parameters<Server["add"]>[1];
  const core = new CodeModeCore({ manager });
  server.with(errorMiddleware(log)).add(
    codeModeHostDefinition() as unknown as AnyDefinition,
    createCodeModeService({ core, routeToken: options.routeToken }) as unknown as AnyImplementation,
  );
  const health = HealthState();
  server.add(HealthDefinition, HealthServiceImpl(health));
  server.add(
    ServerReflectionService,
    ServerReflection(fileDescriptorSet(publicProtoRoot()), [CODE_MODE_SERVICE, "grpc.health.v1.Health"]),
  );

  const address = options.listen ?? "127.0.0.1:50051";
  // `host:port` or `[v6]:port`; the port is 0 when the system picks it.
  const bindHost = address.slice(0, address.lastIndexOf(":"));
  let port: number;
  // With TLS the gRPC server listens on a Unix socket in a private directory, behind Deno's own
  // TLS (see tls_terminator.ts for why).
  let terminator: TlsTerminator | undefined;
  const onGoaway = () => log.debug("a client's GOAWAY was not passed to nghttp2 (see http2_guard.ts)");
  let socketDir: string | undefined;
  try {
    if (options.tls) {
      socketDir = await Deno.makeTempDir({ dir: parent, prefix: `tls-${Deno.pid}-` });
      const socket = `${socketDir}/grpc.sock`;
      await withGoawayGuard(() => server.listen(`unix:${socket}`), onGoaway);
      terminator = startTlsTerminator({
        hostname: bindHost.replace(/^\[|\]$/g, ""),
        port: Number(address.slice(bindHost.length + 1)),
        cert: options.tls.cert,
        key: options.tls.key,
        upstream: socket,
      });
      port = terminator.port;
    } else {
      port = await withGoawayGuard(() => server.listen(address), onGoaway);
    }
  } catch (error) {
    server.forceShutdown();
    await manager.killAll();
    await Deno.remove(runtimeDir, { recursive: true }).catch(() => {});
    if (socketDir) await Deno.remove(socketDir, { recursive: true }).catch(() => {});
    throw new Error(`failed to bind code-mode gRPC host to ${address}`, { cause: error });
  }
  health.setStatus("healthy");
  health.setStatus("healthy", CODE_MODE_SERVICE);
  const url = `${options.tls ? "https" : "http"}://${bindHost}:${port}`;

  let stopping: Promise<void> | undefined;
  const finish = async () => {
    await server.shutdown().catch(() => server.forceShutdown());
    await terminator?.close();
    await Deno.remove(runtimeDir, { recursive: true }).catch(() => {});
    if (socketDir) await Deno.remove(socketDir, { recursive: true }).catch(() => {});
  };
  const shutdown = () => {
    stopping ??= (async () => {
      log.info("code-mode host shutting down");
      health.setStatus("unhealthy");
      health.setStatus("unhealthy", CODE_MODE_SERVICE);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const deadline = new Promise<"late">((r) =>
        timer = setTimeout(() => r("late"), limits.shutdownGraceMs)
      );
      const result = await Promise.race([manager.drain(), deadline]);
      clearTimeout(timer);
      if (result === "late") await manager.killAll();
      const serverDeadline = setTimeout(() => server.forceShutdown(), 1_000);
      await finish();
      clearTimeout(serverDeadline);
      log.info("code-mode host shut down");
    })();
    return stopping;
  };
  const kill = async () => {
    await manager.killAll();
    server.forceShutdown();
    await finish();
  };
  const state: HostState = {
    session(id) {
      const session = manager.sessions.get(id);
      return session &&
        { runtimePid: session.runtime.pid, runningCells: session.runningCells, inFlight: session.inFlight };
    },
    get runtimeCount() {
      return manager.runtimes.size;
    },
    get warmCount() {
      return manager.warmCount;
    },
    get spawnCount() {
      return manager.spawnCount;
    },
    get requestPathSpawnCount() {
      return manager.requestPathSpawnCount;
    },
  };
  return { port, url, state, shutdown, kill, [Symbol.asyncDispose]: shutdown };
}

/**
 * `createHost`: the gRPC door — a nice-grpc server with the code-mode service, health and
 * reflection — over an assembled host (`host/assemble.ts`: limits, runtime directory, session
 * manager, core). Listening, draining and disposal live here; signals and process exit live in the
 * command line.
 *
 * - {@link createHost} is the public form (`mod.ts`); {@link startGrpcHost} is the same door with
 *   what only code of this repository passes (server middleware, a runtime factory) and with the
 *   host's diagnostic state (tests and benches read a session's runtime process id with it).
 *
 * @module
 */
import { createServer, type Server, type ServerMiddleware, Status } from "nice-grpc";
import { ServerInterceptingCall, type ServerInterceptor } from "@grpc/grpc-js";
import { HealthDefinition, HealthServiceImpl, HealthState } from "nice-grpc-server-health";
import {
  CODE_MODE_SERVICE,
  codeModeHostDefinition,
  publicProtoRoot,
  type ServiceDefinition,
} from "../../../proto/loader.ts";
import {
  type AssembledHost,
  assembleHost,
  type EngineOptions,
  type HostExtensions,
  type HostState,
} from "../../assemble.ts";
import { createCodeModeService, ON_SENT, SUBSCRIPTION_HEADER, type WithOnSent } from "./service.ts";
import { errorMiddleware } from "./errors.ts";
import { bearerTokenMiddleware } from "./access.ts";
import { checkTlsPem, startTlsTerminator, type TlsTerminator } from "./tls_terminator.ts";
import { routeGrpcLog, rpcLogMiddleware } from "./rpc_log.ts";
import { type SessionGuardOptions, withGoawayGuard } from "./http2_guard.ts";
import { prepareUnixSocket, relayConnection, restrictUnixSocket } from "./local_transports.ts";
import { lazyServerReflection, REFLECTION_SERVICE } from "./reflection.ts";
import { Buffer } from "node:buffer";

/** Options of {@link createHost}; every field has a default (the engine's are in {@link EngineOptions}). */
export interface HostOptions extends Omit<EngineOptions, "clientSessionIds"> {
  /**
   * `IP:PORT` or `unix:PATH` to listen on (default `127.0.0.1:50051`; port 0 picks a free port).
   * A Unix socket is created with mode 0600; a stale socket file of a dead host is replaced, a live
   * one is refused. Ignored when `connection` is given.
   */
  listen?: string;
  /**
   * Serve exactly one HTTP/2 connection over these byte streams instead of listening (the
   * `--listen grpc+stdio://` transport: stdin and stdout). The host's `ended` resolves when the
   * connection ends; the host keeps running until it is shut down.
   */
  connection?: { readable: ReadableStream<Uint8Array>; writable: WritableStream<Uint8Array> };
  /** `x-code-mode-route` token sent on OpenSession (default none). */
  routeToken?: string;
  /** Require `authorization: Bearer {authToken}` on every RPC of every service (default none). */
  authToken?: string;
  /** Serve TLS with this PEM certificate chain and private key (default plaintext). */
  tls?: { cert: string; key: string };
}

/**
 * What only code of this repository passes to the gRPC door, besides {@link HostOptions}: never
 * from the command line or `mod.ts`.
 */
export interface GrpcHostExtensions extends HostExtensions {
  /**
   * A server middleware run on every call of every service, inside the RPC log and before the
   * token check (default none): tests inject statuses and delays with it.
   */
  middleware?: ServerMiddleware;
  /**
   * A host already assembled from these options (the command line assembles it before this door's
   * modules load, so that its runtimes start meanwhile); default: assembled here. The door owns it
   * from then on: it is killed when the door fails to start.
   */
  assembled?: AssembledHost;
}

/** A running host (the public handle). */
export interface Host extends AsyncDisposable {
  /** The bound port. */
  readonly port: number;
  /** `http://IP:PORT`, or `https://IP:PORT` with TLS; `unix:PATH` on a Unix socket; `grpc+stdio://` over a connection. */
  readonly url: string;
  /**
   * With `connection`: resolves when that connection has ended (either direction closed). Never
   * resolves for a listening host.
   */
  readonly ended: Promise<void>;
  /** `http://IP:PORT` of the metrics and probes listener (`metricsListen`), if any. */
  readonly metricsUrl: string | undefined;
  /** Exports the trace spans ended so far and waits for the export or its failure (no-op without tracing). */
  flushTelemetry(): Promise<void>;
  /** Graceful shutdown (SPEC §9.7): drain, stop runtimes, stop serving; bounded by `shutdownGraceMs`. */
  shutdown(): Promise<void>;
  /** Immediate stop: kill every runtime, reap them, close the server. */
  kill(): Promise<void>;
}

/** A running gRPC host with its diagnostic state ({@link startGrpcHost}). */
export interface GrpcHost extends Host {
  /** Read-only views of the sessions and runtimes. */
  readonly state: HostState;
}

/**
 * Starts a host.
 *
 * @param options see {@link HostOptions}
 * @returns the running host
 * @throws {Error} `failed to bind code-mode gRPC host to {addr}: {cause}` when the address cannot be bound
 *   (e.g. `address already in use`)
 * @throws {RangeError} `invalid TLS certificate: {cause}` or `invalid TLS key: {cause}`
 */
export async function createHost(options: HostOptions = {}): Promise<Host> {
  const { state: _, ...host } = await startGrpcHost(options);
  return host;
}

/**
 * Starts a host, as {@link createHost} does, with extensions, returning its diagnostic state too.
 *
 * @param options see {@link HostOptions}
 * @param extensions see {@link GrpcHostExtensions}
 * @returns the running host and its state
 * @throws {Error} as {@link createHost}
 */
export async function startGrpcHost(
  options: HostOptions = {},
  extensions: GrpcHostExtensions = {},
): Promise<GrpcHost> {
  if (options.tls) {
    try {
      checkTlsPem(options.tls.cert, options.tls.key);
    } catch (error) {
      await extensions.assembled?.kill();
      throw new RangeError((error as Error).message, { cause: error });
    }
  }
  const assembled = extensions.assembled ??
    await assembleHost(options, { runtimeFactory: extensions.runtimeFactory });
  routeGrpcLog(assembled.log);
  const { server, health } = grpcServer(assembled, options, extensions.middleware);
  const listening = await listen(server, assembled, options);
  assembled.markServing();
  health.setStatus("healthy");
  health.setStatus("healthy", CODE_MODE_SERVICE);
  const { log } = assembled;
  let stopping: Promise<void> | undefined;
  const shutdown = () =>
    stopping ??= (async () => {
      log.info("code-mode host shutting down");
      health.setStatus("unhealthy");
      health.setStatus("unhealthy", CODE_MODE_SERVICE);
      await assembled.shutdown();
      const serverDeadline = setTimeout(() => server.forceShutdown(), 1_000);
      await listening.close();
      clearTimeout(serverDeadline);
      log.info("code-mode host shut down");
    })();
  const kill = async () => {
    await assembled.kill();
    server.forceShutdown();
    await listening.close();
  };
  return {
    port: listening.port,
    url: listening.url,
    ended: listening.ended,
    state: assembled.state,
    metricsUrl: assembled.state.metricsUrl,
    flushTelemetry: assembled.flushTelemetry,
    shutdown,
    kill,
    [Symbol.asyncDispose]: shutdown,
  };
}

/** The nice-grpc server with its middleware and the three services (code mode, health, reflection). */
function grpcServer(
  assembled: AssembledHost,
  options: HostOptions,
  middleware: ServerMiddleware | undefined,
): { server: Server; health: ReturnType<typeof HealthState> } {
  const { limits, log, core } = assembled;
  const plain: Server = createServer(
    {
      "grpc.max_receive_message_length": limits.maxMessageBytes,
      "grpc.max_send_message_length": limits.maxMessageBytes,
      "grpc.keepalive_time_ms": limits.serverKeepaliveTimeMs,
      "grpc.keepalive_timeout_ms": limits.serverKeepaliveTimeoutMs,
      "grpc.keepalive_permit_without_calls": 1,
      // grpc-js's own option, passed through by nice-grpc to `new grpc.Server`.
      interceptors: [okWithoutMessage],
    } as Parameters<typeof createServer>[0],
  );
  // The RPC log line sees every call's final status; the token check wraps every service
  // added below (code mode, health, reflection).
  const logged: Server = plain.use(rpcLogMiddleware(log));
  const outer: Server = middleware === undefined ? logged : logged.use(middleware);
  const server: Server = options.authToken === undefined
    ? outer
    : outer.use(bearerTokenMiddleware(options.authToken));
  // The definition is built at run time from the .proto files, so its method types are not known
  // to the compiler (nice-grpc types it as a generic definition whose methods take `never`): the
  // implementation is typed against proto/code_mode_types.ts instead, which a test keeps equal to
  // the .proto file, and both go through unknown to nice-grpc's parameter types.
  type AnyDefinition = Parameters<Server["add"]>[0];
  type AnyImplementation = Parameters<Server["add"]>[1];
  server.with(errorMiddleware(log)).add(
    withoutSerializeCopy(codeModeHostDefinition()) as unknown as AnyDefinition,
    createCodeModeService({
      core,
      routeToken: options.routeToken,
      confirmsWrites: true,
    }) as unknown as AnyImplementation,
  );
  const health = HealthState();
  server.add(HealthDefinition, HealthServiceImpl(health));
  server.add(
    REFLECTION_SERVICE as unknown as AnyDefinition,
    lazyServerReflection(
      async () => (await import("../../../proto/descriptor_set.ts")).fileDescriptorSet(publicProtoRoot()),
      [CODE_MODE_SERVICE, "grpc.health.v1.Health"],
    ) as unknown as AnyImplementation,
  );
  return { server, health };
}

/** A listening server: where, and how to stop listening. */
interface Listening {
  port: number;
  url: string;
  ended: Promise<void>;
  /** Stops the server (gracefully, else forcibly), its terminator or relay, and removes its sockets. */
  close(): Promise<void>;
}

/**
 * Listens on `options.listen` (TCP or a Unix socket), behind TLS, or over one given connection.
 *
 * @throws {Error} `failed to bind code-mode gRPC host to {addr}{cause}`; the host is killed first
 */
async function listen(server: Server, assembled: AssembledHost, options: HostOptions): Promise<Listening> {
  const { limits, log } = assembled;
  const address = options.listen ?? "127.0.0.1:50051";
  const unixPath = options.connection === undefined && address.startsWith("unix:")
    ? address.slice("unix:".length)
    : undefined;
  // `host:port` or `[v6]:port`; the port is 0 when the system picks it.
  const bindHost = address.slice(0, address.lastIndexOf(":"));
  let port = 0;
  // With TLS, or over one given connection, the gRPC server listens on a Unix socket in a private
  // directory, behind Deno's own TLS (see tls_terminator.ts for why) or a relay of the connection.
  let terminator: TlsTerminator | undefined;
  let relay: { ended: Promise<void>; close(): Promise<void> } | undefined;
  const guard: SessionGuardOptions = {
    onGoaway: () => log.debug("a client's GOAWAY was not passed to nghttp2 (see http2_guard.ts)"),
    resetBurst: limits.http2ResetBurst,
    resetsPerSecond: limits.http2ResetsPerSecond,
    onResetFlood: (remote) =>
      log.repeated(
        "warn",
        "http2 reset flood",
        `an HTTP/2 client reset more than ${limits.http2ResetBurst} streams right after opening them (a rapid reset); its connection was ended with GOAWAY ENHANCE_YOUR_CALM`,
        { remote },
      ),
  };
  let socketDir: string | undefined;
  const removeSockets = async () => {
    if (unixPath !== undefined) await removeFile(unixPath, log, false);
    if (socketDir) await removeFile(socketDir, log, true);
  };
  try {
    if (options.connection || options.tls) {
      const prefix = options.connection ? "stdio" : "tls";
      socketDir = await Deno.makeTempDir({ dir: assembled.tempParent, prefix: `${prefix}-${Deno.pid}-` });
      const socket = `${socketDir}/grpc.sock`;
      await withGoawayGuard(() => server.listen(`unix:${socket}`), guard);
      if (options.connection) relay = await relayConnection(options.connection, socket);
      else {
        terminator = startTlsTerminator({
          hostname: bindHost.replace(/^\[|\]$/g, ""),
          port: Number(address.slice(bindHost.length + 1)),
          cert: options.tls!.cert,
          key: options.tls!.key,
          upstream: socket,
        });
        port = terminator.port;
      }
    } else if (unixPath !== undefined) {
      await prepareUnixSocket(unixPath);
      await restrictUnixSocket(unixPath, () => withGoawayGuard(() => server.listen(address), guard));
    } else {
      port = await withGoawayGuard(() => server.listen(address), guard);
    }
  } catch (error) {
    server.forceShutdown();
    await assembled.kill();
    if (socketDir) await removeFile(socketDir, log, true);
    const shown = options.connection ? "grpc+stdio://" : address;
    throw new Error(`failed to bind code-mode gRPC host to ${shown}${bindCause(error)}`, { cause: error });
  }
  return {
    port,
    url: options.connection
      ? "grpc+stdio://"
      : unixPath !== undefined
      ? address
      : `${options.tls ? "https" : "http"}://${bindHost}:${port}`,
    ended: relay?.ended ?? new Promise<void>(() => {}),
    close: async () => {
      await server.shutdown().catch(() => server.forceShutdown());
      await terminator?.close();
      await relay?.close();
      await removeSockets();
    },
  };
}

/** Removes a socket or its private directory; one already gone is fine, any other failure is logged. */
async function removeFile(path: string, log: AssembledHost["log"], recursive: boolean): Promise<void> {
  try {
    await Deno.remove(path, { recursive });
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) {
      log.warn("socket not removed", { path, error: String(error) });
    }
  }
}

/**
 * - grpc-js ends every successful call with the status message `OK`; Codex's host ends them with
 *   none, so a client reads an empty message either way.
 * - A response carrying an {@link ON_SENT} callback has it called as grpc-js hands it to the
 *   HTTP/2 stream.
 * - A response framed by {@link withoutSerializeCopy} is sent without grpc-js's copy
 *   ({@link passFramedMessages}).
 * - The header that only makes nice-grpc send a subscription's header block early
 *   ({@link SUBSCRIPTION_HEADER}) is taken out: Codex's host sends that block empty.
 */
const okWithoutMessage: ServerInterceptor = (_method, call) => {
  passFramedMessages(call);
  return new ServerInterceptingCall(call, {
    sendMetadata: (metadata, next) => {
      metadata.remove(SUBSCRIPTION_HEADER);
      next(metadata);
    },
    sendMessage: (message: WithOnSent<object>, next) => {
      const onSent = message?.[ON_SENT];
      next(message);
      onSent?.();
    },
    sendStatus: (status, next) => next(status.code === Status.OK ? { ...status, details: "" } : status),
  });
};

/** `: {cause}` of a bind failure, as a user reads it (`: address already in use`), or nothing. */
function bindCause(error: unknown): string {
  if (!(error instanceof Error)) return "";
  if (error.name === "UnixSocketInUse") return `: ${error.message}`;
  if (error instanceof Deno.errors.AddrInUse || /EADDRINUSE/.test(error.message)) {
    return ": address already in use";
  }
  if (error instanceof Deno.errors.AddrNotAvailable || /EADDRNOTAVAIL/.test(error.message)) {
    return ": address not available";
  }
  if (error instanceof Deno.errors.PermissionDenied || /EACCES/.test(error.message)) {
    return ": permission denied";
  }
  return "";
}

/**
 * The definition with each encoder's bytes handed to nice-grpc as their `ArrayBuffer` when they
 * fill it (protobufjs allocates a large message's buffer on its own): nice-grpc passes what an
 * encoder returns through `Buffer.from`, which copies a `Uint8Array` (a 64 MiB outcome: ~50 ms)
 * but only views an `ArrayBuffer`. A large response comes framed (`responseFrame`) and is marked
 * for {@link passFramedMessages}. Same bytes on the wire.
 *
 * @param definition the grpc-js style definition
 * @returns the same definition with those encoders
 */
export function withoutSerializeCopy(definition: ServiceDefinition): ServiceDefinition {
  const whole = (bytes: Uint8Array) =>
    (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
      ? bytes.buffer
      : bytes) as Uint8Array;
  const result: ServiceDefinition = {};
  for (const [key, method] of Object.entries(definition)) {
    const frame = method.responseFrame;
    const responseSerialize = frame === undefined
      ? (value: unknown) => whole(method.responseSerialize(value))
      : (value: unknown) => {
        const { bytes, framed } = frame(value);
        if (framed) FRAMED.add(bytes.buffer);
        return whole(bytes);
      };
    result[key] = { ...method, responseSerialize };
  }
  return result;
}

/** The buffers of responses that {@link withoutSerializeCopy} framed, until grpc-js sends them. */
const FRAMED = new WeakSet<ArrayBufferLike>();

/** The part of grpc-js's `BaseServerInterceptingCall` that {@link passFramedMessages} replaces. */
interface SerializingCall {
  handler: { serialize(value: unknown): Buffer };
  serializeMessage(value: unknown): Buffer;
}

/**
 * grpc-js's server call copies every encoded response behind the 5-byte gRPC message prefix
 * (`serializeMessage`; a 16 MiB outcome: a 16 MiB allocation and copy before the first socket
 * write). Its class (the prototype of the call an interceptor receives) then passes a response
 * that {@link withoutSerializeCopy} framed as it is; any other one as before.
 */
export function passFramedMessages(call: object): void {
  const proto = Object.getPrototypeOf(call) as Partial<SerializingCall>;
  if (typeof proto.serializeMessage !== "function" || PATCHED.has(proto)) return;
  PATCHED.add(proto);
  proto.serializeMessage = function (this: SerializingCall, value: unknown): Buffer {
    const message = this.handler.serialize(value);
    if (
      FRAMED.delete(message.buffer) && message.byteOffset === 0 &&
      message.byteLength === message.buffer.byteLength
    ) return message;
    const output = Buffer.allocUnsafe(message.byteLength + 5);
    output.writeUInt8(0, 0);
    output.writeUInt32BE(message.byteLength, 1);
    message.copy(output, 5);
    return output;
  };
}

/** The prototypes that {@link passFramedMessages} changed. */
const PATCHED = new WeakSet<object>();

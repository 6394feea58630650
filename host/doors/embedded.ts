/**
 * The embedded front door (SPEC §9.8): {@link InProcessCodeModeSessionProvider}, the client
 * library's `CodeModeSessionProvider` over an engine in this process — no gRPC transport, no
 * HTTP/2, no socket. A harness switches from `GrpcCodeModeSessionProvider` by changing one
 * constructor.
 *
 * How it stays exactly like the gRPC provider: the public sessions are the client library's own
 * (`client/session.ts`, `client/binding.ts`: public IDs, delegates, tool calls, notifications,
 * `cellClosed`, waits, terminate, output modes and the texts of SPEC §10.9), and their client is
 * an in-memory one ({@link inMemoryClient}) that calls the service methods over `engine.core`
 * directly. Each message still goes through its protobuf encoding and decoding in memory (what
 * the wire would do to field presence, 64-bit values and enums), and each failure reaches the
 * client as the status the gRPC door would send: a {@link HostError}'s code through the table
 * shared by both doors (`status_codes.ts`), anything else `INTERNAL`.
 *
 * @module
 */
import { ClientError, Metadata, type Metadata as MetadataType, ServerError, Status } from "nice-grpc";
import { codeModeHostDefinition } from "../../proto/loader.ts";
import { CodeModeError } from "../../proto/errors.ts";
import type { HostClient } from "../../client/binding.ts";
import { type Connector, GrpcCodeModeSessionProvider, useConnector } from "../../client/provider.ts";
import type {
  Clock,
  CodeModeOutputTruncation,
  CodeModeSession,
  CodeModeSessionOptions,
} from "../../client/types.ts";
import type { Limits } from "../core/limits.ts";
import { HostError } from "../core/errors.ts";
import { type Engine, type EngineOptions, type Isolation, startEngine } from "../engine.ts";
import { Logger, type LogLevel } from "../ops/log.ts";
import { createCodeModeService } from "./grpc/service.ts";
import { GRPC_CODE_OF } from "./status_codes.ts";

/** The message of a failure the host did not expect (as the gRPC door's). */
const INTERNAL_MESSAGE = "code-mode host internal error";

/** Options of {@link InProcessCodeModeSessionProvider}; every field has a default. */
export interface InProcessProviderOptions {
  /**
   * Where session runtimes run: `subprocess` (the default where this process may run
   * `Deno.execPath()`) or `in-process` (the default otherwise; not for untrusted code, SPEC §9.8).
   * The choice is logged at start.
   */
  isolation?: Isolation;
  /** Limit overrides (SPEC §2.8). */
  limits?: Partial<Limits>;
  /** The output mode of sessions whose options do not name one (default `client`). */
  outputTruncation?: CodeModeOutputTruncation;
  /** Pre-started idle runtimes (default `limits.warmSessionWorkers`, 2). */
  warmSessions?: number;
  /** Deno binary for subprocess runtimes (default `Deno.execPath()`). */
  deno?: string;
  /** Argv placed before `<deno>` for every subprocess runtime (default none; `--worker-prefix`). */
  workerPrefix?: string[];
  /** The OS sandbox around each subprocess runtime (default `auto`; see `EngineOptions.osSandbox`). */
  osSandbox?: "auto" | "bwrap" | "off";
  /** Log threshold (default `info`) or a logger. */
  log?: LogLevel | Logger;
  /** The provider's clock for deadlines (default real time), as in `GrpcCodeModeSessionProvider`. */
  clock?: Clock;
  /** Deadline of opening and closing operations (default 60,000 ms). */
  transportTimeoutMs?: number;
  /** `IP:PORT` of a `/metrics`, `/healthz`, `/readyz` listener (default none; see `EngineOptions.metricsListen`). */
  metricsListen?: string;
  /** OTLP/HTTP JSON trace export (default none; see `EngineOptions.otelTraceExporter`). */
  otelTraceExporter?: EngineOptions["otelTraceExporter"];
}

/**
 * Whether this process may spawn the session runtime subprocess.
 *
 * @param deno the Deno binary the runtimes would run
 * @returns whether `run` is granted for it
 */
export function canSpawn(deno: string = Deno.execPath()): boolean {
  try {
    return Deno.permissions.querySync({ name: "run", command: deno }).state === "granted";
  } catch {
    return false;
  }
}

function abortError(): Error {
  const error = new Error("The operation has been aborted");
  error.name = "AbortError";
  return error;
}

/** The status a client of the gRPC door would receive for `error` (`grpc/errors.ts`). */
function toClientError(path: string, error: unknown, log: Logger): ClientError {
  if (error instanceof ClientError) return error;
  if (error instanceof ServerError) return new ClientError(path, error.code, error.details);
  if (error instanceof HostError) return new ClientError(path, GRPC_CODE_OF[error.code], error.message);
  log.error("unexpected failure in an RPC", { error: String((error as Error)?.stack ?? error) });
  return new ClientError(path, Status.INTERNAL, INTERNAL_MESSAGE);
}

/** Call options of the client library (what nice-grpc's clients take). */
interface CallOptions {
  signal?: AbortSignal;
  metadata?: MetadataType;
  onHeader?: (header: MetadataType) => void;
}

/**
 * A client of the code-mode service with nice-grpc's calling conventions whose calls run the
 * service methods over `engine.core` in this process.
 *
 * @param engine the engine whose core serves the calls
 * @returns the client
 */
export function inMemoryClient(engine: Engine): HostClient {
  const definition = codeModeHostDefinition();
  // deno-lint-ignore no-explicit-any
  const service = createCodeModeService({ core: engine.core }) as unknown as Record<string, any>;
  const log = engine.log;
  const client: Record<string, unknown> = {};
  for (const [key, method] of Object.entries(definition)) {
    const request = (value: unknown) => method.requestDeserialize(method.requestSerialize(value));
    const response = (value: unknown) => method.responseDeserialize(method.responseSerialize(value));
    const call = (value: unknown, options: CallOptions = {}) => {
      const abort = new AbortController();
      const outer = options.signal;
      const onAbort = () => abort.abort();
      if (outer?.aborted) abort.abort();
      else outer?.addEventListener("abort", onAbort, { once: true });
      const header = Metadata();
      let headerSent = false;
      const sendHeader = () => {
        if (headerSent) return;
        headerSent = true;
        options.onHeader?.(header);
      };
      const context = {
        metadata: options.metadata ?? Metadata(),
        peer: "in-process",
        header,
        sendHeader,
        trailer: Metadata(),
        signal: abort.signal,
      };
      const done = () => outer?.removeEventListener("abort", onAbort);
      const aborted = new Promise<never>((_, reject) => {
        if (abort.signal.aborted) reject(abortError());
        abort.signal.addEventListener("abort", () => reject(abortError()), { once: true });
      });
      aborted.catch(() => {});
      return { request: request(value), context, sendHeader, abort, done, aborted };
    };
    if (method.responseStream) {
      client[key] = (value: unknown, options?: CallOptions) => {
        const c = call(value, options);
        // The method runs as a server runs it: pulled on at once, whatever the caller reads, and on
        // to its end after the caller went away (an Execute abandons its cell there); what it
        // produces meanwhile waits here, what it produces after cancellation goes nowhere.
        const queue: unknown[] = [];
        let end: { error?: unknown } | undefined;
        let wake: (() => void) | undefined;
        const pump = (async () => {
          try {
            const stream = service[key](c.request, c.context) as AsyncIterable<unknown>;
            for await (const message of stream) {
              if (c.abort.signal.aborted) continue;
              c.sendHeader();
              queue.push(response(message));
              wake?.();
            }
            if (!c.abort.signal.aborted) c.sendHeader();
            end = {};
          } catch (error) {
            end = { error };
          }
          wake?.();
        })();
        void pump;
        return (async function* () {
          try {
            for (;;) {
              while (queue.length === 0 && end === undefined && !c.abort.signal.aborted) {
                await Promise.race([new Promise<void>((resolve) => wake = resolve), c.aborted]);
              }
              if (c.abort.signal.aborted) throw abortError();
              if (queue.length > 0) {
                yield queue.shift();
                continue;
              }
              if (end!.error !== undefined) throw toClientError(method.path, end!.error, log);
              return;
            }
          } catch (error) {
            if (c.abort.signal.aborted) throw abortError();
            throw error;
          } finally {
            c.abort.abort();
            c.done();
          }
        })();
      };
    } else {
      client[key] = (value: unknown, options?: CallOptions) => {
        const c = call(value, options);
        return (async () => {
          try {
            const pending = Promise.resolve(service[key](c.request, c.context));
            pending.catch(() => {});
            const result = await Promise.race([pending, c.aborted]);
            return response(result);
          } catch (error) {
            if (c.abort.signal.aborted) throw abortError();
            throw toClientError(method.path, error, log);
          } finally {
            c.done();
          }
        })();
      };
    }
  }
  // Assembled method by method from the definition, which is built from the .proto file at run time.
  return client as HostClient;
}

/**
 * Opens code-mode sessions on a host engine inside this process: the `CodeModeSessionProvider` of
 * `GrpcCodeModeSessionProvider` (SPEC §10.1) without gRPC (SPEC §9.8). The engine starts with the
 * first session and ends with {@link InProcessCodeModeSessionProvider.shutdown}.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { InProcessCodeModeSessionProvider, NoopCodeModeSessionDelegate } from "../../mod.ts";
 *
 * await using provider = new InProcessCodeModeSessionProvider({ warmSessions: 0, log: "error" });
 * await using session = await provider.createSession();
 * const cell = await session.execute(
 *   { toolCallId: "call-1", enabledTools: [], source: 'text("hi")' },
 *   new NoopCodeModeSessionDelegate(),
 * );
 * const response = await cell.initialResponse();
 * assert.deepEqual(response.contentItems, [{ type: "input_text", text: "hi" }]);
 * ```
 */
export class InProcessCodeModeSessionProvider implements AsyncDisposable {
  readonly #options: InProcessProviderOptions;
  readonly #inner: GrpcCodeModeSessionProvider;
  #engine: Engine | undefined;
  #client: HostClient | undefined;
  #starting: Promise<void> | undefined;
  #isolation: Isolation | undefined;
  #stopped = false;

  /**
   * Creates a provider; nothing starts until `start` or `createSession`.
   *
   * @param options isolation, limits, output mode, logging
   */
  constructor(options: InProcessProviderOptions = {}) {
    this.#options = options;
    this.#inner = new GrpcCodeModeSessionProvider("in-process:", {
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.transportTimeoutMs === undefined ? {} : { transportTimeoutMs: options.transportTimeoutMs }),
    });
    const connector: Connector = () => {
      if (!this.#client) throw new Error("code-mode embedded provider has not started");
      return { client: this.#client, release: () => {} };
    };
    useConnector(this.#inner, connector);
  }

  /** `http://IP:PORT` of the metrics and probes listener, once the engine started with one. */
  get metricsUrl(): string | undefined {
    return this.#engine?.state.metricsUrl;
  }

  /** The isolation in use, once the engine started. */
  get isolation(): Isolation | undefined {
    return this.#isolation;
  }

  /**
   * Opens a public session.
   *
   * @param options output mode (default the provider's) and cell limits
   * @returns the session
   * @throws {CodeModeError} the opening failure, with the gRPC provider's text and `grpcCode`
   */
  async createSession(options: CodeModeSessionOptions = {}): Promise<CodeModeSession> {
    if (this.#stopped) throw new CodeModeError("UNAVAILABLE", "code-mode embedded provider was shut down");
    try {
      await this.#start();
    } catch (error) {
      throw new CodeModeError(undefined, (error as Error).message, { cause: error });
    }
    const outputTruncation = options.outputTruncation ?? this.#options.outputTruncation;
    return await this.#inner.createSession(
      outputTruncation === undefined ? options : { ...options, outputTruncation },
    );
  }

  /**
   * Starts the engine now rather than with the first `createSession`: the metrics and probes
   * listener binds, and a failure (a port in use) is thrown here. Idempotent; after a failure it
   * may be called again.
   *
   * @throws {Error} when the engine cannot start, e.g. `failed to bind metrics listener to …`
   */
  async start(): Promise<void> {
    if (this.#stopped) throw new CodeModeError("UNAVAILABLE", "code-mode embedded provider was shut down");
    await this.#start();
  }

  /** Ends the engine gracefully (SPEC §9.7): sessions close, runtimes stop. Idempotent. */
  async shutdown(): Promise<void> {
    this.#stopped = true;
    await this.#engine?.shutdown();
  }

  /** Same as {@link InProcessCodeModeSessionProvider.shutdown}. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.shutdown();
  }

  /** Starts the engine once (its OS sandbox probe is asynchronous) and the in-memory client. */
  #start(): Promise<void> {
    this.#starting ??= (async () => {
      const o = this.#options;
      const log = o.log instanceof Logger ? o.log : new Logger(o.log ?? "info");
      const isolation = o.isolation ?? (canSpawn(o.deno) ? "subprocess" : "in-process");
      log.info(
        `code-mode embedded provider uses ${isolation} isolation` +
          (o.isolation === undefined
            ? (isolation === "subprocess" ? " (run is permitted)" : " (run is not permitted)")
            : ""),
      );
      const engine = await startEngine({
        isolation,
        limits: o.limits,
        warmSessions: o.warmSessions,
        deno: o.deno,
        workerPrefix: o.workerPrefix,
        osSandbox: o.osSandbox,
        log,
        metricsListen: o.metricsListen,
        otelTraceExporter: o.otelTraceExporter,
      });
      engine.markServing();
      this.#engine = engine;
      this.#isolation = isolation;
      this.#client = inMemoryClient(engine);
    })();
    // A failed start may be retried by the next createSession.
    return this.#starting.catch((error) => {
      this.#starting = undefined;
      throw error;
    });
  }
}

/**
 * The embedded provider (SPEC §9.8): {@link InProcessCodeModeSessionProvider}, the client
 * library's `CodeModeSessionProvider` over an engine in this process — no gRPC transport, no
 * HTTP/2, no socket, no protobuf encoding. A harness switches from `GrpcCodeModeSessionProvider` by
 * changing one constructor.
 *
 * How it stays exactly like the gRPC provider: the public sessions are the client library's own
 * (`client/session.ts`, `client/binding.ts`: public IDs, delegates, tool calls, notifications,
 * `cellClosed`, waits, terminate, output modes and the texts of SPEC §10.9), opened by a
 * `GrpcCodeModeSessionProvider` whose client is {@link coreClient}: the core's operations called
 * directly, with the messages a gRPC client would receive and the failures it would see
 * (`core_client.ts`, `messages.ts`).
 *
 * An `exec` of the MCP door thus goes door → client session and binding → core client → core.
 *
 * @module
 */
import { CodeModeError } from "../proto/errors.ts";
import { type Connector, GrpcCodeModeSessionProvider, useConnector } from "../client/provider.ts";
import type {
  Clock,
  CodeModeOutputTruncation,
  CodeModeSession,
  CodeModeSessionOptions,
} from "../client/types.ts";
import type { Limits } from "../host/core/limits.ts";
import { type AssembledHost, assembleHost, type EngineOptions, type Isolation } from "../host/assemble.ts";
import { Logger, type LogLevel } from "../host/ops/log.ts";
import { type CoreClient, coreClient } from "./core_client.ts";

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

/**
 * Opens code-mode sessions on a host engine inside this process: the `CodeModeSessionProvider` of
 * `GrpcCodeModeSessionProvider` (SPEC §10.1) without gRPC (SPEC §9.8). The engine starts with the
 * first session and ends with {@link InProcessCodeModeSessionProvider.shutdown}.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { InProcessCodeModeSessionProvider, NoopCodeModeSessionDelegate } from "../mod.ts";
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
  #engine: AssembledHost | undefined;
  #calls: CoreClient | undefined;
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
      if (!this.#calls) throw new Error("code-mode embedded provider has not started");
      return { client: this.#calls.client, release: () => {} };
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

  /**
   * Ends the engine gracefully (SPEC §9.7): sessions close, runtimes stop; resolves once the calls
   * the sessions left running have ended too. Idempotent.
   */
  async shutdown(): Promise<void> {
    this.#stopped = true;
    await this.#engine?.shutdown();
    await this.#calls?.settled();
  }

  /** Same as {@link InProcessCodeModeSessionProvider.shutdown}. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.shutdown();
  }

  /** Starts the engine once (its OS sandbox probe is asynchronous) and the client of its core. */
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
      const engine = await assembleHost({
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
      this.#calls = coreClient(engine.core, engine.log);
    })();
    // A failed start may be retried by the next createSession.
    return this.#starting.catch((error) => {
      this.#starting = undefined;
      throw error;
    });
  }
}

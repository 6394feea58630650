/**
 * `ProcessOwnedGrpcCodeModeSessionProvider`: a port of Codex's process-owned gRPC provider. It
 * spawns the host itself (default: this checkout's `cli/main.ts --listen grpc+stdio://`) and
 * speaks gRPC over the child's stdin/stdout.
 *
 * How (SPEC §9.1 `grpc+stdio://`, §10.3–§10.5):
 * - The gRPC channel of an inner {@link GrpcCodeModeSessionProvider} connects to a Unix socket in a
 *   private directory of this provider (grpc-js needs a socket to connect to). Each connection
 *   accepted there gets a fresh child, and its bytes are relayed to the child's stdin and from its
 *   stdout: exactly one HTTP/2 connection per child, shared by every session of the provider.
 * - Connection lifecycle, keep-alive, admission retry, generations and the reset message are the
 *   inner provider's (§10.3–§10.5): when the last session's binding goes, the channel closes, the
 *   relay closes the child's stdin (the host shuts down and exits 0) and the child is reaped, and
 *   killed if it has not exited within `exitGraceMs`.
 * - A child that dies ends its connection; a hung child stops answering keep-alive pings, so grpc-js
 *   drops the connection. Either way every binding fails, the child is killed and reaped, and the
 *   next call opens a new connection, hence a new child, as a new generation (`g2:1`, with the
 *   reset message for the calls made before).
 * - `[Symbol.asyncDispose]` stops accepting, ends every connection, kills and reaps every child and
 *   removes the private directory.
 *
 * @module
 */
import { relayBytes } from "../proto/byte_relay.ts";
import { CodeModeError } from "../proto/errors.ts";
import { GrpcCodeModeSessionProvider } from "./provider.ts";
import type { Clock, CodeModeSession, CodeModeSessionOptions, CodeModeSessionProvider } from "./types.ts";

/** Options of {@link ProcessOwnedGrpcCodeModeSessionProvider}. */
export interface ProcessOwnedProviderOptions {
  /**
   * The host executable (default: this process's Deno, `Deno.execPath()`). Its stdin and stdout must
   * carry gRPC (HTTP/2 prior knowledge) and nothing else.
   */
  command?: string;
  /**
   * The host's arguments (default: `run --allow-all <this checkout>/cli/main.ts --listen
   * grpc+stdio://`).
   */
  args?: string[];
  /** The child's environment (default: this process's). */
  env?: Record<string, string>;
  /** Whether `env` replaces this process's environment instead of adding to it (default false). */
  clearEnv?: boolean;
  /** The child's working directory (default: this process's). */
  cwd?: string;
  /** Where the child's stderr (its log lines) goes (default `"inherit"`). */
  stderr?: "inherit" | "null";
  /** How long a child whose connection ended may take to exit before it is killed; default 5,000 ms. */
  exitGraceMs?: number;
  /** Deadline of transport-level operations; default 60,000 ms. */
  transportTimeoutMs?: number;
  /** HTTP/2 keep-alive interval; default 30,000 ms. */
  keepaliveIntervalMs?: number;
  /** HTTP/2 keep-alive timeout; default 10,000 ms. */
  keepaliveTimeoutMs?: number;
  /** Sent as `authorization: Bearer {token}` on every RPC; default none. */
  authToken?: string;
  /** The provider's time source; default real time. */
  clock?: Clock;
}

const DISPOSED = "code-mode host process provider is disposed";

/**
 * The default host arguments: `run --allow-all <this checkout>/cli/main.ts --listen grpc+stdio://`,
 * then `extra` (more host flags).
 */
export function defaultHostArgs(...extra: string[]): string[] {
  const main = new URL("../cli/main.ts", import.meta.url);
  const entry = main.protocol === "file:" ? decodeURIComponent(main.pathname) : main.href;
  return ["run", "--allow-all", entry, "--listen", "grpc+stdio://", ...extra];
}

/** One child and the connection relayed to it. */
interface Child {
  readonly process: Deno.ChildProcess;
  /** Resolves once the child has exited and its relay has stopped. */
  readonly done: Promise<void>;
  /** Ends the connection and the child: stdin closed, then SIGKILL after the grace (0: at once). */
  stop(graceMs: number): Promise<void>;
}

/**
 * Opens Codex-compatible sessions on a host process that it spawns and owns, over the child's
 * stdin/stdout (one shared HTTP/2 connection per child).
 *
 * @example
 * ```ts ignore
 * import { NoopCodeModeSessionDelegate, ProcessOwnedGrpcCodeModeSessionProvider } from "./mod.ts";
 * await using provider = new ProcessOwnedGrpcCodeModeSessionProvider();
 * await using session = await provider.createSession();
 * const cell = await session.execute(
 *   { toolCallId: "call-1", enabledTools: [], source: 'text("hi")' },
 *   new NoopCodeModeSessionDelegate(),
 * );
 * console.log(await cell.initialResponse()); // { type: "result", cellId: "1", ... }
 * ```
 */
export class ProcessOwnedGrpcCodeModeSessionProvider implements CodeModeSessionProvider, AsyncDisposable {
  readonly #options: ProcessOwnedProviderOptions;
  #dir: string | undefined;
  #listener: Deno.Listener<Deno.UnixConn, Deno.UnixAddr> | undefined;
  #accepting: Promise<void> | undefined;
  #inner: GrpcCodeModeSessionProvider | undefined;
  readonly #children = new Map<Deno.ChildProcess, Child>();
  #spawned = 0;
  #spawnFailure: string | undefined;
  #disposed: Promise<void> | undefined;

  /**
   * Creates a provider; nothing is spawned until a session needs a connection.
   *
   * @param options the host command, its environment, timeouts, token and clock
   */
  constructor(options: ProcessOwnedProviderOptions = {}) {
    this.#options = options;
  }

  /** The pid of the child currently serving the connection, if any. */
  get pid(): number | undefined {
    let last: Child | undefined;
    for (const child of this.#children.values()) last = child;
    return last?.process.pid;
  }

  /** How many host processes this provider has spawned so far. */
  get spawned(): number {
    return this.#spawned;
  }

  /**
   * Opens a public session (its first binding), spawning the host if no child is running.
   *
   * @param options output mode and cell limits
   * @returns the session
   * @throws {CodeModeError} `code-mode host process provider is disposed`, or the opening failure
   */
  async createSession(options: CodeModeSessionOptions = {}): Promise<CodeModeSession> {
    if (this.#disposed) throw new CodeModeError(undefined, DISPOSED);
    return await this.#provider().createSession(options);
  }

  #provider(): GrpcCodeModeSessionProvider {
    if (this.#inner) return this.#inner;
    this.#dir = Deno.makeTempDirSync({ prefix: "code-mode-client-" });
    const path = `${this.#dir}/h2.sock`;
    this.#listener = Deno.listen({ transport: "unix", path });
    Deno.chmodSync(path, 0o600);
    this.#accepting = this.#accept(this.#listener);
    const o = this.#options;
    this.#inner = new GrpcCodeModeSessionProvider(`unix://${path}`, {
      ...(o.transportTimeoutMs === undefined ? {} : { transportTimeoutMs: o.transportTimeoutMs }),
      ...(o.keepaliveIntervalMs === undefined ? {} : { keepaliveIntervalMs: o.keepaliveIntervalMs }),
      ...(o.keepaliveTimeoutMs === undefined ? {} : { keepaliveTimeoutMs: o.keepaliveTimeoutMs }),
      ...(o.authToken === undefined ? {} : { authToken: o.authToken }),
      ...(o.clock === undefined ? {} : { clock: o.clock }),
    });
    return this.#inner;
  }

  async #accept(listener: Deno.Listener<Deno.UnixConn, Deno.UnixAddr>): Promise<void> {
    for (;;) {
      let conn: Deno.UnixConn;
      try {
        conn = await listener.accept();
      } catch {
        return; // closed by dispose
      }
      if (this.#disposed) {
        conn.close();
        continue;
      }
      try {
        this.#start(conn);
      } catch (error) {
        // The host could not be spawned: the connection fails (UNAVAILABLE); the reason is written
        // to stderr once (grpc-js reconnects several times per opening attempt).
        const message = `code-mode host process could not be started: ${(error as Error).message}`;
        if (message !== this.#spawnFailure) console.error(message);
        this.#spawnFailure = message;
        conn.close();
      }
    }
  }

  #start(conn: Deno.UnixConn): void {
    const o = this.#options;
    const process = new Deno.Command(o.command ?? Deno.execPath(), {
      args: o.args ?? defaultHostArgs(),
      ...(o.env === undefined ? {} : { env: o.env }),
      ...(o.clearEnv === undefined ? {} : { clearEnv: o.clearEnv }),
      ...(o.cwd === undefined ? {} : { cwd: o.cwd }),
      stdin: "piped",
      stdout: "piped",
      stderr: o.stderr ?? "inherit",
    }).spawn();
    this.#spawned++;
    this.#spawnFailure = undefined;
    let connClosed = false;
    const closeConn = () => {
      if (connClosed) return;
      connClosed = true;
      try {
        conn.close();
      } catch { /* already closed */ }
    };
    let killed = false;
    const kill = () => {
      if (killed) return;
      killed = true;
      try {
        process.kill("SIGKILL");
      } catch { /* already exited */ }
    };
    // Client → child: the connection's end closes the child's stdin (the host's signal to stop),
    // its failure aborts it. Child → client: the child's stdout ending (it exits, crashes or stops
    // serving) ends the connection; a child still shutting down keeps its grace.
    const relay = relayBytes(conn, { readable: process.stdout, writable: process.stdin }, {
      keepClientOpen: true,
    });
    let graceTimer: ReturnType<typeof setTimeout> | undefined;
    const stop = (graceMs: number) => {
      closeConn();
      if (graceMs <= 0) kill();
      else graceTimer ??= setTimeout(kill, graceMs);
      return done;
    };
    const grace = o.exitGraceMs ?? 5_000;
    const exited = process.status.then(() => undefined);
    const done = (async () => {
      // The connection's end gives the child its grace; its exit ends the connection at once.
      const first = await Promise.race([relay.ended, exited]);
      stop(first === undefined ? 0 : grace);
      await exited;
      clearTimeout(graceTimer);
      closeConn();
      await relay.settled;
      this.#children.delete(process);
    })();
    this.#children.set(process, { process, done, stop });
  }

  /**
   * Stops accepting, ends every connection (open sessions fail), kills and reaps every child and
   * removes the private directory. Idempotent.
   */
  [Symbol.asyncDispose](): Promise<void> {
    this.#disposed ??= (async () => {
      try {
        this.#listener?.close();
      } catch { /* already closed */ }
      await this.#accepting;
      const grace = this.#options.exitGraceMs ?? 5_000;
      await Promise.all([...this.#children.values()].map((child) => child.stop(grace)));
      if (this.#dir) {
        try {
          await Deno.remove(this.#dir, { recursive: true });
        } catch {
          // A private temporary directory: nothing depends on its removal.
        }
      }
    })();
    return this.#disposed;
  }
}

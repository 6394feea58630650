/**
 * Host processes for the conformance suite: Codex's own `codex-code-mode-host` (the reference) and this
 * checkout's `bin/codex-code-mode-host` (ours), each started the way Codex starts it, with the same
 * arguments. Folder-private.
 *
 * - `grpc-stdio`: `--listen grpc+stdio://`; a private Unix socket is relayed to the child's pipes (as
 *   `client/process_provider.ts` does), and a raw gRPC client connects to the socket.
 * - `v1`: no arguments; JSON host V1 on the child's pipes.
 * - `grpc-tcp`: `--listen grpc://127.0.0.1:0`; the endpoint is the first stdout line.
 * - stderr is kept (its last 64 KiB) for diagnostics; nothing is inherited.
 *
 * @module
 */
import { ensureCodex } from "./_codex.ts";
import { V1Connection } from "./_v1.ts";
import { WireClient } from "./_wire.ts";

/** Which host. */
export type Kind = "reference" | "ours";
/** How a client talks to it. */
export type Transport = "grpc-stdio" | "v1" | "grpc-tcp";

/** Every transport, in the order scenarios run on them. */
export const TRANSPORTS: readonly Transport[] = ["grpc-stdio", "v1", "grpc-tcp"];

/** This checkout's launcher, the program Codex would start. */
export const OUR_LAUNCHER = new URL("../../bin/codex-code-mode-host", import.meta.url).pathname;

/** The program for a kind. */
export async function hostProgram(kind: Kind): Promise<string> {
  return kind === "reference" ? (await ensureCodex()).host : OUR_LAUNCHER;
}

/** The arguments Codex passes for a transport. */
export function transportArgs(transport: Transport): string[] {
  switch (transport) {
    case "grpc-stdio":
      return ["--listen", "grpc+stdio://"];
    case "v1":
      return [];
    case "grpc-tcp":
      return ["--listen", "grpc://127.0.0.1:0"];
  }
}

/** A nearly empty environment: `PATH` (with this Deno's directory, for the launcher) and `HOME`. */
export function hostEnv(): Record<string, string> {
  const denoDir = Deno.execPath().replace(/\/[^/]+$/, "");
  return { PATH: `${denoDir}:/usr/local/bin:/usr/bin:/bin`, HOME: Deno.env.get("HOME") ?? "/tmp" };
}

const STDERR_KEEP = 65536;

/** A started host process of any transport. */
export class HostProcess implements AsyncDisposable {
  readonly kind: Kind;
  readonly transport: Transport;
  readonly child: Deno.ChildProcess;
  /** gRPC transports: the client (one HTTP/2 connection). */
  grpc?: WireClient;
  /** `v1`: the connection. */
  v1?: V1Connection;
  /** `grpc-tcp`: every stdout line (the first is the endpoint). */
  readonly stdoutLines: string[] = [];
  #stderr = "";
  #pumps: Promise<unknown>[] = [];
  #relay?: { listener: Deno.Listener; dir: string; conn?: Deno.Conn };
  #closed?: Promise<Deno.CommandStatus>;

  /** Whether the process has exited (set as soon as its status is known). */
  exited = false;
  #relayClosed = false;

  /**
   * Whether a client can no longer use this host: it exited, its V1 stdout ended or stopped being
   * frames, or its grpc+stdio connection ended.
   */
  get broken(): boolean {
    return this.exited || (this.v1?.isEnded ?? false) || this.#relayClosed;
  }

  private constructor(kind: Kind, transport: Transport, child: Deno.ChildProcess) {
    this.kind = kind;
    this.transport = transport;
    this.child = child;
    void child.status.then(() => this.exited = true);
    this.#pumps.push(this.#pumpStderr());
  }

  /** The last 64 KiB of the child's stderr. */
  get stderr(): string {
    return this.#stderr;
  }

  async #pumpStderr(): Promise<void> {
    const decoder = new TextDecoder();
    for await (const chunk of this.child.stderr) {
      this.#stderr = (this.#stderr + decoder.decode(chunk, { stream: true })).slice(-STDERR_KEEP);
    }
  }

  /**
   * Starts a host and connects a client.
   *
   * @param kind which host
   * @param transport how to talk to it
   * @param extraArgs more arguments after the transport's (flags a scenario tries)
   * @returns the process, connected
   */
  static async start(kind: Kind, transport: Transport, extraArgs: string[] = []): Promise<HostProcess> {
    const child = new Deno.Command(await hostProgram(kind), {
      args: [...transportArgs(transport), ...extraArgs],
      clearEnv: true,
      env: hostEnv(),
      cwd: "/",
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const host = new HostProcess(kind, transport, child);
    try {
      if (transport === "v1") {
        host.v1 = new V1Connection(child.stdout, child.stdin);
      } else if (transport === "grpc-stdio") {
        const dir = Deno.makeTempDirSync({ prefix: "code-mode-reference-" });
        const path = `${dir}/h2.sock`;
        const listener = Deno.listen({ transport: "unix", path });
        host.#relay = { listener, dir };
        host.#pumps.push(host.#acceptOne(listener, child));
        host.grpc = new WireClient(`unix://${path}`);
      } else {
        const endpoint = await host.#readEndpoint();
        host.grpc = new WireClient(endpoint.replace(/^https?:\/\//, ""));
      }
    } catch (error) {
      await host.close();
      throw new Error(
        `${kind} host (${transport}) did not start: ${(error as Error).message}\n${host.stderr}`,
      );
    }
    return host;
  }

  async #acceptOne(listener: Deno.Listener, child: Deno.ChildProcess): Promise<void> {
    let first = true;
    for (;;) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch {
        return;
      }
      if (!first) {
        // One child serves one connection; a second one means the client reconnected.
        this.#stderr += "\n[suite] the gRPC client opened a second connection to a grpc+stdio host\n";
        conn.close();
        continue;
      }
      first = false;
      this.#relay!.conn = conn;
      this.#pumps.push(
        conn.readable.pipeTo(child.stdin).catch(() => child.stdin.close().catch(() => {}))
          .finally(() => this.#relayClosed = true),
        child.stdout.pipeTo(conn.writable).catch(() => {}).finally(() => this.#relayClosed = true),
      );
    }
  }

  async #readEndpoint(): Promise<string> {
    const reader = this.child.stdout.getReader();
    const decoder = new TextDecoder();
    let text = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`stdout ended before the endpoint line (${JSON.stringify(text)})`);
      text += decoder.decode(value, { stream: true });
      const newline = text.indexOf("\n");
      if (newline >= 0) {
        this.stdoutLines.push(text.slice(0, newline));
        text = text.slice(newline + 1);
        break;
      }
    }
    this.#pumps.push((async () => {
      for (;;) {
        const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
        if (done) break;
        text += decoder.decode(value, { stream: true });
        let newline;
        while ((newline = text.indexOf("\n")) >= 0) {
          this.stdoutLines.push(text.slice(0, newline));
          text = text.slice(newline + 1);
        }
      }
      if (text) this.stdoutLines.push(text);
    })());
    return this.stdoutLines[0];
  }

  /** Resolves with the exit status once the process has exited. */
  get status(): Promise<Deno.CommandStatus> {
    return this.child.status;
  }

  /**
   * Stops the host as its client would: the gRPC channel closes and stdin closes (stdio transports),
   * or SIGTERM (TCP); SIGKILL after `graceMs`. Idempotent.
   */
  close(graceMs = 10_000): Promise<Deno.CommandStatus> {
    this.#closed ??= (async () => {
      this.grpc?.close();
      if (this.transport === "grpc-tcp") {
        try {
          this.child.kill("SIGTERM");
        } catch { /* exited */ }
      }
      await this.v1?.end();
      try {
        this.#relay?.listener.close();
      } catch { /* closed */ }
      try {
        this.#relay?.conn?.close();
      } catch { /* closed */ }
      if (this.transport !== "grpc-stdio") {
        await this.child.stdin.close().catch(() => {});
      }
      const timer = setTimeout(() => {
        try {
          this.child.kill("SIGKILL");
        } catch { /* exited */ }
      }, graceMs);
      const status = await this.child.status;
      clearTimeout(timer);
      await Promise.allSettled(this.#pumps);
      if (this.#relay) await Deno.remove(this.#relay.dir, { recursive: true }).catch(() => {});
      return status;
    })();
    return this.#closed;
  }

  /** Kills the process at once (scenarios about a dying host). */
  kill(signal: Deno.Signal = "SIGKILL"): void {
    try {
      this.child.kill(signal);
    } catch { /* exited */ }
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close().then(() => {});
  }
}

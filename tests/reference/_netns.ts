/**
 * A loopback-only network namespace for the real Codex (`../../shared/CODEX-0.171.md`: the
 * config's offline settings already keep it on the machine; the namespace makes sure).
 * Folder-private.
 *
 * - One namespace per test run, held by `_netns_relay.ts` started through `unshare -n` (as root)
 *   or `unshare -rn` (a user namespace too, for unprivileged runs), after `ip link set lo up`.
 *   The relay forwards 127.0.0.1:PORT inside to the fake model's Unix socket outside.
 * - {@link LoopbackNet.command} starts any process inside it with `nsenter`: Codex, its
 *   app-server and the TCP hosts, which then reach each other and the relay on 127.0.0.1.
 * - Where no namespace can be made (no `unshare`, no privilege), or `CODEX_E2E_NETNS=off` asks
 *   for none, one log line says so and processes run as they are, against the fake model's own
 *   TCP port.
 *
 * @module
 */
import type { FakeModel } from "./_fake_model.ts";

const RELAY = new URL("./_netns_relay.ts", import.meta.url).pathname;

interface Mode {
  readonly name: string;
  readonly unshare: string[];
  readonly nsenter: (pid: number) => string[];
}

const MODES: Mode[] = [
  { name: "unshare -n", unshare: ["-n"], nsenter: (pid) => [`--net=/proc/${pid}/ns/net`] },
  {
    name: "unshare -rn",
    unshare: ["-r", "-n"],
    nsenter: (pid) => ["-t", `${pid}`, "-U", "-n", "--preserve-credentials"],
  },
];

async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string | undefined> {
  const decoder = new TextDecoder();
  let text = "";
  const reader = stream.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return undefined;
      text += decoder.decode(value, { stream: true });
      const end = text.indexOf("\n");
      if (end >= 0) return text.slice(0, end);
    }
  } finally {
    reader.releaseLock();
  }
}

/** Where Codex runs: a loopback-only namespace, or (fallback) the machine's own network. */
export class LoopbackNet implements AsyncDisposable {
  /** The port Codex's config points at (the relay's inside, the model's own outside). */
  readonly modelPort: number;
  /** How the namespace was made, or undefined when there is none. */
  readonly mode?: string;
  readonly #holder?: Deno.ChildProcess;
  readonly #enter: string[];

  private constructor(modelPort: number, mode?: string, holder?: Deno.ChildProcess, enter: string[] = []) {
    this.modelPort = modelPort;
    this.mode = mode;
    this.#holder = holder;
    this.#enter = enter;
  }

  /**
   * Makes the namespace and its relay to `model` (which must listen on a Unix socket).
   *
   * @param model the fake model
   * @param log where the one fallback line goes
   * @returns the namespace, or the fallback without one
   */
  static async start(model: FakeModel, log: (line: string) => void = console.error): Promise<LoopbackNet> {
    const reasons: string[] = [];
    if (Deno.env.get("CODEX_E2E_NETNS") === "off") reasons.push("CODEX_E2E_NETNS=off");
    else if (model.socket) {
      for (const mode of MODES) {
        let holder: Deno.ChildProcess | undefined;
        try {
          holder = new Deno.Command("unshare", {
            args: [
              ...mode.unshare,
              "--",
              "sh",
              "-c",
              'ip link set lo up && exec "$0" run --allow-all --quiet "$1" "$2"',
              Deno.execPath(),
              RELAY,
              model.socket,
            ],
            stdin: "piped",
            stdout: "piped",
            stderr: "piped",
          }).spawn();
        } catch (error) {
          reasons.push(`${mode.name}: ${(error as Error).message}`);
          break; // no unshare at all
        }
        const line = await firstLine(holder.stdout);
        const port = Number(line);
        if (line !== undefined && port > 0) {
          await holder.stdout.cancel().catch(() => {});
          await holder.stderr.cancel().catch(() => {});
          const enter = ["nsenter", ...mode.nsenter(holder.pid), "--"];
          const probe = await new Deno.Command(enter[0], {
            args: [...enter.slice(1), "true"],
            stdin: "null",
            stdout: "null",
            stderr: "piped",
          }).output();
          if (probe.success) return new LoopbackNet(port, mode.name, holder, enter);
          reasons.push(`${mode.name}: nsenter failed: ${new TextDecoder().decode(probe.stderr).trim()}`);
        } else {
          reasons.push(`${mode.name}: ${(await new Response(holder.stderr).text()).trim().split("\n")[0]}`);
        }
        await holder.stdin.close().catch(() => {});
        await holder.stdout.cancel().catch(() => {});
        await holder.stderr.cancel().catch(() => {});
        try {
          holder.kill("SIGKILL");
        } catch {
          // It ended by itself.
        }
        await holder.status;
      }
    }
    log(
      `codex e2e: no loopback-only network namespace (${
        reasons.join("; ") || "no Unix socket"
      }); Codex runs on the machine's network with the config's offline settings only`,
    );
    return new LoopbackNet(model.port);
  }

  /**
   * A command that runs inside the namespace.
   *
   * @param command the executable
   * @param options as for `Deno.Command`
   * @returns the command
   */
  command(command: string, options: Deno.CommandOptions = {}): Deno.Command {
    if (this.#enter.length === 0) return new Deno.Command(command, options);
    return new Deno.Command(this.#enter[0], {
      ...options,
      args: [...this.#enter.slice(1), command, ...(options.args ?? [])],
    });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#holder) return;
    await this.#holder.stdin.close().catch(() => {});
    await this.#holder.status;
  }
}

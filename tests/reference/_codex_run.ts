/**
 * Runs the real Codex against the fake model: `codex exec` (the host a child over stdio), and
 * `codex app-server` with `--code-mode-host` plus `codex exec --remote` (the host on TCP).
 * Folder-private.
 *
 * - Every run has its own directory: `codex-home/` (CODEX_HOME with the offline `config.toml` of
 *   `../../shared/CODEX-0.171.md`), `home/` (HOME, so nothing of the user's is read) and `work/`
 *   (the working directory).
 * - Processes start inside the {@link LoopbackNet}, with a small environment: PATH (Deno's
 *   directory first), HOME, CODEX_HOME, DENO_DIR (the machine's cache, so this checkout's host
 *   starts without downloads) and `CODEX_E2E_RUN` (the run's name, for host wrappers' logs).
 * - A process that outlives its deadline is killed and reported as timed out, never awaited
 *   forever.
 *
 * @module
 */
import { join } from "node:path";
import type { LoopbackNet } from "./_netns.ts";

/** What a finished process left. */
export interface Finished {
  readonly code: number;
  readonly signal: Deno.Signal | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly timedOut: boolean;
  /** Wall-clock milliseconds from spawn to exit. */
  readonly ms: number;
}

let denoDir: Promise<string> | undefined;

/** The machine's Deno cache directory (where this checkout's dependencies already are). */
export function machineDenoDir(): Promise<string> {
  denoDir ??= (async () => {
    const set = Deno.env.get("DENO_DIR");
    if (set) return set;
    const info = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json"],
      stdout: "piped",
      stderr: "null",
    })
      .output();
    return JSON.parse(new TextDecoder().decode(info.stdout)).denoDir as string;
  })();
  return denoDir;
}

/** The offline config of CODEX-0.171.md, pointing at the fake model on `port`. */
export function codexConfig(port: number): string {
  return `model = "gpt-5.5"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "danger-full-access"
suppress_unstable_features_warning = true
check_for_update_on_startup = false
[features]
code_mode = true
plugins = false
apps = false
remote_plugin = false
shell_snapshot = false
[analytics]
enabled = false
[model_providers.mock]
name = "mock"
base_url = "http://127.0.0.1:${port}/v1"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
supports_websockets = false
`;
}

/** A run's directories. */
export interface RunDir {
  readonly dir: string;
  readonly codexHome: string;
  readonly home: string;
  readonly work: string;
  readonly name: string;
}

/**
 * Makes a run's directories and its `config.toml`.
 *
 * @param parent where the run's directory goes
 * @param name the run's name (a directory name)
 * @param modelPort the fake model's port as Codex sees it
 * @returns the run's directories
 */
export async function makeRunDir(parent: string, name: string, modelPort: number): Promise<RunDir> {
  const dir = join(parent, name);
  const run = {
    dir,
    codexHome: join(dir, "codex-home"),
    home: join(dir, "home"),
    work: join(dir, "work"),
    name,
  };
  for (const d of [run.codexHome, run.home, run.work]) await Deno.mkdir(d, { recursive: true });
  await Deno.writeTextFile(join(run.codexHome, "config.toml"), codexConfig(modelPort));
  return run;
}

/** The environment every Codex process and host of a run gets. */
export async function runEnv(run: RunDir): Promise<Record<string, string>> {
  const denoBin = Deno.execPath().replace(/\/[^/]+$/, "");
  return {
    PATH: `${denoBin}:/usr/local/bin:/usr/bin:/bin`,
    HOME: run.home,
    CODEX_HOME: run.codexHome,
    DENO_DIR: await machineDenoDir(),
    CODEX_E2E_RUN: run.name,
  };
}

/** A started process whose output is collected; `finished` settles once it exits. */
export class Spawned implements AsyncDisposable {
  readonly child: Deno.ChildProcess;
  readonly finished: Promise<Finished>;
  #stdout = "";
  #stderr = "";
  #timedOut = false;
  readonly #listeners = new Set<() => void>();

  constructor(command: Deno.Command, deadlineMs: number) {
    const started = performance.now();
    const child = command.spawn();
    this.child = child;
    const timer = setTimeout(() => {
      this.#timedOut = true;
      try {
        this.child.kill("SIGKILL");
      } catch {
        // Gone meanwhile.
      }
    }, deadlineMs);
    const pump = async (stream: ReadableStream<Uint8Array>, into: "out" | "err") => {
      const decoder = new TextDecoder();
      for await (const chunk of stream) {
        const text = decoder.decode(chunk, { stream: true });
        if (into === "out") this.#stdout += text;
        else this.#stderr += text;
        for (const listener of this.#listeners) listener();
      }
    };
    this.finished = (async () => {
      const [status] = await Promise.all([
        child.status,
        pump(child.stdout, "out"),
        pump(child.stderr, "err"),
      ]);
      clearTimeout(timer);
      for (const listener of this.#listeners) listener();
      return {
        code: status.code,
        signal: status.signal,
        stdout: this.#stdout,
        stderr: this.#stderr,
        timedOut: this.#timedOut,
        ms: performance.now() - started,
      };
    })();
  }

  /**
   * Resolves with the first match of `pattern` in stdout or stderr (so far or later).
   *
   * @param pattern what to look for
   * @returns the match
   * @throws {Error} when the process ends first
   */
  async match(pattern: RegExp): Promise<RegExpMatchArray> {
    let ended = false;
    this.finished.then(() => ended = true);
    for (;;) {
      const found = this.#stdout.match(pattern) ?? this.#stderr.match(pattern);
      if (found) return found;
      if (ended) {
        throw new Error(`the process ended before printing ${pattern}:\n${this.#stdout}\n${this.#stderr}`);
      }
      const { promise, resolve } = Promise.withResolvers<void>();
      this.#listeners.add(resolve);
      this.finished.then(() => resolve());
      await promise;
      this.#listeners.delete(resolve);
    }
  }

  /** SIGTERM, then SIGKILL after 5 s; awaits the exit. */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      this.child.kill("SIGTERM");
    } catch {
      // Already gone.
    }
    const late = setTimeout(() => {
      try {
        this.child.kill("SIGKILL");
      } catch {
        // Gone.
      }
    }, 5_000);
    await this.finished;
    clearTimeout(late);
  }
}

/** A Codex process to run. */
export interface CodexOptions {
  /** The `codex` to run (a shadow's `bin/codex`, or npm's shim). */
  readonly codex: string;
  /** The prompt (the fake model's key for the run). */
  readonly prompt: string;
  /** Extra arguments before the prompt (e.g. `--disable code_mode_host_grpc`); `codex exec` only. */
  readonly args?: readonly string[];
  /** Kill it after this long (default 90 s). */
  readonly deadlineMs?: number;
}

/**
 * Runs `codex exec --skip-git-repo-check --ephemeral --color never -C WORK [args] PROMPT` with
 * stdin from /dev/null, inside `net`.
 *
 * @param net the namespace
 * @param run the run's directories
 * @param options which `codex`, the prompt, extra arguments and the deadline
 * @returns how it ended
 */
export async function codexExec(net: LoopbackNet, run: RunDir, options: CodexOptions): Promise<Finished> {
  const command = net.command(options.codex, {
    args: [
      "exec",
      "--skip-git-repo-check",
      "--ephemeral",
      "--color",
      "never",
      "-C",
      run.work,
      ...(options.args ?? []),
      options.prompt,
    ],
    clearEnv: true,
    env: await runEnv(run),
    cwd: run.work,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  });
  return await new Spawned(command, options.deadlineMs ?? 90_000).finished;
}

/**
 * Starts a code-mode host on TCP inside `net`: `COMMAND --listen grpc://127.0.0.1:0`, and reads
 * the `http://127.0.0.1:PORT` line it prints.
 *
 * @param net the namespace
 * @param command the host executable
 * @param run the run (its environment)
 * @returns the host process and its URL
 */
export async function startTcpHost(
  net: LoopbackNet,
  command: string,
  run: RunDir,
): Promise<{ host: Spawned; url: string }> {
  const host = new Spawned(
    net.command(command, {
      args: ["--listen", "grpc://127.0.0.1:0"],
      clearEnv: true,
      env: await runEnv(run),
      cwd: run.work,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }),
    300_000,
  );
  try {
    const [url] = await host.match(/^http:\/\/127\.0\.0\.1:\d+$/m);
    return { host, url };
  } catch (error) {
    await host[Symbol.asyncDispose]();
    throw error;
  }
}

/**
 * Runs one turn through `codex app-server --listen ws://127.0.0.1:0 --code-mode-host HOST`
 * (working directory = the run's `work/`) and `codex exec --remote ws://… --color never PROMPT`
 * (`--remote` takes no other arguments: `options.args` must be empty).
 *
 * @param net the namespace
 * @param run the run's directories
 * @param options which `codex`, the host's URL, the prompt and the deadline
 * @returns how `codex exec --remote` ended, and the app-server's stderr
 */
export async function codexRemote(
  net: LoopbackNet,
  run: RunDir,
  options: CodexOptions & { readonly hostUrl: string },
): Promise<Finished & { appServerStderr: string }> {
  if (options.args?.length) throw new TypeError("codex exec --remote takes no extra arguments");
  const env = await runEnv(run);
  await using server = new Spawned(
    net.command(options.codex, {
      args: ["app-server", "--listen", "ws://127.0.0.1:0", "--code-mode-host", options.hostUrl],
      clearEnv: true,
      env,
      cwd: run.work,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }),
    300_000,
  );
  const [, url] = await server.match(/listening on: (ws:\/\/127\.0\.0\.1:\d+)/);
  const exec = await new Spawned(
    net.command(options.codex, {
      args: ["exec", "--remote", url, "--color", "never", options.prompt],
      clearEnv: true,
      env,
      cwd: run.work,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }),
    options.deadlineMs ?? 90_000,
  ).finished;
  await server[Symbol.asyncDispose]();
  return { ...exec, appServerStderr: (await server.finished).stderr };
}

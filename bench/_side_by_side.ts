/**
 * What `bench/reference.ts` and `bench/scale.ts` share (folder-private): the Python measurement client
 * (`_grpc_client.py`, installed from Debian when missing), the two hosts started as their users start
 * them, and the memory and CPU of a host's whole process tree from `/proc`.
 *
 * - The client is Debian's `/usr/bin/python3` with `python3-grpcio` (gRPC's C core) and
 *   `python3-protobuf`; its message classes come from Debian's `protoc` run on this checkout's
 *   `proto/` at start (nothing is fetched but the three Debian packages). It adds the same cost to
 *   both hosts, and it is not the Deno process under test.
 * - Codex's host is `codex-code-mode-host` 0.171 from the cache that `tests/reference/_codex.ts`
 *   installs (never downloaded again once there).
 * - This host is `deno run --allow-all cli/main.ts` of `BENCH_HOST_DIR` (default: this checkout; a
 *   checkout from before `cli/` has `host/main.ts`),
 *   with no flags but the ones Codex's host has too (`--listen`), unless a row says otherwise.
 *
 * @module
 */
import { dirname, join } from "node:path";
import { ensureCodex } from "../tests/reference/_codex.ts";

const MIB = 1024;
const PYTHON = "/usr/bin/python3";
const DEBIAN_PACKAGES = ["python3-grpcio", "python3-protobuf", "protobuf-compiler"];

/** This checkout (its `proto/` builds the client's messages). */
export const REPO = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
/** The checkout whose host is measured. */
export const HOST_DIR = Deno.env.get("BENCH_HOST_DIR") ?? REPO;
/**
 * `BENCH_FLOOR=1`: "ours" is `_stack_floor.ts`, the host's gRPC stack with nothing behind it, in
 * place of this host (its rows that need cells, memory or a Terminate are left out).
 */
export const FLOOR = Deno.env.get("BENCH_FLOOR") === "1";

export const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function run(command: string, args: string[]): Promise<Deno.CommandOutput | undefined> {
  try {
    return await new Deno.Command(command, { args, stdin: "null", stdout: "piped", stderr: "piped" })
      .output();
  } catch {
    return undefined; // not installed
  }
}

/** `protoc` and the Python modules are there, or installed with apt-get (as root), or the error says how. */
async function ensureDebianPackages(): Promise<void> {
  const ready = async () =>
    (await run(PYTHON, ["-c", "import grpc, google.protobuf"]))?.success === true &&
    (await run("protoc", ["--version"]))?.success === true;
  if (await ready()) return;
  const how = `apt-get install -y ${DEBIAN_PACKAGES.join(" ")}`;
  if (Deno.uid() !== 0 || (await run("apt-get", ["--version"])) === undefined) {
    throw new Error(`the Python gRPC client needs Debian's ${DEBIAN_PACKAGES.join(", ")}: run \`${how}\``);
  }
  console.error(`bench: installing the Python gRPC client: ${how}`);
  let installed = await run("apt-get", ["install", "-y", ...DEBIAN_PACKAGES]);
  if (!installed?.success) {
    await run("apt-get", ["update"]);
    installed = await run("apt-get", ["install", "-y", ...DEBIAN_PACKAGES]);
  }
  if (!installed?.success || !(await ready())) {
    const said = installed ? new TextDecoder().decode(installed.stderr).trim() : "";
    throw new Error(`\`${how}\` did not make the Python gRPC client usable: ${said}`);
  }
}

/** The Python measurement client: one JSON command per line, one JSON reply per line. */
export class PythonClient {
  #child: Deno.ChildProcess;
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #lines: ReadableStreamDefaultReader<string>;
  #buffered = "";
  #generated: string;

  private constructor(child: Deno.ChildProcess, generated: string) {
    this.#child = child;
    this.#generated = generated;
    this.#writer = child.stdin.getWriter();
    this.#lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  }

  /** Installs what the client needs (if missing), builds its messages and starts it. */
  static async start(): Promise<PythonClient> {
    await ensureDebianPackages();
    const generated = await Deno.makeTempDir({ prefix: "bench-grpc-py-" });
    const protoc = await run("protoc", [
      `--proto_path=${REPO}/proto`,
      `--python_out=${generated}`,
      "codex/code_mode/v1/code_mode_host.proto",
    ]);
    if (!protoc?.success) throw new Error(`protoc: ${new TextDecoder().decode(protoc?.stderr)}`);
    const child = new Deno.Command(PYTHON, {
      args: ["-u", join(REPO, "bench", "_grpc_client.py"), generated],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
      // The launcher of the stdio rows finds the same Deno that runs this script.
      env: { PATH: `${dirname(Deno.execPath())}:${Deno.env.get("PATH") ?? "/usr/bin:/bin"}` },
    }).spawn();
    return new PythonClient(child, generated);
  }

  /** Sends one command and returns its reply; a reply with `error` throws it. */
  async call(command: Record<string, unknown>): Promise<Record<string, unknown>> {
    await this.#writer.write(new TextEncoder().encode(JSON.stringify(command) + "\n"));
    while (!this.#buffered.includes("\n")) {
      const { done, value } = await this.#lines.read();
      if (done) throw new Error(`the Python client exited during ${JSON.stringify(command)}`);
      this.#buffered += value;
    }
    const at = this.#buffered.indexOf("\n");
    const reply = JSON.parse(this.#buffered.slice(0, at));
    this.#buffered = this.#buffered.slice(at + 1);
    if (reply.error !== undefined) throw new Error(`${JSON.stringify(command)}: ${reply.error}`);
    return reply;
  }

  async close(): Promise<void> {
    await this.#writer.close().catch(() => {});
    await this.#child.status;
    await this.#lines.cancel().catch(() => {});
    await Deno.remove(this.#generated, { recursive: true });
  }
}

/** The CLI entry of `HOST_DIR`: `cli/main.ts`, or `host/main.ts` in a checkout from before `cli/`. */
function hostEntry(): string {
  const entry = join(HOST_DIR, "cli", "main.ts");
  try {
    Deno.statSync(entry);
    return entry;
  } catch {
    return join(HOST_DIR, "host", "main.ts");
  }
}

/** Which host: this one or Codex's. */
export type HostKind = "ours" | "codex";

/** The path of Codex's own host binary (the cached reference). */
export async function codexHostPath(): Promise<string> {
  return (await ensureCodex()).host;
}

/**
 * The argv that starts a host as its users start it.
 *
 * - `tcp`: `--listen grpc://127.0.0.1:0` (the endpoint is the first stdout line); this host as
 *   `deno run --allow-all cli/main.ts` (`deno task serve`).
 * - `stdio`: `--listen grpc+stdio://`, as Codex spawns its host; this host through its launcher
 *   `bin/codex-code-mode-host` (what `deno task codex:install` points Codex at).
 */
export async function hostArgv(kind: HostKind, transport: "tcp" | "stdio", extra: string[] = []) {
  const listen = transport === "tcp" ? ["--listen", "grpc://127.0.0.1:0"] : ["--listen", "grpc+stdio://"];
  if (kind === "codex") return [await codexHostPath(), ...listen, ...extra];
  if (FLOOR) {
    return [Deno.execPath(), "run", "--allow-all", join(REPO, "bench", "_stack_floor.ts"), ...listen];
  }
  if (transport === "stdio") return [join(HOST_DIR, "bin", "codex-code-mode-host"), ...listen, ...extra];
  return [Deno.execPath(), "run", "--allow-all", hostEntry(), ...listen, ...extra];
}

/** A host in a process of its own on `127.0.0.1:0`; its stderr is kept (the last 64 KiB). */
export interface RunningHost {
  readonly kind: HostKind;
  readonly pid: number;
  /** `127.0.0.1:PORT` */
  readonly target: string;
  /** The end of what it wrote on stderr. */
  stderrTail(): string;
  /** SIGTERM, then await the exit of the host (and of its tree: it stops its runtimes). */
  stop(): Promise<void>;
}

/**
 * Starts a host on `grpc://127.0.0.1:0` and reads its endpoint line.
 *
 * @throws {Error} when it exits first (with the end of its stderr)
 */
export async function startHost(kind: HostKind, extra: string[] = []): Promise<RunningHost> {
  const [command, ...args] = await hostArgv(kind, "tcp", extra);
  const child = new Deno.Command(command, {
    args,
    cwd: HOST_DIR,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  })
    .spawn();
  let tail = "";
  const drained = child.stderr.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream({ write: (text) => void (tail = (tail + text).slice(-65_536)) }),
  ).catch(() => {});
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let printed = "";
  while (!printed.includes("\n")) {
    const { done, value } = await lines.read();
    if (done) {
      await child.status;
      await drained;
      throw new Error(`${kind} host ${args.join(" ")} exited before its endpoint line: ${tail.trim()}`);
    }
    printed += value;
  }
  const target = new URL(printed.split("\n")[0].trim()).host;
  return {
    kind,
    pid: child.pid,
    target,
    stderrTail: () => tail,
    async stop() {
      const tree = treePids(child.pid);
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      await child.status;
      await lines.cancel().catch(() => {});
      await drained;
      // The runtimes the host was stopping, now children of init: wait for them too (10 s at most).
      const alive = () => tree.filter((pid) => exists(`/proc/${pid}`));
      for (let i = 0; i < 100 && alive().length > 0; i++) await pause(100);
    },
  };
}

/**
 * Whether this host accepts `--limit NAME=VALUE` (a limit that other work may not have added yet):
 * a host started with it either prints its endpoint or exits with `unknown limit`.
 */
export async function acceptsLimit(name: string, value: number): Promise<boolean> {
  try {
    const host = await startHost("ours", ["--warm-sessions", "0", "--limit", `${name}=${value}`]);
    await host.stop();
    return true;
  } catch (error) {
    if (String(error).includes("unknown limit")) return false;
    throw error;
  }
}

/** Every process's parent, read once from `/proc/<pid>/stat`. */
function parents(): Map<number, number> {
  const map = new Map<number, number>();
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      // After the parenthesised command name: state, then the parent PID.
      map.set(Number(entry.name), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch { /* gone meanwhile */ }
  }
  return map;
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** `root` and all its descendants (runtimes, their bubblewrap processes); empty once `root` is gone. */
export function treePids(root: number): number[] {
  const map = parents();
  if (!map.has(root)) return [];
  const children = new Map<number, number[]>();
  for (const [pid, parent] of map) children.set(parent, [...children.get(parent) ?? [], pid]);
  const tree = [root];
  for (let i = 0; i < tree.length; i++) tree.push(...children.get(tree[i]) ?? []);
  return tree;
}

/** Memory of a process tree in MiB, summed over its processes' `smaps_rollup`. */
export interface TreeMemory {
  /** Proportional set size: shared pages divided among every process that maps them. */
  pss: number;
  /** Private pages only (Private_Clean + Private_Dirty): what the tree alone holds. */
  uss: number;
  rss: number;
  processes: number;
}

export function treeMemory(root: number): TreeMemory {
  const total = { pss: 0, uss: 0, rss: 0, processes: 0 };
  for (const pid of treePids(root)) {
    let rollup;
    try {
      rollup = Deno.readTextFileSync(`/proc/${pid}/smaps_rollup`);
    } catch {
      continue; // exited meanwhile
    }
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(rollup)?.[1] ?? 0);
    total.pss += kb("Pss") / MIB;
    total.uss += (kb("Private_Clean") + kb("Private_Dirty")) / MIB;
    total.rss += kb("Rss") / MIB;
    total.processes++;
  }
  return total;
}

/** CPU ticks (user + system) of the tree's live processes, and its PIDs. */
function treeTicks(root: number): { ticks: number; pids: string } {
  let ticks = 0;
  const pids = treePids(root);
  for (const pid of pids) {
    try {
      const fields = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
      ticks += Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15)
    } catch { /* gone */ }
  }
  return { ticks, pids: pids.join(",") };
}

/**
 * Waits `atLeastMs`, then until the tree is idle: the same processes over 500 ms, using at most
 * 5 ticks of CPU (~10% of a core) in them. Returns the total wait in ms, or `undefined` when the
 * tree was still busy after 20 s (measured anyway; the caller notes it).
 */
export async function waitIdle(root: number, atLeastMs: number): Promise<number | undefined> {
  const start = performance.now();
  await pause(atLeastMs);
  while (performance.now() - start < atLeastMs + 20_000) {
    const before = treeTicks(root);
    await pause(500);
    const after = treeTicks(root);
    if (before.pids === after.pids && after.ticks - before.ticks <= 5) return performance.now() - start;
  }
  return undefined;
}

/** The 1, 5 and 15 minute load averages. */
export function loadAverage(): string {
  return Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
}

/** The measured checkout's short commit, with `+dirty` when its host's files have uncommitted changes. */
export async function hostCommit(): Promise<string> {
  const head = await run("git", ["-C", HOST_DIR, "rev-parse", "--short", "HEAD"]);
  const status = await run("git", [
    "-C",
    HOST_DIR,
    "status",
    "--porcelain",
    "--untracked-files=no",
    "--",
    "host",
    "worker",
    "proto",
    "bin",
    "deno.json",
    "deno.lock",
  ]);
  const commit = head?.success ? new TextDecoder().decode(head.stdout).trim() : "unknown";
  return status?.success && status.stdout.length > 0 ? `${commit}+dirty` : commit;
}

/** `ours / codex` as `1.23×`. */
export function ratio(ours: number | undefined, codex: number | undefined): string {
  return ours === undefined || codex === undefined || codex === 0 ? "" : `${(ours / codex).toFixed(2)}×`;
}

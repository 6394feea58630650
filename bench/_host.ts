/**
 * Helpers shared by the benchmark scripts: percentiles, timing, and a host started as `deno task
 * serve` runs it (its own process) with a raw gRPC client. Folder-private.
 *
 * @module
 */
import { createChannel, createClient } from "nice-grpc";
import { HealthDefinition } from "nice-grpc-server-health";
import { codeModeHostDefinition } from "../proto/loader.ts";

export function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export async function time(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

export const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const options = { "grpc.max_receive_message_length": 67_108_864, "grpc.use_local_subchannel_pool": 1 };

/** More flags for the measured host (`BENCH_HOST_ARGS`, split on spaces), as in `bench:reference`. */
const HOST_ARGS = (Deno.env.get("BENCH_HOST_ARGS") ?? "").split(" ").filter((arg) => arg !== "");

/**
 * Starts the host as `deno task serve` runs it (`deno run --allow-all cli/main.ts`), in a process
 * of its own, as a harness meets it: client and host then do not share one JS thread, where the
 * client's work on the `started` event would stall the host's.
 */
export async function measureHost(warmSessions: number, extraArgs: string[] = []) {
  const { child, line, lines } = await spawnDeno([
    "run",
    "--allow-all",
    new URL("../cli/main.ts", import.meta.url).pathname,
    "--listen",
    "grpc://127.0.0.1:0",
    "--warm-sessions",
    String(warmSessions),
    "--log-level",
    "error",
    ...extraArgs,
    ...HOST_ARGS,
  ], "the host");
  const address = new URL(line).host;
  const channel = createChannel(address, undefined, options);
  // deno-lint-ignore no-explicit-any
  const client = createClient(codeModeHostDefinition() as any, channel) as any;
  const health = createClient(HealthDefinition, channel);
  return {
    pid: child.pid,
    address,
    channel,
    client,
    health,
    async shutdown() {
      channel.close();
      child.kill("SIGTERM");
      const status = await child.status;
      if (!status.success) console.error(`note: the host exited with ${JSON.stringify(status)}`);
      await lines.cancel().catch(() => {});
    },
  };
}

/**
 * Spawns `deno` with `args` (stdout piped, stderr inherited) and reads the first line it prints.
 *
 * @param args the arguments after `deno`
 * @param what the process, for the error when it exits first
 */
export async function spawnDeno(args: string[], what: string) {
  const child = new Deno.Command(Deno.execPath(), { args, stdin: "null", stdout: "piped", stderr: "inherit" })
    .spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let printed = "";
  while (!printed.includes("\n")) {
    const { done, value } = await lines.read();
    if (done) throw new Error(`${what} exited before printing its first line`);
    printed += value;
  }
  return { child, line: printed.split("\n")[0].trim(), lines };
}

/** PIDs of the processes whose parent is `pid` (a host's session runtimes). */
export function childPids(pid: number): number[] {
  const pids: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      // Fields after the parenthesised command name: state, then the parent PID.
      const parent = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (parent === pid) pids.push(Number(entry.name));
    } catch { /* gone meanwhile */ }
  }
  return pids;
}

export async function openSession(
  client: { openSession: (r: unknown, o: unknown) => AsyncIterable<{ opened?: { sessionId: string } }> },
) {
  const abort = new AbortController();
  const iterator = client.openSession({}, { signal: abort.signal })[Symbol.asyncIterator]();
  const first = await iterator.next();
  return { id: first.value.opened!.sessionId, close: () => abort.abort() };
}

let executions = 0; // shared by every Execute of the script

/** The next number of the script's execution IDs. */
export function nextExecution(): number {
  return ++executions;
}

export async function executeText(
  client: { execute: (r: unknown) => AsyncIterable<unknown> },
  sessionId: string,
) {
  for await (
    const _ of client.execute({
      sessionId,
      executionId: `b${nextExecution()}`,
      toolCallId: "c",
      source: 'text("x")',
    })
  ) {
    // drain
  }
}

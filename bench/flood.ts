/**
 * Output flood figures (SPEC §8.10, issue 5), measured in one run against a real host on
 * 127.0.0.1:0 with a real session runtime (`deno task bench:flood`). Prints a Markdown table.
 *
 * - Floor: a bare Deno subprocess writing the same bytes to a pipe in the same pieces, read by
 *   this process (what moving the bytes between two processes costs at least).
 * - Server-mode flood: one cell prints 256 MiB in 64 KiB pieces, observed by its Execute; time,
 *   throughput, and the peak growth of the host's and the runtime's resident memory (VmRSS sampled
 *   every 20 ms) over their values just before the cell.
 * - Client-mode flood: the same cell in Client mode (the window outgrows one message; the host
 *   retains at most `maxMessageBytes` and then only counts).
 *
 * @module
 */
import { createChannel, createClient } from "nice-grpc";
import { startGrpcHost } from "../host/doors/grpc/server.ts";
import { Logger } from "../host/ops/log.ts";
import { codeModeHostDefinition } from "../proto/loader.ts";

const MIB = 1024 * 1024;
const PIECE = 64 * 1024;
const TOTAL = Number(Deno.env.get("BENCH_FLOOD_MIB") ?? 256) * MIB;
const PIECES = TOTAL / PIECE;

function rss(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

/** Samples the peak RSS of the processes while `run` runs. */
async function peakRss(
  pids: number[],
  run: () => Promise<unknown>,
): Promise<{ ms: number; peaks: number[] }> {
  const peaks = pids.map(rss);
  const timer = setInterval(() => pids.forEach((pid, i) => peaks[i] = Math.max(peaks[i], rss(pid))), 20);
  const start = performance.now();
  try {
    await run();
  } finally {
    clearInterval(timer);
  }
  const ms = performance.now() - start;
  pids.forEach((pid, i) => peaks[i] = Math.max(peaks[i], rss(pid)));
  return { ms, peaks };
}

async function pipeFloor(): Promise<number> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `const b = new Uint8Array(${PIECE}).fill(121); for (let i = 0; i < ${PIECES}; i++) { let o = 0; while (o < b.length) o += await Deno.stdout.write(b.subarray(o)); }`,
    ],
    stdout: "piped",
  }).spawn();
  const start = performance.now();
  let bytes = 0;
  for await (const chunk of child.stdout) bytes += chunk.length;
  await child.status;
  if (bytes !== TOTAL) throw new Error(`pipe floor read ${bytes} bytes`);
  return performance.now() - start;
}

const host = await startGrpcHost({ listen: "127.0.0.1:0", warmSessions: 1, log: new Logger("error") });
const channel = createChannel(`127.0.0.1:${host.port}`, undefined, {
  "grpc.max_receive_message_length": 67_108_864,
});
// deno-lint-ignore no-explicit-any
const client = createClient(codeModeHostDefinition() as any, channel) as any;
const rows: string[][] = [];

async function flood(mode: 1 | 2): Promise<void> {
  const abort = new AbortController();
  const lease = client.openSession({ outputTruncation: mode }, { signal: abort.signal })
    [Symbol.asyncIterator]();
  const sessionId = (await lease.next()).value.opened.sessionId;
  const runtimePid = host.state.session(sessionId)!.runtimePid!;
  const before = [rss(Deno.pid), rss(runtimePid)];
  let outcome: { contentItems: unknown[] } | undefined;
  let failure: string | undefined;
  const { ms, peaks } = await peakRss([Deno.pid, runtimePid], async () => {
    try {
      for await (
        const event of client.execute({
          sessionId,
          executionId: `flood-${mode}`,
          toolCallId: "c",
          source:
            `const piece = "y".repeat(${PIECE}); for (let i = 0; i < ${PIECES}; i++) text(piece); text("last")`,
          yieldTimeMs: 600_000,
          maxOutputTokens: 1_000_000,
        })
      ) if (event.outcome) outcome = event.outcome;
    } catch (error) {
      failure = (error as Error).message.replace(/^.*Execute /, "");
    }
  });
  abort.abort();
  const growth = peaks.map((peak, i) => ((peak - before[i]) / MIB).toFixed(1));
  rows.push([
    `${mode === 2 ? "Server" : "Client"}-mode flood, ${TOTAL / MIB} MiB in 64 KiB pieces`,
    ms.toFixed(0),
    (TOTAL / MIB / (ms / 1000)).toFixed(0),
    growth[0],
    growth[1],
    failure ?? `${outcome?.contentItems.length} items`,
  ]);
}

const floorMs = await pipeFloor();
rows.push([
  "pipe floor: a Deno process writing the same pieces",
  floorMs.toFixed(0),
  (TOTAL / MIB / (floorMs / 1000)).toFixed(0),
  "",
  "",
  "",
]);
await flood(2);
await flood(1);
channel.close();
await host.shutdown();

console.log(
  "| measurement | ms | MiB/s | host RSS peak growth (MiB) | runtime RSS peak growth (MiB) | result |",
);
console.log("| --- | ---: | ---: | ---: | ---: | --- |");
for (const row of rows) console.log(`| ${row.join(" | ")} |`);
console.log(
  `\nFlood time / pipe floor: Server ${(Number(rows[1][1]) / floorMs).toFixed(1)}×, Client ${
    (Number(rows[2][1]) / floorMs).toFixed(1)
  }×`,
);

/**
 * Memory per cell (issues 17 and 20), in one run against a real host on 127.0.0.1:0: one session
 * runs `BENCH_SOAK_CELLS` (default 10,000) small cells back to back (a text, a stored value, a
 * timer, a tool-free await), so that cell Workers are reused (SPEC 1.2 §5.1) and retired by the
 * runtime's policy, and the resident memory (VmRSS) of the host process and of the session's
 * runtime is printed at the start, after the warm-up (the first tenth: compiled code, pools and
 * caches filled) and every tenth after it, with the spread of the runtime's RSS after the warm-up
 * (target: flat within 32 MiB) and the growth per cell over the second half. `deno task bench:soak`;
 * prints a Markdown table. No timing assertions: figures only.
 *
 * @module
 */
import { createChannel, createClient } from "nice-grpc";
import { startGrpcHost } from "../host/doors/grpc/server.ts";
import { Logger } from "../host/ops/log.ts";
import { codeModeHostDefinition } from "../proto/loader.ts";

const MIB = 1024 * 1024;
const CELLS = Number(Deno.env.get("BENCH_SOAK_CELLS") ?? 10_000);
const SOURCE =
  'text("x"); store("k", { n: 1 }); await new Promise((r) => setTimeout(r, 0)); text(load("k").n)';

function rss(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

const host = await startGrpcHost({ listen: "127.0.0.1:0", warmSessions: 1, log: new Logger("error") });
const channel = createChannel(`127.0.0.1:${host.port}`);
// deno-lint-ignore no-explicit-any
const client = createClient(codeModeHostDefinition() as any, channel) as any;
const abort = new AbortController();
const lease = client.openSession({}, { signal: abort.signal })[Symbol.asyncIterator]();
const sessionId = (await lease.next()).value.opened.sessionId;
// Read the lease (each cell's CellClosed arrives there), as a harness does: an unread lease fills up.
const leaseRead = (async () => {
  try {
    while (!(await lease.next()).done) { /* drop */ }
  } catch { /* ended by abort() */ }
})();
const runtimePid = host.state.session(sessionId)!.runtimePid!;

const rows: { cells: number; host: number; runtime: number; ms: number }[] = [];
const start = performance.now();
const sample = (cells: number) =>
  rows.push({ cells, host: rss(Deno.pid), runtime: rss(runtimePid), ms: performance.now() - start });
sample(0);
for (let i = 1; i <= CELLS; i++) {
  let completed = false;
  for await (
    const event of client.execute({ sessionId, executionId: `soak-${i}`, toolCallId: "c", source: SOURCE })
  ) if (event.outcome?.completed) completed = true;
  if (!completed) throw new Error(`cell ${i} did not complete`);
  if (i % Math.max(1, Math.floor(CELLS / 10)) === 0 || i === CELLS) sample(i);
}
abort.abort();
await leaseRead;
channel.close();
await host.shutdown();

console.log("| cells | host RSS (MiB) | runtime RSS (MiB) | elapsed (s) |");
console.log("| ---: | ---: | ---: | ---: |");
for (const r of rows) {
  console.log(
    `| ${r.cells} | ${(r.host / MIB).toFixed(1)} | ${(r.runtime / MIB).toFixed(1)} | ${
      (r.ms / 1000).toFixed(1)
    } |`,
  );
}
const warm = rows.filter((r) => r.cells >= CELLS / 10).map((r) => r.runtime);
const spread = (Math.max(...warm) - Math.min(...warm)) / MIB;
console.log(
  `\nRuntime RSS: start ${(rows[0].runtime / MIB).toFixed(1)} MiB, after the warm-up ${
    (warm[0] / MIB).toFixed(1)
  } MiB, middle ${(rows.find((r) => r.cells >= CELLS / 2)!.runtime / MIB).toFixed(1)} MiB, end ${
    (rows.at(-1)!.runtime / MIB).toFixed(1)
  } MiB; spread after the warm-up ${spread.toFixed(1)} MiB`,
);
const half = rows.find((r) => r.cells >= CELLS / 2)!;
const last = rows.at(-1)!;
const perCell = (a: number, b: number) => ((b - a) / (last.cells - half.cells) / 1024).toFixed(2);
console.log(
  `\nSecond half, growth per cell: host ${perCell(half.host, last.host)} KiB, runtime ${
    perCell(half.runtime, last.runtime)
  } KiB; ${(CELLS / (last.ms / 1000)).toFixed(0)} cells/s`,
);

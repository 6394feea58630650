/**
 * This host beside Codex's own `codex-code-mode-host` 0.171, in one run (`deno task bench:reference`,
 * issue 28): the same rows measured on both by one Python gRPC client (`_grpc_client.py`; see
 * `_side_by_side.ts` for why and how it is installed), rounds interleaved, and each figure the median
 * of the rounds. Prints a Markdown table (this host, Codex's host, ratio ours / Codex's: above 1× is
 * slower for times and memory, faster for cells/s), notes, and one JSON line with every figure.
 *
 * - Both hosts start as their users start them, with no flags that Codex's host lacks: this one as
 *   `deno run --allow-all cli/main.ts --listen grpc://127.0.0.1:0` (defaults: two warm runtimes,
 *   the OS sandbox when bubblewrap works, info logs on stderr), Codex's as
 *   `codex-code-mode-host --listen grpc://127.0.0.1:0`. One channel (one HTTP/2 connection) each,
 *   as Codex keeps one; every session reads its lease.
 * - A round measures each row on one host and then on the other before the next row; the first host
 *   alternates from round to round (A B, B A, …), so neither always goes first. Before the first
 *   round every row runs once on both, discarded (sessions opened, first cells run).
 * - Latency rows: the p50 of the round's samples; rate rows: cells per second over 2 s of back-to-back
 *   `text("x")` cells (with the client's own CPU share, to show when the client is the limit).
 * - PSS per idle session: a fresh host, idle (its CPU quiet, at least 1 s), the PSS of its whole
 *   process tree (host, runtimes, bubblewrap wrappers; `/proc/<pid>/smaps_rollup`); then 20 sessions
 *   each running one cell, idle again (at least 1.5 s; 2.5 s with `idleRuntimeReleaseMs=1000`), the
 *   tree's PSS again: (after − before) / 20. PSS divides the pages of a binary among all processes
 *   that map it, this machine's other ones included, so the notes also give the private pages (USS).
 *   The row with `--limit idleRuntimeReleaseMs=1000` runs only when this host accepts that limit.
 * - Cold start: the client spawns the host as Codex does, with `--listen grpc+stdio://` (gRPC over
 *   its pipes, reached through a Unix-socket relay in the client; this host through its launcher
 *   `bin/codex-code-mode-host`) and with `--listen grpc://127.0.0.1:0` (the endpoint read from its
 *   first stdout line), opens a session and runs `text("x")`: the time from the spawn to the outcome,
 *   with the steps in between in the notes.
 *
 * Environment: `BENCH_ROUNDS` (default 5); `BENCH_HOST_ARGS` (more flags for this host in the time
 * and rate rows, split on spaces); `BENCH_ONLY=key,...` runs only those rows (`b2b`, `rate1`,
 * `gap`, `store`, `tool`, `large`, `terminate`, `open`, `first`, `rate8`, `pss`, `pss-release`,
 * `cold-stdio`, `cold-tcp`; a prefix before `-` selects all its rows, e.g. `cold`); `BENCH_HOST_DIR`
 * measures the host of another checkout; `BENCH_FLOOR=1` measures `_stack_floor.ts` (the host's gRPC
 * stack with nothing behind it) in its place, without the PSS and Terminate rows. No assertions on
 * times: figures only; every cell's outcome is checked, and a wrong one stops the run.
 *
 * @module
 */
import {
  acceptsLimit,
  FLOOR,
  HOST_DIR,
  hostArgv,
  hostCommit,
  type HostKind,
  loadAverage,
  median,
  pause,
  percentile,
  PythonClient,
  ratio,
  startHost,
  treeMemory,
  waitIdle,
} from "./_side_by_side.ts";
import { join } from "node:path";

const ROUNDS = Number(Deno.env.get("BENCH_ROUNDS") ?? 5);
/** More flags for this host's time and rate rows (`BENCH_HOST_ARGS`, split on spaces). */
const EXTRA = (Deno.env.get("BENCH_HOST_ARGS") ?? "").split(" ").filter((arg) => arg !== "");
const ONLY = Deno.env.get("BENCH_ONLY")?.split(",").map((key) => key.trim()).filter((key) => key !== "");
const PSS_SESSIONS = 20;
const RELEASE = ["--limit", "idleRuntimeReleaseMs=1000"];

type Kind = "latency" | "rate" | "pss" | "cold";
interface Row {
  key: string;
  label: string;
  unit: "ms" | "cells/s" | "MiB";
  kind: Kind;
  /** Samples per round and host (seconds for a rate row). */
  n: number;
}

const ROWS: Row[] = [
  {
    key: "b2b",
    label: 'back-to-back cell p50 (`text("x")` Execute, Server mode, the same session)',
    unit: "ms",
    kind: "latency",
    n: 50,
  },
  { key: "rate1", label: "cells/s in 1 session (back to back)", unit: "cells/s", kind: "rate", n: 2 },
  { key: "gap", label: "cell after a 100 ms gap p50", unit: "ms", kind: "latency", n: 10 },
  {
    key: "store",
    label: 'load + store cell p50 (`store("n", load("n") + 1)`, back to back)',
    unit: "ms",
    kind: "latency",
    n: 20,
  },
  {
    key: "tool",
    label: "cell with one tool call p50 (SubscribeToToolCalls / CompleteToolCall)",
    unit: "ms",
    kind: "latency",
    n: 20,
  },
  { key: "large", label: "16 MiB text outcome p50 (Client mode)", unit: "ms", kind: "latency", n: 2 },
  {
    key: "terminate",
    label: "Terminate of a CPU-bound cell p50 (`while (true) {}`, after it yielded)",
    unit: "ms",
    kind: "latency",
    n: 2,
  },
  { key: "open", label: "OpenSession p50 (300 ms apart)", unit: "ms", kind: "latency", n: 5 },
  { key: "first", label: "open + first cell p50 (300 ms apart)", unit: "ms", kind: "latency", n: 5 },
  { key: "rate8", label: "cells/s with 8 sessions in parallel", unit: "cells/s", kind: "rate", n: 2 },
  {
    key: "pss",
    label: `PSS per idle session (${PSS_SESSIONS} sessions, one cell each; whole process tree)`,
    unit: "MiB",
    kind: "pss",
    n: 1,
  },
  {
    key: "pss-release",
    label: "PSS per idle session, this host with `--limit idleRuntimeReleaseMs=1000`, after > 1 s idle",
    unit: "MiB",
    kind: "pss",
    n: 1,
  },
  {
    key: "cold-stdio",
    label:
      'cold start → first cell p50 (`--listen grpc+stdio://` over its pipes; spawn → `text("x")` outcome)',
    unit: "ms",
    kind: "cold",
    n: 4,
  },
  {
    key: "cold-tcp",
    label: "cold start → first cell p50 (`--listen grpc://127.0.0.1:0`, endpoint line read)",
    unit: "ms",
    kind: "cold",
    n: 4,
  },
];

const selected = ROWS.filter((row) =>
  (ONLY === undefined || ONLY.some((key) => row.key === key || row.key.startsWith(`${key}-`))) &&
  !(FLOOR && (row.kind === "pss" || row.key === "terminate"))
);
if (selected.length === 0) throw new Error(`BENCH_ONLY=${ONLY} selects no row`);

/** Per row and host: one figure per round, the pooled samples, and what the notes show. */
const figures = new Map<
  string,
  Record<HostKind, { rounds: number[]; samples: number[]; extra: unknown[] }>
>();
const record = (key: string, kind: HostKind, figure: number, samples: number[] = [], extra?: unknown) => {
  if (!figures.has(key)) {
    figures.set(key, {
      ours: { rounds: [], samples: [], extra: [] },
      codex: { rounds: [], samples: [], extra: [] },
    });
  }
  const entry = figures.get(key)![kind];
  entry.rounds.push(figure);
  entry.samples.push(...samples);
  if (extra !== undefined) entry.extra.push(extra);
};

/** Per cold row and host: ms from the spawn to each step of every sample. */
const coldSteps: Record<string, Record<HostKind, Record<string, number>[]>> = {
  "cold-stdio": { ours: [], codex: [] },
  "cold-tcp": { ours: [], codex: [] },
};
const notes: string[] = [];
const date = new Date().toISOString();
const loadAtStart = loadAverage();
const commit = await hostCommit();
const client = await PythonClient.start();
const scratch = await Deno.makeTempDir({ prefix: "bench-reference-" });
const coldStderr = join(scratch, "cold-stderr.log");

let rows = selected;
if (rows.some((row) => row.key === "pss-release") && !(await acceptsLimit("idleRuntimeReleaseMs", 1000))) {
  rows = rows.filter((row) => row.key !== "pss-release");
  notes.push(
    "skipped: PSS per idle session with `--limit idleRuntimeReleaseMs=1000`: this host refuses the limit " +
      "(`unknown limit`); the row runs once the limit exists",
  );
}
const latencyRows = rows.filter((row) => row.kind === "latency" || row.kind === "rate");
const pssRows = rows.filter((row) => row.kind === "pss");
const coldRows = rows.filter((row) => row.kind === "cold");

/** PSS and more of a fresh host before and after PSS_SESSIONS sessions that ran one cell each. */
async function idleSessionMemory(kind: HostKind, extra: string[], atLeastMs: number) {
  const host = await startHost(kind, extra);
  try {
    await client.call({ op: "connect", host: "pss", target: host.target });
    if (await waitIdle(host.pid, 1_000) === undefined) {
      notes.push(`${kind}: the fresh host was not idle in 20 s`);
    }
    const before = treeMemory(host.pid);
    await client.call({ op: "open_idle", host: "pss", n: PSS_SESSIONS });
    const waited = await waitIdle(host.pid, atLeastMs);
    if (waited === undefined) {
      notes.push(`${kind}: the host's tree was not idle 20 s after its sessions' cells`);
    }
    const after = treeMemory(host.pid);
    await client.call({ op: "close_idle", host: "pss" });
    await client.call({ op: "disconnect", host: "pss" });
    return {
      pss: (after.pss - before.pss) / PSS_SESSIONS,
      uss: (after.uss - before.uss) / PSS_SESSIONS,
      treeBefore: before.pss,
      processes: [before.processes, after.processes],
      waitedMs: Math.round(waited ?? -1),
    };
  } finally {
    await host.stop();
  }
}

// The long-lived hosts of the latency and rate rows, each row run once on both first (discarded).
const hosts = new Map<HostKind, Awaited<ReturnType<typeof startHost>>>();
try {
  if (latencyRows.length > 0) {
    for (const kind of ["ours", "codex"] as const) {
      const host = await startHost(kind, kind === "ours" ? EXTRA : []);
      hosts.set(kind, host);
      await client.call({ op: "connect", host: kind, target: host.target });
    }
    await pause(1_000); // this host's warm runtimes up
    for (const row of latencyRows) {
      for (const kind of ["ours", "codex"] as const) {
        await client.call({ op: "measure", host: kind, row: row.key, n: row.kind === "rate" ? 0.5 : 1 });
      }
    }
  }

  for (let round = 0; round < ROUNDS; round++) {
    const order: HostKind[] = round % 2 === 0 ? ["ours", "codex"] : ["codex", "ours"];
    for (const row of latencyRows) {
      for (const kind of order) {
        const reply = await client.call({ op: "measure", host: kind, row: row.key, n: row.n });
        if (row.kind === "rate") record(row.key, kind, reply.value as number, [], reply.client_cpu);
        else record(row.key, kind, median(reply.samples as number[]), reply.samples as number[]);
      }
    }
    if (pssRows.length > 0) {
      for (const kind of order) {
        const plain = rows.some((row) => row.key === "pss");
        const release = rows.some((row) => row.key === "pss-release");
        // Codex's host has no such limit: its row's figure is the plain one, measured either way.
        if (plain || kind === "codex") {
          const memory = await idleSessionMemory(kind, [], 1_500);
          record("pss", kind, memory.pss, [], memory);
          if (release && kind === "codex") record("pss-release", kind, memory.pss, [], memory);
        }
        if (release && kind === "ours") {
          const memory = await idleSessionMemory(kind, RELEASE, 2_500);
          record("pss-release", kind, memory.pss, [], memory);
        }
      }
    }
    for (const row of coldRows) {
      const transport = row.key === "cold-stdio" ? "stdio" : "tcp";
      const samples: Record<HostKind, number[]> = { ours: [], codex: [] };
      for (let i = 0; i < row.n; i++) {
        for (const kind of order) {
          await pause(300);
          const reply = await client.call({
            op: "cold",
            argv: await hostArgv(kind, transport),
            transport,
            cwd: HOST_DIR,
            stderr: coldStderr,
          });
          samples[kind].push(reply.ms as number);
          coldSteps[row.key][kind].push(reply.phases as Record<string, number>);
        }
      }
      for (const kind of order) record(row.key, kind, median(samples[kind]), samples[kind]);
    }
    console.error(`bench:reference: round ${round + 1} of ${ROUNDS} done (load ${loadAverage()})`);
  }
} finally {
  // Also after a failure: no host outlives the run (Codex's would, on 127.0.0.1:0).
  await client.close(); // its channels and sessions first
  for (const host of hosts.values()) await host.stop();
  await Deno.remove(scratch, { recursive: true });
}
const loadAtEnd = loadAverage();

const digits = (unit: Row["unit"]) => unit === "ms" ? 2 : 1;
const json: Record<string, unknown> = {};
const table = [
  `| figure | ${
    FLOOR ? "the gRPC stack alone (bench/_stack_floor.ts)" : "this host"
  } | Codex's host | ratio |`,
  "| --- | ---: | ---: | ---: |",
];
for (const row of rows) {
  const entry = figures.get(row.key);
  if (entry === undefined) continue;
  const ours = median(entry.ours.rounds);
  const codex = median(entry.codex.rounds);
  table.push(
    `| ${row.label} (${row.unit}) | ${ours.toFixed(digits(row.unit))} | ${
      codex.toFixed(digits(row.unit))
    } | ${ratio(ours, codex)} |`,
  );
  const side = (kind: HostKind) => ({
    median: median(entry[kind].rounds),
    rounds: entry[kind].rounds.map((v) => Number(v.toFixed(3))),
    ...(entry[kind].samples.length > 0
      ? {
        p50: Number(percentile(entry[kind].samples, 50).toFixed(3)),
        p95: Number(percentile(entry[kind].samples, 95).toFixed(3)),
        samples: entry[kind].samples.length,
      }
      : {}),
    ...(entry[kind].extra.length > 0 ? { extra: entry[kind].extra } : {}),
  });
  json[row.key] = {
    label: row.label,
    unit: row.unit,
    ours: side("ours"),
    codex: side("codex"),
    ratio: ours / codex,
  };
  if (row.kind === "rate") {
    const cpu = (kind: HostKind) => median(entry[kind].extra as number[]).toFixed(2);
    notes.push(
      `${row.key}: the client's own CPU during the rate, in cores: ${cpu("ours")} (this host), ${
        cpu("codex")
      } (Codex's)`,
    );
  }
  if (row.kind === "pss") {
    const memory = (kind: HostKind) => {
      const all = entry[kind].extra as { uss: number; treeBefore: number; processes: number[] }[];
      const last = all.at(-1)!;
      return `USS per session ${median(all.map((m) => m.uss)).toFixed(1)} MiB, tree PSS before the sessions ${
        median(all.map((m) => m.treeBefore)).toFixed(1)
      } MiB, processes ${last.processes[0]} → ${last.processes[1]}`;
    };
    notes.push(`${row.key}: this host: ${memory("ours")}; Codex's host: ${memory("codex")}`);
  }
  if (row.kind === "cold") {
    const steps = (kind: HostKind) => {
      const all = coldSteps[row.key][kind];
      return Object.keys(all[0]).map((step) => `${step} ${median(all.map((p) => p[step])).toFixed(1)}`).join(
        ", ",
      );
    };
    notes.push(
      `${row.key}: median ms from the spawn to: this host: ${steps("ours")}; Codex's host: ${steps("codex")}`,
    );
    json[`${row.key}:steps`] = coldSteps[row.key];
  }
}

console.log(
  `bench:reference${
    FLOOR ? " (BENCH_FLOOR=1)" : ""
  }, ${date}, host commit ${commit}, ${ROUNDS} rounds, load average ${loadAtStart} at the start and ${loadAtEnd} at the end ` +
    `(${Deno.build.target}, ${navigator.hardwareConcurrency} cores, Deno ${Deno.version.deno}, Codex's host 0.171.0)\n`,
);
console.log(table.join("\n"));
console.log("");
for (const note of notes) console.log(`- ${note}`);
console.log("");
console.log(JSON.stringify({
  bench: "reference",
  date,
  commit,
  rounds: ROUNDS,
  load: { start: loadAtStart, end: loadAtEnd },
  figures: json,
  notes,
}));

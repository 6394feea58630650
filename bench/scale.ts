/**
 * N sessions on this host and on Codex's own `codex-code-mode-host` 0.171, side by side in one run
 * (`deno task bench:scale`, issue 29), driven by the Python gRPC client of `bench:reference`
 * (`_side_by_side.ts`). Prints a Markdown table (ratio ours / Codex's), notes, and one JSON line.
 *
 * Per round, with both hosts fresh on `grpc://127.0.0.1:0` (this one with
 * `--limit idleRuntimeReleaseMs=1000` when it accepts that limit, else its defaults):
 *
 * 1. both idle (CPU quiet, at least 1 s): the PSS of each whole process tree (host, runtimes,
 *    bubblewrap wrappers; `/proc/<pid>/smaps_rollup`), split into the host process and the rest
 *    (the warm pool), and its process count;
 * 2. on one host and then the other: N sessions back to back from one client, each OpenSession then
 *    Execute `store("v", k); text("x")` (its own value stored for step 4): the total wall time;
 * 3. both idle 3 s: PSS of each tree with N idle sessions, per session ((tree − tree before) / N),
 *    and the process count;
 * 4. on one host and then the other: one more cell in every session, back to back,
 *    `text(load("v"))`, checked against the value that session stored: the total wall time; then
 *    the process count again;
 * 5. on one host and then the other, the unary floor of those turns: a Terminate of a cell that does
 *    not exist in every session, back to back (answered from the session table, no runtime): the
 *    total wall time and the status each host answered.
 *
 * The first host alternates from round to round. Environment: `BENCH_SESSIONS` (N, default 100),
 * `BENCH_ROUNDS` (default 1; figures are medians of the rounds), `BENCH_HOST_DIR` (the checkout
 * whose host is measured), `BENCH_HOST_ARGS` (more flags for this host, split on spaces). Figures only, no assertions on them; a wrong outcome stops the run.
 *
 * @module
 */
import {
  acceptsLimit,
  hostCommit,
  type HostKind,
  loadAverage,
  median,
  pause,
  PythonClient,
  ratio,
  type RunningHost,
  startHost,
  treeMemory,
  waitIdle,
} from "./_side_by_side.ts";

/** PSS of one process (not its children), MiB; 0 once it is gone. */
function processPss(pid: number): number {
  try {
    const rollup = Deno.readTextFileSync(`/proc/${pid}/smaps_rollup`);
    return Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
}

const N = Number(Deno.env.get("BENCH_SESSIONS") ?? 100);
const ROUNDS = Number(Deno.env.get("BENCH_ROUNDS") ?? 1);
const RELEASE = ["--limit", "idleRuntimeReleaseMs=1000"];
/** More flags for this host (`BENCH_HOST_ARGS`, split on spaces), e.g. `--limit runtimeHandover=1`. */
const EXTRA = (Deno.env.get("BENCH_HOST_ARGS") ?? "").split(" ").filter((arg) => arg !== "");

const date = new Date().toISOString();
const loadAtStart = loadAverage();
const commit = await hostCommit();
const notes: string[] = [];
const release = await acceptsLimit("idleRuntimeReleaseMs", 1000);
notes.push(
  release
    ? "this host ran with `--limit idleRuntimeReleaseMs=1000`"
    : "this host ran with its defaults: it refuses `--limit idleRuntimeReleaseMs` (`unknown limit`) on this commit",
);
if (EXTRA.length > 0) notes.push(`this host ran with \`${EXTRA.join(" ")}\` too`);
const client = await PythonClient.start();

type Figures = Record<string, number>;
const rounds: Record<HostKind, Figures[]> = { ours: [], codex: [] };

for (let round = 0; round < ROUNDS; round++) {
  const order: HostKind[] = round % 2 === 0 ? ["ours", "codex"] : ["codex", "ours"];
  const hosts = new Map<HostKind, RunningHost>();
  const figures: Record<HostKind, Figures> = { ours: {}, codex: {} };
  try {
    for (const kind of order) {
      const host = await startHost(kind, kind === "ours" ? [...(release ? RELEASE : []), ...EXTRA] : []);
      hosts.set(kind, host);
      await client.call({ op: "connect", host: kind, target: host.target });
    }
    for (const kind of order) {
      if (await waitIdle(hosts.get(kind)!.pid, 1_000) === undefined) {
        notes.push(`${kind}: not idle in 20 s at start`);
      }
      const idle = treeMemory(hosts.get(kind)!.pid);
      figures[kind].pssBefore = idle.pss;
      figures[kind].pssHostBefore = processPss(hosts.get(kind)!.pid);
      figures[kind].pssPoolBefore = idle.pss - figures[kind].pssHostBefore;
      figures[kind].ussBefore = idle.uss;
      figures[kind].processesBefore = idle.processes;
    }
    for (const kind of order) {
      const reply = await client.call({ op: "open_idle", host: kind, n: N });
      figures[kind].openMs = reply.ms as number;
      console.error(`bench:scale: ${kind}: ${N} sessions opened (load ${loadAverage()})`);
    }
    await pause(3_000);
    for (const kind of order) {
      const memory = treeMemory(hosts.get(kind)!.pid);
      figures[kind].pssIdle = memory.pss;
      figures[kind].pssPerSession = (memory.pss - figures[kind].pssBefore) / N;
      figures[kind].ussPerSession = (memory.uss - figures[kind].ussBefore) / N;
      figures[kind].processesIdle = memory.processes;
    }
    for (const kind of order) {
      const reply = await client.call({ op: "turn_idle", host: kind });
      figures[kind].turnMs = reply.ms as number;
      figures[kind].processesAfterTurn = treeMemory(hosts.get(kind)!.pid).processes;
    }
    for (const kind of order) {
      const reply = await client.call({ op: "floor_idle", host: kind });
      figures[kind].floorMs = reply.ms as number;
      const answers = (reply.answers as string[]).join(", ");
      if (round === 0) notes.push(`${kind}: a Terminate of a missing cell answered ${answers}`);
    }
    for (const kind of order) {
      await client.call({ op: "close_idle", host: kind });
      await client.call({ op: "disconnect", host: kind });
    }
  } finally {
    for (const host of hosts.values()) await host.stop();
  }
  for (const kind of order) rounds[kind].push(figures[kind]);
  console.error(`bench:scale: round ${round + 1} of ${ROUNDS} done (load ${loadAverage()})`);
}
await client.close();
const loadAtEnd = loadAverage();

const figure = (kind: HostKind, key: string) => median(rounds[kind].map((f) => f[key]));
const ROWS: [string, string, (v: number) => string][] = [
  ["pssBefore", "PSS of the whole process tree, idle host before any session (MiB)", (v) => v.toFixed(1)],
  ["pssHostBefore", "of which the host process itself (MiB)", (v) => v.toFixed(1)],
  ["pssPoolBefore", "of which the warm pool: its runtimes and their bubblewrap (MiB)", (v) => v.toFixed(1)],
  ["processesBefore", "processes in the tree, idle host before any session", (v) => v.toFixed(0)],
  [
    "openMs",
    `open + first cell for ${N} sessions back to back, one client (OpenSession, Execute; total s)`,
    (v) => (v / 1000).toFixed(2),
  ],
  ["pssIdle", `PSS of the whole tree with ${N} idle sessions, after 3 s idle (MiB)`, (v) => v.toFixed(1)],
  ["pssPerSession", "PSS per idle session ((tree − tree before) / N, MiB)", (v) => v.toFixed(2)],
  ["processesIdle", `processes in the tree, ${N} idle sessions`, (v) => v.toFixed(0)],
  [
    "turnMs",
    `one more turn in every session (\`text(load("v"))\`, back to back; total s)`,
    (v) => (v / 1000).toFixed(2),
  ],
  ["processesAfterTurn", "processes in the tree after that turn", (v) => v.toFixed(0)],
  [
    "floorMs",
    `the unary floor: a Terminate of a missing cell in every session, back to back (no runtime; total s)`,
    (v) => (v / 1000).toFixed(2),
  ],
];
const table = ["| figure | this host | Codex's host | ratio |", "| --- | ---: | ---: | ---: |"];
for (const [key, label, format] of ROWS) {
  const ours = figure("ours", key);
  const codex = figure("codex", key);
  table.push(`| ${label} | ${format(ours)} | ${format(codex)} | ${ratio(ours, codex)} |`);
}
notes.push(
  `per session: open + first cell ${(figure("ours", "openMs") / N).toFixed(1)} ms here, ${
    (figure("codex", "openMs") / N).toFixed(1)
  } ms on Codex's host; the turn ${(figure("ours", "turnMs") / N).toFixed(1)} and ${
    (figure("codex", "turnMs") / N).toFixed(1)
  } ms; USS (private pages) per idle session ${figure("ours", "ussPerSession").toFixed(2)} and ${
    figure("codex", "ussPerSession").toFixed(2)
  } MiB`,
);

console.log(
  `bench:scale, ${date}, host commit ${commit}, N = ${N}, ${ROUNDS} round(s), load average ${loadAtStart} at the start and ${loadAtEnd} at the end ` +
    `(${Deno.build.target}, ${navigator.hardwareConcurrency} cores, Deno ${Deno.version.deno}, Codex's host 0.171.0)\n`,
);
console.log(table.join("\n"));
console.log("");
for (const note of notes) console.log(`- ${note}`);
console.log("");
console.log(JSON.stringify({
  bench: "scale",
  date,
  commit,
  sessions: N,
  rounds: ROUNDS,
  release,
  load: { start: loadAtStart, end: loadAtEnd },
  figures: rounds,
  notes,
}));

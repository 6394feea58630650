/**
 * `deno task bench:ab <dirA> <dirB>`: the hosts of two checkouts side by side, each started as
 * `deno task serve` runs it, one session each, and batches of back-to-back `text("x")` cells
 * measured on A and B in turn (the order flips every round), so that a drift of the machine's
 * speed moves both alike (a shared 2-core VM changed its speed 2× within minutes while the
 * regression of 2b94854 was bisected). Prints each host's median cells/s and the median of the
 * per-round ratios B / A.
 *
 * `BENCH_ROUNDS` (default 20) rounds of `BENCH_CELLS` (default 100) cells per host. A checkout from
 * before `cli/main.ts` existed is started from its `host/main.ts`.
 *
 * @module
 */
import { createChannel, createClient } from "nice-grpc";
import { codeModeHostDefinition } from "../proto/loader.ts";
import { executeText, openSession, pause, spawnDeno } from "./_host.ts";

const dirs = Deno.args;
if (dirs.length !== 2) throw new Error("usage: deno task bench:ab <checkout A> <checkout B>");
const ROUNDS = Number(Deno.env.get("BENCH_ROUNDS") ?? 20);
const CELLS = Number(Deno.env.get("BENCH_CELLS") ?? 100);

/** The entry point of a checkout's host. */
async function entry(dir: string): Promise<string> {
  for (const candidate of ["cli/main.ts", "host/main.ts"]) {
    const path = `${dir}/${candidate}`;
    if (await Deno.stat(path).then(() => true, () => false)) return path;
  }
  throw new Error(`${dir}: no cli/main.ts or host/main.ts`);
}

interface Measured {
  dir: string;
  child: Deno.ChildProcess;
  channel: ReturnType<typeof createChannel>;
  // deno-lint-ignore no-explicit-any
  client: any;
  session: { id: string; close(): void };
  rates: number[];
}

const hosts: Measured[] = [];
for (const dir of dirs) {
  const { child, line } = await spawnDeno([
    "run",
    "--allow-all",
    "--config",
    `${dir}/deno.json`,
    await entry(dir),
    "--listen",
    "grpc://127.0.0.1:0",
    "--warm-sessions",
    "2",
    "--log-level",
    "error",
  ], dir);
  const channel = createChannel(new URL(line).host);
  // deno-lint-ignore no-explicit-any
  const client = createClient(codeModeHostDefinition() as any, channel) as any;
  const session = await openSession(client);
  hosts.push({ dir, child, channel, client, session, rates: [] as number[] });
}
try {
  for (const host of hosts) for (let i = 0; i < CELLS; i++) await executeText(host.client, host.session.id);
  await pause(3_000); // the pools refilled, nothing starting
  for (let round = 0; round < ROUNDS; round++) {
    for (const host of round % 2 === 0 ? hosts : [...hosts].reverse()) {
      const start = performance.now();
      for (let i = 0; i < CELLS; i++) await executeText(host.client, host.session.id);
      host.rates.push((CELLS * 1000) / (performance.now() - start));
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  for (const host of hosts) console.log(`${host.dir}: median ${median(host.rates).toFixed(0)} cells/s`);
  const ratios = hosts[1].rates.map((rate, i) => rate / hosts[0].rates[i]);
  console.log(`B / A (${dirs[1]} / ${dirs[0]}), median of ${ROUNDS} rounds: ${median(ratios).toFixed(3)}`);
} finally {
  for (const host of hosts) {
    host.session.close();
    host.channel.close();
    host.child.kill("SIGTERM");
    await host.child.status;
  }
}

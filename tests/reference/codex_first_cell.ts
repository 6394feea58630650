/**
 * The first cell of a new host as the real Codex 0.171 sees it, with Codex's own host and with
 * this one, over the three transports (issue 25: the first-cell time). Not a test: it prints a
 * table of medians (min–max) over N runs per transport and host, run one at a time, alternating:
 *
 * - the `Wall time` line the model gets (Codex's own measure, 0.1 s resolution);
 * - the exec call's round trip as the fake model sees it: from the request whose answer is the
 *   `exec` call to the request that carries its result (ms);
 * - the wall clock of the whole `codex exec` (ms; over TCP the host is already listening).
 *
 * A run whose cell gave no result (e.g. Codex rejected the host's frames) still counts in the
 * two times; the table says how many such runs there were.
 *
 * Usage: `deno run --allow-all tests/reference/codex_first_cell.ts [N=7]`
 *
 * @module
 */
import { join } from "node:path";
import { ensureCodex } from "./_codex.ts";
import { execCall, FakeModel } from "./_fake_model.ts";
import { LoopbackNet } from "./_netns.ts";
import { LAUNCHER, makeShadow } from "./_shadow.ts";
import { codexExec, codexRemote, type Finished, makeRunDir, startTcpHost } from "./_codex_run.ts";

const TRANSPORTS = ["grpc-stdio", "json-v1", "grpc-tcp"] as const;
const HOSTS = ["reference", "ours"] as const;
const runs = Number(Deno.args[0] ?? 7);

interface Sample {
  wallTime: number;
  roundTripMs: number;
  codexMs: number;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function summary(values: number[], digits: number): string {
  const fixed = (v: number) => v.toFixed(digits);
  return `${fixed(median(values))} (${fixed(Math.min(...values))}–${fixed(Math.max(...values))})`;
}

const install = await ensureCodex();
const tmp = await Deno.makeTempDir({ prefix: "codex-first-cell-" });
try {
  await using model = await FakeModel.start(join(tmp, "model.sock"));
  await using net = await LoopbackNet.start(model);
  const reference = await makeShadow(install, join(tmp, "shadow-reference"), { link: install.host });
  const ours = await makeShadow(install, join(tmp, "shadow-ours"), { link: LAUNCHER }, {
    codex: reference.codex,
  });
  const samples = new Map<string, Sample[]>();
  for (let i = 0; i < runs; i++) {
    for (const transport of TRANSPORTS) {
      for (const host of i % 2 ? [...HOSTS].reverse() : HOSTS) {
        const name = `${transport}.${host}.${i}`;
        model.script(name, [execCall("call-1", `text("first")`)]);
        const run = await makeRunDir(tmp, name, net.modelPort);
        let codex: Finished;
        if (transport === "grpc-tcp") {
          const tcp = await startTcpHost(net, host === "ours" ? LAUNCHER : install.host, run);
          try {
            codex = await codexRemote(net, run, { codex: reference.codex, hostUrl: tcp.url, prompt: name });
          } finally {
            await tcp.host[Symbol.asyncDispose]();
          }
        } else {
          const shadow = host === "ours" ? ours : reference;
          const args = transport === "json-v1" ? ["--disable", "code_mode_host_grpc"] : [];
          codex = await codexExec(net, run, { codex: shadow.codex, prompt: name, args });
        }
        const record = model.record(name)!;
        const seen = JSON.stringify(record.input.filter((item) => item.type === "custom_tool_call_output"));
        const wall = seen.match(/Wall time (\d+(?:\.\d+)?) seconds/);
        const failed = codex.code !== 0 || !wall || !seen.includes("first");
        if (failed) console.error(`${name}: no result (exit ${codex.code}): ${seen.slice(0, 300)}`);
        if (record.at.length < 2) continue;
        const key = `${transport}|${host}`;
        samples.set(key, [...(samples.get(key) ?? []), {
          wallTime: failed ? NaN : Number(wall![1]),
          roundTripMs: record.at[1] - record.at[0],
          codexMs: codex.ms,
        }]);
      }
    }
  }
  console.log(
    `\nThe first cell of a new host, ${runs} runs each (median (min–max)); network: ${
      net.mode ?? "the machine's"
    }\n`,
  );
  console.log("| transport | host | Wall time the model gets (s) | exec round trip (ms) | codex exec (ms) |");
  console.log("| --- | --- | --- | --- | --- |");
  for (const transport of TRANSPORTS) {
    for (const host of HOSTS) {
      const list = samples.get(`${transport}|${host}`) ?? [];
      if (!list.length) {
        console.log(`| ${transport} | ${host} | no result | | |`);
        continue;
      }
      const walls = list.map((s) => s.wallTime).filter((v) => !Number.isNaN(v));
      const failures = list.length - walls.length;
      const wall = `${walls.length ? summary(walls, 1) : "none"}${
        failures ? ` (${failures} of ${list.length} runs: no result)` : ""
      }`;
      console.log(
        `| ${transport} | ${host} | ${wall} | ${summary(list.map((s) => s.roundTripMs), 0)} | ${
          summary(list.map((s) => s.codexMs), 0)
        } |`,
      );
    }
  }
} finally {
  await Deno.remove(tmp, { recursive: true });
}

/**
 * The real Codex 0.171 against Codex's own code-mode host and against this host (issue 25, item
 * 8): `codex exec` with a fake Responses API, over the three transports Codex has:
 *
 * - `grpc-stdio`: Codex's default, the host a child speaking gRPC on its pipes
 *   (`--listen grpc+stdio://`);
 * - `json-v1`: `--disable code_mode_host_grpc`, the host a child with no arguments speaking JSON
 *   host V1;
 * - `grpc-tcp`: `codex app-server --code-mode-host http://127.0.0.1:H` in front of a host the test
 *   starts on 127.0.0.1:0, and `codex exec --remote`.
 *
 * For every scenario × transport the test runs Codex once with the reference host and once with
 * this checkout's `bin/codex-code-mode-host` (through a shadow install, `_shadow.ts`), and asserts
 * that what the model received, the `custom_tool_call_output` / `function_call_output` items of
 * Codex's last request, is the same after `normalise` (`_normalise.ts`). A scenario that shows a
 * deliberate difference (`deliberate_differences.ts`) instead checks that the two sides differ exactly
 * as listed. A table of which pairs are the same, and the exact difference of each other pair, is
 * printed at the end. The scenarios are in `_codex_scenarios.ts`.
 *
 * Not part of `deno task test` (it needs the reference install, `_codex.ts`). Environment:
 * `CODEX_E2E_SCENARIOS=a,b`, `CODEX_E2E_TRANSPORTS=x,y` and `CODEX_E2E_HOSTS=reference` (probing a new
 * scenario: the reference alone, its guards checked, nothing compared) select; `CODEX_E2E_JOBS` (default 4)
 * is how many Codex processes run at once; `CODEX_E2E_REPORT=FILE` writes every result as JSON;
 * `CODEX_E2E_KEEP=1` keeps the run directories; `CODEX_E2E_NETNS=off` runs Codex without the
 * loopback-only network namespace (`_netns.ts`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { ensureCodex } from "./_codex.ts";
import { FakeModel } from "./_fake_model.ts";
import { type Scenario, SCENARIOS } from "./_codex_scenarios.ts";
import { deliberateDifference } from "./deliberate_differences.ts";
import { normalise, type SeenOutput } from "./_normalise.ts";
import { LoopbackNet } from "./_netns.ts";
import { LAUNCHER, makeShadow, type Shadow, shQuote } from "./_shadow.ts";
import {
  codexExec,
  codexRemote,
  type Finished,
  makeRunDir,
  type RunDir,
  startTcpHost,
} from "./_codex_run.ts";

export { type Scenario, SCENARIOS };

/** How Codex reaches its host. */
export const TRANSPORTS = ["grpc-stdio", "json-v1", "grpc-tcp"] as const;
export type Transport = typeof TRANSPORTS[number];
/** Whose host. */
export type HostKind = "reference" | "ours";

/** One Codex run. */
export interface RunResult {
  readonly scenario: string;
  readonly transport: Transport;
  readonly host: HostKind;
  readonly seen: SeenOutput[];
  readonly codex: Finished;
  /** How many requests Codex made to the model. */
  readonly requests: number;
  /** The host's launches (arguments, one line each) seen by the shadow's wrapper (ours only). */
  readonly launches: string[];
  /** This host's stderr (ours only). */
  readonly hostStderr: string;
}

interface Context {
  readonly tmp: string;
  readonly model: FakeModel;
  readonly net: LoopbackNet;
  readonly reference: Shadow;
  readonly ours: Shadow;
  /** For `grpc-tcp`: a shadow whose local host only records that it was started, and fails. */
  readonly remoteOnly: Shadow;
  readonly referenceHost: string;
}

function oursScript(tmp: string): string {
  const runs = shQuote(join(tmp, "runs"));
  return [
    `printf '%s\\n' "$*" >> ${runs}/"$CODEX_E2E_RUN"/host-launches.log`,
    `exec ${shQuote(LAUNCHER)} "$@" 2>> ${runs}/"$CODEX_E2E_RUN"/host.err`,
  ].join("\n");
}

async function runOne(
  ctx: Context,
  scenario: Scenario,
  transport: Transport,
  host: HostKind,
): Promise<RunResult> {
  const name = `${scenario.name}.${transport}.${host}`;
  const prompt = `codex e2e run ${name}`;
  ctx.model.script(prompt, [...scenario.items]);
  const run: RunDir = await makeRunDir(join(ctx.tmp, "runs"), name, ctx.net.modelPort);
  if (scenario.features) {
    const config = join(run.codexHome, "config.toml");
    const text = await Deno.readTextFile(config);
    await Deno.writeTextFile(config, text.replace("[features]\n", `[features]\n${scenario.features}\n`));
  }
  let codex: Finished;
  let hostStderr = "";
  if (transport === "grpc-tcp") {
    const { host: process, url } = await startTcpHost(
      ctx.net,
      host === "ours" ? LAUNCHER : ctx.referenceHost,
      run,
    );
    try {
      codex = await codexRemote(ctx.net, run, { codex: ctx.remoteOnly.codex, hostUrl: url, prompt });
    } finally {
      await process[Symbol.asyncDispose]();
    }
    if (host === "ours") hostStderr = (await process.finished).stderr;
  } else {
    const shadow = host === "ours" ? ctx.ours : ctx.reference;
    const args = transport === "json-v1" ? ["--disable", "code_mode_host_grpc"] : [];
    codex = await codexExec(ctx.net, run, { codex: shadow.codex, prompt, args });
    if (host === "ours") hostStderr = await Deno.readTextFile(join(run.dir, "host.err")).catch(() => "");
  }
  const launches = await Deno.readTextFile(join(run.dir, "host-launches.log")).then(
    (text) => text.split("\n").slice(0, -1),
    () => [],
  );
  const record = ctx.model.record(prompt);
  return {
    scenario: scenario.name,
    transport,
    host,
    seen: normalise(record?.input ?? [], [[run.work, "<work>"], [run.dir, "<run>"]]),
    codex,
    requests: record?.requests ?? 0,
    launches,
    hostStderr,
  };
}

async function pool<T>(jobs: (() => Promise<T>)[], width: number): Promise<T[]> {
  const results: T[] = new Array(jobs.length);
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const index = next++;
      results[index] = await jobs[index]();
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, jobs.length) }, worker));
  return results;
}

function selected<T extends string>(all: readonly T[], variable: string): T[] {
  const wanted = Deno.env.get(variable)?.split(",").map((s) => s.trim()).filter(Boolean);
  if (!wanted?.length) return [...all];
  for (const name of wanted) {
    if (!all.includes(name as T)) {
      throw new Error(`${variable}: unknown '${name}' (known: ${all.join(", ")})`);
    }
  }
  return all.filter((name) => wanted.includes(name));
}

/** The exact difference of two runs, one line per differing output. */
export function describeDifference(reference: RunResult, ours: RunResult): string[] {
  const lines: string[] = [];
  if (ours.codex.code !== reference.codex.code) {
    lines.push(`codex exit: reference ${reference.codex.code}, ours ${ours.codex.code}`);
  }
  const n = Math.max(reference.seen.length, ours.seen.length);
  for (let i = 0; i < n; i++) {
    const a = JSON.stringify(reference.seen[i] ?? null);
    const b = JSON.stringify(ours.seen[i] ?? null);
    if (a === b) continue;
    lines.push(`  #${i} reference: ${a}`);
    lines.push(`  #${i} ours:      ${b}`);
  }
  return lines;
}

/** How a scenario × transport came out: `same`, `deliberate` (as the table says) or `DIFF`. */
type Verdict = "same" | "deliberate" | "DIFF";

function table(
  scenarios: readonly Scenario[],
  transports: readonly Transport[],
  verdict: (scenario: Scenario, transport: Transport) => Verdict,
): string {
  const rows = [
    `| scenario | ${transports.join(" | ")} |`,
    `| --- | ${transports.map(() => "---").join(" | ")} |`,
  ];
  for (const scenario of scenarios) {
    const cells = transports.map((t) => {
      const v = verdict(scenario, t);
      return v === "deliberate" ? `deliberate (\`${scenario.deliberate!.id}\`)` : v;
    });
    rows.push(`| ${scenario.name} | ${cells.join(" | ")} |`);
  }
  const totals = transports.map((t) =>
    `${scenarios.filter((s) => verdict(s, t) !== "DIFF").length}/${scenarios.length}`
  );
  rows.push(`| **same or deliberate** | ${totals.join(" | ")} |`);
  return rows.join("\n");
}

Deno.test("Codex 0.171 end to end: the model sees the same tool results with Codex's own host and with this host, over gRPC on stdio, JSON V1 and gRPC over TCP", async (t) => {
  const scenarios = selected(SCENARIOS.map((s) => s.name), "CODEX_E2E_SCENARIOS").map((name) =>
    SCENARIOS.find((s) => s.name === name)!
  );
  const transports = selected(TRANSPORTS, "CODEX_E2E_TRANSPORTS");
  const install = await ensureCodex();
  const tmp = await Deno.makeTempDir({ prefix: "codex-e2e-" });
  await Deno.mkdir(join(tmp, "runs"));
  try {
    await using model = await FakeModel.start(join(tmp, "model.sock"));
    await using net = await LoopbackNet.start(model);
    const reference = await makeShadow(install, join(tmp, "shadow-reference"), { link: install.host });
    const ours = await makeShadow(install, join(tmp, "shadow-ours"), { script: oursScript(tmp) }, {
      codex: reference.codex,
    });
    const remoteOnly = await makeShadow(install, join(tmp, "shadow-remote-only"), {
      script: `echo "a local host was started: $*" >> ${
        shQuote(join(tmp, "local-host-started.log"))
      }\nexit 1`,
    }, { codex: reference.codex });
    const ctx: Context = { tmp, model, net, reference, ours, remoteOnly, referenceHost: install.host };

    const hosts = selected(["reference", "ours"] as const, "CODEX_E2E_HOSTS");
    const jobs: (() => Promise<RunResult>)[] = [];
    for (const scenario of scenarios) {
      for (const transport of transports) {
        for (const host of hosts) {
          jobs.push(() => runOne(ctx, scenario, transport, host));
        }
      }
    }
    const started = performance.now();
    const results = await pool(jobs, Number(Deno.env.get("CODEX_E2E_JOBS") ?? 4));
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    const find = (scenario: string, transport: Transport, host: HostKind) =>
      results.find((r) => r.scenario === scenario && r.transport === transport && r.host === host)!;
    const compared = hosts.length === 2;
    const same = (scenario: string, transport: Transport) =>
      JSON.stringify(find(scenario, transport, "reference").seen) ===
        JSON.stringify(find(scenario, transport, "ours").seen) &&
      find(scenario, transport, "ours").codex.code === find(scenario, transport, "reference").codex.code;
    /** Why a deliberate scenario's sides do not differ as listed, or undefined when they do. */
    const deliberateProblem = (scenario: Scenario, transport: Transport): string | undefined => {
      try {
        scenario.deliberate!.check(
          find(scenario.name, transport, "reference").seen,
          find(scenario.name, transport, "ours").seen,
        );
        return undefined;
      } catch (error) {
        return (error as Error).message;
      }
    };
    const verdict = (scenario: Scenario, transport: Transport): Verdict =>
      scenario.deliberate
        ? deliberateProblem(scenario, transport) === undefined ? "deliberate" : "DIFF"
        : same(scenario.name, transport)
        ? "same"
        : "DIFF";

    const report = Deno.env.get("CODEX_E2E_REPORT");
    if (report) await Deno.writeTextFile(report, JSON.stringify(results, null, 1));
    const details: string[] = [];
    for (const scenario of compared ? scenarios : []) {
      for (const transport of transports) {
        if (verdict(scenario, transport) !== "DIFF") continue;
        details.push(`${scenario.name} over ${transport}:`);
        details.push(
          ...describeDifference(
            find(scenario.name, transport, "reference"),
            find(scenario.name, transport, "ours"),
          ),
        );
      }
    }
    console.log(
      `\n${results.length} Codex runs in ${seconds} s (network: ${net.mode ?? "the machine's"})\n\n${
        compared ? table(scenarios, transports, verdict) : "(the reference only: nothing compared)"
      }\n${details.length ? `\n${details.join("\n")}\n` : ""}`,
    );

    const localHost = await Deno.readTextFile(join(tmp, "local-host-started.log")).catch(() => "");
    assert.equal(localHost, "", "over gRPC on TCP, Codex never starts a local host");
    assert.deepEqual(model.unknownPrompts, [], "every request belongs to a scripted run");

    for (const scenario of scenarios) {
      for (const transport of transports) {
        await t.step(`${scenario.name} over ${transport}`, () => {
          const reference = find(scenario.name, transport, "reference");
          const ours = find(scenario.name, transport, "ours");
          assert.ok(reference, "the reference ran");
          assert.equal(
            reference.codex.code,
            0,
            `the reference run ended: ${reference.codex.stderr.slice(-2000)}`,
          );
          assert.equal(reference.requests, scenario.items.length + 1, "every scripted item was answered");
          const seen = JSON.stringify(reference.seen);
          for (const pattern of scenario.expect) {
            assert.match(seen, pattern, "the reference shows what the scenario tests");
          }
          if (!ours) return; // CODEX_E2E_HOSTS=reference: guards only
          if (transport !== "grpc-tcp") {
            // Codex started this checkout's launcher, in the form the transport has.
            assert.ok(ours.launches.length > 0, "Codex started our host");
            assert.equal(ours.launches[0], transport === "grpc-stdio" ? "--listen grpc+stdio://" : "");
          }
          if (scenario.deliberate) {
            deliberateDifference(scenario.deliberate.id);
            const problem = deliberateProblem(scenario, transport);
            if (problem) {
              assert.fail(
                `deliberate difference '${scenario.deliberate.id}' is not what the table says: ${problem}\n${
                  describeDifference(reference, ours).join("\n")
                }`,
              );
            }
          } else if (!same(scenario.name, transport)) {
            assert.fail(describeDifference(reference, ours).join("\n"));
          }
        });
      }
    }
  } finally {
    if (Deno.env.get("CODEX_E2E_KEEP")) console.log(`run directories kept in ${tmp}`);
    else await Deno.remove(tmp, { recursive: true });
  }
});

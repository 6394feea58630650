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
 * Codex's last request, is the same after `normalise` (`_normalise.ts`). A table of which pairs are the same,
 * and the exact difference of each other pair, is printed at the end.
 *
 * Not part of `deno task test` (it needs the reference install, `_codex.ts`). Environment:
 * `CODEX_E2E_SCENARIOS=a,b` and `CODEX_E2E_TRANSPORTS=x,y` select; `CODEX_E2E_JOBS` (default 3)
 * is how many Codex processes run at once; `CODEX_E2E_REPORT=FILE` writes every result as JSON;
 * `CODEX_E2E_KEEP=1` keeps the run directories; `CODEX_E2E_NETNS=off` runs Codex without the
 * loopback-only network namespace (`_netns.ts`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { ensureCodex } from "./_codex.ts";
import { execCall, FakeModel, type ModelItem, waitCall } from "./_fake_model.ts";
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

/** A 1×1 PNG. */
const PNG =
  "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
/** 50 ms of silence as a WAV (8 kHz, 8-bit mono): Codex omits clips shorter than 25 ms. */
const WAV = (() => {
  const samples = 400;
  const bytes = new Uint8Array(44 + samples).fill(0x80);
  const view = new DataView(bytes.buffer);
  const ascii = (at: number, text: string) => [...text].forEach((c, i) => bytes[at + i] = c.charCodeAt(0));
  ascii(0, "RIFF");
  view.setUint32(4, 36 + samples, true);
  ascii(8, "WAVEfmt ");
  view.setUint32(16, 16, true); // the fmt chunk's size
  view.setUint16(20, 1, true); // PCM
  view.setUint16(22, 1, true); // mono
  view.setUint32(24, 8000, true); // samples per second
  view.setUint32(28, 8000, true); // bytes per second
  view.setUint16(32, 1, true); // block align
  view.setUint16(34, 8, true); // bits per sample
  ascii(36, "data");
  view.setUint32(40, samples, true);
  return `data:audio/wav;base64,${btoa(String.fromCharCode(...bytes))}`;
})();

/** One conversation: the model's items in order, and what the reference's result must show. */
export interface Scenario {
  readonly name: string;
  readonly items: readonly ModelItem[];
  /** Each must match the JSON of the reference's outputs: the scenario tests what it claims. */
  readonly expect: readonly RegExp[];
}

/** The scenarios (issue 25, item 8). */
export const SCENARIOS: readonly Scenario[] = [
  {
    name: "text",
    items: [execCall("call-1", `text("hello"); text(42); text({ a: [1, "two"] }); text(null); text(true)`)],
    expect: [/hello/, /\{\\"a\\":\[1,\\"two\\"\]\}/],
  },
  {
    name: "store-load",
    items: [
      execCall("call-1", `store("k", { n: 41, list: [1, 2] }); text("stored")`),
      execCall("call-2", `const v = load("k"); text(v.n + 1); text(v.list); text(String(load("missing")))`),
    ],
    expect: [/stored/, /"42"/, /\[1,2\]/],
  },
  {
    name: "throw",
    items: [execCall("call-1", `text("before"); throw new Error("boom")`)],
    expect: [/Script failed/, /boom/],
  },
  {
    name: "syntax-error",
    items: [execCall("call-1", `text("x"`)],
    expect: [/Script failed|SyntaxError/],
  },
  {
    name: "yield-wait",
    items: [
      execCall(
        "call-1",
        `// @exec: {"yield_time_ms": 500}\ntext("first"); await new Promise((r) => setTimeout(r, 1500)); text("second")`,
      ),
      waitCall("call-2", { cell_id: "1", yield_time_ms: 10000 }),
    ],
    expect: [/Script running with cell ID 1/, /first/, /second/, /Script completed/],
  },
  {
    name: "yield-control",
    items: [
      execCall(
        "call-1",
        `text("a"); yield_control(); await new Promise((r) => setTimeout(r, 800)); text("b")`,
      ),
      waitCall("call-2", { cell_id: "1", yield_time_ms: 10000 }),
    ],
    expect: [/Script running with cell ID 1/, /"a"/, /"b"/],
  },
  {
    name: "timers",
    items: [
      execCall(
        "call-1",
        `setTimeout(() => text("never"), 5000); const id = setTimeout(() => text("cleared"), 10); clearTimeout(id);
await new Promise((r) => setTimeout(() => { text("fired"); r(); }, 50)); text("end")`,
      ),
      execCall("call-2", `text("next cell")`),
    ],
    expect: [/fired/, /next cell/],
  },
  {
    name: "wait-terminate",
    items: [
      execCall("call-1", `// @exec: {"yield_time_ms": 1000}\ntext("pending"); await new Promise(() => {})`),
      waitCall("call-2", { cell_id: "1", terminate: true }),
      execCall("call-3", `// @exec: {"yield_time_ms": 300}\nwhile (true) {}`),
      waitCall("call-4", { cell_id: "2", terminate: true }),
      execCall("call-5", `text("alive")`),
    ],
    expect: [/pending/, /Script terminated/, /alive/],
  },
  {
    name: "image",
    items: [
      execCall(
        "call-1",
        `image(${JSON.stringify(PNG)}); text("between"); image({ image_url: ${JSON.stringify(PNG)} })`,
      ),
    ],
    expect: [/input_image/],
  },
  {
    name: "truncation-pragma",
    items: [
      execCall(
        "call-1",
        `// @exec: {"max_output_tokens": 30}\nfor (let i = 0; i < 40; i++) text("line " + i)`,
      ),
      execCall("call-2", `// @exec: {"max_output_tokens": 20}\ntext("x".repeat(2000)); text("last")`),
    ],
    expect: [/truncated/],
  },
  {
    name: "truncation-wait",
    items: [
      execCall(
        "call-1",
        `// @exec: {"yield_time_ms": 300}\nawait new Promise((r) => setTimeout(r, 1000)); for (let i = 0; i < 40; i++) text("line " + i)`,
      ),
      waitCall("call-2", { cell_id: "1", yield_time_ms: 10000, max_tokens: 30 }),
    ],
    expect: [/truncated/],
  },
  {
    name: "notify",
    items: [execCall("call-1", `notify("note-1"); text("after"); notify({ k: 1 })`)],
    expect: [/note-1/, /after/],
  },
  {
    name: "exec-command",
    items: [
      execCall("call-1", `const r = await tools.exec_command({ cmd: "echo hi" }); text(typeof r); text(r)`),
    ],
    expect: [/hi\\\\n/],
  },
  {
    name: "all-tools",
    items: [execCall("call-1", `text(ALL_TOOLS.map((t) => t.name).join(","))`)],
    expect: [/exec_command/],
  },
  {
    name: "exit",
    items: [execCall("call-1", `text("a"); exit(); text("b")`)],
    expect: [/Script completed/],
  },
  {
    name: "audio",
    items: [
      execCall("call-1", `audio(${JSON.stringify(WAV)}); audio({ audio_url: ${JSON.stringify(WAV)} })`),
    ],
    expect: [/input_audio|audio/],
  },
  {
    name: "generated-image",
    items: [
      execCall("call-1", `generatedImage({ image_url: ${JSON.stringify(PNG)}, output_hint: "a dot" })`),
    ],
    expect: [/Script (completed|failed)/],
  },
  {
    name: "import",
    items: [
      execCall("call-1", `await import("node:fs")`),
      execCall("call-2", `import fs from "node:fs";\ntext("static")`),
    ],
    expect: [/import/],
  },
  {
    name: "store-function",
    items: [
      execCall("call-1", `store("f", () => 1)`),
      execCall("call-2", `store("s", Symbol("s"))`),
      execCall("call-3", `text(String(load("f")))`),
    ],
    expect: [/Script failed/],
  },
  {
    name: "text-symbol",
    items: [execCall("call-1", `text(Symbol("s")); text(() => 1); text(undefined); text("end")`)],
    expect: [/end/],
  },
];

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
    seen: normalise(record?.input ?? []),
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

function table(
  scenarios: readonly Scenario[],
  transports: readonly Transport[],
  same: (scenario: string, transport: Transport) => boolean,
): string {
  const rows = [
    `| scenario | ${transports.join(" | ")} |`,
    `| --- | ${transports.map(() => "---").join(" | ")} |`,
  ];
  for (const scenario of scenarios) {
    rows.push(
      `| ${scenario.name} | ${transports.map((t) => same(scenario.name, t) ? "same" : "DIFF").join(" | ")} |`,
    );
  }
  const totals = transports.map((t) =>
    `${scenarios.filter((s) => same(s.name, t)).length}/${scenarios.length}`
  );
  rows.push(`| **same** | ${totals.join(" | ")} |`);
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

    const jobs: (() => Promise<RunResult>)[] = [];
    for (const scenario of scenarios) {
      for (const transport of transports) {
        for (const host of ["reference", "ours"] as const) {
          jobs.push(() => runOne(ctx, scenario, transport, host));
        }
      }
    }
    const started = performance.now();
    const results = await pool(jobs, Number(Deno.env.get("CODEX_E2E_JOBS") ?? 3));
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    const find = (scenario: string, transport: Transport, host: HostKind) =>
      results.find((r) => r.scenario === scenario && r.transport === transport && r.host === host)!;
    const same = (scenario: string, transport: Transport) =>
      JSON.stringify(find(scenario, transport, "reference").seen) ===
        JSON.stringify(find(scenario, transport, "ours").seen) &&
      find(scenario, transport, "ours").codex.code === find(scenario, transport, "reference").codex.code;

    const report = Deno.env.get("CODEX_E2E_REPORT");
    if (report) await Deno.writeTextFile(report, JSON.stringify(results, null, 1));
    const details: string[] = [];
    for (const scenario of scenarios) {
      for (const transport of transports) {
        if (same(scenario.name, transport)) continue;
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
        table(scenarios, transports, same)
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
          if (transport !== "grpc-tcp") {
            // Codex started this checkout's launcher, in the form the transport has.
            assert.ok(ours.launches.length > 0, "Codex started our host");
            assert.equal(ours.launches[0], transport === "grpc-stdio" ? "--listen grpc+stdio://" : "");
          }
          if (!same(scenario.name, transport)) assert.fail(describeDifference(reference, ours).join("\n"));
        });
      }
    }
  } finally {
    if (Deno.env.get("CODEX_E2E_KEEP")) console.log(`run directories kept in ${tmp}`);
    else await Deno.remove(tmp, { recursive: true });
  }
});

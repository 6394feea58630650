/**
 * The harness kit (`client/harness/`) against the real Codex 0.171: the `exec` and `wait` tools the kit
 * builds are, byte for byte, the ones Codex sends the model for the same enabled tools. Part of
 * `deno task test:reference` (it needs the reference install, `_codex.ts`).
 *
 * - Codex runs once per configuration (code mode; code-mode-only; another default yield; fewer built-in
 *   tools; `tool_search` as a nested tool; an MCP server, whose tools Codex defers), with the fake model
 *   (`_fake_model.ts`) and Codex's own host over JSON V1, wrapped so that what Codex sends the host is
 *   recorded. Nothing is hard-coded: the expected texts are the live `tools` of Codex's first request.
 * - The enabled tools are those Codex sends its host in `session/execute` (`enabled_tools`: already
 *   augmented, sorted by name). Codex declares the tools without a namespace and defers the namespaced
 *   ones (MCP servers', multi-agent); the kit gets the same split.
 * - Augmentation from raw definitions: the MCP fixture server's own `tools/list` (description, server
 *   instructions, input and output schemas) augmented by the kit equals what Codex sent the host; each
 *   built-in function tool's model-facing description is the kit's augmentation of its `parameters`
 *   (whole when its result type is `unknown`; up to the result type otherwise, which the request does not
 *   carry as a schema).
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { ensureCodex } from "./_codex.ts";
import { execCall, FakeModel } from "./_fake_model.ts";
import { LoopbackNet } from "./_netns.ts";
import { makeShadow, REPO_ROOT, shQuote } from "./_shadow.ts";
import { codexExec, machineDenoDir, makeRunDir } from "./_codex_run.ts";
import {
  augmentToolDefinition,
  buildExecToolDefinition,
  DEFAULT_EXEC_YIELD_TIME_MS,
  type ExecToolDescriptionOptions,
  mcpCallToolResultSchema,
  WAIT_TOOL_DEFINITION,
} from "../../client/harness/mod.ts";
import type { ToolDefinition } from "../../client/types.ts";
import { Client, StdioClientTransport } from "../../host/doors/mcp/sdk.ts";

const FIXTURE = join(REPO_ROOT, "tests", "mcp_fixture_server.ts");

/** One Codex configuration: lines for `[features]`, more TOML after the file, and what the kit is told. */
interface Variant {
  readonly name: string;
  readonly features: string;
  readonly extra?: (denoDir: string) => string;
  readonly options: ExecToolDescriptionOptions;
}

const MCP_SERVER = (denoDir: string) =>
  `[mcp_servers.fixture]
required = true
startup_timeout_sec = 60
command = ${JSON.stringify(Deno.execPath())}
args = ["run", "--quiet", "--allow-env=FIXTURE_EVENTS_URL", "--config", ${
    JSON.stringify(join(REPO_ROOT, "deno.json"))
  }, ${JSON.stringify(FIXTURE)}]
env = { DENO_DIR = ${JSON.stringify(denoDir)} }
`;

const VARIANTS: readonly Variant[] = [
  { name: "code mode", features: "", options: {} },
  {
    name: "code mode, a 5000 ms default yield",
    // `code_mode` as a table: `enabled` and the default the `exec` description states.
    features: "[features.code_mode]\nenabled = true\ndefault_exec_yield_time_ms = 5000",
    options: { defaultYieldTimeMs: 5000 },
  },
  {
    name: "code mode, no goals, no multi-agent",
    features: "goals = false\nmulti_agent = false",
    options: {},
  },
  { name: "code mode, tool_search nested", features: "code_mode_tool_search = true", options: {} },
  { name: "code-mode-only", features: "code_mode_only = true", options: { codeModeOnly: true } },
  {
    name: "code-mode-only, no goals, no multi-agent",
    features: "code_mode_only = true\ngoals = false\nmulti_agent = false",
    options: { codeModeOnly: true },
  },
  {
    name: "code-mode-only, an MCP server",
    features: "code_mode_only = true",
    extra: MCP_SERVER,
    options: { codeModeOnly: true },
  },
  {
    name: "code mode, an MCP server, a 20000 ms default yield",
    features: "[features.code_mode]\nenabled = true\ndefault_exec_yield_time_ms = 20000",
    extra: MCP_SERVER,
    options: { defaultYieldTimeMs: 20000 },
  },
];

// deno-lint-ignore no-explicit-any
type Json = any;

/** The JSON V1 frames of a recording: a little-endian u32 length, then that many bytes of JSON. */
function v1Frames(bytes: Uint8Array): Json[] {
  const frames: Json[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = 0; at + 4 <= bytes.length;) {
    const length = view.getUint32(at, true);
    frames.push(JSON.parse(new TextDecoder().decode(bytes.subarray(at + 4, at + 4 + length))));
    at += 4 + length;
  }
  return frames;
}

/** A tool Codex sent its host, as the kit's `ToolDefinition`. */
function definition(tool: Json): ToolDefinition {
  return {
    name: tool.name,
    toolName: {
      name: tool.tool_name.name,
      ...(tool.tool_name.namespace === null ? {} : { namespace: tool.tool_name.namespace }),
    },
    description: tool.description,
    kind: tool.kind,
    ...(tool.input_schema === null ? {} : { inputSchema: tool.input_schema }),
    ...(tool.output_schema === null ? {} : { outputSchema: tool.output_schema }),
  };
}

/** Where two strings first differ, with some context. */
function firstDifference(a: string, b: string): string {
  let at = 0;
  while (at < a.length && a[at] === b[at]) at++;
  return `at ${at}:\n  kit:   ${JSON.stringify(a.slice(Math.max(0, at - 80), at + 120))}\n  codex: ${
    JSON.stringify(b.slice(Math.max(0, at - 80), at + 120))
  }`;
}

interface Captured {
  /** The `tools` of Codex's first request. */
  readonly tools: Json[];
  /** The `request` of the first `session/execute` Codex sent its host. */
  readonly execute: Json;
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

/** The fixture server's tools and instructions, from its own `tools/list`. */
async function fixtureTools(denoDir: string): Promise<{ tools: Json[]; instructions: string }> {
  const client = new Client({ name: "harness-tools-test", version: "1.0.0" });
  await client.connect(
    new StdioClientTransport({
      command: Deno.execPath(),
      args: [
        "run",
        "--quiet",
        "--allow-env=FIXTURE_EVENTS_URL",
        "--config",
        join(REPO_ROOT, "deno.json"),
        FIXTURE,
      ],
      env: { DENO_DIR: denoDir, PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
    }),
  );
  try {
    const { tools } = await client.listTools();
    return { tools, instructions: client.getInstructions() ?? "" };
  } finally {
    await client.close();
  }
}

Deno.test({
  name: "the harness kit's exec and wait tools are, byte for byte, what Codex 0.171 sends the model",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const install = await ensureCodex();
    const denoDir = await machineDenoDir();
    const tmp = await Deno.makeTempDir({ prefix: "harness-tools-" });
    const runs = join(tmp, "runs");
    try {
      await using model = await FakeModel.start(join(tmp, "model.sock"));
      await using net = await LoopbackNet.start(model);
      // Codex's own host over JSON V1, behind a tee that records what Codex sends it.
      const shadow = await makeShadow(install, join(tmp, "shadow"), {
        script: `tee -a ${shQuote(runs)}/"$CODEX_E2E_RUN"/host-in.v1 | ${shQuote(install.host)} "$@"`,
      });
      const captured = await pool(
        VARIANTS.map((variant, index) => async (): Promise<Captured> => {
          const name = `variant-${index}`;
          const run = await makeRunDir(runs, name, net.modelPort);
          const config = join(run.codexHome, "config.toml");
          let text = await Deno.readTextFile(config);
          if (variant.features.includes("[features.code_mode]")) {
            text = text.replace("code_mode = true\n", "");
          }
          // The table form of `features.code_mode` goes last in `[features]` (a table ends it).
          text = text.replace("[analytics]", `${variant.features}\n[analytics]`);
          await Deno.writeTextFile(config, `${text}\n${variant.extra?.(denoDir) ?? ""}`);
          model.script(name, [execCall("call-1", `text(ALL_TOOLS.length)`)]);
          const codex = await codexExec(net, run, {
            codex: shadow.codex,
            prompt: name,
            args: ["--disable", "code_mode_host_grpc"],
          });
          assert.equal(codex.code, 0, `${variant.name}: codex exec failed:\n${codex.stderr.slice(-3000)}`);
          const record = model.record(name);
          assert.ok(record, `${variant.name}: Codex made no request`);
          const frames = v1Frames(await Deno.readFile(join(run.dir, "host-in.v1")));
          const execute = frames.find((f) => f.request?.method === "session/execute")?.request.request;
          assert.ok(execute, `${variant.name}: Codex sent its host no session/execute`);
          return { tools: model.record(name)!.body.tools, execute };
        }),
        Number(Deno.env.get("CODEX_E2E_JOBS") ?? 3),
      );

      for (const [index, variant] of VARIANTS.entries()) {
        await t.step(variant.name, () => {
          const { tools, execute } = captured[index];
          const exec = tools.find((tool: Json) => tool.name === "exec");
          const wait = tools.find((tool: Json) => tool.name === "wait");
          assert.ok(exec && wait, "Codex offered exec and wait");
          const enabled = (execute.enabled_tools as Json[]).map(definition);
          const declared = enabled.filter((tool) => tool.toolName.namespace === undefined);
          const deferred = enabled.filter((tool) => tool.toolName.namespace !== undefined);
          const kit = buildExecToolDefinition(declared, {
            ...variant.options,
            deferredTools: deferred,
            augmented: true,
          });
          const [ours, theirs] = [JSON.stringify(kit), JSON.stringify(exec)];
          if (ours !== theirs) assert.fail(`the exec tool differs ${firstDifference(ours, theirs)}`);
          assert.equal(JSON.stringify(WAIT_TOOL_DEFINITION), JSON.stringify(wait), "the wait tool");
          // The default yield the text states is the one Codex asks for when the model gives none.
          assert.equal(
            execute.yield_time_ms,
            variant.options.defaultYieldTimeMs ?? DEFAULT_EXEC_YIELD_TIME_MS,
          );
          if (variant.options.codeModeOnly) {
            assert.ok(declared.length > 0 && exec.description.includes("\n\n### `"), "tools are declared");
          }
          if (variant.extra) {
            assert.ok(
              deferred.some((tool) => tool.name === "mcp__fixture__lookup"),
              "the MCP tools are enabled",
            );
            assert.ok(!exec.description.includes("mcp__fixture__"), "… and deferred: not declared");
          }
        });
      }

      await t.step("an MCP server's tools: the kit augments its own tools/list as Codex does", async () => {
        const { tools, instructions } = await fixtureTools(denoDir);
        const sent = VARIANTS.flatMap((variant, index) => variant.extra ? [captured[index].execute] : [])[0]
          .enabled_tools as Json[];
        assert.equal(tools.length, 2);
        for (const tool of tools) {
          const name = `mcp__fixture__${tool.name}`;
          const codex = sent.find((t) => t.name === name);
          assert.ok(codex, `Codex enabled ${name}`);
          const raw: ToolDefinition = {
            name,
            toolName: { namespace: "mcp__fixture", name: tool.name },
            // Codex appends the server's instructions to each of its tools' descriptions.
            description: `${tool.description}\n\n${instructions}`,
            kind: "function",
            inputSchema: tool.inputSchema,
            outputSchema: mcpCallToolResultSchema(tool.outputSchema),
          };
          const ours = augmentToolDefinition(raw).description;
          if (ours !== codex.description) assert.fail(`${name} ${firstDifference(ours, codex.description)}`);
        }
      });

      await t.step("built-in tools: the kit renders each one's parameters as Codex declares them", () => {
        const tools = captured[0].tools.filter((tool: Json) =>
          (tool.type === "function" || tool.type === "custom") && tool.name !== "exec" && tool.name !== "wait"
        );
        let compared = 0;
        for (const tool of tools) {
          const at = tool.description.indexOf("\n\nexec tool declaration:\n");
          if (at < 0) continue; // not callable from cells (request_user_input)
          const raw: ToolDefinition = {
            name: tool.name,
            toolName: { name: tool.name },
            description: tool.description.slice(0, at),
            kind: tool.type === "custom" ? "freeform" : "function",
            ...(tool.type === "function" ? { inputSchema: tool.parameters } : {}),
          };
          const ours = augmentToolDefinition(raw).description;
          // The result type is not in the request as a schema: compare up to it when it is not `unknown`.
          const end = tool.description.lastIndexOf("): Promise<");
          const full = tool.description.endsWith("): Promise<unknown>; };\n```");
          const [a, b] = full
            ? [ours, tool.description]
            : [ours.slice(0, end), tool.description.slice(0, end)];
          if (a !== b) assert.fail(`${tool.name} ${firstDifference(a, b)}`);
          compared++;
        }
        assert.ok(compared >= 6, `compared ${compared} built-in tools`);
      });
    } finally {
      if (Deno.env.get("CODEX_E2E_KEEP")) console.log(`run directories kept in ${tmp}`);
      else await Deno.remove(tmp, { recursive: true });
    }
  },
});

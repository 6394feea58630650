import assert from "node:assert/strict";
import type { ToolDefinition } from "../types.ts";
import {
  buildExecToolDescription,
  DEFERRED_TOOLS_GUIDANCE,
  EXEC_TOOL_MAIN_DESCRIPTION,
  WAIT_TOOL_DESCRIPTION,
  WAIT_TOOL_PARAMETERS,
} from "./exec_tool.ts";
import { augmentToolDefinition, mcpCallToolResultSchema } from "./tool_declaration.ts";
import { HELPER_FUNCTIONS } from "../../tests/_spec_lists.ts";

function count(haystack: string, needle: string): number {
  return haystack.split(needle).length - 1;
}

const mcpTool = (name: string, description: string): ToolDefinition => ({
  name: `mcp__sample__${name}`,
  toolName: { namespace: "mcp__sample", name },
  description,
  kind: "function",
  inputSchema: { type: "object", properties: {}, additionalProperties: false },
  outputSchema: mcpCallToolResultSchema({ type: "object", properties: {}, additionalProperties: false }),
});

Deno.test("scenario 147: code-mode-only groups a namespace once, declares the MCP types once, heads each tool", () => {
  const tools = [mcpTool("alpha", "First tool"), mcpTool("beta", "Second tool")];
  const description = buildExecToolDescription(tools, {
    codeModeOnly: true,
    namespaceDescriptions: {
      mcp__sample: { name: "mcp__sample", description: "  Shared namespace guidance.\n" },
    },
  });
  assert.equal(count(description, "## mcp__sample"), 1);
  assert.ok(
    description.includes("\n\n## mcp__sample\nShared namespace guidance.\n\n### `mcp__sample__alpha`\n"),
  );
  assert.equal(count(description, "Shared MCP Types:"), 1);
  assert.equal(count(description, "type CallToolResult<TStructured"), 1);
  assert.ok(description.includes("\n\n### `mcp__sample__alpha`\nFirst tool\n\nexec tool declaration:\n"));
  assert.ok(description.includes("\n\n### `mcp__sample__beta`\nSecond tool\n\nexec tool declaration:\n"));
  assert.ok(description.includes("mcp__sample__beta(args: {}): Promise<CallToolResult<{}>>;"));
  // The sections in order: main text, shared types, namespace, then the tools.
  const order = ["Global helpers:", "Shared MCP Types:", "## mcp__sample", "### `mcp__sample__alpha`"];
  const positions = order.map((needle) => description.indexOf(needle));
  assert.deepEqual([...positions].sort((a, b) => a - b), positions);

  const blank = buildExecToolDescription(tools, {
    codeModeOnly: true,
    namespaceDescriptions: { mcp__sample: { name: "mcp__sample", description: " \n\t" } },
  });
  assert.equal(count(blank, "\n## "), 0);
  assert.equal(count(blank, "### `"), 2);
});

Deno.test("scenario 148: the description declares the timer helpers; deferred tools add the ALL_TOOLS guidance", () => {
  const description = buildExecToolDescription([], {});
  assert.ok(description.includes("setTimeout(callback: () => void, delayMs?: number): number"));
  assert.ok(description.includes("clearTimeout(timeoutId?: number): void"));
  assert.equal(description, EXEC_TOOL_MAIN_DESCRIPTION);
  const deferred = buildExecToolDescription([], { hasDeferredTools: true });
  assert.equal(deferred, `${EXEC_TOOL_MAIN_DESCRIPTION}\n\n${DEFERRED_TOOLS_GUIDANCE}`);
  assert.ok(deferred.includes("filter `ALL_TOOLS` by `name` and `description`"));
});

Deno.test("the main exec text: first line, the pragma line, the helper list in SPEC order", () => {
  const lines = EXEC_TOOL_MAIN_DESCRIPTION.split("\n");
  assert.equal(lines.length, 19);
  assert.equal(
    lines[0],
    "Run JavaScript in a fresh sandboxed V8 isolate to orchestrate tool calls. The code runs as an async ES " +
      "module, so top-level `await` works.",
  );
  assert.equal(lines[6], "");
  assert.equal(lines[7], "Global helpers:");
  const helpers = lines.slice(8).map((line) => line.match(/^- `([A-Za-z_]+)/)?.[1]);
  // Every helper of a cell (SPEC §5.3) is described, exit first and yield_control last, as §11.1 lists them.
  assert.deepEqual(new Set(helpers), new Set([...HELPER_FUNCTIONS, "ALL_TOOLS"]));
  assert.equal(helpers.length, HELPER_FUNCTIONS.length + 1);
  assert.deepEqual([helpers[0], helpers.at(-1)], ["exit", "yield_control"]);
  assert.ok(lines[4].startsWith('- The first line may be a pragma: `// @exec: {"yield_time_ms": 10000, '));
});

Deno.test("without codeModeOnly no tool is declared, whatever the tools", () => {
  const tools = [mcpTool("alpha", "First tool")];
  assert.equal(buildExecToolDescription(tools), EXEC_TOOL_MAIN_DESCRIPTION);
  assert.equal(
    buildExecToolDescription(tools, { deferredTools: tools }),
    `${EXEC_TOOL_MAIN_DESCRIPTION}\n\n${DEFERRED_TOOLS_GUIDANCE}`,
  );
});

Deno.test("code-mode-only: headings show the raw name when normalisation changed it; exec and wait are skipped", () => {
  const plain: ToolDefinition = {
    name: "hidden-dynamic-tool",
    toolName: { name: "hidden-dynamic-tool" },
    description: "Test tool",
    kind: "freeform",
  };
  const exec: ToolDefinition = {
    name: "exec",
    toolName: { name: "exec" },
    description: "x",
    kind: "freeform",
  };
  const description = buildExecToolDescription([plain, exec], { codeModeOnly: true });
  assert.equal(
    description,
    `${EXEC_TOOL_MAIN_DESCRIPTION}\n\n### \`hidden_dynamic_tool\` (\`hidden-dynamic-tool\`)\n` +
      augmentToolDefinition(plain).description,
  );
  assert.ok(!description.includes("Shared MCP Types:"));
});

Deno.test("code-mode-only: an MCP-shaped deferred tool alone brings the shared MCP types", () => {
  const description = buildExecToolDescription([], {
    codeModeOnly: true,
    deferredTools: [mcpTool("d", "D")],
  });
  assert.equal(count(description, "Shared MCP Types:\n```ts\ntype Role = "), 1);
  assert.ok(description.includes(DEFERRED_TOOLS_GUIDANCE));
  assert.ok(description.endsWith("\n```"));
  assert.equal(count(description, "### `"), 0);
  assert.ok(
    !buildExecToolDescription([], {
      codeModeOnly: true,
      deferredTools: [mcpTool("d", "D")],
      hasDeferredTools: false,
    })
      .includes(DEFERRED_TOOLS_GUIDANCE),
  );
});

Deno.test("code-mode-only: a namespace heading is shown once, when the namespace first appears", () => {
  const tool = (namespace: string | undefined, name: string): ToolDefinition => ({
    name,
    toolName: { namespace, name },
    description: name,
    kind: "function",
  });
  const description = buildExecToolDescription(
    [tool("a", "a1"), tool("b", "b1"), tool("a", "a2"), tool(undefined, "plain"), tool("c", "c1")],
    {
      codeModeOnly: true,
      namespaceDescriptions: {
        a: { name: "A", description: "about a" },
        b: { name: "B", description: "about b" },
      },
    },
  );
  const headings = description.split("\n").filter((line) => line.startsWith("#"));
  assert.deepEqual(headings, [
    "## A",
    "### `a1`",
    "## B",
    "### `b1`",
    "### `a2`",
    "### `plain`",
    "### `c1`",
  ]);
});

Deno.test("the wait tool: description lines and parameters as §11.1 gives them", () => {
  assert.deepEqual(WAIT_TOOL_DESCRIPTION.split("\n").map((line) => line.slice(0, 20)), [
    "Waits on a yielded `",
    "- Use it only after ",
    "- `cell_id`: the ID ",
    "- `yield_time_ms`: h",
    "- `max_tokens`: outp",
    "- `terminate`: true ",
    "- Each result contai",
  ]);
  assert.ok(
    Object.isFrozen(WAIT_TOOL_PARAMETERS) && Object.isFrozen(WAIT_TOOL_PARAMETERS.properties.cell_id),
  );
  assert.deepEqual(JSON.parse(JSON.stringify(WAIT_TOOL_PARAMETERS)), {
    type: "object",
    additionalProperties: false,
    required: ["cell_id"],
    properties: {
      cell_id: { type: "string", description: "Identifier of the running exec cell." },
      yield_time_ms: {
        type: "number",
        description: "Wait before yielding more output. Defaults to 10000 ms.",
      },
      max_tokens: {
        type: "number",
        description: "Output token budget for this wait call. Defaults to 10000 tokens.",
      },
      terminate: {
        type: "boolean",
        description: "True stops the running exec cell; false or omitted waits for output.",
      },
    },
  });
});

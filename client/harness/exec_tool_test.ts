import assert from "node:assert/strict";
import type { ToolDefinition } from "../types.ts";
import {
  buildExecToolDefinition,
  buildExecToolDescription,
  DEFERRED_TOOLS_GUIDANCE,
  EXEC_TOOL_GRAMMAR,
  EXEC_TOOL_MAIN_DESCRIPTION,
  execToolMainDescription,
  TOOL_AVAILABILITY_NOTICE,
  TOOL_SEARCH_GUIDANCE,
  WAIT_TOOL_DEFINITION,
  WAIT_TOOL_DESCRIPTION,
  WAIT_TOOL_PARAMETERS,
} from "./exec_tool.ts";
import {
  augmentToolDefinition,
  MCP_TYPESCRIPT_PREAMBLE,
  mcpCallToolResultSchema,
} from "./tool_declaration.ts";
import { HELPER_FUNCTIONS } from "../../tests/_spec_lists.ts";

/** What every description starts with: the main text, the deferred-tools guidance and the availability notice. */
const HEAD = `${EXEC_TOOL_MAIN_DESCRIPTION}\n\n${DEFERRED_TOOLS_GUIDANCE}\n\n${TOOL_AVAILABILITY_NOTICE}`;

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

Deno.test("scenario 148: the description declares the timer helpers; the deferred-tools guidance and the availability notice always follow (Codex 0.171)", () => {
  const description = buildExecToolDescription([], {});
  assert.ok(
    description.includes("- `setTimeout(callback: () => void, delayMs?: number)`: schedules a callback"),
  );
  assert.ok(description.includes("- `clearTimeout(timeoutId?: number)`: cancels a timeout"));
  assert.equal(description, HEAD);
  assert.ok(description.includes("filter `ALL_TOOLS` by `name` and `description`"));
  assert.equal(
    buildExecToolDescription([], { deferredToolsGuidance: false }),
    `${EXEC_TOOL_MAIN_DESCRIPTION}\n\n${TOOL_AVAILABILITY_NOTICE}`,
  );
  assert.equal(
    buildExecToolDescription([], { deferredToolsGuidance: false, toolAvailabilityNotice: false }),
    EXEC_TOOL_MAIN_DESCRIPTION,
  );
});

Deno.test("the main exec text: Codex 0.171's first line, the default yield, the helper list in its order", () => {
  const lines = EXEC_TOOL_MAIN_DESCRIPTION.split("\n");
  assert.equal(lines.length, 25);
  assert.equal(lines[0], "Run JavaScript code to orchestrate/compose tool calls");
  assert.equal(
    lines[8],
    "- `yield_time_ms` asks `exec` to yield early if the script is still running. Defaults to 30000 ms.",
  );
  assert.equal(lines[11], "");
  assert.equal(lines[12], "- Global helpers:");
  const helpers = lines.slice(13).map((line) => line.match(/^- `([A-Za-z_]+)/)?.[1]);
  assert.deepEqual(helpers, [
    "exit",
    "text",
    "image",
    "audio",
    "generatedImage",
    "store",
    "load",
    "notify",
    "setTimeout",
    "clearTimeout",
    "ALL_TOOLS",
    "yield_control",
  ]);
  // Every helper of a cell (SPEC §5.3, and Codex's `audio`) is described.
  assert.deepEqual(new Set(helpers), new Set([...HELPER_FUNCTIONS, "audio", "ALL_TOOLS"]));
  assert.ok(lines[15].startsWith("- `image(imageUrlOrItem: string | { image_url: string } | ImageContent)`"));
});

Deno.test("the main exec text: another default yield, and the image line of a model with the original detail", () => {
  const text = execToolMainDescription(5000, true);
  assert.ok(text.includes("yield early if the script is still running. Defaults to 5000 ms.\n"));
  assert.ok(!text.includes("30000"));
  const image = text.split("\n")[15];
  assert.ok(
    image.startsWith('- `image(imageUrlOrItem: string | { image_url: string; detail?: "auto" | "low" |'),
  );
  assert.ok(image.endsWith("overrides any detail embedded in the first argument."));
  assert.equal(
    buildExecToolDescription([], { defaultYieldTimeMs: 5000, imageDetail: true }).split("\n\n")[0],
    text.split("\n\n")[0],
  );
});

Deno.test("tool_search among the enabled tools, declared or deferred, adds its guidance after the notice", () => {
  const search: ToolDefinition = {
    name: "tool_search",
    toolName: { name: "tool_search" },
    description: "",
    kind: "function",
  };
  assert.equal(
    buildExecToolDescription([], { deferredTools: [search] }),
    `${HEAD}\n\n${TOOL_SEARCH_GUIDANCE}`,
  );
  assert.equal(buildExecToolDescription([search]), `${HEAD}\n\n${TOOL_SEARCH_GUIDANCE}`);
  assert.ok(TOOL_SEARCH_GUIDANCE.startsWith('Use `await tools.tool_search({query: "...", limit: 8})`'));
});

Deno.test("without codeModeOnly no tool is declared, whatever the tools", () => {
  const tools = [mcpTool("alpha", "First tool")];
  assert.equal(buildExecToolDescription(tools), HEAD);
  assert.equal(buildExecToolDescription(tools, { deferredTools: tools }), HEAD);
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
    `${HEAD}\n\nShared MCP Types:\n\`\`\`ts\n${MCP_TYPESCRIPT_PREAMBLE}\n\`\`\`\n\n` +
      `### \`hidden_dynamic_tool\` (\`hidden-dynamic-tool\`)\n` + augmentToolDefinition(plain).description,
  );
  // Only exec and wait: nothing to declare, so no shared types either.
  assert.equal(buildExecToolDescription([exec], { codeModeOnly: true }), HEAD);
});

Deno.test("code-mode-only: augmented tools are used as they are; a blank description leaves the heading alone", () => {
  const plain: ToolDefinition = {
    name: "t",
    toolName: { name: "t" },
    description:
      "Already declared.\n\nexec tool declaration:\n```ts\ndeclare const tools: { t(args: {}): Promise<unknown>; };\n```\n",
    kind: "function",
  };
  const blank: ToolDefinition = { name: "b", toolName: { name: "b" }, description: " \n", kind: "function" };
  const description = buildExecToolDescription([plain, blank], { codeModeOnly: true, augmented: true });
  assert.ok(description.endsWith(`\n\n### \`t\`\n${plain.description.trim()}\n\n### \`b\``));
  assert.equal(count(description, "exec tool declaration:"), 1);
});

Deno.test("code-mode-only: the shared MCP types come with any declared tool, and never for deferred tools alone", () => {
  // Codex 0.171 sends them in every code-mode-only description with declared tools, MCP-shaped or not.
  const plain: ToolDefinition = { name: "p", toolName: { name: "p" }, description: "P", kind: "freeform" };
  assert.equal(
    count(
      buildExecToolDescription([plain], { codeModeOnly: true }),
      "Shared MCP Types:\n```ts\ntype Role = ",
    ),
    1,
  );
  const deferredOnly = buildExecToolDescription([], {
    codeModeOnly: true,
    deferredTools: [mcpTool("d", "D")],
  });
  assert.equal(deferredOnly, HEAD);
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

Deno.test("the wait tool: Codex 0.171's description, parameters in its key order, the whole definition", () => {
  assert.deepEqual(WAIT_TOOL_DESCRIPTION.split("\n").map((line) => line.slice(0, 20)), [
    "Waits on a yielded `",
    "- Use `wait` only af",
    "- `cell_id` identifi",
    "- `yield_time_ms` co",
    "- `max_tokens` limit",
    "- `terminate: true` ",
    "- `wait` returns onl",
    "- If the cell is sti",
    "- If the cell has al",
  ]);
  assert.ok(
    Object.isFrozen(WAIT_TOOL_PARAMETERS) && Object.isFrozen(WAIT_TOOL_PARAMETERS.properties.cell_id) &&
      Object.isFrozen(WAIT_TOOL_DEFINITION),
  );
  assert.equal(
    JSON.stringify(WAIT_TOOL_PARAMETERS),
    JSON.stringify({
      type: "object",
      properties: {
        cell_id: { type: "string", description: "Identifier of the running exec cell." },
        max_tokens: {
          type: "number",
          description: "Output token budget for this wait call. Defaults to 10000 tokens.",
        },
        terminate: {
          type: "boolean",
          description: "True stops the running exec cell; false or omitted waits for output.",
        },
        yield_time_ms: {
          type: "number",
          description: "Wait before yielding more output. Defaults to 10000 ms.",
        },
      },
      required: ["cell_id"],
      additionalProperties: false,
    }),
  );
  assert.deepEqual(Object.keys(WAIT_TOOL_DEFINITION), [
    "type",
    "name",
    "description",
    "strict",
    "parameters",
  ]);
  assert.equal(WAIT_TOOL_DEFINITION.strict, false);
});

Deno.test("the exec tool definition: a custom tool with the Lark grammar, in Codex's key order", () => {
  const tool = buildExecToolDefinition([]);
  assert.deepEqual(Object.keys(tool), ["type", "name", "description", "format"]);
  assert.deepEqual(tool.format, { type: "grammar", syntax: "lark", definition: EXEC_TOOL_GRAMMAR });
  assert.equal(tool.description, HEAD);
  assert.ok(EXEC_TOOL_GRAMMAR.startsWith("\nstart: pragma_source | plain_source\n"));
  assert.ok(EXEC_TOOL_GRAMMAR.endsWith("\nSOURCE: /[\\s\\S]+/\n"));
});

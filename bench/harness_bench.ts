/**
 * Micro costs of the harness kit (SPEC §11) that a harness pays per call: formatting a Client-mode result
 * (against one UTF-8 length pass over the same text, the least any byte budget needs), and building the `exec`
 * description for 100 tools.
 */
import {
  buildExecToolDescription,
  formatRuntimeResponse,
  mcpCallToolResultSchema,
  type ToolDefinition,
} from "../mod.ts";

const mib = "0123456789abcdef\n".repeat(Math.ceil(1_048_576 / 17));
const response = { type: "result", cellId: "1", contentItems: [{ type: "input_text", text: mib }] } as const;
const items = Array.from(
  { length: 256 },
  (_, i) => ({ type: "input_text", text: `line ${i} `.repeat(400) }) as const,
);
const many = { type: "result", cellId: "1", contentItems: items } as const;

Deno.bench({ name: "UTF-8 length of 1 MiB (floor)", group: "format", baseline: true }, () => {
  Buffer.byteLength(mib, "utf8");
});
Deno.bench({ name: "formatRuntimeResponse, one 1 MiB text, T = 10000", group: "format" }, () => {
  formatRuntimeResponse(response, { outputTruncation: "client", wallTimeMs: 1234 });
});
Deno.bench({ name: "formatRuntimeResponse, 256 texts (~1 MiB), T = 10000", group: "format" }, () => {
  formatRuntimeResponse(many, { outputTruncation: "client", wallTimeMs: 1234 });
});

const tools: ToolDefinition[] = Array.from({ length: 100 }, (_, i) => ({
  name: `mcp__server${i % 5}__tool_${i}`,
  toolName: { namespace: `mcp__server${i % 5}__`, name: `tool_${i}` },
  description: `Tool number ${i}.`,
  kind: "function",
  inputSchema: {
    type: "object",
    properties: {
      query: { type: "string", description: "What to look for" },
      limit: { type: "integer" },
      filter: { $ref: "#/$defs/filter" },
    },
    required: ["query"],
    $defs: { filter: { type: "object", properties: { tag: { enum: ["a", "b", "c"] } } } },
  },
  outputSchema: mcpCallToolResultSchema({
    type: "object",
    properties: { hits: { type: "array", items: { type: "string" } } },
  }),
}));
const namespaceDescriptions = Object.fromEntries(
  Array.from(
    { length: 5 },
    (_, i) => [`mcp__server${i}__`, { name: `server${i}`, description: `Server ${i}.` }],
  ),
);

Deno.bench({ name: "buildExecToolDescription, 100 MCP tools in 5 namespaces", group: "describe" }, () => {
  buildExecToolDescription(tools, { codeModeOnly: true, namespaceDescriptions });
});

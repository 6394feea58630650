import assert from "node:assert/strict";
import type { ToolDefinition } from "../types.ts";
import { normalizeCodeModeIdentifier } from "../../proto/identifiers.ts";
import {
  augmentToolDefinition,
  isMcpCallToolResultSchema,
  mcpCallToolResultSchema,
} from "./tool_declaration.ts";

const FENCE = "`".repeat(3);

function declarationOf(definition: ToolDefinition): string {
  const description = augmentToolDefinition(definition).description;
  const match = description.match(
    /\n\nexec tool declaration:\n```ts\ndeclare const tools: \{ ([\s\S]*) \};\n```$/,
  );
  assert.ok(match, description);
  return match[1];
}

Deno.test("scenario 144: normalizeCodeModeIdentifier keeps identifiers, replaces other characters, and gives _ for empty", () => {
  assert.equal(normalizeCodeModeIdentifier("mcp__ologs__get_profile"), "mcp__ologs__get_profile");
  assert.equal(normalizeCodeModeIdentifier("hidden-dynamic-tool"), "hidden_dynamic_tool");
  assert.equal(normalizeCodeModeIdentifier(""), "_");
  assert.equal(normalizeCodeModeIdentifier("1x"), "_x");
  // Each non-ASCII code point is one `_` (an astral character too); digits and `$` are kept after the first.
  assert.equal(normalizeCodeModeIdentifier("é🦀$9"), "__$9");
});

Deno.test("scenario 145: an augmented description holds the declaration; described properties become comment lines", () => {
  const definition: ToolDefinition = {
    name: "hidden-dynamic-tool",
    toolName: { name: "hidden-dynamic-tool" },
    description: "Test tool",
    kind: "function",
    inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    outputSchema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] },
  };
  const augmented = augmentToolDefinition(definition);
  assert.ok(augmented.description.includes("declare const tools"));
  assert.ok(
    augmented.description.includes(
      "hidden_dynamic_tool(args: { city: string; }): Promise<{ ok: boolean; }>;",
    ),
  );
  assert.equal(
    augmented.description,
    `Test tool\n\nexec tool declaration:\n${FENCE}ts\ndeclare const tools: { ` +
      `hidden_dynamic_tool(args: { city: string; }): Promise<{ ok: boolean; }>; };\n${FENCE}`,
  );
  assert.equal(definition.description, "Test tool"); // not modified
  assert.deepEqual({ ...augmented, description: definition.description }, definition);

  const described = augmentToolDefinition({
    ...definition,
    inputSchema: {
      type: "object",
      properties: { city: { type: "string", description: "The city.\nAny spelling." } },
      required: ["city"],
    },
    outputSchema: {
      type: "object",
      properties: { forecast: { type: "string", description: "The forecast" } },
    },
  });
  assert.ok(described.description.includes(
    "hidden_dynamic_tool(args: {\n  // The city.\n  // Any spelling.\n  city: string;\n}): " +
      "Promise<{\n  // The forecast\n  forecast?: string;\n}>;",
  ));
});

Deno.test("augmentToolDefinition: freeform tools take a string input; absent schemas are unknown", () => {
  const base = { toolName: { name: "x" }, description: "d" } as const;
  assert.equal(
    declarationOf({ ...base, name: "apply_patch", kind: "freeform", inputSchema: { type: "object" } }),
    "apply_patch(input: string): Promise<unknown>;",
  );
  assert.equal(
    declarationOf({ ...base, name: "noop", kind: "function" }),
    "noop(args: unknown): Promise<unknown>;",
  );
});

Deno.test("augmentToolDefinition: an MCP-shaped output schema gives CallToolResult<structured> or CallToolResult", () => {
  const base = {
    toolName: { namespace: "mcp__s__", name: "t" },
    description: "d",
    kind: "function",
  } as const;
  assert.equal(
    declarationOf({
      ...base,
      name: "mcp__s__t",
      inputSchema: { type: "object", properties: {}, additionalProperties: false },
      outputSchema: mcpCallToolResultSchema({
        type: "object",
        properties: { results: { type: "array", items: { $ref: "#/definitions/Result~1item" } } },
        required: ["results"],
        definitions: {
          "Result/item": { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
        },
      }),
    }),
    "mcp__s__t(args: {}): Promise<CallToolResult<{ results: Array<{ id: string; }>; }>>;",
  );
  assert.equal(
    declarationOf({ ...base, name: "mcp__s__u", outputSchema: mcpCallToolResultSchema() }),
    "mcp__s__u(args: unknown): Promise<CallToolResult>;",
  );
});

Deno.test("augmentToolDefinition: exec and wait are returned unchanged", () => {
  for (const name of ["exec", "wait"]) {
    const definition: ToolDefinition = { name, toolName: { name }, description: "d", kind: "function" };
    assert.deepEqual(augmentToolDefinition(definition), definition);
  }
});

Deno.test("isMcpCallToolResultSchema: content must be an array and isError a boolean, in an object schema", () => {
  const content = { type: "array" };
  const isError = { type: "boolean" };
  assert.equal(isMcpCallToolResultSchema({ type: "object", properties: { content, isError } }), true);
  assert.equal(isMcpCallToolResultSchema({ properties: { content, isError } }), true);
  assert.equal(isMcpCallToolResultSchema({ type: "object", properties: { content } }), false);
  assert.equal(isMcpCallToolResultSchema({ type: "object", properties: { isError } }), false);
  assert.equal(
    isMcpCallToolResultSchema({ type: "object", properties: { content: { type: "object" }, isError } }),
    false,
  );
  assert.equal(isMcpCallToolResultSchema({ type: "array", properties: { content, isError } }), false);
  assert.equal(isMcpCallToolResultSchema(undefined), false);
  assert.equal(isMcpCallToolResultSchema(true), false);
});

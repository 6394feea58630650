/**
 * Tool declarations of SPEC §11.3: {@link augmentToolDefinition} appends a nested tool's TypeScript
 * declaration to its description, and MCP-shaped output schemas become `CallToolResult<…>` with the shared
 * MCP types of {@link MCP_TYPESCRIPT_PREAMBLE}.
 *
 * @module
 */
import type { ToolDefinition } from "../types.ts";
import { normalizeCodeModeIdentifier } from "../../proto/identifiers.ts";
import { renderJsonSchemaToTypeScript } from "./json_schema_typescript.ts";
import { isCodeModeNestedTool } from "./names.ts";

/**
 * The shared MCP types of the `exec` description in code-mode-only use, exactly as Codex 0.171 sends
 * them: the MCP schema's `CallToolResult` and its content blocks.
 */
export const MCP_TYPESCRIPT_PREAMBLE: string = `type Role = "user" | "assistant";
type MetaObject = Record<string, unknown>;
type Annotations = {
  audience?: Role[];
  priority?: number;
  lastModified?: string;
};
type Icon = {
  src: string;
  mimeType?: string;
  sizes?: string[];
  theme?: "light" | "dark";
};
type TextResourceContents = {
  uri: string;
  mimeType?: string;
  _meta?: MetaObject;
  text: string;
};
type BlobResourceContents = {
  uri: string;
  mimeType?: string;
  _meta?: MetaObject;
  blob: string;
};
type TextContent = {
  type: "text";
  text: string;
  annotations?: Annotations;
  _meta?: MetaObject;
};
type ImageContent = {
  type: "image";
  data: string;
  mimeType: string;
  annotations?: Annotations;
  _meta?: MetaObject;
};
type AudioContent = {
  type: "audio";
  data: string;
  mimeType: string;
  annotations?: Annotations;
  _meta?: MetaObject;
};
type ResourceLink = {
  icons?: Icon[];
  name: string;
  title?: string;
  uri: string;
  description?: string;
  mimeType?: string;
  annotations?: Annotations;
  size?: number;
  _meta?: MetaObject;
  type: "resource_link";
};
type EmbeddedResource = {
  type: "resource";
  resource: TextResourceContents | BlobResourceContents;
  annotations?: Annotations;
  _meta?: MetaObject;
};
type ContentBlock =
  | TextContent
  | ImageContent
  | AudioContent
  | ResourceLink
  | EmbeddedResource;
type CallToolResult<TStructured = { [key: string]: unknown }> = {
  _meta?: MetaObject;
  content: ContentBlock[];
  isError?: boolean;
  structuredContent?: TStructured;
  [key: string]: unknown;
};`;

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function propertyOfType(properties: JsonObject, name: string, type: string): boolean {
  const schema = Object.hasOwn(properties, name) ? properties[name] : undefined;
  return isObject(schema) && schema.type === type;
}

/**
 * Whether an output schema is MCP-shaped (§11.1): an object schema whose `properties` contain `content` of
 * type `array` and `isError` of type `boolean`, i.e. the schema of an MCP `CallToolResult`.
 *
 * @param schema an output schema (any JSON value)
 * @returns whether it describes an MCP `CallToolResult`
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { isMcpCallToolResultSchema, mcpCallToolResultSchema } from "./tool_declaration.ts";
 *
 * assert.equal(isMcpCallToolResultSchema(mcpCallToolResultSchema()), true);
 * assert.equal(isMcpCallToolResultSchema({ type: "object", properties: { content: { type: "string" } } }), false);
 * ```
 */
export function isMcpCallToolResultSchema(schema: unknown): boolean {
  if (!isObject(schema) || (schema.type !== undefined && schema.type !== "object")) return false;
  const properties = schema.properties;
  return isObject(properties) && propertyOfType(properties, "content", "array") &&
    propertyOfType(properties, "isError", "boolean");
}

/**
 * The MCP-shaped output schema of an upstream MCP tool: a `CallToolResult` whose `structuredContent` is
 * described by the tool's own `outputSchema` (MCP's `outputSchema` describes the structured content only).
 * Give it as a {@link ToolDefinition}'s `outputSchema`, so that the declaration reads
 * `Promise<CallToolResult<…>>` and the shared MCP types are declared.
 *
 * @param structuredContent the MCP tool's `outputSchema`; absent: no structured content is declared
 * @returns the `CallToolResult` schema
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { augmentToolDefinition, mcpCallToolResultSchema } from "./tool_declaration.ts";
 *
 * const { description } = augmentToolDefinition({
 *   name: "mcp__files__stat",
 *   toolName: { namespace: "mcp__files__", name: "stat" },
 *   description: "Stat a file.",
 *   kind: "function",
 *   outputSchema: mcpCallToolResultSchema({ type: "object", properties: { size: { type: "number" } } }),
 * });
 * assert.ok(description.includes("mcp__files__stat(args: unknown): Promise<CallToolResult<{ size?: number; }>>;"));
 * ```
 */
export function mcpCallToolResultSchema(structuredContent?: unknown): Record<string, unknown> {
  const properties: Record<string, unknown> = {
    content: { type: "array", items: { type: "object" } },
    isError: { type: "boolean" },
    _meta: { type: "object" },
  };
  if (structuredContent !== undefined) properties.structuredContent = structuredContent;
  return { type: "object", properties, required: ["content"] };
}

/**
 * Appends the tool's `exec` declaration to its description (SPEC §11.3), for every tool except `exec` and
 * `wait` (those come back unchanged):
 *
 * ````text
 * {description}
 *
 * exec tool declaration:
 * ```ts
 * declare const tools: { {global}({param}: {In}): Promise<{Out}>; };
 * ```
 * ````
 *
 * - `{global}` is the normalised name; `{param}` is `args` (function tools) or `input` (freeform tools).
 * - `{In}` is the rendered input schema, `string` for freeform tools, `unknown` when absent.
 * - `{Out}` is `CallToolResult<{structuredContent}>` (or `CallToolResult` without one) for an MCP-shaped
 *   output schema, else the rendered output schema, else `unknown`.
 *
 * @param definition the tool definition (not modified)
 * @returns a copy with the augmented description
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { augmentToolDefinition } from "./tool_declaration.ts";
 *
 * const augmented = augmentToolDefinition({
 *   name: "hidden-dynamic-tool",
 *   toolName: { name: "hidden-dynamic-tool" },
 *   description: "Test tool",
 *   kind: "function",
 *   inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
 *   outputSchema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] },
 * });
 * const fence = "`".repeat(3);
 * assert.equal(
 *   augmented.description,
 *   `Test tool\n\nexec tool declaration:\n${fence}ts\n` +
 *     `declare const tools: { hidden_dynamic_tool(args: { city: string; }): Promise<{ ok: boolean; }>; };\n${fence}`,
 * );
 * ```
 */
export function augmentToolDefinition(definition: ToolDefinition): ToolDefinition {
  if (!isCodeModeNestedTool(definition.name)) return { ...definition };
  const param = definition.kind === "freeform" ? "input" : "args";
  const input = definition.kind === "freeform"
    ? "string"
    : definition.inputSchema === undefined
    ? "unknown"
    : renderJsonSchemaToTypeScript(definition.inputSchema);
  const declaration =
    `declare const tools: { ${normalizeCodeModeIdentifier(definition.name)}(${param}: ${input}): ` +
    `Promise<${renderOutputType(definition.outputSchema)}>; };`;
  return {
    ...definition,
    description: `${definition.description}\n\nexec tool declaration:\n\`\`\`ts\n${declaration}\n\`\`\``,
  };
}

function renderOutputType(schema: unknown): string {
  if (schema === undefined) return "unknown";
  if (!isMcpCallToolResultSchema(schema)) return renderJsonSchemaToTypeScript(schema);
  const properties = (schema as JsonObject).properties as JsonObject;
  return Object.hasOwn(properties, "structuredContent")
    ? `CallToolResult<${renderJsonSchemaToTypeScript(properties.structuredContent)}>`
    : "CallToolResult";
}

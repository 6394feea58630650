/**
 * The harness kit of SPEC §11: what a harness needs to offer code mode to a model as two tools, `exec`
 * and `wait`, in front of any `CodeModeSession`, with the texts Codex 0.171 sends the model (byte for
 * byte: `tests/reference/harness_tools.ts` compares them with a live capture of the real Codex).
 * Everything here is pure (no I/O) and is re-exported from the repository's `mod.ts`.
 *
 * Index of exports:
 *
 * | Export | File | What it is |
 * | --- | --- | --- |
 * | `PUBLIC_TOOL_NAME` (`"exec"`), `WAIT_TOOL_NAME` (`"wait"`) | `names.ts` | the two tool names |
 * | `CODE_MODE_PRAGMA_PREFIX` (`"// @exec:"`) | `names.ts` | the pragma prefix |
 * | `DEFAULT_EXEC_YIELD_TIME_MS`, `DEFAULT_WAIT_YIELD_TIME_MS`, `DEFAULT_MAX_OUTPUT_TOKENS_PER_EXEC_CALL` | `names.ts` | 30000, 10000, 10000 (Codex 0.171's) |
 * | `isCodeModeNestedTool(name)` | `names.ts` | false only for `exec` and `wait` |
 * | `buildExecToolDescription(tools, options?)`, `ExecToolDescriptionOptions`, `ToolNamespaceDescription` | `exec_tool.ts` | the `exec` description, with the enabled tools' declarations (grouped by namespace) when `codeModeOnly` |
 * | `buildExecToolDefinition(tools, options?)`, `ExecToolDefinition` | `exec_tool.ts` | the whole `exec` tool of a Responses request (custom tool, Lark grammar) |
 * | `execToolMainDescription(defaultYieldTimeMs?, imageDetail?)`, `EXEC_TOOL_MAIN_DESCRIPTION`, `DEFERRED_TOOLS_GUIDANCE`, `TOOL_AVAILABILITY_NOTICE`, `TOOL_SEARCH_GUIDANCE`, `EXEC_TOOL_GRAMMAR` | `exec_tool.ts` | its sections; the freeform grammar |
 * | `WAIT_TOOL_DESCRIPTION`, `WAIT_TOOL_PARAMETERS`, `WAIT_TOOL_DEFINITION`, `WaitToolDefinition` | `exec_tool.ts` | the `wait` tool |
 * | `parseExecSource(input)`, `ParsedExecSource` | `exec_source.ts` | `{ code, yieldTimeMs?, maxOutputTokens? }` or the error text for the model |
 * | `normalizeCodeModeIdentifier(name)` | `proto/identifiers.ts` | the `tools.<name>` identifier (shared with the host) |
 * | `augmentToolDefinition(definition)` | `tool_declaration.ts` | the description plus its `exec tool declaration:` block |
 * | `isMcpCallToolResultSchema(schema)`, `mcpCallToolResultSchema(structuredContent?)`, `MCP_TYPESCRIPT_PREAMBLE` | `tool_declaration.ts` | MCP-shaped output schemas and the shared MCP types |
 * | `renderJsonSchemaToTypeScript(schema)` | `json_schema_typescript.ts` | JSON Schema → TypeScript type |
 * | `formatRuntimeResponse(response, options)` and its types | `format_response.ts` | header, `Script error:`, truncation; `{ contentItems, success }` |
 *
 * A harness in code-mode-only use builds its two tools once per set of enabled tools, then per call parses,
 * runs and formats:
 *
 * ```ts
 * import assert from "node:assert/strict";
 * import {
 *   augmentToolDefinition,
 *   buildExecToolDefinition,
 *   formatRuntimeResponse,
 *   parseExecSource,
 *   WAIT_TOOL_DEFINITION,
 * } from "./mod.ts";
 * import type { ToolDefinition } from "../types.ts";
 *
 * const tools: ToolDefinition[] = [{
 *   name: "mcp__notes__search",
 *   toolName: { namespace: "mcp__notes__", name: "search" },
 *   description: "Search the notes.",
 *   kind: "function",
 *   inputSchema: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
 * }];
 * // The Responses API `tools` of the request: exec (a custom tool with its grammar) and wait.
 * const execTool = buildExecToolDefinition(tools, {
 *   codeModeOnly: true,
 *   namespaceDescriptions: { mcp__notes__: { name: "notes", description: "The user's notes." } },
 * });
 * assert.ok(execTool.description.includes("## notes\nThe user's notes.\n\n### `mcp__notes__search`\n"));
 * assert.ok(execTool.description.includes("mcp__notes__search(args: { query: string; }): Promise<unknown>;"));
 * assert.ok(WAIT_TOOL_DEFINITION.description.startsWith("Waits on a yielded `exec` cell"));
 *
 * // The same definitions, augmented, go to ExecuteRequest.enabledTools (so that ALL_TOOLS shows them).
 * const enabledTools = tools.map(augmentToolDefinition);
 * assert.ok(enabledTools[0].description.includes("exec tool declaration:"));
 *
 * const parsed = parseExecSource('// @exec: {"max_output_tokens": 5}\ntext("x".repeat(100))');
 * assert.ok(typeof parsed !== "string");
 * // … session.execute({ toolCallId, enabledTools, source: parsed.code, yieldTimeMs: parsed.yieldTimeMs }) …
 * const response = {
 *   type: "result",
 *   cellId: "1",
 *   contentItems: [{ type: "input_text", text: "x".repeat(100) }],
 * } as const;
 * const formatted = formatRuntimeResponse(response, {
 *   outputTruncation: "client",
 *   maxOutputTokens: parsed.maxOutputTokens,
 *   wallTimeMs: 250,
 * });
 * assert.equal(formatted.success, true);
 * assert.equal(formatted.contentItems[0].type === "input_text" && formatted.contentItems[0].text,
 *   "Script completed\nWall time 0.3 seconds\nOutput:\n");
 * assert.ok(formatted.contentItems[1].type === "input_text" &&
 *   formatted.contentItems[1].text.includes("…20 tokens truncated…"));
 * ```
 *
 * @module
 */
export {
  CODE_MODE_PRAGMA_PREFIX,
  DEFAULT_EXEC_YIELD_TIME_MS,
  DEFAULT_MAX_OUTPUT_TOKENS_PER_EXEC_CALL,
  DEFAULT_WAIT_YIELD_TIME_MS,
  isCodeModeNestedTool,
  PUBLIC_TOOL_NAME,
  WAIT_TOOL_NAME,
} from "./names.ts";
export {
  buildExecToolDefinition,
  buildExecToolDescription,
  DEFERRED_TOOLS_GUIDANCE,
  EXEC_TOOL_GRAMMAR,
  EXEC_TOOL_MAIN_DESCRIPTION,
  type ExecToolDefinition,
  type ExecToolDescriptionOptions,
  execToolMainDescription,
  TOOL_AVAILABILITY_NOTICE,
  TOOL_SEARCH_GUIDANCE,
  type ToolNamespaceDescription,
  WAIT_TOOL_DEFINITION,
  WAIT_TOOL_DESCRIPTION,
  WAIT_TOOL_PARAMETERS,
  type WaitToolDefinition,
} from "./exec_tool.ts";
export { type ParsedExecSource, parseExecSource } from "./exec_source.ts";
export { normalizeCodeModeIdentifier } from "../../proto/identifiers.ts";
export {
  augmentToolDefinition,
  isMcpCallToolResultSchema,
  MCP_TYPESCRIPT_PREAMBLE,
  mcpCallToolResultSchema,
} from "./tool_declaration.ts";
export { renderJsonSchemaToTypeScript } from "./json_schema_typescript.ts";
export {
  formatRuntimeResponse,
  type FormatRuntimeResponseOptions,
  type FormattableRuntimeResponse,
  type FormattedRuntimeResponse,
} from "./format_response.ts";

/**
 * The `exec` and `wait` tools of SPEC §11.1: their names, defaults, descriptions and parameters, and
 * {@link buildExecToolDescription}, which renders the enabled tools' declarations into the `exec`
 * description, grouped by namespace (MCP server).
 *
 * @module
 */
import type { ToolDefinition } from "../types.ts";
import { normalizeCodeModeIdentifier } from "../../proto/identifiers.ts";
import {
  augmentToolDefinition,
  isMcpCallToolResultSchema,
  MCP_TYPESCRIPT_PREAMBLE,
} from "./tool_declaration.ts";
import { isCodeModeNestedTool } from "./names.ts";

/**
 * The grammar of the freeform `exec` tool (a Lark grammar, as freeform tools take): an optional first line
 * (spaces or tabs, `// @exec:`, anything up to the line end) followed by `\r?\n`, then the source
 * (`[\s\S]+`).
 */
export const EXEC_TOOL_GRAMMAR: string = [
  "start: pragma_source | plain_source",
  "pragma_source: PRAGMA_LINE NEWLINE SOURCE",
  "plain_source: SOURCE",
  "",
  "PRAGMA_LINE: /[ \\t]*\\/\\/ @exec:[^\\r\\n]*/",
  "NEWLINE: /\\r?\\n/",
  "SOURCE: /[\\s\\S]+/",
].join("\n");

/** Section 1 of the `exec` description (§11.1), exactly. */
export const EXEC_TOOL_MAIN_DESCRIPTION: string = [
  "Run JavaScript in a fresh sandboxed V8 isolate to orchestrate tool calls. The code runs as an async ES module, so top-level `await` works.",
  "- Every nested tool is a function on the global `tools` object, named by its normalized identifier (for example `tools.exec_command(...)` or `tools.mcp__ologs__get_profile(...)`). Pass a string or an object as the tool's declaration says; each call returns a Promise of an object or a string.",
  "- There is no Node.js, no file system, no network access and no `console`; report results with the helpers below.",
  "- Send raw JavaScript or TypeScript source only: not JSON, not a quoted string, not a markdown code fence.",
  '- The first line may be a pragma: `// @exec: {"yield_time_ms": 10000, "max_output_tokens": 1000}`. `yield_time_ms` is how long to wait before returning while the script keeps running (default 10000); `max_output_tokens` limits the output returned by this call (default 10000).',
  "- When the module finishes evaluating, the isolate ends: unawaited promises and pending timeouts are discarded. Only `store`/`load` values survive between calls.",
  "",
  "Global helpers:",
  "- `exit(): void` — stop the script successfully, keeping the output produced so far.",
  "- `text(value: unknown): void` — append text output; non-strings are JSON-serialized.",
  '- `image(imageUrlOrItem: string | { image_url: string; detail?: "auto" | "low" | "high" | "original" | null } | ImageContent, detail?: "auto" | "low" | "high" | "original" | null): void` — append an image from a base64 `data:` URL, an object with `image_url`, or an MCP image block; the second argument overrides the detail. HTTP(S) URLs are not supported.',
  "- `generatedImage(result: { image_url: string; output_hint?: string }): void` — append an image generation result and its optional hint.",
  "- `store(key: string, value: unknown): void` — save a JSON-serializable value for later calls.",
  "- `load(key: string): unknown` — read a copy of a saved value, or `undefined`.",
  "- `notify(value: unknown): void` — send a progress message to the conversation immediately, outside this call's output.",
  "- `setTimeout(callback: () => void, delayMs?: number): number` — schedule a callback; pending timeouts do not keep the script alive.",
  "- `clearTimeout(timeoutId?: number): void` — cancel a scheduled callback.",
  "- `ALL_TOOLS: Array<{ name: string; description: string }>` — every enabled nested tool.",
  "- `yield_control(): void` — return the output so far right away and keep running; continue with `wait`.",
].join("\n");

/** Section 2 of the `exec` description, present when some nested tools are deferred (§11.1). */
export const DEFERRED_TOOLS_GUIDANCE: string =
  "Some deferred nested tools may be omitted from this description. They are still available on the global " +
  "`tools` object and listed in `ALL_TOOLS`; filter `ALL_TOOLS` by `name` and `description` instead of " +
  "printing it whole.";

/** The description of the `wait` tool (§11.1), exactly. */
export const WAIT_TOOL_DESCRIPTION: string = [
  "Waits on a yielded `exec` cell and returns new output or completion.",
  "- Use it only after an `exec` result that says `Script running with cell ID <id>`.",
  "- `cell_id`: the ID from that result.",
  "- `yield_time_ms`: how long to wait for more output before returning (default 10000).",
  "- `max_tokens`: output token budget for this result (default 10000).",
  "- `terminate`: true stops the cell and returns its final output.",
  "- Each result contains only output produced since the previous result; a finished cell returns its final result and is closed.",
].join("\n");

/** The JSON Schema of the `wait` tool's arguments (§11.1); frozen, typed as plain JSON for tool SDKs. */
export const WAIT_TOOL_PARAMETERS: {
  type: "object";
  additionalProperties: false;
  required: string[];
  properties: Record<
    "cell_id" | "yield_time_ms" | "max_tokens" | "terminate",
    { type: string; description: string }
  >;
} = deepFreeze({
  type: "object",
  additionalProperties: false,
  required: ["cell_id"],
  properties: {
    cell_id: { type: "string", description: "Identifier of the running exec cell." },
    yield_time_ms: { type: "number", description: "Wait before yielding more output. Defaults to 10000 ms." },
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

function deepFreeze<T extends object>(value: T): T {
  for (const child of Object.values(value)) {
    if (typeof child === "object" && child !== null) deepFreeze(child);
  }
  return Object.freeze(value);
}

/** A namespace's heading and guidance in the `exec` description (one MCP server, say). */
export interface ToolNamespaceDescription {
  /** The heading: `## {name}`. */
  name: string;
  /** The guidance under the heading; a blank one gives no heading at all. */
  description: string;
}

/** Options of {@link buildExecToolDescription}. */
export interface ExecToolDescriptionOptions {
  /**
   * The model sees only `exec` and `wait`: the description then declares every enabled tool (sections 3
   * and 4 of §11.1). Default `false`: the tools are offered to the model directly and not declared here.
   */
  codeModeOnly?: boolean;
  /** Some nested tools are deferred (section 2). Default: `deferredTools` is not empty. */
  hasDeferredTools?: boolean;
  /**
   * Tools callable from cells but not declared here; only their output schemas count (whether the shared
   * MCP types are needed). Default none.
   */
  deferredTools?: readonly ToolDefinition[];
  /**
   * Headings and guidance per namespace, keyed by `toolName.namespace`. Default none (no `##` headings).
   */
  namespaceDescriptions?: Readonly<Record<string, ToolNamespaceDescription>>;
}

/**
 * Builds the description of the `exec` tool (SPEC §11.1): the main text, the deferred-tools guidance, and
 * in code-mode-only use the shared MCP types and one declaration section per enabled tool, under a
 * `## {namespace}` heading (with its guidance) each time the namespace changes to one not yet shown.
 *
 * - Sections are joined by one blank line; a tool's section is `` ### `{global}` `` (or
 *   `` ### `{global}` (`{raw name}`) `` when normalisation changed the name), a newline, and the tool's
 *   description as {@link augmentToolDefinition} renders it.
 * - `Shared MCP Types:` appears at most once, only in code-mode-only use, and only when an enabled or
 *   deferred tool has an MCP-shaped output schema.
 * - `exec` and `wait` themselves are never declared.
 *
 * @param tools the enabled nested tools, in the order the model should read them
 * @param options code-mode-only use, deferred tools, namespace headings (all optional)
 * @returns the description
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { buildExecToolDescription } from "./exec_tool.ts";
 *
 * const description = buildExecToolDescription([{
 *   name: "mcp__weather__forecast",
 *   toolName: { namespace: "mcp__weather__", name: "forecast" },
 *   description: "The forecast for a city.",
 *   kind: "function",
 *   inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
 * }], {
 *   codeModeOnly: true,
 *   namespaceDescriptions: { mcp__weather__: { name: "weather", description: "Weather tools." } },
 * });
 * const fence = "`".repeat(3);
 * assert.ok(description.startsWith("Run JavaScript in a fresh sandboxed V8 isolate"));
 * assert.ok(description.endsWith([
 *   "## weather\nWeather tools.",
 *   "### `mcp__weather__forecast`\nThe forecast for a city.",
 *   `exec tool declaration:\n${fence}ts\n` +
 *   `declare const tools: { mcp__weather__forecast(args: { city: string; }): Promise<unknown>; };\n${fence}`,
 * ].join("\n\n")));
 * ```
 */
export function buildExecToolDescription(
  tools: readonly ToolDefinition[],
  options: ExecToolDescriptionOptions = {},
): string {
  const deferred = options.deferredTools ?? [];
  const sections = [EXEC_TOOL_MAIN_DESCRIPTION];
  if (options.hasDeferredTools ?? deferred.length > 0) sections.push(DEFERRED_TOOLS_GUIDANCE);
  if (!options.codeModeOnly) return sections.join("\n\n");

  if ([...tools, ...deferred].some((tool) => isMcpCallToolResultSchema(tool.outputSchema))) {
    sections.push(`Shared MCP Types:\n\`\`\`ts\n${MCP_TYPESCRIPT_PREAMBLE}\n\`\`\``);
  }
  const namespaces = options.namespaceDescriptions ?? {};
  const shown = new Set<string>();
  let current: string | undefined;
  for (const tool of tools) {
    if (!isCodeModeNestedTool(tool.name)) continue;
    const namespace = tool.toolName.namespace;
    if (namespace !== current) {
      current = namespace;
      const entry = namespace === undefined || !Object.hasOwn(namespaces, namespace)
        ? undefined
        : namespaces[namespace];
      const guidance = entry?.description.trim() ?? "";
      if (entry !== undefined && guidance !== "" && !shown.has(namespace!)) {
        shown.add(namespace!);
        sections.push(`## ${entry.name}\n${guidance}`);
      }
    }
    const global = normalizeCodeModeIdentifier(tool.name);
    const heading = global === tool.name ? `### \`${global}\`` : `### \`${global}\` (\`${tool.name}\`)`;
    sections.push(`${heading}\n${augmentToolDefinition(tool).description}`);
  }
  return sections.join("\n\n");
}

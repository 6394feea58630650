/**
 * The `exec` and `wait` tools as Codex 0.171 offers them to the model (SPEC §11.1, corrected to what
 * the real Codex sends: `tests/reference/harness_tools.ts` compares them with a live capture): their
 * descriptions, the `wait` parameters, the freeform grammar, and {@link buildExecToolDescription},
 * which renders the enabled tools' declarations into the `exec` description in code-mode-only use.
 *
 * @module
 */
import type { ToolDefinition } from "../types.ts";
import { normalizeCodeModeIdentifier } from "../../proto/identifiers.ts";
import { augmentToolDefinition, MCP_TYPESCRIPT_PREAMBLE } from "./tool_declaration.ts";
import {
  DEFAULT_EXEC_YIELD_TIME_MS,
  DEFAULT_WAIT_YIELD_TIME_MS,
  isCodeModeNestedTool,
  PUBLIC_TOOL_NAME,
  WAIT_TOOL_NAME,
} from "./names.ts";

/**
 * The Lark grammar of the freeform `exec` tool, exactly as Codex 0.171 sends it (it starts and ends with a
 * newline): an optional first line (spaces or tabs, `// @exec:`, anything up to the line end) followed by
 * `\r?\n`, then the source (`[\s\S]+`).
 */
export const EXEC_TOOL_GRAMMAR: string = [
  "",
  "start: pragma_source | plain_source",
  "pragma_source: PRAGMA_LINE NEWLINE SOURCE",
  "plain_source: SOURCE",
  "",
  "PRAGMA_LINE: /[ \\t]*\\/\\/ @exec:[^\\r\\n]*/",
  "NEWLINE: /\\r?\\n/",
  "SOURCE: /[\\s\\S]+/",
  "",
].join("\n");

/** The `image` helper's line when the model takes no image detail (Codex's default). */
const IMAGE_HELPER: string =
  "- `image(imageUrlOrItem: string | { image_url: string } | ImageContent)`: Appends an image item. `image_url` should be a base64-encoded `data:` URL. To forward an MCP tool image, pass an individual `ImageContent` block from `result.content`, for example `image(result.content[0])`.";

/** The `image` helper's line when the model supports the `original` image detail. */
const IMAGE_HELPER_WITH_DETAIL: string =
  '- `image(imageUrlOrItem: string | { image_url: string; detail?: "auto" | "low" | "high" | "original" | null } | ImageContent, detail?: "auto" | "low" | "high" | "original" | null)`: Appends an image item. `image_url` should be a base64-encoded `data:` URL. To forward an MCP tool image, pass an individual `ImageContent` block from `result.content`, for example `image(result.content[0])`. MCP image blocks may request detail with `_meta: { "codex/imageDetail": "original" }`. When provided, the second `detail` argument overrides any detail embedded in the first argument.';

/**
 * The main text of the `exec` description: what a cell is, the pragma, the default yield
 * (`defaultYieldTimeMs`) and the helpers (`exit`, `text`, `image`, `audio`, `generatedImage`, `store`,
 * `load`, `notify`, `setTimeout`, `clearTimeout`, `ALL_TOOLS`, `yield_control`).
 *
 * @param defaultYieldTimeMs the `yield_time_ms` of an `exec` without one (Codex 0.171: 30000)
 * @param imageDetail whether the model supports the `original` image detail (another `image` line)
 * @returns the text
 */
export function execToolMainDescription(
  defaultYieldTimeMs: number = DEFAULT_EXEC_YIELD_TIME_MS,
  imageDetail = false,
): string {
  return [
    `Run JavaScript code to orchestrate/compose tool calls`,
    `- Evaluates the provided JavaScript code in a fresh V8 isolate as an async module.`,
    `- All nested tools are available on the global \`tools\` object, for example \`await tools.exec_command(...)\`. Tool names are exposed as normalized JavaScript identifiers, for example \`await tools.mcp__ologs__get_profile(...)\`.`,
    `- Nested tool methods take either a string or an object as their input argument.`,
    `- Nested tools return either an object or a string, based on the description.`,
    `- Runs raw JavaScript -- no Node, no file system, no network access, no console.`,
    `- Accepts raw JavaScript source text, not JSON, quoted strings, or markdown code fences.`,
    `- You may optionally start the tool input with a first-line pragma like \`// @exec: {"yield_time_ms": 10000, "max_output_tokens": 1000}\`.`,
    `- \`yield_time_ms\` asks \`exec\` to yield early if the script is still running. Defaults to ${defaultYieldTimeMs} ms.`,
    `- \`max_output_tokens\` sets the token budget for direct \`exec\` results. Defaults to 10000 tokens.`,
    `- When the JS code is fully evaluated, the isolate's lifetime ends and unawaited promises are silently discarded.`,
    ``,
    `- Global helpers:`,
    `- \`exit()\`: Immediately ends the current script successfully (like an early return from the top level).`,
    `- \`text(value: string | number | boolean | undefined | null)\`: Appends a text item. Non-string values are stringified with \`JSON.stringify(...)\` when possible.`,
    imageDetail ? IMAGE_HELPER_WITH_DETAIL : IMAGE_HELPER,
    `- \`audio(audioUrlOrItem: string | { audio_url: string } | AudioContent)\`: Appends an audio item. \`audio_url\` should be a base64-encoded \`data:\` URL. To forward an MCP tool audio block, pass an individual \`AudioContent\` block from \`result.content\`, for example \`audio(result.content[0])\`.`,
    `- \`generatedImage(result: { image_url: string; output_hint?: string })\`: Appends an image-generation result and its optional output hint. HTTP(S) URLs are not supported.`,
    `- \`store(key: string, value: any)\`: stores a serializable value under a string key for later \`exec\` calls in the same session.`,
    `- \`load(key: string)\`: returns the stored value for a string key, or \`undefined\` if it is missing.`,
    `- \`notify(value: string | number | boolean | undefined | null)\`: immediately injects an extra \`custom_tool_call_output\` for the current \`exec\` call. Values are stringified like \`text(...)\`.`,
    `- \`setTimeout(callback: () => void, delayMs?: number)\`: schedules a callback to run later and returns a timeout id. Pending timeouts do not keep \`exec\` alive by themselves; await an explicit promise if you need to wait for one.`,
    `- \`clearTimeout(timeoutId?: number)\`: cancels a timeout created by \`setTimeout\`.`,
    `- \`ALL_TOOLS\`: metadata for the enabled nested tools as \`{ name, description }\` entries.`,
    `- \`yield_control()\`: yields the accumulated output to the model immediately while the script keeps running.`,
  ].join("\n");
}

/** The main text of the `exec` description with Codex 0.171's defaults (30000 ms, no image detail). */
export const EXEC_TOOL_MAIN_DESCRIPTION: string = execToolMainDescription();

/** The deferred-tools guidance: Codex 0.171 sends it in every `exec` description. */
export const DEFERRED_TOOLS_GUIDANCE: string =
  "Some deferred nested tools may be omitted from this description. They are still available on the global `tools` object and listed in `ALL_TOOLS`.\nTo find one, filter `ALL_TOOLS` by `name` and `description`.";

/** The line after the deferred-tools guidance: Codex 0.171 sends it in every `exec` description. */
export const TOOL_AVAILABILITY_NOTICE: string = "Tool availability can change between calls.";

/** The guidance Codex 0.171 adds when `tool_search` is one of the enabled nested tools. */
export const TOOL_SEARCH_GUIDANCE: string =
  'Use `await tools.tool_search({query: "...", limit: 8})` for BM25-ranked discovery of deferred tools (up to `limit` matches; 8 by default). It returns `{tools: [{name, description}]}` with callable names and full TypeScript declarations. Print results with `text()` and inspect unfamiliar declarations before calling `tools[result.name](arguments)` in a later execution.';

/** The description of the `wait` tool, exactly as Codex 0.171 sends it. */
export const WAIT_TOOL_DESCRIPTION: string = [
  "Waits on a yielded `exec` cell and returns new output or completion.",
  "- Use `wait` only after `exec` returns `Script running with cell ID ...`.",
  "- `cell_id` identifies the running `exec` cell to resume.",
  "- `yield_time_ms` controls how long to wait for more output before yielding again. Defaults to 10000 ms.",
  "- `max_tokens` limits how much new output this wait call returns. Defaults to 10000 tokens.",
  "- `terminate: true` stops the running cell; false or omitted waits for output.",
  "- `wait` returns only the new output since the last yield, or the final completion or termination result for that cell.",
  "- If the cell is still running, `wait` may yield again with the same `cell_id`.",
  "- If the cell has already finished, `wait` returns the completed result and closes the cell.",
].join("\n");

/**
 * The JSON Schema of the `wait` tool's arguments, with its keys in the order Codex 0.171 sends them;
 * frozen, typed as plain JSON for tool SDKs.
 */
export const WAIT_TOOL_PARAMETERS: {
  type: "object";
  properties: Record<
    "cell_id" | "max_tokens" | "terminate" | "yield_time_ms",
    { type: string; description: string }
  >;
  required: string[];
  additionalProperties: false;
} = deepFreeze({
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
      description: `Wait before yielding more output. Defaults to ${DEFAULT_WAIT_YIELD_TIME_MS} ms.`,
    },
  },
  required: ["cell_id"],
  additionalProperties: false,
});

/** The `wait` tool of a Responses API request (a function tool), exactly as Codex 0.171 sends it. */
export interface WaitToolDefinition {
  /** A function tool. */
  type: "function";
  /** `wait`. */
  name: "wait";
  /** {@link WAIT_TOOL_DESCRIPTION}. */
  description: string;
  /** Codex sends `false`. */
  strict: false;
  /** {@link WAIT_TOOL_PARAMETERS}. */
  parameters: typeof WAIT_TOOL_PARAMETERS;
}

/** The `wait` tool as Codex 0.171 sends it to the Responses API; `JSON.stringify` gives Codex's bytes. */
export const WAIT_TOOL_DEFINITION: WaitToolDefinition = deepFreeze({
  type: "function",
  name: WAIT_TOOL_NAME,
  description: WAIT_TOOL_DESCRIPTION,
  strict: false,
  parameters: WAIT_TOOL_PARAMETERS,
});

/** The `exec` tool of a Responses API request (a custom, freeform tool with a Lark grammar). */
export interface ExecToolDefinition {
  /** A custom (freeform) tool. */
  type: "custom";
  /** `exec`. */
  name: "exec";
  /** {@link buildExecToolDescription}'s text. */
  description: string;
  /** The input's grammar: {@link EXEC_TOOL_GRAMMAR}, a Lark grammar. */
  format: { type: "grammar"; syntax: "lark"; definition: string };
}

function deepFreeze<T extends object>(value: T): T {
  for (const child of Object.values(value)) {
    if (typeof child === "object" && child !== null && !Object.isFrozen(child)) deepFreeze(child);
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
   * The model sees only `exec` and `wait` (Codex's `code_mode_only`): the description then declares every
   * tool of `tools`, after the shared MCP types. Default `false`: the tools are offered to the model
   * directly and not declared here.
   */
  codeModeOnly?: boolean;
  /**
   * Tools callable from cells but not declared here (Codex defers namespaced tools: MCP servers' and
   * multi-agent tools). They only matter for the `tool_search` guidance. Default none.
   */
  deferredTools?: readonly ToolDefinition[];
  /** The default `yield_time_ms` the text states. Default {@link DEFAULT_EXEC_YIELD_TIME_MS} (30000). */
  defaultYieldTimeMs?: number;
  /** The model supports the `original` image detail (another `image` helper line). Default `false`. */
  imageDetail?: boolean;
  /** Include {@link DEFERRED_TOOLS_GUIDANCE}. Default `true`, as Codex 0.171 always does. */
  deferredToolsGuidance?: boolean;
  /** Include {@link TOOL_AVAILABILITY_NOTICE}. Default `true`, as Codex 0.171 always does. */
  toolAvailabilityNotice?: boolean;
  /**
   * The tools' descriptions already end with their `exec tool declaration:` block (what
   * {@link augmentToolDefinition} returns, and what Codex sends its host as `enabled_tools`): they are
   * used as they are. Default `false`: each tool is augmented here.
   */
  augmented?: boolean;
  /**
   * Headings and guidance per namespace, keyed by `toolName.namespace`. Default none (no `##` headings).
   */
  namespaceDescriptions?: Readonly<Record<string, ToolNamespaceDescription>>;
}

/**
 * Builds the description of the `exec` tool as Codex 0.171 does, sections joined by one blank line:
 *
 * 1. the main text ({@link execToolMainDescription}: the default yield, the helpers);
 * 2. {@link DEFERRED_TOOLS_GUIDANCE} and {@link TOOL_AVAILABILITY_NOTICE} (each unless turned off);
 * 3. {@link TOOL_SEARCH_GUIDANCE} when a tool of `tools` or `deferredTools` is named `tool_search`;
 * 4. in code-mode-only use, when `tools` is not empty: `Shared MCP Types:` with
 *    {@link MCP_TYPESCRIPT_PREAMBLE}, then one section per tool in the given order, under a
 *    `## {namespace}` heading (with its guidance) each time the namespace changes to one not yet shown.
 *    A tool's section is `` ### `{global}` `` (or `` ### `{global}` (`{raw name}`) `` when normalisation
 *    changed the name), a newline, and its trimmed description as {@link augmentToolDefinition} renders it
 *    (as given when `augmented`). `exec` and `wait` themselves are never declared.
 *
 * @param tools the nested tools to declare, in the order the model should read them (Codex sorts them by name)
 * @param options code-mode-only use, deferred tools, the default yield, namespace headings (all optional)
 * @returns the description
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { buildExecToolDescription } from "./exec_tool.ts";
 *
 * const description = buildExecToolDescription([{
 *   name: "forecast",
 *   toolName: { name: "forecast" },
 *   description: "The forecast for a city.",
 *   kind: "function",
 *   inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
 * }], { codeModeOnly: true });
 * const fence = "`".repeat(3);
 * assert.ok(description.startsWith("Run JavaScript code to orchestrate/compose tool calls\n"));
 * assert.ok(description.includes("Defaults to 30000 ms."));
 * assert.ok(description.endsWith([
 *   "### `forecast`\nThe forecast for a city.",
 *   `exec tool declaration:\n${fence}ts\n` +
 *   `declare const tools: { forecast(args: { city: string; }): Promise<unknown>; };\n${fence}`,
 * ].join("\n\n")));
 * ```
 */
export function buildExecToolDescription(
  tools: readonly ToolDefinition[],
  options: ExecToolDescriptionOptions = {},
): string {
  const deferred = options.deferredTools ?? [];
  const sections = [execToolMainDescription(options.defaultYieldTimeMs, options.imageDetail)];
  if (options.deferredToolsGuidance ?? true) sections.push(DEFERRED_TOOLS_GUIDANCE);
  if (options.toolAvailabilityNotice ?? true) sections.push(TOOL_AVAILABILITY_NOTICE);
  if ([...tools, ...deferred].some((tool) => tool.name === "tool_search")) {
    sections.push(TOOL_SEARCH_GUIDANCE);
  }
  const declared = tools.filter((tool) => isCodeModeNestedTool(tool.name));
  if (!options.codeModeOnly || declared.length === 0) return sections.join("\n\n");

  sections.push(`Shared MCP Types:\n\`\`\`ts\n${MCP_TYPESCRIPT_PREAMBLE}\n\`\`\``);
  const namespaces = options.namespaceDescriptions ?? {};
  const shown = new Set<string>();
  let current: string | undefined;
  for (const tool of declared) {
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
    const body = (options.augmented ? tool.description : augmentToolDefinition(tool).description).trim();
    sections.push(body === "" ? heading : `${heading}\n${body}`);
  }
  return sections.join("\n\n");
}

/**
 * The `exec` tool of a Responses API request, as Codex 0.171 sends it: a custom tool with
 * {@link buildExecToolDescription}'s description and the Lark grammar {@link EXEC_TOOL_GRAMMAR};
 * `JSON.stringify` gives Codex's bytes.
 *
 * @param tools as {@link buildExecToolDescription}
 * @param options as {@link buildExecToolDescription}
 * @returns the tool
 */
export function buildExecToolDefinition(
  tools: readonly ToolDefinition[],
  options: ExecToolDescriptionOptions = {},
): ExecToolDefinition {
  return {
    type: "custom",
    name: PUBLIC_TOOL_NAME,
    description: buildExecToolDescription(tools, options),
    format: { type: "grammar", syntax: "lark", definition: EXEC_TOOL_GRAMMAR },
  };
}

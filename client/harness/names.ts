/**
 * The names and defaults of the harness kit (SPEC §11): the `exec` and `wait` tool names, the pragma
 * prefix, the default yield times and token budget, and {@link isCodeModeNestedTool}.
 *
 * @module
 */

/** The name of the freeform tool that runs a cell. */
export const PUBLIC_TOOL_NAME = "exec";
/** The name of the function tool that continues (or terminates) a yielded cell. */
export const WAIT_TOOL_NAME = "wait";
/** The prefix of the optional first-line pragma of an `exec` source (§11.2). */
export const CODE_MODE_PRAGMA_PREFIX = "// @exec:";
/** `yield_time_ms` of an `exec` without a pragma value (Codex 0.171: 30000; its `exec` description states it). */
export const DEFAULT_EXEC_YIELD_TIME_MS = 30000;
/** `yield_time_ms` of a `wait` without one. */
export const DEFAULT_WAIT_YIELD_TIME_MS = 10000;
/** The token budget of an `exec` result without a `max_output_tokens` pragma value. */
export const DEFAULT_MAX_OUTPUT_TOKENS_PER_EXEC_CALL = 10000;

/**
 * Whether a tool is a nested tool, callable from cells: every tool but `exec` and `wait`.
 *
 * @param name a tool name
 * @returns false only for `exec` and `wait`
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { isCodeModeNestedTool } from "./names.ts";
 *
 * assert.deepEqual(["exec", "wait", "exec_command"].map(isCodeModeNestedTool), [false, false, true]);
 * ```
 */
export function isCodeModeNestedTool(name: string): boolean {
  return name !== PUBLIC_TOOL_NAME && name !== WAIT_TOOL_NAME;
}

/**
 * The result of an `exec` or `wait` call as the model reads it (SPEC §11.5): {@link formatRuntimeResponse}
 * adds the status header (`Script completed`, `Script failed`, …, and the wall time) and, in Client mode,
 * the `Script error:` item and the token truncation.
 *
 * @module
 */
import type { CodeModeOutputTruncation, FunctionCallOutputContentItem } from "../types.ts";
import { utf8ByteLength, utf8Prefix, utf8Suffix } from "../../proto/bytes.ts";
import { DEFAULT_MAX_OUTPUT_TOKENS_PER_EXEC_CALL } from "./names.ts";

/** What {@link formatRuntimeResponse} reads of a runtime response (a `RuntimeResponse` is one). */
export interface FormattableRuntimeResponse {
  /** The observation's outcome. */
  type: "yielded" | "terminated" | "result";
  /** The (public) cell ID, shown for a yielded cell. */
  cellId: string;
  /** The output items of this observation. */
  contentItems: readonly FunctionCallOutputContentItem[];
  /** A `result`'s error text; absent (or `null`) on success. */
  errorText?: string | null;
}

/** Options of {@link formatRuntimeResponse}. */
export interface FormatRuntimeResponseOptions {
  /** The session's output mode: `"client"` truncates here; `"server"` items arrive truncated. */
  outputTruncation: CodeModeOutputTruncation;
  /**
   * The token budget: the exec pragma's `max_output_tokens` or the wait's `max_tokens`. Client mode: default
   * 10000. Server mode: only given for `wait` results (the host cannot apply that budget); default none.
   */
  maxOutputTokens?: number;
  /** How long the call took, in milliseconds (shown with one decimal, in seconds). */
  wallTimeMs: number;
}

/** The formatted result: the items for the model and whether the tool call succeeded. */
export interface FormattedRuntimeResponse {
  /** The header item, then the output items. */
  contentItems: FunctionCallOutputContentItem[];
  /** False only for a `result` with an error. */
  success: boolean;
}

/**
 * Formats a runtime response for the model (SPEC §11.5).
 *
 * - Images without a `detail` get `high`.
 * - Client mode: a `result` with an error gets a last text item `Script error:\n{errorText}`; then the items
 *   are truncated to `maxOutputTokens` (default 10000) tokens: all-text output over `4·T` bytes becomes one
 *   item, `Warning: truncated output (original token count: N)\nTotal output lines: L\n\n` and the joined
 *   text cut in the middle (`…k tokens truncated…`); mixed output keeps every image and the text items that
 *   fit, cuts the first that does not, and counts the rest in `[omitted n text items ...]`.
 * - Server mode: the items are used as received (the host added the error item and truncated them); with
 *   `maxOutputTokens` they are truncated as above, without a `Script error:` item.
 * - A header item comes first: `{status}\nWall time {s.s} seconds\nOutput:\n`, where status is
 *   `Script running with cell ID {cellId}`, `Script completed`, `Script failed` or `Script terminated`.
 *
 * @param response the outcome of an `execute` or `wait` (or `terminate`)
 * @param options output mode, token budget, wall time
 * @returns the items and `success`
 * @throws {RangeError} when `wallTimeMs` is not a non-negative number or `maxOutputTokens` is not a
 *   non-negative safe integer
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { formatRuntimeResponse } from "./format_response.ts";
 *
 * const response = { type: "result", cellId: "1", contentItems: [], errorText: "boom" } as const;
 * assert.deepEqual(formatRuntimeResponse(response, { outputTruncation: "client", wallTimeMs: 1234 }), {
 *   contentItems: [
 *     { type: "input_text", text: "Script failed\nWall time 1.2 seconds\nOutput:\n" },
 *     { type: "input_text", text: "Script error:\nboom" },
 *   ],
 *   success: false,
 * });
 * ```
 */
export function formatRuntimeResponse(
  response: FormattableRuntimeResponse,
  options: FormatRuntimeResponseOptions,
): FormattedRuntimeResponse {
  const { outputTruncation, maxOutputTokens, wallTimeMs } = options;
  if (typeof wallTimeMs !== "number" || !(wallTimeMs >= 0) || !Number.isFinite(wallTimeMs)) {
    throw new RangeError(`wall time ${wallTimeMs} ms is not a non-negative number`);
  }
  if (maxOutputTokens !== undefined && (!Number.isSafeInteger(maxOutputTokens) || maxOutputTokens < 0)) {
    throw new RangeError(`token budget ${maxOutputTokens} is not a non-negative safe integer`);
  }
  const failed = response.type === "result" && typeof response.errorText === "string";
  let items: FunctionCallOutputContentItem[] = response.contentItems.map((item) =>
    item.type === "input_image" && item.detail === undefined ? { ...item, detail: "high" } : item
  );
  if (outputTruncation === "client") {
    if (failed) items.push({ type: "input_text", text: `Script error:\n${response.errorText}` });
    items = truncateContentItems(items, maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS_PER_EXEC_CALL);
  } else if (maxOutputTokens !== undefined) {
    items = truncateContentItems(items, maxOutputTokens);
  }
  const status = response.type === "yielded"
    ? `Script running with cell ID ${response.cellId}`
    : response.type === "terminated"
    ? "Script terminated"
    : failed
    ? "Script failed"
    : "Script completed";
  const header = `${status}\nWall time ${(wallTimeMs / 1000).toFixed(1)} seconds\nOutput:\n`;
  return { contentItems: [{ type: "input_text", text: header }, ...items], success: !failed };
}

/**
 * The token truncation of §11.5 step 2 with a budget of `maxTokens` (`4·T` bytes).
 *
 * @param items the output items (not modified)
 * @param maxTokens the budget `T`
 * @returns the truncated items
 */
function truncateContentItems(
  items: FunctionCallOutputContentItem[],
  maxTokens: number,
): FunctionCallOutputContentItem[] {
  if (items.every((item) => item.type === "input_text")) {
    const joined = items.map((item) => (item as { text: string }).text).join("\n");
    const length = utf8ByteLength(joined);
    if (length <= 4 * maxTokens) return items;
    const header = `Warning: truncated output (original token count: ${Math.ceil(length / 4)})\n` +
      `Total output lines: ${lineCount(joined)}\n\n`;
    return [{ type: "input_text", text: header + middleTruncate(joined, length, maxTokens) }];
  }
  const out: FunctionCallOutputContentItem[] = [];
  let remaining = maxTokens;
  let cut = false;
  let omitted = 0;
  for (const item of items) {
    if (item.type !== "input_text") {
      out.push(item);
      continue;
    }
    if (item.text === "") continue;
    if (cut) {
      omitted++;
      continue;
    }
    const length = utf8ByteLength(item.text);
    const cost = Math.ceil(length / 4);
    if (cost <= remaining) {
      out.push(item);
      remaining -= cost;
      continue;
    }
    const text = middleTruncate(item.text, length, remaining);
    if (text !== "") out.push({ type: "input_text", text });
    remaining = 0;
    cut = true;
  }
  if (omitted > 0) out.push({ type: "input_text", text: `[omitted ${omitted} text items ...]` });
  return out;
}

/**
 * The middle truncation of SPEC §8.7 step 3: the whole characters of the first `floor(B/2)` bytes, the marker
 * `…k tokens truncated…` and the whole characters of the last `B − floor(B/2)` bytes (`B = 4·T`).
 */
function middleTruncate(text: string, length: number, maxTokens: number): string {
  const budget = 4 * maxTokens;
  if (length <= budget) return text;
  const left = Math.floor(budget / 2);
  const prefix = text.slice(0, utf8Prefix(text, left).units);
  const suffix = text.slice(text.length - utf8Suffix(text, budget - left).units);
  return `${prefix}…${Math.ceil((length - budget) / 4)} tokens truncated…${suffix}`;
}

/** Lines split on `\n`, a trailing `\n` starting no new line. */
function lineCount(text: string): number {
  let lines = 1;
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) lines++;
  return text.endsWith("\n") ? lines - 1 : lines;
}

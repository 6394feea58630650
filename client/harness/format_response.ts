/**
 * The result of an `exec` or `wait` call as the model reads it (SPEC §11.5): {@link formatRuntimeResponse}
 * adds the status header (`Script completed`, `Script failed`, …, and the wall time) and, in Client mode,
 * the `Script error:` item and the token truncation, exactly as Codex 0.171 does when it truncates itself
 * (`code_mode_host_output_truncation` off), which is also what its host does in Server mode.
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
   * Client mode: the token budget, the exec pragma's `max_output_tokens` or the wait's `max_tokens`;
   * default 10000. Server mode: not used: the host applies the budget (send a wait's `max_tokens` to the
   * host as `WaitRequest.maxTokens`).
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
 *   are truncated to `maxOutputTokens` (`T`, default 10000) tokens. All-text output is joined, one `\n`
 *   before every text but when nothing came before; over `4·T` bytes it becomes one item,
 *   `Warning: truncated output (original token count: N)\nTotal output lines: L\n\n` and the joined text
 *   cut in the middle (`…k tokens truncated…`). Output with media goes item by item: every image is
 *   kept; an empty text is left out; a text is kept while its estimate (`ceil(bytes / 4)`) fits the
 *   remaining budget, the first that does not is cut to it, and the rest are counted; an audio item is
 *   kept when the estimate of its URL fits, else counted; then `[omitted n text items ...]` and
 *   `[omitted n audio items ...]`.
 * - Server mode: the items are used as received (the host added the error item and truncated them).
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
 * The token truncation of §11.5 step 2 with a budget of `maxTokens` (`4·T` bytes): Codex's
 * `truncate_code_mode_result`.
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
    let joined = "";
    for (const item of items) joined += (joined.length > 0 ? "\n" : "") + (item as { text: string }).text;
    const length = utf8ByteLength(joined);
    if (length <= 4 * maxTokens) return items;
    const header = `Warning: truncated output (original token count: ${Math.ceil(length / 4)})\n` +
      `Total output lines: ${lineCount(joined)}\n\n`;
    return [{ type: "input_text", text: header + middleTruncate(joined, length, maxTokens) }];
  }
  const out: FunctionCallOutputContentItem[] = [];
  let remaining = maxTokens;
  let omittedText = 0;
  let omittedAudio = 0;
  for (const item of items) {
    if (item.type === "input_image") {
      out.push(item);
      continue;
    }
    if (item.type === "input_audio") {
      const cost = Math.ceil(utf8ByteLength(item.audio_url) / 4);
      if (cost <= remaining) {
        out.push(item);
        remaining -= cost;
      } else {
        omittedAudio++;
      }
      continue;
    }
    if (item.text === "") continue;
    if (remaining === 0) {
      omittedText++;
      continue;
    }
    const length = utf8ByteLength(item.text);
    const cost = Math.ceil(length / 4);
    if (cost <= remaining) {
      out.push(item);
      remaining -= cost;
      continue;
    }
    out.push({ type: "input_text", text: middleTruncate(item.text, length, remaining) });
    remaining = 0;
  }
  if (omittedText > 0) out.push({ type: "input_text", text: `[omitted ${omittedText} text items ...]` });
  if (omittedAudio > 0) out.push({ type: "input_text", text: `[omitted ${omittedAudio} audio items ...]` });
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

/** Lines as Rust's `str::lines` counts them: split on `\n`, a trailing `\n` starting no new line. */
function lineCount(text: string): number {
  if (text.length === 0) return 0;
  let lines = 1;
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) lines++;
  return text.endsWith("\n") ? lines - 1 : lines;
}

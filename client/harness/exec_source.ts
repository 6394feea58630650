/**
 * The `// @exec:` pragma of an `exec` source (SPEC §11.2): {@link parseExecSource}.
 *
 * @module
 */
import { CODE_MODE_PRAGMA_PREFIX } from "./names.ts";

/** An `exec` source with its pragma (if any) removed and read. */
export interface ParsedExecSource {
  /** The cell source: the whole input, or everything after the pragma line's `\n`. */
  code: string;
  /** The pragma's `yield_time_ms`; absent when not given (or `null`). */
  yieldTimeMs?: number;
  /** The pragma's `max_output_tokens`; absent when not given (or `null`). */
  maxOutputTokens?: number;
}

const FIELDS = ["yield_time_ms", "max_output_tokens"] as const;
const NOT_AN_OBJECT =
  "exec pragma must be a JSON object with supported fields `yield_time_ms` and `max_output_tokens`";

/**
 * Splits an `exec` input into the cell source and the overrides of its optional first-line pragma
 * `// @exec: {"yield_time_ms": N, "max_output_tokens": N}` (SPEC §11.2).
 *
 * The result is either the parsed source or an error string, to be returned to the model as the tool's
 * result (no cell is created). Checks, in order (each error is the SPEC's exact text):
 *
 * - a blank input is an error;
 * - a first line that does not start with `// @exec:` once its leading spaces and tabs (only U+0020 and
 *   U+0009) are removed leaves the whole input as the code;
 * - a pragma must be followed by non-blank source on later lines;
 * - the directive must be valid JSON, an object, with no key but `yield_time_ms` and `max_output_tokens`
 *   (the first other key, in object order, is named);
 * - each field is `null` (absent) or a non-negative safe integer.
 *
 * @param input the `exec` tool's input, as the model wrote it
 * @returns the code and overrides, or the error text
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseExecSource } from "./exec_source.ts";
 *
 * assert.deepEqual(parseExecSource('// @exec: {"yield_time_ms": 10}\ntext("hi")'), {
 *   code: 'text("hi")',
 *   yieldTimeMs: 10,
 * });
 * assert.deepEqual(parseExecSource('text("hi")'), { code: 'text("hi")' });
 * assert.equal(
 *   parseExecSource('// @exec: {"foo": 1}\nx'),
 *   "exec pragma only supports `yield_time_ms` and `max_output_tokens`; got `foo`",
 * );
 * ```
 */
export function parseExecSource(input: string): ParsedExecSource | string {
  if (input.trim() === "") {
    return "exec expects raw JavaScript source text (non-empty). Provide JS only, optionally with first-line " +
      '`// @exec: {"yield_time_ms": 10000, "max_output_tokens": 1000}`.';
  }
  const newline = input.indexOf("\n");
  const firstLine = (newline < 0 ? input : input.slice(0, newline)).replace(/\r$/, "");
  const trimmed = firstLine.replace(/^[ \t]*/, "");
  if (!trimmed.startsWith(CODE_MODE_PRAGMA_PREFIX)) return { code: input };

  const rest = newline < 0 ? "" : input.slice(newline + 1);
  if (rest.trim() === "") return "exec pragma must be followed by JavaScript source on subsequent lines";

  const directive = trimmed.slice(CODE_MODE_PRAGMA_PREFIX.length).trim();
  if (directive === "") return NOT_AN_OBJECT;
  let value: unknown;
  try {
    value = JSON.parse(directive);
  } catch (error) {
    return "exec pragma must be valid JSON with supported fields `yield_time_ms` and `max_output_tokens`: " +
      (error as Error).message;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return NOT_AN_OBJECT;
  const pragma = value as Record<string, unknown>;
  const unknownKey = Object.keys(pragma).find((key) => !(FIELDS as readonly string[]).includes(key));
  if (unknownKey !== undefined) {
    return `exec pragma only supports \`yield_time_ms\` and \`max_output_tokens\`; got \`${unknownKey}\``;
  }

  const parsed: ParsedExecSource = { code: rest };
  for (const field of FIELDS) {
    const fieldValue = Object.hasOwn(pragma, field) ? pragma[field] : null;
    if (fieldValue === null) continue;
    if (typeof fieldValue !== "number" || !Number.isInteger(fieldValue) || fieldValue < 0) {
      return "exec pragma fields `yield_time_ms` and `max_output_tokens` must be non-negative safe integers: " +
        `invalid value for \`${field}\`: ${JSON.stringify(fieldValue)}`;
    }
    if (fieldValue > Number.MAX_SAFE_INTEGER) {
      return `exec pragma field \`${field}\` must be a non-negative safe integer`;
    }
    const count = fieldValue + 0; // JSON `-0` reads as 0
    if (field === "yield_time_ms") parsed.yieldTimeMs = count;
    else parsed.maxOutputTokens = count;
  }
  return parsed;
}

/**
 * The client's error texts (SPEC §10.9): gRPC status rendering with its escaping, the 512-byte
 * bound, the RPC-failure and timeout sentences, and the reset message of §10.5.
 *
 * @module
 */
import { utf8ByteLength, utf8Prefix } from "../proto/bytes.ts";

/**
 * The description of every gRPC status code, indexed by the numeric code 0..16 (SPEC §10.9).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(STATUS_DESCRIPTIONS.length, 17);
 * assert.equal(STATUS_DESCRIPTIONS[5], "Some requested entity was not found");
 * assert.equal(STATUS_DESCRIPTIONS[14], "The service is currently unavailable");
 * ```
 */
export const STATUS_DESCRIPTIONS: readonly string[] = Object.freeze([
  "The operation completed successfully",
  "The operation was cancelled",
  "Unknown error",
  "Client specified an invalid argument",
  "Deadline expired before operation could complete",
  "Some requested entity was not found",
  "Some entity that we attempted to create already exists",
  "The caller does not have permission to execute the specified operation",
  "Some resource has been exhausted",
  "The system is not in a state required for the operation's execution",
  "The operation was aborted",
  "Operation was attempted past the valid range",
  "Operation is not implemented or not supported",
  "Internal error",
  "The service is currently unavailable",
  "Unrecoverable data loss or corruption",
  "The request does not have valid authentication credentials",
]);

/**
 * The message every call created before a reopen fails with once a new generation is live
 * (SPEC §10.5 rule 4): one line, sentences separated by single spaces.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.ok(RESET_MESSAGE.startsWith("The exec runtime was replaced."));
 * assert.ok(!RESET_MESSAGE.includes("\n"));
 * ```
 */
export const RESET_MESSAGE =
  "The exec runtime was replaced. Stored values and running cells were lost. Prior external tool operations may have completed; inspect their results before retrying. You may continue with a fresh exec call.";

// `u` makes the regex match whole code points: an astral Cf character (U+E0001) is one match, and a
// lone surrogate (category Cs) is matched by nothing here, so it stays verbatim.
const NEEDS_ESCAPE = /[\\"\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;

const SHORT_ESCAPES: Readonly<Record<string, string>> = {
  "\\": "\\\\",
  '"': '\\"',
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
  "\0": "\\0",
};

/**
 * Escapes a status message the way SPEC §10.9 renders it between double quotes.
 *
 * - `\` → `\\`, `"` → `\"`, LF → `\n`, CR → `\r`, TAB → `\t`, NUL → `\0`;
 * - every other character of General Category Cc, Cf, Zl or Zp → `\u{h}` (lower-case hex, no
 *   padding), one escape per code point, astral ones included;
 * - everything else verbatim, lone surrogates included (they are Cs).
 *
 * @param message the status message
 * @returns the escaped message, without surrounding quotes
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(escapeStatusMessage('a "b"\n\\'), 'a \\"b\\"\\n\\\\');
 * assert.equal(escapeStatusMessage("x\u007fy\u2028"), "x\\u{7f}y\\u{2028}");
 * assert.equal(escapeStatusMessage("\u{e0001}漢"), "\\u{e0001}漢");
 * ```
 */
export function escapeStatusMessage(message: string): string {
  return message.replace(
    NEEDS_ESCAPE,
    (ch) => SHORT_ESCAPES[ch] ?? `\\u{${ch.codePointAt(0)!.toString(16)}}`,
  );
}

/**
 * Renders a gRPC status as `code: '{description}'`, followed by `, message: "{escaped}"` when the
 * message is non-empty (SPEC §10.9). Metadata and details are never rendered.
 *
 * A code outside 0..16 is described as `Unknown error`, the description of code 2: that is what
 * tonic does (`Code::from(i32)` maps every unknown value to `Code::Unknown`).
 *
 * @param code the numeric gRPC status code
 * @param message the status message (`details` in nice-grpc)
 * @returns the rendered status
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(renderStatus(14, ""), "code: 'The service is currently unavailable'");
 * assert.equal(
 *   renderStatus(5, "session was lost"),
 *   `code: 'Some requested entity was not found', message: "session was lost"`,
 * );
 * assert.equal(renderStatus(99, ""), "code: 'Unknown error'");
 * ```
 */
export function renderStatus(code: number, message: string): string {
  const description = Number.isInteger(code) && code >= 0 && code < STATUS_DESCRIPTIONS.length
    ? STATUS_DESCRIPTIONS[code]
    : STATUS_DESCRIPTIONS[2];
  const rendered = `code: '${description}'`;
  return message === "" ? rendered : `${rendered}, message: "${escapeStatusMessage(message)}"`;
}

const ELLIPSIS = "...";

/**
 * Bounds an error text (SPEC §10.9): a text longer than `maxBytes` UTF-8 bytes becomes its longest
 * prefix of whole characters of at most `maxBytes - 3` bytes followed by `...`; a shorter one is
 * returned unchanged.
 *
 * - the result never exceeds `maxBytes` UTF-8 bytes;
 * - a surrogate pair is never split;
 * - a lone surrogate counts as 3 bytes (it is encoded as U+FFFD).
 *
 * @param text the complete text
 * @param maxBytes the bound in UTF-8 bytes (default 512)
 * @returns the text, or its bounded prefix followed by `...`
 * @throws {RangeError} if `maxBytes` is not an integer of at least 3
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(boundErrorText("short"), "short");
 * const bounded = boundErrorText("x".repeat(600));
 * assert.equal(bounded, "x".repeat(509) + "...");
 * assert.equal(boundErrorText("é".repeat(10), 10), "ééé...");
 * ```
 */
export function boundErrorText(text: string, maxBytes = 512): string {
  if (!Number.isInteger(maxBytes) || maxBytes < ELLIPSIS.length) {
    throw new RangeError(`error text bound ${maxBytes} must be an integer of at least 3 bytes`);
  }
  // Every UTF-16 code unit is at most 3 UTF-8 bytes, so short texts need no measuring.
  if (text.length * 3 <= maxBytes || utf8ByteLength(text) <= maxBytes) return text;
  return text.slice(0, utf8Prefix(text, maxBytes - ELLIPSIS.length).units) + ELLIPSIS;
}

/**
 * The text of a failed RPC: `gRPC code-mode {operation} failed: {status}`, bounded to 512 bytes
 * (SPEC §10.9).
 *
 * @param operation the operation name of SPEC §10.9, e.g. `execution` or `wait`
 * @param code the numeric gRPC status code
 * @param message the status message
 * @returns the bounded failure text
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(
 *   rpcFailureText("execution", 5, "session was lost"),
 *   `gRPC code-mode execution failed: code: 'Some requested entity was not found', message: "session was lost"`,
 * );
 * ```
 */
export function rpcFailureText(operation: string, code: number, message: string): string {
  return boundErrorText(`gRPC code-mode ${operation} failed: ${renderStatus(code, message)}`);
}

/**
 * The text of a passed client deadline: `gRPC code-mode host timed out waiting for {operation}
 * response`, bounded to 512 bytes (SPEC §10.6, §10.8).
 *
 * @param operation the operation name of SPEC §10.8, e.g. `execution starting event`
 * @returns the bounded timeout text
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(timeoutText("wait"), "gRPC code-mode host timed out waiting for wait response");
 * ```
 */
export function timeoutText(operation: string): string {
  return boundErrorText(`gRPC code-mode host timed out waiting for ${operation} response`);
}

/**
 * Identifier validation (SPEC §2.6): empty → length → UUID, with the exact messages. A UUID is
 * accepted in every form Codex's host accepts ({@link parseUuid}); callers that look one up use its
 * canonical form.
 *
 * @module
 */
import { utf8ByteLength } from "../../proto/bytes.ts";
import { HostError } from "./errors.ts";

/** The `{field}` names SPEC §2.6 renders in messages. */
export type IdentifierField =
  | "session ID"
  | "execution ID"
  | "cell ID"
  | "wait ID"
  | "tool call ID"
  | "tool definition name"
  | "tool name"
  | "tool namespace"
  | "tool invocation ID"
  | "notification ID";

const HYPHENATED = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const SIMPLE = /^[0-9a-f]{32}$/i;

/**
 * Parses a UUID the way Codex's host does (Rust's `uuid` crate, `Uuid::parse_str`): hyphenated
 * (`8-4-4-4-12` hex digits), simple (32 hex digits), braced hyphenated (`{…}`) or URN
 * (`urn:uuid:` then hyphenated); hex digits in either case, any version and variant.
 *
 * @param text the candidate
 * @returns the UUID in lower-case hyphenated form, or `undefined` when `text` is none of those
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const id = "abcdef12-2222-4333-8444-555555555555";
 * assert.equal(parseUuid("{ABCDEF12-2222-4333-8444-555555555555}"), id);
 * assert.equal(parseUuid("urn:uuid:" + id), id);
 * assert.equal(parseUuid(id.replaceAll("-", "")), id);
 * assert.equal(parseUuid(" " + id), undefined);
 * ```
 */
export function parseUuid(text: string): string | undefined {
  let hyphenated = text;
  if (text.length === 38 && text.startsWith("{") && text.endsWith("}")) hyphenated = text.slice(1, -1);
  else if (text.length === 45 && text.startsWith("urn:uuid:")) hyphenated = text.slice(9);
  else if (SIMPLE.test(text)) {
    const t = text.toLowerCase();
    return `${t.slice(0, 8)}-${t.slice(8, 12)}-${t.slice(12, 16)}-${t.slice(16, 20)}-${t.slice(20)}`;
  }
  return HYPHENATED.test(hyphenated) ? hyphenated.toLowerCase() : undefined;
}

/**
 * Validates one identifier.
 *
 * @param value the field value (undefined counts as empty)
 * @param field the SPEC field name
 * @param maxBytes the configured `maxIdentifierBytes`
 * @param options `uuid`: must parse as a UUID; `allowEmpty`: skip the empty check
 * @returns the value
 * @throws {HostError} `invalid_request` with the SPEC message
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.throws(() => validateIdentifier("", "execution ID", 256), /must not be empty/);
 * ```
 */
export function validateIdentifier(
  value: string | undefined,
  field: IdentifierField,
  maxBytes: number,
  options: { uuid?: boolean; allowEmpty?: boolean } = {},
): string {
  const text = value ?? "";
  if (text.length === 0 && !options.allowEmpty) {
    throw new HostError("invalid_request", `code-mode ${field} must not be empty`);
  }
  if (text.length > maxBytes / 3 && utf8ByteLength(text) > maxBytes) {
    throw new HostError("invalid_request", `code-mode ${field} exceeds ${maxBytes} bytes`);
  }
  if (options.uuid && parseUuid(text) === undefined) {
    throw new HostError("invalid_request", `code-mode ${field} must be a UUID`);
  }
  return text;
}

/**
 * Identifier validation (SPEC §2.6): empty → length → UUID, with the exact messages.
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

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

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
  if (options.uuid && !UUID.test(text)) {
    throw new HostError("invalid_request", `code-mode ${field} must be a UUID`);
  }
  return text;
}

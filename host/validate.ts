/**
 * Identifier validation (SPEC §2.6): empty → length → UUID, with the exact messages.
 *
 * @module
 */
import { CodeModeError } from "./errors.ts";

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
const encoder = new TextEncoder();

/**
 * UTF-8 byte length of a string without allocating for ASCII-only text.
 *
 * @param text any string
 * @returns its UTF-8 length
 */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

/**
 * Validates one identifier.
 *
 * @param value the field value (undefined counts as empty)
 * @param field the SPEC field name
 * @param maxBytes the configured `maxIdentifierBytes`
 * @param options `uuid`: must parse as a UUID; `allowEmpty`: skip the empty check
 * @returns the value
 * @throws {CodeModeError} `INVALID_ARGUMENT` with the SPEC message
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
    throw new CodeModeError("INVALID_ARGUMENT", `code-mode ${field} must not be empty`);
  }
  if (text.length > maxBytes / 3 && utf8Length(text) > maxBytes) {
    throw new CodeModeError("INVALID_ARGUMENT", `code-mode ${field} exceeds ${maxBytes} bytes`);
  }
  if (options.uuid && !UUID.test(text)) {
    throw new CodeModeError("INVALID_ARGUMENT", `code-mode ${field} must be a UUID`);
  }
  return text;
}

/**
 * Encodes a string as UTF-8 (shared encoder).
 *
 * @param text any string
 * @returns its bytes
 */
export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

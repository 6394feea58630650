/**
 * Strict decoding of JSON host V1 messages the way Codex's own host decodes them (Rust serde with
 * `deny_unknown_fields`), with the same error texts: `unknown field \`x\`, expected one of \`a\`,
 * \`b\``, `missing field \`x\``, `unknown variant …`, `invalid type: …, expected …`, `invalid
 * value: integer \`-1\`, expected u64`. Every such error is fatal to the connection; the door
 * prefixes it with `failed to decode code-mode IPC frame: `.
 *
 * Numbers keep their exact text: {@link parseJson} turns every number whose text JavaScript would
 * change (a 64-bit integer past 2^53, `1.0`, `1e2`) into a `JSON.rawJSON` value, so IDs and catalog
 * revisions stay exact and a tool result is passed on byte for byte.
 *
 * @module
 */

/** A decoding failure; its message is serde's. */
export class DecodeError extends Error {
  override name = "DecodeError";
}

type Json = Record<string, unknown>;

interface RawJson {
  readonly rawJSON: string;
}

// `JSON.rawJSON` / `JSON.isRawJSON` (V8 ≥ 11.4; Deno 2.9.6 has them), not yet in TypeScript's lib.
const RAW = JSON as unknown as {
  rawJSON(text: string): RawJson;
  isRawJSON(value: unknown): value is RawJson;
};

/** A JSON number token as written, for a value that must keep its exact text. */
export function rawJson(text: string): unknown {
  return RAW.rawJSON(text);
}

/** Numbers whose text a plain `JSON.parse` might not keep (long digit runs, decimals, exponents). */
const INEXACT = /\d{16}|\d[.eE]/;

/**
 * Decodes a frame's UTF-8.
 *
 * @param payload the bytes
 * @returns the text
 * @throws {DecodeError} invalid UTF-8
 */
export function utf8(payload: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(payload);
  } catch {
    throw new DecodeError("invalid UTF-8 in a code-mode IPC frame");
  }
}

/**
 * Parses UTF-8 JSON, keeping the exact text of every number JavaScript would not round-trip.
 *
 * @param payload a frame's payload, or its text
 * @returns the value
 * @throws {DecodeError} invalid UTF-8 or JSON
 */
export function parseJson(payload: Uint8Array | string): unknown {
  const text = typeof payload === "string" ? payload : utf8(payload);
  try {
    if (!INEXACT.test(text)) return JSON.parse(text);
    return JSON.parse(text, function (_key, value, context?: { source?: string }) {
      if (typeof value === "number" && context?.source !== undefined && context.source !== String(value)) {
        return RAW.rawJSON(context.source);
      }
      return value;
    });
  } catch (error) {
    if (text.trim() === "") throw new DecodeError("EOF while parsing a value at line 1 column 0");
    throw new DecodeError((error as Error).message);
  }
}

/** serde's `unexpected` rendering of a JSON value. */
function unexpected(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "string") return `string ${JSON.stringify(value)}`;
  if (typeof value === "boolean") return `boolean \`${value}\``;
  if (typeof value === "number") return Number.isInteger(value) ? `integer \`${value}\`` : "map";
  if (Array.isArray(value)) return "sequence";
  if (RAW.isRawJSON(value)) return /^-?\d+$/.test(value.rawJSON) ? `integer \`${value.rawJSON}\`` : "map";
  return "map";
}

/** serde's list of expected names: "`a`", "`a` or `b`", "one of `a`, `b`, `c`". */
function oneOf(names: readonly string[]): string {
  const quoted = names.map((n) => `\`${n}\``);
  if (quoted.length === 0) return "there are no fields";
  if (quoted.length === 1) return quoted[0];
  if (quoted.length === 2) return `${quoted[0]} or ${quoted[1]}`;
  return `one of ${quoted.join(", ")}`;
}

/** A failed type expectation. */
export function invalidType(value: unknown, expected: string): DecodeError {
  return new DecodeError(`invalid type: ${unexpected(value)}, expected ${expected}`);
}

/**
 * Checks a struct: `value` is an object, its keys are known (in order, as serde visits them), and
 * the required ones are present (checked after the known ones, in declaration order).
 *
 * @param value the JSON value
 * @param expected the struct's description for a wrong type
 * @param known every field, in declaration order
 * @param required the fields that must be present (serde: not `Option`, no default)
 * @param visit reads each present field in the message's order, so that a bad value before an
 *   unknown field is reported first
 * @returns the object
 */
export function struct(
  value: unknown,
  expected: string,
  known: readonly string[],
  required: readonly string[],
  visit: (key: string, value: unknown) => void = () => {},
): Json {
  if (value === null || typeof value !== "object" || Array.isArray(value) || RAW.isRawJSON(value)) {
    throw invalidType(value, expected);
  }
  const object = value as Json;
  for (const key of Object.keys(object)) {
    if (!known.includes(key)) throw new DecodeError(`unknown field \`${key}\`, expected ${oneOf(known)}`);
    visit(key, object[key]);
  }
  for (const key of required) {
    if (!(key in object)) throw new DecodeError(`missing field \`${key}\``);
  }
  return object;
}

/**
 * Reads the tag of an internally tagged enum.
 *
 * @param value the JSON value (an object)
 * @param tag the tag's field name
 * @param variants the known tags
 * @param expected the enum's description for a wrong type
 * @returns the tag
 */
export function tagOf<T extends string>(
  value: unknown,
  tag: string,
  variants: readonly T[],
  expected: string,
): T {
  if (Array.isArray(value)) {
    throw value.length === 0
      ? new DecodeError(`invalid length 0, expected ${expected}`)
      : invalidType(value[0], "variant identifier");
  }
  if (value === null || typeof value !== "object" || RAW.isRawJSON(value)) throw invalidType(value, expected);
  const object = value as Json;
  if (!(tag in object)) throw new DecodeError(`missing field \`${tag}\``);
  const name = object[tag];
  if (typeof name !== "string") throw invalidType(name, "variant identifier");
  if (!variants.includes(name as T)) {
    throw new DecodeError(`unknown variant \`${name}\`, expected ${oneOf(variants)}`);
  }
  return name as T;
}

/** The fields of an internally tagged variant (its tag removed). */
export function withoutTag(value: unknown, tag: string): Json {
  const { [tag]: _, ...rest } = value as Json;
  return rest;
}

/**
 * Where serde_json's streaming decoder stands when it fails on a message's top-level tag:
 * ` at line L column C`, the line and byte column just after the tag's value, or after the
 * object's closing brace when the tag is missing, or after an array's first element. Only the
 * top level has a position (what is inside is decoded from a buffer, as serde reports it).
 *
 * @param text the frame's JSON text
 * @param tag the tag's field name
 * @returns the suffix, or "" when the text cannot be scanned
 */
export function tagPosition(text: string, tag: string): string {
  const bytes = new TextEncoder().encode(text);
  let at = 0;
  const ws = () => {
    while (
      at < bytes.length &&
      (bytes[at] === 0x20 || bytes[at] === 0x0a || bytes[at] === 0x0d || bytes[at] === 0x09)
    ) at++;
  };
  const string = (): string => {
    const start = at;
    at++;
    while (at < bytes.length && bytes[at] !== 0x22) at += bytes[at] === 0x5c ? 2 : 1;
    at++;
    return JSON.parse(new TextDecoder().decode(bytes.subarray(start, at)));
  };
  const value = () => {
    ws();
    if (bytes[at] === 0x22) return void string();
    if (bytes[at] === 0x7b || bytes[at] === 0x5b) {
      let depth = 0;
      do {
        if (bytes[at] === 0x22) {
          string();
          continue;
        }
        if (bytes[at] === 0x7b || bytes[at] === 0x5b) depth++;
        if (bytes[at] === 0x7d || bytes[at] === 0x5d) depth--;
        at++;
      } while (depth > 0 && at < bytes.length);
      return;
    }
    while (at < bytes.length && !/[,\]}\s]/.test(String.fromCharCode(bytes[at]))) at++;
  };
  const position = () => {
    let line = 1;
    let lineStart = 0;
    for (let i = 0; i < at; i++) if (bytes[i] === 0x0a) line++, lineStart = i + 1;
    return ` at line ${line} column ${at - lineStart}`;
  };
  try {
    ws();
    if (bytes[at] === 0x5b) {
      at++;
      value();
      return position();
    }
    if (bytes[at] !== 0x7b) return "";
    at++;
    for (;;) {
      ws();
      if (bytes[at] === 0x7d) {
        at++;
        return position();
      }
      if (bytes[at] === 0x2c) {
        at++;
        ws();
      }
      const key = string();
      ws();
      at++; // ':'
      value();
      if (key === tag) return position();
    }
  } catch {
    return "";
  }
}

/** A string. */
export function str(value: unknown): string {
  if (typeof value !== "string") throw invalidType(value, "a string");
  return value;
}

/** An optional string (`null` or absent: undefined). */
export function optStr(value: unknown): string | undefined {
  return value === undefined || value === null ? undefined : str(value);
}

/** A non-blank identifier (Codex's `Identifier`: `identifier must not be empty`). */
export function identifier(value: unknown): string {
  const text = str(value);
  if (text.trim() === "") throw new DecodeError("identifier must not be empty");
  return text;
}

/** A unit-variant string enum. */
export function variant<T extends string>(value: unknown, variants: readonly T[]): T {
  if (typeof value !== "string") throw invalidType(value, "variant identifier");
  if (!variants.includes(value as T)) {
    throw new DecodeError(`unknown variant \`${value}\`, expected ${oneOf(variants)}`);
  }
  return value as T;
}

/** An array. */
export function seq(value: unknown): unknown[] {
  if (!Array.isArray(value)) throw invalidType(value, "a sequence");
  return value;
}

const INT_RANGES = {
  u64: [0n, 2n ** 64n - 2n],
  i64: [-(2n ** 63n), 2n ** 63n - 1n],
  i32: [-(2n ** 31n), 2n ** 31n - 1n],
  usize: [0n, 2n ** 64n - 2n],
  u32: [0n, 2n ** 32n - 1n],
} as const;

/**
 * An integer of a Rust type, exact.
 *
 * - A fraction or exponent, and the 64-bit extremes, are `invalid type: map` (Codex's host decodes
 *   numbers with arbitrary precision and sees those as its number map).
 * - Out of the type's range: `invalid value: integer \`n\`, expected {type}`.
 *
 * @param value the JSON value
 * @param type the Rust type
 * @returns the integer
 */
export function int(value: unknown, type: keyof typeof INT_RANGES): bigint {
  let n: bigint;
  if (typeof value === "number" && Number.isInteger(value)) n = BigInt(value);
  else if (RAW.isRawJSON(value) && /^-?\d+$/.test(value.rawJSON)) n = BigInt(value.rawJSON);
  else throw invalidType(value, type);
  if (n >= 2n ** 64n - 1n || n < -(2n ** 63n)) throw invalidType(RAW.rawJSON("0.5"), type);
  const [min, max] = INT_RANGES[type];
  if (n < min || n > max) throw new DecodeError(`invalid value: integer \`${n}\`, expected ${type}`);
  return n;
}

/** An optional integer (`null` or absent: undefined). */
export function optInt(value: unknown, type: keyof typeof INT_RANGES): bigint | undefined {
  return value === undefined || value === null ? undefined : int(value, type);
}

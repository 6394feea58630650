/**
 * The JSON texts of values that cross from a cell to the harness (a stored value, a tool's input, a
 * content block) and the texts of `text()` and `notify()`, made inside the cell's context
 * (`cell_helpers.ts` explains how helpers are made): checked the way the reference host's JSON
 * parser reads them back, refused with that parser's messages.
 *
 * @module
 */
import type { HelperKit } from "./cell_helper_kit.ts";

/** What {@link createJsonHelpers} makes: functions of the cell's context. */
export interface JsonHelpers {
  /** The text of `text()` and `notify()`: a string as-is, a primitive as String(), else JSON. */
  toOutputText: (value: unknown) => string;
  /** The JSON text of `value`, checked as the reference reads it; throws the reference's text. */
  serializeJson: (value: unknown) => string;
  /** A key as Rust's `{:?}` prints it. */
  debugQuoted: (text: string) => string;
  /** An MCP content block as the reference reads it, or undefined for a non-object. */
  readBlock: (value: unknown) => Record<string, unknown> | undefined;
}

/**
 * Makes the {@link JsonHelpers} inside a cell's context; like every helper factory it refers to
 * nothing outside its own body but the context's built-ins (the reason it is one function).
 */
export function createJsonHelpers(kit: HelperKit): JsonHelpers {
  const { describe, isObjectLike } = kit;
  // Originals, captured before user code can replace them.
  const ReflectApply = Reflect.apply;
  const isArray = Array.isArray;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const StringCtor = String;
  const stringSlice = String.prototype.slice;
  const stringIndexOf = String.prototype.indexOf;
  const stringCharCodeAt = String.prototype.charCodeAt;
  const stringCodePointAt = String.prototype.codePointAt;
  const numberToString = Number.prototype.toString;
  const regexpTest = RegExp.prototype.test;
  const parseInteger = parseInt;
  const fromCodePoint = String.fromCodePoint;
  const Bytes = Uint8Array;

  const SERIALIZE = "failed to serialize JavaScript value: ";

  // JSON.stringify with the original function; what it throws comes back as its description.
  function toJson(value: unknown): string | undefined {
    try {
      return stringify(value);
    } catch (e) {
      throw describe(e);
    }
  }

  // text() and notify(): a string as-is, a primitive as String(), anything else as JSON
  // ("undefined" when JSON has no text for it: a function, a symbol).
  function toOutputText(value: unknown): string {
    const type = typeof value;
    if (type === "string") return value as string;
    if (
      value === undefined || value === null || type === "boolean" || type === "number" ||
      type === "bigint"
    ) {
      return StringCtor(value);
    }
    const json = toJson(value);
    return json === undefined ? "undefined" : json;
  }

  function hex(code: number): string {
    return ReflectApply(numberToString, code, [16]) as string;
  }

  // The JSON text of a value that crosses to the harness (a stored value, a tool's input, a
  // content block), checked the way the reference host's JSON parser reads it back: a value with
  // no JSON text, a lone surrogate, nesting deeper than 128 and its reserved keys are refused with
  // that parser's messages (columns count UTF-8 bytes).
  function serializeJson(value: unknown): string {
    const json = toJson(value);
    if (json === undefined) throw SERIALIZE + "expected value at line 1 column 1";
    const problem = jsonProblem(json);
    if (problem !== undefined) throw SERIALIZE + problem;
    return json;
  }

  // One pass of a scanner over the JSON text whose cursor state (position, UTF-8 column, depth,
  // the last structural character) every branch shares: the reason it is one function.
  function jsonProblem(json: string): string | undefined {
    const n = json.length;
    // JSON.stringify escapes only lone surrogates as \udXXX; 128 nested containers need 256
    // characters at least.
    if (
      n < 256 && ReflectApply(stringIndexOf, json, ["\\ud"]) === -1 &&
      ReflectApply(stringIndexOf, json, ["$serde_json::private::"]) === -1
    ) return undefined;
    const at = (i: number) => ReflectApply(stringCharCodeAt, json, [i]) as number;
    const hexAt = (i: number) => parseInteger(ReflectApply(stringSlice, json, [i, i + 4]) as string, 16);
    // Whether each open container is an object (its next string after `{` or `,` is a key).
    const objects = new Bytes(128);
    let depth = 0;
    let bytes = 0; // UTF-8 bytes consumed
    let i = 0;
    let previous = 0; // the last structural character
    while (i < n) {
      const c = at(i);
      if (c === 0x22) {
        const isKey = depth > 0 && objects[depth - 1] === 1 && (previous === 0x7b || previous === 0x2c);
        const start = i + 1;
        i++;
        bytes++;
        for (;;) {
          const d = at(i);
          if (d === 0x22) break;
          if (d === 0x5c) {
            if (at(i + 1) !== 0x75) {
              i += 2;
              bytes += 2;
              continue;
            }
            const unit = hexAt(i + 2);
            i += 6;
            bytes += 6;
            if (unit >= 0xdc00 && unit <= 0xdfff) {
              return "lone leading surrogate in hex escape at line 1 column " + bytes;
            }
            if (unit >= 0xd800 && unit <= 0xdbff) {
              if (at(i) !== 0x5c) return "unexpected end of hex escape at line 1 column " + (bytes + 1);
              i++;
              bytes++;
              if (at(i) !== 0x75) return "unexpected end of hex escape at line 1 column " + (bytes + 1);
              const low = hexAt(i + 1);
              i += 5;
              bytes += 5;
              if (low < 0xdc00 || low > 0xdfff) {
                return "lone leading surrogate in hex escape at line 1 column " + bytes;
              }
            }
            continue;
          }
          if (d < 0x80) bytes += 1;
          else if (d < 0x800) bytes += 2;
          else if (d >= 0xd800 && d <= 0xdbff) {
            bytes += 4;
            i++;
          } else bytes += 3;
          i++;
        }
        if (isKey) {
          const key = ReflectApply(stringSlice, json, [start, i]);
          if (key === "$serde_json::private::RawValue" || key === "$serde_json::private::Number") {
            return "reserved JSON object key";
          }
        }
        i++;
        bytes++;
        previous = 0x22;
        continue;
      }
      if (c === 0x5b || c === 0x7b) {
        if (depth === 127) return "recursion limit exceeded at line 1 column " + (bytes + 1);
        objects[depth++] = c === 0x7b ? 1 : 0;
      } else if (c === 0x5d || c === 0x7d) {
        depth--;
      }
      if (c === 0x5b || c === 0x7b || c === 0x5d || c === 0x7d || c === 0x2c || c === 0x3a) previous = c;
      i++;
      bytes++;
    }
    return undefined;
  }

  // A key as Rust's `{:?}` prints it (the reference's "Unable to store" message).
  const DEBUG_ESCAPED =
    /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Mn}\p{Me}\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]/u;
  function debugQuoted(text: string): string {
    let out = '"';
    for (let i = 0; i < text.length; i++) {
      let code = ReflectApply(stringCodePointAt, text, [i]) as number;
      if (code > 0xffff) i++;
      else if (code >= 0xd800 && code <= 0xdfff) code = 0xfffd;
      const ch = ReflectApply(fromCodePoint, StringCtor, [code]) as string;
      if (ch === '"') out += '\\"';
      else if (ch === "\\") out += "\\\\";
      else if (ch === "\n") out += "\\n";
      else if (ch === "\r") out += "\\r";
      else if (ch === "\t") out += "\\t";
      else if (ch === "\0") out += "\\0";
      else if (ReflectApply(regexpTest, DEBUG_ESCAPED, [ch])) out += "\\u{" + hex(code) + "}";
      else out += ch;
    }
    return out + '"';
  }

  // An MCP content block as the reference reads it: the JSON of the value's enumerable properties.
  function readBlock(value: unknown): Record<string, unknown> | undefined {
    const json = serializeJson(value);
    const block = parse(json);
    return isObjectLike(block) && !isArray(block) ? block as Record<string, unknown> : undefined;
  }

  return { toOutputText, serializeJson, debugQuoted, readBlock };
}

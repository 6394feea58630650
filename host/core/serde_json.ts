/**
 * JSON syntax checking with the error texts of Rust's `serde_json` (parsing a `serde_json::Value`
 * from bytes), which Codex's host quotes in `invalid tool input schema: …` and
 * `invalid code-mode tool output JSON: …`: `{message} at line {line} column {column}`.
 *
 * - The same grammar as `JSON.parse` over UTF-8, plus serde_json's refusal of nesting deeper than
 *   127 arrays or objects (`recursion limit exceeded`). Numbers are not range-checked: the
 *   reference accepts `1e400`, as `JSON.parse` does.
 * - Lines count `\n` bytes; the column is the byte count on the line up to the error, either up to
 *   and including the offending byte or just after the bytes read, as serde_json reports each error.
 * - Invalid UTF-8 inside a string is reported at the end of that string; outside strings no byte
 *   above 0x7f is valid anyway.
 *
 * @module
 */

/** serde_json's `remaining_depth`: the 128th nested array or object fails. */
const DEPTH = 128;

class Failure {
  constructor(readonly message: string, readonly index: number) {}
}

function isDigit(b: number | undefined): boolean {
  return b !== undefined && b >= 0x30 && b <= 0x39;
}

function hexValue(b: number): number {
  if (b >= 0x30 && b <= 0x39) return b - 0x30;
  if (b >= 0x61 && b <= 0x66) return b - 0x61 + 10;
  if (b >= 0x41 && b <= 0x46) return b - 0x41 + 10;
  return -1;
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });

class Parser {
  #b: Uint8Array;
  #i = 0;
  #depth = DEPTH;

  constructor(bytes: Uint8Array) {
    this.#b = bytes;
  }

  /** An error at the bytes read so far (serde_json's `error`). */
  #error(message: string): Failure {
    return new Failure(message, this.#i);
  }

  /** An error at the next byte, included (serde_json's `peek_error`). */
  #peekError(message: string): Failure {
    return new Failure(message, Math.min(this.#b.length, this.#i + 1));
  }

  #peek(): number | undefined {
    return this.#b[this.#i];
  }

  #whitespace(): number | undefined {
    for (;;) {
      const c = this.#b[this.#i];
      if (c === 0x20 || c === 0x0a || c === 0x09 || c === 0x0d) this.#i++;
      else return c;
    }
  }

  document(): void {
    this.#value();
    if (this.#whitespace() !== undefined) throw this.#peekError("trailing characters");
  }

  #value(): void {
    const c = this.#whitespace();
    if (c === undefined) throw this.#peekError("EOF while parsing a value");
    switch (c) {
      case 0x6e: // n
        this.#i++;
        return this.#ident("ull");
      case 0x74: // t
        this.#i++;
        return this.#ident("rue");
      case 0x66: // f
        this.#i++;
        return this.#ident("alse");
      case 0x2d: // -
        this.#i++;
        return this.#integer();
      case 0x22: // "
        this.#i++;
        return this.#string();
      case 0x5b: // [
        if (--this.#depth === 0) throw this.#peekError("recursion limit exceeded");
        this.#i++;
        this.#list();
        this.#depth++;
        return;
      case 0x7b: // {
        if (--this.#depth === 0) throw this.#peekError("recursion limit exceeded");
        this.#i++;
        this.#object();
        this.#depth++;
        return;
      default:
        if (isDigit(c)) return this.#integer();
        throw this.#peekError("expected value");
    }
  }

  #ident(rest: string): void {
    for (let k = 0; k < rest.length; k++) {
      const c = this.#b[this.#i];
      if (c === undefined) throw this.#error("EOF while parsing a value");
      this.#i++;
      if (c !== rest.charCodeAt(k)) throw this.#error("expected ident");
    }
  }

  #list(): void {
    let first = true;
    for (;;) {
      let c = this.#whitespace();
      if (c === 0x5d) break;
      if (c === 0x2c && !first) {
        this.#i++;
        c = this.#whitespace();
      } else if (c === undefined) {
        throw this.#peekError("EOF while parsing a list");
      } else if (first) {
        first = false;
      } else {
        throw this.#peekError("expected `,` or `]`");
      }
      if (c === 0x5d) throw this.#peekError("trailing comma");
      if (c === undefined) throw this.#peekError("EOF while parsing a value");
      this.#value();
    }
    this.#i++;
  }

  #object(): void {
    let first = true;
    for (;;) {
      let c = this.#whitespace();
      if (c === 0x7d) break;
      if (c === 0x2c && !first) {
        this.#i++;
        c = this.#whitespace();
      } else if (c === undefined) {
        throw this.#peekError("EOF while parsing an object");
      } else if (first) {
        first = false;
      } else {
        throw this.#peekError("expected `,` or `}`");
      }
      if (c === 0x7d) throw this.#peekError("trailing comma");
      if (c === undefined) throw this.#peekError("EOF while parsing a value");
      if (c !== 0x22) throw this.#peekError("key must be a string");
      this.#i++;
      this.#string();
      const colon = this.#whitespace();
      if (colon === undefined) throw this.#peekError("EOF while parsing an object");
      if (colon !== 0x3a) throw this.#peekError("expected `:`");
      this.#i++;
      this.#value();
    }
    this.#i++;
  }

  /** After the opening quote. UTF-8 is checked once the string has ended, as serde_json does. */
  #string(): void {
    const b = this.#b;
    let start = this.#i;
    const raw: Uint8Array[] = [];
    for (;;) {
      while (this.#i < b.length && b[this.#i] !== 0x22 && b[this.#i] !== 0x5c && b[this.#i] >= 0x20) {
        this.#i++;
      }
      if (this.#i === b.length) throw this.#error("EOF while parsing a string");
      const c = b[this.#i];
      if (c === 0x22) {
        raw.push(b.subarray(start, this.#i));
        this.#i++;
        for (const part of raw) {
          try {
            UTF8.decode(part);
          } catch {
            throw this.#error("invalid unicode code point");
          }
        }
        return;
      }
      if (c === 0x5c) {
        raw.push(b.subarray(start, this.#i));
        this.#i++;
        this.#escape();
        start = this.#i;
        continue;
      }
      this.#i++;
      throw this.#error("control character (\\u0000-\\u001F) found while parsing a string");
    }
  }

  #escape(): void {
    const c = this.#b[this.#i];
    if (c === undefined) throw this.#error("EOF while parsing a string");
    this.#i++;
    switch (c) {
      case 0x22:
      case 0x5c:
      case 0x2f:
      case 0x62:
      case 0x66:
      case 0x6e:
      case 0x72:
      case 0x74:
        return;
      case 0x75:
        return this.#unicodeEscape();
      default:
        throw this.#error("invalid escape");
    }
  }

  #hexEscape(): number {
    const b = this.#b;
    if (this.#i + 4 > b.length) {
      this.#i = b.length;
      throw this.#error("EOF while parsing a string");
    }
    let n = 0;
    let bad = false;
    for (let k = 0; k < 4; k++) {
      const v = hexValue(b[this.#i + k]);
      if (v < 0) bad = true;
      n = n * 16 + v;
    }
    this.#i += 4;
    if (bad) throw this.#error("invalid escape");
    return n;
  }

  #unicodeEscape(): void {
    const n = this.#hexEscape();
    if (n >= 0xdc00 && n <= 0xdfff) throw this.#error("lone leading surrogate in hex escape");
    if (n < 0xd800 || n > 0xdbff) return;
    for (const expected of [0x5c, 0x75]) {
      const c = this.#b[this.#i];
      if (c === undefined) throw this.#error("EOF while parsing a string");
      this.#i++;
      if (c !== expected) throw this.#error("unexpected end of hex escape");
    }
    const n2 = this.#hexEscape();
    if (n2 < 0xdc00 || n2 > 0xdfff) throw this.#error("lone leading surrogate in hex escape");
  }

  /** After an optional `-`: serde_json's number scan, which keeps the digits (no range check). */
  #integer(): void {
    const c = this.#b[this.#i];
    if (c === undefined) throw this.#error("EOF while parsing a value");
    this.#i++;
    if (c === 0x30) {
      if (isDigit(this.#peek())) throw this.#peekError("invalid number");
    } else if (isDigit(c)) {
      while (isDigit(this.#peek())) this.#i++;
    } else {
      throw this.#error("invalid number");
    }
    if (this.#peek() === 0x2e) this.#decimal();
    const e = this.#peek();
    if (e === 0x65 || e === 0x45) this.#exponent();
  }

  #decimal(): void {
    this.#i++;
    if (!isDigit(this.#peek())) {
      throw this.#peekError(this.#peek() === undefined ? "EOF while parsing a value" : "invalid number");
    }
    while (isDigit(this.#peek())) this.#i++;
  }

  #exponent(): void {
    this.#i++;
    if (this.#peek() === 0x2b || this.#peek() === 0x2d) this.#i++;
    const first = this.#b[this.#i];
    if (first === undefined) throw this.#error("EOF while parsing a value");
    this.#i++;
    if (!isDigit(first)) throw this.#error("invalid number");
    while (isDigit(this.#peek())) this.#i++;
  }
}

/**
 * Checks that bytes are one JSON value, as `serde_json::from_slice::<Value>` does.
 *
 * @param bytes the candidate (UTF-8)
 * @returns `undefined` when they are valid, else serde_json's error text
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const bytes = (s: string) => new TextEncoder().encode(s);
 * assert.equal(serdeJsonError(bytes('{"a": [1, 2.5e3, null]}')), undefined);
 * assert.equal(serdeJsonError(bytes("{")), "EOF while parsing an object at line 1 column 1");
 * assert.equal(serdeJsonError(bytes("")), "EOF while parsing a value at line 1 column 0");
 * assert.equal(serdeJsonError(bytes("{} x")), "trailing characters at line 1 column 4");
 * ```
 */
export function serdeJsonError(bytes: Uint8Array): string | undefined {
  try {
    new Parser(bytes).document();
    return undefined;
  } catch (error) {
    if (!(error instanceof Failure)) throw error;
    let line = 1;
    let column = 0;
    for (let k = 0; k < error.index; k++) {
      if (bytes[k] === 0x0a) {
        line++;
        column = 0;
      } else {
        column++;
      }
    }
    return `${error.message} at line ${line} column ${column}`;
  }
}

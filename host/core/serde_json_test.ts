import assert from "node:assert/strict";
import { serdeJsonError } from "./serde_json.ts";

const text = (s: string) => new TextEncoder().encode(s);

/**
 * Each input and the text Codex's host (`codex-code-mode-host` 0.171) answered for it, recorded by
 * sending the bytes as `CompleteToolCall` output JSON (`invalid code-mode tool output JSON: {text}`;
 * `undefined`: accepted).
 */
const RECORDED: [Uint8Array, string | undefined][] = [
  [text("{"), "EOF while parsing an object at line 1 column 1"],
  [text(""), "EOF while parsing a value at line 1 column 0"],
  [text("{} x"), "trailing characters at line 1 column 4"],
  [text("nope"), "expected ident at line 1 column 2"],
  [text("x"), "expected value at line 1 column 1"],
  [text('"\\u00"'), "EOF while parsing a string at line 1 column 6"],
  [text('"\\ud800"'), "unexpected end of hex escape at line 1 column 8"],
  [text('"\\ud800\\u0041"'), "lone leading surrogate in hex escape at line 1 column 13"],
  [text('"\\udc00"'), "lone leading surrogate in hex escape at line 1 column 7"],
  [text('"\\ud800x"'), "unexpected end of hex escape at line 1 column 8"],
  [text('"\\q"'), "invalid escape at line 1 column 3"],
  [text('"a\u0001"'), "control character (\\u0000-\\u001F) found while parsing a string at line 1 column 3"],
  [text("[1,]"), "trailing comma at line 1 column 4"],
  [text('{"a":1,}'), "trailing comma at line 1 column 8"],
  [text('{"a" 1}'), "expected `:` at line 1 column 6"],
  [text("{1:2}"), "key must be a string at line 1 column 2"],
  [text("[1 2]"), "expected `,` or `]` at line 1 column 4"],
  [text('{"a":1 "b"}'), "expected `,` or `}` at line 1 column 8"],
  [text("-"), "EOF while parsing a value at line 1 column 1"],
  [text("-x"), "invalid number at line 1 column 2"],
  [text("01"), "invalid number at line 1 column 2"],
  [text("1."), "EOF while parsing a value at line 1 column 2"],
  [text("1.x"), "invalid number at line 1 column 3"],
  [text("1e"), "EOF while parsing a value at line 1 column 2"],
  [text("1e+"), "EOF while parsing a value at line 1 column 3"],
  [text("1ex"), "invalid number at line 1 column 3"],
  [text("1e309"), undefined],
  [text("1e308"), undefined],
  [text("-1e309"), undefined],
  [text("1e400"), undefined],
  [text("1e-400"), undefined],
  [text("123456789012345678901234567890"), undefined],
  [text("1e2147483648"), undefined],
  [text("0e2147483648"), undefined],
  [text("1.5e2147483647"), undefined],
  [text("tru"), "EOF while parsing a value at line 1 column 3"],
  [text("nul"), "EOF while parsing a value at line 1 column 3"],
  [text("["), "EOF while parsing a list at line 1 column 1"],
  [text("[1"), "EOF while parsing a list at line 1 column 2"],
  [text('{"a"'), "EOF while parsing an object at line 1 column 4"],
  [text('{"a":'), "EOF while parsing a value at line 1 column 5"],
  [text('"abc'), "EOF while parsing a string at line 1 column 4"],
  [text("\n\n  x"), "expected value at line 3 column 3"],
  [text("[\n1,\n2\n"), "EOF while parsing a list at line 4 column 0"],
  [text("  "), "EOF while parsing a value at line 1 column 2"],
  [text('"\\'), "EOF while parsing a string at line 1 column 2"],
  [text('"\\u12'), "EOF while parsing a string at line 1 column 5"],
  [text("1 2"), "trailing characters at line 1 column 3"],
  [text('{"a":{"b":[true,false,null]}}'), undefined],
  [text('"\\ud800\\udc00"'), undefined],
  [text("ï»¿{}"), "expected value at line 1 column 1"],
  [text("\uFEFF{}"), "expected value at line 1 column 1"],
  [new Uint8Array([34, 255, 34]), "invalid unicode code point at line 1 column 3"],
  [new Uint8Array([34, 195, 34]), "invalid unicode code point at line 1 column 3"],
  [new Uint8Array([91, 34, 255, 92, 110, 34, 93]), "invalid unicode code point at line 1 column 6"],
  [new Uint8Array([34, 97, 92, 110, 226, 130, 34]), "invalid unicode code point at line 1 column 7"],
  [new Uint8Array([255]), "expected value at line 1 column 1"],
  [text("[".repeat(127) + "]".repeat(127)), undefined],
  [text('{"a":'.repeat(127) + "1" + "}".repeat(127)), undefined],
  [text("[".repeat(128) + "]".repeat(128)), "recursion limit exceeded at line 1 column 128"],
  [text('{"a":'.repeat(128) + "1" + "}".repeat(128)), "recursion limit exceeded at line 1 column 636"],
  [text("1e400"), undefined],
  [text("-1e309"), undefined],
  [text("[-]"), "invalid number at line 1 column 3"],
  [text("[1.]"), "invalid number at line 1 column 4"],
  [text("[1e]"), "invalid number at line 1 column 4"],
  [text("[01]"), "invalid number at line 1 column 3"],
  [text("1e-400"), undefined],
  [text("-0"), undefined],
];

Deno.test("serdeJsonError gives serde_json's text for every input recorded from the reference", () => {
  for (const [bytes, expected] of RECORDED) {
    assert.equal(serdeJsonError(bytes), expected, new TextDecoder().decode(bytes).slice(0, 60));
  }
});

Deno.test("serdeJsonError accepts what JSON.parse accepts on a random sample", () => {
  const values: unknown[] = [null, true, 0, -1.5e-7, 'a\u00e9\u{1f980}\n"', [], {}, { a: [1, { b: "c" }] }];
  for (const value of values) {
    assert.equal(serdeJsonError(text(JSON.stringify(value))), undefined);
    assert.equal(serdeJsonError(text(JSON.stringify(value, null, 2))), undefined);
  }
});

Deno.test("serdeJsonError counts lines and columns in bytes", () => {
  assert.equal(serdeJsonError(text("[\n1,\n\u00e9]")), "expected value at line 3 column 1");
  assert.equal(serdeJsonError(text('"\u00e9\u00e9" x')), "trailing characters at line 1 column 8");
});

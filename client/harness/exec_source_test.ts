import assert from "node:assert/strict";
import { parseExecSource } from "./exec_source.ts";

const ONE_OBJECT =
  "exec pragma must be a JSON object with supported fields `yield_time_ms` and `max_output_tokens`";

Deno.test("scenario 142: a source without a pragma is the code; a pragma line is removed and read", () => {
  assert.deepEqual(parseExecSource("text('hi')"), { code: "text('hi')" });
  assert.deepEqual(parseExecSource("// @exec: {\"yield_time_ms\": 10}\ntext('hi')"), {
    code: "text('hi')",
    yieldTimeMs: 10,
  });
});

Deno.test("scenario 143: the pragma errors come in the order of §11.2 with the SPEC's texts", () => {
  const inputs = [
    "   ",
    "// @exec: {}",
    "// @exec:\nx",
    "// @exec: [1]\nx",
    '// @exec: {"foo": 1}\nx',
    '// @exec: {"yield_time_ms": -1}\nx',
    '// @exec: {"max_output_tokens": 9007199254740993}\nx',
    "// @exec: {bad\nx",
  ];
  const results = inputs.map(parseExecSource);
  let parserMessage = "";
  try {
    JSON.parse("{bad");
  } catch (error) {
    parserMessage = (error as Error).message;
  }
  assert.notEqual(parserMessage, "");
  assert.deepEqual(results, [
    "exec expects raw JavaScript source text (non-empty). Provide JS only, optionally with first-line " +
    '`// @exec: {"yield_time_ms": 10000, "max_output_tokens": 1000}`.',
    "exec pragma must be followed by JavaScript source on subsequent lines",
    ONE_OBJECT,
    ONE_OBJECT,
    "exec pragma only supports `yield_time_ms` and `max_output_tokens`; got `foo`",
    "exec pragma fields `yield_time_ms` and `max_output_tokens` must be non-negative safe integers: " +
    "invalid value for `yield_time_ms`: -1",
    "exec pragma field `max_output_tokens` must be a non-negative safe integer",
    "exec pragma must be valid JSON with supported fields `yield_time_ms` and `max_output_tokens`: " +
    parserMessage,
  ]);
});

Deno.test("scenario 150a: only spaces and tabs may precede a pragma; a no-break space makes it code", () => {
  const nbsp = "\u00a0// @exec: {\"yield_time_ms\": 10}\ntext('hi')";
  assert.deepEqual(parseExecSource(nbsp), { code: nbsp });
  assert.deepEqual(parseExecSource("\t// @exec: {\"yield_time_ms\": 10}\ntext('hi')"), {
    code: "text('hi')",
    yieldTimeMs: 10,
  });
});

Deno.test("parseExecSource: null fields are absent; both fields are read; CRLF after the pragma is allowed", () => {
  assert.deepEqual(parseExecSource('// @exec: {"yield_time_ms": null, "max_output_tokens": 7}\r\nx\r\ny'), {
    code: "x\r\ny",
    maxOutputTokens: 7,
  });
  assert.deepEqual(parseExecSource("  // @exec: {}\n  x"), { code: "  x" });
});

Deno.test("parseExecSource: yield_time_ms is checked before max_output_tokens; values are shown as JSON", () => {
  assert.equal(
    parseExecSource('// @exec: {"max_output_tokens": 1.5, "yield_time_ms": "10"}\nx'),
    "exec pragma fields `yield_time_ms` and `max_output_tokens` must be non-negative safe integers: " +
      'invalid value for `yield_time_ms`: "10"',
  );
  assert.equal(
    parseExecSource('// @exec: {"max_output_tokens": 1.5}\nx'),
    "exec pragma fields `yield_time_ms` and `max_output_tokens` must be non-negative safe integers: " +
      "invalid value for `max_output_tokens`: 1.5",
  );
  assert.equal(
    parseExecSource('// @exec: {"yield_time_ms": 1e300}\nx'),
    "exec pragma field `yield_time_ms` must be a non-negative safe integer",
  );
  assert.deepEqual(parseExecSource('// @exec: {"yield_time_ms": 9007199254740991}\nx'), {
    code: "x",
    yieldTimeMs: 9007199254740991,
  });
});

Deno.test("parseExecSource: a pragma-like text that is not on the first line is code", () => {
  const input = 'text(1)\n// @exec: {"foo": 1}\ntext(2)';
  assert.deepEqual(parseExecSource(input), { code: input });
  assert.deepEqual(parseExecSource("//@exec: {}\nx"), { code: "//@exec: {}\nx" });
  assert.equal(
    parseExecSource('// @exec: {"yield_time_ms": 1}\n \t\r\n'),
    "exec pragma must be followed by JavaScript source on subsequent lines",
  );
  assert.equal(parseExecSource("// @exec: null\nx"), ONE_OBJECT);
});

import assert from "node:assert/strict";
import fc from "fast-check";
import {
  boundErrorText,
  escapeStatusMessage,
  renderStatus,
  RESET_MESSAGE,
  rpcFailureText,
  STATUS_DESCRIPTIONS,
  timeoutText,
} from "./status_text.ts";

const utf8 = new TextEncoder();
const byteLength = (text: string) => utf8.encode(text).length;

Deno.test("STATUS_DESCRIPTIONS holds the SPEC §10.9 description of every code 0..16", () => {
  assert.deepEqual(STATUS_DESCRIPTIONS, [
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
  assert.ok(Object.isFrozen(STATUS_DESCRIPTIONS));
});

Deno.test("renderStatus() renders every code 0..16 with its description", () => {
  for (let code = 0; code <= 16; code++) {
    assert.equal(renderStatus(code, ""), `code: '${STATUS_DESCRIPTIONS[code]}'`);
    assert.equal(renderStatus(code, "m"), `code: '${STATUS_DESCRIPTIONS[code]}', message: "m"`);
  }
});

Deno.test("renderStatus() describes a code outside 0..16 as Unknown error", () => {
  for (const code of [-1, 17, 99, 1.5, NaN]) {
    assert.equal(renderStatus(code, ""), "code: 'Unknown error'");
  }
});

Deno.test("renderStatus() omits the message part only for an empty message", () => {
  assert.equal(renderStatus(3, ""), "code: 'Client specified an invalid argument'");
  assert.equal(renderStatus(3, " "), `code: 'Client specified an invalid argument', message: " "`);
  assert.equal(
    renderStatus(13, 'bad "x"\n'),
    `code: 'Internal error', message: "bad \\"x\\"\\n"`,
  );
});

Deno.test("escapeStatusMessage() uses the short escapes for backslash, quote, LF, CR, TAB and NUL", () => {
  assert.equal(escapeStatusMessage("\\"), "\\\\");
  assert.equal(escapeStatusMessage('"'), '\\"');
  assert.equal(escapeStatusMessage("\n"), "\\n");
  assert.equal(escapeStatusMessage("\r"), "\\r");
  assert.equal(escapeStatusMessage("\t"), "\\t");
  assert.equal(escapeStatusMessage("\0"), "\\0");
  assert.equal(escapeStatusMessage('a\\b"c\nd\re\tf\0g'), 'a\\\\b\\"c\\nd\\re\\tf\\0g');
});

Deno.test("escapeStatusMessage() leaves the single quote verbatim", () => {
  assert.equal(escapeStatusMessage("it's"), "it's");
});

Deno.test("escapeStatusMessage() escapes every other C0 control, DEL and C1 control as \\u{h}", () => {
  const short = new Set([0x00, 0x09, 0x0a, 0x0d]);
  for (let cp = 0; cp < 0x20; cp++) {
    if (short.has(cp)) continue;
    assert.equal(escapeStatusMessage(String.fromCodePoint(cp)), `\\u{${cp.toString(16)}}`);
  }
  assert.equal(escapeStatusMessage("\x01"), "\\u{1}");
  assert.equal(escapeStatusMessage("\x1b"), "\\u{1b}");
  assert.equal(escapeStatusMessage("\u007f"), "\\u{7f}");
  for (let cp = 0x80; cp <= 0x9f; cp++) {
    assert.equal(escapeStatusMessage(String.fromCodePoint(cp)), `\\u{${cp.toString(16)}}`);
  }
  assert.equal(escapeStatusMessage("\u0085"), "\\u{85}");
});

Deno.test("escapeStatusMessage() escapes format characters and line/paragraph separators", () => {
  assert.equal(escapeStatusMessage("\u00ad"), "\\u{ad}");
  assert.equal(escapeStatusMessage("\u200b\u200d\u202e"), "\\u{200b}\\u{200d}\\u{202e}");
  assert.equal(escapeStatusMessage("\u2028"), "\\u{2028}");
  assert.equal(escapeStatusMessage("\u2029"), "\\u{2029}");
  assert.equal(escapeStatusMessage("\ufeff"), "\\u{feff}");
});

Deno.test("escapeStatusMessage() escapes an astral format character as one code point", () => {
  assert.equal(escapeStatusMessage("\u{e0001}"), "\\u{e0001}");
  assert.equal(escapeStatusMessage("a\u{e007f}b"), "a\\u{e007f}b");
});

Deno.test("escapeStatusMessage() keeps printable, CJK, emoji, spaces and lone surrogates verbatim", () => {
  const verbatim = [
    "plain ASCII ~!@#$%^&*()_+{}|:<>?`-=[];',./",
    "漢字",
    "😀",
    "\u00a0\u3000 ", // no-break space, ideographic space, space (Zs)
    "e\u0301", // combining mark (Mn)
    "\ud800",
    "\udfff",
    "x\ud83dy",
    "\u{10ffff}", // unassigned (Cn)
  ];
  for (const text of verbatim) {
    assert.equal(escapeStatusMessage(text), text);
  }
  assert.equal(escapeStatusMessage("\u{1f469}\u200d"), "\u{1f469}\\u{200d}");
});

Deno.test("rpcFailureText() renders the SPEC §10.9 example", () => {
  assert.equal(
    rpcFailureText("execution", 5, "session was lost"),
    `gRPC code-mode execution failed: code: 'Some requested entity was not found', message: "session was lost"`,
  );
  assert.equal(
    rpcFailureText("session opening", 14, ""),
    "gRPC code-mode session opening failed: code: 'The service is currently unavailable'",
  );
});

Deno.test("rpcFailureText() bounds the complete text, escapes included, to 512 bytes", () => {
  const text = rpcFailureText("wait", 13, "\n".repeat(400));
  assert.equal(byteLength(text), 512);
  // The cut counts characters of the rendered text, so it may fall inside an escape sequence.
  assert.equal(
    text,
    `gRPC code-mode wait failed: code: 'Internal error', message: "${"\\n".repeat(400)}"`.slice(0, 509) +
      "...",
  );
});

Deno.test("timeoutText() renders the deadline sentence and bounds it", () => {
  assert.equal(
    timeoutText("execution starting event"),
    "gRPC code-mode host timed out waiting for execution starting event response",
  );
  const long = timeoutText("x".repeat(1000));
  assert.equal(byteLength(long), 512);
  assert.ok(long.endsWith("x..."));
});

Deno.test("RESET_MESSAGE is the SPEC §10.5 reset message on one line", () => {
  assert.equal(
    RESET_MESSAGE,
    "The exec runtime was replaced. Stored values and running cells were lost. " +
      "Prior external tool operations may have completed; inspect their results before retrying. " +
      "You may continue with a fresh exec call.",
  );
});

Deno.test("boundErrorText() returns a text of at most 512 bytes unchanged", () => {
  assert.equal(boundErrorText(""), "");
  assert.equal(boundErrorText("a".repeat(512)), "a".repeat(512));
  assert.equal(boundErrorText("é".repeat(256)), "é".repeat(256));
  assert.equal(boundErrorText("😀".repeat(128)), "😀".repeat(128));
});

Deno.test("boundErrorText() cuts ASCII text over 512 bytes to 509 bytes plus ...", () => {
  assert.equal(boundErrorText("a".repeat(513)), "a".repeat(509) + "...");
  assert.equal(boundErrorText("a".repeat(10_000)), "a".repeat(509) + "...");
});

Deno.test("boundErrorText() never cuts a multi-byte character at the 509-byte boundary", async (t) => {
  const cases: [string, string, string][] = [
    // [name, text, expected prefix]
    ["2-byte character across the cut", "a".repeat(508) + "é".repeat(10), "a".repeat(508)],
    ["2-byte character ending at the cut", "a".repeat(507) + "é".repeat(10), "a".repeat(507) + "é"],
    ["3-byte character across the cut", "a".repeat(507) + "漢".repeat(10), "a".repeat(507)],
    ["3-byte character ending at the cut", "a".repeat(506) + "漢".repeat(10), "a".repeat(506) + "漢"],
    ["surrogate pair across the cut", "a".repeat(506) + "😀".repeat(10), "a".repeat(506)],
    ["surrogate pair ending at the cut", "a".repeat(505) + "😀".repeat(10), "a".repeat(505) + "😀"],
    ["only 4-byte characters", "😀".repeat(200), "😀".repeat(127)],
  ];
  for (const [name, text, prefix] of cases) {
    await t.step(name, () => {
      const bounded = boundErrorText(text);
      assert.equal(bounded, prefix + "...");
      assert.ok(byteLength(bounded) <= 512);
      assert.ok(!/[\ud800-\udbff]$/.test(bounded.slice(0, -3)), "no dangling high surrogate");
    });
  }
});

Deno.test("boundErrorText() counts a lone surrogate as the 3 bytes of U+FFFD", () => {
  const text = "a".repeat(507) + "\ud800".repeat(2);
  assert.equal(boundErrorText(text), "a".repeat(507) + "...");
  assert.equal(boundErrorText("a".repeat(509) + "\udc00"), "a".repeat(509) + "\udc00");
});

Deno.test("boundErrorText() honours a custom bound and refuses one below 3 bytes", () => {
  assert.equal(boundErrorText("abcdef", 5), "ab...");
  assert.equal(boundErrorText("abcde", 5), "abcde");
  assert.equal(boundErrorText("abcd", 3), "...");
  assert.throws(() => boundErrorText("abcd", 2), RangeError);
  assert.throws(() => boundErrorText("abcd", 4.5), RangeError);
});

Deno.test("boundErrorText() never exceeds 512 UTF-8 bytes and is the identity or a whole-character prefix plus ...", () => {
  const char = fc.oneof(
    fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 1 }),
    fc.constantFrom("é", "漢", "😀", "\u{e0001}", "\ud800", "\udc00"),
    fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
  );
  const text = fc.array(char, { maxLength: 700 }).map((chars) => chars.join(""));
  fc.assert(
    fc.property(text, (input) => {
      const bounded = boundErrorText(input);
      assert.ok(byteLength(bounded) <= 512);
      if (byteLength(input) <= 512) {
        assert.equal(bounded, input);
        return;
      }
      assert.ok(bounded.endsWith("..."));
      const prefix = bounded.slice(0, -3);
      assert.ok(input.startsWith(prefix));
      assert.ok(byteLength(prefix) <= 509);
      // Whole characters: the cut is not inside a surrogate pair, and one more character would not fit.
      const next = input.codePointAt(prefix.length)!;
      assert.ok(!(next >= 0xdc00 && next <= 0xdfff && /[\ud800-\udbff]$/.test(prefix)));
      assert.ok(byteLength(prefix + String.fromCodePoint(next)) > 509);
    }),
    { numRuns: 500 },
  );
});

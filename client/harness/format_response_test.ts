import assert from "node:assert/strict";
import type { FunctionCallOutputContentItem } from "../types.ts";
import { formatRuntimeResponse, type FormattableRuntimeResponse } from "./format_response.ts";

const text = (value: string): FunctionCallOutputContentItem => ({ type: "input_text", text: value });
const image = (url: string, detail?: "low"): FunctionCallOutputContentItem =>
  detail === undefined
    ? { type: "input_image", image_url: url }
    : { type: "input_image", image_url: url, detail };
const result = (
  contentItems: FunctionCallOutputContentItem[],
  errorText?: string,
): FormattableRuntimeResponse =>
  errorText === undefined
    ? { type: "result", cellId: "1", contentItems }
    : { type: "result", cellId: "1", contentItems, errorText };
const header = (status: string, seconds: string) =>
  text(`${status}\nWall time ${seconds} seconds\nOutput:\n`);

Deno.test("scenario 149: Client mode: a result is `Script completed`; an error is `Script failed` with a trailing Script error item", () => {
  assert.deepEqual(
    formatRuntimeResponse(result([text("done")]), { outputTruncation: "client", wallTimeMs: 1234 }),
    {
      contentItems: [text("Script completed\nWall time 1.2 seconds\nOutput:\n"), text("done")],
      success: true,
    },
  );
  const failed = formatRuntimeResponse(result([text("done")], "boom"), {
    outputTruncation: "client",
    wallTimeMs: 1234,
  });
  assert.deepEqual(failed, {
    contentItems: [header("Script failed", "1.2"), text("done"), text("Script error:\nboom")],
    success: false,
  });
});

Deno.test("scenario 150: Client mode: a 100-byte text with a 5-token budget becomes one warned, middle-truncated item", () => {
  const body = "a".repeat(50) + "b".repeat(50);
  const formatted = formatRuntimeResponse(result([text(body)]), {
    outputTruncation: "client",
    maxOutputTokens: 5,
    wallTimeMs: 0,
  });
  assert.equal(formatted.contentItems.length, 2);
  const item = formatted.contentItems[1];
  assert.ok(item.type === "input_text");
  assert.ok(
    item.text.startsWith("Warning: truncated output (original token count: 25)\nTotal output lines: "),
  );
  assert.ok(item.text.includes("…20 tokens truncated…"));
  assert.equal(
    item.text,
    "Warning: truncated output (original token count: 25)\nTotal output lines: 1\n\n" +
      "aaaaaaaaaa…20 tokens truncated…bbbbbbbbbb",
  );
});

Deno.test("scenario 150b: Server mode: the items are used as received, a budget or not (the host applies it)", () => {
  const body = "x".repeat(100);
  const response = result([text(body)], "boom");
  for (const maxOutputTokens of [5, undefined]) {
    const formatted = formatRuntimeResponse(response, {
      outputTruncation: "server",
      wallTimeMs: 0,
      ...(maxOutputTokens === undefined ? {} : { maxOutputTokens }),
    });
    assert.deepEqual(formatted.contentItems, [header("Script failed", "0.0"), text(body)]);
    assert.equal(formatted.success, false);
  }
});

// What real Codex 0.171 gave the model with `code_mode_host_output_truncation` disabled (it truncates
// itself), for the same cells as the reference host's Server-mode battery.

const audio = (url: string): FunctionCallOutputContentItem => ({ type: "input_audio", audio_url: url });
const formatClient = (items: FunctionCallOutputContentItem[], maxOutputTokens: number) =>
  formatRuntimeResponse(result(items), { outputTruncation: "client", maxOutputTokens, wallTimeMs: 0 })
    .contentItems.slice(1);

Deno.test("Codex client-side: 50 text items over budget become one joined item", () => {
  const lines = Array.from({ length: 50 }, (_, i) => text(`line ${i}`));
  assert.deepEqual(formatClient(lines, 30), [
    text(
      "Warning: truncated output (original token count: 98)\nTotal output lines: 50\n\n" +
        "line 0\nline 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline…68 tokens truncated…" +
        "e 42\nline 43\nline 44\nline 45\nline 46\nline 47\nline 48\nline 49",
    ),
  ]);
});

Deno.test("Codex client-side: leading empty texts add no separator; later ones do", () => {
  const items = [text(""), text("a".repeat(100)), text(""), text("b".repeat(100)), text("")];
  assert.deepEqual(formatClient(items, 10), [
    text(
      "Warning: truncated output (original token count: 51)\nTotal output lines: 3\n\n" +
        "a".repeat(20) + "…41 tokens truncated…" + "b".repeat(19) + "\n",
    ),
  ]);
});

Deno.test("Codex client-side: an audio item costs the estimate of its URL and is counted when it does not fit", () => {
  const clip = audio("data:audio/wav;base64,AAAA"); // 26 bytes: 7 tokens
  assert.deepEqual(formatClient([text("aaaa"), clip, text("bbbb")], 5), [
    text("aaaa"),
    text("bbbb"),
    text("[omitted 1 audio items ...]"),
  ]);
  assert.deepEqual(formatClient([text("aaaa"), clip, text("bbbb")], 8), [
    text("aaaa"),
    clip,
    text("[omitted 1 text items ...]"),
  ]);
  assert.deepEqual(formatClient([text("x".repeat(200)), clip, text("y".repeat(200))], 10), [
    text("x".repeat(20) + "…40 tokens truncated…" + "x".repeat(20)),
    text("[omitted 1 text items ...]"),
    text("[omitted 1 audio items ...]"),
  ]);
  assert.deepEqual(
    formatClient(
      [clip, text("x".repeat(200)), image("data:image/png;base64,AAAA"), text("y".repeat(200))],
      10,
    ),
    [
      clip,
      text("xxxxxx…47 tokens truncated…xxxxxx"),
      { type: "input_image", image_url: "data:image/png;base64,AAAA", detail: "high" },
      text("[omitted 1 text items ...]"),
    ],
  );
});

Deno.test("the header names a yielded cell, a terminated cell, and shows the wall time with one decimal", () => {
  const options = { outputTruncation: "client", wallTimeMs: 10_050 } as const;
  assert.deepEqual(
    formatRuntimeResponse({ type: "yielded", cellId: "g2:7", contentItems: [] }, options),
    { contentItems: [header("Script running with cell ID g2:7", "10.1")], success: true },
  );
  assert.deepEqual(
    formatRuntimeResponse({ type: "terminated", cellId: "3", contentItems: [text("partial")] }, options),
    { contentItems: [header("Script terminated", "10.1"), text("partial")], success: true },
  );
  // An empty error text is still an error.
  assert.deepEqual(formatRuntimeResponse(result([], ""), options), {
    contentItems: [header("Script failed", "10.1"), text("Script error:\n")],
    success: false,
  });
});

Deno.test("images without detail get high; others keep theirs; the response is not modified", () => {
  const items = [image("data:image/png;base64,AA=="), image("data:image/png;base64,BB==", "low")];
  const response = result(items);
  const formatted = formatRuntimeResponse(response, { outputTruncation: "server", wallTimeMs: 1 });
  assert.deepEqual(formatted.contentItems.slice(1), [
    { type: "input_image", image_url: "data:image/png;base64,AA==", detail: "high" },
    { type: "input_image", image_url: "data:image/png;base64,BB==", detail: "low" },
  ]);
  assert.deepEqual(response.contentItems[0], {
    type: "input_image",
    image_url: "data:image/png;base64,AA==",
  });
});

Deno.test("Client mode all-text: within 4·T bytes (joined with newlines) everything is unchanged, empty items too", () => {
  // "abcd" + "\n" + "" + "\n" + "efg" = 10 bytes ≤ 4·3.
  const items = [text("abcd"), text(""), text("efg")];
  const formatted = formatRuntimeResponse(result(items), {
    outputTruncation: "client",
    maxOutputTokens: 3,
    wallTimeMs: 0,
  });
  assert.deepEqual(formatted.contentItems.slice(1), items);
  // One byte more is over the budget: the joined text is cut, lines counted over the joined text.
  const over = formatRuntimeResponse(result([text("abcd"), text(""), text("efgh")]), {
    outputTruncation: "client",
    maxOutputTokens: 2,
    wallTimeMs: 0,
  });
  assert.deepEqual(over.contentItems.slice(1), [
    text(
      "Warning: truncated output (original token count: 3)\nTotal output lines: 3\n\nabcd…1 tokens truncated…efgh",
    ),
  ]);
});

Deno.test("Client mode all-text: the default budget is 10000 tokens; T = 0 leaves the marker alone", () => {
  const fits = "y".repeat(40_000);
  assert.deepEqual(
    formatRuntimeResponse(result([text(fits)]), { outputTruncation: "client", wallTimeMs: 0 })
      .contentItems[1],
    text(fits),
  );
  const over = formatRuntimeResponse(result([text(fits + "y")]), {
    outputTruncation: "client",
    wallTimeMs: 0,
  });
  assert.ok((over.contentItems[1] as { text: string }).text.includes("…1 tokens truncated…"));
  assert.deepEqual(
    formatRuntimeResponse(result([text("hello\n")]), {
      outputTruncation: "client",
      maxOutputTokens: 0,
      wallTimeMs: 0,
    })
      .contentItems[1],
    text(
      "Warning: truncated output (original token count: 2)\nTotal output lines: 1\n\n…2 tokens truncated…",
    ),
  );
});

Deno.test("middle truncation never splits a character: the prefix and suffix keep whole characters within budget", () => {
  // 🦀 is 4 UTF-8 bytes; budget 2 tokens = 8 bytes, 4 each side: "é" (2) + "é" (2) | "🦀" (4).
  const formatted = formatRuntimeResponse(result([text("éé🦀🦀🦀🦀")]), {
    outputTruncation: "client",
    maxOutputTokens: 2,
    wallTimeMs: 0,
  });
  assert.deepEqual(
    formatted.contentItems[1],
    text(
      "Warning: truncated output (original token count: 5)\nTotal output lines: 1\n\néé…3 tokens truncated…🦀",
    ),
  );
});

Deno.test("Client mode mixed items: images kept, texts charged in order, the first misfit cut, the rest omitted and counted", () => {
  const items = [
    text("a".repeat(8)), // 2 tokens: kept, 3 left
    image("data:image/png;base64,AA=="),
    text(""), // skipped
    text("b".repeat(40)), // 10 tokens: cut to 3 tokens (12 bytes)
    image("data:image/png;base64,BB==", "low"),
    text("c"), // omitted
    text("d"), // omitted
  ];
  const formatted = formatRuntimeResponse(result(items, "bad"), {
    outputTruncation: "client",
    maxOutputTokens: 5,
    wallTimeMs: 0,
  });
  assert.deepEqual(formatted.contentItems.slice(1), [
    text("a".repeat(8)),
    { type: "input_image", image_url: "data:image/png;base64,AA==", detail: "high" },
    text("bbbbbb…7 tokens truncated…bbbbbb"),
    { type: "input_image", image_url: "data:image/png;base64,BB==", detail: "low" },
    text("[omitted 3 text items ...]"), // c, d and the Script error item
  ]);
  assert.equal(formatted.success, false);
});

Deno.test("Client mode mixed items within budget keep every non-empty text and drop empty ones", () => {
  const items = [image("data:image/png;base64,AA==", "low"), text("hi"), text(""), text("there")];
  const formatted = formatRuntimeResponse(result(items), { outputTruncation: "client", wallTimeMs: 0 });
  assert.deepEqual(formatted.contentItems.slice(1), [items[0], text("hi"), text("there")]);
});

Deno.test("bad options are RangeErrors", () => {
  for (const wallTimeMs of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(
      () => formatRuntimeResponse(result([]), { outputTruncation: "client", wallTimeMs }),
      RangeError,
    );
  }
  for (const maxOutputTokens of [-1, 1.5, 2 ** 53]) {
    // Checked in both modes, although Server mode does not use it.
    assert.throws(
      () => formatRuntimeResponse(result([]), { outputTruncation: "server", maxOutputTokens, wallTimeMs: 0 }),
      RangeError,
    );
  }
});

import assert from "node:assert/strict";
import fc from "fast-check";
import type { NoticeCounts, OutputItem } from "./output_collector.ts";
import { createOutputCollector, mergeEntries, noticeText, type RenderedEntry } from "./output_collector.ts";
import { lineCount, middleTruncate, truncateEntries } from "./token_truncation.ts";
import { utf8Prefix } from "../../proto/bytes.ts";

// Every expected output below marked "reference X" is what the reference host (Codex 0.171's
// codex-code-mode-host, Server mode) returned for the cell battery probe X (see the report of issue 25).

const frag = (text: string, owner: number): RenderedEntry => ({ kind: "text", text, owner });
const anchor = (item: OutputItem): RenderedEntry => ({ kind: "anchor", item });
const counts = (bytes: number, segments = 0, images = 0, audio = 0): NoticeCounts => ({
  bytes,
  segments,
  images,
  audio,
});
const notice = (c: NoticeCounts): RenderedEntry => ({ kind: "notice", counts: c });
const text = (t: string): OutputItem => ({ type: "text", text: t });
const image = (url: string): OutputItem => ({ type: "image", imageUrl: url, detail: "auto" });
const audio = (url: string): OutputItem => ({ type: "audio", audioUrl: url });
const header = (tokens: number, lines: number) =>
  `Warning: truncated output (original token count: ${tokens})\nTotal output lines: ${lines}\n\n`;
const marker = (k: number) => `…${k} tokens truncated…`;
const bytes = (s: string) => new TextEncoder().encode(s).length;
const noticeItem = (c: NoticeCounts) => text(noticeText(c));

/** One fragment per item, as a window of `text()` calls renders. */
function calls(...texts: string[]): RenderedEntry[] {
  return texts.map((t, i) => frag(t, i));
}

/** Asserts deep equality and that every anchor of `expected` is the very same object in `actual`. */
function assertItems(actual: OutputItem[], expected: OutputItem[], anchors: OutputItem[] = []): void {
  assert.deepEqual(actual, expected);
  for (const a of anchors) assert.equal(actual[expected.indexOf(a)], a);
}

// ---- windows of text: one joined text -------------------------------------------------------

Deno.test("reference many-texts: a truncated window of 50 text() calls is one joined item", () => {
  const lines = Array.from({ length: 50 }, (_, i) => `line ${i}`);
  assert.deepEqual(truncateEntries(calls(...lines), 30), [
    text(
      header(98, 50) + "line 0\nline 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline" + marker(68) +
        "e 42\nline 43\nline 44\nline 45\nline 46\nline 47\nline 48\nline 49",
    ),
  ]);
});

Deno.test("reference fits, exact-40: a window that fits keeps one item per call; the separators count", () => {
  const fits = calls("a", "Script error:\nError: boom\n    at exec_main.mjs:1:18");
  assert.deepEqual(truncateEntries(fits, 30), mergeEntries(fits));
  assert.deepEqual(truncateEntries(calls("a".repeat(19), "b".repeat(20)), 10), [
    text("a".repeat(19)),
    text("b".repeat(20)),
  ]);
  assert.deepEqual(truncateEntries(calls("a".repeat(40)), 10), [text("a".repeat(40))]);
});

Deno.test("reference exact-41, single-41: one byte over the budget truncates", () => {
  assert.deepEqual(truncateEntries(calls("a".repeat(20), "b".repeat(20)), 10), [
    text(header(11, 2) + "a".repeat(20) + marker(1) + "b".repeat(20)),
  ]);
  assert.deepEqual(truncateEntries(calls("a".repeat(41)), 10), [
    text(header(11, 1) + "a".repeat(20) + marker(1) + "a".repeat(20)),
  ]);
});

Deno.test("reference err-trunc: the Script error item is one more text of the joined window", () => {
  const out = truncateEntries(
    calls("x".repeat(200), "Script error:\nError: boom\n    at exec_main.mjs:1:30"),
    10,
  );
  assert.deepEqual(out, [text(header(63, 4) + "x".repeat(20) + marker(53) + "t exec_main.mjs:1:30")]);
});

Deno.test("reference empty-texts, lines-empty-mid: an empty text adds a separator unless nothing came before", () => {
  assert.deepEqual(truncateEntries(calls("", "a".repeat(100), "", "b".repeat(100), ""), 10), [
    text(header(51, 3) + "a".repeat(20) + marker(41) + "b".repeat(19) + "\n"),
  ]);
  assert.deepEqual(truncateEntries(calls("a".repeat(50), "", "", "b".repeat(50)), 5), [
    text(header(26, 4) + "a".repeat(10) + marker(21) + "b".repeat(10)),
  ]);
  // A window of empty texts only is never over budget, even at T = 0.
  const empties = calls("", "", "");
  assert.deepEqual(truncateEntries(empties, 0), [text(""), text(""), text("")]);
});

Deno.test("reference lines, lines-trailing, lines-crlf: lines are Rust's str::lines of the joined text", () => {
  assert.deepEqual(truncateEntries(calls("a\nb\n", "c".repeat(100)), 5), [
    text(header(27, 4) + "a\nb\n\nccccc" + marker(22) + "c".repeat(10)),
  ]);
  assert.deepEqual(truncateEntries(calls("c".repeat(100), "d\n"), 5), [
    text(header(26, 2) + "c".repeat(10) + marker(21) + "ccccccc\nd\n"),
  ]);
  assert.deepEqual(truncateEntries(calls("a\r\nb\r\n", "c".repeat(100)), 5), [
    text(header(27, 4) + "a\r\nb\r\n\nccc" + marker(22) + "c".repeat(10)),
  ]);
  assert.equal(lineCount("a\n\nb"), 3);
  assert.equal(lineCount("\n"), 1);
  assert.equal(lineCount("a\r\nb"), 2);
});

Deno.test("reference zero, zero-empty: T = 0 leaves the header and the marker; an empty window stays empty", () => {
  assert.deepEqual(truncateEntries(calls("abc", "def"), 0), [text(header(2, 2) + marker(2))]);
  assert.deepEqual(truncateEntries([], 0), []);
});

Deno.test("reference multibyte, multibyte-odd: lengths are UTF-8 bytes and cuts keep whole characters", () => {
  assert.deepEqual(truncateEntries(calls("é".repeat(100), "😀".repeat(50)), 10), [
    text(header(101, 2) + "é".repeat(10) + marker(91) + "😀".repeat(5)),
  ]);
  assert.deepEqual(truncateEntries(calls("a" + "😀".repeat(50)), 3), [
    text(header(51, 1) + "a😀" + marker(48) + "😀"),
  ]);
});

Deno.test("reference huge: a budget far over the window changes nothing", () => {
  const lines = calls(...Array.from({ length: 1000 }, (_, i) => `line ${i}`), "end");
  assert.deepEqual(truncateEntries(lines, 1_000_000_000_000), mergeEntries(lines));
  assert.deepEqual(truncateEntries(lines, 2 ** 50), mergeEntries(lines));
});

// ---- notices in a window of text ----------------------------------------------------------------

Deno.test("reference spec88 (SPEC §8.8): head, notice, tail of one item with T = 5 give exactly three items", () => {
  const head = "Script error:\nbegin:" + "X".repeat(524_268);
  const tail = "X".repeat(524_284) + ":end";
  const c = counts(67_108_888);
  assert.deepEqual(truncateEntries([frag(head, 7), notice(c), frag(tail, 7)], 5), [
    text(header(262_144, 2) + "Script err" + marker(262_139)),
    noticeItem(c),
    text("XXXXXX:end"),
  ]);
});

Deno.test("reference notice-trunc: the notice stands where it was; the texts around it stay joined", () => {
  const c = counts(151_427, 1);
  const entries = [frag("x".repeat(524_288), 0), notice(c), frag("y".repeat(524_285), 1), frag("end", 2)];
  assert.deepEqual(truncateEntries(entries, 50), [
    text(header(262_145, 3) + "x".repeat(100) + marker(262_095)),
    noticeItem(c),
    text("y".repeat(96) + "\nend"),
  ]);
});

Deno.test("reference R1: the two parts of one item around a notice join without a separator", () => {
  const c = counts(51_424);
  const entries = [frag("x".repeat(524_288), 0), notice(c), frag("x".repeat(524_288), 0)];
  assert.deepEqual(truncateEntries(entries, 262_144), mergeEntries(entries));
  assert.deepEqual(truncateEntries(entries, 262_143), [
    text(header(262_144, 1) + "x".repeat(524_286) + marker(1)),
    noticeItem(c),
    text("x".repeat(524_286)),
  ]);
});

/** The window of reference P6 (x*600000 then ten y*60000) and R2 (with an empty text after x). */
function p6(empty: boolean): { entries: RenderedEntry[]; notices: NoticeCounts[] } {
  const notices = empty ? [counts(75_712, 1), counts(75_712, 1)] : [counts(151_424, 2)];
  const entries: RenderedEntry[] = [frag("x".repeat(524_288), 0), notice(notices[0])];
  let owner = 1;
  if (empty) entries.push(frag("", owner++), notice(notices[1]));
  entries.push(frag("y".repeat(empty ? 44_288 : 44_288), owner++));
  for (let i = 0; i < 8; i++) entries.push(frag("y".repeat(60_000), owner++));
  return { entries, notices };
}

Deno.test("reference P6, P6b: a notice follows the separator of the text after it", () => {
  const { entries, notices } = p6(false);
  const rest = ("\n" + "y".repeat(60_000)).repeat(8);
  assert.deepEqual(truncateEntries(entries, 262_145), [
    text(header(262_147, 10) + "x".repeat(524_288) + "\n"),
    noticeItem(notices[0]),
    text("y" + marker(2) + "y".repeat(44_282) + rest),
  ]);
  assert.deepEqual(truncateEntries(entries, 262_144), [
    text(header(262_147, 10) + "x".repeat(524_288) + marker(3)),
    noticeItem(notices[0]),
    text("y".repeat(44_280) + rest),
  ]);
});

Deno.test("reference R2, R3: a notice exactly at the cut comes before the marker; a kept separator keeps notices apart", () => {
  const { entries, notices } = p6(true);
  const rest = ("\n" + "y".repeat(60_000)).repeat(8);
  assert.deepEqual(truncateEntries(entries, 262_145), [
    text(header(262_147, 11) + "x".repeat(524_288) + "\n"),
    noticeItem(notices[0]),
    text("\n"),
    noticeItem(notices[1]),
    text(marker(2) + "y".repeat(44_282) + rest),
  ]);
  assert.deepEqual(truncateEntries(entries, 262_146), [
    text(header(262_147, 11) + "x".repeat(524_288) + "\n"),
    noticeItem(notices[0]),
    text("\n"),
    noticeItem(notices[1]),
    text("yy" + marker(1) + "y".repeat(44_284) + rest),
  ]);
});

Deno.test("reference Q6b-t10, Q14: notices with nothing kept between them become one", () => {
  const first = counts(75_712, 1);
  const second = counts(75_712);
  const entries = [
    frag("x".repeat(524_288), 0),
    notice(first),
    frag("", 1),
    notice(second),
    frag("y".repeat(524_288), 2),
  ];
  assert.deepEqual(truncateEntries(entries, 10), [
    text(header(262_145, 3) + "x".repeat(20) + marker(262_135)),
    noticeItem(counts(151_424, 1)),
    text("y".repeat(20)),
  ]);
});

// ---- windows with media: item by item ----------------------------------------------------------

Deno.test("reference img-mid, img-first, img-last: media keep every image, cut the first text over budget, count the rest", () => {
  const img = image("data:image/png;base64,AAAA");
  const x = "x".repeat(200);
  const y = "y".repeat(200);
  const cutX = "x".repeat(20) + marker(40) + "x".repeat(20);
  assertItems(truncateEntries([frag(x, 0), anchor(img), frag(y, 1)], 10), [
    text(cutX),
    img,
    text("[omitted 1 text items ...]"),
  ], [img]);
  assertItems(truncateEntries([anchor(img), frag(x, 0), frag(y, 1)], 10), [
    img,
    text(cutX),
    text("[omitted 1 text items ...]"),
  ], [img]);
  assertItems(truncateEntries([frag(x, 0), frag(y, 1), anchor(img)], 10), [
    text(cutX),
    img,
    text("[omitted 1 text items ...]"),
  ], [img]);
});

Deno.test("reference img-small-texts, img-text-cost-ceil: each text costs ceil(bytes / 4) of the budget", () => {
  const img = image("data:image/png;base64,AAAA");
  const entries = [
    frag("aaaa", 0),
    frag("bbbb", 1),
    anchor(img),
    frag("cccc", 2),
    frag("d".repeat(100), 3),
    frag("e", 4),
    frag("f", 5),
  ];
  assert.deepEqual(truncateEntries(entries, 5), [
    text("aaaa"),
    text("bbbb"),
    img,
    text("cccc"),
    text("dddd" + marker(23) + "dddd"),
    text("[omitted 2 text items ...]"),
  ]);
  assert.deepEqual(truncateEntries([anchor(img), frag("a", 0), frag("b", 1), frag("c", 2)], 2), [
    img,
    text("a"),
    text("b"),
    text("[omitted 1 text items ...]"),
  ]);
});

Deno.test("reference img-fits, img-text-exact, img-text-over1: media windows that fit stay as they are", () => {
  const img = image("data:image/png;base64,AAAA");
  assert.deepEqual(truncateEntries([frag("aaaa", 0), anchor(img), frag("cccc", 1)], 5), [
    text("aaaa"),
    img,
    text("cccc"),
  ]);
  assert.deepEqual(truncateEntries([anchor(img), frag("a".repeat(20), 0), frag("b".repeat(20), 1)], 10), [
    img,
    text("a".repeat(20)),
    text("b".repeat(20)),
  ]);
  assert.deepEqual(truncateEntries([anchor(img), frag("a".repeat(20), 0), frag("b".repeat(21), 1)], 10), [
    img,
    text("a".repeat(20)),
    text("b".repeat(10) + marker(1) + "b".repeat(10)),
  ]);
});

Deno.test("reference empty-texts-img, empty-img-fit: with media, empty texts are left out and never counted", () => {
  const img = image("data:image/png;base64,AAAA");
  const entries = [
    frag("", 0),
    anchor(img),
    frag("a".repeat(100), 1),
    frag("", 2),
    frag("b".repeat(100), 3),
    frag("", 4),
  ];
  assert.deepEqual(truncateEntries(entries, 10), [
    img,
    text("a".repeat(20) + marker(15) + "a".repeat(20)),
    text("[omitted 1 text items ...]"),
  ]);
  assert.deepEqual(truncateEntries([frag("", 0), anchor(img), frag("a", 1), frag("", 2)], 10), [
    img,
    text("a"),
  ]);
});

Deno.test("reference zero-img, zero-img-only, img-only-over: T = 0 keeps images and counts every text", () => {
  const img = image("data:image/png;base64,AAAA");
  assert.deepEqual(truncateEntries([frag("abc", 0), anchor(img), frag("def", 1)], 0), [
    img,
    text("[omitted 2 text items ...]"),
  ]);
  assert.deepEqual(truncateEntries([anchor(img)], 0), [img]);
  const large = image("data:image/png;base64," + "A".repeat(400));
  assert.deepEqual(truncateEntries([anchor(large)], 5), [large]);
});

Deno.test("reference img-multibyte-trunc: a text cut to the remaining budget keeps whole characters", () => {
  const img = image("data:image/png;base64,AAAA");
  assert.deepEqual(truncateEntries([anchor(img), frag("a" + "😀".repeat(50), 0)], 3), [
    img,
    text("a😀" + marker(48) + "😀"),
  ]);
});

Deno.test("reference audio-partial, audio-exact, audio-exact9: an audio item costs ceil(URL bytes / 4) when it fits", () => {
  const clip = audio("data:audio/wav;base64,AAAA"); // 26 bytes: 7 tokens
  const entries = [frag("aaaa", 0), anchor(clip), frag("bbbb", 1)];
  assert.deepEqual(truncateEntries(entries, 5), [
    text("aaaa"),
    text("bbbb"),
    text("[omitted 1 audio items ...]"),
  ]);
  assertItems(truncateEntries(entries, 8), [text("aaaa"), clip, text("[omitted 1 text items ...]")], [clip]);
  assertItems(truncateEntries(entries, 9), [text("aaaa"), clip, text("bbbb")], [clip]);
});

Deno.test("reference audio-29-t8, audio-29-t7, audio-28-t7, audio-zero: the audio estimate rounds up", () => {
  const a29 = audio("data:audio/wav;base64,AAAAAAA");
  const a28 = audio("data:audio/wav;base64,AAAAAA");
  assert.deepEqual(truncateEntries([anchor(a29)], 8), [a29]);
  assert.deepEqual(truncateEntries([anchor(a29)], 7), [text("[omitted 1 audio items ...]")]);
  assert.deepEqual(truncateEntries([anchor(a28)], 7), [a28]);
  assert.deepEqual(truncateEntries([anchor(audio("data:audio/wav;base64,AAAA"))], 0), [
    text("[omitted 1 audio items ...]"),
  ]);
});

Deno.test("reference audio-mid, audio-two, audio-fits-text-only-exceeds, audio-img: text notes come before audio notes", () => {
  const clip = audio("data:audio/wav;base64,AAAA");
  const clip2 = audio("data:audio/wav;base64,BBBB");
  const img = image("data:image/png;base64,AAAA");
  assert.deepEqual(truncateEntries([frag("x".repeat(200), 0), anchor(clip), frag("y".repeat(200), 1)], 10), [
    text("x".repeat(20) + marker(40) + "x".repeat(20)),
    text("[omitted 1 text items ...]"),
    text("[omitted 1 audio items ...]"),
  ]);
  assert.deepEqual(truncateEntries([anchor(clip), anchor(clip2), frag("cc", 0)], 10), [
    clip,
    text("cc"),
    text("[omitted 1 audio items ...]"),
  ]);
  assert.deepEqual(truncateEntries([anchor(clip), frag("x".repeat(10), 0)], 8), [
    clip,
    text("xx" + marker(2) + "xx"),
  ]);
  assert.deepEqual(
    truncateEntries([anchor(clip), frag("x".repeat(200), 0), anchor(img), frag("y".repeat(200), 1)], 10),
    [clip, text("xxxxxx" + marker(47) + "xxxxxx"), img, text("[omitted 1 text items ...]")],
  );
});

Deno.test("an audio item kept as its size is always omitted and counted, and costs nothing", () => {
  const dropped: RenderedEntry = { kind: "droppedAudio", bytes: 20_000_000 };
  assert.deepEqual(truncateEntries([frag("a", 0), dropped, frag("b", 1)], 2 ** 50), [
    text("a"),
    text("b"),
    text("[omitted 1 audio items ...]"),
  ]);
  // It makes the window one of media: no header, item by item.
  assert.deepEqual(truncateEntries([frag("x".repeat(100), 0), dropped], 5), [
    text("x".repeat(10) + marker(20) + "x".repeat(10)),
    text("[omitted 1 audio items ...]"),
  ]);
});

Deno.test("reference notice-small-*, notice-first, notice-empty-text: a notice counting images makes a window of media, kept at no cost", () => {
  const c = counts(0, 0, 1);
  const entries = [frag("a".repeat(10), 0), notice(c), frag("b".repeat(10), 1)];
  assert.deepEqual(truncateEntries(entries, 10), [text("a".repeat(10)), noticeItem(c), text("b".repeat(10))]);
  assert.deepEqual(truncateEntries(entries, 3), [
    text("a".repeat(10)),
    noticeItem(c),
    text("[omitted 1 text items ...]"),
  ]);
  assert.deepEqual(truncateEntries(entries, 5), [
    text("a".repeat(10)),
    noticeItem(c),
    text("bbbb" + marker(1) + "bbbb"),
  ]);
  assert.deepEqual(truncateEntries([notice(c), frag("b".repeat(100), 0)], 10), [
    noticeItem(c),
    text("b".repeat(20) + marker(15) + "b".repeat(20)),
  ]);
  assert.deepEqual(truncateEntries([frag("", 0), notice(c), frag("", 1), frag("b".repeat(100), 2)], 10), [
    noticeItem(c),
    text("b".repeat(20) + marker(15) + "b".repeat(20)),
  ]);
  assert.deepEqual(truncateEntries([frag("abc", 0), notice(c), frag("def", 1)], 0), [
    noticeItem(c),
    text("[omitted 2 text items ...]"),
  ]);
});

Deno.test("reference Q2-t3, Q2-t0, Q2-t5: notices left with nothing between them become one", () => {
  const c = counts(0, 0, 1);
  const entries = [
    frag("a".repeat(10), 0),
    notice(c),
    frag("b".repeat(10), 1),
    notice(c),
    frag("c".repeat(10), 2),
  ];
  assert.deepEqual(truncateEntries(entries, 5), [
    text("a".repeat(10)),
    noticeItem(c),
    text("bbbb" + marker(1) + "bbbb"),
    noticeItem(c),
    text("[omitted 1 text items ...]"),
  ]);
  assert.deepEqual(truncateEntries(entries, 3), [
    text("a".repeat(10)),
    noticeItem(counts(0, 0, 2)),
    text("[omitted 2 text items ...]"),
  ]);
  assert.deepEqual(truncateEntries(entries, 0), [
    noticeItem(counts(0, 0, 2)),
    text("[omitted 3 text items ...]"),
  ]);
});

Deno.test("reference notice-trunc-img, Q13: with media, notices of evicted text are kept too, at no cost", () => {
  const img = image("data:image/png;base64,AAAA");
  const n1 = counts(75_712, 1);
  const n2 = counts(75_715);
  const entries = [
    frag("x".repeat(524_288), 0),
    notice(n1),
    anchor(img),
    notice(n2),
    frag("y".repeat(524_285), 1),
    frag("end", 2),
  ];
  assert.deepEqual(truncateEntries(entries, 50), [
    text("x".repeat(100) + marker(131_022) + "x".repeat(100)),
    noticeItem(n1),
    img,
    noticeItem(n2),
    text("[omitted 2 text items ...]"),
  ]);
});

// ---- the collector and the truncation together ----------------------------------------------

Deno.test("reference notice-trunc end to end: the collector's window truncated to 50 tokens", () => {
  const out = createOutputCollector("server");
  out.push(text("x".repeat(600_000)));
  out.push(text("y".repeat(600_000)));
  out.push(text("end"));
  assert.deepEqual(truncateEntries(out.entries(), 50), [
    text(header(262_145, 3) + "x".repeat(100) + marker(262_095)),
    noticeItem(counts(151_427, 1)),
    text("y".repeat(96) + "\nend"),
  ]);
});

Deno.test("reference flood: 200,000 text() calls keep 32,767 lines around one notice", () => {
  const out = createOutputCollector("server");
  for (let i = 0; i < 200_000; i++) out.push(text(`line ${i}`));
  const items = truncateEntries(out.entries(), 10_000);
  assert.equal(items.length, 3);
  assert.ok((items[0] as { text: string }).text.startsWith(header(91_428, 32_767) + "line 0\nline 1\n"));
  assert.ok((items[0] as { text: string }).text.endsWith(marker(81_428)));
  assert.deepEqual(items[1], noticeItem(counts(1_755_947, 167_233)));
  assert.ok((items[2] as { text: string }).text.startsWith("e 198333\nline 198334\n"));
  assert.ok((items[2] as { text: string }).text.endsWith("\nline 199999"));
});

Deno.test("middleTruncate and truncateEntries reject nothing valid and refuse a bad budget", () => {
  assert.equal(middleTruncate("abc", 1), "abc");
  assert.equal(middleTruncate("", 0), "");
  assert.throws(() => truncateEntries([], -1), RangeError);
  assert.throws(() => truncateEntries([], 1.5), RangeError);
  assert.throws(() => truncateEntries([], Number.NaN), RangeError);
});

Deno.test("truncateEntries() handles several MiB of text in 100,000 fragments", () => {
  const entries: RenderedEntry[] = [];
  for (let i = 0; i < 100_000; i++) entries.push(frag("é".repeat(20) + "\n", i >> 1));
  entries.push(frag("ω".repeat(2 * 1024 * 1024), 100_000));
  const out = truncateEntries(entries, 10_000);
  // 100,000 × 41 bytes + 50,000 separators (one before each new owner) + 4 MiB.
  const length = 100_000 * 41 + 50_000 + 4 * 1024 * 1024;
  assert.equal(out.length, 1);
  const joined = (out[0] as { text: string }).text;
  const head = header(Math.ceil(length / 4), 150_001);
  assert.ok(joined.startsWith(head));
  // The prefix is the whole characters of the first 20,000 bytes of the joined text.
  let whole = "";
  for (let i = 0; i < 500; i++) whole += (i % 2 === 0 && i > 0 ? "\n" : "") + "é".repeat(20) + "\n";
  const prefix = whole.slice(0, utf8Prefix(whole, 20_000).units);
  assert.equal(joined, head + prefix + marker(Math.ceil((length - 40_000) / 4)) + "ω".repeat(10_000));
  assert.deepEqual(truncateEntries(entries, Math.ceil(length / 4)), mergeEntries(entries));
});

// ---------------------------------------------------------------------------------------------
// Properties: the implementation against character-by-character models of both paths

const char = fc.oneof(
  fc.constantFrom("a", "X", "\n", "é", "中", "🦀", "…"),
  fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
);
type Spec =
  | { text: string; owner: number }
  | { notice: number; images: number }
  | { media: "image" | "audio" | "dropped"; size: number };
const textSpec = fc.record({ text: fc.string({ unit: char, maxLength: 24 }), owner: fc.nat({ max: 3 }) });
const noticeSpec = fc.record({ notice: fc.nat({ max: 9 }), images: fc.constant(0) });
const textWindow: fc.Arbitrary<Spec[]> = fc.array(
  fc.oneof({ weight: 4, arbitrary: textSpec }, { weight: 1, arbitrary: noticeSpec }),
  { maxLength: 10 },
);
const mediaWindow: fc.Arbitrary<Spec[]> = fc.array(
  fc.oneof(
    { weight: 4, arbitrary: textSpec },
    { weight: 1, arbitrary: fc.record({ notice: fc.nat({ max: 9 }), images: fc.nat({ max: 2 }) }) },
    {
      weight: 2,
      arbitrary: fc.record({
        media: fc.constantFrom<"image" | "audio" | "dropped">("image", "audio", "dropped"),
        size: fc.nat({ max: 40 }),
      }),
    },
  ),
  { maxLength: 10 },
).filter((specs) => specs.some((s) => "media" in s || ("notice" in s && s.images > 0)));

function build(specs: Spec[]): RenderedEntry[] {
  return specs.map((s, i): RenderedEntry => {
    if ("text" in s) return frag(s.text, s.owner);
    if ("notice" in s) return notice(counts(s.notice, 0, s.images));
    if (s.media === "dropped") return { kind: "droppedAudio", bytes: s.size };
    const url = `data:${i}:` + "u".repeat(s.size);
    return anchor(s.media === "image" ? image(url) : audio(url));
  });
}

/** Builds items; adjacent notices merge. */
class Items {
  items: (OutputItem | NoticeCounts)[] = [];
  #text: string | undefined;
  text(s: string) {
    this.#text = (this.#text ?? "") + s;
  }
  item(item: OutputItem | NoticeCounts) {
    this.#close();
    const last = this.items.at(-1);
    if ("segments" in item && last && "segments" in last) {
      this.items[this.items.length - 1] = counts(
        last.bytes + item.bytes,
        last.segments + item.segments,
        last.images + item.images,
        last.audio + item.audio,
      );
    } else {
      this.items.push(item);
    }
  }
  #close() {
    if (this.#text) this.items.push(text(this.#text));
    this.#text = undefined;
  }
  done(): OutputItem[] {
    this.#close();
    return this.items.map((i) => "segments" in i ? noticeItem(i) : i);
  }
}

/** The joined path, one character at a time: notices sit at character positions of the joined text. */
function joinedModel(entries: RenderedEntry[], t: number): OutputItem[] {
  const chars: string[] = [];
  const noticesAt: NoticeCounts[][] = [[]];
  let pending: NoticeCounts[] = [];
  let previous: number | undefined;
  for (const e of entries) {
    if (e.kind === "notice") {
      pending.push(e.counts);
      continue;
    }
    if (e.kind !== "text") throw new Error("a window of text only");
    if (chars.length > 0 && previous !== e.owner) {
      chars.push("\n");
      noticesAt.push([]);
    }
    noticesAt[chars.length].push(...pending);
    pending = [];
    for (const ch of e.text) {
      chars.push(ch);
      noticesAt.push([]);
    }
    previous = e.owner;
  }
  noticesAt[chars.length].push(...pending);
  const joined = chars.join("");
  const length = bytes(joined);
  const budget = 4 * t;
  if (length <= budget) return mergeEntries(entries);
  const left = Math.floor(budget / 2);
  const rightStart = length - (budget - left);
  let offset = 0;
  let cut = chars.length;
  let resume = chars.length;
  chars.forEach((ch, i) => {
    if (cut === chars.length && offset + bytes(ch) > left) cut = i;
    if (resume === chars.length && offset >= rightStart) resume = i;
    offset += bytes(ch);
  });
  const out = new Items();
  out.text(header(Math.ceil(length / 4), joined.split("\n").length - (joined.endsWith("\n") ? 1 : 0)));
  for (let i = 0; i <= chars.length; i++) {
    for (const c of noticesAt[i]) out.item(c);
    if (i === cut) out.text(marker(Math.ceil((length - budget) / 4)));
    if (i < chars.length && (i < cut || i >= resume)) out.text(chars[i]);
  }
  return out.done();
}

/** The item-by-item path (Codex's truncate_function_output_items_with_policy). */
function itemsModel(entries: RenderedEntry[], t: number): OutputItem[] {
  const out = new Items();
  let remaining = t;
  let omittedText = 0;
  let omittedAudio = 0;
  const merged: (OutputItem | NoticeCounts | "dropped")[] = [];
  let last: { owner: number; index: number } | undefined;
  for (const e of entries) {
    if (e.kind === "text") {
      if (last && last.owner === e.owner && last.index === merged.length - 1) {
        merged[last.index] = text((merged[last.index] as { text: string }).text + e.text);
      } else {
        merged.push(text(e.text));
        last = { owner: e.owner, index: merged.length - 1 };
      }
      continue;
    }
    last = undefined;
    merged.push(e.kind === "notice" ? e.counts : e.kind === "anchor" ? e.item : "dropped");
  }
  for (const item of merged) {
    if (item === "dropped") {
      omittedAudio++;
    } else if ("segments" in item || item.type === "image") {
      out.item(item);
    } else if (item.type === "audio") {
      const cost = Math.ceil(bytes(item.audioUrl) / 4);
      if (cost <= remaining) {
        out.item(item);
        remaining -= cost;
      } else {
        omittedAudio++;
      }
    } else if (item.text === "") {
      continue;
    } else if (remaining === 0) {
      omittedText++;
    } else if (Math.ceil(bytes(item.text) / 4) <= remaining) {
      out.item(item);
      remaining -= Math.ceil(bytes(item.text) / 4);
    } else {
      out.item(text(middleTruncate(item.text, remaining)));
      remaining = 0;
    }
  }
  if (omittedText > 0) out.item(text(`[omitted ${omittedText} text items ...]`));
  if (omittedAudio > 0) out.item(text(`[omitted ${omittedAudio} audio items ...]`));
  return out.done();
}

Deno.test("property: a window of text and notices equals the character-by-character model", () => {
  fc.assert(
    fc.property(textWindow, fc.nat({ max: 60 }), (specs, t) => {
      const entries = build(specs);
      const out = truncateEntries(entries, t);
      assert.deepEqual(out, joinedModel(entries, t));
      for (const item of out) assert.ok(item.type !== "text" || item.text.isWellFormed());
    }),
    { numRuns: 3000 },
  );
});

Deno.test("property: a window with media equals the item-by-item model, media the same objects", () => {
  fc.assert(
    fc.property(mediaWindow, fc.nat({ max: 60 }), (specs, t) => {
      const entries = build(specs);
      const out = truncateEntries(entries, t);
      assert.deepEqual(out, itemsModel(entries, t));
      const media = entries.flatMap((e) => e.kind === "anchor" ? [e.item] : []);
      for (const item of out) if (item.type !== "text") assert.ok(media.includes(item));
    }),
    { numRuns: 3000 },
  );
});

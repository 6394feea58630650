import assert from "node:assert/strict";
import fc from "fast-check";
import type { OutputItem } from "./output_collector.ts";
import { mergeEntries, type RenderedEntry } from "./output_collector.ts";
import { truncateEntries } from "./token_truncation.ts";

const frag = (text: string, owner: number): RenderedEntry => ({ kind: "text", text, owner });
const anchor = (item: OutputItem): RenderedEntry => ({ kind: "anchor", item });
const text = (t: string): OutputItem => ({ type: "text", text: t });
const image = (url: string): OutputItem => ({ type: "image", imageUrl: url, detail: "auto" });
const audio = (url: string): OutputItem => ({ type: "audio", audioUrl: url });
const header = (tokens: number, lines: number) =>
  `Warning: truncated output (original token count: ${tokens})\nTotal output lines: ${lines}\n\n`;
const marker = (k: number) => `…${k} tokens truncated…`;
const bytes = (s: string) => new TextEncoder().encode(s).length;

/** Asserts deep equality and that every anchor of `expected` is the very same object in `actual`. */
function assertItems(actual: OutputItem[], expected: OutputItem[], anchors: OutputItem[] = []): void {
  assert.deepEqual(actual, expected);
  for (const a of anchors) assert.equal(actual[expected.indexOf(a)], a);
}

Deno.test("§8.8 worked example: head fragment, notice, tail fragment of one owner with T = 5 give exactly three items", () => {
  const head = "Script error:\nbegin:" + "X".repeat(524_268);
  const tail = "X".repeat(524_284) + ":end";
  assert.equal(bytes(head), 524_288);
  assert.equal(bytes(tail), 524_288);
  const notice = text(
    "[Code Mode session output limit reached: omitted 67108888 text bytes; discarded 0 text segments, 0 images, 0 audio items]",
  );
  const out = truncateEntries([frag(head, 7), anchor(notice), frag(tail, 7)], 5);
  assertItems(out, [
    text(
      "Warning: truncated output (original token count: 262144)\nTotal output lines: 2\n\nScript err…262139 tokens truncated…",
    ),
    notice,
    text("XXXXXX:end"),
  ], [notice]);
});

Deno.test("mergeEntries() merges adjacent fragments of one owner and keeps anchors as the same objects", () => {
  const img = image("data:1");
  const out = mergeEntries([
    frag("a", 1),
    frag("b", 1),
    anchor(img),
    frag("c", 1),
    frag("d", 2),
    frag("e", 1),
  ]);
  assertItems(out, [text("ab"), img, text("c"), text("d"), text("e")], [img]);
});

Deno.test("mergeEntries() keeps an empty text item, as Client mode does (SPEC §5.3)", () => {
  assert.deepEqual(mergeEntries([frag("", 1)]), [text("")]);
  assert.deepEqual(mergeEntries([frag("a", 1), frag("", 2), frag("b", 1)]), [text("a"), text(""), text("b")]);
  const img = image("data:1");
  assert.deepEqual(mergeEntries([frag("", 1), anchor(img), frag("", 2)]), [text(""), img, text("")]);
});

Deno.test("truncateEntries() returns the rendered entries unchanged when len(L) ≤ 4T, merging included", () => {
  const img = image("data:1");
  const entries = [frag("ab", 1), frag("cd", 1), anchor(img), frag("ef", 1), frag("", 3), frag("g", 2)];
  // L = "abcdef\ng": 8 bytes, exactly the budget of T = 2.
  const out = truncateEntries(entries, 2);
  assertItems(out, [text("abcd"), img, text("ef"), text(""), text("g")], [img]);
  assert.deepEqual(out, mergeEntries(entries));
  assert.deepEqual(truncateEntries([], 0), []);
  assert.deepEqual(truncateEntries([anchor(img), frag("", 1)], 0), [img, text("")]);
});

Deno.test("a single text item over budget becomes header + prefix + marker + suffix (Codex middle truncation)", () => {
  const t = "0123456789".repeat(10); // 100 bytes, 1 line
  assert.deepEqual(truncateEntries([frag(t, 1)], 5), [
    text(header(25, 1) + "0123456789" + marker(20) + "0123456789"),
  ]);
  // Several fragments of one owner with nothing between them behave the same.
  assert.deepEqual(
    truncateEntries([frag(t.slice(0, 7), 1), frag(t.slice(7, 95), 1), frag(t.slice(95), 1)], 5),
    [
      text(header(25, 1) + "0123456789" + marker(20) + "0123456789"),
    ],
  );
});

Deno.test("separators between owners count in len(L) and lines but are never emitted", () => {
  // L = "aaaa\nbbbb" (9 bytes); the first removed byte is the separator.
  assert.deepEqual(truncateEntries([frag("aaaa", 1), frag("bbbb", 2)], 2), [
    text(header(3, 2) + "aaaa" + marker(1)),
    text("bbbb"),
  ]);
  // L = "aaaaaaaa\nbb" (11 bytes); the suffix "a\nbb" holds the separator: only 3 bytes are emitted.
  assert.deepEqual(truncateEntries([frag("aaaaaaaa", 1), frag("bb", 2)], 2), [
    text(header(3, 2) + "aaaa" + marker(1) + "a"),
    text("bb"),
  ]);
  // The separator alone makes L exceed the budget: "abcd" + "efgh" fits 8 bytes, "abcd\nefgh" does not.
  assert.deepEqual(truncateEntries([frag("abcd", 1), frag("efgh", 1)], 2), [text("abcdefgh")]);
  assert.deepEqual(truncateEntries([frag("abcd", 1), frag("efgh", 2)], 2), [
    text(header(3, 2) + "abcd" + marker(1)),
    text("efgh"),
  ]);
});

Deno.test("anchors in the removed middle come after the marker and before the suffix", () => {
  const img1 = image("data:1");
  const snd = audio("data:2");
  const entries = [
    frag("a".repeat(20), 1),
    anchor(img1),
    frag("b".repeat(20), 2),
    anchor(snd),
    frag("c".repeat(20), 3),
  ];
  // L = 62 bytes, T = 2: prefix "aaaa", suffix "cccc".
  assertItems(truncateEntries(entries, 2), [
    text(header(16, 3) + "aaaa" + marker(14)),
    img1,
    snd,
    text("cccc"),
  ], [img1, snd]);
});

Deno.test("an anchor in the kept prefix region stays before the marker", () => {
  const img = image("data:1");
  // L = "abcdefghijkl" (12 bytes, one owner), T = 2: prefix "abcd", suffix "ijkl"; the image sits at byte 2.
  assertItems(truncateEntries([frag("ab", 1), anchor(img), frag("cdefghijkl", 1)], 2), [
    text(header(3, 1) + "ab"),
    img,
    text("cd" + marker(1) + "ijkl"),
  ], [img]);
});

Deno.test("an anchor exactly at the first removed byte comes before the marker, which is then its own piece", () => {
  const img = image("data:1");
  // Same owner: the image sits between "abcd" and "efghijkl"; the cut is at byte 4.
  assertItems(truncateEntries([frag("abcd", 1), anchor(img), frag("efghijkl", 1)], 2), [
    text(header(3, 1) + "abcd"),
    img,
    text(marker(1) + "ijkl"),
  ], [img]);
  // Different owners: the image precedes the separator, which is the first removed byte.
  assertItems(truncateEntries([frag("abcd", 1), anchor(img), frag("efghijk", 2)], 2), [
    text(header(3, 2) + "abcd"),
    img,
    text(marker(1) + "hijk"),
  ], [img]);
});

Deno.test("the marker is its own piece after a leading anchor, and the header never changes an anchor", () => {
  const img = image("data:1");
  assertItems(truncateEntries([anchor(img), frag("abcdefghijkl", 1)], 0), [
    img,
    text(header(3, 1) + marker(3)),
  ], [
    img,
  ]);
  const notice = text("[notice]");
  const out = truncateEntries([anchor(notice), frag("abcdefghijkl", 1)], 1);
  assertItems(out, [notice, text(header(3, 1) + "ab" + marker(2) + "kl")], [notice]);
  assert.equal(notice.type === "text" && notice.text, "[notice]");
});

Deno.test("a marker own piece joins the suffix of the owner of the first removed byte, but not another owner's", () => {
  // The first character (4 bytes) does not fit left = 2: the prefix is empty.
  assert.deepEqual(truncateEntries([frag("🦀abcdefgh", 1)], 1), [text(header(3, 1) + marker(2) + "gh")]);
  // The suffix belongs to owner 2 while the marker sits in owner 1's fragment.
  assert.deepEqual(truncateEntries([frag("🦀abcdef", 1), frag("gh", 2)], 1), [
    text(header(4, 2) + marker(3)),
    text("gh"),
  ]);
});

Deno.test("multi-byte characters are never split at either cut and lengths count UTF-8 bytes", () => {
  // 1 + 2 + 3 + 4 + 20 + 4 + 3 + 2 + 1 = 40 bytes; left = right = 4.
  const t = "aé中🦀" + "x".repeat(20) + "🦀中éa";
  assert.equal(bytes(t), 40);
  assert.deepEqual(truncateEntries([frag(t, 1)], 2), [text(header(10, 1) + "aé" + marker(8) + "éa")]);
  // Exactly fitting characters are kept: "é🦀" is 6 bytes = left, "中🦀" is 7 > right, "🦀" fits.
  const u = "é🦀" + "y".repeat(10) + "中🦀";
  assert.deepEqual(truncateEntries([frag(u, 1)], 3), [text(header(6, 1) + "é🦀" + marker(3) + "🦀")]);
  // Only 4-byte characters with a 2-byte half budget: nothing is kept.
  assert.deepEqual(truncateEntries([frag("🦀🦀🦀🦀", 1)], 1), [text(header(4, 1) + marker(3))]);
  // A CJK fragment after a separator: the suffix cut falls inside "中" and keeps only whole ones.
  assert.deepEqual(truncateEntries([frag("abcdefgh", 1), frag("中中中", 2)], 2), [
    text(header(5, 2) + "abcd" + marker(3)),
    text("中"),
  ]);
  // Unicode under budget: 🦀 (4) + é (2) + 中 (3) = 9 bytes fits T = 3 (12 bytes).
  assert.deepEqual(truncateEntries([frag("🦀é中", 1)], 3), [text("🦀é中")]);
});

Deno.test("T = 0 keeps no text: the header and the marker alone, anchors in order", () => {
  assert.deepEqual(truncateEntries([frag("hello", 1)], 0), [text(header(2, 1) + marker(2))]);
  const img = image("data:1");
  assertItems(truncateEntries([frag("ab", 1), anchor(img), frag("cd", 2)], 0), [
    text(header(2, 2) + marker(2)),
    img,
  ], [img]);
});

Deno.test("lines count the lines of L: a trailing newline does not start a new line", () => {
  const long = "z".repeat(40);
  assert.match(itemText(truncateEntries([frag("a\n" + long + "\n", 1)], 1)[0]), /Total output lines: 2\n/);
  assert.match(itemText(truncateEntries([frag("a\n" + long, 1)], 1)[0]), /Total output lines: 2\n/);
  assert.match(itemText(truncateEntries([frag("x\n", 1), frag(long, 2)], 1)[0]), /Total output lines: 3\n/);
  assert.match(
    itemText(truncateEntries([frag("\n\n\n" + long, 1), frag("\n", 2)], 1)[0]),
    /Total output lines: 5\n/,
  );
});

Deno.test("truncateEntries() rejects a budget that is not a non-negative integer with RangeError", () => {
  for (const t of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(() => truncateEntries([frag("a", 1)], t), RangeError);
  }
});

Deno.test("truncateEntries() handles several MiB of text in 100,000 fragments", () => {
  const entries: RenderedEntry[] = [];
  for (let i = 0; i < 100_000; i++) entries.push(frag("é".repeat(20) + "\n", i >> 1));
  entries.push(frag("ω".repeat(2 * 1024 * 1024), 100_000));
  const out = truncateEntries(entries, 10_000);
  // 100,000 × 41 bytes + 50,000 separators (one before each new owner) + 4 MiB.
  const length = 100_000 * 41 + 50_000 + 4 * 1024 * 1024;
  assert.ok(itemText(out[0]).startsWith(header(Math.ceil(length / 4), 150_001)));
  assert.ok(itemText(out.at(-2)!).endsWith(marker(Math.ceil((length - 40_000) / 4))));
  assert.equal(itemText(out.at(-1)!), "ω".repeat(10_000));
  // The prefix keeps 20,000 bytes: 240 whole owners (82 bytes after a separator each but the first),
  // then the separator and 79 bytes of owner 240, cut to 41 + 38 bytes of whole characters.
  assert.equal(out.length, 242);
  assert.equal(itemText(out[1]), ("é".repeat(20) + "\n").repeat(2));
  assert.equal(
    itemText(out.at(-2)!),
    "é".repeat(20) + "\n" + "é".repeat(19) + marker(Math.ceil((length - 40_000) / 4)),
  );
  assert.deepEqual(truncateEntries(entries, Math.ceil(length / 4)), mergeEntries(entries));
});

function itemText(item: OutputItem): string {
  assert.equal(item.type, "text");
  return (item as { text: string }).text;
}

// ---------------------------------------------------------------------------------------------
// Properties

const char = fc.oneof(
  fc.constantFrom("a", "X", "\n", "é", "中", "🦀", "…"),
  fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
);
type Spec = { text: string; owner: number } | { anchor: "image" | "audio" | "notice" };
const entrySpec: fc.Arbitrary<Spec> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({ text: fc.string({ unit: char, maxLength: 24 }), owner: fc.nat({ max: 3 }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      anchor: fc.constantFrom<"image" | "audio" | "notice">("image", "audio", "notice"),
    }),
  },
);

/** Fresh entries, every anchor a distinct object. */
function build(specs: Spec[]): { entries: RenderedEntry[]; anchors: OutputItem[] } {
  const anchors: OutputItem[] = [];
  const entries = specs.map((s, i): RenderedEntry => {
    if ("text" in s) return frag(s.text, s.owner);
    const item = s.anchor === "image"
      ? image(`data:${i}`)
      : s.anchor === "audio"
      ? audio(`data:${i}`)
      : text(`[notice ${i}]`);
    anchors.push(item);
    return anchor(item);
  });
  return { entries, anchors };
}

/** L, built naively. */
function logical(entries: RenderedEntry[]): string {
  let l = "";
  let previous: number | undefined;
  for (const e of entries) {
    if (e.kind !== "text" || e.text === "") continue;
    if (previous !== undefined && previous !== e.owner) l += "\n";
    l += e.text;
    previous = e.owner;
  }
  return l;
}

const HEADER = /^Warning: truncated output \(original token count: (\d+)\)\nTotal output lines: (\d+)\n\n/;
const MARKER = /…(\d+) tokens truncated…/g;

Deno.test("property: no broken surrogate, one marker iff over budget, anchors once in order, kept text ≤ 4T", () => {
  fc.assert(
    fc.property(fc.array(entrySpec, { maxLength: 10 }), fc.nat({ max: 60 }), (specs, t) => {
      const { entries, anchors } = build(specs);
      const l = logical(entries);
      const out = truncateEntries(entries, t);
      assert.deepEqual(out.filter((item) => anchors.includes(item)), anchors);
      const texts = out.filter((item) => !anchors.includes(item)).map(itemText);
      for (const s of texts) assert.ok(s.isWellFormed(), JSON.stringify(s));
      const all = texts.join("");
      if (bytes(l) <= 4 * t) {
        assert.equal(all.match(MARKER), null);
        assert.deepEqual(out, mergeEntries(entries));
        return;
      }
      assert.equal(all.match(MARKER)?.length, 1);
      const match = HEADER.exec(texts[0]);
      assert.ok(match);
      assert.equal(Number(match[1]), Math.ceil(bytes(l) / 4));
      const lines = l.split("\n");
      assert.equal(Number(match[2]), lines.length - (l.endsWith("\n") ? 1 : 0));
      const kept = all.slice(match[0].length).replace(MARKER, "");
      assert.ok(bytes(kept) <= 4 * t);
      assert.ok(texts.every((s) => s.length > 0));
    }),
    { numRuns: 2000 },
  );
});

/**
 * §8.7 done character by character on an explicit L: a second, deliberately naive implementation.
 */
function model(entries: RenderedEntry[], t: number): OutputItem[] {
  type Cell = { ch: string; bytes: number; owner: number; separator: boolean };
  const cells: Cell[] = [];
  const anchorsAt: OutputItem[][] = [[]];
  let previous: number | undefined;
  for (const e of entries) {
    if (e.kind === "anchor") {
      anchorsAt[cells.length].push(e.item);
      continue;
    }
    if (e.text === "") continue;
    const add = (cell: Cell) => {
      cells.push(cell);
      anchorsAt.push([]);
    };
    if (previous !== undefined && previous !== e.owner) {
      add({ ch: "\n", bytes: 1, owner: e.owner, separator: true });
    }
    for (const ch of e.text) add({ ch, bytes: bytes(ch), owner: e.owner, separator: false });
    previous = e.owner;
  }
  const length = cells.reduce((n, c) => n + c.bytes, 0);
  const budget = 4 * t;
  if (length <= budget) return mergeEntries(entries);
  const left = Math.floor(budget / 2);
  const rightStart = length - (budget - left);
  let offset = 0;
  let cut = -1;
  let resume = cells.length;
  cells.forEach((c, i) => {
    if (cut < 0 && offset + c.bytes > left) cut = i;
    if (resume === cells.length && offset >= rightStart) resume = i;
    offset += c.bytes;
  });
  const l = cells.map((c) => c.ch).join("");
  const lines = l.split("\n").length - (l.endsWith("\n") ? 1 : 0);
  let head: string | undefined = header(Math.ceil(length / 4), lines);
  const items: OutputItem[] = [];
  let open: { parts: string[]; owner: number } | undefined;
  const close = () => {
    if (open) items.push(text(open.parts.join("")));
    open = undefined;
  };
  const piece = (s: string, owner: number, glue: boolean) => {
    if (!(open && (glue || open.owner === owner))) {
      close();
      open = { parts: head === undefined ? [] : [head], owner };
      head = undefined;
    }
    open.parts.push(s);
  };
  for (let i = 0; i <= cells.length; i++) {
    for (const item of anchorsAt[i]) {
      close();
      items.push(item);
    }
    if (i === cells.length) break;
    const c = cells[i];
    if (i === cut) piece(marker(Math.ceil((length - budget) / 4)), c.owner, true);
    if (!c.separator && (i < cut || i >= resume)) piece(c.ch, c.owner, false);
  }
  close();
  return items;
}

Deno.test("property: truncateEntries() equals a character-by-character model of §8.7", () => {
  fc.assert(
    fc.property(fc.array(entrySpec, { maxLength: 10 }), fc.nat({ max: 60 }), (specs, t) => {
      const { entries } = build(specs);
      assert.deepEqual(truncateEntries(entries, t), model(entries, t));
    }),
    { numRuns: 3000 },
  );
});

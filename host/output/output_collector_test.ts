import assert from "node:assert/strict";
import fc from "fast-check";
import {
  contentItemEncodedBytes,
  contentJsonOf,
  createOutputCollector,
  diagnosticErrorText,
  type OutputCollector,
  type OutputItem,
  type PushedItem,
  sameRendering,
  SERVER_IMAGE_BYTES,
  SERVER_MAX_ITEMS,
} from "./output_collector.ts";
import { MAX_TEXT_BYTES, utf8ByteLength, utf8Prefix, utf8Suffix } from "../../proto/bytes.ts";

const text = (t: string): OutputItem => ({ type: "text", text: t });
const image = (url: string): OutputItem => ({ type: "image", imageUrl: url, detail: "auto" });
const audio = (url: string): OutputItem => ({ type: "audio", audioUrl: url });
const notice = (bytes: number, segments: number, images: number, audios: number) =>
  `[Code Mode session output limit reached: omitted ${bytes} text bytes; discarded ${segments} text segments, ${images} images, ${audios} audio items]`;

function texts(out: OutputCollector): (string | OutputItem)[] {
  return out.render().map((i) => i.type === "text" ? i.text : i);
}

function small(maxTextBytes = 8, maxImageBytes = 10, maxItems = 32_768, maxAudioBytes = 10): OutputCollector {
  return createOutputCollector("server", { maxTextBytes, maxImageBytes, maxItems, maxAudioBytes });
}

/** Pushes `n` copies of a text. */
function pushMany(out: OutputCollector, n: number, t: string): void {
  for (let i = 0; i < n; i++) out.push(text(t));
}

/** The rendering with runs of equal texts as `[text, count]` (full-scale windows hold 32,768 items). */
function runs(out: OutputCollector): (string | OutputItem | [string, number])[] {
  const result: (string | OutputItem | [string, number])[] = [];
  for (const item of texts(out)) {
    const last = result[result.length - 1];
    if (typeof item === "string" && Array.isArray(last) && last[0] === item) last[1]++;
    else if (typeof item === "string" && last === item) result[result.length - 1] = [item, 2];
    else result.push(item);
  }
  return result;
}

Deno.test("utf8ByteLength counts 1–4 bytes per character and 3 for a lone surrogate", () => {
  assert.equal(utf8ByteLength(""), 0);
  assert.equal(utf8ByteLength("a"), 1);
  assert.equal(utf8ByteLength("é"), 2);
  assert.equal(utf8ByteLength("€"), 3);
  assert.equal(utf8ByteLength("🦀"), 4);
  assert.equal(utf8ByteLength("\ud800"), 3);
  assert.equal(utf8ByteLength("aé€🦀"), new TextEncoder().encode("aé€🦀").length);
});

Deno.test("utf8Prefix and utf8Suffix keep the largest whole-character part within the budget", () => {
  assert.deepEqual(utf8Prefix("é🦀x", 5), { units: 1, bytes: 2 });
  assert.deepEqual(utf8Prefix("é🦀x", 6), { units: 3, bytes: 6 });
  assert.deepEqual(utf8Suffix("é🦀x", 4), { units: 1, bytes: 1 });
  assert.deepEqual(utf8Suffix("é🦀x", 5), { units: 3, bytes: 5 });
  assert.deepEqual(utf8Suffix("abc", 0), { units: 0, bytes: 0 });
});

Deno.test("the Client collector returns every item as produced, however large", () => {
  const out = createOutputCollector("client");
  const big = "x".repeat(2 * 1024 * 1024);
  const img = image("data:1");
  out.push(text(big));
  out.push(img);
  out.push(text(""));
  const rendered = out.render();
  assert.equal(rendered.length, 3);
  assert.equal(rendered[0].type === "text" && rendered[0].text, big);
  assert.equal(rendered[1], img);
  assert.deepEqual(rendered[2], text(""));
});

Deno.test("Server: text that fits the head is kept whole and renders without a notice", () => {
  const out = small();
  out.push(text("ab"));
  out.push(text("cd"));
  assert.deepEqual(texts(out), ["ab", "cd"]);
});

Deno.test("Server: a split item with nothing omitted renders merged as one item", () => {
  const out = small(); // head 4, max 8
  out.push(text("abc"));
  out.push(text("defg")); // "d" to the head, "efg" to the tail, no eviction
  assert.deepEqual(texts(out), ["abc", "defg"]);
});

Deno.test("Server: the tail keeps the last bytes; the tail part of a split item evicted whole is a segment", () => {
  const out = small(); // head 4 → tail budget 4
  out.push(text("abcdef")); // head "abcd", tail "ef"
  out.push(text("ghij")); // tail "efghij" → "ef" goes whole
  assert.deepEqual(texts(out), ["abcd", notice(2, 1, 0, 0), "ghij"]);
  out.push(text("k")); // one more byte from the front of "ghij"
  assert.deepEqual(texts(out), ["abcd", notice(3, 1, 0, 0), "hij", "k"]);
});

Deno.test("Server (reference notice-trunc): x*600000, y*600000, end keep 524,288 head and tail bytes and one notice", () => {
  const out = createOutputCollector("server");
  out.push(text("x".repeat(600_000)));
  out.push(text("y".repeat(600_000)));
  out.push(text("end"));
  assert.deepEqual(runs(out), [
    "x".repeat(524_288),
    notice(151_427, 1, 0, 0),
    "y".repeat(524_285),
    "end",
  ]);
});

Deno.test("Server (reference P4): an item that fits the head exactly leaves the next one whole in the tail", () => {
  const out = createOutputCollector("server");
  out.push(text("x".repeat(524_288)));
  out.push(text("y".repeat(600_000)));
  assert.deepEqual(texts(out), ["x".repeat(524_288), notice(75_712, 0, 0, 0), "y".repeat(524_288)]);
});

Deno.test("Server (reference P7): media split the evicted text into one notice per run, each at its place", () => {
  const out = createOutputCollector("server");
  const a = image("data:image/png;base64,AAAA");
  const b = image("data:image/png;base64,BBBB");
  out.push(text("x".repeat(600_000)));
  out.push(a);
  out.push(text("y".repeat(100)));
  out.push(b);
  out.push(text("z".repeat(600_000)));
  const rendered = texts(out);
  assert.deepEqual(rendered, [
    "x".repeat(524_288),
    notice(75_712, 1, 0, 0),
    a,
    notice(100, 1, 0, 0),
    b,
    notice(75_712, 0, 0, 0),
    "z".repeat(524_288),
  ]);
  assert.equal(rendered[2], a);
  assert.equal(rendered[4], b);
});

Deno.test("Server (reference Q6b): an empty text is never evicted for bytes and ends an omission run", () => {
  const out = createOutputCollector("server");
  out.push(text("x".repeat(600_000)));
  out.push(text(""));
  out.push(text("y".repeat(600_000)));
  assert.deepEqual(texts(out), [
    "x".repeat(524_288),
    notice(75_712, 1, 0, 0),
    "",
    notice(75_712, 0, 0, 0),
    "y".repeat(524_288),
  ]);
});

Deno.test("Server: media in the tail are never evicted for bytes, the text around them is", () => {
  const out = small(8, 100);
  const img = image("img");
  out.push(text("abcde")); // head "abcd", tail "e"
  out.push(img); // tail [e, img]
  out.push(text("123")); // tail [e, img, 123] = 4 bytes
  out.push(text("45")); // 6 bytes → "e" goes whole (a segment), then "1"
  assert.deepEqual(texts(out), ["abcd", notice(1, 1, 0, 0), img, notice(1, 0, 0, 0), "23", "45"]);
});

Deno.test("Server: text evicted from several items in a row is one notice counting each item gone whole", () => {
  const out = small(); // head 4, tail budget 4
  out.push(text("abcdef"));
  out.push(text("1"));
  out.push(text("2"));
  out.push(text("3456")); // evicts "ef", "1", "2"
  assert.deepEqual(texts(out), ["abcd", notice(4, 3, 0, 0), "3456"]);
  out.push(text("7")); // evicts "3"; "456" keeps bytes
  assert.deepEqual(texts(out), ["abcd", notice(5, 3, 0, 0), "456", "7"]);
});

Deno.test("Server (reference img-8388608/8388609, img-2x8000000): images share an 8 MiB budget", () => {
  assert.equal(SERVER_IMAGE_BYTES, 8_388_608);
  const exact = createOutputCollector("server");
  const fits = image("i".repeat(8_388_608));
  exact.push(fits);
  exact.push(text("z"));
  assert.deepEqual(texts(exact), [fits, "z"]);
  const over = createOutputCollector("server");
  over.push(image("i".repeat(8_388_609)));
  over.push(text("z"));
  assert.deepEqual(texts(over), [notice(0, 0, 1, 0), "z"]);
  const two = createOutputCollector("server");
  const first = image("i".repeat(8_000_000));
  two.push(first);
  two.push(image("j".repeat(8_000_000)));
  two.push(text("z"));
  assert.deepEqual(texts(two), [first, notice(0, 0, 1, 0), "z"]);
});

Deno.test("Server (reference Q2, Q10): a discarded image leaves its notice where it was pushed; adjacent ones join", () => {
  const out = small(100, 3);
  out.push(text("a"));
  out.push(image("toolarge"));
  out.push(text("b"));
  out.push(image("toolarge"));
  out.push(image("toolarge"));
  out.push(text("c"));
  assert.deepEqual(texts(out), ["a", notice(0, 0, 1, 0), "b", notice(0, 0, 2, 0), "c"]);
});

Deno.test("Server (reference P3, Q4): a discarded image does not freeze the head", () => {
  const out = small(8, 3); // head 4
  out.push(text("a"));
  out.push(image("toolarge"));
  out.push(text("xxxxxxxxxxx")); // "xxx" to the head, the rest to the tail, which keeps 4
  assert.deepEqual(texts(out), ["a", notice(0, 0, 1, 0), "xxx", notice(4, 0, 0, 0), "xxxx"]);
  const full = createOutputCollector("server");
  full.push(text("a".repeat(10)));
  full.push(image("i".repeat(8_388_609)));
  full.push(text("x".repeat(1_100_000)));
  assert.deepEqual(texts(full), [
    "a".repeat(10),
    notice(0, 0, 1, 0),
    "x".repeat(524_278),
    notice(51_434, 0, 0, 0),
    "x".repeat(524_288),
  ]);
});

Deno.test("Server (reference P1, P8): a discard next to evicted text joins its notice; one elsewhere stays apart", () => {
  const big = image("i".repeat(8_388_609));
  const small1 = image("data:image/png;base64,AAAA");
  const p1 = createOutputCollector("server");
  p1.push(text("x".repeat(600_000)));
  p1.push(small1);
  p1.push(big);
  p1.push(text("y".repeat(600_000)));
  assert.deepEqual(texts(p1), [
    "x".repeat(524_288),
    notice(75_712, 1, 0, 0),
    small1,
    notice(75_712, 0, 1, 0),
    "y".repeat(524_288),
  ]);
  const p8 = createOutputCollector("server");
  p8.push(text("x".repeat(1_200_000)));
  p8.push(small1);
  p8.push(big);
  p8.push(text("y".repeat(10)));
  assert.deepEqual(texts(p8), [
    "x".repeat(524_288),
    notice(151_434, 0, 0, 0),
    "x".repeat(524_278),
    small1,
    notice(0, 0, 1, 0),
    "y".repeat(10),
  ]);
});

Deno.test("Server (reference Q11): audio is not bounded by the image budget; past its own it is kept as its size", () => {
  const out = small(100, 3, 32_768, 10);
  const a = audio("0123456789");
  out.push(a);
  out.push(audio("x"));
  out.push({ type: "droppedMedia", kind: "audio", bytes: 99 });
  out.push(text("z"));
  assert.deepEqual(out.entries(), [
    { kind: "anchor", item: a },
    { kind: "droppedAudio", bytes: 1 },
    { kind: "droppedAudio", bytes: 99 },
    { kind: "text", text: "z", owner: 0 },
  ]);
  // Rendered without a token budget, an audio kept as its size shows nothing and no notice.
  assert.deepEqual(texts(out), [a, "z"]);
  const full = createOutputCollector("server");
  const clip = audio("data:audio/wav;base64," + "A".repeat(12_000_000));
  full.push(clip);
  full.push(clip);
  assert.deepEqual(full.render(), [clip, clip]);
});

Deno.test("Server (reference C5, C6, C7): a window keeps at most 32,768 items, the notice counting as one", () => {
  assert.equal(SERVER_MAX_ITEMS, 32_768);
  const exact = createOutputCollector("server");
  pushMany(exact, 32_768, "a");
  assert.deepEqual(runs(exact), [["a", 32_768]]);
  const over = createOutputCollector("server");
  pushMany(over, 32_769, "a");
  assert.deepEqual(runs(over), [["a", 16_384], notice(2, 2, 0, 0), ["a", 16_383]]);
  pushMany(over, 1, "a");
  assert.deepEqual(runs(over), [["a", 16_384], notice(3, 3, 0, 0), ["a", 16_383]]);
});

Deno.test("Server (reference C1, C9): the head holds 16,384 items; empty texts are evicted as items", () => {
  const out = createOutputCollector("server");
  pushMany(out, 16_384, "a");
  pushMany(out, 20_000, "b");
  assert.deepEqual(runs(out), [["a", 16_384], notice(3_617, 3_617, 0, 0), ["b", 16_383]]);
  const empty = createOutputCollector("server");
  pushMany(empty, 36_384, "");
  assert.deepEqual(runs(empty), [["", 16_384], notice(0, 3_617, 0, 0), ["", 16_383]]);
});

Deno.test("Server (reference C2, C3): a split item is one item in the head, its tail part is not evicted as an item", () => {
  const c2 = createOutputCollector("server");
  pushMany(c2, 10, "a");
  c2.push(text("x".repeat(600_000)));
  pushMany(c2, 40_000, "b");
  assert.deepEqual(runs(c2), [["a", 10], "x".repeat(600_000), notice(7_244, 7_244, 0, 0), ["b", 32_756]]);
  const c3 = createOutputCollector("server");
  pushMany(c3, 16_383, "a");
  c3.push(text("x".repeat(600_000)));
  pushMany(c3, 20_000, "b");
  assert.deepEqual(runs(c3), [["a", 16_383], "x".repeat(600_000), notice(3_617, 3_617, 0, 0), ["b", 16_383]]);
});

Deno.test("Server (reference C8, C12, flood-img-big): evicting items takes images and whole texts, all in one notice", () => {
  const c8 = createOutputCollector("server");
  pushMany(c8, 16_384, "a");
  c8.push(image("i".repeat(8_388_609)));
  pushMany(c8, 16_384, "b");
  assert.deepEqual(runs(c8), [["a", 16_384], notice(1, 1, 1, 0), ["b", 16_383]]);
  const c12 = createOutputCollector("server");
  c12.push(text("x".repeat(600_000)));
  c12.push(image("data:image/png;base64,AAAA"));
  c12.push(text("y".repeat(100)));
  c12.push(image("data:image/png;base64,BBBB"));
  c12.push(text("z".repeat(600_000)));
  pushMany(c12, 40_000, "b");
  assert.deepEqual(runs(c12), ["x".repeat(524_288), notice(683_046, 7_237, 2, 0), ["b", 32_766]]);
  const flood = createOutputCollector("server");
  const img = image("data:image/png;base64,AAAA");
  for (let i = 0; i < 100_000; i++) {
    flood.push(text("a".repeat(20)));
    if (i % 10_000 === 0) flood.push(img);
  }
  const a20 = "a".repeat(20);
  assert.deepEqual(runs(flood), [
    a20,
    img,
    [a20, 10_000],
    img,
    [a20, 6_381],
    notice(1_344_720, 67_236, 7, 0),
    [a20, 6_383],
    img,
    [a20, 9_999],
  ]);
});

Deno.test("Server: evicting an audio item for the item limit counts it as a discarded audio item", () => {
  const out = small(100, 10, 4); // head 2 items, at most 4 with the notice
  out.push(text("a"));
  out.push(text("b"));
  out.push(audio("c"));
  out.push({ type: "droppedMedia", kind: "audio", bytes: 9 });
  out.push(text("d"));
  assert.deepEqual(out.entries(), [
    { kind: "text", text: "a", owner: 0 },
    { kind: "text", text: "b", owner: 1 },
    { kind: "notice", counts: { bytes: 0, segments: 0, images: 0, audio: 2 } },
    { kind: "text", text: "d", owner: 2 },
  ]);
});

Deno.test("Server: the notice text is exact", () => {
  const out = small(8, 1);
  out.push(text("0123456789abcdef"));
  out.push(image("xx"));
  out.push(text("Z"));
  const rendered = texts(out);
  assert.deepEqual(rendered, ["0123", notice(9, 0, 0, 0), "def", notice(0, 0, 1, 0), "Z"]);
  assert.equal(
    notice(9, 0, 0, 0),
    "[Code Mode session output limit reached: omitted 9 text bytes; discarded 0 text segments, 0 images, 0 audio items]",
  );
});

Deno.test("Server: adjacent head items of different owners stay separate items", () => {
  const out = small(100);
  out.push(text("a"));
  out.push(text("b"));
  assert.deepEqual(texts(out), ["a", "b"]);
});

Deno.test("Server UTF-8: the head split never cuts a multi-byte character", () => {
  const out = small(8); // head 4
  out.push(text("ab🦀c")); // 🦀 does not fit in the 2 remaining head bytes
  assert.deepEqual(texts(out), ["ab🦀c"]); // nothing omitted: head "ab", tail "🦀c", merged
  out.push(text("🦀")); // tail budget 6: tail "🦀c🦀" = 9 → keep the largest suffix ≤ 6 → "c🦀"
  assert.deepEqual(texts(out), ["ab", notice(4, 0, 0, 0), "c", "🦀"]);
  for (const t of texts(out)) assert.ok(typeof t !== "string" || t.isWellFormed());
});

Deno.test("Server UTF-8: tail eviction removes whole characters, keeping the largest suffix that fits", () => {
  const out = small(10); // head 5, tail budget 5
  out.push(text("12345"));
  out.push(text("éééé")); // 8 bytes → keep ≤ 5 → "éé" (4)
  assert.deepEqual(texts(out), ["12345", notice(4, 0, 0, 0), "éé"]);
  out.push(text("x")); // tail "ééx" = 5, fits
  assert.deepEqual(texts(out), ["12345", notice(4, 0, 0, 0), "éé", "x"]);
  out.push(text("€")); // 8 bytes → remove 3 from "éé" → whole characters: both é (4 bytes)
  assert.deepEqual(texts(out), ["12345", notice(8, 1, 0, 0), "x", "€"]);
});

Deno.test("Server UTF-8: random multi-byte pushes keep head as a prefix and tail as a suffix of whole characters", () => {
  const chars = fc.constantFrom("a", "é", "€", "🦀", "\n");
  fc.assert(
    fc.property(
      fc.array(fc.array(chars, { minLength: 1, maxLength: 12 }).map((a) => a.join("")), { maxLength: 12 }),
      fc.integer({ min: 2, max: 40 }),
      (items, maxText) => {
        const out = small(maxText);
        for (const t of items) out.push(text(t));
        const all = items.join("");
        const rendered = texts(out) as string[];
        for (const t of rendered) assert.ok(t.isWellFormed());
        const n = rendered.findIndex((t) => t.startsWith("[Code Mode"));
        if (n < 0) {
          assert.equal(rendered.join(""), all);
          return;
        }
        // Only text was pushed (no empty one): one notice, between head and tail.
        assert.equal(rendered.filter((t) => t.startsWith("[Code Mode")).length, 1);
        const head = rendered.slice(0, n).join("");
        const tail = rendered.slice(n + 1).join("");
        assert.ok(all.startsWith(head));
        assert.ok(all.endsWith(tail));
        const headBytes = utf8ByteLength(head);
        assert.ok(headBytes <= Math.floor(maxText / 2));
        assert.ok(utf8ByteLength(tail) <= maxText - headBytes);
        const omitted = utf8ByteLength(all) - headBytes - utf8ByteLength(tail);
        assert.equal(out.omittedTextBytes, omitted);
        assert.ok(
          rendered[n].startsWith(`[Code Mode session output limit reached: omitted ${omitted} text bytes;`),
        );
      },
    ),
  );
});

Deno.test("Server §8.8 step 3: a 68,157,464-byte error item keeps 524,288 head and tail bytes", () => {
  const out = createOutputCollector("server");
  const e = "begin:" + "X".repeat(65 * 1024 * 1024) + ":end";
  out.push(text("Script error:\n" + e));
  const rendered = texts(out) as string[];
  assert.equal(rendered.length, 3);
  assert.equal(rendered[0].length, 524_288);
  assert.ok(rendered[0].startsWith("Script error:\nbegin:XXX"));
  assert.equal(
    rendered[1],
    "[Code Mode session output limit reached: omitted 67108888 text bytes; discarded 0 text segments, 0 images, 0 audio items]",
  );
  assert.equal(rendered[2].length, 524_288);
  assert.ok(rendered[2].endsWith("XXX:end"));
});

Deno.test("Server §8.9: a failed yield restores image allocation and omission order with the same objects", () => {
  const out = createOutputCollector("server");
  const big = image("i".repeat(SERVER_IMAGE_BYTES));
  out.push(big);
  out.push(image("excess"));
  out.restore(out.take()); // the receiver was gone
  out.push(text("after"));
  const taken = out.take();
  const rendered = taken.render();
  assert.equal(rendered.length, 3);
  assert.equal(rendered[0], big);
  assert.equal(
    rendered[1].type === "text" && rendered[1].text,
    "[Code Mode session output limit reached: omitted 0 text bytes; discarded 0 text segments, 1 images, 0 audio items]",
  );
  assert.deepEqual(rendered[2], text("after"));
  assert.ok(out.isEmpty);
  assert.ok(sameRendering(out, createOutputCollector("server")));
});

Deno.test("Server take() starts a fresh window with fresh budgets and counters", () => {
  const out = small(8, 3);
  out.push(text("abcdefghij"));
  out.push(image("abcd"));
  const taken = out.take();
  assert.ok(out.isEmpty);
  assert.ok(!taken.isEmpty);
  out.push(text("abcd"));
  const img = image("abc");
  out.push(img);
  assert.deepEqual(texts(out), ["abcd", img]);
});

Deno.test("Server restore() is exact: later pushes behave as if the take never happened", () => {
  const item = fc.oneof(
    fc.string({ unit: fc.constantFrom("a", "é", "🦀"), maxLength: 9 }).map(text),
    fc.integer({ min: 0, max: 7 }).map((n) => image("m".repeat(n))),
    fc.integer({ min: 0, max: 7 }).map((n) => audio("a".repeat(n))),
  );
  fc.assert(
    fc.property(fc.array(fc.tuple(item, fc.boolean()), { maxLength: 30 }), (steps) => {
      const reference = small(12, 10);
      const out = small(12, 10);
      for (const [it, failYield] of steps) {
        reference.push(it);
        out.push(it);
        if (failYield) {
          const before = out.render();
          out.restore(out.take());
          const after = out.render();
          assert.equal(after.length, before.length);
          after.forEach((x, i) => x.type !== "text" && assert.equal(x, before[i]));
        }
        assert.ok(sameRendering(out, reference));
      }
    }),
  );
});

Deno.test("Server restore() after later pushes keeps the taken window in front and loses nothing", () => {
  const out = small(8, 10);
  out.push(text("abcdef"));
  out.push(text("ghij"));
  const taken = out.take();
  out.push(text("k"));
  out.restore(taken);
  assert.deepEqual(texts(out), ["abcd", notice(3, 1, 0, 0), "hij", "k"]);
  assert.ok(taken.isEmpty);
  assert.equal(out.omittedTextBytes, 3);
});

Deno.test("Server restore() after later pushes that lost output keeps their notice and counts", () => {
  const out = small(8, 3);
  out.push(text("ab"));
  const taken = out.take();
  out.push(text("cdefghijkl")); // the later window: "cdef", notice, "ijkl"
  out.push(image("toolarge"));
  out.push(text("m"));
  out.restore(taken);
  // "cd" joins the head; "ef" fills the tail and goes whole when "jkl" and "m" come back.
  assert.deepEqual(texts(out), ["ab", "cd", notice(5, 1, 0, 0), "jkl", notice(0, 0, 1, 0), "m"]);
  assert.equal(out.omittedTextBytes, 5);
});

Deno.test("Client take()/restore() keeps order and the same objects", () => {
  const out = createOutputCollector("client");
  const img = image("x");
  out.push(text("a"));
  out.push(img);
  const taken = out.take();
  assert.ok(out.isEmpty);
  out.push(text("b"));
  out.restore(taken);
  const rendered = out.render();
  assert.deepEqual(rendered, [text("a"), img, text("b")]);
  assert.equal(rendered[1], img);
});

Deno.test("sameRendering compares rendered items, not internal state", () => {
  const a = small(8);
  const b = small(100);
  a.push(text("ab"));
  b.push(text("ab"));
  assert.ok(sameRendering(a, b));
  a.push(text("cdefghij"));
  b.push(text("cdefghij"));
  assert.ok(!sameRendering(a, b));
  const c = createOutputCollector("client");
  c.push(image("u"));
  const d = createOutputCollector("server");
  d.push({ type: "image", imageUrl: "u", detail: "low" });
  assert.ok(!sameRendering(c, d));
});

// ---- reduced forms, Client retention, diagnostic cap (SPEC §8.3, §8.5, §8.10) ----------------

/** The reduced form the runtime sends for `s` (first and last `keep` bytes plus the true length). */
function trimmed(s: string, keep: number): PushedItem {
  return {
    type: "trimmedText",
    head: s.slice(0, utf8Prefix(s, keep).units),
    tail: s.slice(s.length - utf8Suffix(s, keep).units),
    totalBytes: utf8ByteLength(s),
  };
}

Deno.test("Server §8.8 via the reduced form: a pre-trimmed error item renders exactly like the whole one", () => {
  const e = "Script error:\nbegin:" + "X".repeat(65 * 1024 * 1024) + ":end";
  const whole = createOutputCollector("server");
  whole.push(text(e));
  const reduced = createOutputCollector("server");
  reduced.push(trimmed(e, MAX_TEXT_BYTES));
  assert.deepEqual(reduced.render(), whole.render());
  assert.deepEqual(reduced.entries(), whole.entries());
});

Deno.test("Server: a reduced text renders like the whole text after any earlier pushes (property)", () => {
  const piece = fc.string({ unit: fc.constantFrom("a", "é", "中", "🦀", "\n"), maxLength: 12 });
  fc.assert(
    fc.property(
      fc.array(fc.oneof(piece.map(text), fc.constantFrom(image("data:12"), image("data:123456789"))), {
        maxLength: 6,
      }),
      fc.string({ unit: fc.constantFrom("b", "ü", "語", "🐢"), minLength: 20, maxLength: 60 }),
      fc.array(piece.map(text), { maxLength: 3 }),
      (before, big, after) => {
        // Limits scaled down: MAX_TEXT = 8, so texts over 16 bytes travel reduced (first/last 8).
        if (utf8ByteLength(big) <= 16) return;
        const whole = small(8, 12);
        const reduced = small(8, 12);
        for (const item of before) whole.push(item), reduced.push(item);
        whole.push(text(big));
        reduced.push(trimmed(big, 8));
        for (const item of after) whole.push(item), reduced.push(item);
        assert.deepEqual(reduced.entries(), whole.entries());
      },
    ),
    { numRuns: 500 },
  );
});

Deno.test("Server: a dropped image is discarded where it was pushed; a dropped audio is kept as its size", () => {
  const out = small(8, 10);
  out.push(text("ab"));
  out.push({ type: "droppedMedia", kind: "image", bytes: 99 });
  out.push(text("cd"));
  out.push({ type: "droppedMedia", kind: "audio", bytes: 99 });
  assert.deepEqual(out.entries(), [
    { kind: "text", text: "ab", owner: 0 },
    { kind: "notice", counts: { bytes: 0, segments: 0, images: 1, audio: 0 } },
    { kind: "text", text: "cd", owner: 1 },
    { kind: "droppedAudio", bytes: 99 },
  ]);
});

Deno.test("Client: a window retains its items until their encoded size passes maxMessageBytes, then only counts", () => {
  const out = createOutputCollector("client", { maxMessageBytes: 100 });
  out.push(text("x".repeat(40)));
  assert.equal(out.encodedBytes, contentItemEncodedBytes(text("x".repeat(40))));
  assert.equal(out.render().length, 1);
  out.push(text("y".repeat(60)));
  assert.ok(out.encodedBytes > 100);
  assert.throws(() => out.render(), RangeError);
  out.push({ type: "trimmedText", head: "a", tail: "b", totalBytes: 1_000_000 });
  assert.equal(
    out.encodedBytes,
    contentItemEncodedBytes(text("x".repeat(40))) + contentItemEncodedBytes(text("y".repeat(60))) +
      contentItemEncodedBytes(text("z".repeat(1_000_000))),
  );
  const taken = out.take();
  assert.ok(out.isEmpty);
  out.push(text("later"));
  out.restore(taken);
  assert.ok(out.encodedBytes > 100);
  assert.throws(() => out.render(), RangeError);
});

Deno.test("contentItemEncodedBytes matches the protobuf encoding of ExecutionOutcome.content_items", async () => {
  const { parseProtos, PROTO_FILES, readProtoText } = await import("../../proto/loader.ts");
  const root = parseProtos([readProtoText(PROTO_FILES.codeModeHost)]);
  const Outcome = root.lookupType("codex.code_mode.v1.ExecutionOutcome");
  const items: PushedItem[] = [
    text(""),
    text("hi"),
    text("é".repeat(200)),
    image("data:" + "q".repeat(300)),
    audio("data:a"),
  ];
  const wire = (item: PushedItem) =>
    item.type === "text"
      ? { text: { text: item.text } }
      : item.type === "image"
      ? { image: { imageUrl: item.imageUrl, detail: 1 } }
      : { audio: { audioUrl: (item as { audioUrl: string }).audioUrl } };
  for (const item of items) {
    const bytes = Outcome.encode({ contentItems: [wire(item)] }).finish().length;
    assert.equal(contentItemEncodedBytes(item), bytes, JSON.stringify(item).slice(0, 40));
  }
});

Deno.test("diagnosticErrorText keeps texts up to 65,536 bytes and otherwise joins a 32,766-byte head, '…' and a 32,767-byte tail, as Codex's host", () => {
  const short = "e".repeat(65_536);
  assert.equal(diagnosticErrorText(short), short);
  const ascii = "e".repeat(50_000) + "f".repeat(50_000);
  const d = diagnosticErrorText(ascii);
  assert.equal(d, "e".repeat(32_766) + "…" + "f".repeat(32_767));
  assert.equal(utf8ByteLength(d), 65_536);
  assert.equal(diagnosticErrorText("x".repeat(65_537)), "x".repeat(32_766) + "…" + "x".repeat(32_767));
  // Whole characters only, each end within its own budget (the reference's outputs for these cells).
  const cases: [string, number, number][] = [
    ["é".repeat(50_000), 32_766, 32_766],
    ["a" + "é".repeat(50_000), 32_765, 32_766],
    ["😀".repeat(30_000), 32_764, 32_764],
    ["a" + "😀".repeat(30_000), 32_765, 32_764],
    ["ab" + "😀".repeat(30_000), 32_766, 32_764],
  ];
  for (const [text, headBytes, tailBytes] of cases) {
    const capped = diagnosticErrorText(text);
    const at = capped.indexOf("…");
    assert.equal(utf8ByteLength(capped.slice(0, at)), headBytes, text.slice(0, 3));
    assert.equal(utf8ByteLength(capped.slice(at + 1)), tailBytes, text.slice(0, 3));
    assert.ok(text.startsWith(capped.slice(0, at)) && text.endsWith(capped.slice(at + 1)));
  }
  // The reduced form gives the same result as the whole text.
  const e = "begin:" + "X".repeat(65 * 1024 * 1024) + ":end";
  const r = trimmed(e, MAX_TEXT_BYTES) as { head: string; tail: string; totalBytes: number };
  const fromReduced = diagnosticErrorText({ head: r.head, tail: r.tail, totalBytes: r.totalBytes });
  assert.equal(fromReduced, diagnosticErrorText(e));
  assert.equal(fromReduced.length, 65_534);
  assert.ok(fromReduced.startsWith("begin:XXX") && fromReduced.endsWith("XXX:end"));
});

Deno.test("Client collector: past its limit it keeps no items but the JSON size of every item pushed, across take and restore", () => {
  const items: PushedItem[] = [
    { type: "text", text: 'say "hi"\n' },
    { type: "image", imageUrl: "data:image/png;base64,AA==", detail: "low" },
    { type: "trimmedText", head: "a", tail: "z", totalBytes: 300, jsonExtraBytes: 40 },
    { type: "audio", audioUrl: "data:audio/wav;base64,AA==" },
    { type: "droppedMedia", kind: "image", bytes: 500, detail: "auto", jsonExtraBytes: 1 },
    { type: "text", text: "\u0001é" },
  ];
  const out = createOutputCollector("client", { maxMessageBytes: 100 });
  out.push(items[0]);
  out.push(items[1]);
  assert.equal(out.contentJson, undefined, "within the limit the items themselves are kept");
  for (const item of items.slice(2)) out.push(item);
  assert.deepEqual(out.contentJson, contentJsonOf(items));
  assert.deepEqual(out.contentJson, {
    payloadBytes: (9 + 3 + 2) + (26 + 2) + (300 + 40 + 2) + (26 + 2) + (500 + 1 + 2) + (3 + 5 + 2),
    shapes: new Map([["text", 3], ["image:low", 1], ["audio", 1], ["image:auto", 1]]),
  });
  // A taken window keeps its count; restoring it in front of a small window counts that one too.
  const taken = out.take();
  assert.equal(out.contentJson, undefined);
  out.push(items[0]);
  out.restore(taken);
  assert.deepEqual(out.contentJson, contentJsonOf([...items, items[0]]));
  assert.throws(() => out.render(), RangeError);
});

import assert from "node:assert/strict";
import fc from "fast-check";
import { type LinePart, readLines } from "./line_reader.ts";

const encode = (text: string) => new TextEncoder().encode(text);

async function parts(chunks: Uint8Array[], maxBytes: number): Promise<LinePart[]> {
  const out: LinePart[] = [];
  // Overlong parts are valid only until the next step: copy them.
  for await (const part of readLines(ReadableStream.from(chunks), maxBytes)) {
    out.push("overlong" in part ? { overlong: part.overlong.slice() } : part);
  }
  return out;
}

/** Lines as text, an overlong line as `<N>` (its length) with the concatenation of its parts checked. */
function summary(steps: LinePart[]): string[] {
  const out: string[] = [];
  let overlong: number[] = [];
  for (const step of steps) {
    if ("line" in step) out.push(new TextDecoder().decode(step.line));
    else if ("overlong" in step) overlong.push(...step.overlong);
    else {
      assert.equal(overlong.length, step.overlongEnd, "the overlong parts add up to the line");
      out.push(`<${step.overlongEnd}${step.eof ? " eof" : ""}>`);
      overlong = [];
    }
  }
  return out;
}

Deno.test("readLines(): lines within the limit whole, one over it as parts and its length, then the next line", async () => {
  const steps = await parts([encode("a\r\nbbbbbbbbbbbb\ncc\n")], 4);
  assert.deepEqual(summary(steps), ["a", "<12>", "cc"]);
  assert.ok(
    steps.filter((s) => "overlong" in s).every((s) => (s as { overlong: Uint8Array }).overlong.length <= 12),
  );
});

Deno.test("readLines(): a last line without a newline, and an overlong one ended by EOF", async () => {
  assert.deepEqual(summary(await parts([encode("x\ny")], 4)), ["x", "y"]);
  assert.deepEqual(summary(await parts([encode("x\nyyyyyyy")], 4)), ["x", "<7 eof>"]);
  assert.deepEqual(summary(await parts([], 4)), []);
});

Deno.test("readLines(): a line of exactly the limit is whole; one byte more is overlong", async () => {
  assert.deepEqual(summary(await parts([encode("abcd\nabcde\n")], 4)), ["abcd", "<5>"]);
});

Deno.test("readLines(): an overlong line is never kept: its bytes pass on chunk by chunk", async () => {
  // 64 chunks of 64 KiB, one line of 4 MiB under a 1 MiB limit: no part is larger than a chunk.
  const chunk = new Uint8Array(65_536).fill(0x78);
  const chunks = [...Array.from({ length: 64 }, () => chunk), encode("\nnext\n")];
  let largest = 0;
  const seen: string[] = [];
  for await (const part of readLines(ReadableStream.from(chunks), 1_048_576)) {
    if ("overlong" in part) largest = Math.max(largest, part.overlong.length);
    else if ("line" in part) seen.push(new TextDecoder().decode(part.line));
    else seen.push(`<${part.overlongEnd}>`);
  }
  assert.ok(largest <= 1_048_576, `largest part ${largest}`);
  assert.deepEqual(seen, [`<${64 * 65_536}>`, "next"]);
});

Deno.test("readLines(): refuses a limit that is not a positive integer", async () => {
  await assert.rejects(parts([], 0), RangeError);
});

Deno.test("readLines(): any lines, any chunking: the same lines and lengths (property)", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.string({ maxLength: 40 }).map((s) => s.replaceAll("\n", " ").replaceAll("\r", " ")), {
        maxLength: 12,
      }),
      fc.integer({ min: 1, max: 24 }),
      fc.array(fc.integer({ min: 1, max: 30 }), { minLength: 1, maxLength: 10 }),
      async (lines, maxBytes, cuts) => {
        const bytes = encode(lines.map((l) => `${l}\n`).join(""));
        const chunks: Uint8Array[] = [];
        for (let at = 0, i = 0; at < bytes.length; i++) {
          const n = cuts[i % cuts.length];
          chunks.push(bytes.slice(at, at + n));
          at += n;
        }
        const expected = lines.map((l) => {
          const length = encode(l).length;
          return length > maxBytes ? `<${length}>` : l;
        });
        assert.deepEqual(summary(await parts(chunks, maxBytes)), expected);
      },
    ),
  );
});

/**
 * Micro costs of the Server-mode output path (SPEC §8.6, §8.7). Each group has a `baseline` that
 * does the least work of the same job (keeping the last 1 MiB of text in a plain array, or slicing
 * a string), so the ratio is what the collector and the truncation add.
 *
 * Run: `deno bench -A bench/output_collector_bench.ts`
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { createOutputCollector } from "../host/output/output_collector.ts";
import { truncateEntries } from "../host/output/token_truncation.ts";

const PIECE = "y".repeat(64 * 1024);
const SMALL = "x".repeat(1024);

function check(ok: boolean): void {
  if (!ok) throw new Error("output collector bench produced a wrong result");
}

for (
  const [label, piece, count] of [["4,096 × 64 KiB", PIECE, 4096], ["65,536 × 1 KiB", SMALL, 65_536]] as const
) {
  const group = `push ${label}`;
  Deno.bench({
    name: "baseline: keep the last 1 MiB (UTF-8 bytes) in an array",
    group,
    baseline: true,
    fn() {
      const kept: string[] = [];
      let bytes = 0;
      for (let i = 0; i < count; i++) {
        kept.push(piece);
        bytes += Buffer.byteLength(piece, "utf8");
        while (bytes > 1_048_576) bytes -= Buffer.byteLength(kept.shift()!, "utf8");
      }
      check(bytes <= 1_048_576);
    },
  });
  Deno.bench({
    name: "Server collector push + render",
    group,
    fn() {
      const out = createOutputCollector("server");
      for (let i = 0; i < count; i++) out.push({ type: "text", text: piece });
      check(out.render().length > 2);
    },
  });
}

const window = createOutputCollector("server");
for (let i = 0; i < 32; i++) window.push({ type: "text", text: PIECE });
const entries = window.entries();
Deno.bench({
  name: "baseline: slice the ends of a 1 MiB string",
  group: "truncate a full window to 10,000 tokens",
  baseline: true,
  fn() {
    const joined = entries.map((e) => e.kind === "text" ? e.text : "").join("");
    check(joined.slice(0, 20_000).length + joined.slice(-20_000).length === 40_000);
  },
});
Deno.bench({
  name: "truncateEntries (SPEC §8.7)",
  group: "truncate a full window to 10,000 tokens",
  fn() {
    check(truncateEntries(entries, 10_000).length >= 2);
  },
});

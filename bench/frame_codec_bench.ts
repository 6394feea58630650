/**
 * Micro costs of the frame codec (SPEC §9.4). Each group has a `baseline` that does the minimum
 * memory work of the same job with plain `Uint8Array` copies, so the ratio is the codec's overhead.
 *
 * Run: `deno bench -A bench/frame_codec_bench.ts`
 *
 * @module
 */
import { encodeFrame, FrameDecoder } from "../proto/frame_codec.ts";

/** `maxWorkerFrameBytes` default (SPEC §2.8). */
const MAX_FRAME_BYTES = 68_157_440;

function body(length: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = (i * 31 + 7) & 0xff;
  return out;
}

function check(ok: boolean): void {
  if (!ok) throw new Error("frame codec bench produced a wrong result");
}

for (
  const [label, size] of [["1 KiB", 1024], ["64 KiB", 64 * 1024], ["1 MiB", 1024 * 1024]] as const
) {
  const payload = body(size);
  const group = `encode+decode ${label}`;

  Deno.bench({
    name: `${label}: two Uint8Array.set copies`,
    group,
    baseline: true,
    fn() {
      const framed = new Uint8Array(4 + size);
      framed.set(payload, 4);
      const decoded = new Uint8Array(size);
      decoded.set(framed.subarray(4));
      check(decoded.length === size);
    },
  });

  Deno.bench({
    name: `${label}: encodeFrame + FrameDecoder.push (copy)`,
    group,
    fn() {
      const frames = new FrameDecoder(MAX_FRAME_BYTES).push(encodeFrame(payload, MAX_FRAME_BYTES));
      check(frames.length === 1 && frames[0].length === size);
    },
  });

  Deno.bench({
    name: `${label}: encodeFrame + FrameDecoder.push (copy: false)`,
    group,
    fn() {
      const decoder = new FrameDecoder(MAX_FRAME_BYTES, { copy: false });
      const frames = decoder.push(encodeFrame(payload, MAX_FRAME_BYTES));
      check(frames.length === 1 && frames[0].length === size);
    },
  });
}

{
  const size = 4 * 1024;
  const framed = encodeFrame(body(size), MAX_FRAME_BYTES);
  const chunks = Array.from(framed, (_, i) => framed.subarray(i, i + 1));
  const group = "decode 4 KiB in 1-byte chunks";

  Deno.bench({
    name: "4 KiB / 1-byte chunks: Uint8Array.set per chunk",
    group,
    baseline: true,
    fn() {
      const out = new Uint8Array(framed.length);
      for (let i = 0; i < chunks.length; i++) out.set(chunks[i], i);
      check(out.length === framed.length);
    },
  });

  Deno.bench({
    name: "4 KiB / 1-byte chunks: FrameDecoder.push per chunk",
    group,
    fn() {
      const decoder = new FrameDecoder(MAX_FRAME_BYTES);
      let frames = 0;
      for (const chunk of chunks) frames += decoder.push(chunk).length;
      check(frames === 1);
    },
  });
}

{
  const size = 64 * 1024;
  const framed = encodeFrame(body(size), MAX_FRAME_BYTES);
  const chunks: Uint8Array[] = [];
  for (let i = 0; i < framed.length; i += 1500) chunks.push(framed.subarray(i, i + 1500));
  const group = "decode 64 KiB in 1500-byte chunks";

  Deno.bench({
    name: "64 KiB / 1500-byte chunks: Uint8Array.set per chunk",
    group,
    baseline: true,
    fn() {
      const out = new Uint8Array(framed.length);
      let offset = 0;
      for (const chunk of chunks) {
        out.set(chunk, offset);
        offset += chunk.length;
      }
      check(offset === framed.length);
    },
  });

  Deno.bench({
    name: "64 KiB / 1500-byte chunks: FrameDecoder.push per chunk",
    group,
    fn() {
      const decoder = new FrameDecoder(MAX_FRAME_BYTES);
      let frames = 0;
      for (const chunk of chunks) frames += decoder.push(chunk).length;
      check(frames === 1);
    },
  });
}

{
  const count = 1000;
  const payload = body(64);
  const stream = new Uint8Array(count * (4 + payload.length));
  for (let i = 0; i < count; i++) stream.set(encodeFrame(payload, MAX_FRAME_BYTES), i * 68);
  const group = "decode 1000 × 64 B frames in one chunk";

  Deno.bench({
    name: "1000 × 64 B: slice per frame",
    group,
    baseline: true,
    fn() {
      const out: Uint8Array[] = [];
      for (let offset = 0; offset < stream.length; offset += 68) {
        out.push(stream.slice(offset + 4, offset + 68));
      }
      check(out.length === count);
    },
  });

  Deno.bench({
    name: "1000 × 64 B: FrameDecoder.push (copy)",
    group,
    fn() {
      check(new FrameDecoder(MAX_FRAME_BYTES).push(stream).length === count);
    },
  });

  Deno.bench({
    name: "1000 × 64 B: FrameDecoder.push (copy: false)",
    group,
    fn() {
      check(new FrameDecoder(MAX_FRAME_BYTES, { copy: false }).push(stream).length === count);
    },
  });
}

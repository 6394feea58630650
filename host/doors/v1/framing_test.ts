import assert from "node:assert/strict";
import { encodeFrame, FrameWriter, FramingError, type IncomingFrame, readFrames } from "./framing.ts";

async function all(chunks: Uint8Array[], max?: number): Promise<IncomingFrame[]> {
  const out: IncomingFrame[] = [];
  for await (const f of readFrames(ReadableStream.from(chunks), max)) out.push(f);
  return out;
}

const json = (f: IncomingFrame) => f.type === "frame" ? JSON.parse(new TextDecoder().decode(f.payload)) : f;

Deno.test("readFrames() reads little-endian length frames split anywhere, and ends at a boundary", async () => {
  const bytes = new Uint8Array([...encodeFrame({ a: 1 }), ...encodeFrame({ b: "é" }), ...encodeFrame("x")]);
  assert.deepEqual(new DataView(bytes.buffer).getUint32(0, true), 7);
  for (let cut = 1; cut < bytes.length; cut++) {
    const frames = await all([bytes.slice(0, cut), bytes.slice(cut)]);
    assert.deepEqual(frames.map(json), [{ a: 1 }, { b: "é" }, "x"]);
  }
  const oneByte = [...bytes].map((b) => new Uint8Array([b]));
  assert.deepEqual((await all(oneByte)).map(json), [{ a: 1 }, { b: "é" }, "x"]);
  assert.deepEqual(await all([]), []);
});

Deno.test("readFrames() fails on EOF inside a frame or its length", async () => {
  const frame = encodeFrame({ a: 1 });
  await assert.rejects(all([frame.slice(0, 2)]), FramingError);
  await assert.rejects(all([frame.slice(0, 6)]), FramingError);
});

Deno.test("readFrames() discards an oversized payload, keeping its first 4 KiB, and goes on", async () => {
  const big = new Uint8Array(4 + 10_000);
  new DataView(big.buffer).setUint32(0, 10_000, true);
  big.set(new TextEncoder().encode('{"type":"operation/request","id":9'), 4);
  const frames = await all([big.slice(0, 3000), big.slice(3000), encodeFrame({ next: true })], 5_000);
  assert.equal(frames.length, 2);
  assert.equal(frames[0].type, "oversized");
  if (frames[0].type === "oversized") {
    assert.equal(frames[0].length, 10_000);
    assert.equal(frames[0].head.length, 4_096);
    assert.match(new TextDecoder().decode(frames[0].head), /^\{"type":"operation\/request","id":9/);
  }
  assert.deepEqual(json(frames[1]), { next: true });
});

Deno.test("FrameWriter holds at most its capacity while the reader does not read, in order", async () => {
  const pipe = new TransformStream<Uint8Array, Uint8Array>();
  const writer = new FrameWriter(pipe.writable, 4);
  const sent: number[] = [];
  const sends = Array.from({ length: 12 }, (_, i) => writer.send(encodeFrame(i)).then(() => sent.push(i)));
  await new Promise((r) => setTimeout(r, 20));
  assert.ok(writer.queued <= 4, `queued ${writer.queued}`);
  assert.ok(sent.length < 12, "some producers wait for room");
  const got: unknown[] = [];
  const reading = (async () => {
    for await (const f of readFrames(pipe.readable)) {
      got.push(json(f));
      if (got.length === 12) break;
    }
  })();
  await Promise.all(sends);
  await writer.flushed();
  await reading;
  assert.deepEqual(got, Array.from({ length: 12 }, (_, i) => i));
});

Deno.test("FrameWriter drops frames after the sink broke and never blocks again", async () => {
  const writer = new FrameWriter(new WritableStream({ write: () => Promise.reject(new Error("EPIPE")) }), 2);
  for (let i = 0; i < 10; i++) await writer.send(encodeFrame(i));
  await writer.flushed();
  assert.equal(writer.broken, true);
});

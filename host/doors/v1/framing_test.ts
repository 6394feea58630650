import assert from "node:assert/strict";
import { encodeFrame, FrameWriter, FramingError, readFrames } from "./framing.ts";

async function all(chunks: Uint8Array[], max?: number): Promise<Uint8Array[]> {
  const out: Uint8Array[] = [];
  for await (const f of readFrames(ReadableStream.from(chunks), max)) out.push(f);
  return out;
}

const json = (f: Uint8Array) => JSON.parse(new TextDecoder().decode(f));

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

Deno.test("readFrames() fails `early eof` inside a frame or its length", async () => {
  const frame = encodeFrame({ a: 1 });
  await assert.rejects(all([frame.slice(0, 2)]), { name: "FramingError", message: "early eof" });
  await assert.rejects(all([frame.slice(0, 6)]), { name: "FramingError", message: "early eof" });
});

Deno.test("readFrames() refuses a length over the limit as soon as it is read, without its payload", async () => {
  let pulled = 0;
  const header = new Uint8Array(4);
  new DataView(header.buffer).setUint32(0, 5_001, true);
  // A stream that would never end: the reader must fail on the 4 length bytes alone.
  const endless = new ReadableStream<Uint8Array>({
    pull(controller) {
      controller.enqueue(pulled++ === 0 ? header : new Uint8Array(1_000));
    },
  }, { highWaterMark: 0 });
  const frames: Uint8Array[] = [];
  await assert.rejects(
    (async () => {
      for await (const f of readFrames(endless, 5_000)) frames.push(f);
    })(),
    (error) => {
      assert.ok(error instanceof FramingError);
      assert.equal(error.message, "code-mode IPC frame length 5001 exceeds 5000 bytes");
      return true;
    },
  );
  assert.equal(pulled, 1);
  assert.deepEqual(frames, []);
  // Exactly the limit is a frame.
  const limit = new Uint8Array(4 + 5_000).fill(0x20);
  new DataView(limit.buffer).setUint32(0, 5_000, true);
  assert.equal((await all([limit], 5_000))[0].length, 5_000);
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

Deno.test("FrameWriter.stop() drops queued frames and later ones, and releases waiting producers", async () => {
  const pipe = new TransformStream<Uint8Array, Uint8Array>();
  const writer = new FrameWriter(pipe.writable, 2);
  const sends = Array.from({ length: 6 }, (_, i) => writer.send(encodeFrame(i)));
  writer.stop();
  await Promise.all(sends);
  await writer.send(encodeFrame("late"));
  assert.equal(writer.queued, 0);
  const got: unknown[] = [];
  const reading = (async () => {
    for await (const f of readFrames(pipe.readable)) got.push(json(f));
  })();
  await writer.close();
  await reading;
  // At most the frame already being written when stop() was called got out.
  assert.ok(got.length <= 1 && !got.includes("late"), JSON.stringify(got));
});

Deno.test("FrameWriter drops frames after the sink broke and never blocks again", async () => {
  const writer = new FrameWriter(new WritableStream({ write: () => Promise.reject(new Error("EPIPE")) }), 2);
  for (let i = 0; i < 10; i++) await writer.send(encodeFrame(i));
  await writer.flushed();
  assert.equal(writer.broken, true);
});

Deno.test("FrameWriter is fair: a producer waiting for room is never overtaken by a later one", async () => {
  const written: unknown[] = [];
  const releases: (() => void)[] = [];
  const holder: { writer?: FrameWriter } = {};
  const late: Promise<void>[] = [];
  const sink = new WritableStream<Uint8Array>({
    write(chunk) {
      const value = json(chunk.subarray(4));
      written.push(value);
      // A producer that sends again the moment a place frees (as a busy pump does).
      if (value === "b") late.push(holder.writer!.send(encodeFrame("d")));
      return new Promise<void>((resolve) => releases.push(resolve));
    },
  });
  const writer = holder.writer = new FrameWriter(sink, 1);
  const sends = [writer.send(encodeFrame("a")), writer.send(encodeFrame("b")), writer.send(encodeFrame("c"))];
  while (written.length < 4) {
    await new Promise((r) => setTimeout(r, 0));
    releases.shift()?.();
  }
  await Promise.all([...sends, ...late]);
  assert.deepEqual(written, ["a", "b", "c", "d"]);
});

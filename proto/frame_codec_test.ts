import assert from "node:assert/strict";
import fc from "fast-check";
import { encodeFrame, FrameDecoder, FrameError, readFrames } from "./frame_codec.ts";

/** `maxWorkerFrameBytes` default (SPEC §2.8). */
const MAX_WORKER_FRAME_BYTES = 68_157_440;

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

function encodeAll(bodies: readonly Uint8Array[], max = MAX_WORKER_FRAME_BYTES): Uint8Array {
  return concat(bodies.map((body) => encodeFrame(body, max)));
}

/** Splits `bytes` at the given cut points (any order, duplicates and out-of-range ignored). */
function split(bytes: Uint8Array, cuts: readonly number[]): Uint8Array[] {
  const points = [...new Set(cuts.filter((cut) => cut > 0 && cut < bytes.length))]
    .sort((a, b) => a - b);
  const chunks: Uint8Array[] = [];
  let start = 0;
  for (const point of [...points, bytes.length]) {
    chunks.push(bytes.slice(start, point));
    start = point;
  }
  return chunks;
}

function bytesOf(length: number, seed = 1): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = (i * 31 + seed) & 0xff;
  return out;
}

function decodeAll(chunks: readonly Uint8Array[], max = MAX_WORKER_FRAME_BYTES): Uint8Array[] {
  const decoder = new FrameDecoder(max);
  const frames = chunks.flatMap((chunk) => decoder.push(chunk));
  decoder.finish();
  return frames;
}

function header(length: number): Uint8Array {
  return new Uint8Array([length >>> 24, (length >>> 16) & 0xff, (length >>> 8) & 0xff, length]);
}

function streamOf(
  chunks: readonly Uint8Array[],
  end: "close" | Error = "close",
): ReadableStream<Uint8Array> {
  let next = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (next < chunks.length) controller.enqueue(chunks[next++]);
      else if (end === "close") controller.close();
      else controller.error(end);
    },
  }, { highWaterMark: 0 });
}

Deno.test("encodeFrame() writes a 4-byte big-endian length, then the body", () => {
  assert.deepEqual(
    encodeFrame(new Uint8Array([9, 8, 7]), 16),
    new Uint8Array([0, 0, 0, 3, 9, 8, 7]),
  );
  assert.deepEqual(encodeFrame(new Uint8Array(0), 0), new Uint8Array([0, 0, 0, 0]));
  const big = encodeFrame(new Uint8Array(0x01_02_03), 0x01_02_03);
  assert.deepEqual(big.subarray(0, 4), new Uint8Array([0, 1, 2, 3]));
  assert.equal(big.length, 4 + 0x01_02_03);
});

Deno.test("encodeFrame() refuses a body larger than maxFrameBytes", () => {
  assert.throws(
    () => encodeFrame(new Uint8Array(17), 16),
    (error: unknown) => error instanceof FrameError && error.detail === "frame length 17 exceeds 16 bytes",
  );
  assert.equal(encodeFrame(new Uint8Array(16), 16).length, 20);
});

Deno.test("encodeFrame() and FrameDecoder reject an invalid maxFrameBytes with RangeError", () => {
  for (const max of [-1, 1.5, Number.NaN, 2 ** 32, Infinity]) {
    assert.throws(() => encodeFrame(new Uint8Array(0), max), RangeError);
    assert.throws(() => new FrameDecoder(max), RangeError);
  }
  new FrameDecoder(2 ** 32 - 1);
});

Deno.test("FrameDecoder round-trips frames fed in 1-byte chunks", () => {
  const bodies = [bytesOf(1), bytesOf(300, 2), new Uint8Array(0), bytesOf(5, 3)];
  const bytes = encodeAll(bodies);
  const decoder = new FrameDecoder(MAX_WORKER_FRAME_BYTES);
  const frames: Uint8Array[] = [];
  for (let i = 0; i < bytes.length; i++) {
    frames.push(...decoder.push(bytes.subarray(i, i + 1)));
  }
  decoder.finish();
  assert.deepEqual(frames, bodies);
  assert.equal(decoder.buffered, 0);
});

Deno.test("FrameDecoder returns several frames from one chunk, in order", () => {
  const bodies = [bytesOf(3), bytesOf(0), bytesOf(4, 7), bytesOf(1, 9)];
  const decoder = new FrameDecoder(64);
  assert.deepEqual(decoder.push(encodeAll(bodies, 64)), bodies);
  decoder.finish();
});

Deno.test("FrameDecoder reassembles a header split across chunks", async (t) => {
  const body = bytesOf(10);
  const bytes = encodeFrame(body, 64);
  for (let cut = 1; cut < 4; cut++) {
    await t.step(`header cut after byte ${cut}`, () => {
      const decoder = new FrameDecoder(64);
      assert.deepEqual(decoder.push(bytes.subarray(0, cut)), []);
      assert.equal(decoder.buffered, cut);
      assert.deepEqual(decoder.push(bytes.subarray(cut)), [body]);
      decoder.finish();
    });
  }
  await t.step("header bytes in three chunks, with the previous frame's tail", () => {
    const previous = bytesOf(2, 5);
    const all = concat([encodeFrame(previous, 64), bytes]);
    const decoder = new FrameDecoder(64);
    assert.deepEqual(decoder.push(all.subarray(0, 7)), [previous]);
    assert.deepEqual(decoder.push(all.subarray(7, 8)), []);
    assert.deepEqual(decoder.push(all.subarray(8)), [body]);
    decoder.finish();
  });
});

Deno.test("FrameDecoder accepts a zero-length frame", () => {
  const decoder = new FrameDecoder(0);
  assert.deepEqual(decoder.push(new Uint8Array([0, 0, 0, 0, 0, 0])), [new Uint8Array(0)]);
  assert.deepEqual(decoder.push(new Uint8Array([0, 0])), [new Uint8Array(0)]);
  decoder.finish();
});

Deno.test("FrameDecoder accepts a frame of exactly maxFrameBytes", () => {
  assert.deepEqual(decodeAll([encodeFrame(bytesOf(100), 100)], 100), [bytesOf(100)]);
});

Deno.test("FrameDecoder rejects an oversize header before buffering any body byte", async (t) => {
  const length = MAX_WORKER_FRAME_BYTES + 1;
  const expected = `frame length ${length} exceeds ${MAX_WORKER_FRAME_BYTES} bytes`;
  const isOversize = (error: unknown) => error instanceof FrameError && error.detail === expected;
  await t.step("header and 1 MiB of body in one chunk", () => {
    const decoder = new FrameDecoder(MAX_WORKER_FRAME_BYTES);
    const chunk = concat([header(length), new Uint8Array(1 << 20)]);
    assert.throws(() => decoder.push(chunk), isOversize);
    assert.ok(decoder.buffered <= 4);
  });
  await t.step("header in 1-byte chunks", () => {
    const decoder = new FrameDecoder(MAX_WORKER_FRAME_BYTES);
    const bytes = header(length);
    for (let i = 0; i < 3; i++) assert.deepEqual(decoder.push(bytes.subarray(i, i + 1)), []);
    assert.throws(() => decoder.push(concat([bytes.subarray(3), new Uint8Array(64)])), isOversize);
    assert.ok(decoder.buffered <= 4);
  });
  await t.step("the largest header, after a valid frame", () => {
    const decoder = new FrameDecoder(8);
    assert.deepEqual(decoder.push(encodeFrame(bytesOf(8), 8)), [bytesOf(8)]);
    assert.throws(
      () => decoder.push(new Uint8Array([0xff, 0xff, 0xff, 0xff, 1])),
      (error: unknown) =>
        error instanceof FrameError && error.detail === "frame length 4294967295 exceeds 8 bytes",
    );
    assert.ok(decoder.buffered <= 4);
  });
});

Deno.test("FrameDecoder.setMaxFrameBytes() applies from the next header on", () => {
  const decoder = new FrameDecoder(8);
  const first = encodeFrame(bytesOf(8), 8);
  const second = encodeFrame(bytesOf(20), 20);
  // The first frame and half of the second's header arrive before the limit is raised.
  assert.deepEqual(decoder.push(concat([first, second.subarray(0, 2)])), [bytesOf(8)]);
  decoder.setMaxFrameBytes(20);
  assert.deepEqual(decoder.push(second.subarray(2)), [bytesOf(20)]);
  decoder.setMaxFrameBytes(10);
  assert.throws(
    () => decoder.push(second),
    (error: unknown) => error instanceof FrameError && error.detail === "frame length 20 exceeds 10 bytes",
  );
  assert.throws(() => new FrameDecoder(8).setMaxFrameBytes(-1), RangeError);
});

Deno.test("FrameDecoder.finish() rejects EOF inside a header", () => {
  const decoder = new FrameDecoder(64);
  decoder.push(new Uint8Array([0, 0]));
  assert.throws(
    () => decoder.finish(),
    (error: unknown) =>
      error instanceof FrameError &&
      error.detail === "unexpected end of stream inside a frame (header: 2 of 4 bytes)",
  );
});

Deno.test("FrameDecoder.finish() rejects EOF inside a body", () => {
  const decoder = new FrameDecoder(64);
  decoder.push(encodeFrame(bytesOf(10), 64).subarray(0, 7));
  assert.equal(decoder.buffered, 3);
  assert.throws(
    () => decoder.finish(),
    (error: unknown) =>
      error instanceof FrameError &&
      error.detail === "unexpected end of stream inside a frame (body: 3 of 10 bytes)",
  );
});

Deno.test("FrameDecoder.finish() accepts EOF at a frame boundary", () => {
  new FrameDecoder(64).finish();
  const decoder = new FrameDecoder(64);
  decoder.push(encodeAll([bytesOf(3), bytesOf(4)], 64));
  decoder.push(new Uint8Array(0));
  decoder.finish();
});

Deno.test("FrameDecoder stays failed after a FrameError", () => {
  const decoder = new FrameDecoder(4);
  assert.throws(() => decoder.push(header(5)), FrameError);
  assert.throws(
    () => decoder.push(encodeFrame(bytesOf(1), 4)),
    (error: unknown) =>
      error instanceof FrameError &&
      error.detail === "frame decoder already failed: frame length 5 exceeds 4 bytes" &&
      error.cause instanceof FrameError,
  );
  assert.throws(() => decoder.push(new Uint8Array(0)), FrameError);
  assert.throws(() => decoder.finish(), FrameError);

  const truncated = new FrameDecoder(4);
  truncated.push(new Uint8Array([0]));
  assert.throws(() => truncated.finish(), FrameError);
  assert.throws(() => truncated.finish(), FrameError);
  assert.throws(() => truncated.push(new Uint8Array([0, 0, 0])), FrameError);
});

Deno.test("FrameDecoder rejects use after finish() and non-Uint8Array chunks", () => {
  const decoder = new FrameDecoder(4);
  // @ts-expect-error a plain array, as an untyped caller might pass: refused at run time
  assert.throws(() => decoder.push([0, 0, 0, 0]), TypeError);
  decoder.finish();
  assert.throws(() => decoder.push(new Uint8Array(0)), TypeError);
  assert.throws(() => decoder.finish(), TypeError);
});

Deno.test("FrameDecoder copies frames by default, so a reused chunk cannot change them", () => {
  const chunk = encodeFrame(new Uint8Array([1, 2, 3]), 8);
  const [copied] = new FrameDecoder(8).push(chunk);
  const [view] = new FrameDecoder(8, { copy: false }).push(chunk);
  chunk.fill(0);
  assert.deepEqual(copied, new Uint8Array([1, 2, 3]));
  assert.deepEqual(view, new Uint8Array([0, 0, 0]));
  assert.equal(view.buffer, chunk.buffer);
});

Deno.test("FrameDecoder fills a large frame in place from many small chunks", () => {
  const body = bytesOf(1 << 20);
  const bytes = encodeFrame(body, MAX_WORKER_FRAME_BYTES);
  const decoder = new FrameDecoder(MAX_WORKER_FRAME_BYTES);
  const frames: Uint8Array[] = [];
  for (let offset = 0; offset < bytes.length; offset += 100) {
    frames.push(...decoder.push(bytes.subarray(offset, offset + 100)));
    if (frames.length === 0) assert.equal(decoder.buffered, Math.max(0, offset + 100 - 4));
  }
  decoder.finish();
  assert.equal(frames.length, 1);
  assert.deepEqual(frames[0], body);
});

Deno.test("scenario 112: 1-byte chunks, several frames per chunk, oversize header, EOF", () => {
  const max = 1024;
  const bodies = [bytesOf(1), bytesOf(1024, 3), new Uint8Array(0), bytesOf(17, 4)];
  const bytes = encodeAll(bodies, max);
  const oneByte = new FrameDecoder(max);
  const fromOneByte: Uint8Array[] = [];
  for (const byte of bytes) fromOneByte.push(...oneByte.push(new Uint8Array([byte])));
  oneByte.finish();
  assert.deepEqual(fromOneByte, bodies);
  assert.deepEqual(decodeAll([bytes], max), bodies);

  const oversize = new FrameDecoder(max);
  assert.throws(() => oversize.push(concat([header(max + 1), bytesOf(max + 1)])), FrameError);
  assert.ok(oversize.buffered <= 4);

  const truncated = new FrameDecoder(max);
  truncated.push(bytes.subarray(0, bytes.length - 1));
  assert.throws(() => truncated.finish(), FrameError);
});

Deno.test("readFrames() yields the frames of a stream and releases the lock", async () => {
  const bodies = [bytesOf(5), new Uint8Array(0), bytesOf(70_000, 2)];
  const bytes = encodeAll(bodies);
  const stream = streamOf(split(bytes, [1, 3, 9, 10, 20, 5000, 60_000]));
  assert.deepEqual(await Array.fromAsync(readFrames(stream, MAX_WORKER_FRAME_BYTES)), bodies);
  assert.equal(stream.locked, false);
});

Deno.test("readFrames() of an empty stream yields nothing", async () => {
  assert.deepEqual(await Array.fromAsync(readFrames(streamOf([]), 8)), []);
});

Deno.test("readFrames() throws FrameError on EOF inside a frame and releases the lock", async () => {
  const stream = streamOf([encodeAll([bytesOf(3)], 8), new Uint8Array([0, 0, 0, 4, 1])]);
  const frames: Uint8Array[] = [];
  await assert.rejects(
    async () => {
      for await (const frame of readFrames(stream, 8)) frames.push(frame);
    },
    (error: unknown) =>
      error instanceof FrameError &&
      error.detail === "unexpected end of stream inside a frame (body: 1 of 4 bytes)",
  );
  assert.deepEqual(frames, [bytesOf(3)]);
  assert.equal(stream.locked, false);
});

Deno.test("readFrames() throws FrameError on an oversize header", async () => {
  let pulls = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      pulls++;
      controller.enqueue(pulls === 1 ? header(9) : new Uint8Array(1));
    },
  }, { highWaterMark: 0 });
  await assert.rejects(() => Array.fromAsync(readFrames(stream, 8)), FrameError);
  assert.equal(pulls, 1);
  assert.equal(stream.locked, false);
  await stream.cancel();
});

Deno.test("readFrames() rethrows a stream error as is and releases the lock", async () => {
  const failure = new Error("pipe broke");
  const stream = streamOf([encodeFrame(bytesOf(2), 8)], failure);
  const frames: Uint8Array[] = [];
  await assert.rejects(async () => {
    for await (const frame of readFrames(stream, 8)) frames.push(frame);
  }, (error: unknown) => error === failure);
  assert.deepEqual(frames, [bytesOf(2)]);
  assert.equal(stream.locked, false);
});

Deno.test("readFrames() reads no further while the consumer holds a frame", async () => {
  let pulls = 0;
  const frame = encodeFrame(bytesOf(4), 8);
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      pulls++;
      controller.enqueue(concat([frame, frame]));
    },
  }, { highWaterMark: 0 });
  const frames = readFrames(stream, 8);
  assert.deepEqual((await frames.next()).value, bytesOf(4));
  assert.deepEqual((await frames.next()).value, bytesOf(4));
  await Promise.resolve();
  assert.equal(pulls, 1);
  assert.deepEqual((await frames.next()).value, bytesOf(4));
  assert.equal(pulls, 2);
  await frames.return();
  assert.equal(stream.locked, false);
  await stream.cancel();
});

Deno.test("property: random frames with random chunk splits round-trip exactly", () => {
  fc.assert(
    fc.property(
      fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 12 }),
      fc.array(fc.nat({ max: 4000 }), { maxLength: 40 }),
      fc.boolean(),
      (bodies, cuts, copy) => {
        const bytes = encodeAll(bodies, 300);
        const decoder = new FrameDecoder(300, { copy });
        const frames = split(bytes, cuts).flatMap((chunk) => decoder.push(chunk));
        decoder.finish();
        assert.deepEqual(frames, bodies);
        assert.equal(decoder.buffered, 0);
      },
    ),
    { numRuns: 500 },
  );
});

/**
 * Valid frame streams with one defect or none: truncated, a byte overwritten, or bytes appended.
 * Pure random bytes almost always start with an oversize header; these reach the other states.
 */
const nearlyValidStream = fc.tuple(
  fc.array(fc.uint8Array({ maxLength: 200 }), { maxLength: 6 }),
  fc.constantFrom("none", "truncate", "overwrite", "append"),
  fc.nat(),
  fc.nat({ max: 255 }),
).map(([bodies, defect, at, byte]) => {
  const bytes = encodeAll(bodies, 256);
  switch (defect) {
    case "truncate":
      return bytes.subarray(0, at % (bytes.length + 1));
    case "overwrite":
      if (bytes.length > 0) bytes[at % bytes.length] = byte;
      return bytes;
    case "append":
      return concat([bytes, new Uint8Array(1 + (at % 6)).fill(byte)]);
    default:
      return bytes;
  }
});

Deno.test("property: random bytes with random splits yield frames or a FrameError", () => {
  fc.assert(
    fc.property(
      fc.oneof(fc.uint8Array({ maxLength: 600 }), nearlyValidStream),
      fc.array(fc.nat({ max: 600 }), { maxLength: 30 }),
      fc.integer({ min: 0, max: 256 }),
      (bytes, cuts, max) => {
        const decoder = new FrameDecoder(max);
        const frames: Uint8Array[] = [];
        try {
          for (const chunk of split(bytes, cuts)) {
            frames.push(...decoder.push(chunk));
            assert.ok(decoder.buffered <= Math.max(4, max));
          }
          decoder.finish();
        } catch (error) {
          if (!(error instanceof FrameError)) throw error;
          assert.ok(decoder.buffered <= 4);
          return;
        }
        // Orderly end: the bytes were exactly a sequence of valid frames.
        assert.ok(frames.every((frame) => frame.length <= max));
        assert.deepEqual(encodeAll(frames, max), bytes);
      },
    ),
    { numRuns: 1000 },
  );
});

Deno.test("property: decoding is independent of the chunking", () => {
  fc.assert(
    fc.property(
      fc.uint8Array({ maxLength: 200 }),
      fc.array(fc.nat({ max: 200 }), { maxLength: 20 }),
      (bytes, cuts) => {
        const outcome = (chunks: Uint8Array[]) => {
          try {
            return { frames: decodeAll(chunks, 64) };
          } catch (error) {
            if (!(error instanceof FrameError)) throw error;
            return { error: error.detail };
          }
        };
        const whole = outcome([bytes]);
        const chunked = outcome(split(bytes, cuts));
        if ("error" in whole) assert.equal(chunked.error, whole.error);
        else assert.deepEqual(chunked, whole);
      },
    ),
    { numRuns: 500 },
  );
});

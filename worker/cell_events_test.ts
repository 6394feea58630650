import assert from "node:assert/strict";
import { Worker } from "node:worker_threads";
import { encodeFrame, FrameDecoder, FrameError } from "../proto/frame_codec.ts";
import { createWorkerCodec } from "../proto/worker_codec.ts";
import {
  DEFAULT_MAX_FRAME_BYTES as MAX_FRAME_BYTES,
  encodeCellFrames,
  encodeStoredWrites,
  FrameScratch,
  LINE_END,
  tryLock,
  unlock,
  wireCellEvents,
  writeLocked,
} from "./cell_events.ts";
import { type CellOutput, SINK_LOCK, SINK_WORDS } from "./cell_protocol.ts";
import { STORE_BATCH_UNITS, storeBatchEnd } from "../proto/store_batches.ts";

const codec = createWorkerCodec();

function decodeAll(bytes: Uint8Array, maxFrameBytes = MAX_FRAME_BYTES) {
  const decoder = new FrameDecoder(maxFrameBytes);
  const frames = decoder.push(bytes);
  decoder.finish();
  return frames.map((frame) => codec.decodeWorkerToHost(frame).cellEvent);
}

/** One output of every kind a cell posts, with the events the host must read for it. */
const CASES: [CellOutput, object[]][] = [
  [{ t: "started" }, [{ cellId: "7", started: {} }]],
  [{ t: "text", text: "héllo ✓", n: 11 }, [{ cellId: "7", contentItem: { text: "héllo ✓" } }]],
  [{ t: "text", text: "", n: 0 }, [{ cellId: "7", contentItem: { text: "" } }]],
  [{ t: "text", text: "lone \ud800 surrogate", n: 17 }, [{
    cellId: "7",
    contentItem: { text: "lone \ud800 surrogate" },
  }]],
  [{ t: "text", text: "é".repeat(70_000), n: 140_000 }, [{
    cellId: "7",
    contentItem: { text: "é".repeat(70_000) },
  }]],
  [
    { t: "trimmedText", text: { head: "ab", tail: "yz", total: 2 ** 40, jsonExtra: 0 }, n: 4 },
    [{ cellId: "7", contentItem: { trimmedText: { head: "ab", tail: "yz", totalBytes: 2 ** 40 } } }],
  ],
  [
    { t: "trimmedText", text: { head: 'a"', tail: "\n", total: 2 ** 30, jsonExtra: 2 ** 29 }, n: 3 },
    [{
      cellId: "7",
      contentItem: { trimmedText: { head: 'a"', tail: "\n", totalBytes: 2 ** 30, jsonExtraBytes: 2 ** 29 } },
    }],
  ],
  [
    { t: "image", image: { url: "data:image/png;base64,AA==", detail: "low" }, n: 26 },
    [{ cellId: "7", contentItem: { image: { imageUrl: "data:image/png;base64,AA==", detail: "low" } } }],
  ],
  [
    { t: "droppedImage", bytes: 70_000_000, detail: "low", jsonExtra: 0, n: 0 },
    [{ cellId: "7", contentItem: { droppedMedia: { kind: "image", bytes: 70_000_000, detail: "low" } } }],
  ],
  [
    { t: "droppedImage", bytes: 70_000_000, detail: "high", jsonExtra: 3, n: 0 },
    [{
      cellId: "7",
      contentItem: { droppedMedia: { kind: "image", bytes: 70_000_000, detail: "high", jsonExtraBytes: 3 } },
    }],
  ],
  [
    { t: "audio", url: "data:audio/wav;base64,AA==", n: 26 },
    [{ cellId: "7", contentItem: { audioUrl: "data:audio/wav;base64,AA==" } }],
  ],
  [
    { t: "droppedAudio", bytes: 70_000_000, jsonExtra: 0, n: 0 },
    [{ cellId: "7", contentItem: { droppedMedia: { kind: "audio", bytes: 70_000_000 } } }],
  ],
  [
    { t: "droppedAudio", bytes: 70_000_000, jsonExtra: 7, n: 0 },
    [{ cellId: "7", contentItem: { droppedMedia: { kind: "audio", bytes: 70_000_000, jsonExtraBytes: 7 } } }],
  ],
  [{ t: "yield", n: 0 }, [{ cellId: "7", yieldRequested: {} }]],
  [
    { t: "toolCall", id: "tool-1", name: "look_up", input: '{"q":1}', n: 7 },
    [{ cellId: "7", toolCall: { runtimeToolCallId: "tool-1", globalName: "look_up", inputJson: '{"q":1}' } }],
  ],
  [
    { t: "toolCall", id: "tool-2", name: "look_up", n: 0 },
    [{ cellId: "7", toolCall: { runtimeToolCallId: "tool-2", globalName: "look_up" } }],
  ],
  [{ t: "toolResultConsumed", id: "tool-1", n: 0 }, [{ cellId: "7", toolResultConsumed: "tool-1" }]],
  [{ t: "notify", text: "step 2", n: 6 }, [{ cellId: "7", notify: "step 2" }]],
  [
    { t: "result", writes: [["a", "1"], ["b", '{"x":[]}']] },
    [
      {
        cellId: "7",
        storedWrites: { entries: [{ key: "a", valueJson: "1" }, { key: "b", valueJson: '{"x":[]}' }] },
      },
      { cellId: "7", result: {} },
    ],
  ],
  [{ t: "result", writes: [], error: "Error: boom" }, [{
    cellId: "7",
    result: { errorText: "Error: boom" },
  }]],
  [
    { t: "result", writes: [], trimmedError: { head: "E", tail: "!", total: 99_999, jsonExtra: 0 } },
    [{ cellId: "7", result: { trimmedError: { head: "E", tail: "!", totalBytes: 99_999 } } }],
  ],
  [
    { t: "result", writes: [], trimmedError: { head: "E", tail: "!", total: 99_999, jsonExtra: 12 } },
    [{
      cellId: "7",
      result: { trimmedError: { head: "E", tail: "!", totalBytes: 99_999, jsonExtraBytes: 12 } },
    }],
  ],
  [{ t: "stopped" }, []],
  [{ t: "pong" }, []],
];

/** The decoded form of an event: the codec also names the set oneof member. */
function decoded(event: object): object {
  return codec.decodeWorkerToHost(codec.encodeWorkerToHost({ cellEvent: event as never })).cellEvent!;
}

Deno.test("every cell output maps to its CellEvents, and the frames a cell writes decode to them (with exited after a result)", () => {
  for (const [output, events] of CASES) {
    assert.deepEqual(wireCellEvents("7", output), events, output.t);
    const expected = events.map(decoded);
    if (output.t === "result") expected.push(decoded({ cellId: "7", exited: { reason: "normal" } }));
    assert.deepEqual(decodeAll(encodeCellFrames("7", [output], MAX_FRAME_BYTES)), expected, output.t);
  }
});

Deno.test("a cell's frames are byte for byte the runtime's own frames, joined in order", () => {
  const outputs: CellOutput[] = CASES.map(([output]) => output);
  const frames: Uint8Array[] = [];
  for (const output of outputs) {
    const events = wireCellEvents("12", output);
    if (output.t === "result") events.push({ cellId: "12", exited: { reason: "normal" } });
    for (const event of events) {
      frames.push(
        encodeFrame(codec.encodeWorkerToHost({ cellEvent: event, lineEnd: LINE_END }), MAX_FRAME_BYTES),
      );
    }
  }
  const expected = new Uint8Array(frames.reduce((n, f) => n + f.length, 0));
  frames.reduce((at, f) => (expected.set(f, at), at + f.length), 0);
  assert.deepEqual(encodeCellFrames("12", outputs, MAX_FRAME_BYTES), expected);
});

Deno.test("every frame ends with a newline byte, so Deno's line-buffered stdout writes it in one write()", () => {
  for (const [output] of CASES) {
    const bytes = encodeCellFrames("7", [output], MAX_FRAME_BYTES);
    let at = 0;
    while (at < bytes.length) {
      const length = new DataView(bytes.buffer, bytes.byteOffset + at).getUint32(0);
      at += 4 + length;
      assert.equal(bytes[at - 1], 0x0a, `a frame of ${output.t} ends with a newline`);
    }
    assert.equal(at, bytes.length);
    // The host's decoder takes the field and leaves the event as it was.
    for (const frame of new FrameDecoder(MAX_FRAME_BYTES).push(bytes)) {
      assert.equal(codec.decodeWorkerToHost(frame).lineEnd, LINE_END);
    }
  }
});

Deno.test("with a scratch buffer, each call's frames are right until the next call; large ones get their own buffer", () => {
  const scratch = new FrameScratch();
  const outputs: CellOutput[][] = [
    [{ t: "started" }, { t: "text", text: "a", n: 1 }],
    [{ t: "text", text: "b".repeat(100_000), n: 100_000 }],
    [{ t: "text", text: "c".repeat(2_000_000), n: 2_000_000 }],
    [{ t: "result", writes: [["k", "1"]] }],
  ];
  let big: Uint8Array | undefined;
  for (const batch of outputs) {
    const frames = encodeCellFrames("3", batch, MAX_FRAME_BYTES, scratch);
    assert.deepEqual([...frames], [...encodeCellFrames("3", batch, MAX_FRAME_BYTES)]);
    if (batch[0].t === "text" && batch[0].n === 2_000_000) big = frames;
  }
  // Over the size kept: not overwritten by the later call.
  assert.deepEqual(decodeAll(big!)[0]!.contentItem, { item: "text", text: "c".repeat(2_000_000) });
});

Deno.test("a frame over the limit is refused (the cell then posts the output whole)", () => {
  assert.throws(
    () =>
      encodeCellFrames(
        "1",
        [{ t: "text", text: "x".repeat(MAX_FRAME_BYTES), n: MAX_FRAME_BYTES }],
        MAX_FRAME_BYTES,
      ),
    FrameError,
  );
});

Deno.test("the frame limit is the caller's: a raised one lets a larger frame through, a lowered one refuses", () => {
  const text = "x".repeat(MAX_FRAME_BYTES);
  const frames = encodeCellFrames("1", [{ t: "text", text, n: text.length }], MAX_FRAME_BYTES + 1_000);
  const item = decodeAll(frames, MAX_FRAME_BYTES + 1_000)[0]!.contentItem;
  assert.ok(item && "text" in item && item.text === text);
  assert.throws(() => encodeCellFrames("1", [{ t: "text", text: "x".repeat(100), n: 100 }], 50), FrameError);
});

Deno.test("stream lock: one holder at a time; only the holder (or the runtime, for a dead one) releases it", () => {
  const sink = new Int32Array(new SharedArrayBuffer(4 * SINK_WORDS));
  assert.ok(tryLock(sink, 3));
  assert.ok(!tryLock(sink, 4));
  assert.ok(!unlock(sink, 4));
  assert.equal(sink[SINK_LOCK], 3);
  assert.ok(unlock(sink, 3));
  assert.ok(!unlock(sink, 3));
  assert.ok(tryLock(sink, 4));
  assert.ok(unlock(sink, 4));
  const order: string[] = [];
  writeLocked(sink, 5, new Uint8Array([1, 2]), (bytes) => {
    order.push(`write ${bytes.length} as ${sink[SINK_LOCK]}`);
  });
  assert.deepEqual(order, ["write 2 as 5"]);
  assert.equal(sink[SINK_LOCK], 0);
  // A failed write releases the lock too.
  assert.throws(() =>
    writeLocked(sink, 5, new Uint8Array(1), () => {
      throw new Error("EPIPE");
    })
  );
  assert.equal(sink[SINK_LOCK], 0);
});

Deno.test("stream lock: a writer waits while another thread holds the lock and writes once it is released", async () => {
  const sink = new Int32Array(new SharedArrayBuffer(4 * SINK_WORDS));
  // The other thread takes the lock, holds it 150 ms, and releases it.
  const source = `
    import { parentPort, workerData } from "node:worker_threads";
    const sink = workerData;
    Atomics.compareExchange(sink, 0, 0, 9);
    parentPort.postMessage("held");
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 150);
    Atomics.store(sink, 0, 0);
    Atomics.notify(sink, 0);
  `;
  const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(source)}`), {
    workerData: sink,
  });
  const exited = new Promise((resolve) => worker.once("exit", resolve));
  await new Promise((resolve) => worker.once("message", resolve));
  assert.equal(sink[SINK_LOCK], 9);
  const start = performance.now();
  let heldBy = -1;
  writeLocked(sink, 5, new Uint8Array(1), () => heldBy = sink[SINK_LOCK]);
  assert.equal(heldBy, 5);
  assert.ok(performance.now() - start >= 100, "the writer did not wait for the lock");
  assert.equal(sink[SINK_LOCK], 0);
  await exited;
});

Deno.test("stream lock: a write that overflows the stack releases the lock, and a lock a writer left held is its own", () => {
  const sink = new Int32Array(new SharedArrayBuffer(4 * SINK_WORDS));
  // A write that always overflows, tried at each of the deepest frames of a recursion at the
  // stack limit, with 0…7 frames more: the write, or the lock's own calls, run out of stack.
  const burn = (): number => burn() + 1;
  let leftHeld = 0;
  const attempt = (n: number): number => {
    if (n > 0) return attempt(n - 1) + 1;
    try {
      writeLocked(sink, 5, new Uint8Array(1), burn);
    } catch (e) {
      if (sink[SINK_LOCK] !== 0) {
        leftHeld++;
        sink[SINK_LOCK] = 0;
      }
      throw e;
    }
    return 0;
  };
  let depth = 0;
  let deepest = 0;
  const down = (): void => {
    const mine = ++depth;
    deepest = Math.max(deepest, mine);
    try {
      down();
    } catch (e) {
      if (deepest - mine > 3000) throw e;
      attempt(mine % 8);
    }
  };
  assert.throws(down);
  assert.equal(leftHeld, 0);
  // A lock left held by 5 (a write cut short before its release) does not make 5 wait forever.
  Atomics.store(sink, SINK_LOCK, 5);
  let wrote = false;
  writeLocked(sink, 5, new Uint8Array(1), () => wrote = true);
  assert.ok(wrote);
  assert.equal(sink[SINK_LOCK], 0);
});

Deno.test("a result's writes cross in StoredWrites batches of about STORE_BATCH_UNITS code units; each batch encodes as the codec does", () => {
  const writes: [string, string][] = Array.from(
    { length: 30_000 },
    (_, i) => [`key-${i}`, JSON.stringify(i)],
  );
  writes.push(["big", JSON.stringify("é".repeat(STORE_BATCH_UNITS * 2))], ["", "null"]);
  const events = wireCellEvents("4", { t: "result", writes });
  const batches = events.slice(0, -1).map((e) => e.storedWrites!.entries);
  assert.ok(batches.length > 2, `${batches.length} batches`);
  assert.deepEqual(events.at(-1), { cellId: "4", result: {} });
  assert.deepEqual(batches.flat(), writes.map(([key, valueJson]) => ({ key, valueJson })));
  for (const batch of batches) {
    const units = batch.reduce((n, e) => n + e.key.length + e.valueJson.length, 0);
    const last = batch.at(-1)!;
    assert.ok(batch.length === 1 || units - last.key.length - last.valueJson.length < STORE_BATCH_UNITS);
  }
  // The frames a cell writes batch by batch: the runtime's own encoding of the same events.
  let from = 0;
  for (const batch of batches) {
    const end = storeBatchEnd(writes, from);
    assert.equal(end - from, batch.length);
    const frame = encodeStoredWrites("4", writes, from, end, MAX_FRAME_BYTES);
    const expected = encodeFrame(
      codec.encodeWorkerToHost({
        cellEvent: { cellId: "4", storedWrites: { entries: batch } },
        lineEnd: LINE_END,
      }),
      MAX_FRAME_BYTES,
    );
    assert.deepEqual(frame, expected);
    from = end;
  }
  assert.equal(from, writes.length);
});

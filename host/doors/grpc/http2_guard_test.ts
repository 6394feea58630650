import assert from "node:assert/strict";
import process from "node:process";
import { Buffer } from "node:buffer";
import http2 from "node:http2";
import { coalesceWrites, goawayFilter, ResetBudget, withGoawayGuard } from "./http2_guard.ts";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

function frame(type: number, streamId: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header.writeUInt32BE(streamId, 5);
  return Buffer.concat([header, payload]);
}

const settings = frame(0x4, 0, Buffer.alloc(12, 1));
// A HEADERS frame whose payload happens to hold a GOAWAY-looking header: it must pass untouched.
const headers = frame(0x1, 1, Buffer.concat([Buffer.from([0, 0, 8, 7, 0, 0, 0, 0, 0]), Buffer.alloc(40, 2)]));
const goaway = frame(0x7, 0, Buffer.concat([Buffer.alloc(8), Buffer.from("client closing")]));
const data = frame(0x0, 1, Buffer.alloc(300, 3));
const ping = frame(0x6, 0, Buffer.alloc(8, 4));
const stream = Buffer.concat([PREFACE, settings, headers, goaway, data, goaway, ping]);
const expected = Buffer.concat([PREFACE, settings, headers, data, ping]);

function feed(chunks: Buffer[]): { out: Buffer; dropped: number } {
  const out: Buffer[] = [];
  let dropped = 0;
  const filter = goawayFilter((chunk) => out.push(chunk), { onGoaway: () => dropped++ });
  for (const chunk of chunks) filter(chunk);
  return { out: Buffer.concat(out), dropped };
}

Deno.test("goawayFilter removes GOAWAY frames and nothing else, however the stream is split", () => {
  assert.deepEqual(feed([stream]), { out: expected, dropped: 2 });
  // Every single split point, then every two-point split over a coarser grid.
  for (let at = 0; at <= stream.length; at++) {
    assert.deepEqual(
      feed([stream.subarray(0, at), stream.subarray(at)]),
      { out: expected, dropped: 2 },
      `at ${at}`,
    );
  }
  for (let a = 0; a <= stream.length; a += 7) {
    for (let b = a; b <= stream.length; b += 5) {
      const chunks = [stream.subarray(0, a), stream.subarray(a, b), stream.subarray(b)];
      assert.deepEqual(feed(chunks).out, expected, `at ${a}, ${b}`);
    }
  }
  const bytes = [...stream].map((byte) => Buffer.from([byte]));
  assert.deepEqual(feed(bytes), { out: expected, dropped: 2 });
});

Deno.test("goawayFilter passes chunks without a GOAWAY through as the same objects", () => {
  const chunks = [Buffer.concat([PREFACE, settings]), headers, data, ping];
  const out: Buffer[] = [];
  const filter = goawayFilter((chunk) => out.push(chunk));
  for (const chunk of chunks) filter(chunk);
  assert.equal(out.length, chunks.length);
  for (let i = 0; i < chunks.length; i++) assert.equal(out[i], chunks[i]);
});

Deno.test("withGoawayGuard wraps http2.createServer while any listen is in progress, then restores it", async () => {
  const real = http2.createServer;
  const a = Promise.withResolvers<void>();
  const b = Promise.withResolvers<void>();
  const first = withGoawayGuard(() => a.promise);
  const second = withGoawayGuard(() => b.promise);
  assert.notEqual(http2.createServer, real);
  a.resolve();
  await first;
  // The second host is still listening: servers it creates are guarded.
  assert.notEqual(http2.createServer, real);
  assert.equal(http2.createServer().listenerCount("session"), 1);
  b.resolve();
  await second;
  assert.equal(http2.createServer, real);
  assert.equal(http2.createServer().listenerCount("session"), 0);
});

const rst = (streamId: number) => frame(0x3, streamId, Buffer.from([0, 0, 0, 8]));
const open = (streamId: number) => frame(0x1, streamId, Buffer.alloc(10, 5));

Deno.test("goawayFilter stops at the first premature stream reset over budget, however the stream is split", () => {
  const resets = [1, 3, 5, 7].map(rst);
  const input = Buffer.concat([
    PREFACE,
    settings,
    ...[1, 3, 5, 7].map(open),
    resets[0],
    rst(99), // a stream not opened lately: not counted
    resets[1],
    data,
    resets[2],
    ping,
    resets[3],
  ]);
  // With a budget of 2, the third counted RST_STREAM and everything after it is withheld.
  const kept = Buffer.concat([
    PREFACE,
    settings,
    ...[1, 3, 5, 7].map(open),
    resets[0],
    rst(99),
    resets[1],
    data,
  ]);
  const split = (at: number[]) => {
    const out: Buffer[] = [];
    let floods = 0;
    const filter = goawayFilter((chunk) => out.push(chunk), {
      resets: new ResetBudget(2, 0, { now: () => 0 }),
      onResetFlood: () => floods++,
    });
    let from = 0;
    for (const to of [...at, input.length]) filter(input.subarray(from, from = to));
    filter(ping); // after the flood: dropped
    return { out: Buffer.concat(out), floods };
  };
  for (let at = 0; at <= input.length; at++) {
    assert.deepEqual(split([at]), { out: kept, floods: 1 }, `at ${at}`);
  }
});

Deno.test("ResetBudget counts only resets of streams under prematureMs old, refilled at its rate up to its burst", () => {
  let now = 0;
  const budget = new ResetBudget(3, 10, { now: () => now, prematureMs: 1_000 });
  for (let stream = 1; stream <= 11; stream += 2) budget.opened(stream);
  assert.deepEqual([1, 3, 5, 7].map((s) => budget.reset(s)), [true, true, true, false]);
  now = 100; // one token back
  assert.deepEqual([budget.reset(9), budget.reset(11)], [true, false]);
  budget.opened(13);
  now = 1_200; // stream 13 is now 1,100 ms old: its reset is free, and so is one of a stream never seen
  assert.deepEqual([budget.reset(13), budget.reset(15)], [true, true]);
  now = 60_000; // never more than the burst
  for (let stream = 17; stream <= 25; stream += 2) budget.opened(stream);
  assert.deepEqual([17, 19, 21, 23].map((s) => budget.reset(s)), [true, true, true, false]);
});

Deno.test("ResetBudget counts resets of young streams it dropped for room: opening 10,000 ahead and resetting each as it drops out is refused", () => {
  const now = 0;
  const budget = new ResetBudget(200, 33, { now: () => now });
  let next = 1;
  const open = () => {
    budget.opened(next);
    next += 2;
  };
  for (let i = 0; i < 10_000; i++) open();
  let refused = 0;
  for (let oldest = 1; oldest < 2_000; oldest += 2) {
    open(); // drops `oldest` from the recent streams, still young
    if (!budget.reset(oldest)) refused++;
  }
  assert.ok(refused > 700, `refused ${refused} of 1,000`);
  // A stream above every dropped one that the budget never saw (its HEADERS not yet read) is free.
  assert.equal(budget.reset(next + 100), true);
});

/** A socket that records its writes (marked when corked) and uncorks. */
function recordingSocket() {
  const calls: string[] = [];
  const state = { corks: 0 };
  const socket = {
    write: (chunk: Uint8Array) => {
      calls.push(`write ${chunk.length}${state.corks > 0 ? " corked" : ""}`);
      return true;
    },
    cork: () => void state.corks++,
    uncork: () => {
      state.corks--;
      calls.push("uncork");
    },
  };
  return { calls, state, socket };
}

Deno.test("coalesceWrites: the writes of one turn leave in one corked batch, uncorked at the end of the turn", async () => {
  const { calls, state, socket } = recordingSocket();
  coalesceWrites(socket);
  for (let turn = 0; turn < 2; turn++) {
    calls.length = 0;
    for (let i = 0; i < 3; i++) socket.write(new Uint8Array(16_393));
    socket.write(new Uint8Array(9));
    assert.deepEqual(calls, [
      "write 16393 corked",
      "write 16393 corked",
      "write 16393 corked",
      "write 9 corked",
    ]);
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.deepEqual(calls.slice(4), ["uncork"]);
    assert.equal(state.corks, 0);
  }
});

Deno.test("coalesceWrites: a stream's DATA, which Deno writes a tick after its headers, leaves with them", async () => {
  const { calls, socket } = recordingSocket();
  coalesceWrites(socket);
  socket.write(new Uint8Array(14)); // the response's HEADERS
  process.nextTick(() => socket.write(new Uint8Array(30))); // its first DATA frame, deferred
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(calls, ["write 14 corked", "write 30 corked", "uncork"]);
});

Deno.test("coalesceWrites: once stopped (a GOAWAY is about to leave), what is corked leaves at once and later writes leave on their own", () => {
  const { calls, state, socket } = recordingSocket();
  const stop = coalesceWrites(socket);
  socket.write(new Uint8Array(13));
  stop();
  socket.write(new Uint8Array(17));
  assert.deepEqual(calls, ["write 13 corked", "uncork", "write 17"]);
  assert.equal(state.corks, 0);
  stop();
  assert.equal(state.corks, 0, "stopping twice uncorks nothing more");
});

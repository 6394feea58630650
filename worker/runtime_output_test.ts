/**
 * Unit tests of the runtime's own frames ({@link FrameOutput}): order, joining, the stream lock it
 * shares with the cell workers, and a broken output.
 */
import assert from "node:assert/strict";
import { FrameDecoder } from "../proto/frame_codec.ts";
import { createWorkerCodec, type WorkerToHost } from "../proto/worker_codec.ts";
import { DEFAULT_MAX_FRAME_BYTES, tryLock, unlock } from "./cell_events.ts";
import { FrameOutput, RETRY_MS } from "./runtime_output.ts";
import type { Clock } from "../proto/clock.ts";

const codec = createWorkerCodec();

/** A clock whose timers run only when a test says so. */
class StepClock implements Clock {
  readonly timers: { ms: number; callback: () => void }[] = [];
  now(): number {
    return 0;
  }
  setTimeout(callback: () => void, ms: number): number {
    this.timers.push({ ms, callback });
    return this.timers.length;
  }
  clearTimeout(): void {}
  /** Runs the timers armed so far. */
  fire(): void {
    for (const timer of this.timers.splice(0)) timer.callback();
  }
}

function output(write: (bytes: Uint8Array) => void = () => {}) {
  const clock = new StepClock();
  let broken = 0;
  const out = new FrameOutput({
    write,
    clock,
    maxFrameBytes: () => DEFAULT_MAX_FRAME_BYTES,
    onBroken: () => broken++,
  });
  return { out, clock, broken: () => broken };
}

function decodeAll(writes: Uint8Array[]): WorkerToHost[] {
  const decoder = new FrameDecoder(DEFAULT_MAX_FRAME_BYTES);
  return writes.flatMap((bytes) => [...decoder.push(bytes)].map((frame) => codec.decodeWorkerToHost(frame)));
}

Deno.test("FrameOutput writes the frames of one turn in order, joined into one write, each with its line end", async () => {
  const writes: Uint8Array[] = [];
  const { out } = output((bytes) => writes.push(bytes));
  out.send({ pong: { seq: 1 } });
  out.sendCellEvent({ cellId: "7", started: {} });
  assert.equal(writes.length, 0, "written at the end of the turn's microtasks");
  await Promise.resolve();
  assert.equal(writes.length, 1);
  assert.deepEqual(decodeAll(writes), [
    { message: "pong", pong: { seq: 1 }, lineEnd: 10 },
    { message: "cellEvent", cellEvent: { cellId: "7", event: "started", started: {} }, lineEnd: 10 },
  ]);
});

Deno.test("FrameOutput waits for a cell worker that holds the stream lock, then writes", async () => {
  const writes: Uint8Array[] = [];
  const { out, clock } = output((bytes) => writes.push(bytes));
  const cell = out.nextLockId();
  assert.ok(tryLock(out.sink, cell));
  assert.ok(out.isLockedBy(cell));
  out.send({ pong: { seq: 2 } });
  await Promise.resolve();
  assert.equal(writes.length, 0);
  assert.ok(out.hasPending);
  assert.deepEqual(clock.timers.map((t) => t.ms), [RETRY_MS]);
  clock.fire();
  assert.equal(writes.length, 0, "still locked: looks again later");
  unlock(out.sink, cell);
  clock.fire();
  assert.deepEqual(decodeAll(writes), [{ message: "pong", pong: { seq: 2 }, lineEnd: 10 }]);
  assert.ok(!out.hasPending);
});

Deno.test("FrameOutput writes what waited once an ended cell worker's lock is released", () => {
  const writes: Uint8Array[] = [];
  const { out } = output((bytes) => writes.push(bytes));
  const cell = out.nextLockId();
  assert.ok(tryLock(out.sink, cell));
  out.send({ pong: { seq: 3 } });
  out.flush();
  assert.equal(writes.length, 0);
  out.releaseLock(cell);
  assert.equal(writes.length, 1);
  assert.ok(!out.isLockedBy(cell));
});

Deno.test("FrameOutput reports a write that throws as a broken output and frees the lock", () => {
  const { out, broken } = output(() => {
    throw new Error("gone");
  });
  out.send({ pong: { seq: 4 } });
  out.flush();
  assert.equal(broken(), 1);
  const other = out.nextLockId();
  assert.ok(tryLock(out.sink, other), "the main thread's lock was released");
});

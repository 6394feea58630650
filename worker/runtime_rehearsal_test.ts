/**
 * The main thread's rehearsal (`runtime_rehearsal.ts`): run once, as the first spare is created and
 * after it, and nothing of it leaves the process.
 */
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { DEFAULT_MAX_FRAME_BYTES } from "./cell_events.ts";
import { createWorkerCodec } from "../proto/worker_codec.ts";
import { realClock } from "../proto/clock.ts";
import { FrameOutput } from "./runtime_output.ts";
import { CellWorkerPool } from "./runtime_pool.ts";
import { type CellWorkerThread, DEFAULT_RUNTIME_CONFIG } from "./runtime_records.ts";
import { rehearseMainThread } from "./runtime_rehearsal.ts";

/** A cell Worker thread that never boots (no `ready`): the pool only creates and ends it. */
class IdleThread extends EventEmitter {
  postMessage(): void {}
  terminate(): Promise<number> {
    setTimeout(() => this.emit("exit", 1), 0);
    return Promise.resolve(1);
  }
}

Deno.test("the pool rehearses the main thread's cell path once, right after it creates the first spare", async () => {
  const log: string[] = [];
  const written: Uint8Array[] = [];
  const pool = new CellWorkerPool({
    clock: realClock,
    createThread: () => {
      log.push("spare");
      return new IdleThread() as unknown as CellWorkerThread;
    },
    output: new FrameOutput({
      write: (bytes) => void written.push(bytes),
      clock: realClock,
      maxFrameBytes: () => DEFAULT_MAX_FRAME_BYTES,
      onBroken: () => {},
    }),
    config: () => DEFAULT_RUNTIME_CONFIG,
    cellsWriteFrames: true,
    collectGarbage: false,
    retireAfterCells: 10,
    exiting: () => false,
    onExit: () => {},
    anyRunning: () => false,
    rehearse: () => log.push("rehearse"),
  });
  pool.configured();
  pool.configured(); // a second Configure (a replacement runtime's attach): no second rehearsal
  pool.discard(pool.take());
  pool.configured();
  await new Promise((resolve) => setTimeout(resolve, 20));
  pool.dispose();
  assert.deepEqual(log.slice(0, 2), ["spare", "rehearse"]);
  assert.equal(log.filter((entry) => entry === "rehearse").length, 1);
  assert.equal(written.length, 0, "the rehearsal writes nothing");
  await new Promise((resolve) => setTimeout(resolve, 20));
});

Deno.test("rehearseMainThread encodes and decodes without throwing or writing", () => {
  const original = Deno.stdout.writeSync;
  let writes = 0;
  Deno.stdout.writeSync = (bytes: Uint8Array) => (writes++, original.call(Deno.stdout, bytes));
  try {
    rehearseMainThread(createWorkerCodec(), DEFAULT_MAX_FRAME_BYTES);
    rehearseMainThread(createWorkerCodec(), DEFAULT_MAX_FRAME_BYTES);
  } finally {
    Deno.stdout.writeSync = original;
  }
  assert.equal(writes, 0);
});

/**
 * The rehearsal of the runtime's main thread: the code paths of a session's first cell, run once
 * while the runtime waits in the host's warm pool, so that the first cell does not compile them.
 *
 * Runtimes run with `--no-code-cache` (SPEC §9.3), and V8 compiles each function on its first call:
 * without this, a runtime's first cell decoded its `StartCell`, posted its start to the spare and
 * encoded its `started` and `exited` frames for the first time, ~3–5 ms more than a later cell
 * from `StartCell` in to `started` out (measured with per-step timestamps in the runtime). The cell
 * worker has its own rehearsal (`cell_rehearsal.ts`).
 *
 * Nothing leaves the process: the frames are encoded and dropped, the start is posted on a
 * throwaway channel that is closed at once, and no state of the runtime is touched.
 *
 * @module
 */
import { MessageChannel } from "node:worker_threads";
import { encodeFrame, FrameDecoder } from "../proto/frame_codec.ts";
import type { WorkerCodec } from "../proto/worker_codec.ts";
import { LINE_END } from "./cell_events.ts";
import type { CellStart } from "./cell_protocol.ts";
import { StoreReplica } from "./store_snapshot.ts";

/** The cell ID of the rehearsal's frames (never sent). */
const CELL_ID = "rehearsal";

/**
 * Runs the main thread's cell path once: a `StoreUpdate`, a `StartCell`, a `Ping` and a `Configure`
 * frame decoded, a stored-values replica updated, a start posted on a message port, the `started`,
 * `exited` and `pong` frames encoded.
 *
 * @param codec the runtime's worker codec
 * @param maxFrameBytes the frame limit in force
 */
export function rehearseMainThread(codec: WorkerCodec, maxFrameBytes: number): void {
  const channel = new MessageChannel();
  try {
    const decoder = new FrameDecoder(maxFrameBytes);
    const input = [
      codec.encodeHostToWorker({
        storeUpdate: { version: 1, reset: true, entries: [{ key: "k", valueJson: "1" }] },
      }),
      codec.encodeHostToWorker({
        startCell: { cellId: CELL_ID, source: 'text("x")', tools: [], storeVersion: 1 },
      }),
      codec.encodeHostToWorker({ ping: { seq: 1 } }),
      codec.encodeHostToWorker({
        configure: {
          sessionId: CELL_ID,
          outputTruncation: 2,
          cellHeapLimitMb: 1,
          maxMessageBytes: 1,
          maxStoredValueBytes: 1,
          outputEventCredit: 1,
          outputByteCredit: 1,
          maxFrameBytes,
        },
      }),
    ].map((body) => encodeFrame(body, maxFrameBytes));
    for (const bytes of input) {
      for (const frame of decoder.push(bytes)) codec.decodeHostToWorker(frame);
    }
    const replica = new StoreReplica();
    replica.update(true, [{ key: "k", valueJson: "1" }]);
    replica.update(false, [{ key: "k" }]);
    const start: CellStart = {
      t: "start",
      cellId: CELL_ID,
      source: 'text("x")',
      tools: [],
      ...replica.start(),
      maxStoredValueBytes: 1,
      maxMessageBytes: 1,
      maxFrameBytes,
      credit: {
        maxEvents: 1,
        maxBytes: 1,
        trimTextOver: 1,
        keepTextBytes: 1,
        dropMediaOver: 1,
        jsonSizes: false,
      },
    };
    channel.port1.postMessage(start);
    for (
      const event of [
        { cellId: CELL_ID, started: {} },
        { cellId: CELL_ID, exited: { reason: "normal" } },
      ]
    ) {
      encodeFrame(codec.encodeWorkerToHost({ cellEvent: event, lineEnd: LINE_END }), maxFrameBytes);
    }
    encodeFrame(codec.encodeWorkerToHost({ pong: { seq: 1 }, lineEnd: LINE_END }), maxFrameBytes);
  } catch {
    // A rehearsal only saves time; a failure of it changes nothing for the first cell.
  } finally {
    channel.port1.close();
    channel.port2.close();
  }
}

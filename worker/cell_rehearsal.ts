/**
 * The rehearsal of a cell worker: one throwaway cell run before the first real one, so that what
 * V8 compiles on first use is compiled before a cell waits for it.
 *
 * @module
 */
import { MessageChannel } from "node:worker_threads";
import { MIB } from "../proto/bytes.ts";
import { CELL_WORDS } from "./cell_protocol.ts";
import { CellRun } from "./cell_run.ts";

/**
 * The throwaway cell of {@link rehearse}: the helpers and paths most cells take (text output, a
 * stored value, a notification, an awaited promise, a caught error, the result).
 */
const REHEARSAL_SOURCE = [
  'text("x");',
  "text({ a: [1] });",
  'store("k", { a: 1 });',
  'load("k");',
  'notify("n");',
  "await 0;",
  'try { JSON.parse("{"); } catch (e) { text(String(e)); }',
].join("\n");

/** What the rehearsal writes: nothing. */
const NO_BYTES = new Uint8Array(0);

/**
 * Runs one throwaway cell in a throwaway context of this isolate, its output posted into a
 * channel that is closed right after. Every cell runs in a fresh isolate, and V8 compiles each
 * function on its first call, so without this the first `text()`, `postMessage` and result of
 * the real cell compile the helpers, the bootstrap's output path and Deno's `MessagePort` code:
 * ~0.9 ms of a warm Execute, measured with per-hop timestamps. Both contexts run the one compiled
 * helpers script (`cell_realm.ts`), so the real context gets the functions compiled here.
 * Nothing of the rehearsal is reachable from the real context: its own `CellRun`, context and
 * shared words, and no timers (its source sets none).
 */
export function rehearse(): void {
  const channel = new MessageChannel();
  try {
    const run = new CellRun();
    run.prepare();
    run.begin(
      {
        t: "start",
        cellId: "rehearsal",
        source: REHEARSAL_SOURCE,
        tools: [],
        store: [["s", "1"]],
        maxStoredValueBytes: MIB,
        maxMessageBytes: MIB,
        // The cell protocol names the web MessagePort type; this is a node:worker_threads port,
        // which Deno implements as the same class.
        output: channel.port2 as unknown as MessagePort,
        credit: {
          words: new Int32Array(new SharedArrayBuffer(4 * CELL_WORDS)),
          maxEvents: 1_000,
          maxBytes: MIB,
          trimTextOver: 65_536,
          keepTextBytes: 1_024,
          dropMediaOver: 65_536,
        },
      },
      undefined,
      true,
      // The frame encoding and the stdout op, compiled here too; nothing is written.
      () => Deno.stdout.writeSync(NO_BYTES),
    );
  } catch {
    // A rehearsal only saves time; a failure of it changes nothing for the real cell.
  } finally {
    channel.port1.close();
    channel.port2.close();
  }
}

/**
 * The one port through which a cell reaches its session. The session implements it once per cell
 * and hands it to the `Cell` (`cell.ts`), which hands the part the actor calls to its cell
 * actor (`cell_actor.ts`). Each call leaves the cell for the session and does not come back
 * through another adapter:
 *
 * - the actor calls `commit`, `notify`, `invokeTool` and `stop`, and its failure handler calls
 *   `failed` (SPEC §4.12 A9–A10);
 * - the cell calls `credit` (as it acknowledges output), `forget` (a terminal outcome was
 *   delivered) and `closed` (its actor has ended and its isolate has stopped).
 *
 * @module
 */
import type { CellToolCall } from "./cell_channel.ts";
import type { CellState, CompletedEvent } from "./cell_state.ts";
import type { Clock } from "./clock.ts";
import type { ByteBudget, OutputMode } from "../output/output_collector.ts";

/**
 * What a cell needs from its session (SPEC §4.12 host, §6 commits, §7 tool calls and notifications,
 * §8.10 output credit).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import type { CellPort } from "./cell_port.ts";
 * import { realClock } from "./clock.ts";
 *
 * const credits: number[] = [];
 * const port: CellPort = {
 *   clock: realClock,
 *   mode: "client",
 *   maxMessageBytes: 4_194_304,
 *   queue: { capacity: 128, bytes: 2_097_152 },
 *   credit: (events) => void credits.push(events),
 *   commit: (_writes, buildEvent, state) => Promise.resolve(state.commitCompletion(buildEvent, () => {})),
 *   notify: () => {},
 *   invokeTool: () => Promise.resolve(),
 *   stop: () => {},
 *   failed: () => {},
 *   forget: () => {},
 *   closed: () => {},
 * };
 * port.credit(3);
 * assert.deepEqual(credits, [3]);
 * ```
 */
export interface CellPort {
  /** The session's time source. */
  readonly clock: Clock;
  /** The session's output mode. */
  readonly mode: OutputMode;
  /** `maxMessageBytes`: the largest outcome a Client-mode observation can send. */
  readonly maxMessageBytes: number;
  /** The session's share of the host's memory budget, charged for the cell's output. Default: none. */
  readonly budget?: ByteBudget;
  /** Server mode: the cell's event queue bounds (`outputEventQueueCapacity`, `…Bytes`). */
  readonly queue: { readonly capacity: number; readonly bytes: number };
  /**
   * The session's door writes outcomes and delegate requests on one ordered channel (JSON V1):
   * the cell's actor holds a yield's later tool calls and notifications until the yield is
   * written (`CellActorOptions.serialOutcomes`). Default false.
   */
  readonly serialOutcomes?: boolean;
  /** Returns output credit for the cell's next `events` counted events (a `Credit` frame). */
  credit(events: number): void;
  /**
   * Commits the cell's stored-value writes atomically with its completion (SPEC §4.12 A5, §6): it
   * may wait (for the store), then must call `state.commitCompletion(buildEvent, applyWrites)` and
   * return its answer; termination claimed first rejects the commit without calling either.
   */
  commit(
    writes: Map<string, string>,
    buildEvent: () => CompletedEvent,
    state: CellState,
  ): Promise<"committed" | "rejected">;
  /** Publishes a `notify()` of the cell; settles promptly, and soon after `signal` aborts. */
  notify(callId: string, text: string, signal: AbortSignal): void | Promise<void>;
  /** Dispatches a tool call and answers the runtime itself; `signal` aborts on cancellation. */
  invokeTool(call: CellToolCall, signal: AbortSignal): Promise<void>;
  /** Asks the runtime to stop the cell (StopCell; a hard stop follows if it cannot confirm). */
  stop(): void;
  /**
   * The actor's failure handler (SPEC §4.12 A9–A10): the cell's isolate or its runtime ended
   * without a result, or its bootstrap reported a fault. The session decides from the runtime
   * process: alive, or stopped by the host, the failure stays a cell error; a process that died on
   * its own is a session crash (§3.5).
   *
   * @param reason `code-mode V8 runtime thread panicked` or `… ended unexpectedly`
   * @param detail what ended the isolate, when known (for the log)
   */
  failed(reason: string, detail?: string): void;
  /** The cell's terminal outcome was delivered: Wait/Terminate now see it as missing. */
  forget(): void;
  /** The cell's actor has ended and its isolate has stopped (`CellClosed`). */
  closed(): void;
}

/** The part of a {@link CellPort} that the cell actor calls. */
export type CellActorPort = Pick<CellPort, "commit" | "notify" | "invokeTool" | "stop">;

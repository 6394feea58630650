/**
 * How a session stops one of its cells (StopCell, SPEC §4.5): a cell running synchronous code
 * cannot confirm its stop, so its runtime is restarted (a hard stop), or, without a hard stop
 * (in-process isolation, SPEC §9.8), the cell is abandoned. The runtime itself is supervised by
 * `session_runtime.ts`, which calls {@link stopCell}.
 *
 * @module
 */
import type { Cell } from "./cell.ts";
import type { Clock } from "./clock.ts";
import type { Limits } from "./limits.ts";
import type { Logger } from "../ops/log.ts";
import type { RuntimeTransport } from "../runtime/runtime_transport.ts";
import type { HostToWorker } from "../../proto/worker_codec.ts";

/**
 * Cooperative-stop deadlines a cell whose isolate has not begun gets before its runtime is
 * restarted: at least this many `cooperativeStopMs`, and as many as fit in
 * {@link UNSTARTED_STOP_MS}.
 */
const UNSTARTED_STOP_ROUNDS = 5;

/**
 * How long a cell whose isolate has not begun may take to confirm its stop, ms, inside Terminate's
 * 1 s bound (SPEC §4.5) with the default `cooperativeStopMs` (9 deadlines of 100 ms). A runtime that
 * has just sent `Ready` creates its first spare, rehearses and collects its start-up garbage before
 * it reads its next frames: on a loaded machine a session's first cell, stopped at once, was
 * confirmed 325 ms later, or not within 500 ms (5 deadlines), and the restart then ended the
 * session's next cell.
 */
const UNSTARTED_STOP_MS = 900;

/**
 * The session's only running cell has `cooperativeStopMs` / this (2 ms by default) from the StopCell,
 * and at least until its runtime has answered the ping that followed it, to confirm its stop (see
 * {@link stopCell}): an idle or awaiting cell's answer takes one thread hop.
 */
const STOP_CONFIRM_SHARE = 50;

/**
 * A cell is stopped at once only once it began `cooperativeStopMs` / this (20 ms by default) before
 * the stop (see {@link stopCell}).
 */
const SETTLED_SHARE = 5;

/**
 * A hard stop of a cell that did not confirm its stop (SPEC §4.5): its runtime is replaced;
 * `answerFirst`: the cell ends at once, and the kill and the replacement wait a moment
 * (`SessionRuntime.replaceRuntime`).
 */
export interface HardStop {
  kind: "stop";
  cellId: string;
  answerFirst?: boolean;
}

/** The session runtime a cell is stopped in (`SessionRuntime`). */
export interface StoppingRuntime {
  /** The runtime the session's cells run on. */
  readonly current: RuntimeTransport;
  /** Set while a replacement is obtained. */
  readonly restarting: Promise<void> | undefined;
  post(message: HostToWorker): void;
  replaceRuntime(reason: HardStop): void;
}

/** What {@link stopCell} reads of the session. */
export interface StoppingSession {
  /** The session's host-local number (logs). */
  ref: number;
  limits: Limits;
  log: Logger;
  clock: Clock;
  /** The session's cells whose isolate has not stopped, by cell ID. */
  running: ReadonlyMap<string, Cell>;
  /** Whether the session is open. */
  isOpen(): boolean;
}

/**
 * Asks the runtime to stop a cell (StopCell).
 *
 * - The session's only running cell that its runtime reported busy (inside synchronous code for a
 *   while, `worker/cell_busy.ts`) and that has not reported that stretch's end: its runtime is
 *   restarted at once, with no round trip to the runtime (a loaded machine stretches one to
 *   2–8 ms while the spinning thread holds a core). Its outputs came before the report (the cell
 *   writes them to the pipe itself, and the runtime forwards what it posted before it reports), so
 *   the cell ends terminated with all of them. A cell stopped before its runtime reported it is
 *   restarted as that report comes, unless it confirmed its stop first.
 * - Else the session's only running cell, begun `cooperativeStopMs` / {@link SETTLED_SHARE} ago or
 *   more (see {@link stopAlone}): the runtime's answer to a ping sent right after the StopCell says
 *   that every output of the cell is in; a cell that has not confirmed `cooperativeStopMs` /
 *   {@link STOP_CONFIRM_SHARE} later is spinning, and its runtime is restarted at once (no other
 *   cell of the session ends by it).
 * - Else, and as the backstop of a runtime that does not answer, the cell gets
 *   `cooperativeStopMs`; a cell whose isolate has not begun cannot be running code (its runtime
 *   is busy: creating a Worker blocks it ~30 ms, more on a loaded machine), and a restart would
 *   end the session's other cells, so it gets up to {@link UNSTARTED_STOP_MS} (at least
 *   {@link UNSTARTED_STOP_ROUNDS} deadlines).
 *
 * @param cell the cell to stop
 * @param target the session's runtime
 * @param session the session
 */
export function stopCell(cell: Cell, target: StoppingRuntime, session: StoppingSession): void {
  if (!cell.running || !session.isOpen()) return;
  target.post({ stopCell: { cellId: cell.id } });
  const runtime = target.current;
  const { clock, limits } = session;
  const alone = () =>
    !target.restarting && runtime === target.current && runtime.hardStop !== false &&
    session.running.size === 1 && session.isOpen();
  const hardStop = () => target.replaceRuntime({ kind: "stop", cellId: cell.id, answerFirst: true });
  if (alone() && cell.busy) return hardStop();
  // A cell stopped right after it began: a report that comes before its confirmation stops it.
  cell.whenBusy(() => {
    if (cell.running && alone()) hardStop();
  });
  // A cell that began only just may still be evaluating its first statements (on a loaded
  // machine its thread waits for a core): it is not judged spinning from a short silence.
  const settled = cell.beganAt !== undefined &&
    clock.now() - cell.beganAt >= limits.cooperativeStopMs / SETTLED_SHARE;
  if (runtime.flush && runtime.hardStop !== false && session.running.size === 1 && settled) {
    stopAlone(cell, target, session, runtime, runtime.flush());
  }
  stopInRounds(cell, target, session, cell.began);
}

/**
 * Stops the session's only running cell: a cell that has not confirmed (an idle or awaiting cell
 * answers at once; the runtime waits a moment for that answer before it answers the ping) by the
 * runtime's answer (`flushed`), and `cooperativeStopMs` / {@link STOP_CONFIRM_SHARE} after the
 * StopCell, is running code: the runtime is restarted. The cell's output that the runtime
 * had when it read the StopCell came before its answer, so the cell ends terminated with all of
 * it. A cell that another one joined meanwhile is left to the rounds.
 */
function stopAlone(
  cell: Cell,
  target: StoppingRuntime,
  session: StoppingSession,
  runtime: RuntimeTransport,
  flushed: Promise<boolean>,
): void {
  const { clock, limits } = session;
  const deadline = clock.now() + limits.cooperativeStopMs / STOP_CONFIRM_SHARE;
  const stillStopping = () =>
    cell.running && session.isOpen() && runtime === target.current && session.running.size === 1;
  const hardStop = () => {
    if (stillStopping()) target.replaceRuntime({ kind: "stop", cellId: cell.id });
  };
  flushed.then((answered) => {
    // Not answered: the runtime ended, and its end ends the cell.
    if (!answered || !stillStopping()) return;
    const left = deadline - clock.now();
    if (left <= 0) return hardStop();
    clock.setTimeout(hardStop, left);
  });
}

/** Stops a cell in `cooperativeStopMs` deadlines (see {@link stopCell}). */
function stopInRounds(cell: Cell, target: StoppingRuntime, session: StoppingSession, began: boolean): void {
  const { clock, limits } = session;
  const stopMs = limits.cooperativeStopMs;
  // Began before the stop, or seen begun one deadline ago: it had its full deadline.
  let hadDeadline = began;
  let rounds = 0;
  const unstartedRounds = Math.max(UNSTARTED_STOP_ROUNDS, Math.floor(UNSTARTED_STOP_MS / stopMs));
  const check = () => {
    if (!cell.running || !session.isOpen()) return;
    if (hadDeadline || ++rounds >= unstartedRounds) {
      if (target.current.hardStop === false) return abandon(cell, target, session);
      return target.replaceRuntime({ kind: "stop", cellId: cell.id });
    }
    hadDeadline = cell.began;
    clock.setTimeout(check, stopMs);
  };
  clock.setTimeout(check, stopMs);
}

/** Ends a cell that did not confirm its stop, leaving its isolate to the runtime (SPEC §9.8). */
function abandon(cell: Cell, target: StoppingRuntime, session: StoppingSession): void {
  target.current.abandonCell?.(cell.id);
  cell.end({ kind: "default" });
  session.log.warn("cell did not confirm its stop and was abandoned", {
    session_ref: session.ref,
    cell_id: cell.id,
  });
}

/**
 * A cell's busy stretches (`cell_protocol.ts` item 6): how the host learns, ahead of any Terminate,
 * that a cell runs synchronous code, so that it stops a spinning cell at once (SPEC §4.5 hard stop)
 * instead of asking the runtime first: a round trip that a loaded machine stretches to 2–8 ms while
 * the spinning thread holds a core.
 *
 * - The cell thread bumps `CELL_BUSY` as it enters the context (evaluation, a timer, a tool result:
 *   odd, the stretch's number) and as it leaves it (even); a helper call waiting for output credit
 *   leaves it for the wait (the stop word ends that wait: a cooperative stop).
 * - The runtime's main thread looks at the word now and then while cells run and reports a stretch
 *   it saw twice (`busy`, after the cell's own frames and what it posted before), after setting
 *   `CELL_BUSY_REPORTED`; the cell, as that stretch ends, writes `idle` with its number. The two
 *   frames may cross: the host keeps a stretch busy only until an `idle` of the same or a later one.
 * - Neither side waits or notifies: a stretch costs the cell two atomic additions and a load.
 *
 * @module
 */
import { CELL_BUSY, CELL_BUSY_REPORTED } from "./cell_protocol.ts";

/** The cell thread's side of the busy stretches of one cell run. */
export class BusyStretches {
  #words: Int32Array | undefined;
  /** Nested entries (an evaluation enters the context again to drain it). */
  #depth = 0;
  readonly #ended: (stretch: number) => void;

  /** @param ended called with a stretch's number as a stretch the runtime reported ends */
  constructor(ended: (stretch: number) => void) {
    this.#ended = ended;
  }

  /** Counts the stretches of a cell run in `words` (its shared words); none without. */
  open(words: Int32Array | undefined): void {
    this.#words = words;
    this.#depth = 0;
  }

  /** Synchronous code begins (nested calls count once). */
  enter(): void {
    if (this.#depth++ === 0) this.#begin();
  }

  /** The code begun by the matching {@link BusyStretches.enter} is over. */
  leave(): void {
    if (--this.#depth === 0) this.#end();
  }

  /** A wait inside the code (for output credit): the stretch ends for it. */
  pause(): void {
    if (this.#depth > 0) this.#end();
  }

  /** The wait is over: a new stretch begins. */
  resume(): void {
    if (this.#depth > 0) this.#begin();
  }

  #begin(): void {
    const words = this.#words;
    if (words !== undefined && (Atomics.load(words, CELL_BUSY) & 1) === 0) Atomics.add(words, CELL_BUSY, 1);
  }

  #end(): void {
    const words = this.#words;
    if (words === undefined) return;
    const stretch = Atomics.load(words, CELL_BUSY);
    if ((stretch & 1) === 0) return;
    Atomics.add(words, CELL_BUSY, 1);
    if (Atomics.load(words, CELL_BUSY_REPORTED) === stretch) this.#ended(stretch);
  }
}

/**
 * The faults a test arms in the fault runtime (`_fault_runtime.ts`) and how: a cell source marked
 * with {@link faultSource}, and {@link FAULT_SIGNAL} sent to the runtime's process. Folder-private.
 *
 * @module
 */

/** What a marked cell arms. */
export interface Faults {
  /** From now on, every `StopCell` is handled this many milliseconds late. */
  delayStopMs?: number;
  /** The runtime's main thread is kept busy this long before the cell starts (as `new Worker()` keeps it). */
  blockMainMs?: number;
  /**
   * What the runtime does on {@link FAULT_SIGNAL}: write a frame that does not decode; allocate
   * in its main isolate until V8 gives up; end this cell's isolate as if its bootstrap had failed
   * (`Exited{fault}`); or report a `RuntimeFault` with `detail` and exit.
   */
  onSignal?: "garbageFrame" | "exhaustMainHeap" | "faultCell" | "runtimeFault";
  /** The `RuntimeFault`'s detail. */
  detail?: string;
}

/** The signal that fires the armed `onSignal` fault. */
export const FAULT_SIGNAL: Deno.Signal = "SIGUSR2";

/**
 * A cell source that arms `faults` in a fault runtime (and is `source` to any other).
 *
 * @param faults what to arm
 * @param source the cell's own source
 * @returns the marked source
 */
export function faultSource(faults: Faults, source: string): string {
  return `/*fault ${JSON.stringify(faults)}*/ ${source}`;
}

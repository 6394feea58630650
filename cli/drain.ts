/**
 * How a running door comes to an end, the same routine for every door: {@link drain} waits for the
 * door's own end or for a stop request (SIGINT, SIGTERM, the end of the parent process) and
 * resolves with the process's exit code. What a stop request does is the door's
 * {@link StopPolicy}:
 *
 * - `none` (the stdio doors of JSON host V1 and MCP): no signal listener and no parent watch; the
 *   door ends with its client's EOF, and a signal ends the process as Deno's default does.
 * - `one-stage` (MCP over HTTP): every request starts the graceful shutdown; exit 0 once it is
 *   done, 1 if it failed. The parent's end is such a request.
 * - `two-stage` (gRPC): the first request starts the graceful shutdown (SPEC §9.7), exit 0 once it
 *   is done, whatever its outcome; a second one kills every runtime, exit 1. The parent's end logs
 *   `code-mode-host parent process ended; shutting down` and counts as a request.
 *
 * The first exit code decided wins.
 *
 * @module
 */
import type { Logger } from "../host/ops/log.ts";

/** What a stop request does to a door (see the module doc). */
export type StopPolicy = "none" | "one-stage" | "two-stage";

/** A running door, as far as stopping it goes. */
export interface Drainable {
  /** Graceful stop: drain, stop the runtimes, stop serving. */
  shutdown(): Promise<void>;
  /** Immediate stop: kill every runtime, close the server. */
  kill(): Promise<void>;
  /**
   * Resolves with the exit code once the door ended by itself (its client's EOF) and was stopped;
   * never settles for a listener. A rejection is the door's failure.
   */
  ended: Promise<number>;
  stop: StopPolicy;
}

/** Options of {@link drain}. */
export interface DrainOptions {
  /** Whether the end of the parent process is a stop request (`--no-exit-with-parent` turns it off). */
  exitWithParent: boolean;
  log: Logger;
  /** Registers a signal handler (default `Deno.addSignalListener`). */
  onSignal?: (signal: "SIGINT" | "SIGTERM", handler: () => void) => void;
  /** Calls `onGone` once when the parent process ended (default {@link watchParent}). */
  onParentGone?: (onGone: () => void) => void;
}

/**
 * Waits for the door's end or a stop request, as its {@link StopPolicy} says.
 *
 * @param door the running door
 * @param options the parent watch, the logger, and the signal sources
 * @returns the exit code
 * @throws what `door.ended` rejects with
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { Logger } from "../host/ops/log.ts";
 * import { drain } from "./drain.ts";
 *
 * const handlers: (() => void)[] = [];
 * const code = drain(
 *   { shutdown: () => Promise.resolve(), kill: () => Promise.resolve(), ended: new Promise(() => {}), stop: "two-stage" },
 *   { exitWithParent: false, log: new Logger("error"), onSignal: (_, handler) => handlers.push(handler) },
 * );
 * handlers[0]();
 * assert.equal(await code, 0);
 * ```
 */
export function drain(door: Drainable, options: DrainOptions): Promise<number> {
  const { promise, resolve, reject } = Promise.withResolvers<number>();
  // Each of these settles `promise` at most once; the first one decides the exit code.
  door.ended.then(resolve, reject);
  if (door.stop === "none") return promise;
  let requests = 0;
  const request = () => {
    requests++;
    const stopping = door.stop === "one-stage"
      ? door.shutdown().then(() => 0, () => 1)
      : requests === 1
      ? door.shutdown().then(() => 0, () => 0)
      : door.kill().then(() => 1, () => 1);
    stopping.then(resolve);
  };
  const onSignal = options.onSignal ?? ((signal, handler) => Deno.addSignalListener(signal, handler));
  onSignal("SIGINT", request);
  onSignal("SIGTERM", request);
  if (options.exitWithParent) {
    (options.onParentGone ?? watchParent)(() => {
      if (door.stop === "two-stage") options.log.warn("code-mode-host parent process ended; shutting down");
      request();
    });
  }
  return promise;
}

/** How often the host looks whether the process that started it is still there. */
const PARENT_POLL_MS = 250;

/**
 * Calls `onGone` once when this process's parent ends (it is then re-parented: `Deno.ppid`
 * changes). A supervisor that kills `deno task serve`, which runs the host as its child, would
 * otherwise leave the host and its runtimes running. `--no-exit-with-parent` turns it off (a host
 * started in the background by a script that then exits).
 *
 * @param onGone called once
 */
export function watchParent(onGone: () => void): void {
  const parent = Deno.ppid;
  const timer = setInterval(() => {
    if (Deno.ppid === parent) return;
    clearInterval(timer);
    onGone();
  }, PARENT_POLL_MS);
  Deno.unrefTimer(timer);
}

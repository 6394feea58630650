/**
 * The one mapping of failures to what a door sends (STYLE: Errors), shared by every door: the gRPC
 * door sends the status and message, the JSON V1 door the message, and the embedded provider
 * (`embedded/`) hands the client library the status and message the gRPC door would send.
 *
 * - A {@link HostError} becomes the gRPC status of its kind ({@link GRPC_CODE_OF}) and its own
 *   message, the SPEC's exact text; it is not logged (it is an answer, not a fault).
 * - Anything else is a fault of the host: it is logged at `error` with the caller's context and
 *   its stack, and the wire gets `INTERNAL` with {@link INTERNAL_MESSAGE}, never the fault's own
 *   text.
 *
 * Status codes are plain numbers (the gRPC code numbers), so no transport library is needed to
 * read them.
 *
 * @module
 */
import { HostError, type HostErrorCode } from "../core/errors.ts";
import type { LogFields, Logger } from "../ops/log.ts";

/** The gRPC status number of each domain error kind. */
export const GRPC_CODE_OF: Readonly<Record<HostErrorCode, number>> = {
  invalid_request: 3, // INVALID_ARGUMENT
  unknown_session: 5, // NOT_FOUND
  unknown_invocation: 5, // NOT_FOUND
  id_reused: 6, // ALREADY_EXISTS
  session_exists: 6, // ALREADY_EXISTS
  overloaded: 8, // RESOURCE_EXHAUSTED
  too_large: 8, // RESOURCE_EXHAUSTED
  lease_overflow: 8, // RESOURCE_EXHAUSTED
  shutting_down: 14, // UNAVAILABLE
  session_closed: 1, // CANCELLED
  cancelled: 1, // CANCELLED
  cell_busy: 9, // FAILED_PRECONDITION
  unsupported: 9, // FAILED_PRECONDITION
  catalog: 9, // FAILED_PRECONDITION (as Codex's own host answers)
  session_crashed: 13, // INTERNAL
  runtime_failed: 13, // INTERNAL
  internal: 13, // INTERNAL
};

/** gRPC's `INTERNAL`, the status of a failure the host did not expect. */
const INTERNAL = 13;

/** The message a door sends for a failure the host did not expect. */
export const INTERNAL_MESSAGE = "code-mode host internal error";

/** What a door sends for a failure. */
export interface WireError {
  /** The gRPC status number. */
  code: number;
  /** The message. */
  message: string;
}

/**
 * What a door sends for `error` (see the module doc); a failure the host did not expect is logged.
 *
 * @param error what was thrown
 * @param log where an unexpected failure goes, with its stack
 * @param context what the door was doing (e.g. `{ rpc: "/codex.code_mode.v1.CodeModeHost/Wait" }`);
 *   no session ID (a bearer capability, logged only at `debug`)
 * @returns the status and message to send
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { HostError } from "../core/errors.ts";
 * import { Logger } from "../ops/log.ts";
 *
 * const lines: string[] = [];
 * const log = new Logger("info", (line) => lines.push(line));
 * assert.deepEqual(wireError(new HostError("unknown_session", "unknown code-mode session x"), log, {}), {
 *   code: 5,
 *   message: "unknown code-mode session x",
 * });
 * assert.deepEqual(wireError(new TypeError("x is undefined"), log, { rpc: "/X" }), {
 *   code: 13,
 *   message: "code-mode host internal error",
 * });
 * assert.equal(JSON.parse(lines[0]).rpc, "/X");
 * ```
 */
export function wireError(error: unknown, log: Logger, context: LogFields): WireError {
  if (error instanceof HostError) return { code: GRPC_CODE_OF[error.code], message: error.message };
  log.error("unexpected failure in an RPC", {
    ...context,
    error: error instanceof Error ? error.stack ?? String(error) : String(error),
  });
  return { code: INTERNAL, message: INTERNAL_MESSAGE };
}

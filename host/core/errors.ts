/**
 * The host's domain error (STYLE: Errors): what went wrong in the session core, named for the
 * domain, with the SPEC's exact message. Each front door maps the codes to its own wire form (the
 * gRPC door: `host/doors/grpc/errors.ts`); nothing here knows a transport.
 *
 * The client library's public error is `CodeModeError` in `proto/errors.ts`; this one never
 * leaves the host.
 *
 * @module
 */

/**
 * What happened, in the domain's words.
 *
 * - `invalid_request`: a request field breaks a rule (identifier, limit, tool definition, tool
 *   output JSON, missing oneof member).
 * - `unknown_session`, `unknown_invocation`: a well-formed ID that names nothing.
 * - `id_reused`: an execution, wait or session ID used before; `session_exists`: a client-chosen
 *   session ID that is already open.
 * - `overloaded`: an admission limit (sessions, in-flight requests, active cells, subscriptions).
 * - `too_large`: a tool call does not fit in one message (an outcome that does not is reported by
 *   its size instead: `ExecutionOutcome.oversize`).
 * - `lease_overflow`: the session's event queue was full, so the session closed.
 * - `shutting_down`: the host is draining.
 * - `session_closed`: the session is closing or closed; `cancelled`: the caller's observation was
 *   cancelled (CancelWait, the caller went away).
 * - `cell_busy`: the cell has another observer, or a termination already runs.
 * - `unsupported`: the request asks for something this host's isolation cannot do (a heap limit
 *   in in-process isolation).
 * - `catalog`: an Execute's tool-catalog revision is invalid (0), unknown, or conflicts with the
 *   tools stored under it (`tool_catalog.ts`).
 * - `session_crashed`: the session's runtime ended on its own; `runtime_failed`: a runtime could
 *   not be started; `internal`: anything else the host knows it caused.
 */
export type HostErrorCode =
  | "invalid_request"
  | "unknown_session"
  | "unknown_invocation"
  | "id_reused"
  | "session_exists"
  | "overloaded"
  | "too_large"
  | "lease_overflow"
  | "shutting_down"
  | "session_closed"
  | "cancelled"
  | "cell_busy"
  | "unsupported"
  | "catalog"
  | "session_crashed"
  | "runtime_failed"
  | "internal";

/**
 * A domain failure of the host: a {@link HostErrorCode} and the exact message a client sees.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { HostError } from "./errors.ts";
 *
 * const e = new HostError("unknown_session", "unknown code-mode session x");
 * assert.equal(e.name, "HostError");
 * assert.equal(e.code, "unknown_session");
 * assert.equal(e.message, "unknown code-mode session x");
 * ```
 */
export class HostError extends Error {
  /** What happened. */
  readonly code: HostErrorCode;
  /**
   * Creates the error.
   *
   * @param code what happened
   * @param message the exact message (SPEC wording)
   * @param options `cause`
   */
  constructor(code: HostErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "HostError";
    this.code = code;
  }
}

/** The message of a thrown value (an `Error`'s, else the value as a string). */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

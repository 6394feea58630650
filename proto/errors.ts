/**
 * The one error class of code-mode-host, shared by the host and the client library.
 *
 * - Host side: a domain failure with the gRPC status it maps to (`code`) and the SPEC's exact
 *   message; one mapper turns it into a status at the gRPC boundary.
 * - Client side (SPEC §10.1): every failure of the client library, with `grpcCode` set when a gRPC
 *   status is behind it; `message` is the exact client text.
 *
 * @module
 */

/** gRPC status names, indexed by their numbers. */
const STATUS_NAMES: readonly CodeModeErrorCode[] = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
];

/** A gRPC status name. */
export type CodeModeErrorCode =
  | "OK"
  | "CANCELLED"
  | "UNKNOWN"
  | "INVALID_ARGUMENT"
  | "DEADLINE_EXCEEDED"
  | "NOT_FOUND"
  | "ALREADY_EXISTS"
  | "PERMISSION_DENIED"
  | "RESOURCE_EXHAUSTED"
  | "FAILED_PRECONDITION"
  | "ABORTED"
  | "OUT_OF_RANGE"
  | "UNIMPLEMENTED"
  | "INTERNAL"
  | "UNAVAILABLE"
  | "DATA_LOSS"
  | "UNAUTHENTICATED";

/**
 * A code-mode failure: a status name (when a gRPC status is behind it) and an exact message.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CodeModeError } from "./errors.ts";
 *
 * const e = new CodeModeError("NOT_FOUND", "unknown code-mode session x");
 * assert.equal(e.name, "CodeModeError");
 * assert.equal(e.grpcCode, 5);
 * assert.equal(new CodeModeError(undefined, "code mode session is shutting down").grpcCode, undefined);
 * ```
 */
export class CodeModeError extends Error {
  /** The gRPC status name, if a status is behind this failure. */
  readonly code: CodeModeErrorCode | undefined;
  /** The gRPC status number, if a status is behind this failure. */
  readonly grpcCode: number | undefined;
  /**
   * Creates the error.
   *
   * @param code the gRPC status name, or undefined for a failure without a status
   * @param message the exact message
   * @param options `cause`
   */
  constructor(code: CodeModeErrorCode | undefined, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "CodeModeError";
    this.code = code;
    this.grpcCode = code === undefined ? undefined : STATUS_NAMES.indexOf(code);
  }

  /**
   * The error for a gRPC status number.
   *
   * @param grpcCode the status number
   * @param message the exact message
   * @param options `cause`
   * @returns the error, with `code` set when the number is known
   */
  static fromStatus(grpcCode: number, message: string, options?: ErrorOptions): CodeModeError {
    return new CodeModeError(STATUS_NAMES[grpcCode], message, options);
  }
}

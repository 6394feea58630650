/**
 * Domain errors and the one mapper that turns them into gRPC statuses (STYLE: Errors).
 *
 * @module
 */
import { ServerError, Status } from "nice-grpc";

/** The gRPC status names this host answers with. */
export type CodeModeErrorCode =
  | "INVALID_ARGUMENT"
  | "NOT_FOUND"
  | "ALREADY_EXISTS"
  | "RESOURCE_EXHAUSTED"
  | "CANCELLED"
  | "FAILED_PRECONDITION"
  | "UNAVAILABLE"
  | "UNAUTHENTICATED"
  | "UNIMPLEMENTED"
  | "INTERNAL";

/** A failure with a SPEC status code and exact message. */
export class CodeModeError extends Error {
  /** The gRPC status name. */
  readonly code: CodeModeErrorCode;
  /**
   * Creates a domain error.
   *
   * @param code the gRPC status name
   * @param message the exact SPEC message
   * @param options `cause`, kept for the log
   */
  constructor(code: CodeModeErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "CodeModeError";
    this.code = code;
  }
}

/**
 * Maps any failure to a nice-grpc `ServerError`: domain errors keep their code and message,
 * anything else becomes `INTERNAL` with a short generic message.
 *
 * @param error what was thrown
 * @returns the error to throw from a service method
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const e = toServerError(new CodeModeError("NOT_FOUND", "unknown code-mode session x"));
 * assert.equal(e.details, "unknown code-mode session x");
 * ```
 */
export function toServerError(error: unknown): ServerError {
  if (error instanceof ServerError) return error;
  if (error instanceof CodeModeError) return new ServerError(Status[error.code], error.message);
  return new ServerError(Status.INTERNAL, "code-mode host internal error");
}

/**
 * Domain errors and the one mapper that turns them into gRPC statuses (STYLE: Errors).
 *
 * @module
 */
import { ServerError, Status } from "nice-grpc";

export { CodeModeError, type CodeModeErrorCode } from "../../proto/errors.ts";
import { CodeModeError } from "../../proto/errors.ts";

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
  if (error instanceof CodeModeError && error.code !== undefined) {
    return new ServerError(Status[error.code], error.message);
  }
  return new ServerError(Status.INTERNAL, "code-mode host internal error");
}

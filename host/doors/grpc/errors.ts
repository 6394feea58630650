/**
 * The one place where failures become gRPC statuses (STYLE: Errors): a nice-grpc server
 * middleware over the code-mode service.
 *
 * - A {@link HostError} becomes the status of its code ({@link STATUS_OF}) with its message.
 * - A `ServerError` passes as it is.
 * - Request bytes that are no message of the request type become `INTERNAL`
 *   `failed to decode Protobuf message: …` (prost's text, as Codex's host answers them).
 * - Anything else becomes `INTERNAL` `code-mode host internal error`; its stack is logged.
 * - A streaming call whose client already went away ends quietly: the failure is the client's
 *   cancellation, and nobody is left to receive a status.
 *
 * @module
 */
import {
  type CallContext,
  ServerError,
  type ServerMiddleware,
  type ServerMiddlewareCall,
  Status,
} from "nice-grpc";
import { HostError, type HostErrorCode } from "../../core/errors.ts";
import type { Logger } from "../../ops/log.ts";
import { GRPC_CODE_OF } from "../status_codes.ts";
import { UndecodableRequest } from "../../../proto/loader.ts";

/** The gRPC status of each domain code (the table shared by every door, `../status_codes.ts`). */
export const STATUS_OF: Readonly<Record<HostErrorCode, Status>> = GRPC_CODE_OF as Readonly<
  Record<HostErrorCode, Status>
>;

/** The message of a failure the host did not expect. */
export const INTERNAL_MESSAGE = "code-mode host internal error";

/**
 * Maps a failure to the status a client receives, logging what the host did not expect.
 *
 * @param error what was thrown
 * @param log where an unexpected failure's stack goes
 * @returns the error to end the call with
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { Status } from "nice-grpc";
 * import { HostError } from "../../core/errors.ts";
 * import { Logger } from "../../ops/log.ts";
 *
 * const e = toServerError(new HostError("unknown_session", "unknown code-mode session x"), new Logger());
 * assert.equal(e.code, Status.NOT_FOUND);
 * assert.equal(e.details, "unknown code-mode session x");
 * ```
 */
export function toServerError(error: unknown, log: Logger): ServerError {
  if (error instanceof ServerError) return error;
  if (error instanceof HostError) return new ServerError(STATUS_OF[error.code], error.message);
  log.error("unexpected failure in an RPC", { error: String((error as Error)?.stack ?? error) });
  return new ServerError(Status.INTERNAL, INTERNAL_MESSAGE);
}

/**
 * The error middleware: install it on the code-mode service with `server.with(…)`.
 *
 * @param log where unexpected failures are logged
 * @returns the middleware
 * @example
 * ```ts ignore
 * server.with(errorMiddleware(log)).add(definition, implementation);
 * ```
 */
export function errorMiddleware(log: Logger): ServerMiddleware {
  return async function* <Request, Response>(
    call: ServerMiddlewareCall<Request, Response>,
    context: CallContext,
  ): AsyncGenerator<Response, Response | void, undefined> {
    // Request bytes that are no message of the request type (proto/loader.ts requestDecoder):
    // INTERNAL with prost's text, as Codex's host (tonic) answers them.
    if (call.request instanceof UndecodableRequest) {
      throw new ServerError(Status.INTERNAL, call.request.detail);
    }
    try {
      return yield* call.next(call.request, context);
    } catch (error) {
      if (call.responseStream && context.signal.aborted) return;
      throw toServerError(error, log);
    }
  };
}

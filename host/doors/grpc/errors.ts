/**
 * The one place where failures become gRPC statuses (STYLE: Errors): a nice-grpc server
 * middleware over the code-mode service.
 *
 * - A {@link HostError} becomes the status of its kind with its message, and anything else
 *   `INTERNAL` `code-mode host internal error` with its stack logged: the table every door shares
 *   (`../wire_errors.ts`).
 * - A `ServerError` passes as it is.
 * - Request bytes that are no message of the request type become `INTERNAL`
 *   `failed to decode Protobuf message: …` (prost's text, as Codex's host answers them).
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
import type { HostErrorCode } from "../../core/errors.ts";
import type { LogFields, Logger } from "../../ops/log.ts";
import { GRPC_CODE_OF, wireError } from "../wire_errors.ts";
import { UndecodableRequest } from "../../../proto/loader.ts";

export { INTERNAL_MESSAGE } from "../wire_errors.ts";

/** The gRPC status of each domain code (the table shared by every door, `../wire_errors.ts`). */
export const STATUS_OF: Readonly<Record<HostErrorCode, Status>> = GRPC_CODE_OF;

/**
 * Maps a failure to the status a client receives, logging what the host did not expect.
 *
 * @param error what was thrown
 * @param log where an unexpected failure's stack goes
 * @param context logged with an unexpected failure (default none)
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
export function toServerError(error: unknown, log: Logger, context: LogFields = {}): ServerError {
  if (error instanceof ServerError) return error;
  const { code, message } = wireError(error, log, context);
  return new ServerError(code, message);
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
      throw toServerError(error, log, { rpc: call.method.path });
    }
  };
}

/**
 * Access control of the gRPC server (SPEC §2.5, §9.1): a bearer token required on every RPC of
 * every service (TLS is `tls_terminator.ts`).
 *
 * - With a token, a call whose `authorization` metadata is not exactly `Bearer {token}` fails
 *   `UNAUTHENTICATED` `code-mode host requires a valid token` before anything else runs.
 * - Tokens are compared in constant time (as SHA-256 digests, so lengths leak nothing either) and
 *   never logged.
 *
 * @module
 */
import type { Buffer } from "node:buffer";
import { createHash, timingSafeEqual } from "node:crypto";
import { type CallContext, ServerError, type ServerMiddleware, Status } from "nice-grpc";

/** The status message of a call without the right token. */
export const UNAUTHENTICATED_MESSAGE = "code-mode host requires a valid token";

function digest(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}

/**
 * A constant-time check of an `authorization` header against `Bearer {token}`.
 *
 * @param token the token (already trimmed)
 * @returns a predicate over header values (absent → false)
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { bearerTokenCheck } from "./access.ts";
 *
 * const check = bearerTokenCheck("s3cret");
 * assert.equal(check("Bearer s3cret"), true);
 * assert.equal(check("Bearer other"), false);
 * assert.equal(check(null), false);
 * ```
 */
export function bearerTokenCheck(token: string): (header: string | null | undefined) => boolean {
  const expected = digest(`Bearer ${token}`);
  return (header) => typeof header === "string" && timingSafeEqual(digest(header), expected);
}

/**
 * A server middleware that admits only calls carrying `authorization: Bearer {token}`.
 *
 * @param token the token (already trimmed)
 * @returns the middleware; apply it before adding services
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { bearerTokenMiddleware } from "./access.ts";
 *
 * assert.equal(typeof bearerTokenMiddleware("s3cret"), "function");
 * ```
 */
export function bearerTokenMiddleware(token: string): ServerMiddleware {
  const check = bearerTokenCheck(token);
  return async function* requireToken<Request, Response>(
    call: {
      request: Request;
      next(request: Request, context: CallContext): AsyncGenerator<Response, Response | void, undefined>;
    },
    context: CallContext,
  ) {
    const header = context.metadata.get("authorization");
    if (!check(typeof header === "string" ? header : undefined)) {
      throw new ServerError(Status.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE);
    }
    return yield* call.next(call.request, context);
  } as unknown as ServerMiddleware;
}

/**
 * The gRPC door's share of the JSON log (SPEC §9.1): one `debug` line per RPC, and grpc-js's own
 * messages, which it would otherwise print as plain text on stderr, turned into JSON lines.
 *
 * - The RPC line is `{"msg":"rpc","method":…,"status":…,"duration_ms":…,"session_id":…,
 *   "cell_id":…,"trace_id":…}`, written when the call ends (a stream: when it closes). The
 *   session ID comes from the request or, for OpenSession, from its `opened` event; the cell ID
 *   from the request or from Execute's `started` event; the trace ID from the `traceparent`.
 * - Above `debug` the middleware only passes calls through.
 *
 * @module
 */
import * as grpc from "@grpc/grpc-js";
import {
  type CallContext,
  ServerError,
  type ServerMiddleware,
  type ServerMiddlewareCall,
  Status,
} from "nice-grpc";
import type { Logger } from "../../ops/log.ts";

/** The trace ID of a W3C `traceparent` (`00-<trace id>-<span id>-<flags>`), if it has one. */
function traceId(traceparent: string | undefined): string | undefined {
  return traceparent === undefined ? undefined : /^[0-9a-f]{2}-([0-9a-f]{32})-/.exec(traceparent)?.[1];
}

/**
 * The RPC log middleware; install it outermost, so that it sees the status the client receives.
 *
 * @param log the host's logger
 * @returns the middleware
 * @example
 * ```ts ignore
 * const server = createServer().use(rpcLogMiddleware(log));
 * ```
 */
export function rpcLogMiddleware(log: Logger): ServerMiddleware {
  return async function* <Request, Response>(
    call: ServerMiddlewareCall<Request, Response>,
    context: CallContext,
  ): AsyncGenerator<Response, Response | void, undefined> {
    if (!log.enabled("debug")) return yield* call.next(call.request, context);
    const start = performance.now();
    const request = call.request as { sessionId?: string; cellId?: string } | undefined;
    let sessionId = request?.sessionId || undefined;
    let cellId = request?.cellId || undefined;
    let status = "OK";
    try {
      if (!call.responseStream) return yield* call.next(call.request, context);
      for await (const response of call.next(call.request, context)) {
        const event = response as { opened?: { sessionId?: string }; started?: { cellId?: string } };
        sessionId ??= event?.opened?.sessionId;
        cellId ??= event?.started?.cellId;
        yield response;
      }
    } catch (error) {
      status = error instanceof ServerError ? Status[error.code] : "UNKNOWN";
      throw error;
    } finally {
      if (status === "OK" && context.signal.aborted) status = "CANCELLED";
      log.debug("rpc", {
        method: call.method.path,
        status,
        duration_ms: Math.round((performance.now() - start) * 1_000) / 1_000,
        session_id: sessionId,
        cell_id: cellId,
        trace_id: traceId(context.metadata.get("traceparent")),
      });
    }
  };
}

/**
 * Sends grpc-js's own log into the host's logger: its errors as rate-limited `warn` lines, the
 * rest at `debug`. grpc-js has one logger per process, so the last host started sets it.
 *
 * @param log the host's logger
 */
export function routeGrpcLog(log: Logger): void {
  const text = (message: unknown, rest: unknown[]) => [message, ...rest].map(String).join(" ");
  grpc.setLogger({
    error: (message?: unknown, ...rest: unknown[]) => {
      const line = text(message, rest);
      log.repeated("warn", `grpc-js ${line.slice(0, 80)}`, `grpc-js: ${line}`);
    },
    info: (message?: unknown, ...rest: unknown[]) => log.debug(`grpc-js: ${text(message, rest)}`),
    debug: (message?: unknown, ...rest: unknown[]) => log.debug(`grpc-js: ${text(message, rest)}`),
  });
}

/**
 * The client library's client of `codex.code_mode.v1.CodeModeHost` (`HostClient` in
 * `client/binding.ts`: nice-grpc's calling conventions) whose calls run on a {@link CodeModeCore}
 * in this process: no protobuf encoding, no HTTP/2, no socket. Each method does with its call what
 * the gRPC door (`host/doors/grpc/service.ts`) does with the same RPC, on the message objects
 * themselves (`messages.ts`), and ends the way a gRPC call ends:
 *
 * - A failure reaches the caller as the `ClientError` the gRPC door would send: a domain error's
 *   status and message, anything else `INTERNAL` `code-mode host internal error`, logged (the
 *   table every door shares, `host/doors/wire_errors.ts`).
 * - The caller's signal aborting fails the call with an `AbortError`, as nice-grpc's client does;
 *   the method sees its call's signal abort, as a service sees a cancelled call.
 * - A streaming method runs as a server runs it: pulled on at once, whatever the caller reads, and
 *   on to its end after the caller went away (an Execute abandons its cell there); what it yields
 *   meanwhile waits for the caller, what it yields after cancellation goes nowhere. The response
 *   headers (`onHeader`, empty) come before the first message, or when the method sends them.
 * - A call that runs on after its caller went away is owned here: {@link CoreClient.settled}
 *   awaits it, and its failure is logged at `debug`.
 * - SubscribeToToolCalls sends no heartbeats (the client library never asks for them).
 *
 * @module
 */
import { ClientError, Metadata, ServerError, Status } from "nice-grpc";
import type {
  AcknowledgeNotificationRequestInit,
  CancelWaitRequestInit,
  CloseSessionRequestInit,
  CompleteToolCallRequestInit,
  ExecuteEvent,
  ExecuteRequestInit,
  OpenSessionRequestInit,
  SessionEvent,
  SubscribeToToolCallsRequestInit,
  TerminateRequestInit,
  ToolCall,
  WaitRequestInit,
  WaitResponse,
  YieldObservationRequestInit,
} from "../proto/code_mode_types.ts";
import type { HostClient } from "../client/binding.ts";
import type { CodeModeCore } from "../host/core/code_mode_core.ts";
import type { Logger } from "../host/ops/log.ts";
import { wireError } from "../host/doors/wire_errors.ts";
import { PROCESS_METRICS_UNSUPPORTED } from "../host/doors/grpc/service.ts";
import {
  checkTexts,
  completionRequest,
  decodedExecuteEvent,
  decodedObservation,
  decodedSessionEvent,
  decodedToolCall,
  executeRequest,
  openSessionRequest,
  toolNameFilters,
  waitRequest,
  yieldRequest,
} from "./messages.ts";

/** The path of every method, as a gRPC client names it in its errors. */
const SERVICE = "/codex.code_mode.v1.CodeModeHost/";

/** What a call's abort resolves to. */
const ABORTED: unique symbol = Symbol("aborted");

/** Call options of the client library (what nice-grpc's clients take). */
interface CallOptions {
  signal?: AbortSignal;
  metadata?: Metadata;
  onHeader?: (header: Metadata) => void;
}

/** What a method gets for one call. */
interface Call {
  /** Aborts when the caller goes away: its signal aborted, or it stopped reading the stream. */
  readonly signal: AbortSignal;
  /** The W3C trace parent the caller sent, if any. */
  readonly traceparent: string | undefined;
  /** Sends the (empty) response headers, once. */
  sendHeader(): void;
}

/** A call in progress, as the machinery below sees it. */
interface CallState extends Call {
  /** Resolves to {@link ABORTED} when {@link Call.signal} aborts. */
  readonly aborted: Promise<typeof ABORTED>;
  /** Cancels the call (the caller stopped reading). */
  cancel(): void;
  /** The call is over for its caller: stop listening to the caller's signal. */
  done(): void;
}

function abortError(): Error {
  const error = new Error("The operation has been aborted");
  error.name = "AbortError";
  return error;
}

function startCall(options: CallOptions): CallState {
  const abort = new AbortController();
  const outer = options.signal;
  const onAbort = () => abort.abort();
  if (outer?.aborted) abort.abort();
  else outer?.addEventListener("abort", onAbort, { once: true });
  const aborted = new Promise<typeof ABORTED>((resolve) => {
    if (abort.signal.aborted) resolve(ABORTED);
    else abort.signal.addEventListener("abort", () => resolve(ABORTED), { once: true });
  });
  let headerSent = false;
  return {
    signal: abort.signal,
    traceparent: options.metadata?.get("traceparent") ?? undefined,
    sendHeader() {
      if (headerSent) return;
      headerSent = true;
      options.onHeader?.(Metadata());
    },
    aborted,
    cancel: () => abort.abort(),
    done: () => outer?.removeEventListener("abort", onAbort),
  };
}

/** The core's operations the client calls. */
export type CoreOperations = Pick<
  CodeModeCore,
  | "openSession"
  | "closeSession"
  | "execute"
  | "wait"
  | "terminate"
  | "yieldObservation"
  | "cancelWait"
  | "acknowledgeNotification"
  | "subscribeToToolCalls"
  | "completeToolCall"
>;

/** A client over a core, and what its calls left running. */
export interface CoreClient {
  /** The client, for the client library's provider. */
  readonly client: HostClient;
  /** Resolves once every call still running (its caller gone or not) has ended. */
  settled(): Promise<void>;
}

/**
 * How a method becomes a call with nice-grpc's conventions (see the module doc), and the owner of
 * the calls that run on after their caller.
 */
class Calls {
  readonly #log: Logger;
  /** Every call still running, by a key of its own. */
  readonly #running = new Map<object, Promise<void>>();

  constructor(log: Logger) {
    this.#log = log;
  }

  /** A unary method as a call. */
  unary<Q, R>(name: string, method: (request: Q, call: Call) => Promise<R>) {
    const path = SERVICE + name;
    return async (request: Q, options: CallOptions = {}): Promise<R> => {
      const call = startCall(options);
      const work = (async () => await method(request, call))();
      this.#own(path, work, call);
      try {
        const result = await Promise.race([work, call.aborted]);
        if (result === ABORTED) throw abortError();
        return result;
      } catch (error) {
        if (call.signal.aborted) throw abortError();
        throw this.#failure(path, error);
      } finally {
        call.done();
      }
    };
  }

  /** A streaming method as a call: pulled on at once, its messages queued for the caller. */
  streaming<Q, R>(name: string, method: (request: Q, call: Call) => AsyncIterable<R>) {
    const path = SERVICE + name;
    return (request: Q, options: CallOptions = {}): AsyncIterable<R> => {
      const call = startCall(options);
      const queue: R[] = [];
      let end: { failed: false } | { failed: true; error: unknown } | undefined;
      let wake: (() => void) | undefined;
      const pump = async () => {
        try {
          for await (const message of method(request, call)) {
            if (call.signal.aborted) continue;
            call.sendHeader();
            queue.push(message);
            wake?.();
          }
          if (!call.signal.aborted) call.sendHeader();
          end = { failed: false };
        } catch (error) {
          end = { failed: true, error };
        }
        wake?.();
      };
      this.#own(path, pump(), call);
      const failure = (error: unknown) => this.#failure(path, error);
      return (async function* () {
        try {
          for (;;) {
            while (queue.length === 0 && end === undefined && !call.signal.aborted) {
              await Promise.race([new Promise<void>((resolve) => wake = resolve), call.aborted]);
            }
            if (call.signal.aborted) throw abortError();
            if (queue.length > 0) {
              yield queue.shift()!;
              continue;
            }
            if (end?.failed) throw failure(end.error);
            return;
          }
        } catch (error) {
          if (call.signal.aborted) throw abortError();
          throw error;
        } finally {
          call.cancel();
          call.done();
        }
      })();
    };
  }

  /** Resolves once every call has ended. */
  async settled(): Promise<void> {
    while (this.#running.size > 0) await Promise.all(this.#running.values());
  }

  /** Owns `work` until it ends; a failure after its caller left is logged at debug. */
  #own(path: string, work: Promise<unknown>, call: CallState): void {
    const key = {};
    this.#running.set(
      key,
      (async () => {
        try {
          await work;
        } catch (error) {
          if (!call.signal.aborted) return; // the caller gets it
          this.#log.debug("code-mode in-process call failed after its caller left", {
            rpc: path,
            error: String(error),
          });
        } finally {
          this.#running.delete(key);
        }
      })(),
    );
  }

  /** The `ClientError` a gRPC client would get for `error`. */
  #failure(path: string, error: unknown): ClientError {
    if (error instanceof ServerError) return new ClientError(path, error.code, error.details);
    const { code, message } = wireError(error, this.#log, { rpc: path });
    return new ClientError(path, code, message);
  }
}

async function* openSession(
  core: CoreOperations,
  request: OpenSessionRequestInit,
  call: Call,
): AsyncGenerator<SessionEvent> {
  const lease = await core.openSession(openSessionRequest(request, call.traceparent));
  call.sendHeader();
  for await (const event of lease.events(call.signal)) {
    // A cell ended by its session's closure gets no CellClosed (as from the gRPC door).
    if (event.type === "cellClosed" && event.closing) continue;
    yield decodedSessionEvent(event);
  }
}

async function* execute(
  core: CoreOperations,
  request: ExecuteRequestInit,
  call: Call,
): AsyncGenerator<ExecuteEvent> {
  for await (
    const event of core.execute(executeRequest(request, call.traceparent), { signal: call.signal })
  ) {
    // An Execute whose cell the session's closure ended ends without an outcome.
    if (event.type === "outcome" && event.closing) continue;
    yield decodedExecuteEvent(event);
  }
}

async function* subscribeToToolCalls(
  core: CoreOperations,
  request: SubscribeToToolCallsRequestInit,
  call: Call,
): AsyncGenerator<ToolCall> {
  const toolNames = toolNameFilters(request.sessionId, request.toolNames);
  using subscription = core.subscribeToToolCalls({ sessionId: request.sessionId ?? "", toolNames });
  // The headers tell the client that the subscription is registered (SPEC §7.6 rule 6).
  call.sendHeader();
  for await (const toolCall of subscription.calls(call.signal)) yield decodedToolCall(toolCall);
}

async function terminate(
  core: CoreOperations,
  request: TerminateRequestInit,
  call: Call,
): Promise<WaitResponse> {
  checkTexts([["TerminateRequest.session_id", request.sessionId], [
    "TerminateRequest.cell_id",
    request.cellId,
  ]]);
  const result = await core.terminate({
    sessionId: request.sessionId ?? "",
    cellId: request.cellId ?? "",
    traceparent: call.traceparent,
  });
  return decodedObservation(result);
}

/**
 * Makes the client of a core.
 *
 * @param core the core that serves the calls
 * @param log where failures the host did not expect go
 * @returns the client and its owner's handle
 */
export function coreClient(core: CoreOperations, log: Logger): CoreClient {
  const calls = new Calls(log);
  const client = {
    openSession: calls.streaming(
      "OpenSession",
      (r: OpenSessionRequestInit, call) => openSession(core, r, call),
    ),
    closeSession: calls.unary("CloseSession", async (request: CloseSessionRequestInit) => {
      checkTexts([["CloseSessionRequest.session_id", request.sessionId]]);
      await core.closeSession(request.sessionId ?? "");
      return {};
    }),
    execute: calls.streaming("Execute", (r: ExecuteRequestInit, call) => execute(core, r, call)),
    wait: calls.unary(
      "Wait",
      async (r: WaitRequestInit, call) =>
        decodedObservation(await core.wait(waitRequest(r, call.traceparent), { signal: call.signal })),
    ),
    terminate: calls.unary("Terminate", (r: TerminateRequestInit, call) => terminate(core, r, call)),
    yieldObservation: calls.unary("YieldObservation", (request: YieldObservationRequestInit) => {
      core.yieldObservation(yieldRequest(request));
      return Promise.resolve({});
    }),
    cancelWait: calls.unary("CancelWait", async (request: CancelWaitRequestInit) => {
      checkTexts([["CancelWaitRequest.session_id", request.sessionId], [
        "CancelWaitRequest.wait_id",
        request.waitId,
      ]]);
      await core.cancelWait({ sessionId: request.sessionId ?? "", waitId: request.waitId ?? "" });
      return {};
    }),
    acknowledgeNotification: calls.unary(
      "AcknowledgeNotification",
      (request: AcknowledgeNotificationRequestInit) => {
        checkTexts([
          ["AcknowledgeNotificationRequest.session_id", request.sessionId],
          ["AcknowledgeNotificationRequest.notification_id", request.notificationId],
        ]);
        core.acknowledgeNotification({
          sessionId: request.sessionId ?? "",
          notificationId: request.notificationId ?? "",
        });
        return Promise.resolve({});
      },
    ),
    subscribeToToolCalls: calls.streaming(
      "SubscribeToToolCalls",
      (r: SubscribeToToolCallsRequestInit, call) => subscribeToToolCalls(core, r, call),
    ),
    completeToolCall: calls.unary("CompleteToolCall", (request: CompleteToolCallRequestInit) => {
      core.completeToolCall(completionRequest(request));
      return Promise.resolve({});
    }),
    // As the gRPC door (and Codex's own host) answers it.
    getProcessMetrics: calls.unary(
      "GetProcessMetrics",
      () => Promise.reject(new ServerError(Status.UNIMPLEMENTED, PROCESS_METRICS_UNSUPPORTED)),
    ),
  };
  return { client, settled: () => calls.settled() };
}

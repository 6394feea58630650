/**
 * The gRPC front door of `codex.code_mode.v1.CodeModeHost` (STYLE: gRPC): each method converts
 * the decoded wire message to a core request, calls {@link CodeModeCore}, and converts the result
 * back. Every rule lives in the core; every failure becomes a status in `errors.ts`.
 *
 * What this door adds on the wire, as Codex 0.171's own host does (docs/codex-0.171-wire.md):
 * - `SessionOpened` carries `output_truncation` only for a Server-mode session, and always
 *   `supports_catalog_revision` = true; an `output_truncation` that is no mode is refused
 *   `unknown code-mode output truncation mode` (after the delegate capacity check).
 * - Wait and Terminate answers with a cell's completion carry the response header
 *   `codex-code-mode-result-buffered-for-ns` (how long it waited for an observer).
 * - A tool subscription with `heartbeat_interval_s` > 0 sends a heartbeat (`ToolCall` with
 *   `session_id` and `heartbeat` only) whenever it has sent nothing for that many seconds.
 * - `GetProcessMetrics` answers `UNIMPLEMENTED` `process metrics are unsupported`.
 *
 * @module
 */
import { type CallContext, ServerError, Status } from "nice-grpc";
import {
  type CodeModeHostImplementation,
  type ExecutionOutcomeInit,
  OutputTruncationMode,
  type SessionEventInit,
  type ToolDefinition as WireToolDefinition,
  type ToolName as WireToolName,
  type WaitResponseInit,
} from "../../../proto/code_mode_types.ts";
import type {
  CodeModeCore,
  ExecutionOutcome,
  LeaseEvent,
  ObservationResult,
  ToolDefinition,
  ToolName,
} from "../../core/code_mode_core.ts";
import { CALLBACK_CAPACITY_MESSAGE, outcomeTooLargeMessage } from "../../core/code_mode_core.ts";
import { HostError } from "../../core/errors.ts";

/** The response header of Wait and Terminate with a cell's completion. */
export const RESULT_BUFFERED_HEADER = "codex-code-mode-result-buffered-for-ns";
/**
 * A response message may carry a function under this key: the server's interceptor
 * (`server.ts`) calls it when grpc-js hands the message to the HTTP/2 stream (grpc-js queues a
 * stream's messages and writes them one after another, so a message can wait there after its
 * `write`). The lease uses it so that a notification is on the HTTP/2 stream before the cell's
 * outcome is released (the core waits for the lease to come back for the next event).
 */
export const ON_SENT: unique symbol = Symbol("code-mode message sent");

/** A response object with an {@link ON_SENT} callback. */
export type WithOnSent<T> = T & { [ON_SENT]?: () => void };

/** The answer to GetProcessMetrics, the reference's on Linux. */
export const PROCESS_METRICS_UNSUPPORTED = "process metrics are unsupported";

/** Options of {@link createCodeModeService}. */
export interface ServiceOptions {
  /** The host's operations. */
  core: CodeModeCore;
  /** `--route-token`: sent as the `x-code-mode-route` response header of OpenSession. */
  routeToken?: string;
  /**
   * Whether the transport calls a response's {@link ON_SENT} callback as it writes the response
   * (`server.ts`'s interceptor does). Then the lease asks for the event after a notification only
   * once the notification is written, so the cell's outcome cannot overtake it. Default false: the
   * lease reads on at once (for a caller that queues the messages in order anyway).
   */
  confirmsWrites?: boolean;
}

/** Reads an optional uint64 (decoded as a decimal string) exactly. */
function u64(value: string | undefined): bigint | undefined {
  return value === undefined ? undefined : BigInt(value);
}

/** A tool name as the core takes it (also used by the embedded provider, which has no wire). */
export function toolName(name: WireToolName): ToolName {
  return name.namespace === undefined
    ? { name: name.name ?? "" }
    : { name: name.name ?? "", namespace: name.namespace };
}

/** A tool definition as the core takes it (also used by the embedded provider, which has no wire). */
export function toolDefinition(def: WireToolDefinition): ToolDefinition {
  return {
    name: def.name ?? "",
    toolName: def.toolName === undefined ? undefined : toolName(def.toolName),
    description: def.description,
    kind: def.kind,
    inputSchemaJson: def.inputSchemaJson,
    outputSchemaJson: def.outputSchemaJson,
  };
}

/**
 * The response header that makes nice-grpc send a subscription's header block at once (it sends
 * none when the block is empty); a server that can should remove it before the block is written.
 */
export const SUBSCRIPTION_HEADER = "x-code-mode-subscription";

/**
 * The wire form of an outcome.
 *
 * @throws {ServerError} `OUT_OF_RANGE` for an outcome too large to send (consumed all the same),
 *   with tonic's text, as Codex's own host answers it
 */
function wireOutcome(outcome: ExecutionOutcome): ExecutionOutcomeInit {
  if (outcome.oversize) throw new ServerError(Status.OUT_OF_RANGE, outcomeTooLargeMessage(outcome.oversize));
  const base = {
    cellId: outcome.cellId,
    contentItems: outcome.contentItems,
    codeModeHostDurationNs: outcome.hostDurationNs,
  };
  switch (outcome.kind) {
    case "yielded":
      return { ...base, yielded: {} };
    case "terminated":
      return { ...base, terminated: {} };
    case "completed":
      return { ...base, completed: outcome.errorText === undefined ? {} : { errorText: outcome.errorText } };
  }
}

function wireObservation(result: ObservationResult, context: CallContext): WaitResponseInit {
  const outcome = wireOutcome(result.outcome);
  const buffered = result.outcome.resultBufferedForNs;
  if (result.state === "liveCell" && result.outcome.kind === "completed" && buffered !== undefined) {
    context.header.set(RESULT_BUFFERED_HEADER, String(buffered));
  }
  return result.state === "liveCell" ? { liveCell: outcome } : { missingCell: outcome };
}

/** The session's output mode, or a refusal for a number that is no mode (reference behaviour). */
function outputModeOf(truncation: number | undefined): "client" | "server" {
  switch (truncation) {
    case undefined:
    case OutputTruncationMode.OUTPUT_TRUNCATION_MODE_UNSPECIFIED:
    case OutputTruncationMode.OUTPUT_TRUNCATION_MODE_CLIENT:
      return "client";
    case OutputTruncationMode.OUTPUT_TRUNCATION_MODE_SERVER:
      return "server";
    default:
      throw new HostError("invalid_request", "unknown code-mode output truncation mode");
  }
}

function wireLeaseEvent(event: LeaseEvent): SessionEventInit {
  switch (event.type) {
    case "opened":
      // The reference names the mode only when it is SERVER.
      return {
        opened: event.outputMode === "server"
          ? {
            sessionId: event.sessionId,
            outputTruncation: OutputTruncationMode.OUTPUT_TRUNCATION_MODE_SERVER,
            supportsCatalogRevision: true,
          }
          : { sessionId: event.sessionId, supportsCatalogRevision: true },
      };
    case "toolCallCancelled":
      return { toolCallCancelled: { invocationId: event.invocationId } };
    case "notification": {
      const { notificationId, executionId, cellId, callId, text } = event;
      return { notification: { notificationId, executionId, cellId, callId, text } };
    }
    case "cellClosed": {
      // Like prost, the reference leaves a 0 sequence out.
      const { executionId, cellId, finalToolCallSequence } = event;
      return {
        cellClosed: finalToolCallSequence === 0
          ? { executionId, cellId }
          : { executionId, cellId, finalToolCallSequence },
      };
    }
  }
}

/**
 * Builds the service implementation.
 *
 * @param options the core and the route token
 * @returns methods keyed like the definition from `proto/loader.ts`
 */
export function createCodeModeService(options: ServiceOptions): CodeModeHostImplementation<CallContext> {
  // One table of the service's eleven methods, each a few lines of conversion (the streams with
  // logic of their own are functions below): kept whole, ~80 lines, so the table reads as the service.
  const { core } = options;

  return {
    openSession: (request, context) => leaseStream(options, request, context),

    async closeSession(request) {
      await core.closeSession(request.sessionId ?? "");
      return {};
    },

    execute: (request, context) => executeStream(core, request, context),

    async wait(request, context) {
      return wireObservation(
        await core.wait({
          sessionId: request.sessionId ?? "",
          cellId: request.cellId ?? "",
          waitId: request.waitId ?? "",
          yieldTimeMs: u64(request.yieldTimeMs),
          maxTokens: u64(request.maxTokens),
          traceparent: context.metadata.get("traceparent") ?? undefined,
        }, { signal: context.signal }),
        context,
      );
    },

    async terminate(request, context) {
      return wireObservation(
        await core.terminate({
          sessionId: request.sessionId ?? "",
          cellId: request.cellId ?? "",
          traceparent: context.metadata.get("traceparent") ?? undefined,
        }),
        context,
      );
    },

    yieldObservation(request) {
      core.yieldObservation({
        sessionId: request.sessionId ?? "",
        observation: request.observation === "executionId"
          ? { kind: "execution", executionId: request.executionId }
          : request.observation === "waitId"
          ? { kind: "wait", waitId: request.waitId }
          : undefined,
      });
      return Promise.resolve({});
    },

    async cancelWait(request) {
      await core.cancelWait({ sessionId: request.sessionId ?? "", waitId: request.waitId ?? "" });
      return {};
    },

    acknowledgeNotification(request) {
      core.acknowledgeNotification({
        sessionId: request.sessionId ?? "",
        notificationId: request.notificationId ?? "",
      });
      return Promise.resolve({});
    },

    subscribeToToolCalls: (request, context) => toolCallStream(core, request, context),

    getProcessMetrics() {
      return Promise.reject(new ServerError(Status.UNIMPLEMENTED, PROCESS_METRICS_UNSUPPORTED));
    },

    completeToolCall(request) {
      core.completeToolCall({
        sessionId: request.sessionId ?? "",
        invocationId: request.invocationId ?? "",
        outcome: request.outcome === "succeeded"
          ? { type: "succeeded", outputJson: request.succeeded.outputJson ?? new Uint8Array() }
          : request.outcome === "failed"
          ? { type: "failed", message: request.failed.message ?? "" }
          : undefined,
      });
      return Promise.resolve({});
    },
  };
}

type Method<K extends keyof CodeModeHostImplementation<CallContext>> = CodeModeHostImplementation<
  CallContext
>[K];

/**
 * OpenSession: the session's lease as a stream. With `confirmsWrites`, the event after a
 * notification is asked for only once the notification is on the HTTP/2 stream, so that the cell's
 * outcome (which waits for it) cannot overtake it.
 */
async function* leaseStream(
  options: ServiceOptions,
  request: Parameters<Method<"openSession">>[0],
  context: CallContext,
): ReturnType<Method<"openSession">> {
  const limits = request.cellExecutionLimits;
  const maxPendingDelegateCalls = request.maxPendingDelegateCalls;
  // The reference checks the delegate capacity before the mode.
  if (maxPendingDelegateCalls === 0) throw new HostError("invalid_request", CALLBACK_CAPACITY_MESSAGE);
  const lease = await options.core.openSession({
    outputMode: outputModeOf(request.outputTruncation),
    maxYieldTimeMs: u64(limits?.maxYieldTimeMs),
    maxHeapSizeBytes: u64(limits?.maxHeapSizeBytes),
    maxPendingDelegateCalls,
    traceparent: context.metadata.get("traceparent") ?? undefined,
    // The connection (`runtimeHandover=1`): `IP:PORT` over TCP; one for a Unix socket or stdio.
    client: context.peer,
  });
  if (options.routeToken !== undefined) context.header.set("x-code-mode-route", options.routeToken);
  context.sendHeader();
  const gone = new Promise<void>((resolve) => {
    if (context.signal.aborted) resolve();
    context.signal.addEventListener("abort", () => resolve(), { once: true });
  });
  for await (const event of lease.events(context.signal)) {
    // A cell ended by its session's closure gets no CellClosed on the reference.
    if (event.type === "cellClosed" && event.closing) continue;
    if (event.type !== "notification" || !options.confirmsWrites) {
      yield wireLeaseEvent(event);
      continue;
    }
    // Ask for the next event (which releases the cell's outcome) only once this one is on
    // the HTTP/2 stream.
    const sent = Promise.withResolvers<void>();
    const wire: WithOnSent<SessionEventInit> = wireLeaseEvent(event);
    wire[ON_SENT] = sent.resolve;
    yield wire;
    await Promise.race([sent.promise, gone]);
  }
}

/**
 * SubscribeToToolCalls: the subscription's calls as a stream, with heartbeats when the request
 * asks for them (whenever nothing was sent for the interval; the timer restarts after each message,
 * once it has been written).
 */
async function* toolCallStream(
  core: CodeModeCore,
  request: Parameters<Method<"subscribeToToolCalls">>[0],
  context: CallContext,
): ReturnType<Method<"subscribeToToolCalls">> {
  using subscription = core.subscribeToToolCalls({
    sessionId: request.sessionId ?? "",
    toolNames: request.toolNames?.map(toolName),
  });
  // Headers go out as soon as the subscription is registered (SPEC §7.6 rule 6). nice-grpc
  // sends no header block when it is empty, so name the event in one; the server's
  // interceptor (server.ts) takes the name out again, so the block is empty on the wire, as
  // Codex's host sends it.
  context.header.set(SUBSCRIPTION_HEADER, "registered");
  context.sendHeader();
  const intervalMs = (request.heartbeatIntervalS ?? 0) * 1000;
  if (intervalMs === 0) return yield* subscription.calls(context.signal);
  const calls = subscription.calls(context.signal);
  let next = calls.next();
  try {
    for (;;) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const tick = new Promise<"tick">((resolve) => timer = setTimeout(() => resolve("tick"), intervalMs));
      const result = await Promise.race([next, tick]).finally(() => clearTimeout(timer));
      if (result === "tick") {
        yield { sessionId: subscription.sessionId, heartbeat: {} };
        continue;
      }
      if (result.done) return;
      yield result.value;
      next = calls.next();
    }
  } finally {
    // Closing the subscription ends its stream, which settles the pending `next`.
    subscription.close();
    await calls.return(undefined);
  }
}

/** Execute: `started`, then the outcome (none for a cell its session's closure ended). */
async function* executeStream(
  core: CodeModeCore,
  request: Parameters<Method<"execute">>[0],
  context: CallContext,
): ReturnType<Method<"execute">> {
  const events = core.execute({
    sessionId: request.sessionId ?? "",
    executionId: request.executionId ?? "",
    toolCallId: request.toolCallId ?? "",
    source: request.source ?? "",
    enabledTools: request.enabledTools?.map(toolDefinition),
    yieldTimeMs: u64(request.yieldTimeMs),
    maxOutputTokens: u64(request.maxOutputTokens),
    catalogRevision: u64(request.catalogRevision),
    traceparent: context.metadata.get("traceparent") ?? undefined,
  }, { signal: context.signal });
  for await (const event of events) {
    // An Execute whose cell the session's closure ended ends OK without an outcome, as on the
    // reference.
    if (event.type === "outcome" && event.closing) continue;
    yield event.type === "started"
      ? { started: { executionId: event.executionId, cellId: event.cellId } }
      : { outcome: wireOutcome(event.outcome) };
  }
}

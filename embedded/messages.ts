/**
 * The client library's messages to and from the core's requests and results, for the in-memory
 * client (`core_client.ts`). The client library speaks the `codex.code_mode.v1` messages: it sends
 * them as the encoder takes them (`…Init` in `proto/code_mode_types.ts`) and reads them as the
 * decoder yields them. This module does, on the objects themselves, what the gRPC door
 * (`host/doors/grpc/service.ts`) and the protobuf encoding between them would do, so a session
 * cannot tell the embedded provider from a gRPC host:
 *
 * - 64-bit request fields are read as protobufjs writes a JS number as `uint64` (its integer part
 *   modulo 2^64; NaN and ±Infinity as 0), `uint32` fields modulo 2^32, enums as `int32`.
 * - A request text that is not well-formed UTF-16 (a lone surrogate) has no UTF-8 form: the call
 *   fails `INTERNAL` with prost's text naming the first such field, as the gRPC door refuses the
 *   bytes a client would send for it (`proto/prost_check.ts`).
 * - Fields without presence that a request leaves out read as their default (`""`, none).
 * - Responses are what a decoder yields: 64-bit values as decimal strings, each oneof's member
 *   named (`event`, `outcome`, `state`, `item`, and `_x` for a proto3 `optional` field `x`), and
 *   fields without presence left out at their default, as Codex's host (prost) writes them.
 * - The core's texts need no UTF-8 repair on the way out: they come from the runtime's frames,
 *   UTF-8 already.
 *
 * @module
 */
import { ServerError, Status } from "nice-grpc";
import { DECODE_ERROR_PREFIX } from "../proto/prost_check.ts";
import {
  type CompleteToolCallRequestInit,
  type ContentItem,
  type ExecuteEvent,
  type ExecuteRequestInit,
  type ExecutionOutcome,
  type OpenSessionRequestInit,
  OutputTruncationMode,
  type SessionEvent,
  type ToolCall,
  type ToolDefinitionInit,
  type ToolName,
  type ToolNameInit,
  type WaitRequestInit,
  type WaitResponse,
  type YieldObservationRequestInit,
} from "../proto/code_mode_types.ts";
import {
  CALLBACK_CAPACITY_MESSAGE,
  type CompleteToolCallRequest as CoreCompletion,
  type ContentItem as CoreContentItem,
  type ExecuteEvent as CoreExecuteEvent,
  type ExecuteRequest as CoreExecuteRequest,
  type ExecutionOutcome as CoreOutcome,
  type LeaseEvent,
  type ObservationResult,
  type OpenSessionRequest as CoreOpenRequest,
  outcomeTooLargeMessage,
  type SessionOutputMode,
  type ToolCall as CoreToolCall,
  type ToolDefinition as CoreToolDefinition,
  type ToolName as CoreToolName,
  type WaitRequest as CoreWaitRequest,
  type YieldObservationRequest as CoreYieldRequest,
} from "../host/core/code_mode_core.ts";
import { HostError } from "../host/core/errors.ts";
import { toolDefinition as wireToolDefinition, toolName } from "../host/doors/grpc/service.ts";

// ---- requests ---------------------------------------------------------------------------------

/**
 * A JS number as protobufjs writes it as `uint64`, read back as the core takes it.
 *
 * @param value the field as the client set it
 * @returns the value a decoder would read, or `undefined` for an absent field
 */
export function uint64(value: number | undefined): bigint | undefined {
  if (value === undefined) return undefined;
  return Number.isFinite(value) ? BigInt.asUintN(64, BigInt(Math.trunc(value))) : 0n;
}

/**
 * The texts of a request in the order an encoder writes them, each with prost's name for it
 * (innermost first, as `proto/prost_check.ts` writes a path).
 */
type Texts = Iterable<[path: string, text: string | undefined]>;

/**
 * Refuses a request with a text that has no UTF-8 form, as the gRPC door refuses its bytes.
 *
 * @param texts the request's texts
 * @throws {ServerError} `INTERNAL` `failed to decode Protobuf message: {path}: invalid string value: …`
 */
export function checkTexts(texts: Texts): void {
  for (const [path, text] of texts) {
    if (text === undefined || text.isWellFormed()) continue;
    throw new ServerError(
      Status.INTERNAL,
      `${DECODE_ERROR_PREFIX}${path}: invalid string value: data is not UTF-8 encoded`,
    );
  }
}

function* toolNameTexts(
  name: ToolNameInit | undefined,
  outer: string,
): Generator<[string, string | undefined]> {
  yield [`ToolName.name: ${outer}`, name?.name];
  yield [`ToolName.namespace: ${outer}`, name?.namespace];
}

/** A tool definition as the gRPC door reads it; `kind` as protobufjs writes a JS number (int32). */
function toolDefinition(def: ToolDefinitionInit): CoreToolDefinition {
  return wireToolDefinition({ ...def, kind: def.kind === undefined ? undefined : def.kind | 0 });
}

/** The session's output mode, or the refusal of a number that is no mode (as the gRPC door). */
function outputModeOf(truncation: number | undefined): SessionOutputMode {
  switch (truncation === undefined ? undefined : truncation | 0) {
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

/**
 * An OpenSession for the core; the delegate capacity is checked before the mode, as the gRPC door
 * does.
 *
 * @throws {HostError} `invalid_request` for a capacity of 0 or an unknown mode
 */
export function openSessionRequest(request: OpenSessionRequestInit, traceparent?: string): CoreOpenRequest {
  const limits = request.cellExecutionLimits;
  const capacity = request.maxPendingDelegateCalls === undefined
    ? undefined
    : request.maxPendingDelegateCalls >>> 0;
  if (capacity === 0) throw new HostError("invalid_request", CALLBACK_CAPACITY_MESSAGE);
  return {
    outputMode: outputModeOf(request.outputTruncation),
    maxYieldTimeMs: uint64(limits?.maxYieldTimeMs),
    maxHeapSizeBytes: uint64(limits?.maxHeapSizeBytes),
    maxPendingDelegateCalls: capacity,
    traceparent,
  };
}

/**
 * An Execute for the core.
 *
 * @throws {ServerError} a text without a UTF-8 form
 */
export function executeRequest(request: ExecuteRequestInit, traceparent?: string): CoreExecuteRequest {
  const tools = request.enabledTools ?? [];
  const at = "ExecuteRequest.enabled_tools";
  checkTexts([
    ["ExecuteRequest.session_id", request.sessionId],
    ["ExecuteRequest.execution_id", request.executionId],
    ["ExecuteRequest.tool_call_id", request.toolCallId],
    ["ExecuteRequest.source", request.source],
    ...tools.flatMap((t): [string, string | undefined][] => [
      [`ToolDefinition.name: ${at}`, t.name],
      ...toolNameTexts(t.toolName, `ToolDefinition.tool_name: ${at}`),
      [`ToolDefinition.description: ${at}`, t.description],
    ]),
  ]);
  return {
    sessionId: request.sessionId ?? "",
    executionId: request.executionId ?? "",
    toolCallId: request.toolCallId ?? "",
    source: request.source ?? "",
    enabledTools: tools.map(toolDefinition),
    yieldTimeMs: uint64(request.yieldTimeMs),
    maxOutputTokens: uint64(request.maxOutputTokens),
    catalogRevision: uint64(request.catalogRevision),
    traceparent,
  };
}

/**
 * A Wait for the core.
 *
 * @throws {ServerError} a text without a UTF-8 form
 */
export function waitRequest(request: WaitRequestInit, traceparent?: string): CoreWaitRequest {
  checkTexts([
    ["WaitRequest.session_id", request.sessionId],
    ["WaitRequest.cell_id", request.cellId],
    ["WaitRequest.wait_id", request.waitId],
  ]);
  return {
    sessionId: request.sessionId ?? "",
    cellId: request.cellId ?? "",
    waitId: request.waitId ?? "",
    yieldTimeMs: uint64(request.yieldTimeMs),
    maxTokens: uint64(request.maxTokens),
    traceparent,
  };
}

/**
 * A YieldObservation for the core (the client names one observation, never both).
 *
 * @throws {ServerError} a text without a UTF-8 form
 */
export function yieldRequest(request: YieldObservationRequestInit): CoreYieldRequest {
  checkTexts([
    ["YieldObservationRequest.session_id", request.sessionId],
    ["YieldObservationRequest.observation", request.executionId ?? request.waitId],
  ]);
  return {
    sessionId: request.sessionId ?? "",
    observation: request.executionId !== undefined
      ? { kind: "execution", executionId: request.executionId }
      : request.waitId !== undefined
      ? { kind: "wait", waitId: request.waitId }
      : undefined,
  };
}

/**
 * A CompleteToolCall for the core.
 *
 * @throws {ServerError} a text without a UTF-8 form
 */
export function completionRequest(request: CompleteToolCallRequestInit): CoreCompletion {
  checkTexts([
    ["CompleteToolCallRequest.session_id", request.sessionId],
    ["CompleteToolCallRequest.invocation_id", request.invocationId],
    ["ToolCallFailed.message: CompleteToolCallRequest.outcome", request.failed?.message],
  ]);
  return {
    sessionId: request.sessionId ?? "",
    invocationId: request.invocationId ?? "",
    outcome: request.succeeded !== undefined
      ? { type: "succeeded", outputJson: request.succeeded.outputJson ?? new Uint8Array() }
      : request.failed !== undefined
      ? { type: "failed", message: request.failed.message ?? "" }
      : undefined,
  };
}

/**
 * The tool-name filters of a SubscribeToToolCalls for the core.
 *
 * @throws {ServerError} a text without a UTF-8 form
 */
export function toolNameFilters(
  sessionId: string | undefined,
  names: ToolNameInit[] | undefined,
): CoreToolName[] {
  const at = "SubscribeToToolCallsRequest.tool_names";
  checkTexts([
    ["SubscribeToToolCallsRequest.session_id", sessionId],
    ...(names ?? []).flatMap((name) => [...toolNameTexts(name, at)]),
  ]);
  return (names ?? []).map(toolName);
}

// ---- responses --------------------------------------------------------------------------------

/** A `uint64` as decoded: a decimal string, left out at 0. */
function decodedU64(value: number): string | undefined {
  return value === 0 ? undefined : String(value);
}

/**
 * An object without the fields whose value is `undefined` or a proto3 default (`""`, `0`,
 * `false`, `[]`): what a prost encoding and a decoder leave of fields without presence.
 */
function withoutDefaults<T extends Record<string, unknown>>(fields: T): Partial<T> {
  const out: Partial<T> = {};
  for (const key of Object.keys(fields) as (keyof T)[]) {
    const value = fields[key];
    if (value === undefined || value === "" || value === 0 || value === false) continue;
    if (Array.isArray(value) && value.length === 0) continue;
    out[key] = value;
  }
  return out;
}

function contentItem(item: CoreContentItem): ContentItem {
  if ("text" in item) return { item: "text", text: withoutDefaults({ text: item.text.text }) };
  if ("image" in item) {
    return {
      item: "image",
      image: {
        ...withoutDefaults({ imageUrl: item.image.imageUrl }),
        detail: item.image.detail,
        _detail: "detail",
      },
    };
  }
  return { item: "audio", audio: withoutDefaults({ audioUrl: item.audio.audioUrl }) };
}

/**
 * An outcome as decoded.
 *
 * @param outcome the core's outcome
 * @returns the `ExecutionOutcome` message
 */
export function decodedOutcome(outcome: CoreOutcome): ExecutionOutcome {
  // An outcome too large for a gRPC message fails as the gRPC door answers it (consumed all the same).
  if (outcome.oversize) throw new ServerError(Status.OUT_OF_RANGE, outcomeTooLargeMessage(outcome.oversize));
  const base = withoutDefaults({
    cellId: outcome.cellId,
    contentItems: outcome.contentItems.map(contentItem),
    codeModeHostDurationNs: decodedU64(outcome.hostDurationNs),
  });
  switch (outcome.kind) {
    case "yielded":
      return { ...base, outcome: "yielded", yielded: {} };
    case "terminated":
      return { ...base, outcome: "terminated", terminated: {} };
    case "completed":
      return {
        ...base,
        outcome: "completed",
        completed: outcome.errorText === undefined
          ? {}
          : { errorText: outcome.errorText, _errorText: "errorText" },
      };
  }
}

/**
 * A lease event as decoded (what the gRPC door sends for it: the mode only for a Server-mode
 * session, catalog revisions always supported, a 0 sequence left out).
 *
 * @param event the core's event (a `cellClosed` of a closing session is not sent: the caller drops it)
 * @returns the `SessionEvent` message
 */
export function decodedSessionEvent(event: LeaseEvent): SessionEvent {
  switch (event.type) {
    case "opened":
      return {
        event: "opened",
        opened: event.outputMode === "server"
          ? {
            ...withoutDefaults({ sessionId: event.sessionId }),
            outputTruncation: OutputTruncationMode.OUTPUT_TRUNCATION_MODE_SERVER,
            supportsCatalogRevision: true,
            _outputTruncation: "outputTruncation",
          }
          : { ...withoutDefaults({ sessionId: event.sessionId }), supportsCatalogRevision: true },
      };
    case "toolCallCancelled":
      return {
        event: "toolCallCancelled",
        toolCallCancelled: withoutDefaults({ invocationId: event.invocationId }),
      };
    case "notification": {
      const { notificationId, executionId, cellId, callId, text } = event;
      return {
        event: "notification",
        notification: withoutDefaults({ notificationId, executionId, cellId, callId, text }),
      };
    }
    case "cellClosed": {
      const { executionId, cellId, finalToolCallSequence } = event;
      return {
        event: "cellClosed",
        cellClosed: withoutDefaults({
          executionId,
          cellId,
          finalToolCallSequence: decodedU64(finalToolCallSequence),
        }),
      };
    }
  }
}

/**
 * An Execute event as decoded.
 *
 * @param event the core's event (an outcome of a closing session is not sent: the caller drops it)
 * @returns the `ExecuteEvent` message
 */
export function decodedExecuteEvent(event: CoreExecuteEvent): ExecuteEvent {
  return event.type === "started"
    ? { event: "started", started: withoutDefaults({ executionId: event.executionId, cellId: event.cellId }) }
    : { event: "outcome", outcome: decodedOutcome(event.outcome) };
}

/**
 * A Wait or Terminate answer as decoded.
 *
 * @param result the core's observation
 * @returns the `WaitResponse` message
 */
export function decodedObservation(result: ObservationResult): WaitResponse {
  const outcome = decodedOutcome(result.outcome);
  return result.state === "liveCell"
    ? { state: "liveCell", liveCell: outcome }
    : { state: "missingCell", missingCell: outcome };
}

function decodedToolName(name: CoreToolName): ToolName {
  const base = withoutDefaults({ name: name.name });
  return name.namespace === undefined
    ? base
    : { ...base, namespace: name.namespace, _namespace: "namespace" };
}

/**
 * A tool call as decoded.
 *
 * @param call the core's tool call
 * @returns the `ToolCall` message
 */
export function decodedToolCall(call: CoreToolCall): ToolCall {
  return {
    ...withoutDefaults({
      sessionId: call.sessionId,
      executionId: call.executionId,
      cellId: call.cellId,
      invocationId: call.invocationId,
      runtimeToolCallId: call.runtimeToolCallId,
      toolName: decodedToolName(call.toolName),
      toolKind: call.toolKind,
      sequence: decodedU64(call.sequence),
    }),
    ...(call.inputJson === undefined ? {} : { inputJson: call.inputJson, _inputJson: "inputJson" as const }),
    ...(call.traceparent === undefined
      ? {}
      : { traceparent: call.traceparent, _traceparent: "traceparent" as const }),
  };
}

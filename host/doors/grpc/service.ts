/**
 * The gRPC front door of `codex.code_mode.v1.CodeModeHost` (STYLE: gRPC): each method converts
 * the decoded wire message to a core request, calls {@link CodeModeCore}, and converts the result
 * back. Every rule lives in the core; every failure becomes a status in `errors.ts`.
 *
 * @module
 */
import type { CallContext } from "nice-grpc";
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

/** Options of {@link createCodeModeService}. */
export interface ServiceOptions {
  /** The host's operations. */
  core: CodeModeCore;
  /** `--route-token`: sent as the `x-code-mode-route` response header of OpenSession. */
  routeToken?: string;
}

/** Reads an optional uint64 (decoded as a decimal string) exactly. */
function u64(value: string | undefined): bigint | undefined {
  return value === undefined ? undefined : BigInt(value);
}

function toolName(name: WireToolName): ToolName {
  return name.namespace === undefined
    ? { name: name.name ?? "" }
    : { name: name.name ?? "", namespace: name.namespace };
}

function toolDefinition(def: WireToolDefinition): ToolDefinition {
  return {
    name: def.name ?? "",
    toolName: def.toolName === undefined ? undefined : toolName(def.toolName),
    description: def.description,
    kind: def.kind,
    inputSchemaJson: def.inputSchemaJson,
    outputSchemaJson: def.outputSchemaJson,
  };
}

function wireOutcome(outcome: ExecutionOutcome): ExecutionOutcomeInit {
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

function wireObservation(result: ObservationResult): WaitResponseInit {
  const outcome = wireOutcome(result.outcome);
  return result.state === "liveCell" ? { liveCell: outcome } : { missingCell: outcome };
}

function wireLeaseEvent(event: LeaseEvent): SessionEventInit {
  switch (event.type) {
    case "opened":
      return {
        opened: {
          sessionId: event.sessionId,
          outputTruncation: event.outputMode === "server"
            ? OutputTruncationMode.OUTPUT_TRUNCATION_MODE_SERVER
            : OutputTruncationMode.OUTPUT_TRUNCATION_MODE_CLIENT,
        },
      };
    case "toolCallCancelled":
      return { toolCallCancelled: { invocationId: event.invocationId } };
    case "notification": {
      const { notificationId, executionId, cellId, callId, text } = event;
      return { notification: { notificationId, executionId, cellId, callId, text } };
    }
    case "cellClosed": {
      const { executionId, cellId, finalToolCallSequence } = event;
      return { cellClosed: { executionId, cellId, finalToolCallSequence } };
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
  const { core } = options;

  return {
    async *openSession(request, context) {
      const limits = request.cellExecutionLimits;
      const lease = await core.openSession({
        outputMode: request.outputTruncation === OutputTruncationMode.OUTPUT_TRUNCATION_MODE_SERVER
          ? "server"
          : "client",
        maxYieldTimeMs: u64(limits?.maxYieldTimeMs),
        maxHeapSizeBytes: u64(limits?.maxHeapSizeBytes),
        traceparent: context.metadata.get("traceparent") ?? undefined,
      });
      if (options.routeToken !== undefined) context.header.set("x-code-mode-route", options.routeToken);
      context.sendHeader();
      for await (const event of lease.events(context.signal)) yield wireLeaseEvent(event);
    },

    async closeSession(request) {
      await core.closeSession(request.sessionId ?? "");
      return {};
    },

    async *execute(request, context) {
      const events = core.execute({
        sessionId: request.sessionId ?? "",
        executionId: request.executionId ?? "",
        toolCallId: request.toolCallId ?? "",
        source: request.source ?? "",
        enabledTools: request.enabledTools?.map(toolDefinition),
        yieldTimeMs: u64(request.yieldTimeMs),
        maxOutputTokens: u64(request.maxOutputTokens),
        traceparent: context.metadata.get("traceparent") ?? undefined,
      }, { signal: context.signal });
      for await (const event of events) {
        yield event.type === "started"
          ? { started: { executionId: event.executionId, cellId: event.cellId } }
          : { outcome: wireOutcome(event.outcome) };
      }
    },

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
      );
    },

    async terminate(request, context) {
      return wireObservation(
        await core.terminate({
          sessionId: request.sessionId ?? "",
          cellId: request.cellId ?? "",
          traceparent: context.metadata.get("traceparent") ?? undefined,
        }),
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

    async *subscribeToToolCalls(request, context) {
      using subscription = core.subscribeToToolCalls({
        sessionId: request.sessionId ?? "",
        toolNames: request.toolNames?.map(toolName),
      });
      // Headers go out as soon as the subscription is registered (SPEC §7.6 rule 6). nice-grpc
      // sends no header block when it is empty, so name the event in one.
      context.header.set("x-code-mode-subscription", "registered");
      context.sendHeader();
      yield* subscription.calls(context.signal);
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

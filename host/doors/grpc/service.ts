/**
 * Thin RPC glue for `codex.code_mode.v1.CodeModeHost`: validate, call the domain, map the result
 * (STYLE: gRPC). Errors become statuses in one place ({@link toServerError}).
 *
 * @module
 */
import type { CallContext } from "nice-grpc";
import { ServerError, Status } from "nice-grpc";
import { type Outcome, serverMissingCellContent } from "../../core/cell.ts";
import { MAX_TIMER_MS } from "../../core/clock.ts";
import { CodeModeError, toServerError } from "../../core/errors.ts";
import { normalizeCodeModeIdentifier } from "../../core/identifiers.ts";
import type { Logger } from "../../ops/log.ts";
import type { Permit } from "../../core/permits.ts";
import { OUTPUT_CLIENT, OUTPUT_SERVER, type Session } from "../../core/session.ts";
import type { SessionManager } from "../../core/session_manager.ts";
import type { Subscription, ToolDefinitionInfo, ToolNameInfo } from "../../core/tool_bridge.ts";
import { validateIdentifier } from "../../core/validate.ts";

// deno-lint-ignore no-explicit-any
type Message = any;

/** Options of {@link createCodeModeService}. */
export interface ServiceOptions {
  manager: SessionManager;
  log: Logger;
  /** `--route-token`: sent as the `x-code-mode-route` response header of OpenSession. */
  routeToken?: string;
}

const MAX_SAFE = 9_007_199_254_740_991n;

/** Reads an optional uint64 (decoded as a decimal string) exactly. */
function u64(value: string | number | undefined): bigint | undefined {
  return value === undefined || value === null ? undefined : BigInt(value);
}

/** Effective yield time: requested (or default), capped by the session, clamped (SPEC §4.1). */
function effectiveYield(requested: bigint, session: Session): number {
  let ms = requested;
  if (session.maxYieldTimeMs !== undefined && session.maxYieldTimeMs < ms) ms = session.maxYieldTimeMs;
  return Number(ms > BigInt(MAX_TIMER_MS) ? BigInt(MAX_TIMER_MS) : ms);
}

function nanosSince(start: number): number {
  return Math.max(0, Math.round((performance.now() - start) * 1e6));
}

/** Converts an outcome to a wire `ExecutionOutcome`. */
function wireOutcome(cellId: string, outcome: Outcome, start: number): Message {
  const result: Message = { cellId, contentItems: outcome.items, codeModeHostDurationNs: nanosSince(start) };
  if (outcome.kind === "completed") {
    result.completed = outcome.errorText === undefined ? {} : { errorText: outcome.errorText };
  } else result[outcome.kind] = {};
  return result;
}

/** SPEC §4.11; a Server-mode session also gets the `Script error:` item (§8.4). */
function missingCell(cellId: string, session: Session, start: number, maxTokens: number): Message {
  const errorText = `exec cell ${cellId} not found`;
  return {
    missingCell: {
      cellId,
      contentItems: session.outputMode === OUTPUT_SERVER
        ? serverMissingCellContent(errorText, maxTokens)
        : [],
      completed: { errorText },
      codeModeHostDurationNs: nanosSince(start),
    },
  };
}

function isAbort(error: unknown, signal: AbortSignal): boolean {
  return signal.aborted && (error === signal.reason || (error as Error)?.name === "AbortError");
}

/**
 * Builds the service implementation.
 *
 * @param options the manager, logger and route token
 * @returns methods keyed like the definition from `proto/loader.ts`
 */
export function createCodeModeService(options: ServiceOptions): Record<string, unknown> {
  const { manager, log } = options;
  const limits = manager.limits;
  const idBytes = limits.maxIdentifierBytes;

  function unary<R>(fn: (request: Message, context: CallContext) => Promise<R>) {
    return async (request: Message, context: CallContext): Promise<R> => {
      try {
        return await fn(request, context);
      } catch (error) {
        if (!(error instanceof CodeModeError) && !(error instanceof ServerError)) {
          log.error("unexpected failure in an RPC", { error: String((error as Error)?.stack ?? error) });
        }
        throw toServerError(error);
      }
    };
  }

  function streaming(fn: (request: Message, context: CallContext) => AsyncGenerator<Message>) {
    return async function* (request: Message, context: CallContext): AsyncGenerator<Message> {
      try {
        yield* fn(request, context);
      } catch (error) {
        if (context.signal.aborted) return;
        if (!(error instanceof CodeModeError) && !(error instanceof ServerError)) {
          log.error("unexpected failure in an RPC", { error: String((error as Error)?.stack ?? error) });
        }
        throw toServerError(error);
      }
    };
  }

  function toolName(name: Message): ToolNameInfo {
    validateIdentifier(name.name, "tool name", idBytes);
    if (name.namespace !== undefined) {
      validateIdentifier(name.namespace, "tool namespace", idBytes, { allowEmpty: true });
      return { name: name.name, namespace: name.namespace };
    }
    return { name: name.name };
  }

  function validateTools(
    tools: Message[] | undefined,
  ): { globalName: string; description: string; definition: ToolDefinitionInfo }[] {
    const out: { globalName: string; description: string; definition: ToolDefinitionInfo }[] = [];
    for (const def of tools ?? []) {
      validateIdentifier(def.name, "tool definition name", idBytes);
      if (!def.toolName) {
        throw new CodeModeError("INVALID_ARGUMENT", "tool definition is missing its tool name");
      }
      const name = toolName(def.toolName);
      if (def.kind !== 1 && def.kind !== 2) {
        throw new CodeModeError("INVALID_ARGUMENT", "tool definition has an invalid kind");
      }
      for (const [field, label] of [["inputSchemaJson", "input"], ["outputSchemaJson", "output"]] as const) {
        const bytes: Uint8Array | undefined = def[field];
        if (bytes === undefined) continue;
        try {
          JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
        } catch (error) {
          throw new CodeModeError(
            "INVALID_ARGUMENT",
            `invalid tool ${label} schema: ${(error as Error).message}`,
          );
        }
      }
      out.push({
        globalName: normalizeCodeModeIdentifier(def.name),
        description: def.description ?? "",
        definition: { toolName: name, kind: def.kind },
      });
    }
    return out;
  }

  return {
    openSession: streaming(async function* (request, context) {
      using _permit = manager.permit("request");
      const slot = manager.acquireSlot();
      let heapBytes: bigint | undefined;
      try {
        heapBytes = u64(request.cellExecutionLimits?.maxHeapSizeBytes);
        if (heapBytes !== undefined && heapBytes > MAX_SAFE) {
          throw new CodeModeError("INVALID_ARGUMENT", "maximum heap size exceeds this platform");
        }
        if (heapBytes !== undefined && heapBytes < BigInt(limits.minHeapSizeBytes)) {
          throw new CodeModeError(
            "INVALID_ARGUMENT",
            `maximum heap size must be at least ${limits.minHeapSizeBytes} bytes`,
          );
        }
      } catch (error) {
        slot.release();
        throw error;
      }
      const outputMode = request.outputTruncation === OUTPUT_SERVER ? OUTPUT_SERVER : OUTPUT_CLIENT;
      const heap = Number(heapBytes ?? BigInt(limits.defaultMaxHeapSizeBytes));
      const session = await manager.open({
        outputMode,
        maxYieldTimeMs: u64(request.cellExecutionLimits?.maxYieldTimeMs),
        cellHeapMb: Math.ceil(heap / 1_048_576),
      }, slot);
      _permit.release();
      if (options.routeToken !== undefined) {
        context.header.set("x-code-mode-route", options.routeToken);
      }
      context.sendHeader();
      try {
        yield* session.lease(context.signal);
      } finally {
        if (context.signal.aborted) void session.close("lease");
      }
    }),

    closeSession: unary(async (request) => {
      const session = manager.lookup(request.sessionId);
      using _permit = manager.permit("control");
      await session.close("close");
      return {};
    }),

    execute: streaming(async function* (request, context) {
      const start = performance.now();
      const session = manager.lookup(request.sessionId);
      const executionId = validateIdentifier(request.executionId, "execution ID", idBytes);
      using _permit = manager.permit("request");
      const toolCallId = validateIdentifier(request.toolCallId, "tool call ID", idBytes);
      const tools = validateTools(request.enabledTools);
      const maxTokens = u64(request.maxOutputTokens);
      if (maxTokens !== undefined && maxTokens > MAX_SAFE) {
        throw new CodeModeError("INVALID_ARGUMENT", "maximum output tokens exceeds this platform");
      }
      // Active-cell permits travel with the cell until its CellClosed; released here on refusal.
      const permits: Permit[] = [];
      let yieldSignal: AbortSignal;
      try {
        const hostPermit = manager.activeCells.tryAcquire();
        if (!hostPermit) {
          throw new CodeModeError("RESOURCE_EXHAUSTED", "code-mode host has too many active cells");
        }
        permits.push(hostPermit);
        const sessionPermit = session.activeCells.tryAcquire();
        if (!sessionPermit) {
          throw new CodeModeError("RESOURCE_EXHAUSTED", "code-mode session has too many active cells");
        }
        permits.push(sessionPermit);
        yieldSignal = session.reserveExecution(executionId);
      } catch (error) {
        for (const p of permits) p.release();
        throw error;
      }
      try {
        const yieldMs = effectiveYield(
          u64(request.yieldTimeMs) ?? BigInt(limits.defaultExecYieldTimeMs),
          session,
        );
        const cell = await session.startCell({
          executionId,
          toolCallId,
          source: request.source ?? "",
          tools: tools.map(({ globalName, description }) => ({ globalName, description })),
          definitions: new Map(tools.map((t) => [t.globalName, t.definition])),
          traceparent: context.metadata.get("traceparent") ?? undefined,
          permits,
          initial: { yieldMs, yieldSignal, signal: context.signal, startedAt: start },
          // B = 4·T stays exact in a double up to 2^51 tokens; larger budgets never truncate anyway.
          maxOutputTokens: maxTokens === undefined
            ? undefined
            : Number(maxTokens > 2n ** 50n ? 2n ** 50n : maxTokens),
        });
        yield { started: { executionId, cellId: cell.id } };
        let outcome: Outcome;
        try {
          outcome = await session.track(() => cell.initial);
        } catch (error) {
          if (context.signal.aborted) session.abandon(cell);
          throw error;
        }
        if (context.signal.aborted) {
          session.abandon(cell);
          return;
        }
        yield { outcome: wireOutcome(cell.id, outcome, start) };
      } finally {
        session.releaseExecution(executionId);
      }
    }),

    wait: unary(async (request, context) => {
      const start = performance.now();
      const session = manager.lookup(request.sessionId);
      const cellId = validateIdentifier(request.cellId, "cell ID", idBytes);
      const waitId = validateIdentifier(request.waitId, "wait ID", idBytes);
      using _permit = manager.permit("request");
      session.ensureOpen();
      const wait = session.registerWait(waitId);
      try {
        const cell = session.cell(cellId);
        if (!cell) return missingCell(cellId, session, start, limits.defaultMaxOutputTokens);
        if (wait.cancel.aborted) throw wait.cancel.reason;
        const signal = AbortSignal.any([context.signal, wait.cancel]);
        const yieldMs = effectiveYield(u64(request.yieldTimeMs) ?? 0n, session);
        let outcome: Outcome;
        try {
          outcome = await session.track(() =>
            cell.observe(yieldMs, { signal, yieldSignal: wait.yieldNow, startedAt: start })
          );
        } catch (error) {
          if (wait.cancel.aborted) throw wait.cancel.reason;
          if (isAbort(error, context.signal)) {
            throw new ServerError(Status.CANCELLED, "code-mode wait was cancelled");
          }
          throw error;
        }
        return { liveCell: wireOutcome(cellId, outcome, start) };
      } finally {
        wait.finish();
      }
    }),

    terminate: unary(async (request) => {
      const start = performance.now();
      const session = manager.lookup(request.sessionId);
      const cellId = validateIdentifier(request.cellId, "cell ID", idBytes);
      using _permit = manager.permit("request");
      session.ensureOpen();
      const cell = session.cell(cellId);
      if (!cell) return missingCell(cellId, session, start, limits.defaultMaxOutputTokens);
      const outcome = await session.track(() => cell.terminate(start));
      return { liveCell: wireOutcome(cellId, outcome, start) };
    }),

    yieldObservation: unary((request) => {
      const session = manager.lookup(request.sessionId);
      using _permit = manager.permit("control");
      if (request.observation === "executionId") {
        session.yieldObservation(
          validateIdentifier(request.executionId, "execution ID", idBytes),
          "execution",
        );
      } else if (request.observation === "waitId") {
        session.yieldObservation(validateIdentifier(request.waitId, "wait ID", idBytes), "wait");
      } else {
        throw new CodeModeError("INVALID_ARGUMENT", "missing code-mode observation ID");
      }
      return Promise.resolve({});
    }),

    cancelWait: unary(async (request) => {
      const session = manager.lookup(request.sessionId);
      const waitId = validateIdentifier(request.waitId, "wait ID", idBytes);
      using _permit = manager.permit("control");
      await session.cancelWait(waitId);
      return {};
    }),

    acknowledgeNotification: unary((request) => {
      manager.lookup(request.sessionId);
      validateIdentifier(request.notificationId, "notification ID", idBytes, { uuid: true });
      using _permit = manager.permit("control");
      return Promise.resolve({});
    }),

    subscribeToToolCalls: streaming(async function* (request, context) {
      const session = manager.lookup(request.sessionId);
      let subscription: Subscription;
      {
        using _permit = manager.permit("control");
        const filters: Message[] = request.toolNames ?? [];
        if (filters.length > limits.maxToolFilters) {
          throw new CodeModeError(
            "INVALID_ARGUMENT",
            `code-mode tool subscription exceeds ${limits.maxToolFilters} filters`,
          );
        }
        const names: ToolNameInfo[] = filters.map((filter) => toolName(filter));
        subscription = session.subscribe(names);
      }
      try {
        // Headers go out as soon as the subscription is registered (SPEC §7.6 rule 6). nice-grpc
        // sends no header block when it is empty, so name the event in one.
        context.header.set("x-code-mode-subscription", "registered");
        context.sendHeader();
        yield* subscription.stream(context.signal);
      } finally {
        session.unsubscribe(subscription);
      }
    }),
    completeToolCall: unary((request) => {
      const session = manager.lookup(request.sessionId);
      using _permit = manager.permit("control");
      const invocationId = validateIdentifier(request.invocationId, "tool invocation ID", idBytes, {
        uuid: true,
      });
      if (!session.issuedInvocation(invocationId)) {
        throw new CodeModeError("NOT_FOUND", `unknown code-mode tool invocation ${invocationId}`);
      }
      if (request.outcome === "succeeded") {
        const bytes: Uint8Array = request.succeeded.outputJson ?? new Uint8Array();
        let text: string;
        try {
          text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
          JSON.parse(text);
        } catch (error) {
          throw new CodeModeError(
            "INVALID_ARGUMENT",
            `invalid code-mode tool output JSON: ${(error as Error).message}`,
          );
        }
        session.completeToolCall(invocationId, { outputJson: text });
      } else if (request.outcome === "failed") {
        session.completeToolCall(invocationId, { failed: request.failed.message ?? "" });
      } else {
        throw new CodeModeError("INVALID_ARGUMENT", "tool completion is missing its outcome");
      }
      return Promise.resolve({});
    }),
  };
}

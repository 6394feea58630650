/**
 * The core's operations on cells (SPEC §4): Execute's start and initial observation, Wait and
 * Terminate, with the telemetry-free work of each; `code_mode_core.ts` wraps them with spans and
 * latencies and documents their contracts.
 *
 * - An Execute's active-cell permits (the host's and the session's) travel with its cell until its
 *   `CellClosed`; a refused Execute gives them back at once.
 * - An outcome is released only after the notifications its cell published before it
 *   (`Session.notificationsFlushed`).
 * - A caller that goes away after `started` abandons its cell (terminated in the background); a
 *   Wait whose caller goes away fails `cancelled` and consumes nothing.
 *
 * @module
 */
import { type Outcome, serverMissingCellContent } from "./cell.ts";
import type {
  ExecuteEvent,
  ExecuteRequest,
  ExecutionOutcome,
  ObservationResult,
  ToolDefinition,
  WaitRequest,
} from "./core_api.ts";
import { HostError } from "./errors.ts";
import type { Permit } from "./permits.ts";
import { type CheckedTool, type RequestRules, tokenBudget } from "./request_rules.ts";
import { OUTPUT_SERVER, type Session } from "./session.ts";
import type { SessionManager } from "./session_manager.ts";
import { ToolCatalog } from "./tool_catalog.ts";
import type { HostSpan } from "../ops/telemetry.ts";

/**
 * How long an Execute's yield time may wait for its cell to start. The yield time counts from the
 * moment the runtime hands the cell to its Worker, not from the Execute's arrival: a fresh runtime's
 * first cell waits for its first Worker (a few hundred milliseconds, more on a loaded machine), and
 * the reference host shows a busy cell's first `text()` at a 100 ms yield time. A runtime that never
 * starts the cell yields after this plus the yield time.
 */
const START_GRACE_MS = 10_000;

function nanosSince(start: number): number {
  return Math.max(0, Math.round((performance.now() - start) * 1e6));
}

function isAbort(error: unknown, signal: AbortSignal): boolean {
  return signal.aborted && (error === signal.reason || (error as Error)?.name === "AbortError");
}

/** A cell's outcome as the API gives it, timed from the request's start. */
function toOutcome(cellId: string, outcome: Outcome, start: number): ExecutionOutcome {
  const base = {
    cellId,
    contentItems: outcome.items,
    hostDurationNs: nanosSince(start),
    ...(outcome.oversize ? { oversize: outcome.oversize } : {}),
    ...(outcome.written ? { written: outcome.written } : {}),
  };
  if (outcome.kind === "completed") {
    const buffered = { ...base, resultBufferedForNs: outcome.resultBufferedForNs ?? 0 };
    return outcome.errorText === undefined
      ? { ...buffered, kind: "completed" }
      : { ...buffered, kind: "completed", errorText: outcome.errorText };
  }
  return { ...base, kind: outcome.kind };
}

/**
 * SPEC §4.11; a Server-mode session also gets the `Script error:` item (§8.4), truncated to the
 * observation's budget.
 */
function missingCell(cellId: string, session: Session, start: number, maxTokens: number): ObservationResult {
  const errorText = `exec cell ${cellId} not found`;
  const contentItems = session.outputMode === OUTPUT_SERVER
    ? serverMissingCellContent(errorText, maxTokens)
    : [];
  return {
    state: "missingCell",
    outcome: { cellId, contentItems, kind: "completed", errorText, hostDurationNs: nanosSince(start) },
  };
}

/** The cell operations of one core. */
export class CellOperations {
  readonly #rules: RequestRules;
  readonly #manager: SessionManager;
  /** Each session's tool catalog (gone with its session). */
  readonly #catalogs = new WeakMap<Session, ToolCatalog<ToolDefinition>>();

  /**
   * @param rules the core's request checks
   * @param manager the registry and admission
   */
  constructor(rules: RequestRules, manager: SessionManager) {
    this.#rules = rules;
    this.#manager = manager;
  }

  /**
   * Starts a cell and yields `started`, then (unless `signal` aborted) its initial outcome.
   *
   * @param request the Execute
   * @param signal the caller went away
   * @param start the request's `performance.now()`
   * @param span the Execute's span (the cell's becomes its child)
   * @returns the events
   */
  async *execute(
    request: ExecuteRequest,
    signal: AbortSignal,
    start: number,
    span: HostSpan,
  ): AsyncGenerator<ExecuteEvent> {
    const rules = this.#rules;
    const session = rules.lookup(request.sessionId);
    const executionId = rules.id(request.executionId, "execution ID");
    using _permit = this.#manager.permit("request");
    const toolCallId = rules.id(request.toolCallId, "tool call ID");
    const tools = this.#tools(session, request);
    const maxTokens = request.maxOutputTokens;
    const { permits, yieldSignal } = this.#admit(session, executionId);
    try {
      const yieldMs = rules.effectiveYield(
        request.yieldTimeMs ?? BigInt(rules.limits.defaultExecYieldTimeMs),
        session,
      );
      const cell = await session.startCell({
        executionId,
        toolCallId,
        source: request.source,
        tools: tools.map(({ globalName, description }) => ({ globalName, description })),
        definitions: new Map(tools.map((t) => [t.globalName, t.definition])),
        traceparent: request.traceparent,
        span,
        permits,
        initial: { yieldMs, yieldSignal, signal, startedAt: start, startGraceMs: START_GRACE_MS },
        maxOutputTokens: maxTokens === undefined ? undefined : tokenBudget(maxTokens),
      });
      yield { type: "started", executionId, cellId: cell.id };
      let outcome: Outcome;
      try {
        outcome = await session.track(() => cell.initial);
        const flushed = session.notificationsFlushed(cell);
        if (flushed) await flushed;
      } catch (error) {
        if (signal.aborted) session.abandon(cell);
        throw error;
      }
      if (signal.aborted) {
        session.abandon(cell);
        return;
      }
      const event: ExecuteEvent = { type: "outcome", outcome: toOutcome(cell.id, outcome, start) };
      if (session.closing) event.closing = true;
      yield event;
    } finally {
      session.releaseExecution(executionId);
    }
  }

  /** An Execute's tools: its definitions, or those its catalog revision stored (`tool_catalog.ts`). */
  #tools(session: Session, request: ExecuteRequest): CheckedTool[] {
    const tools = this.#rules.tools(request.enabledTools);
    if (request.catalogRevision === undefined) return tools;
    let catalog = this.#catalogs.get(session);
    if (!catalog) this.#catalogs.set(session, catalog = new ToolCatalog());
    const given = request.enabledTools ?? [];
    const resolved = catalog.resolve(request.catalogRevision, given);
    return resolved === given ? tools : this.#rules.tools(resolved);
  }

  /** Takes the active-cell permits and reserves the execution ID; gives the permits back on refusal. */
  #admit(session: Session, executionId: string): { permits: Permit[]; yieldSignal: AbortSignal } {
    const manager = this.#manager;
    const permits: Permit[] = [];
    try {
      const hostPermit = manager.activeCells.tryAcquire();
      if (!hostPermit) throw manager.overloaded("maxActiveCells", "code-mode host has too many active cells");
      permits.push(hostPermit);
      const sessionPermit = session.activeCells.tryAcquire();
      if (!sessionPermit) {
        throw manager.overloaded("maxActiveCellsPerSession", "code-mode session has too many active cells");
      }
      permits.push(sessionPermit);
      return { permits, yieldSignal: session.reserveExecution(executionId) };
    } catch (error) {
      for (const p of permits) p.release();
      throw error;
    }
  }

  /**
   * Observes a cell until it yields, completes or is terminated (SPEC §4.3).
   *
   * @param request the Wait
   * @param callerSignal the caller went away
   * @returns the outcome, or the missing-cell outcome
   */
  async wait(request: WaitRequest, callerSignal: AbortSignal): Promise<ObservationResult> {
    const start = performance.now();
    const rules = this.#rules;
    const session = rules.lookup(request.sessionId);
    const cellId = rules.id(request.cellId, "cell ID");
    const waitId = rules.id(request.waitId, "wait ID");
    using _permit = this.#manager.permit("request");
    session.ensureOpen();
    const wait = session.registerWait(waitId);
    try {
      const cell = session.cell(cellId);
      const maxTokens = rules.outputBudget(request.maxTokens);
      if (!cell) return missingCell(cellId, session, start, maxTokens);
      if (wait.cancel.aborted) throw wait.cancel.reason;
      const signal = AbortSignal.any([callerSignal, wait.cancel]);
      const yieldMs = rules.effectiveYield(request.yieldTimeMs ?? 0n, session);
      let outcome: Outcome;
      try {
        outcome = await session.track(() =>
          cell.observe(yieldMs, { signal, yieldSignal: wait.yieldNow, startedAt: start, maxTokens })
        );
        const flushed = session.notificationsFlushed(cell);
        if (flushed) await flushed;
      } catch (error) {
        if (wait.cancel.aborted) throw wait.cancel.reason;
        if (isAbort(error, callerSignal)) {
          throw new HostError("cancelled", "code-mode wait was cancelled", { cause: error });
        }
        throw error;
      }
      return { state: "liveCell", outcome: toOutcome(cellId, outcome, start) };
    } finally {
      wait.finish();
    }
  }

  /**
   * Terminates a cell and returns its final outcome (SPEC §4.5).
   *
   * @param request the session, the cell, and the outcome's Server-mode budget
   * @returns the outcome, or the missing-cell outcome
   */
  async terminate(
    request: { sessionId: string; cellId: string; maxTokens?: bigint },
  ): Promise<ObservationResult> {
    const start = performance.now();
    const rules = this.#rules;
    const session = rules.lookup(request.sessionId);
    const cellId = rules.id(request.cellId, "cell ID");
    using _permit = this.#manager.permit("request");
    session.ensureOpen();
    const cell = session.cell(cellId);
    // Not the Execute's budget: the request's, else the host's default, as in the reference host.
    const maxTokens = rules.outputBudget(request.maxTokens);
    if (!cell) return missingCell(cellId, session, start, maxTokens);
    const outcome = await session.track(() => cell.terminate(start, maxTokens));
    const flushed = session.notificationsFlushed(cell);
    if (flushed) await flushed;
    return { state: "liveCell", outcome: toOutcome(cellId, outcome, start) };
  }
}

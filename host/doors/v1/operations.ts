/**
 * The operations of a V1 connection (`operation/request`): `session/open`, `session/execute`,
 * `session/wait`, `session/terminate` and `session/shutdown`, each answered as Codex's own host
 * answers it, on the core.
 *
 * - An Execute that fails before it started gets only its `operation/response` error; one that
 *   started gets `execution/started`, then its initial response (or the error that replaced it).
 * - `operation/cancel` stops only a `session/wait` (`code-mode request cancelled`); an execute runs
 *   on to its initial response, and only the connection's end stops it.
 * - A failure's message comes from the table every door shares (`../wire_errors.ts`): a domain
 *   error's own text; anything else is logged and answered with the generic text.
 *
 * @module
 */
import type {
  CodeModeCore,
  ExecuteRequest,
  ExecutionOutcome,
  WaitRequest,
} from "../../core/code_mode_core.ts";
import type { Permits } from "../../core/permits.ts";
import type { Logger } from "../../ops/log.ts";
import { wireError } from "../wire_errors.ts";
import { messageOf } from "../../core/errors.ts";
import type { Request } from "./client_messages.ts";
import type { DelegateTable } from "./delegates.ts";
import { error, ok, oversizeStandIn, runtimeResponse, waitOutcome } from "./host_messages.ts";
import type { Outbox } from "./outbox.ts";
import { V1Session } from "./session_pumps.ts";

/** A request in flight. */
export interface ActiveRequest {
  kind: "open" | "execute" | "wait" | "terminate" | "shutdown";
  sessionId: string;
  /** Aborted by `operation/cancel` (waits only) and at the connection's end. */
  abort: AbortController;
  /** The core's execution or wait ID, for `operation/yield`. */
  observationId?: string;
}

/** What the operations share with their connection. */
export interface V1OperationsOptions {
  core: CodeModeCore;
  log: Logger;
  outbox: Outbox;
  delegates: DelegateTable;
  /** The connection's sessions (the operations add and remove them). */
  sessions: Map<string, V1Session>;
  /** Aborts at the connection's end: the core abandons what is still running. */
  closed: AbortSignal;
  /** The connection's delegate capacity and pool (set by the handshake). */
  delegatePool(): { capacity: number; permits: Permits };
}

/** The operations of one V1 connection. */
export class V1Operations {
  readonly #o: V1OperationsOptions;

  /** @param options see {@link V1OperationsOptions} */
  constructor(options: V1OperationsOptions) {
    this.#o = options;
  }

  /**
   * Runs one request to its answer.
   *
   * @param id the request's ID
   * @param request the request
   * @param active its entry in the request table
   */
  async handle(id: bigint, request: Request, active: ActiveRequest): Promise<void> {
    switch (request.method) {
      case "session/open":
        return await this.#open(id, request, active);
      case "session/execute":
        return await this.#execute(id, request, active);
      case "session/wait":
        return await this.#wait(id, request, active);
      case "session/terminate": {
        const terminate: { sessionId: string; cellId: string; maxTokens?: bigint } = {
          sessionId: request.sessionId,
          cellId: request.cellId,
        };
        if (request.maxOutputTokens !== undefined) terminate.maxTokens = request.maxOutputTokens;
        return await this.#observe(id, active, request.sessionId, () => this.#o.core.terminate(terminate));
      }
      case "session/shutdown": {
        let result;
        try {
          await this.shutdownSession(request.sessionId);
          result = ok({ type: "session/closed", sessionId: request.sessionId });
        } catch (err) {
          result = error(this.#failure(active, err));
        }
        return await this.#o.outbox.answer(id, result);
      }
    }
  }

  /** The message of a request's failure (see the module doc). */
  #failure(active: ActiveRequest, err: unknown): string {
    return wireError(err, this.#o.log, { door: "json-v1", request: active.kind }).message;
  }

  async #wait(
    id: bigint,
    request: Extract<Request, { method: "session/wait" }>,
    active: ActiveRequest,
  ): Promise<void> {
    active.observationId = crypto.randomUUID();
    const signal = AbortSignal.any([active.abort.signal, this.#o.closed]);
    const wait: WaitRequest & { maxTokens?: bigint } = {
      sessionId: request.sessionId,
      cellId: request.cellId,
      waitId: active.observationId,
      yieldTimeMs: request.yieldTimeMs,
    };
    // The wait call's token budget (the core's `maxTokens`, Server mode).
    if (request.maxOutputTokens !== undefined) wait.maxTokens = request.maxOutputTokens;
    const session = this.#o.sessions.get(request.sessionId);
    session?.waitBegins(request.cellId);
    try {
      return await this.#observe(
        id,
        active,
        request.sessionId,
        () => this.#o.core.wait(wait, { signal }),
        signal,
      );
    } finally {
      session?.waitEnds(request.cellId);
    }
  }

  /** Answers a wait or terminate with its outcome, after the session's earlier lease events. */
  async #observe(
    id: bigint,
    active: ActiveRequest,
    sessionId: string,
    work: () => ReturnType<CodeModeCore["wait"]>,
    signal?: AbortSignal,
  ): Promise<void> {
    const outbox = this.#o.outbox;
    let result;
    let outcome: ExecutionOutcome | undefined;
    let extraBytes: number | undefined;
    try {
      const observed = await work();
      if (observed.state === "liveCell") {
        outcome = observed.outcome;
        if (outcome.oversize) {
          const standIn = oversizeStandIn(outcome);
          extraBytes = standIn.extraBytes;
          observed.outcome = standIn.outcome;
        }
      }
      result = ok({ type: "wait/completed", outcome: waitOutcome(observed) });
    } catch (err) {
      result = error(signal?.aborted ? "code-mode request cancelled" : this.#failure(active, err));
    }
    const session = this.#o.sessions.get(sessionId);
    if (!session || !outcome) {
      try {
        return await outbox.answer(id, result, extraBytes);
      } finally {
        outcome?.written?.();
      }
    }
    await session.delivering(outcome, () => outbox.answer(id, result, extraBytes));
  }

  async #open(
    id: bigint,
    request: Extract<Request, { method: "session/open" }>,
    active: ActiveRequest,
  ): Promise<void> {
    const { core, outbox } = this.#o;
    const pool = this.#o.delegatePool();
    let lease;
    try {
      lease = await core.openSession({
        sessionId: request.sessionId,
        outputMode: request.outputTruncation,
        maxYieldTimeMs: request.limits?.maxYieldTimeMs,
        maxHeapSizeBytes: request.limits?.maxHeapSizeBytes,
        maxPendingDelegateCalls: pool.capacity,
        delegatePermits: pool.permits,
        jsonOutcomeSizes: true,
        serialOutcomes: true,
        closureTerminatesWaits: true,
      });
    } catch (err) {
      return await outbox.answer(id, error(this.#failure(active, err)));
    }
    const sessionId = lease.sessionId;
    let subscription;
    try {
      subscription = core.subscribeToToolCalls({ sessionId });
    } catch (err) {
      // The session goes with the failed open; its closing is the core's (a failure is logged).
      core.closeSession(sessionId).catch((cause) => this.#closeFailed(sessionId, cause));
      return await outbox.answer(id, error(this.#failure(active, err)));
    }
    const sessions = this.#o.sessions;
    const session = new V1Session({
      lease,
      subscription,
      outbox,
      delegates: this.#o.delegates,
      log: this.#o.log,
      onPumped: (ended) => {
        if (sessions.get(ended.sessionId) === ended) sessions.delete(ended.sessionId);
      },
    });
    sessions.set(sessionId, session);
    await outbox.answer(id, ok({ type: "session/ready", sessionId }));
  }

  /**
   * A session could not be closed (it had closed or crashed meanwhile): logged at debug.
   *
   * @param sessionId the session
   * @param cause the failure
   */
  #closeFailed(sessionId: string, cause: unknown): void {
    this.#o.log.debug("code-mode V1 session not closed", {
      session_id: sessionId,
      error: messageOf(cause),
    });
  }

  async #execute(
    id: bigint,
    request: Extract<Request, { method: "session/execute" }>,
    active: ActiveRequest,
  ): Promise<void> {
    const { core, outbox } = this.#o;
    const sessionId = request.sessionId;
    const fields = request.request;
    if (fields.maxOutputTokens !== undefined && fields.maxOutputTokens < 0) {
      // An i32 that does not convert to a token count fails only this request.
      return await outbox.answer(
        id,
        error("invalid code-mode execute request: number too small to fit in target type"),
      );
    }
    const executionId = crypto.randomUUID();
    active.observationId = executionId;
    const execute: ExecuteRequest = {
      sessionId,
      executionId,
      toolCallId: fields.toolCallId,
      source: fields.source,
      enabledTools: fields.enabledTools,
      yieldTimeMs: fields.yieldTimeMs,
      maxOutputTokens: fields.maxOutputTokens === undefined ? undefined : BigInt(fields.maxOutputTokens),
      catalogRevision: fields.catalogRevision,
    };
    // `operation/cancel` does not stop an execute; only the connection's end does.
    const signal = this.#o.closed;
    let session: V1Session | undefined;
    let cellId: string | undefined;
    try {
      for await (const event of core.execute(execute, { signal })) {
        if (event.type === "started") {
          cellId = event.cellId;
          session = this.#o.sessions.get(sessionId);
          await outbox.answer(id, ok({ type: "execution/started", cellId }));
          session?.startedSent(cellId);
        } else {
          const standIn = event.outcome.oversize ? oversizeStandIn(event.outcome) : undefined;
          const result = ok(runtimeResponse(standIn?.outcome ?? event.outcome));
          const send = () => outbox.initial(id, result, standIn?.extraBytes);
          if (session) await session.delivering(event.outcome, send);
          else await send().finally(() => event.outcome.written?.());
        }
      }
      if (cellId !== undefined && signal.aborted) {
        await outbox.initial(id, error("code-mode request cancelled"));
      }
    } catch (err) {
      const message = signal.aborted ? "code-mode request cancelled" : this.#failure(active, err);
      if (cellId !== undefined) {
        await outbox.initial(id, error(message));
        session?.finalSent(cellId);
      } else await outbox.answer(id, error(message));
    } finally {
      if (session && cellId !== undefined) {
        session.startedSent(cellId);
        session.initialSent(cellId);
      }
    }
  }

  /**
   * Shuts a session down (`session/shutdown`) and resolves once its frames are written.
   *
   * @param sessionId the session
   * @throws {HostError} as the core's `closeSession`
   */
  async shutdownSession(sessionId: string): Promise<void> {
    const session = this.#o.sessions.get(sessionId);
    const closing = this.#o.core.closeSession(sessionId);
    if (session) session.markEnding();
    await closing;
    if (session) {
      await session.pumped;
      await this.#o.outbox.flushed();
    }
  }
}

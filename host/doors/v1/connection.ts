/**
 * One JSON "host V1" connection, as Codex's own host (0.171) serves it: the handshake, the request
 * table, the sessions this client opened with their tool-call and lease pumps, delegate requests,
 * and the end of the connection. It reads frames from one stream and writes frames to another; the
 * wire forms are in `convert.ts` (decoding in `serde.ts`), the framing in `framing.ts`.
 *
 * - Every malformed frame is fatal (serde's message on stderr, exit 1, nothing more written); so
 *   are a second hello, a duplicate request ID, a frame over 64 MiB and EOF inside a frame.
 * - Per cell, frames go out in the reference's order: `execution/started`, then the cell's
 *   delegate requests (tool calls, notifications, cancels) as they happen, then its initial
 *   response, then `cell/closed` (after the initial response and the final outcome). Before any
 *   outcome of a session is written, every lease event the core had already produced (a
 *   notification, a tool call's cancel) is written first.
 * - An Execute that fails before it started gets only its `operation/response` error.
 *   `operation/cancel` stops only a `session/wait` (`code-mode request cancelled`).
 * - The connection's pending delegate calls (tool calls and notifications being delivered) are
 *   bounded by 1,024, or 4,096 with `delegate-capacity-4096`; past it a tool call fails `code-mode
 *   host has too many pending delegate calls`.
 * - After EOF or a fatal error nothing more is written; every request is cancelled and every
 *   session of this connection shut down (bounded by {@link EOF_SHUTDOWN_MS}).
 * - Every producer of frames waits for room in the bounded outgoing queue, so a client that stops
 *   reading holds the host back.
 *
 * @module
 */
import type {
  CodeModeCore,
  ExecuteRequest,
  ExecutionOutcome,
  Lease,
  LeaseEvent,
  ToolCallSubscription,
  WaitRequest,
} from "../../core/code_mode_core.ts";
import { Permits } from "../../core/permits.ts";
import type { Logger } from "../../ops/log.ts";
import { wireError } from "../wire_errors.ts";
import {
  CAP_DELEGATE_4096,
  type ClientMessage,
  decodeClientMessage,
  type DelegateResult,
  error,
  KNOWN_CAPABILITIES,
  ok,
  oversizeStandIn,
  type Request,
  runtimeResponse,
  toolInvoke,
  waitOutcome,
  wireId,
} from "./convert.ts";
import {
  encodeFrame,
  frameTooLarge,
  FrameWriter,
  FramingError,
  MAX_FRAME_BYTES,
  readFrames,
} from "./framing.ts";
import { DecodeError, parseJson, utf8 } from "./serde.ts";

/** Requests in flight at most. */
export const MAX_IN_FLIGHT = 256;
/** Finished request IDs remembered (a reused one is a duplicate). */
export const REMEMBERED_IDS = 4_096;
/** Bound of the shutdown at client EOF. */
export const EOF_SHUTDOWN_MS = 5_000;
/** Pending delegate calls of a connection without / with `delegate-capacity-4096`. */
export const DELEGATE_CAPACITY = { standard: 1_024, extended: 4_096 } as const;

/** Why a connection ended. */
export type EndReason = { type: "eof" } | { type: "rejected" } | { type: "fatal"; message: string };

/** How a connection ended, and what is left of the shutdown budget. */
export type ConnectionEnd =
  & EndReason
  & {
    /** The shutdown of this connection's sessions took longer than {@link EOF_SHUTDOWN_MS}. */
    timedOut?: boolean;
    /** Milliseconds of {@link EOF_SHUTDOWN_MS} left for the rest of the host's shutdown. */
    remainingMs: number;
  };

/** Options of {@link V1Connection}. */
export interface V1ConnectionOptions {
  core: CodeModeCore;
  log: Logger;
  /** Bytes from the client. */
  readable: ReadableStream<Uint8Array>;
  /** Bytes to the client. */
  writable: WritableStream<Uint8Array>;
  /** Payload limit both ways, named in the messages (default 67,108,864; tests lower it). */
  maxFrameBytes?: number;
  /** Outgoing queue capacity in frames (default 128). */
  queueFrames?: number;
}

interface ActiveRequest {
  kind: "open" | "execute" | "wait" | "terminate" | "shutdown";
  sessionId: string;
  /** Aborted by `operation/cancel` (waits only) and at the connection's end. */
  abort: AbortController;
  /** The core's execution or wait ID, for `operation/yield`. */
  observationId?: string;
}

interface SessionState {
  lease: Lease;
  subscription: ToolCallSubscription;
  stop: AbortController;
  /** Both pumps have ended. */
  pumped: Promise<void>;
  /** Per cell: resolved once its `execution/started` is queued (its delegate requests wait). */
  startedSent: Map<string, PromiseWithResolvers<void>>;
  /** Per cell: resolved once its initial response is queued (cell/closed waits for it). */
  initialSent: Map<string, PromiseWithResolvers<void>>;
  /**
   * Per cell: resolved once its final outcome (a Result or Terminated, or the error that replaced
   * it) is queued, or the session is ending. Codex's host closes a cell only once its completion
   * was delivered, so `cell/closed` waits for this.
   */
  finalSent: Map<string, PromiseWithResolvers<void>>;
  /**
   * Per cell: its Waits in progress. A Wait pending when the session closes is answered with the
   * cell's Terminated outcome before the cell's `cell/closed`, as Codex's host writes them.
   */
  waiting: Map<string, number>;
  /** The session is shutting down or gone: every cell's `cell/closed` may go. */
  ending: boolean;
  /** cell/closed frames waiting for their cell's outcomes. */
  closing: Set<Promise<void>>;
  /**
   * Per invocation whose cancellation came before its `tool/invoke` was written: resolved once it
   * is (Codex's host writes the invoke, then its cancel).
   */
  invokeWritten: Map<string, PromiseWithResolvers<void>>;
  /** invocation ID → delegate id. */
  delegates: Map<string, bigint>;
  /** Lease events the pump has taken from the core, and written (or dropped). */
  leasePulled: number;
  leaseWritten: number;
  /** The lease ended: nothing more will be written for it. */
  leaseEnded: boolean;
  /** Resolved (and replaced) each time the pump has written an event or ended. */
  leaseProgress: PromiseWithResolvers<void>;
}

type Delegate =
  & { sessionId: string; queued: Promise<void> }
  & (
    | { kind: "tool"; invocationId: string }
    | { kind: "notification"; notificationId: string; cellId: string }
  );

class FatalError extends Error {
  override name = "FatalError";
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

const macrotask = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/**
 * A V1 connection over a pair of streams, on one core.
 *
 * @example
 * ```ts ignore
 * const end = await new V1Connection({ core, log, readable, writable }).run();
 * ```
 */
export class V1Connection {
  #core: CodeModeCore;
  #log: Logger;
  #readable: ReadableStream<Uint8Array>;
  #writer: FrameWriter;
  #maxFrame: number;
  #capabilities = new Set<string>();
  #delegateCapacity: number = DELEGATE_CAPACITY.standard;
  #delegatePool: Permits = new Permits(DELEGATE_CAPACITY.standard);
  #active = new Map<bigint, ActiveRequest>();
  /** The status of each answered request, for its debug line (only at `debug`). */
  #statuses = new Map<bigint, string>();
  #finished = new Set<bigint>();
  #sessions = new Map<string, SessionState>();
  #delegates = new Map<bigint, Delegate>();
  #nextDelegate = 1n;
  #tasks = new Set<Promise<void>>();
  /** Aborts at the connection's end: the core abandons what is still running. */
  #closed = new AbortController();
  #ended = false;

  /** @param options see {@link V1ConnectionOptions} */
  constructor(options: V1ConnectionOptions) {
    this.#core = options.core;
    this.#log = options.log;
    this.#readable = options.readable;
    this.#writer = new FrameWriter(options.writable, options.queueFrames);
    this.#maxFrame = options.maxFrameBytes ?? MAX_FRAME_BYTES;
  }

  /** Requests in flight. */
  get inFlight(): number {
    return this.#active.size;
  }

  /** The capabilities granted by the handshake. */
  get capabilities(): ReadonlySet<string> {
    return this.#capabilities;
  }

  /**
   * Serves until the client's EOF, a rejected hello or a fatal error; then writes nothing more
   * (after a rejection: the rejection), cancels every request and shuts every session of this
   * connection down (bounded by {@link EOF_SHUTDOWN_MS}).
   *
   * @returns how the connection ended
   */
  async run(): Promise<ConnectionEnd> {
    let end: EndReason;
    try {
      end = await this.#serve();
    } catch (err) {
      end = { type: "fatal", message: messageOf(err) };
    }
    if (end.type === "fatal") this.#log.error(end.message);
    if (end.type === "rejected") await this.#writer.flushed();
    this.#writer.stop();
    const started = performance.now();
    const timedOut = await this.#close();
    const remainingMs = Math.max(0, Math.round(EOF_SHUTDOWN_MS - (performance.now() - started)));
    return timedOut ? { ...end, timedOut, remainingMs } : { ...end, remainingMs };
  }

  async #serve(): Promise<EndReason> {
    let hello = false;
    const stage = () => hello ? "message" : "hello";
    try {
      for await (const payload of readFrames(this.#readable, this.#maxFrame)) {
        let message: ClientMessage;
        try {
          const text = utf8(payload);
          message = decodeClientMessage(parseJson(text), text);
        } catch (err) {
          if (!(err instanceof DecodeError)) throw err;
          return {
            type: "fatal",
            message:
              `failed to read code-mode client ${stage()}: failed to decode code-mode IPC frame: ${err.message}`,
          };
        }
        if (!hello) {
          if (await this.#handshake(message)) return { type: "rejected" };
          hello = true;
          continue;
        }
        await this.#dispatch(message);
      }
    } catch (err) {
      if (err instanceof FramingError) {
        return { type: "fatal", message: `failed to read code-mode client ${stage()}: ${err.message}` };
      }
      if (err instanceof FatalError) return { type: "fatal", message: err.message };
      throw err;
    }
    return { type: "eof" };
  }

  /** @returns whether the hello was rejected */
  async #handshake(message: ClientMessage): Promise<boolean> {
    const reject = async (reason: Record<string, unknown>) => {
      await this.#send({ type: "connection/rejected", reason });
      return true;
    };
    if (message.type !== "connection/hello") {
      return await reject({ type: "invalidHello", message: "first message must be connection/hello" });
    }
    const hello = message.hello;
    if (!hello.supportedVersions.includes(1)) {
      return await reject({ type: "noCompatibleVersion", supportedVersions: [1] });
    }
    const known: readonly string[] = KNOWN_CAPABILITIES;
    const missing = hello.requiredCapabilities.find((c) => !known.includes(c));
    if (missing !== undefined) {
      return await reject({ type: "missingRequiredCapability", capability: missing });
    }
    for (const c of [...hello.requiredCapabilities, ...hello.optionalCapabilities]) {
      if (known.includes(c)) this.#capabilities.add(c);
    }
    if (this.#capabilities.has(CAP_DELEGATE_4096)) {
      this.#delegateCapacity = DELEGATE_CAPACITY.extended;
      this.#delegatePool = new Permits(DELEGATE_CAPACITY.extended);
    }
    await this.#send({
      type: "connection/ready",
      selectedVersion: 1,
      capabilities: KNOWN_CAPABILITIES.filter((c) => this.#capabilities.has(c)),
    });
    return false;
  }

  #admitId(id: bigint): void {
    if (this.#active.has(id) || this.#finished.has(id)) {
      throw new FatalError(`duplicate code-mode request ID RequestId(${id})`);
    }
  }

  #remember(id: bigint): void {
    this.#finished.add(id);
    if (this.#finished.size > REMEMBERED_IDS) {
      this.#finished.delete(this.#finished.values().next().value!);
    }
  }

  async #dispatch(message: ClientMessage): Promise<void> {
    switch (message.type) {
      case "connection/hello":
        throw new FatalError("received a second code-mode client hello");
      case "operation/cancel": {
        // Codex's host cancels only a wait; an execute runs on to its initial response.
        const active = this.#active.get(message.id);
        if (active?.kind === "wait") active.abort.abort();
        return;
      }
      case "operation/yield": {
        const active = this.#active.get(message.id);
        if ((active?.kind === "execute" || active?.kind === "wait") && active.observationId !== undefined) {
          try {
            this.#core.yieldObservation({
              sessionId: active.sessionId,
              observation: active.kind === "execute"
                ? { kind: "execution", executionId: active.observationId }
                : { kind: "wait", waitId: active.observationId },
            });
          } catch (err) {
            this.#log.debug("code-mode yield ignored", { error: messageOf(err) });
          }
        }
        return;
      }
      case "delegate/response":
        this.#delegateResponse(message.id, message.result);
        return;
      case "operation/request":
        return await this.#request(message.id, message.request);
    }
  }

  async #request(id: bigint, request: Request): Promise<void> {
    this.#admitId(id);
    if (this.#active.size >= MAX_IN_FLIGHT) {
      this.#remember(id);
      await this.#answer(id, error("code-mode host has too many in-flight requests"));
      return;
    }
    const kind = ({
      "session/open": "open",
      "session/execute": "execute",
      "session/wait": "wait",
      "session/terminate": "terminate",
      "session/shutdown": "shutdown",
    } as const)[request.method];
    const abort = new AbortController();
    const active: ActiveRequest = { kind, sessionId: request.sessionId, abort };
    this.#active.set(id, active);
    const start = performance.now();
    this.#spawn(
      this.#handle(id, request, active).finally(() => {
        this.#active.delete(id);
        this.#remember(id);
        // One debug line per request, as the gRPC door writes per RPC.
        if (this.#log.enabled("debug")) {
          this.#log.debug("rpc", {
            method: request.method,
            status: this.#statuses.get(id) ?? "none",
            duration_ms: Math.round((performance.now() - start) * 1_000) / 1_000,
            session_id: request.sessionId,
          });
        }
        this.#statuses.delete(id);
      }),
    );
  }

  #spawn(task: Promise<void>): void {
    const tracked = task.catch((err) =>
      this.#log.error("code-mode V1 task failed", { error: messageOf(err) })
    );
    this.#tasks.add(tracked);
    void tracked.finally(() => this.#tasks.delete(tracked));
  }

  async #handle(id: bigint, request: Request, active: ActiveRequest): Promise<void> {
    switch (request.method) {
      case "session/open":
        return await this.#open(id, request);
      case "session/execute":
        return await this.#execute(id, request, active);
      case "session/wait": {
        active.observationId = crypto.randomUUID();
        const signal = AbortSignal.any([active.abort.signal, this.#closed.signal]);
        const wait: WaitRequest & { maxTokens?: bigint } = {
          sessionId: request.sessionId,
          cellId: request.cellId,
          waitId: active.observationId,
          yieldTimeMs: request.yieldTimeMs,
        };
        // The wait call's token budget (the core's `maxTokens`, Server mode).
        if (request.maxOutputTokens !== undefined) wait.maxTokens = request.maxOutputTokens;
        const state = this.#sessions.get(request.sessionId);
        const cellId = request.cellId;
        state?.waiting.set(cellId, (state.waiting.get(cellId) ?? 0) + 1);
        try {
          return await this.#observe(id, request.sessionId, () => this.#core.wait(wait, { signal }), signal);
        } finally {
          if (state) {
            const left = (state.waiting.get(cellId) ?? 1) - 1;
            if (left > 0) state.waiting.set(cellId, left);
            else state.waiting.delete(cellId);
            if (left <= 0 && state.ending) this.#gate(state.finalSent, cellId).resolve();
          }
        }
      }
      case "session/terminate": {
        const terminate: { sessionId: string; cellId: string; maxTokens?: bigint } = {
          sessionId: request.sessionId,
          cellId: request.cellId,
        };
        if (request.maxOutputTokens !== undefined) terminate.maxTokens = request.maxOutputTokens;
        return await this.#observe(id, request.sessionId, () => this.#core.terminate(terminate));
      }
      case "session/shutdown": {
        let result;
        try {
          await this.#shutdownSession(request.sessionId);
          result = ok({ type: "session/closed", sessionId: request.sessionId });
        } catch (err) {
          result = error(this.#failure(id, err));
        }
        return await this.#answer(id, result);
      }
    }
  }

  /**
   * The message of a request's failure, from the table every door shares (`../wire_errors.ts`): a
   * domain error's own text; anything else is logged and answered with the generic text.
   */
  #failure(id: bigint, err: unknown): string {
    return wireError(err, this.#log, { door: "json-v1", request: this.#active.get(id)?.kind }).message;
  }

  /** Answers a wait or terminate with its outcome, after the session's earlier lease events. */
  async #observe(
    id: bigint,
    sessionId: string,
    work: () => ReturnType<CodeModeCore["wait"]>,
    signal?: AbortSignal,
  ): Promise<void> {
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
      result = error(signal?.aborted ? "code-mode request cancelled" : this.#failure(id, err));
    }
    const state = this.#sessions.get(sessionId);
    if (!state || !outcome) {
      try {
        return await this.#answer(id, result, extraBytes);
      } finally {
        outcome?.written?.();
      }
    }
    await this.#delivering(state, outcome, () => this.#answer(id, result, extraBytes));
  }

  /** Writes an outcome of a cell after what must precede it; a final one opens its `cell/closed`. */
  async #delivering(
    state: SessionState,
    outcome: ExecutionOutcome,
    write: () => Promise<void>,
  ): Promise<void> {
    try {
      await this.#beforeOutcome(state, outcome);
      await write();
    } finally {
      // The outcome is queued: the cell's later delegate requests may follow it.
      outcome.written?.();
      if (outcome.kind !== "yielded") this.#gate(state.finalSent, outcome.cellId).resolve();
    }
  }

  /** The session is ending: every cell may be reported closed without its final outcome. */
  #ending(state: SessionState): void {
    state.ending = true;
    for (const [cellId, gate] of state.finalSent) if (!state.waiting.has(cellId)) gate.resolve();
  }

  /**
   * Answers a request. `oversizeBytes`: the result holds an outcome too large to send in its
   * stand-in form (`oversizeStandIn`), whose frame is that much shorter than the real one.
   */
  #answer(id: bigint, result: Record<string, unknown>, oversizeBytes?: number): Promise<void> {
    if (this.#log.enabled("debug")) this.#statuses.set(id, String(result.status));
    return this.#send(
      { type: "operation/response", id: wireId(id), result },
      "code-mode host response",
      oversizeBytes,
    )
      .then(() => {});
  }

  async #open(id: bigint, request: Extract<Request, { method: "session/open" }>): Promise<void> {
    let lease: Lease;
    try {
      lease = await this.#core.openSession({
        sessionId: request.sessionId,
        outputMode: request.outputTruncation,
        maxYieldTimeMs: request.limits?.maxYieldTimeMs,
        maxHeapSizeBytes: request.limits?.maxHeapSizeBytes,
        maxPendingDelegateCalls: this.#delegateCapacity,
        delegatePermits: this.#delegatePool,
        jsonOutcomeSizes: true,
        serialOutcomes: true,
        closureTerminatesWaits: true,
      });
    } catch (err) {
      return await this.#answer(id, error(this.#failure(id, err)));
    }
    const sessionId = lease.sessionId;
    let subscription: ToolCallSubscription;
    try {
      subscription = this.#core.subscribeToToolCalls({ sessionId });
    } catch (err) {
      void this.#core.closeSession(sessionId).catch(() => {});
      return await this.#answer(id, error(this.#failure(id, err)));
    }
    const state: SessionState = {
      lease,
      subscription,
      stop: new AbortController(),
      pumped: Promise.resolve(),
      startedSent: new Map(),
      initialSent: new Map(),
      finalSent: new Map(),
      waiting: new Map(),
      ending: false,
      closing: new Set(),
      invokeWritten: new Map(),
      delegates: new Map(),
      leasePulled: 0,
      leaseWritten: 0,
      leaseEnded: false,
      leaseProgress: Promise.withResolvers(),
    };
    this.#sessions.set(sessionId, state);
    // The lease's own iteration must not be stopped by the door (an aborted lease closes the
    // session); it ends when the session does.
    state.pumped = Promise.all([this.#pumpLease(sessionId, state), this.#pumpToolCalls(sessionId, state)])
      .then(() => Promise.all([...state.closing]))
      .then(() => {
        subscription.close();
        if (this.#sessions.get(sessionId) === state) this.#sessions.delete(sessionId);
        for (const [delegateId, delegate] of this.#delegates) {
          if (delegate.sessionId === sessionId) this.#delegates.delete(delegateId);
        }
      });
    await this.#answer(id, ok({ type: "session/ready", sessionId }));
  }

  #gate(gates: Map<string, PromiseWithResolvers<void>>, cellId: string): PromiseWithResolvers<void> {
    let gate = gates.get(cellId);
    if (!gate) {
      gate = Promise.withResolvers<void>();
      gates.set(cellId, gate);
    }
    return gate;
  }

  #finalGate(state: SessionState, cellId: string): Promise<void> {
    const gate = this.#gate(state.finalSent, cellId);
    if (state.ending && !state.waiting.has(cellId)) gate.resolve();
    return gate.promise;
  }

  /**
   * Resolves once the lease pump has written every event the core had produced when this was
   * called (not the ones after, so a flood of notifications cannot hold an outcome back): after a
   * macrotask every event the core had handed over has reached the pump (the hand-over is
   * microtasks), and the core's backlog counts the rest.
   */
  async #leaseSettled(state: SessionState): Promise<void> {
    await macrotask();
    const target = state.leasePulled + state.lease.backlog;
    while (state.leaseWritten < target && !state.leaseEnded) await state.leaseProgress.promise;
  }

  /**
   * What must precede an outcome: the session's earlier lease events; before a termination, a
   * `delegate/cancel` for each of the cell's notifications still being delivered (as Codex's host
   * does, newest first).
   */
  async #beforeOutcome(state: SessionState, outcome: ExecutionOutcome): Promise<void> {
    await this.#leaseSettled(state);
    if (outcome.kind !== "terminated") return;
    const pending = [...this.#delegates].filter(([, d]) =>
      d.kind === "notification" && d.cellId === outcome.cellId && this.#sessions.get(d.sessionId) === state
    ).reverse();
    for (const [delegateId, delegate] of pending) {
      this.#delegates.delete(delegateId);
      if (delegate.kind === "notification") {
        this.#acknowledge(delegate, "code mode delegate request cancelled");
      }
      await delegate.queued;
      await this.#send({ type: "delegate/cancel", id: wireId(delegateId) });
    }
  }

  async #pumpLease(sessionId: string, state: SessionState): Promise<void> {
    const progress = () => {
      state.leaseProgress.resolve();
      state.leaseProgress = Promise.withResolvers();
    };
    try {
      for await (const event of state.lease.events()) {
        state.leasePulled++;
        try {
          await this.#leaseEvent(sessionId, state, event);
        } finally {
          state.leaseWritten++;
          progress();
        }
      }
    } catch (err) {
      this.#log.debug("code-mode V1 lease ended", { error: messageOf(err) });
    } finally {
      this.#ending(state);
      state.leaseEnded = true;
      progress();
    }
  }

  async #leaseEvent(sessionId: string, state: SessionState, event: LeaseEvent): Promise<void> {
    switch (event.type) {
      case "notification": {
        await this.#gate(state.startedSent, event.cellId).promise;
        const delegateId = this.#nextDelegate++;
        const delegate: Delegate = {
          kind: "notification",
          sessionId,
          notificationId: event.notificationId,
          cellId: event.cellId,
          queued: Promise.resolve(),
        };
        this.#delegates.set(delegateId, delegate);
        delegate.queued = this.#send({
          type: "delegate/request",
          id: wireId(delegateId),
          sessionId,
          request: {
            type: "notification/send",
            callId: event.callId,
            cellId: event.cellId,
            text: event.text,
          },
        }).then((sent) => {
          // A notification that cannot be written is a failed delivery.
          if (!sent && this.#delegates.get(delegateId) === delegate) {
            this.#delegates.delete(delegateId);
            this.#acknowledge(delegate, "code-mode host message exceeded the IPC frame limit");
          }
        });
        await delegate.queued;
        return;
      }
      case "toolCallCancelled": {
        let delegateId = state.delegates.get(event.invocationId);
        if (delegateId === undefined) {
          // Its tool/invoke is not written yet (it follows the notifications before it): the
          // cancel follows it, as on Codex's host.
          const written = Promise.withResolvers<void>();
          state.invokeWritten.set(event.invocationId, written);
          const stopped = Promise.withResolvers<void>();
          const onStop = () => stopped.resolve();
          state.stop.signal.addEventListener("abort", onStop, { once: true });
          if (state.stop.signal.aborted) onStop();
          await Promise.race([written.promise, stopped.promise]);
          state.stop.signal.removeEventListener("abort", onStop);
          state.invokeWritten.delete(event.invocationId);
          delegateId = state.delegates.get(event.invocationId);
          if (delegateId === undefined) return;
        }
        state.delegates.delete(event.invocationId);
        const delegate = this.#delegates.get(delegateId);
        this.#delegates.delete(delegateId);
        await delegate?.queued;
        await this.#send({ type: "delegate/cancel", id: wireId(delegateId) });
        return;
      }
      case "cellClosed": {
        const cellId = event.cellId;
        const closed = (async () => {
          await this.#gate(state.initialSent, cellId).promise;
          await this.#finalGate(state, cellId);
          await this.#send({ type: "cell/closed", sessionId, cellId });
        })().finally(() => {
          state.closing.delete(closed);
          state.startedSent.delete(cellId);
          state.initialSent.delete(cellId);
          state.finalSent.delete(cellId);
        });
        state.closing.add(closed);
        return;
      }
      case "opened":
        return;
    }
  }

  async #pumpToolCalls(sessionId: string, state: SessionState): Promise<void> {
    try {
      for await (const call of state.subscription.calls(state.stop.signal)) {
        await this.#gate(state.startedSent, call.cellId).promise;
        // After the notifications the cell made before this call, as Codex's host writes them.
        const mark = call.leaseMark ?? 0;
        while (state.leaseWritten < mark && !state.leaseEnded) await state.leaseProgress.promise;
        const delegateId = this.#nextDelegate++;
        const frame = encodeFrame({
          type: "delegate/request",
          id: wireId(delegateId),
          sessionId,
          request: toolInvoke(call),
        });
        if (frame.length - 4 > this.#maxFrame) {
          // Codex's host fails the call with the frame's length (its delegate ID is used up).
          this.#complete(sessionId, call.invocationId, {
            type: "failed",
            message: frameTooLarge(frame.length - 4, this.#maxFrame),
          });
          state.invokeWritten.get(call.invocationId)?.resolve();
          continue;
        }
        const queued = this.#writer.send(frame);
        state.delegates.set(call.invocationId, delegateId);
        this.#delegates.set(delegateId, { kind: "tool", sessionId, invocationId: call.invocationId, queued });
        state.invokeWritten.get(call.invocationId)?.resolve();
        await queued;
      }
    } catch (err) {
      this.#log.debug("code-mode V1 tool calls ended", { error: messageOf(err) });
    }
  }

  #complete(
    sessionId: string,
    invocationId: string,
    outcome: { type: "succeeded"; outputJson: Uint8Array } | { type: "failed"; message: string },
  ): void {
    try {
      this.#core.completeToolCall({ sessionId, invocationId, outcome });
    } catch (err) {
      this.#log.debug("code-mode delegate response ignored", { error: messageOf(err) });
    }
  }

  /** Ends a notification's delivery; a failure is logged as Codex's host logs it. */
  #acknowledge(delegate: Delegate & { kind: "notification" }, failure: string | undefined): void {
    if (failure !== undefined) this.#log.warn(`failed to deliver code mode notification: ${failure}`);
    try {
      this.#core.acknowledgeNotification({
        sessionId: delegate.sessionId,
        notificationId: delegate.notificationId,
      });
    } catch (err) {
      this.#log.debug("code-mode notification acknowledgement ignored", { error: messageOf(err) });
    }
  }

  #delegateResponse(delegateId: bigint, result: DelegateResult): void {
    const delegate = this.#delegates.get(delegateId);
    if (!delegate) return; // cancelled, finished, or never sent: a late response is ignored
    this.#delegates.delete(delegateId);
    if (delegate.kind === "tool") {
      this.#sessions.get(delegate.sessionId)?.delegates.delete(delegate.invocationId);
      this.#complete(
        delegate.sessionId,
        delegate.invocationId,
        result.status === "error"
          ? { type: "failed", message: result.message }
          : result.value.type === "tool/result"
          ? { type: "succeeded", outputJson: new TextEncoder().encode(JSON.stringify(result.value.result)) }
          : { type: "failed", message: "code-mode client returned an invalid tool result" },
      );
      return;
    }
    this.#acknowledge(
      delegate,
      result.status === "error"
        ? result.message
        : result.value.type === "notification/delivered"
        ? undefined
        : "code-mode client returned an invalid notification result",
    );
  }

  async #execute(
    id: bigint,
    request: Extract<Request, { method: "session/execute" }>,
    active: ActiveRequest,
  ): Promise<void> {
    const sessionId = request.sessionId;
    const fields = request.request;
    if (fields.maxOutputTokens !== undefined && fields.maxOutputTokens < 0) {
      // An i32 that does not convert to a token count fails only this request.
      return await this.#answer(
        id,
        error("invalid code-mode execute request: number too small to fit in target type"),
      );
    }
    const executionId = crypto.randomUUID();
    active.observationId = executionId;
    const core: ExecuteRequest = {
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
    const signal = this.#closed.signal;
    let state: SessionState | undefined;
    let cellId: string | undefined;
    try {
      for await (const event of this.#core.execute(core, { signal })) {
        if (event.type === "started") {
          cellId = event.cellId;
          state = this.#sessions.get(sessionId);
          await this.#answer(id, ok({ type: "execution/started", cellId }));
          if (state) this.#gate(state.startedSent, cellId).resolve();
        } else {
          const standIn = event.outcome.oversize ? oversizeStandIn(event.outcome) : undefined;
          const result = ok(runtimeResponse(standIn?.outcome ?? event.outcome));
          const send = () => this.#initial(id, result, standIn?.extraBytes);
          if (state) await this.#delivering(state, event.outcome, send);
          else await send().finally(() => event.outcome.written?.());
        }
      }
      if (cellId !== undefined && signal.aborted) {
        await this.#initial(id, error("code-mode request cancelled"));
      }
    } catch (err) {
      const message = signal.aborted ? "code-mode request cancelled" : this.#failure(id, err);
      if (cellId !== undefined) {
        await this.#initial(id, error(message));
        if (state) this.#gate(state.finalSent, cellId).resolve();
      } else await this.#answer(id, error(message));
    } finally {
      if (state && cellId !== undefined) {
        this.#gate(state.startedSent, cellId).resolve();
        this.#gate(state.initialSent, cellId).resolve();
      }
    }
  }

  #initial(id: bigint, result: Record<string, unknown>, oversizeBytes?: number): Promise<void> {
    return this.#send(
      { type: "execute/initialResponse", id: wireId(id), result },
      "code-mode initial response",
      oversizeBytes,
    )
      .then(() => {});
  }

  /**
   * Queues a message. A response that does not fit in a frame is replaced by the error result
   * `{what} exceeds the IPC frame limit: code-mode IPC frame length {n} exceeds {max} bytes`; any
   * other oversized message is not sent (logged).
   *
   * - `oversizeBytes`: the message carries an outcome too large to send in its stand-in form
   *   (`oversizeStandIn`), never sent as it is: the real frame's length is the stand-in's plus
   *   these bytes. Its JSON form is never smaller than its protobuf form, so with the default
   *   limits it is always over the frame limit; if it is not (`maxMessageBytes` set below the
   *   frame limit), the answer is `{what} exceeds the message limit: {n} bytes`.
   *
   * @returns whether the message itself was queued
   */
  async #send(message: Record<string, unknown>, what?: string, oversizeBytes?: number): Promise<boolean> {
    let frame = encodeFrame(message);
    const length = frame.length - 4 + (oversizeBytes ?? 0);
    if (oversizeBytes === undefined && length <= this.#maxFrame) {
      await this.#writer.send(frame);
      return true;
    }
    if (length <= this.#maxFrame) {
      // An outcome over a `maxMessageBytes` set below the frame limit: the message limit's error.
      frame = encodeFrame({
        ...message,
        result: error(`${what} exceeds the message limit: ${length} bytes`),
      });
      await this.#writer.send(frame);
      return false;
    }
    const detail = frameTooLarge(length, this.#maxFrame);
    if (what === undefined) {
      this.#log.error("code-mode host message exceeded the IPC frame limit", { error: detail });
      return false;
    }
    frame = encodeFrame({ ...message, result: error(`${what} exceeds the IPC frame limit: ${detail}`) });
    await this.#writer.send(frame);
    return false;
  }

  async #shutdownSession(sessionId: string): Promise<void> {
    const state = this.#sessions.get(sessionId);
    const closing = this.#core.closeSession(sessionId);
    if (state) this.#ending(state);
    await closing;
    if (state) {
      await state.pumped;
      await this.#writer.flushed();
    }
  }

  /** Cancels every request and shuts every session down, bounded. */
  async #close(): Promise<boolean> {
    if (this.#ended) return false;
    this.#ended = true;
    this.#closed.abort();
    for (const active of this.#active.values()) active.abort.abort();
    for (const [delegateId, delegate] of this.#delegates) {
      if (delegate.kind !== "notification") continue;
      this.#delegates.delete(delegateId);
      this.#acknowledge(delegate, "code-mode client connection closed");
    }
    // Nothing more is written: release every cell still waiting on a gate.
    for (const state of this.#sessions.values()) {
      this.#ending(state);
      for (const gates of [state.startedSent, state.initialSent]) {
        for (const gate of gates.values()) gate.resolve();
      }
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((resolve) => timer = setTimeout(() => resolve("late"), EOF_SHUTDOWN_MS));
    const done = (async () => {
      await Promise.all(
        [...this.#sessions.keys()].map((id) => this.#core.closeSession(id).catch(() => {})),
      );
      for (const s of this.#sessions.values()) s.stop.abort();
      await Promise.all([...this.#sessions.values()].map((s) => s.pumped));
      await Promise.all([...this.#tasks]);
    })();
    const result = await Promise.race([done, late]);
    clearTimeout(timer);
    if (result === "late") this.#log.error("timed out shutting down code-mode host state");
    let closeTimer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([this.#writer.close(), new Promise((r) => closeTimer = setTimeout(r, 1_000))]);
    clearTimeout(closeTimer);
    return result === "late";
  }
}

/**
 * One JSON "host V1" connection (SPEC §9.10): the handshake, the request table, the sessions this
 * client opened with their tool-call and lease pumps, delegate requests, and the end of the
 * connection. It reads frames from one stream and writes frames to another; the conversions are
 * in `convert.ts`, the framing in `framing.ts`.
 *
 * - The frame reader never waits for the outgoing queue, except to refuse a request when 256 are
 *   already in flight and the queue is full (that is the client flooding without reading).
 * - Every producer of frames (a request's answer, a session's tool calls and lease events) waits
 *   for room in the bounded queue, so a client that stops reading holds the host back.
 *
 * @module
 */
import type { CodeModeCore, Lease, ToolCallSubscription } from "../../core/code_mode_core.ts";
import { HostError } from "../../core/errors.ts";
import type { Logger } from "../../ops/log.ts";
import {
  CAP_LIMITS,
  CAP_YIELD,
  type ClientMessage,
  type DelegateResult,
  error,
  KNOWN_CAPABILITIES,
  LimitsError,
  ok,
  parseClientMessage,
  parseExecute,
  parseHello,
  parseRequest,
  type Request,
  runtimeResponse,
  toolInvoke,
  waitOutcome,
} from "./convert.ts";
import { encodeFrame, FrameWriter, FramingError, MAX_FRAME_BYTES, readFrames } from "./framing.ts";

/** Requests in flight at most. */
export const MAX_IN_FLIGHT = 256;
/** Finished request IDs (and shut-down session IDs, in the core) remembered. */
export const REMEMBERED_IDS = 4_096;
/** Bound of the shutdown at client EOF. */
export const EOF_SHUTDOWN_MS = 5_000;

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
  /** Per cell: resolved once its initial response is queued (cell/closed waits for it). */
  initialSent: Map<string, PromiseWithResolvers<void>>;
  /** cell/closed frames waiting for their initial response. */
  closing: Set<Promise<void>>;
  /** Invocations cancelled before their tool call reached the door. */
  cancelledEarly: Set<string>;
  /** invocation ID → delegate id. */
  delegates: Map<string, number>;
}

type Delegate =
  & { sessionId: string; queued: Promise<void> }
  & ({ kind: "tool"; invocationId: string } | { kind: "notification"; notificationId: string });

class FatalError extends Error {
  override name = "FatalError";
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Reads `type`, `id` and an execute's method from an oversized frame's first 4 KiB. */
export function oversizedId(head: Uint8Array): { type: string; id: number; execute: boolean } | undefined {
  const text = new TextDecoder().decode(head);
  const match = /^\s*\{\s*"type"\s*:\s*"([a-z/]+)"\s*,\s*"id"\s*:\s*(-?\d+)\s*[,}]/.exec(text) ??
    /^\s*\{\s*"id"\s*:\s*(-?\d+)\s*,\s*"type"\s*:\s*"([a-z/]+)"\s*[,}]/.exec(text);
  if (!match) return undefined;
  const [type, id] = match[1].startsWith("-") || /^\d/.test(match[1])
    ? [match[2], Number(match[1])]
    : [match[1], Number(match[2])];
  if (!Number.isSafeInteger(id)) return undefined;
  return { type, id, execute: /"method"\s*:\s*"session\/execute"/.test(text) };
}

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
  #active = new Map<number, ActiveRequest>();
  /** The status of each answered request, for its debug line (only at `debug`). */
  #statuses = new Map<number, string>();
  #finished = new Set<number>();
  #sessions = new Map<string, SessionState>();
  #delegates = new Map<number, Delegate>();
  #nextDelegate = 1;
  #tasks = new Set<Promise<void>>();
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

  /**
   * Serves until the client's EOF or a fatal error, then cancels every request and shuts every
   * session of this connection down (bounded by {@link EOF_SHUTDOWN_MS}).
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
    const started = performance.now();
    const timedOut = await this.#close();
    const remainingMs = Math.max(0, Math.round(EOF_SHUTDOWN_MS - (performance.now() - started)));
    return timedOut ? { ...end, timedOut, remainingMs } : { ...end, remainingMs };
  }

  async #serve(): Promise<EndReason> {
    let hello = false;
    try {
      for await (const frame of readFrames(this.#readable, this.#maxFrame)) {
        if (frame.type === "oversized") {
          await this.#oversized(frame.length, frame.head, hello);
          continue;
        }
        let value: unknown;
        try {
          value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(frame.payload));
        } catch (err) {
          return { type: "fatal", message: `failed to decode code-mode IPC frame: ${messageOf(err)}` };
        }
        if (!hello) {
          const rejected = await this.#handshake(value);
          if (rejected) return { type: "rejected" };
          hello = true;
          continue;
        }
        let message: ClientMessage;
        try {
          message = parseClientMessage(value);
        } catch (err) {
          return { type: "fatal", message: `invalid code-mode IPC message: ${messageOf(err)}` };
        }
        await this.#dispatch(message);
      }
    } catch (err) {
      if (err instanceof FatalError || err instanceof FramingError) {
        return { type: "fatal", message: err.message };
      }
      throw err;
    }
    return { type: "eof" };
  }

  /** @returns whether the hello was rejected */
  async #handshake(value: unknown): Promise<boolean> {
    const reject = async (reason: Record<string, unknown>) => {
      await this.#send({ type: "connection/rejected", reason });
      return true;
    };
    const message = value as Record<string, unknown>;
    if (
      typeof value !== "object" || value === null || Array.isArray(value) ||
      message.type !== "connection/hello"
    ) {
      return await reject({ type: "invalidHello", message: "first message must be connection/hello" });
    }
    let hello;
    try {
      hello = parseHello(message);
    } catch (err) {
      return await reject({ type: "invalidHello", message: messageOf(err) });
    }
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
    await this.#send({
      type: "connection/ready",
      selectedVersion: 1,
      capabilities: KNOWN_CAPABILITIES.filter((c) => this.#capabilities.has(c)),
    });
    return false;
  }

  async #oversized(length: number, head: Uint8Array, hello: boolean): Promise<void> {
    const message = `code-mode IPC frame length ${length} exceeds ${this.#maxFrame} bytes`;
    const found = hello ? oversizedId(head) : undefined;
    if (found?.type === "operation/request") {
      this.#admitId(found.id);
      this.#remember(found.id);
      await this.#send({ type: "operation/response", id: found.id, result: error(message) });
      if (found.execute) {
        await this.#send({ type: "execute/initialResponse", id: found.id, result: error(message) });
      }
      return;
    }
    if (found?.type === "delegate/response") {
      this.#delegateResponse(found.id, { status: "error", message });
      return;
    }
    throw new FatalError(message);
  }

  #admitId(id: number): void {
    if (this.#active.has(id) || this.#finished.has(id)) {
      throw new FatalError(`duplicate code-mode request ID ${id}`);
    }
  }

  #remember(id: number): void {
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
        const active = this.#active.get(message.id);
        if (active?.kind === "execute" || active?.kind === "wait") active.abort.abort();
        return;
      }
      case "operation/yield": {
        if (!this.#capabilities.has(CAP_YIELD)) {
          throw new FatalError(
            "invalid code-mode IPC message: operation/yield needs the yield-observation capability",
          );
        }
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

  async #request(id: number, raw: Record<string, unknown>): Promise<void> {
    this.#admitId(id);
    let request: Request;
    try {
      request = parseRequest(raw, this.#capabilities.has(CAP_LIMITS));
    } catch (err) {
      if (err instanceof LimitsError) {
        this.#remember(id);
        this.#spawn(this.#answer(id, error(`invalid code-mode session execution limits: ${err.message}`)));
        return;
      }
      throw new FatalError(`invalid code-mode IPC message: ${messageOf(err)}`);
    }
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
    const active: ActiveRequest = { kind, sessionId: request.sessionId, abort: new AbortController() };
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

  async #handle(id: number, request: Request, active: ActiveRequest): Promise<void> {
    switch (request.method) {
      case "session/open":
        return await this.#open(id, request);
      case "session/execute":
        return await this.#execute(id, request.sessionId, request.request, active);
      case "session/wait": {
        active.observationId = crypto.randomUUID();
        return await this.#answerWith(id, async () => {
          const result = await this.#core.wait({
            sessionId: request.sessionId,
            cellId: request.cellId,
            waitId: active.observationId!,
            yieldTimeMs: request.yieldTimeMs,
          }, { signal: active.abort.signal });
          return ok({ type: "wait/completed", outcome: waitOutcome(result) });
        }, active.abort.signal);
      }
      case "session/terminate":
        return await this.#answerWith(id, async () => {
          const result = await this.#core.terminate({ sessionId: request.sessionId, cellId: request.cellId });
          return ok({ type: "wait/completed", outcome: waitOutcome(result) });
        });
      case "session/shutdown":
        return await this.#answerWith(id, async () => {
          await this.#shutdownSession(request.sessionId);
          return ok({ type: "session/closed", sessionId: request.sessionId });
        });
    }
  }

  /** Answers `id` with what `work` gives, or its error (cancelled when `signal` aborted). */
  async #answerWith(
    id: number,
    work: () => Promise<Record<string, unknown>>,
    signal?: AbortSignal,
  ): Promise<void> {
    let result;
    try {
      result = await work();
    } catch (err) {
      result = error(signal?.aborted ? "code-mode request cancelled" : messageOf(err));
    }
    await this.#answer(id, result);
  }

  #answer(id: number, result: Record<string, unknown>): Promise<void> {
    if (this.#log.enabled("debug")) this.#statuses.set(id, String(result.status));
    return this.#send({ type: "operation/response", id, result }, true);
  }

  async #open(id: number, request: Extract<Request, { method: "session/open" }>): Promise<void> {
    let lease: Lease;
    try {
      lease = await this.#core.openSession({
        sessionId: request.sessionId,
        maxYieldTimeMs: request.limits?.maxYieldTimeMs,
        maxHeapSizeBytes: request.limits?.maxHeapSizeBytes,
      });
    } catch (err) {
      let message = messageOf(err);
      if (
        err instanceof HostError && err.code === "invalid_request" && message.startsWith("maximum heap size")
      ) {
        message = `invalid code-mode session execution limits: ${message}`;
      }
      return await this.#answer(id, error(message));
    }
    const sessionId = lease.sessionId;
    let subscription: ToolCallSubscription;
    try {
      subscription = this.#core.subscribeToToolCalls({ sessionId });
    } catch (err) {
      void this.#core.closeSession(sessionId).catch(() => {});
      return await this.#answer(id, error(messageOf(err)));
    }
    const stop = new AbortController();
    const state: SessionState = {
      lease,
      subscription,
      stop,
      pumped: Promise.resolve(),
      initialSent: new Map(),
      closing: new Set(),
      cancelledEarly: new Set(),
      delegates: new Map(),
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

  #gate(state: SessionState, cellId: string): PromiseWithResolvers<void> {
    let gate = state.initialSent.get(cellId);
    if (!gate) {
      gate = Promise.withResolvers<void>();
      state.initialSent.set(cellId, gate);
    }
    return gate;
  }

  async #pumpLease(sessionId: string, state: SessionState): Promise<void> {
    try {
      for await (const event of state.lease.events()) {
        switch (event.type) {
          case "notification": {
            const delegateId = this.#nextDelegate++;
            const queued = this.#send({
              type: "delegate/request",
              id: delegateId,
              sessionId,
              request: {
                type: "notification/send",
                callId: event.callId,
                cellId: event.cellId,
                text: event.text,
              },
            });
            this.#delegates.set(delegateId, {
              kind: "notification",
              sessionId,
              notificationId: event.notificationId,
              queued,
            });
            await queued;
            break;
          }
          case "toolCallCancelled": {
            const delegateId = state.delegates.get(event.invocationId);
            if (delegateId === undefined) {
              state.cancelledEarly.add(event.invocationId);
              break;
            }
            state.delegates.delete(event.invocationId);
            const delegate = this.#delegates.get(delegateId);
            this.#delegates.delete(delegateId);
            await delegate?.queued;
            await this.#send({ type: "delegate/cancel", id: delegateId });
            break;
          }
          case "cellClosed": {
            const gate = this.#gate(state, event.cellId);
            const closed = gate.promise.then(() =>
              this.#send({ type: "cell/closed", sessionId, cellId: event.cellId })
            ).finally(() => {
              state.closing.delete(closed);
              state.initialSent.delete(event.cellId);
            });
            state.closing.add(closed);
            break;
          }
          case "opened":
            break;
        }
      }
    } catch (err) {
      this.#log.debug("code-mode V1 lease ended", { error: messageOf(err) });
    }
  }

  async #pumpToolCalls(sessionId: string, state: SessionState): Promise<void> {
    try {
      for await (const call of state.subscription.calls(state.stop.signal)) {
        if (state.cancelledEarly.delete(call.invocationId)) continue;
        const delegateId = this.#nextDelegate++;
        const queued = this.#send({
          type: "delegate/request",
          id: delegateId,
          sessionId,
          request: toolInvoke(call),
        });
        state.delegates.set(call.invocationId, delegateId);
        this.#delegates.set(delegateId, { kind: "tool", sessionId, invocationId: call.invocationId, queued });
        await queued;
      }
    } catch (err) {
      this.#log.debug("code-mode V1 tool calls ended", { error: messageOf(err) });
    }
  }

  #delegateResponse(delegateId: number, result: DelegateResult): void {
    const delegate = this.#delegates.get(delegateId);
    if (!delegate) return; // cancelled, finished, or never sent: a late response is ignored
    this.#delegates.delete(delegateId);
    const sessionId = delegate.sessionId;
    try {
      if (delegate.kind === "tool") {
        this.#sessions.get(sessionId)?.delegates.delete(delegate.invocationId);
        if (result.status === "ok" && result.value.type !== "tool/result") {
          throw new FatalError(`code-mode delegate response ${delegateId} does not answer a tool call`);
        }
        this.#core.completeToolCall({
          sessionId,
          invocationId: delegate.invocationId,
          outcome: result.status === "ok"
            ? {
              type: "succeeded",
              outputJson: new TextEncoder().encode(
                JSON.stringify((result.value as { result: unknown }).result ?? null),
              ),
            }
            : { type: "failed", message: result.message },
        });
      } else {
        if (result.status === "ok" && result.value.type !== "notification/delivered") {
          throw new FatalError(`code-mode delegate response ${delegateId} does not answer a notification`);
        }
        this.#core.acknowledgeNotification({ sessionId, notificationId: delegate.notificationId });
      }
    } catch (err) {
      if (err instanceof FatalError) throw err;
      this.#log.debug("code-mode delegate response ignored", { error: messageOf(err) });
    }
  }

  async #execute(
    id: number,
    sessionId: string,
    inner: Record<string, unknown>,
    active: ActiveRequest,
  ): Promise<void> {
    const executionId = crypto.randomUUID();
    active.observationId = executionId;
    let request;
    try {
      request = parseExecute(sessionId, executionId, inner);
    } catch (err) {
      return await this.#refuseExecute(id, error(`invalid code-mode execute request: ${messageOf(err)}`));
    }
    const signal = active.abort.signal;
    let gate: PromiseWithResolvers<void> | undefined;
    let started = false;
    try {
      for await (const event of this.#core.execute(request, { signal })) {
        if (event.type === "started") {
          started = true;
          const state = this.#sessions.get(sessionId);
          gate = state ? this.#gate(state, event.cellId) : undefined;
          await this.#answer(id, ok({ type: "execution/started", cellId: event.cellId }));
        } else {
          await this.#initial(id, ok(runtimeResponse(event.outcome)));
        }
      }
      if (signal.aborted && started) await this.#initial(id, error("code-mode request cancelled"));
    } catch (err) {
      const message = signal.aborted ? "code-mode request cancelled" : messageOf(err);
      if (started) await this.#initial(id, error(message));
      else await this.#refuseExecute(id, error(message));
    } finally {
      gate?.resolve();
    }
  }

  /**
   * An execute that never started still gets its one `execute/initialResponse` (the id stays
   * active until then, SPEC §9.10), with the same error as its `operation/response`.
   */
  async #refuseExecute(id: number, result: Record<string, unknown>): Promise<void> {
    await this.#answer(id, result);
    await this.#initial(id, result);
  }

  #initial(id: number, result: Record<string, unknown>): Promise<void> {
    return this.#send({ type: "execute/initialResponse", id, result }, true);
  }

  /**
   * Queues a message. A response that does not fit in a frame is replaced by the error result
   * (`replace`); any other oversized message is a host fault (logged, not sent).
   */
  async #send(message: Record<string, unknown>, replace = false): Promise<void> {
    let frame = encodeFrame(message);
    if (frame.length - 4 > this.#maxFrame) {
      const detail = `${frame.length - 4} bytes`;
      if (!replace) {
        this.#log.error("code-mode host message exceeded the IPC frame limit", { error: detail });
        return;
      }
      frame = encodeFrame({
        ...message,
        result: error(
          `code-mode host response exceeded the ${this.#maxFrame}-byte IPC frame limit: ${detail}`,
        ),
      });
    }
    await this.#writer.send(frame);
  }

  async #shutdownSession(sessionId: string): Promise<void> {
    const state = this.#sessions.get(sessionId);
    await this.#core.closeSession(sessionId);
    if (state) {
      await state.pumped;
      await this.#writer.flushed();
    }
  }

  /** Cancels every request and shuts every session down, bounded; then drains the queue. */
  async #close(): Promise<boolean> {
    if (this.#ended) return false;
    this.#ended = true;
    for (const active of this.#active.values()) active.abort.abort();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((resolve) => timer = setTimeout(() => resolve("late"), EOF_SHUTDOWN_MS));
    const done = (async () => {
      await Promise.all(
        [...this.#sessions.keys()].map((id) => this.#core.closeSession(id).catch(() => {})),
      );
      await Promise.all([...this.#sessions.values()].map((s) => s.pumped));
      for (const s of this.#sessions.values()) s.stop.abort();
      await Promise.all([...this.#tasks]);
    })();
    const result = await Promise.race([done, late]);
    clearTimeout(timer);
    if (result === "late") this.#log.error("timed out shutting down code-mode host state");
    let flushTimer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([this.#writer.close(), new Promise((r) => flushTimer = setTimeout(r, 1_000))]);
    clearTimeout(flushTimer);
    return result === "late";
  }
}

/**
 * One JSON "host V1" connection, as Codex's own host (0.171) serves it: the envelope — the
 * handshake, the request table, `operation/cancel`, `operation/yield` and `delegate/response` —
 * and the end of the connection. The operations are `operations.ts`, each session's pumps
 * `session_pumps.ts`, the delegate requests in flight `delegates.ts`, what is written `outbox.ts`;
 * the wire forms are `client_messages.ts` and `host_messages.ts` (decoding in `serde.ts`), the
 * framing `framing.ts`.
 *
 * - Every malformed frame is fatal (serde's message on stderr, exit 1, nothing more written); so
 *   are a second hello, a duplicate request ID, a frame over 64 MiB and EOF inside a frame.
 * - Per cell, frames go out in the reference's order (see `session_pumps.ts`).
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
import type { CodeModeCore } from "../../core/code_mode_core.ts";
import { Permits } from "../../core/permits.ts";
import type { Logger } from "../../ops/log.ts";
import {
  CAP_DELEGATE_4096,
  type ClientMessage,
  decodeClientMessage,
  KNOWN_CAPABILITIES,
  type Request,
} from "./client_messages.ts";
import { DelegateTable } from "./delegates.ts";
import { FramingError, MAX_FRAME_BYTES, readFrames } from "./framing.ts";
import { error } from "./host_messages.ts";
import { type ActiveRequest, V1Operations } from "./operations.ts";
import { Outbox } from "./outbox.ts";
import { DecodeError, parseJson, utf8 } from "./serde.ts";
import type { V1Session } from "./session_pumps.ts";
import { messageOf } from "../../core/errors.ts";

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
  /** Payload limit both ways, named in the messages (default 67,108,864, as Codex's host). */
  maxFrameBytes?: number;
  /** Outgoing queue capacity in frames (default 128). */
  queueFrames?: number;
}

class FatalError extends Error {
  override name = "FatalError";
}

const METHOD_KINDS = {
  "session/open": "open",
  "session/execute": "execute",
  "session/wait": "wait",
  "session/terminate": "terminate",
  "session/shutdown": "shutdown",
} as const;

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
  #outbox: Outbox;
  #maxFrame: number;
  #capabilities = new Set<string>();
  #delegateCapacity: number = DELEGATE_CAPACITY.standard;
  #delegatePool: Permits = new Permits(DELEGATE_CAPACITY.standard);
  #active = new Map<bigint, ActiveRequest>();
  #finished = new Set<bigint>();
  #sessions = new Map<string, V1Session>();
  #delegates: DelegateTable;
  #operations: V1Operations;
  /** The requests being answered, each owned until it settles (a failure is logged). */
  #tasks = new Set<Promise<void>>();
  /** Aborts at the connection's end: the core abandons what is still running. */
  #closed = new AbortController();
  #ended = false;

  /** @param options see {@link V1ConnectionOptions} */
  constructor(options: V1ConnectionOptions) {
    this.#core = options.core;
    this.#log = options.log;
    this.#readable = options.readable;
    this.#maxFrame = options.maxFrameBytes ?? MAX_FRAME_BYTES;
    this.#outbox = new Outbox(options.writable, {
      log: options.log,
      maxFrameBytes: this.#maxFrame,
      queueFrames: options.queueFrames,
    });
    this.#delegates = new DelegateTable(options.core, options.log);
    this.#operations = new V1Operations({
      core: options.core,
      log: options.log,
      outbox: this.#outbox,
      delegates: this.#delegates,
      sessions: this.#sessions,
      closed: this.#closed.signal,
      delegatePool: () => ({ capacity: this.#delegateCapacity, permits: this.#delegatePool }),
    });
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
    if (end.type === "rejected") await this.#outbox.flushed();
    this.#outbox.stop();
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
      await this.#outbox.send({ type: "connection/rejected", reason });
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
    await this.#outbox.send({
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
      case "operation/yield":
        return this.#yield(message.id);
      case "delegate/response":
        this.#delegates.respond(message.id, message.result, (tool) => {
          this.#sessions.get(tool.sessionId)?.answered(tool.invocationId);
        });
        return;
      case "operation/request":
        return await this.#request(message.id, message.request);
    }
  }

  /** `operation/yield`: ends an execute's or a wait's observation early (ignored otherwise). */
  #yield(id: bigint): void {
    const active = this.#active.get(id);
    if ((active?.kind !== "execute" && active?.kind !== "wait") || active.observationId === undefined) return;
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

  async #request(id: bigint, request: Request): Promise<void> {
    this.#admitId(id);
    if (this.#active.size >= MAX_IN_FLIGHT) {
      this.#remember(id);
      await this.#outbox.answer(id, error("code-mode host has too many in-flight requests"));
      return;
    }
    const abort = new AbortController();
    const active: ActiveRequest = { kind: METHOD_KINDS[request.method], sessionId: request.sessionId, abort };
    this.#active.set(id, active);
    const start = performance.now();
    this.#own(
      this.#operations.handle(id, request, active).finally(() => {
        this.#active.delete(id);
        this.#remember(id);
        const status = this.#outbox.takeStatus(id);
        // One debug line per request, as the gRPC door writes per RPC.
        if (this.#log.enabled("debug")) {
          this.#log.debug("rpc", {
            method: request.method,
            status: status ?? "none",
            duration_ms: Math.round((performance.now() - start) * 1_000) / 1_000,
            session_id: request.sessionId,
          });
        }
      }),
    );
  }

  /** Owns a request's task until it settles; a failure is logged. */
  #own(task: Promise<void>): void {
    const tracked: Promise<void> = task
      .catch((err) => this.#log.error("code-mode V1 task failed", { error: messageOf(err) }))
      .finally(() => this.#tasks.delete(tracked));
    this.#tasks.add(tracked);
  }

  /** Cancels every request and shuts every session down, bounded. */
  async #close(): Promise<boolean> {
    if (this.#ended) return false;
    this.#ended = true;
    this.#closed.abort();
    for (const active of this.#active.values()) active.abort.abort();
    this.#delegates.closeNotifications();
    // Nothing more is written: release every cell still waiting on a gate.
    for (const session of this.#sessions.values()) session.releaseGates();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((resolve) => timer = setTimeout(() => resolve("late"), EOF_SHUTDOWN_MS));
    const done = (async () => {
      await Promise.all([...this.#sessions.keys()].map((id) => this.#closeSession(id)));
      for (const s of this.#sessions.values()) s.stop.abort();
      await Promise.all([...this.#sessions.values()].map((s) => s.pumped));
      await Promise.all([...this.#tasks]);
    })();
    const result = await Promise.race([done, late]);
    clearTimeout(timer);
    if (result === "late") this.#log.error("timed out shutting down code-mode host state");
    let closeTimer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([this.#outbox.close(), new Promise((r) => closeTimer = setTimeout(r, 1_000))]);
    clearTimeout(closeTimer);
    return result === "late";
  }

  /** Closes one of the connection's sessions at its end; one already gone is logged at debug. */
  async #closeSession(sessionId: string): Promise<void> {
    try {
      await this.#core.closeSession(sessionId);
    } catch (err) {
      this.#log.debug("code-mode V1 session not closed", { session_id: sessionId, error: messageOf(err) });
    }
  }
}

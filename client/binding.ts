/**
 * One binding of a public session to a host session (SPEC §10.4–§10.6, §10.12): the lease and
 * subscription readers, the cells it started, delegate calls and its failure.
 *
 * - A binding is *live* until it fails or is shut down; then it never becomes live again.
 * - Failing (§10.5 rule 6): every known cell gets `cellClosed` once, pending observations fail with
 *   the failure text, delegate calls see their signal abort, both streams are cancelled locally
 *   (no RPC), and the connection hold is released.
 * - IDs are mapped between host and public form by generation (§10.5 rules 1–2).
 *
 * @module
 */
import { type CallOptions, ClientError, type Metadata, Status } from "nice-grpc";
import {
  type CodeModeHostClient,
  type Notification,
  type SessionEvent,
  type ToolCall,
  type ToolCallFailedInit,
  type ToolCallSucceededInit,
  ToolKind,
} from "../proto/code_mode_types.ts";
import { CodeModeError } from "../proto/errors.ts";
import { deferred } from "./deferred.ts";
import { rpcFailureText } from "./status_text.ts";
import type { CodeModeSessionDelegate, CodeModeToolCall, ToolDefinition } from "./types.ts";

/** A client of `codex.code_mode.v1.CodeModeHost` with nice-grpc's call options. */
export type HostClient = CodeModeHostClient<CallOptions>;

/** A tool call's outcome as `CompleteToolCall` sends it. */
type ToolCallOutcome = { succeeded: ToolCallSucceededInit } | { failed: ToolCallFailedInit };

/**
 * Sends an RPC whose answer nobody waits for: a notification's acknowledgement, a preemption's
 * `YieldObservation`, an abandoned cell's `Terminate`. As in Codex's client, its failure changes
 * nothing: a lost binding is reported by its lease and by the next call that needs an answer.
 *
 * @param call the RPC in flight
 */
export function sendAndForget(call: Promise<unknown>): void {
  call.then(ignoreOutcome, ignoreOutcome);
}

function ignoreOutcome(): void {}

/** The stale-generation text (§10.5 rule 2). */
const STALE_MESSAGE = "cell belongs to a stale code-mode host generation";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** What a binding needs from its provider. */
export interface BindingHost {
  /** Metadata for an RPC of this binding: the auth token, and the route token when given. */
  metadata(route?: string): Metadata;
}

/**
 * An execution this binding sent, and its cell. It is registered before `Execute` is sent: its
 * tool calls, notifications and `CellClosed` travel on other streams and may arrive before the
 * Execute's `started`; the cell IDs are filled in by whichever names them first.
 */
export interface CellRecord {
  /** The host cell ID ("" until known). */
  hostId: string;
  /** The public cell ID ("" until known). */
  publicId: string;
  executionId: string;
  toolCallId: string;
  delegate: CodeModeSessionDelegate;
  enabledTools: ToolDefinition[];
  /** Notification deliveries in flight. */
  notifications: Set<Promise<void>>;
  /** Resolves once `CellClosed` was processed (its notifications settled) or the binding ended. */
  closed: PromiseWithResolvers<void>;
  closedReported: boolean;
  /** Aborts the cell's notification deliveries. */
  notificationAbort: AbortController;
}

/** Converts a gRPC failure to the client's error for an operation. */
export function statusError(operation: string, error: unknown): CodeModeError {
  if (error instanceof CodeModeError) return error;
  if (error instanceof ClientError) {
    return CodeModeError.fromStatus(error.code, rpcFailureText(operation, error.code, error.details), {
      cause: error,
    });
  }
  const message = (error as Error)?.message ?? String(error);
  return CodeModeError.fromStatus(
    Status.UNAVAILABLE,
    rpcFailureText(operation, Status.UNAVAILABLE, message),
    {
      cause: error,
    },
  );
}

/** Whether the failure of an established call retires the binding (§10.6). */
export function retiresBinding(error: unknown, routeLost: boolean, hasRoute: boolean): boolean {
  if (!(error instanceof ClientError)) return false;
  if (error.code === Status.NOT_FOUND) return true;
  return error.code === Status.UNAVAILABLE && routeLost && hasRoute;
}

function sameNamespace(a: string | undefined, b: string | undefined): boolean {
  const norm = (n: string | undefined) => (n === undefined || n === "" || n === "functions" ? "" : n);
  return norm(a) === norm(b);
}

/** One binding (see the module doc). */
export class Binding {
  readonly sessionId: string;
  readonly generation: number;
  readonly route: string | undefined;
  readonly client: HostClient;
  /** Set once the binding failed or was shut down. */
  failure: CodeModeError | undefined;
  /** Resolves with the failure when the binding fails or is shut down (never rejects). */
  readonly ended: Promise<CodeModeError>;

  readonly #host: BindingHost;
  readonly #release: () => void;
  readonly #streams = new AbortController();
  readonly #ended = deferred<CodeModeError>();
  /**
   * Rejects with the failure, at once when it is set, for calls to race (`orFailure`). Marked
   * handled: a binding nobody calls may fail unobserved, and its failure is kept in `failure`.
   */
  readonly #failed = deferred<never>();
  readonly #cells = new Map<string, CellRecord>();
  readonly #executions = new Map<string, CellRecord>();
  readonly #invocations = new Map<string, AbortController>();
  readonly #seenInvocations = new Set<string>();
  readonly #cancelledInvocations = new Set<string>();
  #pendingDelegateCalls = 0;
  /** More outstanding delegate callbacks than this are refused (§10.12 step 5). */
  readonly #maxPendingDelegateCalls: number;
  /** The host takes `catalog_revision` (its `SessionOpened.supports_catalog_revision`). */
  readonly supportsCatalogRevision: boolean;
  /** The last tool set sent under a revision; `confirmed` once an Execute carrying it started. */
  #catalog: { key: string; revision: number; confirmed: boolean } | undefined;
  #lastRevision = 0;

  /**
   * @param options the opened session and its transport
   */
  constructor(options: {
    sessionId: string;
    generation: number;
    route: string | undefined;
    /** Default false. */
    supportsCatalogRevision?: boolean;
    /** Default 4096. */
    maxPendingDelegateCalls?: number;
    client: HostClient;
    host: BindingHost;
    release: () => void;
    lease: AsyncIterator<SessionEvent>;
    leaseAbort: AbortController;
  }) {
    this.sessionId = options.sessionId;
    this.generation = options.generation;
    this.route = options.route;
    this.supportsCatalogRevision = options.supportsCatalogRevision ?? false;
    this.#maxPendingDelegateCalls = options.maxPendingDelegateCalls ?? 4096;
    this.client = options.client;
    this.#host = options.host;
    this.#release = options.release;
    this.ended = this.#ended.promise;
    this.#failed.promise.then(undefined, ignoreOutcome);
    this.#streams.signal.addEventListener("abort", () => options.leaseAbort.abort(), { once: true });
    this.background(this.#readLease(options.lease));
  }

  /**
   * Settles like `promise`, or rejects with the binding's failure when the binding ends first.
   *
   * @param promise a call of this binding
   * @returns the call's value
   * @throws {CodeModeError} the binding's failure; or what `promise` rejects with
   */
  orFailure<T>(promise: Promise<T>): Promise<T> {
    return Promise.race([promise, this.#failed.promise]);
  }

  /**
   * Owns work that runs beside the calls (stream readers, tool calls, completions). Each handles
   * its own failures; one that escapes fails the binding, so it is recorded, never lost.
   *
   * @param task the work in flight
   */
  background(task: Promise<unknown>): void {
    task.then(ignoreOutcome, (error: unknown) => {
      this.fail(
        error instanceof CodeModeError
          ? error
          : new CodeModeError(undefined, `code-mode client failed: ${(error as Error)?.message ?? error}`, {
            cause: error,
          }),
      );
    });
  }

  /** Whether the binding can still serve calls. */
  get live(): boolean {
    return this.failure === undefined;
  }

  /**
   * How an Execute names its tools (catalog revisions, as Codex 0.171 sends them): the host keeps
   * the last tool set registered under a revision, so the same tools go as the revision alone once
   * an Execute that registered them has started; another tool set registers the next revision.
   *
   * @param key the tool set as sent (any encoding that is equal exactly when the sets are)
   * @returns the revision and whether the tools go with it; `undefined`: no revision (the host
   *   does not take them, or there are no tools)
   */
  catalogFor(key: string): { revision: number; withTools: boolean } | undefined {
    if (!this.supportsCatalogRevision || key === "[]") return undefined;
    if (this.#catalog?.key === key) {
      return { revision: this.#catalog.revision, withTools: !this.#catalog.confirmed };
    }
    this.#catalog = { key, revision: ++this.#lastRevision, confirmed: false };
    return { revision: this.#catalog.revision, withTools: true };
  }

  /**
   * An Execute that carried `revision` with its tools has started: the host knows them.
   *
   * @param revision the revision
   */
  confirmCatalog(revision: number): void {
    if (this.#catalog?.revision === revision) this.#catalog.confirmed = true;
  }

  /** The host did not know the revision sent alone: the next Execute sends its tools again. */
  forgetCatalog(): void {
    this.#catalog = undefined;
  }

  /** Metadata of an RPC of this binding. */
  metadata(): Metadata {
    return this.#host.metadata(this.route);
  }

  /** The public form of a host cell ID. */
  publicId(hostId: string): string {
    return this.generation === 1 ? hostId : `g${this.generation}:${hostId}`;
  }

  /**
   * The host form of a public cell ID.
   *
   * @throws {CodeModeError} the stale-generation message for an ID of another generation
   */
  hostId(publicId: string): string {
    if (this.generation === 1) return publicId;
    const prefix = `g${this.generation}:`;
    if (!publicId.startsWith(prefix) || publicId.length === prefix.length) {
      throw new CodeModeError(undefined, STALE_MESSAGE);
    }
    return publicId.slice(prefix.length);
  }

  /** Registers an execution about to be sent (its cell ID comes later). */
  addExecution(
    record: Omit<
      CellRecord,
      "hostId" | "publicId" | "notifications" | "closed" | "closedReported" | "notificationAbort"
    >,
  ): CellRecord {
    const cell: CellRecord = {
      ...record,
      hostId: "",
      publicId: "",
      notifications: new Set(),
      closed: deferred<void>(),
      closedReported: false,
      notificationAbort: new AbortController(),
    };
    this.#executions.set(cell.executionId, cell);
    return cell;
  }

  /** Names the execution's cell (from `started`, or an earlier event of another stream). */
  bindCell(cell: CellRecord, hostId: string): void {
    if (cell.hostId !== "") return;
    cell.hostId = hostId;
    cell.publicId = this.publicId(hostId);
    this.#cells.set(hostId, cell);
  }

  /** Forgets an execution that never started (its Execute failed before `started`). */
  removeExecution(cell: CellRecord): void {
    if (cell.hostId === "") this.#executions.delete(cell.executionId);
  }

  /** The record of a cell started by this binding, if any. */
  cell(hostId: string): CellRecord | undefined {
    return this.#cells.get(hostId);
  }

  /** Reports `cellClosed` once (never for an execution whose cell was never named). */
  reportClosed(cell: CellRecord): void {
    if (cell.closedReported || cell.hostId === "") return;
    cell.closedReported = true;
    cell.closed.resolve();
    try {
      cell.delegate.cellClosed(cell.publicId);
    } catch { /* a delegate's failure is its own */ }
  }

  /**
   * Starts the subscription and waits for its response headers (§10.4 step 6).
   *
   * @throws {CodeModeError} when the stream ends or fails before its headers
   */
  async subscribe(): Promise<void> {
    const headers = deferred<void>();
    const stream = this.client.subscribeToToolCalls({ sessionId: this.sessionId, toolNames: [] }, {
      signal: this.#streams.signal,
      metadata: this.metadata(),
      onHeader: () => headers.resolve(),
    });
    const iterator = stream[Symbol.asyncIterator]();
    const first = iterator.next();
    const ended = first.then(
      () => {
        throw new CodeModeError(undefined, "gRPC code-mode tool subscription closed unexpectedly");
      },
      (error) => {
        throw statusError("tool subscription", error);
      },
    );
    try {
      await Promise.race([headers.promise, ended]);
    } catch (error) {
      this.#streams.abort();
      throw error;
    }
    this.background(this.#readSubscription(iterator, first));
  }

  async #readLease(lease: AsyncIterator<SessionEvent>): Promise<void> {
    try {
      for (;;) {
        const r = await lease.next();
        if (r.done) {
          return this.fail(new CodeModeError(undefined, "gRPC code-mode session lease closed unexpectedly"));
        }
        this.#onLeaseEvent(r.value);
        if (!this.live) return;
      }
    } catch (error) {
      if (!this.live) return;
      this.fail(statusError("session lease", error));
    }
  }

  #onLeaseEvent(event: SessionEvent): void {
    if (event.opened) {
      return this.fail(
        new CodeModeError(undefined, "gRPC code-mode host repeated the session opening event"),
      );
    }
    if (event.toolCallCancelled) {
      const id = event.toolCallCancelled.invocationId ?? "";
      this.#cancelledInvocations.add(id);
      this.#invocations.get(id)?.abort();
      return;
    }
    if (event.notification) return this.#onNotification(event.notification);
    if (event.cellClosed) {
      const { executionId = "", cellId = "" } = event.cellClosed;
      const cell = this.#executions.get(executionId) ?? this.#cells.get(cellId);
      if (!cell) return;
      this.bindCell(cell, cellId);
      this.background(Promise.allSettled([...cell.notifications]).then(() => this.reportClosed(cell)));
      return;
    }
    if (event.notificationCancelled) return;
    this.fail(new CodeModeError(undefined, "gRPC code-mode host sent an empty session event"));
  }

  #onNotification(n: Notification): void {
    const notificationId = n.notificationId ?? "";
    if (!UUID.test(notificationId)) {
      return this.fail(new CodeModeError(undefined, "code-mode notification ID must be a UUID"));
    }
    const cell = this.#executions.get(n.executionId ?? "");
    if (!cell) return;
    this.bindCell(cell, n.cellId ?? "");
    const callId = n.callId;
    if (callId !== cell.toolCallId) {
      return this.fail(
        new CodeModeError(undefined, "code-mode notification call ID does not match its execution"),
      );
    }
    const deliver = async () => {
      try {
        await cell.delegate.notify(callId, cell.publicId, n.text ?? "", cell.notificationAbort.signal);
      } catch { /* the delegate's failures are logged by the delegate; never fatal */ }
    };
    // Settled deliveries leave the set; `CellClosed` waits for those still in it.
    const delivery: Promise<void> = deliver().finally(() => cell.notifications.delete(delivery));
    cell.notifications.add(delivery);
    sendAndForget(this.client.acknowledgeNotification(
      { sessionId: this.sessionId, notificationId },
      { metadata: this.metadata() },
    ));
  }

  async #readSubscription(
    iterator: AsyncIterator<ToolCall>,
    first: Promise<IteratorResult<ToolCall>>,
  ): Promise<void> {
    try {
      let next = first;
      for (;;) {
        const r = await next;
        if (r.done) {
          return this.fail(
            new CodeModeError(undefined, "gRPC code-mode tool subscription closed unexpectedly"),
          );
        }
        this.#onToolCall(r.value);
        if (!this.live) return;
        next = iterator.next();
      }
    } catch (error) {
      if (!this.live) return;
      this.fail(statusError("tool subscription", error));
    }
  }

  #onToolCall(call: ToolCall): void {
    if (call.sessionId !== this.sessionId) {
      return this.fail(
        new CodeModeError(
          undefined,
          `gRPC code-mode tool invocation belongs to session ${call.sessionId} instead of ${this.sessionId}`,
        ),
      );
    }
    const id: string = call.invocationId ?? "";
    if (!UUID.test(id)) {
      return this.fail(new CodeModeError(undefined, "code-mode tool invocation ID must be a UUID"));
    }
    if (this.#seenInvocations.has(id)) {
      return this.fail(new CodeModeError(undefined, "code-mode tool invocation ID was reused"));
    }
    this.#seenInvocations.add(id);
    if (this.#cancelledInvocations.delete(id)) return;
    const cell = this.#executions.get(call.executionId ?? "");
    if (!cell || cell.closedReported) {
      return this.#complete(id, {
        failed: { message: `code-mode cell ${this.publicId(call.cellId ?? "")} is closed` },
      });
    }
    // The tool call can overtake `started` (another stream): it names the cell as well.
    this.bindCell(cell, call.cellId ?? "");
    const toolName = call.toolName;
    if (toolName?.name === undefined) {
      return this.#complete(id, { failed: { message: "code-mode tool invocation omitted its tool name" } });
    }
    const name = toolName.name;
    const kind = call.toolKind === ToolKind.TOOL_KIND_FREEFORM ? "freeform" : "function";
    const enabled = cell.enabledTools.some((t) =>
      t.toolName.name === name && sameNamespace(t.toolName.namespace, toolName.namespace) &&
      t.kind === kind
    );
    if (!enabled) {
      return this.#complete(id, {
        failed: { message: `code-mode tool ${name} is not enabled for this execution` },
      });
    }
    if (this.#pendingDelegateCalls >= this.#maxPendingDelegateCalls) {
      return this.#complete(id, {
        failed: { message: "code-mode host exceeded its pending delegate callback limit" },
      });
    }
    let input: unknown;
    if (call.inputJson !== undefined) {
      try {
        input = JSON.parse(new TextDecoder().decode(call.inputJson));
      } catch (error) {
        return this.#complete(id, {
          failed: { message: `code-mode tool invocation contains invalid JSON: ${(error as Error).message}` },
        });
      }
    }
    const toolCall: CodeModeToolCall = {
      cellId: cell.publicId,
      runtimeToolCallId: call.runtimeToolCallId ?? "",
      toolName: toolName.namespace === undefined ? { name } : { name, namespace: toolName.namespace },
      toolKind: kind,
      ...(call.inputJson === undefined ? {} : { input }),
    };
    this.background(this.#invoke(id, cell.delegate, toolCall));
  }

  /** Runs an accepted tool call on the delegate and completes it, unless it was cancelled meanwhile. */
  async #invoke(id: string, delegate: CodeModeSessionDelegate, toolCall: CodeModeToolCall): Promise<void> {
    const abort = new AbortController();
    this.#invocations.set(id, abort);
    this.#pendingDelegateCalls++;
    let outcome: ToolCallOutcome;
    try {
      const value = await delegate.invokeTool(toolCall, abort.signal);
      let json: string;
      try {
        json = JSON.stringify(value === undefined ? null : value);
      } catch (error) {
        throw new EncodeError(`failed to encode code-mode tool result: ${(error as Error).message}`);
      }
      outcome = { succeeded: { outputJson: new TextEncoder().encode(json) } };
    } catch (reason) {
      const message = reason instanceof EncodeError
        ? reason.message
        : typeof reason === "string"
        ? reason
        : reason instanceof Error
        ? reason.message
        : String(reason);
      outcome = { failed: { message } };
    } finally {
      this.#pendingDelegateCalls--;
      this.#invocations.delete(id);
    }
    if (abort.signal.aborted || !this.live) return;
    this.#complete(id, outcome, abort.signal);
  }

  #complete(invocationId: string, outcome: ToolCallOutcome, cancelled?: AbortSignal): void {
    this.background((async () => {
      try {
        await this.client.completeToolCall(
          { sessionId: this.sessionId, invocationId, ...outcome },
          { metadata: this.metadata() },
        );
      } catch (error) {
        if (cancelled?.aborted || this.#cancelledInvocations.has(invocationId) || !this.live) return;
        this.fail(statusError("tool invocation completion", error));
      }
    })());
  }

  /**
   * Fails the binding, or ends it at shutdown (idempotent; §10.5 rule 6).
   *
   * @param error the failure; every pending observation fails with it
   */
  fail(error: CodeModeError): void {
    if (this.failure) return;
    this.failure = error;
    this.#failed.reject(error);
    this.#ended.resolve(error);
    this.#end();
  }

  #end(): void {
    for (const abort of this.#invocations.values()) abort.abort();
    for (const cell of this.#executions.values()) {
      cell.notificationAbort.abort();
      this.reportClosed(cell);
      cell.closed.resolve();
    }
    this.#streams.abort();
    this.#release();
  }
}

class EncodeError extends Error {}

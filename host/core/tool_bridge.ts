/**
 * The tool-call bridge of one session (SPEC §7.2–§7.6): subscriptions with filters, round-robin
 * dispatch of a cell's tool calls, `CompleteToolCall` results, and cancellation.
 *
 * - Each call goes to exactly one matching subscription, chosen round-robin from the session's
 *   cursor; a full subscription is skipped when another has room, and never blocks another.
 * - A call's `sequence` is allocated only when it is actually queued on a subscription.
 * - A result is delivered to the cell at most once; a finished or cancelled invocation accepts and
 *   ignores a later completion.
 * - Every outstanding invocation holds a host-wide and a per-session delegate permit.
 *
 * @module
 */
import { publicProtoRoot } from "../../proto/loader.ts";
import { LeaseQueue } from "./lease_queue.ts";
import type { Permit, Permits } from "./permits.ts";
import { RecentIds } from "./permits.ts";

/** A `ToolName` as decoded from the wire. */
export interface ToolNameInfo {
  name: string;
  namespace?: string;
}

/** What the bridge needs to know about the definition a cell called. */
export interface ToolDefinitionInfo {
  toolName: ToolNameInfo;
  /** `ToolKind` number: 1 function, 2 freeform. */
  kind: number;
}

/** One call from a cell. */
export interface DispatchRequest {
  executionId: string;
  cellId: string;
  runtimeToolCallId: string;
  /** The called definition (the last enabled tool with that JS name). */
  definition: ToolDefinitionInfo | undefined;
  /** The input's JSON text, absent when the cell passed no value. */
  inputJson?: string;
  traceparent?: string;
  /** Allocates the execution's next `sequence` (called once, at send time). */
  nextSequence(): number;
  /** The number of lease events the session had queued when the cell made the call (`ToolCall.leaseMark`). */
  leaseMark?: number;
}

/** How a call ended, as the cell's promise sees it. */
export type DispatchResult = { outputJson: string } | { errorMessage: string };

/** What a `CompleteToolCall` carries. */
export type Completion = { outputJson: string } | { failed: string };

// deno-lint-ignore no-explicit-any
type ToolCallMessage = any;

const DEFAULT_NAMESPACE = "functions";

function namespaceOf(name: ToolNameInfo): string {
  return name.namespace === undefined || name.namespace === "" ? DEFAULT_NAMESPACE : name.namespace;
}

/** One `SubscribeToToolCalls` stream. */
export class Subscription {
  readonly filters: readonly ToolNameInfo[];
  /** Invocations sent on this subscription and not yet answered or cancelled. */
  readonly unanswered = new Set<string>();
  #queue: LeaseQueue<ToolCallMessage>;

  /**
   * @param filters the tool names it takes (empty: all)
   * @param capacity buffered calls at most
   * @param onSpace called whenever a queued call is taken
   */
  constructor(filters: readonly ToolNameInfo[], capacity: number, onSpace: () => void) {
    this.filters = filters;
    this.#queue = new LeaseQueue(capacity, onSpace);
  }

  /** Whether the subscription ended (client cancel or session end). */
  get ended(): boolean {
    return this.#queue.ended;
  }

  /** Whether a call can be queued now. */
  get hasSpace(): boolean {
    return this.#queue.hasSpace;
  }

  /**
   * Whether a call of `name` goes to this subscription (SPEC §7.6 rule 2).
   *
   * @param name the called definition's tool name
   * @returns true when the filters are empty or one has the same name and namespace
   */
  matches(name: ToolNameInfo): boolean {
    if (this.filters.length === 0) return true;
    const ns = namespaceOf(name);
    return this.filters.some((f) => f.name === name.name && namespaceOf(f) === ns);
  }

  /** Queues a call (the caller checked {@link Subscription.hasSpace}). */
  push(message: ToolCallMessage): void {
    this.#queue.push(message);
  }

  /**
   * Ends the stream after the queued calls, then with `error` if one is given.
   *
   * @param error a status to end with; undefined for OK
   */
  end(error?: unknown): void {
    this.#queue.end(error);
  }

  /**
   * The stream of `ToolCall`s until the subscription ends or `signal` aborts.
   *
   * @param signal the client's cancellation
   */
  stream(signal: AbortSignal): AsyncGenerator<ToolCallMessage> {
    return this.#queue.drain(signal);
  }
}

interface Pending {
  subscription: Subscription;
  resolve(completion: Completion | { error: string }): void;
}

/** Options of a {@link ToolBridge}. */
export interface ToolBridgeOptions {
  sessionId: string;
  maxMessageBytes: number;
  maxRecentIds: number;
  maxSubscriptions: number;
  subscriptionQueueCapacity: number;
  hostDelegatePermits: Permits;
  sessionDelegatePermits: Permits;
  /** Whether the session still accepts calls. */
  isOpen(): boolean;
  /** Aborts when the session closes. */
  closed: AbortSignal;
  /** Queues `tool_call_cancelled{invocationId}` on the lease. */
  onCancelled(invocationId: string): void;
}

/** Thrown by {@link ToolBridge.subscribe} beyond `maxSubscriptionsPerSession`. */
export class TooManySubscriptions extends Error {}

let toolCallType: ReturnType<ReturnType<typeof publicProtoRoot>["lookupType"]> | undefined;

function encodedSize(message: ToolCallMessage): number {
  toolCallType ??= publicProtoRoot().lookupType("codex.code_mode.v1.ToolCall");
  return toolCallType.encode(message).finish().length;
}

/** The tool-call bridge of one session. */
export class ToolBridge {
  #options: ToolBridgeOptions;
  #subscriptions: Subscription[] = [];
  #cursor = 0;
  #pending = new Map<string, Pending>();
  #finished: RecentIds;
  #spaceWaiters = new Set<() => void>();

  /** @param options see {@link ToolBridgeOptions} */
  constructor(options: ToolBridgeOptions) {
    this.#options = options;
    this.#finished = new RecentIds(options.maxRecentIds);
  }

  /**
   * Registers a subscription.
   *
   * @param filters its tool-name filters
   * @returns the subscription
   * @throws {TooManySubscriptions} beyond the per-session limit
   */
  subscribe(filters: readonly ToolNameInfo[]): Subscription {
    if (this.#subscriptions.length >= this.#options.maxSubscriptions) throw new TooManySubscriptions();
    const subscription = new Subscription(
      filters,
      this.#options.subscriptionQueueCapacity,
      () => this.#wakeSenders(),
    );
    this.#subscriptions.push(subscription);
    return subscription;
  }

  /**
   * Removes a subscription whose stream ended. Its unanswered invocations reject with
   * `code-mode tool subscription closed before returning tool output`.
   *
   * @param subscription the subscription
   * @returns whether it held unanswered invocations (the session must then close, SPEC §7.6)
   */
  unsubscribe(subscription: Subscription): boolean {
    subscription.end();
    const at = this.#subscriptions.indexOf(subscription);
    if (at >= 0) {
      this.#subscriptions.splice(at, 1);
      if (this.#cursor > at) this.#cursor--;
    }
    this.#wakeSenders();
    const unanswered = [...subscription.unanswered];
    for (const id of unanswered) {
      this.#settle(id, { error: "code-mode tool subscription closed before returning tool output" });
    }
    return unanswered.length > 0;
  }

  /** Whether an invocation ID was ever issued in this session (pending or finished). */
  issued(invocationId: string): boolean {
    return this.#pending.has(invocationId) || this.#finished.has(invocationId);
  }

  /**
   * Delivers a `CompleteToolCall` result; ignored for a finished or cancelled invocation.
   *
   * @param invocationId the invocation
   * @param completion its result
   */
  complete(invocationId: string, completion: Completion): void {
    this.#settle(invocationId, completion);
  }

  /**
   * Ends every subscription stream (with `error`, or OK) and fails every outstanding call.
   *
   * @param error the status subscription streams end with (a crash), or undefined
   */
  closeAll(error?: unknown): void {
    for (const subscription of this.#subscriptions) subscription.end(error);
    this.#subscriptions = [];
    for (const id of [...this.#pending.keys()]) {
      this.#settle(id, { error: "code-mode session closed before returning tool output" });
    }
    this.#wakeSenders();
  }

  #settle(invocationId: string, outcome: Completion | { error: string }): void {
    const pending = this.#pending.get(invocationId);
    if (!pending) return;
    this.#pending.delete(invocationId);
    this.#finished.add(invocationId);
    pending.subscription.unanswered.delete(invocationId);
    pending.resolve(outcome);
  }

  #wakeSenders(): void {
    for (const wake of [...this.#spaceWaiters]) wake();
  }

  #acquirePermits(): Permit[] | string {
    const host = this.#options.hostDelegatePermits.tryAcquire();
    if (!host) return "code-mode host has too many pending delegate calls";
    const session = this.#options.sessionDelegatePermits.tryAcquire();
    if (!session) {
      host.release();
      return "code-mode session has too many pending delegate calls";
    }
    return [host, session];
  }

  /**
   * Dispatches one call of a cell and waits for its result (SPEC §7.2).
   *
   * @param request the call
   * @param signal aborts when the cell no longer wants the result (the call is then cancelled)
   * @returns the output JSON, or the error message the cell's promise rejects with
   */
  async dispatch(request: DispatchRequest, signal: AbortSignal): Promise<DispatchResult> {
    if (!this.#options.isOpen()) return { errorMessage: "code-mode session is closed" };
    const permits = this.#acquirePermits();
    if (typeof permits === "string") return { errorMessage: permits };
    try {
      return await this.#dispatch(request, signal);
    } finally {
      for (const permit of permits) permit.release();
    }
  }

  async #dispatch(request: DispatchRequest, signal: AbortSignal): Promise<DispatchResult> {
    const definition = request.definition;
    if (!definition) return { errorMessage: "no code-mode tool subscription matches the requested tool" };
    const invocationId = crypto.randomUUID();
    const message: ToolCallMessage = {
      sessionId: this.#options.sessionId,
      executionId: request.executionId,
      cellId: request.cellId,
      invocationId,
      runtimeToolCallId: request.runtimeToolCallId,
      toolName: definition.toolName,
      toolKind: definition.kind,
      sequence: 0,
    };
    if (request.inputJson !== undefined) message.inputJson = new TextEncoder().encode(request.inputJson);
    if (request.traceparent !== undefined) message.traceparent = request.traceparent;
    if (request.leaseMark !== undefined) message.leaseMark = request.leaseMark;
    if (!this.#candidates(definition.toolName).length) {
      return { errorMessage: "no code-mode tool subscription matches the requested tool" };
    }
    // The largest sequence number the wire can carry, so the size check never undercounts.
    if (encodedSize({ ...message, sequence: Number.MAX_SAFE_INTEGER }) > this.#options.maxMessageBytes) {
      return {
        errorMessage:
          `code-mode tool invocation exceeds the ${this.#options.maxMessageBytes}-byte gRPC message limit`,
      };
    }

    // Wait for room on a matching subscription, racing cancellation and closure.
    let target: Subscription | undefined;
    for (;;) {
      const candidates = this.#candidates(definition.toolName);
      if (candidates.length === 0) {
        return { errorMessage: "matching code-mode tool subscriptions are unavailable" };
      }
      target = candidates.find((s) => s.hasSpace);
      if (target) break;
      if (signal.aborted) return { errorMessage: "code mode delegate request cancelled" };
      if (this.#options.closed.aborted || !this.#options.isOpen()) {
        return { errorMessage: "code-mode session closed before dispatching its tool call" };
      }
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.#spaceWaiters.delete(wake);
          signal.removeEventListener("abort", wake);
          this.#options.closed.removeEventListener("abort", wake);
          resolve();
        };
        this.#spaceWaiters.add(wake);
        signal.addEventListener("abort", wake, { once: true });
        this.#options.closed.addEventListener("abort", wake, { once: true });
      });
    }

    message.sequence = request.nextSequence();
    const result = Promise.withResolvers<Completion | { error: string }>();
    this.#pending.set(invocationId, { subscription: target, resolve: result.resolve });
    target.unanswered.add(invocationId);
    this.#cursor = this.#subscriptions.indexOf(target) + 1;
    target.push(message);

    const onAbort = () => {
      if (!this.#pending.has(invocationId)) return;
      this.#settle(invocationId, { error: "code mode delegate request cancelled" });
      this.#options.onCancelled(invocationId);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    if (signal.aborted) onAbort();
    try {
      const outcome = await result.promise;
      if ("outputJson" in outcome) return { outputJson: outcome.outputJson };
      if ("failed" in outcome) return { errorMessage: outcome.failed };
      return { errorMessage: outcome.error };
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  /** Matching, live subscriptions in round-robin order from the cursor. */
  #candidates(name: ToolNameInfo): Subscription[] {
    const all = this.#subscriptions;
    const out: Subscription[] = [];
    for (let i = 0; i < all.length; i++) {
      const subscription = all[(this.#cursor + i) % all.length];
      if (!subscription.ended && subscription.matches(name)) out.push(subscription);
    }
    return out;
  }
}

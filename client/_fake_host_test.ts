/**
 * Fakes for the client library's unit tests (`binding_test.ts`, `session_test.ts`,
 * `provider_test.ts`); a test file, never imported by production code.
 *
 * - {@link FakeHost}: an in-memory transport with nice-grpc's calling conventions. Every call is
 *   recorded; a server stream is a {@link FakeStream} the test feeds (headers, messages, its end or
 *   failure); a unary call is answered by `answers` or waits in `pending` for the test to answer.
 *   An aborted call fails as nice-grpc's do (`AbortError`).
 * - {@link ManualClock}: a `Clock` whose time moves only in `advance`.
 * - {@link RecordingDelegate}: a session delegate that records what it is handed.
 * - {@link openBinding}: a live {@link Binding} on a fake host, as the provider opens one.
 *
 * @module
 */
import { type CallOptions, ClientError, Metadata, type Status } from "nice-grpc";
import type { Clock } from "../proto/clock.ts";
import type { SessionEvent, ToolCall } from "../proto/code_mode_types.ts";
import { Binding, type HostClient } from "./binding.ts";
import type { CodeModeSessionDelegate, CodeModeToolCall } from "./types.ts";

type Method = keyof HostClient;
type StreamMethod = "openSession" | "subscribeToToolCalls" | "execute";
type UnaryMethod = Exclude<Method, StreamMethod>;
/** What a method of the client takes. */
export type RequestOf<K extends Method> = Parameters<HostClient[K]>[0];
/** What a method of the client yields or resolves to. */
export type ResponseOf<K extends Method> = ReturnType<HostClient[K]> extends
  AsyncIterable<infer R> | Promise<infer R> ? R : never;

/** The error nice-grpc throws for a call whose signal aborted. */
export function abortError(): Error {
  const error = new Error("The operation has been aborted");
  error.name = "AbortError";
  return error;
}

/** A gRPC failure as nice-grpc's client reports it. */
export function grpcError(code: Status, details: string): ClientError {
  return new ClientError("/codex.code_mode.v1.CodeModeHost/Fake", code, details);
}

function metadataOf(entries: Record<string, string>) {
  const metadata = Metadata();
  for (const [key, value] of Object.entries(entries)) metadata.set(key, value);
  return metadata;
}

/** One server stream of a {@link FakeHost}, fed by the test. */
export class FakeStream<T> {
  readonly request: unknown;
  readonly options: CallOptions;
  #queue: T[] = [];
  #end: { error?: unknown } | undefined;
  #wake: (() => void) | undefined;
  #headerSent = false;
  readonly #autoHeader: Record<string, string> | false;

  constructor(request: unknown, options: CallOptions, autoHeader: Record<string, string> | false) {
    this.request = request;
    this.options = options;
    this.#autoHeader = autoHeader;
  }

  /** Whether the caller cancelled the call. */
  get cancelled(): boolean {
    return this.options.signal?.aborted ?? false;
  }

  /** Sends the response headers (once). */
  header(entries: Record<string, string> = {}): void {
    if (this.#headerSent) return;
    this.#headerSent = true;
    this.options.onHeader?.(metadataOf(entries));
  }

  /** Sends messages. */
  push(...values: T[]): void {
    this.#queue.push(...values);
    this.#wake?.();
  }

  /** Ends the stream with OK, after the messages already sent. */
  end(trailer: Record<string, string> = {}): void {
    this.options.onTrailer?.(metadataOf(trailer));
    this.#end = {};
    this.#wake?.();
  }

  /** Fails the stream, after the messages already sent. */
  fail(error: unknown, trailer: Record<string, string> = {}): void {
    this.options.onTrailer?.(metadataOf(trailer));
    this.#end = { error };
    this.#wake?.();
  }

  /** The iterable the client method returns. */
  async *iterate(): AsyncGenerator<T> {
    const signal = this.options.signal;
    if (this.#autoHeader) this.header(this.#autoHeader);
    for (;;) {
      if (signal?.aborted) throw abortError();
      if (this.#queue.length > 0) {
        yield this.#queue.shift()!;
        continue;
      }
      if (this.#end) {
        if (this.#end.error !== undefined) throw this.#end.error;
        return;
      }
      await new Promise<void>((resolve) => {
        const wake = () => {
          signal?.removeEventListener("abort", wake);
          this.#wake = undefined;
          resolve();
        };
        this.#wake = wake;
        signal?.addEventListener("abort", wake, { once: true });
      });
    }
  }
}

/** A unary call waiting for the test's answer. */
export interface PendingCall<K extends UnaryMethod> {
  readonly request: RequestOf<K>;
  readonly options: CallOptions;
  resolve(response: ResponseOf<K>): void;
  reject(error: unknown): void;
}

/** A recorded call. */
export interface FakeCall {
  readonly method: Method;
  readonly request: unknown;
  readonly options: CallOptions;
}

type Answers = { [K in UnaryMethod]?: (request: RequestOf<K>) => ResponseOf<K> | Promise<ResponseOf<K>> };

/** An in-memory code-mode host transport (see the module doc). */
export class FakeHost {
  /** Every call, in order. */
  readonly calls: FakeCall[] = [];
  /**
   * Unary answers by method; a method without one waits in {@link FakeHost.pending}. By default
   * the RPCs whose responses are empty answer at once.
   */
  readonly answers: Answers = {
    closeSession: () => ({}),
    completeToolCall: () => ({}),
    acknowledgeNotification: () => ({}),
    yieldObservation: () => ({}),
    cancelWait: () => ({}),
  };
  /**
   * The headers a new stream of each method sends as soon as it is read (default: empty ones);
   * `false`: the test sends them ({@link FakeStream.header}).
   */
  readonly headers: { [K in StreamMethod]?: Record<string, string> | false } = {};
  readonly #streams = new Map<StreamMethod, FakeStream<unknown>[]>();
  readonly #pending = new Map<UnaryMethod, unknown[]>();
  #waiters: (() => void)[] = [];

  /** The client the code under test calls. */
  readonly client: HostClient = {
    openSession: (request, options) => this.#stream("openSession", request, options),
    subscribeToToolCalls: (request, options) => this.#stream("subscribeToToolCalls", request, options),
    execute: (request, options) => this.#stream("execute", request, options),
    closeSession: (request, options) => this.#unary("closeSession", request, options),
    completeToolCall: (request, options) => this.#unary("completeToolCall", request, options),
    acknowledgeNotification: (request, options) => this.#unary("acknowledgeNotification", request, options),
    wait: (request, options) => this.#unary("wait", request, options),
    yieldObservation: (request, options) => this.#unary("yieldObservation", request, options),
    cancelWait: (request, options) => this.#unary("cancelWait", request, options),
    terminate: (request, options) => this.#unary("terminate", request, options),
    getProcessMetrics: (request, options) => this.#unary("getProcessMetrics", request, options),
  };

  /** The calls of one method, in order. */
  callsOf<K extends Method>(method: K): { request: RequestOf<K>; options: CallOptions }[] {
    return this.calls.filter((c) => c.method === method) as { request: RequestOf<K>; options: CallOptions }[];
  }

  /** The streams of one method, in order. */
  streams<K extends StreamMethod>(method: K): FakeStream<ResponseOf<K>>[] {
    return (this.#streams.get(method) ?? []) as FakeStream<ResponseOf<K>>[];
  }

  /** The unanswered calls of one unary method, in order. */
  pending<K extends UnaryMethod>(method: K): PendingCall<K>[] {
    return (this.#pending.get(method) ?? []) as PendingCall<K>[];
  }

  /**
   * Resolves once `method` has been called `count` times in all.
   *
   * @returns that call
   */
  async called<K extends Method>(
    method: K,
    count = 1,
  ): Promise<{ request: RequestOf<K>; options: CallOptions }> {
    while (this.callsOf(method).length < count) {
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
    return this.callsOf(method)[count - 1];
  }

  #record(method: Method, request: unknown, options: CallOptions = {}): CallOptions {
    this.calls.push({ method, request, options });
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
    return options;
  }

  #stream<K extends StreamMethod>(
    method: K,
    request: unknown,
    options?: CallOptions,
  ): AsyncIterable<ResponseOf<K>> {
    const stream = new FakeStream<ResponseOf<K>>(
      request,
      this.#record(method, request, options),
      this.headers[method] ?? {},
    );
    this.#streams.set(method, [...this.streams(method), stream] as FakeStream<unknown>[]);
    return stream.iterate();
  }

  #unary<K extends UnaryMethod>(
    method: K,
    request: RequestOf<K>,
    options?: CallOptions,
  ): Promise<ResponseOf<K>> {
    const recorded = this.#record(method, request, options);
    const answer = this.answers[method];
    if (answer) return Promise.resolve(answer(request as never) as ResponseOf<K>);
    const { promise, resolve, reject } = Promise.withResolvers<ResponseOf<K>>();
    const signal = recorded.signal;
    signal?.addEventListener("abort", () => reject(abortError()), { once: true });
    const call: PendingCall<K> = { request, options: recorded, resolve, reject };
    this.#pending.set(method, [...(this.#pending.get(method) ?? []), call]);
    return promise;
  }
}

/** A `Clock` whose time moves only in {@link ManualClock.advance}. */
export class ManualClock implements Clock {
  #now = 0;
  #next = 1;
  #timers = new Map<number, { due: number; fn: () => void }>();
  /** The delay of every timer armed so far, in order. */
  readonly delays: number[] = [];

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    this.delays.push(ms);
    const id = this.#next++;
    this.#timers.set(id, { due: this.#now + ms, fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.#timers.delete(handle as number);
  }

  /** Timers armed and not yet fired or cleared. */
  get timers(): number {
    return this.#timers.size;
  }

  /** Moves time forward, firing the timers that fall due in order. */
  advance(ms: number): void {
    this.#now += ms;
    const due = [...this.#timers].filter(([, t]) => t.due <= this.#now).sort((a, b) => a[1].due - b[1].due);
    for (const [id] of due) this.#timers.delete(id);
    for (const [, t] of due) t.fn();
  }
}

/** Resolves once `condition` holds, checking after each turn of the event loop (no fixed sleeps). */
export async function until(condition: () => boolean, what: string, turns = 1_000): Promise<void> {
  for (let turn = 0; turn < turns; turn++) {
    if (condition()) return;
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
  }
  throw new Error(`timed out waiting until ${what}`);
}

/** A session delegate that records tool calls, notifications and closures. */
export class RecordingDelegate implements CodeModeSessionDelegate {
  readonly toolCalls: CodeModeToolCall[] = [];
  readonly notifications: { callId: string; cellId: string; text: string }[] = [];
  readonly closed: string[] = [];
  #closedWaiters: (() => void)[] = [];
  /** What a tool call resolves to (default: its input echoed). */
  tool: (call: CodeModeToolCall, signal: AbortSignal) => Promise<unknown> = (call) =>
    Promise.resolve(call.input);

  invokeTool(call: CodeModeToolCall, signal: AbortSignal): Promise<unknown> {
    this.toolCalls.push(call);
    return this.tool(call, signal);
  }

  notify(callId: string, cellId: string, text: string): Promise<void> {
    this.notifications.push({ callId, cellId, text });
    return Promise.resolve();
  }

  cellClosed(cellId: string): void {
    this.closed.push(cellId);
    const waiters = this.#closedWaiters;
    this.#closedWaiters = [];
    for (const wake of waiters) wake();
  }

  /** Resolves once `cellClosed(cellId)` was called. */
  async closedCell(cellId: string): Promise<void> {
    while (!this.closed.includes(cellId)) {
      await new Promise<void>((resolve) => this.#closedWaiters.push(resolve));
    }
  }
}

/** Options of {@link openBinding}. */
export interface OpenBindingOptions {
  generation?: number;
  sessionId?: string;
  route?: string;
  supportsCatalogRevision?: boolean;
  maxPendingDelegateCalls?: number;
  /** Whether to start the subscription (default true). */
  subscribe?: boolean;
}

/**
 * A live binding on `host`, opened as the provider opens one: a lease whose opening event was read,
 * then the subscription.
 *
 * @returns the binding, its lease and subscription streams, and how often it released its hold
 */
export async function openBinding(host: FakeHost, options: OpenBindingOptions = {}): Promise<{
  binding: Binding;
  lease: FakeStream<SessionEvent>;
  subscription: FakeStream<ToolCall>;
  releases: () => number;
}> {
  const sessionId = options.sessionId ?? "session-1";
  const leaseAbort = new AbortController();
  const lease = host.client.openSession({}, { signal: leaseAbort.signal })[Symbol.asyncIterator]();
  const leaseStream = host.streams("openSession").at(-1)!;
  leaseStream.push({ event: "opened", opened: { sessionId } });
  await lease.next();
  let released = 0;
  const binding = new Binding({
    sessionId,
    generation: options.generation ?? 1,
    route: options.route,
    supportsCatalogRevision: options.supportsCatalogRevision,
    maxPendingDelegateCalls: options.maxPendingDelegateCalls,
    client: host.client,
    host: { metadata: () => Metadata() },
    release: () => released++,
    lease,
    leaseAbort,
  });
  if (options.subscribe !== false) await binding.subscribe();
  return {
    binding,
    lease: leaseStream,
    subscription: host.streams("subscribeToToolCalls").at(-1)!,
    releases: () => released,
  };
}

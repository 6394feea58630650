/**
 * A public session (SPEC §10.5, §10.6, §10.8, §10.10, §10.11): a sequence of bindings, one live at
 * a time, with Codex's recovery rules.
 *
 * - `execute` and `wait` record the current generation synchronously; when they run they get the
 *   live binding, opening a new one (serialised) if the current one failed. Only when a new binding
 *   was obtained for them and its generation differs from the recorded one do they fail with the
 *   reset message; a failed call is never replayed.
 * - `terminate` never reopens.
 * - A failed call sends no RPC before returning its error.
 * - The output mode of the first binding is pinned for the whole session.
 * - Tools travel by catalog revision when the host supports it (`Binding.catalogFor`); an Execute
 *   that named an unknown revision alone is sent again once, with its tools.
 *
 * @module
 */
import { ClientError, Status } from "nice-grpc";
import type { ExecuteEvent, WaitResponse } from "../proto/code_mode_types.ts";
import { CodeModeError, type CodeModeErrorCode } from "../proto/errors.ts";
import { TIMED_OUT, withDeadline } from "../proto/clock.ts";
import { deferred } from "./deferred.ts";
import { type Binding, type CellRecord, retiresBinding, sendAndForget, statusError } from "./binding.ts";
import type { BindingOpener } from "./binding_opener.ts";
import { boundErrorText, RESET_MESSAGE, timeoutText } from "./status_text.ts";
import { catalogKey, toRuntimeResponse, wireTool } from "./wire_values.ts";
import type {
  CodeModeOutputTruncation,
  CodeModeSession,
  CodeModeSessionDelegate,
  CodeModeSessionOptions,
  ExecuteRequest,
  RuntimeResponse,
  StartedCell,
  WaitOutcome,
  WaitRequest,
} from "./types.ts";

const SHUTTING_DOWN = "code mode session is shutting down";

/** A delegate that has no tools (SPEC §10.1). */
export class NoopCodeModeSessionDelegate implements CodeModeSessionDelegate {
  /** Rejects: nested tools are unavailable. */
  invokeTool(): Promise<unknown> {
    return Promise.reject(new Error("code mode nested tools are unavailable"));
  }
  /** Accepts the notification. */
  notify(): Promise<void> {
    return Promise.resolve();
  }
  /** Ignores the closure. */
  cellClosed(): void {}
}

/**
 * Fails `binding` with a new error and returns that error, for the caller to throw. A binding that
 * had already failed keeps its first failure.
 */
function failBinding(binding: Binding, message: string, code?: CodeModeErrorCode): CodeModeError {
  const error = new CodeModeError(code, message);
  binding.fail(error);
  return error;
}

/** The trailers of a call, as nice-grpc hands them to `onTrailer`. */
type Trailer = { get(key: string): unknown };

/** Whether a call's trailers say that its route was lost (SPEC §10.6). */
function routeLostIn(trailer: Trailer): boolean {
  return trailer.get("x-code-mode-route-lost") === "true";
}

/** An Execute in flight: what its steps share. */
interface ExecuteCall {
  readonly binding: Binding;
  readonly cell: CellRecord;
  readonly executionId: string;
  /** The catalog revision it named, if any (`Binding.catalogFor`). */
  readonly catalog: { revision: number; withTools: boolean } | undefined;
  /** Cancels the RPC. */
  readonly cancel: AbortController;
  /** What its trailers said (SPEC §10.6). */
  readonly trailers: { routeLost: boolean };
  readonly events: AsyncIterator<ExecuteEvent>;
}

/**
 * The host cell ID an Execute's first event names, bound to its execution. Any other first event
 * cancels the call, forgets the execution and fails the binding.
 */
function startedCellId(call: ExecuteCall, first: IteratorResult<ExecuteEvent>): string {
  const { binding, cell, cancel, executionId } = call;
  if (first.done || !first.value.started) {
    cancel.abort();
    binding.removeExecution(cell);
    throw failBinding(
      binding,
      first.done
        ? "gRPC code-mode execution ended before its starting event"
        : "gRPC code-mode execution omitted its starting event",
    );
  }
  const started = first.value.started;
  if (started.executionId !== executionId) {
    cancel.abort();
    binding.removeExecution(cell);
    throw failBinding(
      binding,
      `gRPC code-mode execution returned ID ${started.executionId} instead of ${executionId}`,
    );
  }
  const hostId = started.cellId ?? "";
  binding.bindCell(cell, hostId);
  return hostId;
}

/**
 * Retires a cancelled Wait with CancelWait, then frees its cell's lock. A CancelWait that fails
 * fails the binding: the host may still hold the wait.
 */
function retireWait(binding: Binding, waitId: string, lock: PromiseWithResolvers<void>): void {
  binding.background(
    binding.client.cancelWait({ sessionId: binding.sessionId, waitId }, {
      metadata: binding.metadata(),
    }).catch((error: unknown) => {
      binding.fail(
        new CodeModeError(
          undefined,
          boundErrorText(
            `failed to retire canceled gRPC code-mode wait: ${
              statusError("wait cancellation", error).message
            }`,
          ),
        ),
      );
    }).finally(() => lock.resolve()),
  );
}

/** Whether an Execute was refused because the host does not know the catalog revision it named. */
function isUnknownRevision(error: unknown): boolean {
  return error instanceof ClientError && error.code === Status.FAILED_PRECONDITION &&
    error.details === "unknown code-mode catalog revision";
}

/** The session implementation behind {@link CodeModeSession}. */
export class GrpcCodeModeSession implements CodeModeSession {
  readonly outputTruncation: CodeModeOutputTruncation;
  readonly #provider: BindingOpener;
  readonly #options: CodeModeSessionOptions;
  #binding: Binding;
  #opening: Promise<unknown> = Promise.resolve();
  #shutdown: Promise<void> | undefined;
  readonly #openingAbort = new AbortController();
  readonly #observers = new Set<string>();
  readonly #waitLocks = new Map<string, Promise<void>>();

  private constructor(
    provider: BindingOpener,
    options: CodeModeSessionOptions,
    binding: Binding,
    mode: CodeModeOutputTruncation,
  ) {
    this.#provider = provider;
    this.#options = options;
    this.#binding = binding;
    this.outputTruncation = mode;
  }

  /**
   * Opens the first binding (SPEC §10.4 step 7). Called by the provider's `createSession`.
   *
   * @param provider what opens bindings: the provider
   * @param options mode and limits
   * @returns the session
   * @ignore
   */
  static async open(
    provider: BindingOpener,
    options: CodeModeSessionOptions,
  ): Promise<GrpcCodeModeSession> {
    const { binding, mode } = await provider.openBinding({
      mode: options.outputTruncation ?? "client",
      pinned: false,
      limits: options.cellExecutionLimits,
      maxPendingDelegateCalls: options.maxPendingDelegateCalls,
    });
    return new GrpcCodeModeSession(provider, options, binding, mode);
  }

  /** Serialises openings; returns the live binding for a call that recorded `generation`. */
  #obtain(generation: number): Promise<Binding> {
    const next = this.#opening.then(async () => {
      if (this.#shutdown) throw new CodeModeError(undefined, SHUTTING_DOWN);
      if (!this.#binding.live) {
        const { binding } = await this.#provider.openBinding({
          mode: this.outputTruncation,
          pinned: true,
          limits: this.#options.cellExecutionLimits,
          maxPendingDelegateCalls: this.#options.maxPendingDelegateCalls,
          signal: this.#openingAbort.signal,
        });
        if (this.#shutdown) {
          throw failBinding(binding, SHUTTING_DOWN);
        }
        this.#binding = binding;
      }
      if (this.#binding.generation !== generation) throw new CodeModeError(undefined, RESET_MESSAGE);
      return this.#binding;
    });
    // The chain only orders the openings; each caller gets its own outcome from `next`.
    this.#opening = next.then(() => undefined, () => undefined);
    return next;
  }

  /** Runs `promise` against a client-side deadline; on expiry the call is cancelled and the binding fails. */
  async #deadline<T>(
    binding: Binding,
    promise: Promise<T>,
    ms: number,
    operation: string,
    cancel: AbortController,
  ): Promise<T> {
    const result = await withDeadline(this.#provider.clock, promise, ms);
    if (result !== TIMED_OUT) return result;
    cancel.abort();
    throw failBinding(binding, timeoutText(operation), "DEADLINE_EXCEEDED");
  }

  /** The error of an established call; retires the binding per §10.6. */
  #callFailed(binding: Binding, operation: string, error: unknown, routeLost: boolean): CodeModeError {
    if (error instanceof CodeModeError) return error;
    const failure = statusError(operation, error);
    if (retiresBinding(error, routeLost, binding.route !== undefined)) binding.fail(failure);
    return failure;
  }

  async execute(
    request: ExecuteRequest,
    delegate: CodeModeSessionDelegate,
    options: { preempt?: AbortSignal; signal?: AbortSignal } = {},
  ): Promise<StartedCell> {
    if (this.#shutdown) throw new CodeModeError(undefined, SHUTTING_DOWN);
    const generation = this.#binding.generation;
    if (
      request.maxOutputTokens !== undefined &&
      (!Number.isSafeInteger(request.maxOutputTokens) || request.maxOutputTokens < 0)
    ) {
      throw new CodeModeError(undefined, `invalid code-mode output token limit: ${request.maxOutputTokens}`);
    }
    const binding = await this.#obtain(generation);
    const call = this.#sendExecute(binding, request, delegate);
    let first: IteratorResult<ExecuteEvent>;
    try {
      first = await this.#deadline(
        binding,
        binding.orFailure(call.events.next()),
        this.#provider.transportTimeoutMs,
        "execution starting event",
        call.cancel,
      );
    } catch (error) {
      call.cancel.abort();
      binding.removeExecution(call.cell);
      if (call.catalog?.withTools === false && isUnknownRevision(error)) {
        // The host no longer knows the revision (another tool set replaced it): send the tools.
        binding.forgetCatalog();
        return await this.execute(request, delegate, options);
      }
      throw this.#callFailed(binding, "execution", error, call.trailers.routeLost);
    }
    const hostId = startedCellId(call, first);
    if (call.catalog?.withTools) binding.confirmCatalog(call.catalog.revision);
    return this.#startedCell(call, hostId, 60_000 + (request.yieldTimeMs ?? 10_000) + 1_000, options);
  }

  /** Registers the execution and sends its Execute (tools by catalog revision when they can). */
  #sendExecute(binding: Binding, request: ExecuteRequest, delegate: CodeModeSessionDelegate): ExecuteCall {
    const executionId = crypto.randomUUID();
    // Registered before sending: its tool calls, notifications and CellClosed may beat `started`.
    const cell = binding.addExecution({
      executionId,
      toolCallId: request.toolCallId,
      delegate,
      enabledTools: request.enabledTools,
    });
    // Aborting before `started` does not cancel at once: the cell ID must be known so that the cell
    // can be terminated and reported closed (abandonment, §10.11).
    const cancel = new AbortController();
    const trailers = { routeLost: false };
    const tools = request.enabledTools.map(wireTool);
    const catalog = this.#options.catalogRevisions === false
      ? undefined
      : binding.catalogFor(catalogKey(tools));
    const stream = binding.client.execute({
      sessionId: binding.sessionId,
      executionId,
      toolCallId: request.toolCallId,
      source: request.source,
      enabledTools: catalog?.withTools === false ? [] : tools,
      ...(catalog === undefined ? {} : { catalogRevision: catalog.revision }),
      ...(request.yieldTimeMs === undefined ? {} : { yieldTimeMs: request.yieldTimeMs }),
      ...(request.maxOutputTokens === undefined ? {} : { maxOutputTokens: request.maxOutputTokens }),
    }, {
      signal: cancel.signal,
      metadata: binding.metadata(),
      onTrailer: (trailer: Trailer) => {
        trailers.routeLost = routeLostIn(trailer);
      },
    });
    return { binding, cell, executionId, catalog, cancel, trailers, events: stream[Symbol.asyncIterator]() };
  }

  /**
   * The started cell of an Execute: its initial observation (read once, on its deadline), its
   * preemption and its abandonment (by `abandon()` or either signal).
   */
  #startedCell(
    call: ExecuteCall,
    hostId: string,
    outcomeDeadlineMs: number,
    options: { preempt?: AbortSignal; signal?: AbortSignal },
  ): StartedCell {
    const { binding, cell, executionId, cancel } = call;
    const onPreempt = () => {
      sendAndForget(binding.client.yieldObservation({ sessionId: binding.sessionId, executionId }, {
        metadata: binding.metadata(),
      }));
    };
    options.preempt?.addEventListener("abort", onPreempt, { once: true });
    let abandoned = false;
    const abandon = () => {
      if (abandoned) return;
      abandoned = true;
      cancel.abort();
      if (binding.live) {
        sendAndForget(binding.client.terminate({ sessionId: binding.sessionId, cellId: hostId }, {
          metadata: binding.metadata(),
        }));
      }
      binding.reportClosed(cell);
    };
    let initial: Promise<RuntimeResponse> | undefined;
    const readOutcome = async (): Promise<RuntimeResponse> => {
      try {
        return await this.#initialOutcome(call, hostId, outcomeDeadlineMs);
      } catch (error) {
        if (abandoned) throw new CodeModeError("CANCELLED", "gRPC code-mode execution was abandoned");
        throw this.#callFailed(binding, "execution outcome", error, call.trailers.routeLost);
      } finally {
        options.signal?.removeEventListener("abort", abandon);
        options.preempt?.removeEventListener("abort", onPreempt);
      }
    };
    if (options.signal) {
      if (options.signal.aborted) {
        abandon();
        throw options.signal.reason;
      }
      options.signal.addEventListener("abort", abandon, { once: true });
    }
    return {
      cellId: cell.publicId,
      initialResponse: (o: { signal?: AbortSignal } = {}) => {
        if (o.signal) {
          if (o.signal.aborted) abandon();
          else o.signal.addEventListener("abort", abandon, { once: true });
        }
        initial ??= readOutcome();
        return initial;
      },
      abandon,
    };
  }

  /** Reads an Execute's outcome event and maps it (a result waits for its cell to close). */
  async #initialOutcome(call: ExecuteCall, hostId: string, deadlineMs: number): Promise<RuntimeResponse> {
    const { binding, cell } = call;
    const next = await this.#deadline(
      binding,
      binding.orFailure(call.events.next()),
      deadlineMs,
      "execution outcome",
      call.cancel,
    );
    if (next.done || !next.value.outcome) {
      throw failBinding(
        binding,
        next.done
          ? "gRPC code-mode execution omitted its initial outcome"
          : "gRPC code-mode execution returned an unexpected event",
      );
    }
    const outcome = next.value.outcome;
    if ((outcome.cellId ?? "") !== hostId) {
      throw failBinding(
        binding,
        `gRPC code-mode execution returned cell ${outcome.cellId} instead of ${hostId}`,
      );
    }
    const response = toRuntimeResponse(outcome, cell.publicId);
    await this.#settleNotifications(binding, cell, response);
    return response;
  }

  /** A `result` waits for its cell's `CellClosed` and notifications; `terminated` aborts them. */
  async #settleNotifications(binding: Binding, cell: CellRecord, response: RuntimeResponse): Promise<void> {
    if (response.type === "terminated") {
      cell.notificationAbort.abort();
      return;
    }
    if (response.type !== "result") return;
    await Promise.race([cell.closed.promise, binding.ended]);
  }

  async wait(
    request: WaitRequest,
    options: { preempt?: AbortSignal; signal?: AbortSignal } = {},
  ): Promise<WaitOutcome> {
    if (this.#shutdown) throw new CodeModeError(undefined, SHUTTING_DOWN);
    const generation = this.#binding.generation;
    if (
      request.maxTokens !== undefined && (!Number.isSafeInteger(request.maxTokens) || request.maxTokens < 0)
    ) {
      throw new CodeModeError(undefined, `invalid code-mode output token limit: ${request.maxTokens}`);
    }
    if (this.#observers.has(request.cellId)) {
      throw new CodeModeError(undefined, `exec cell ${request.cellId} already has an active observer`);
    }
    this.#observers.add(request.cellId);
    try {
      // Waits on one cell are serialised: a cancelled wait keeps the lock until CancelWait returns.
      await this.#waitLocks.get(request.cellId);
      const binding = await this.#obtain(generation);
      return await this.#waitOn(binding, request, options);
    } finally {
      this.#observers.delete(request.cellId);
    }
  }

  /** Sends a Wait on `binding`, its cell's lock held until it ends or its cancellation is retired. */
  async #waitOn(
    binding: Binding,
    request: WaitRequest,
    options: { preempt?: AbortSignal; signal?: AbortSignal },
  ): Promise<WaitOutcome> {
    const hostId = binding.hostId(request.cellId);
    const waitId = crypto.randomUUID();
    const cancel = new AbortController();
    let routeLost = false;
    const lock = deferred<void>();
    this.#waitLocks.set(request.cellId, lock.promise);
    const onAbort = () => {
      cancel.abort();
      retireWait(binding, waitId, lock);
    };
    const onPreempt = () => {
      sendAndForget(binding.client.yieldObservation({ sessionId: binding.sessionId, waitId }, {
        metadata: binding.metadata(),
      }));
    };
    if (options.signal?.aborted) {
      // Cancelled before it was sent (at once, or while it queued for the cell's lock or the
      // binding): nothing reached the host, and its listener would never run to free the lock.
      lock.resolve();
      throw statusError("wait", options.signal.reason);
    }
    options.signal?.addEventListener("abort", onAbort, { once: true });
    options.preempt?.addEventListener("abort", onPreempt, { once: true });
    try {
      const response = await this.#deadline(
        binding,
        binding.orFailure(
          binding.client.wait(
            {
              sessionId: binding.sessionId,
              cellId: hostId,
              waitId,
              yieldTimeMs: request.yieldTimeMs,
              ...(request.maxTokens === undefined ? {} : { maxTokens: request.maxTokens }),
            },
            {
              signal: cancel.signal,
              metadata: binding.metadata(),
              onTrailer: (trailer: Trailer) => {
                routeLost = routeLostIn(trailer);
              },
            },
          ),
        ),
        60_000 + request.yieldTimeMs + 1_000,
        "wait",
        cancel,
      );
      return await this.#waitOutcome(binding, hostId, response);
    } catch (error) {
      throw this.#callFailed(binding, "wait", error, routeLost);
    } finally {
      options.signal?.removeEventListener("abort", onAbort);
      options.preempt?.removeEventListener("abort", onPreempt);
      if (!options.signal?.aborted) lock.resolve();
    }
  }

  async #waitOutcome(binding: Binding, hostId: string, response: WaitResponse): Promise<WaitOutcome> {
    const live = response.liveCell;
    const outcome = live ?? response.missingCell;
    if (!outcome) throw new CodeModeError(undefined, "gRPC code-mode execution returned an unexpected event");
    if (outcome.cellId !== hostId) {
      throw failBinding(binding, `gRPC code-mode host returned cell ${outcome.cellId} instead of ${hostId}`);
    }
    const mapped = toRuntimeResponse(outcome, binding.publicId(hostId));
    const cell = binding.cell(hostId);
    if (live && cell) await this.#settleNotifications(binding, cell, mapped);
    return live ? { type: "liveCell", response: mapped } : { type: "missingCell", response: mapped };
  }

  async terminate(cellId: string): Promise<WaitOutcome> {
    if (this.#shutdown) throw new CodeModeError(undefined, SHUTTING_DOWN);
    const binding = this.#binding;
    if (!binding.live) throw binding.failure!;
    const hostId = binding.hostId(cellId);
    const cancel = new AbortController();
    let routeLost = false;
    try {
      const response = await this.#deadline(
        binding,
        binding.orFailure(
          binding.client.terminate({ sessionId: binding.sessionId, cellId: hostId }, {
            signal: cancel.signal,
            metadata: binding.metadata(),
            onTrailer: (trailer: Trailer) => {
              routeLost = routeLostIn(trailer);
            },
          }),
        ),
        this.#provider.transportTimeoutMs,
        "termination",
        cancel,
      );
      return await this.#waitOutcome(binding, hostId, response);
    } catch (error) {
      throw this.#callFailed(binding, "termination", error, routeLost);
    }
  }

  shutdown(): Promise<void> {
    this.#shutdown ??= (async () => {
      this.#openingAbort.abort();
      await this.#opening;
      const binding = this.#binding;
      if (binding.live) {
        try {
          await binding.client.closeSession({ sessionId: binding.sessionId }, {
            metadata: binding.metadata(),
          });
        } catch {
          // Shutdown never throws; a session the host already lost is gone either way.
        }
        binding.fail(new CodeModeError(undefined, SHUTTING_DOWN));
      }
    })();
    return this.#shutdown;
  }

  /** Same as {@link shutdown}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.shutdown();
  }
}

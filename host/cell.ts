/**
 * One cell as the host sees it (SPEC §4): its output window, its observer, its committed
 * completion and its termination. The runtime's events arrive through {@link Cell.onEvent}.
 *
 * Contract:
 * - At most one observer is attached; a second gets `Busy` (SPEC §4.6).
 * - Each outcome carries the items produced since the previous delivered outcome; an observer
 *   that goes away consumes nothing, and a failed delivery is restored in front (§4.2).
 * - A completion is committed once (stored writes merged) and buffered until delivered (§4.7).
 * - Termination claimed first rejects the commit; a committed completion wins over a later
 *   termination (§4.5 rules 4–5).
 * - `closed` resolves once the cell's isolate (or its runtime) has stopped.
 *
 * @module
 */
import type { WireCellEvent, WireItem } from "../proto/worker_codec.ts";
import type { Clock } from "./clock.ts";
import { CodeModeError } from "./errors.ts";

/** A public `ContentItem` as a plain object for the encoder. */
export type ContentItem =
  | { text: { text: string } }
  | { image: { imageUrl: string; detail: number } }
  | { audio: { audioUrl: string } };

/** What an observation returns. */
export interface Outcome {
  kind: "yielded" | "completed" | "terminated";
  items: ContentItem[];
  errorText?: string;
}

/** What a cell needs from its session. */
export interface CellHost {
  clock: Clock;
  /** Merges the cell's writes; returns an error text when the merge was refused. */
  commit(writes: [string, string][]): string | undefined;
  /** Asks the runtime to stop the cell (StopCell). */
  stop(cell: Cell): void;
  /** The cell reached its terminal outcome and was delivered: forget it. */
  forget(cell: Cell): void;
  /** The cell has stopped (isolate exit or runtime end). */
  closed(cell: Cell): void;
  /** Runtime events the cell does not handle itself (tool calls, notifications). */
  delegate(cell: Cell, event: WireCellEvent): void;
}

const DETAILS: Record<string, number> = { auto: 1, low: 2, high: 3, original: 4 };

/**
 * Converts a runtime content item to the public form.
 *
 * @param item the item from the frame
 * @returns the public item, or `undefined` for an item that carries no content
 */
export function toContentItem(item: WireItem): ContentItem | undefined {
  if ("text" in item) return { text: { text: item.text } };
  if ("image" in item) {
    return { image: { imageUrl: item.image.imageUrl, detail: DETAILS[item.image.detail] ?? 3 } };
  }
  if ("audioUrl" in item) return { audio: { audioUrl: item.audioUrl } };
  if ("trimmedText" in item) {
    return { text: { text: item.trimmedText.head + item.trimmedText.tail } };
  }
  return undefined;
}

interface Observer {
  resolve(outcome: Outcome): void;
  reject(error: unknown): void;
  cleanup(): void;
}

/** The `Busy` observation error of SPEC §4.6. */
export function busyError(cellId: string): CodeModeError {
  return new CodeModeError(
    "FAILED_PRECONDITION",
    `exec cell ${cellId} already has an active observer`,
  );
}

/** Host-side state of one cell. */
export class Cell {
  readonly id: string;
  readonly executionId: string;
  /** Resolves when the cell has stopped. */
  readonly closed: Promise<void>;

  #host: CellHost;
  #items: ContentItem[] = [];
  #observer: Observer | undefined;
  #completion: { errorText?: string; committedAt: number } | undefined;
  #termination: PromiseWithResolvers<void> | undefined;
  #writes: [string, string][] = [];
  #stopped = false;
  #resolveClosed!: () => void;
  #heapLimitMb: number;

  /**
   * @param id the cell ID
   * @param executionId the Execute that created it
   * @param host the session side
   * @param heapLimitMb the cell heap limit, for the heap-limit error text
   */
  constructor(id: string, executionId: string, host: CellHost, heapLimitMb: number) {
    this.id = id;
    this.executionId = executionId;
    this.#host = host;
    this.#heapLimitMb = heapLimitMb;
    this.closed = new Promise((resolve) => this.#resolveClosed = resolve);
  }

  /** Whether the cell's isolate is still running. */
  get running(): boolean {
    return !this.#stopped;
  }

  /** Whether a termination has been claimed. */
  get terminating(): boolean {
    return this.#termination !== undefined;
  }

  /**
   * Handles one runtime event of this cell, in order.
   *
   * @param event the decoded `CellEvent`
   */
  onEvent(event: WireCellEvent): void {
    switch (event.event) {
      case "started":
      case "pending":
      case "toolResultConsumed":
        return;
      case "contentItem": {
        const item = toContentItem(event.contentItem!);
        if (item) this.#items.push(item);
        return;
      }
      case "yieldRequested":
        if (this.#observer && !this.#termination) this.#deliver("yielded");
        return;
      case "storedWrite":
        this.#writes.push([event.storedWrite!.key, event.storedWrite!.valueJson ?? "null"]);
        return;
      case "result": {
        const r = event.result!;
        const errorText = r.errorText ??
          (r.trimmedError ? r.trimmedError.head + r.trimmedError.tail : undefined);
        this.#finish(errorText, this.#writes);
        return;
      }
      case "exited": {
        const reason = event.exited!.reason;
        this.runtimeStopped(
          reason === "heap_limit"
            ? `exec runtime ended unexpectedly: cell heap limit of ${this.#heapLimitMb} MiB reached`
            : "exec runtime ended unexpectedly",
        );
        return;
      }
      default:
        this.#host.delegate(this, event);
    }
  }

  /**
   * The cell's isolate or runtime stopped. Without a result this completes the cell with
   * `errorText` and no writes; a claimed termination completes now.
   *
   * @param errorText the completion error when no result arrived
   */
  runtimeStopped(errorText: string): void {
    if (!this.#completion && !this.#termination) this.#finish(errorText, undefined);
    if (this.#stopped) return;
    this.#stopped = true;
    this.#termination?.resolve();
    this.#resolveClosed();
    this.#host.closed(this);
  }

  /**
   * Completes a cell that never reached the runtime (refused source, SPEC §5.4–§5.5).
   *
   * @param errorText the error text
   */
  refuse(errorText: string): void {
    this.#finish(errorText, undefined);
    this.runtimeStopped(errorText);
  }

  #finish(errorText: string | undefined, writes: [string, string][] | undefined): void {
    if (this.#completion) return;
    if (this.#termination) {
      // Termination claimed first: the commit is rejected and the error discarded (§4.5 rule 5).
      this.#termination.resolve();
      return;
    }
    if (writes) {
      const refused = this.#host.commit(writes);
      if (refused !== undefined && errorText === undefined) errorText = refused;
    }
    this.#completion = { errorText, committedAt: this.#host.clock.now() };
    if (this.#observer) this.#deliver("completed");
  }

  /**
   * Observes the cell until it yields, completes or is terminated.
   *
   * @param yieldMs the effective yield time (already capped and clamped)
   * @param options `signal`: the caller went away (nothing is consumed); `yieldSignal`: end early with `yielded`
   * @returns the outcome
   * @throws {CodeModeError} `FAILED_PRECONDITION` when another observer is attached or a termination runs
   */
  observe(
    yieldMs: number,
    options: { signal?: AbortSignal; yieldSignal?: AbortSignal } = {},
  ): Promise<Outcome> {
    if (this.#observer || this.#termination) return Promise.reject(busyError(this.id));
    const { promise, resolve, reject } = Promise.withResolvers<Outcome>();
    const clock = this.#host.clock;
    const timer = clock.setTimeout(() => this.#deliver("yielded"), yieldMs);
    const onYield = () => this.#deliver("yielded");
    const onAbort = () => {
      if (this.#observer !== observer) return;
      observer.cleanup();
      this.#observer = undefined;
      reject(options.signal?.reason ?? new Error("observation dropped"));
    };
    const observer: Observer = {
      resolve,
      reject,
      cleanup: () => {
        clock.clearTimeout(timer);
        options.yieldSignal?.removeEventListener("abort", onYield);
        options.signal?.removeEventListener("abort", onAbort);
      },
    };
    this.#observer = observer;
    options.signal?.addEventListener("abort", onAbort, { once: true });
    options.yieldSignal?.addEventListener("abort", onYield, { once: true });
    if (this.#completion) this.#deliver("completed");
    else if (options.signal?.aborted) onAbort();
    else if (options.yieldSignal?.aborted) this.#deliver("yielded");
    return promise;
  }

  #take(kind: Outcome["kind"]): Outcome {
    const items = this.#items;
    this.#items = [];
    if (kind === "completed") {
      const errorText = this.#completion!.errorText;
      return errorText === undefined ? { kind, items } : { kind, items, errorText };
    }
    return { kind, items };
  }

  #deliver(kind: Outcome["kind"]): void {
    const observer = this.#observer;
    if (!observer) return;
    // Once termination is claimed, the deadline and yield signals no longer count (A8).
    if (kind === "yielded" && this.#termination) return;
    observer.cleanup();
    this.#observer = undefined;
    const outcome = this.#take(kind);
    if (kind !== "yielded") this.#host.forget(this);
    observer.resolve(outcome);
  }

  /**
   * Puts back an outcome whose delivery failed, in front of newer output (SPEC §4.2 rule 2).
   *
   * @param outcome the outcome that could not be delivered
   */
  restore(outcome: Outcome): void {
    this.#items = [...outcome.items, ...this.#items];
  }

  /**
   * Terminates the cell and returns its final outcome (SPEC §4.5).
   *
   * @returns `terminated` with the drained output, or the committed natural completion
   * @throws {CodeModeError} `FAILED_PRECONDITION` `exec cell {id} is already terminating`
   */
  async terminate(): Promise<Outcome> {
    if (this.#termination) {
      throw new CodeModeError("FAILED_PRECONDITION", `exec cell ${this.id} is already terminating`);
    }
    if (this.#completion) {
      // Natural completion wins; an attached observer cannot exist (it would have received it).
      const outcome = this.#take("completed");
      this.#host.forget(this);
      return outcome;
    }
    this.#termination = Promise.withResolvers<void>();
    if (!this.#stopped) this.#host.stop(this);
    else this.#termination.resolve();
    await this.#termination.promise;
    const outcome = this.#take("terminated");
    const observer = this.#observer;
    this.#observer = undefined;
    observer?.cleanup();
    observer?.resolve({ ...outcome, items: [...outcome.items] });
    this.#host.forget(this);
    return outcome;
  }
}

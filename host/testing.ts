/**
 * Fakes for the host's unit tests (never imported by production code, not re-exported from
 * `mod.ts`):
 *
 * - {@link FakeClock}: a manual {@link Clock}; timers fire only when the test moves time.
 * - {@link FakeRuntime}: an in-memory {@link RuntimeTransport}. The test plays the session
 *   runtime: it sees every `HostToWorker` frame the host sends, answers with `WorkerToHost`
 *   frames, and can end the runtime with any {@link RuntimeEnd}.
 * - {@link FakeCell}: the runtime side of one `StartCell`, with one method per cell event.
 * - {@link fakeSpawner}: a runtime factory for `SessionManager` that records what it made.
 *
 * @module
 */
import { type Clock, MAX_TIMER_MS } from "./core/clock.ts";
import type { HostToWorker, WireCellEvent, WireItem, WorkerToHost } from "../proto/worker_codec.ts";
import type { RuntimeEnd, RuntimeTransport } from "./runtime/runtime_transport.ts";

// ---- the clock ----------------------------------------------------------------------------------

/** The rejection handler that marks a fake runtime's refused `ready` as handled (see the constructor). */
function refusedReady(_error: unknown): void {}

/** A manual clock: time moves only in {@link FakeClock.advance} (and its variants). */
export class FakeClock implements Clock {
  #now: number;
  #next = 1;
  #timers = new Map<number, { at: number; fn: () => void }>();

  /** @param now the starting time in milliseconds (default 0) */
  constructor(now = 0) {
    this.#now = now;
  }

  now(): number {
    return this.#now;
  }

  /**
   * Schedules `fn` after `ms`. Like the platform's timers (and unlike `realClock`, which
   * clamps), a delay beyond {@link MAX_TIMER_MS} or not a number fires after 1 ms, so a test
   * catches a huge yield time that reached the clock unclamped.
   */
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.#next++;
    const delay = ms > MAX_TIMER_MS || Number.isNaN(ms) ? 1 : Math.max(0, ms);
    this.#timers.set(id, { at: this.#now + delay, fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.#timers.delete(handle as number);
  }

  /** Timers scheduled and not yet fired or cleared. */
  get timers(): number {
    return this.#timers.size;
  }

  /** When the earliest pending timer is due, if any. */
  get nextDue(): number | undefined {
    let due: number | undefined;
    for (const timer of this.#timers.values()) if (due === undefined || timer.at < due) due = timer.at;
    return due;
  }

  /**
   * Moves time forward by `ms`, firing every timer that falls due, earliest first (a timer that a
   * callback schedules inside the window fires too). Fires synchronously: promise callbacks that
   * the timers start run afterwards; use {@link FakeClock.tick} to let them run in between.
   *
   * @param ms how far to move
   */
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      const due = this.#earliest(target);
      if (!due) break;
      this.#timers.delete(due[0]);
      this.#now = due[1].at;
      due[1].fn();
    }
    this.#now = target;
  }

  /**
   * Moves time forward by `ms` like {@link FakeClock.advance}, but lets the event loop turn after
   * each timer fires, so that work a timer starts (and timers that work schedules) happens at
   * the time it would in real life.
   *
   * @param ms how far to move
   */
  async tick(ms: number): Promise<void> {
    const target = this.#now + ms;
    await turn();
    for (;;) {
      const due = this.#earliest(target);
      if (!due) break;
      this.#timers.delete(due[0]);
      this.#now = due[1].at;
      due[1].fn();
      await turn();
    }
    this.#now = target;
    await turn();
  }

  /**
   * Moves time in steps of `stepMs`, one turn of the event loop apart, until `promise` settles:
   * for work that crosses real I/O (a socket, a runtime process) before it reaches a timer.
   * Time then moves about as fast as real time, so keep what must not fire far away.
   *
   * @param promise what to wait for
   * @param stepMs how far each step moves
   * @returns the promise's value
   */
  async runUntil<T>(promise: Promise<T>, stepMs = 1): Promise<T> {
    let settled = false;
    // Watches for the end only; the outcome (a rejection too) is the caller's, from `promise`.
    promise.then(() => settled = true, () => settled = true);
    while (!settled) {
      this.advance(stepMs);
      await turn();
    }
    return await promise;
  }

  #earliest(target: number): [number, { at: number; fn: () => void }] | undefined {
    let due: [number, { at: number; fn: () => void }] | undefined;
    for (const entry of this.#timers) {
      if (entry[1].at <= target && (!due || entry[1].at < due[1].at)) due = entry;
    }
    return due;
  }
}

/**
 * One turn of the event loop: pending promise callbacks and already-due real timers (such as
 * `setImmediate` and a 0 ms `setTimeout`) run before it resolves.
 *
 * @returns a promise that resolves on the next macrotask
 */
export function turn(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

// ---- the runtime --------------------------------------------------------------------------------

/** The payload of a cell event: exactly one member of `WireCellEvent` besides `cellId`. */
export type CellEventBody = Omit<WireCellEvent, "cellId" | "event">;

/** A `HostToWorker` member name (`startCell`, `storeUpdate`, …). */
export type HostFrameKind = Exclude<keyof HostToWorker, "message">;

/** The payload of one kind of `HostToWorker` frame. */
export type HostFrame<K extends HostFrameKind> = NonNullable<HostToWorker[K]>;

/** Options of a {@link FakeRuntime}. */
export interface FakeRuntimeOptions {
  /**
   * `"ready"` (default): `ready` resolves at once. `"manual"`: it waits for
   * {@link FakeRuntime.accept} or {@link FakeRuntime.refuse}. An `Error`: `ready` rejects with it
   * (as a version mismatch does).
   */
  ready?: "ready" | "manual" | Error;
  /**
   * How the fake answers a `StopCell`: `"confirm"` (default) reports the cell's `exited` on the
   * next microtask, as a cooperative stop does; `"ignore"` sends nothing, as a cell stuck in
   * synchronous code (the host then hard-stops the runtime).
   */
  stopCell?: "confirm" | "ignore";
  /** Called for every `StartCell` the host sends (after it was recorded): script the cell here. */
  onStartCell?(cell: FakeCell): void;
}

let nextRuntimeId = 0;

/**
 * An in-memory session runtime. The host side uses it as a {@link RuntimeTransport}; the test
 * side reads {@link FakeRuntime.sent} (or awaits {@link FakeRuntime.next} /
 * {@link FakeRuntime.nextCell}) and answers with {@link FakeRuntime.emit} or a {@link FakeCell}.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { FakeRuntime } from "./testing.ts";
 * await using runtime = new FakeRuntime();
 * const seen: unknown[] = [];
 * runtime.onMessage = (message) => seen.push(message);
 * await runtime.send({ startCell: { cellId: "1", source: "text(1)", tools: [], storeVersion: 0 } });
 * const cell = await runtime.nextCell();
 * cell.complete();
 * assert.equal(seen.length, 2);
 * const end = await runtime.crash({ signal: "SIGKILL" });
 * assert.equal(end.byHost, false);
 * ```
 */
export class FakeRuntime implements RuntimeTransport {
  readonly id: number = ++nextRuntimeId;
  readonly pid: number | undefined = undefined;
  readonly ready: Promise<void>;
  readonly ended: Promise<RuntimeEnd>;
  /** Every frame the host sent, in order. */
  readonly sent: HostToWorker[] = [];
  /** How the host ended the runtime, if it did: `stop()` (orderly) or `kill()` (hard). */
  endedBy: "stop" | "kill" | undefined;
  onMessage: (message: WorkerToHost) => void = () => {};
  /** What the host asked to hear when this runtime burns CPU while idle (`watchIdleCpu`). */
  idleCpuBusy: ((cpuPercent: number) => void) | undefined;

  #options: FakeRuntimeOptions;
  #ready = Promise.withResolvers<void>();
  #ended = Promise.withResolvers<RuntimeEnd>();
  #end: RuntimeEnd | undefined;
  #cursors = new Map<string, number>();
  #waiters: (() => void)[] = [];
  #cells = new Map<string, FakeCell>();

  /** @param options see {@link FakeRuntimeOptions} */
  constructor(options: FakeRuntimeOptions = {}) {
    this.#options = options;
    this.ready = this.#ready.promise;
    // As a runtime's: a refused `ready` is for whoever awaits it, not an unhandled rejection.
    this.ready.catch(refusedReady);
    this.ended = this.#ended.promise;
    const ready = options.ready ?? "ready";
    if (ready === "ready") this.#ready.resolve();
    else if (ready instanceof Error) this.#ready.reject(ready);
  }

  get alive(): boolean {
    return this.#end === undefined && this.endedBy === undefined;
  }

  /** How the runtime ended, once it has. */
  get end(): RuntimeEnd | undefined {
    return this.#end;
  }

  /** The cell of a `StartCell` the host sent, by cell ID. */
  cell(cellId: string): FakeCell | undefined {
    return this.#cells.get(cellId);
  }

  // ---- the host's side (RuntimeTransport) -------------------------------------------------------

  send(message: HostToWorker): Promise<void> {
    if (!this.alive) return Promise.reject(new Error("code-mode session runtime is gone"));
    this.sent.push(message);
    for (const wake of this.#waiters.splice(0)) wake();
    if (message.startCell) {
      const cell = new FakeCell(this, message.startCell);
      this.#cells.set(cell.id, cell);
      this.#options.onStartCell?.(cell);
    }
    if (message.stopCell && (this.#options.stopCell ?? "confirm") === "confirm") {
      const cell = this.#cells.get(message.stopCell.cellId);
      queueMicrotask(() => cell?.exited());
    }
    return Promise.resolve();
  }

  stop(): Promise<RuntimeEnd> {
    this.endedBy ??= "stop";
    return this.#finish({ kind: "exit", byHost: true, code: 0, signal: null, stderrTail: "" });
  }

  watchIdleCpu(onBusy: (cpuPercent: number) => void): void {
    this.idleCpuBusy = onBusy;
  }

  kill(): Promise<RuntimeEnd> {
    this.endedBy ??= "kill";
    return this.#finish({ kind: "exit", byHost: true, code: null, signal: "SIGKILL", stderrTail: "" });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.kill();
  }

  // ---- the runtime's side -----------------------------------------------------------------------

  /** Accepts `Ready` (options `ready: "manual"`). */
  accept(): void {
    this.#ready.resolve();
  }

  /**
   * Fails the start (options `ready: "manual"`), as a version mismatch does.
   *
   * @param message the rejection's message
   */
  refuse(message: string): void {
    this.#ready.reject(new Error(message));
  }

  /**
   * Delivers one frame to the host, synchronously (a runtime that has ended sends nothing).
   *
   * @param message the frame
   */
  emit(message: WorkerToHost): void {
    if (this.#end !== undefined) return;
    this.onMessage(message);
  }

  /**
   * Delivers one `CellEvent`; its `event` (the oneof's name) is filled in.
   *
   * @param cellId the cell
   * @param body exactly one event member, e.g. `{ contentItem: { text: "x" } }`
   */
  cellEvent(cellId: string, body: CellEventBody): void {
    const names = Object.keys(body);
    if (names.length !== 1) throw new Error(`a cell event has exactly one member, got ${names}`);
    this.emit({ cellEvent: { cellId, event: names[0], ...body } });
  }

  /**
   * Ends the runtime on its own (a crash, SPEC §3.5): by default exit code 1.
   *
   * @param end how it ended; e.g. `{ signal: "SIGKILL" }`, `{ kind: "fault", detail: "x" }`
   * @returns the end
   */
  crash(end: Partial<RuntimeEnd> = {}): Promise<RuntimeEnd> {
    const base = { code: 1, signal: null, stderrTail: "" };
    const full = end.kind === "protocol" || end.kind === "fault"
      ? { ...base, detail: "", ...end, byHost: false as const }
      : { ...base, ...end, kind: "exit" as const, byHost: false };
    return this.#finish(full as RuntimeEnd);
  }

  // ---- reading what the host sent ---------------------------------------------------------------

  /**
   * Every frame of one kind the host sent so far.
   *
   * @param kind the `HostToWorker` member
   * @returns their payloads, in order
   */
  frames<K extends HostFrameKind>(kind: K): HostFrame<K>[] {
    return this.sent.filter((m) => m[kind] !== undefined).map((m) => m[kind] as HostFrame<K>);
  }

  /**
   * The next frame of one kind not yet returned by this method: one already sent, or the next
   * one the host sends. Rejects when the runtime ends first.
   *
   * @param kind the `HostToWorker` member
   * @returns its payload
   */
  async next<K extends HostFrameKind>(kind: K): Promise<HostFrame<K>> {
    for (;;) {
      const from = this.#cursors.get(kind) ?? 0;
      const at = this.sent.findIndex((m, i) => i >= from && m[kind] !== undefined);
      if (at >= 0) {
        this.#cursors.set(kind, at + 1);
        return this.sent[at][kind] as HostFrame<K>;
      }
      if (!this.alive) throw new Error(`the runtime ended before the host sent ${kind}`);
      const { promise, resolve } = Promise.withResolvers<void>();
      this.#waiters.push(resolve);
      await Promise.race([promise, this.ended]);
    }
  }

  /**
   * The next cell the host starts (see {@link FakeRuntime.next}).
   *
   * @returns its runtime side
   */
  async nextCell(): Promise<FakeCell> {
    const start = await this.next("startCell");
    return this.#cells.get(start.cellId)!;
  }

  #finish(end: RuntimeEnd): Promise<RuntimeEnd> {
    if (this.#end === undefined) {
      this.#end = end;
      this.#ready.reject(new Error("code-mode session runtime ended before it was ready"));
      this.#ended.resolve(end);
      for (const wake of this.#waiters.splice(0)) wake();
    }
    return this.ended;
  }
}

/** The runtime side of one started cell: each method sends one `CellEvent` frame to the host. */
export class FakeCell {
  /** The cell ID. */
  readonly id: string;
  /** The `StartCell` the host sent. */
  readonly start: HostFrame<"startCell">;
  #runtime: FakeRuntime;

  /**
   * @param runtime the runtime the cell runs in
   * @param start its `StartCell`
   */
  constructor(runtime: FakeRuntime, start: HostFrame<"startCell">) {
    this.#runtime = runtime;
    this.start = start;
    this.id = start.cellId;
  }

  /** The isolate began evaluating the cell. */
  started(): this {
    return this.#event({ started: {} });
  }

  /** A `text()` call. */
  text(text: string): this {
    return this.#event({ contentItem: { text } });
  }

  /** Any content item. */
  item(item: WireItem): this {
    return this.#event({ contentItem: item });
  }

  /** A `notify()` call. */
  notify(text: string): this {
    return this.#event({ notify: text });
  }

  /** A `yield_control()` call. */
  yieldControl(): this {
    return this.#event({ yieldRequested: {} });
  }

  /** A `store()` call: the value is sent as JSON text. */
  store(key: string, value: unknown): this {
    return this.#event({ storedWrite: { key, valueJson: JSON.stringify(value) } });
  }

  /** A tool call (`tools.<globalName>(input)`). */
  toolCall(runtimeToolCallId: string, globalName: string, input?: unknown): this {
    const inputJson = input === undefined ? undefined : JSON.stringify(input);
    return this.#event({
      toolCall: { runtimeToolCallId, globalName, ...(inputJson === undefined ? {} : { inputJson }) },
    });
  }

  /** The cell's result: success, or the error text it failed with. */
  result(errorText?: string): this {
    return this.#event({ result: errorText === undefined ? {} : { errorText } });
  }

  /** The cell's isolate ended (`normal`, `heap_limit` or `fault`). */
  exited(reason = "normal", detail?: string): this {
    return this.#event({ exited: detail === undefined ? { reason } : { reason, detail } });
  }

  /** A finished cell: `result` then `exited`. */
  complete(errorText?: string): this {
    return this.result(errorText).exited();
  }

  #event(body: CellEventBody): this {
    this.#runtime.cellEvent(this.id, body);
    return this;
  }
}

/**
 * A runtime factory for `SessionManager`'s `spawn` option: each call makes a {@link FakeRuntime}
 * with `options` and records it.
 *
 * @param options options for every runtime it makes (or a function of the spawn's index)
 * @returns the factory and the runtimes it made, oldest first
 */
export function fakeSpawner(
  options: FakeRuntimeOptions | ((index: number) => FakeRuntimeOptions) = {},
): { spawn: () => FakeRuntime; runtimes: FakeRuntime[] } {
  const runtimes: FakeRuntime[] = [];
  return {
    runtimes,
    spawn: () => {
      const runtime = new FakeRuntime(typeof options === "function" ? options(runtimes.length) : options);
      runtimes.push(runtime);
      return runtime;
    },
  };
}

/**
 * The SPEC text an error carries (host errors hold it as `message`).
 *
 * @param error what was thrown
 * @returns its message
 */
export function specText(error: unknown): string {
  return String((error as Error)?.message ?? error);
}

/**
 * The message a promise rejects with (host errors carry the SPEC's exact text as `message`).
 *
 * @param promise the promise expected to reject
 * @returns the rejection's message
 * @throws {Error} when the promise fulfils
 */
export async function rejectionMessage(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    return specText(error);
  }
  throw new Error("expected a rejection");
}

/**
 * The message a call throws.
 *
 * @param fn the call expected to throw
 * @returns the error's message
 * @throws {Error} when the call returns
 */
export function thrownMessage(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    return specText(error);
  }
  throw new Error("expected a throw");
}

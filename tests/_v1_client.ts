/**
 * A client of Codex's JSON "host V1" protocol, written from SPEC §9.10 and from taps of Codex 0.171
 * talking to its own host (not from this host's code): little-endian length frames of UTF-8 JSON
 * over a child's stdin/stdout. Its requests have the shape and key order Codex sends. Used by the
 * end-to-end tests (against this host and against Codex's own) and importable by benchmarks.
 *
 * - {@link V1Client.spawn} starts `bin/codex-code-mode-host` (no arguments by default), or any
 *   other host binary (`command`: Codex's own), over real pipes with a nearly empty environment.
 * - Requests get integer ids from 1; {@link V1Client.request} resolves with the
 *   `operation/response` result, {@link V1Client.execute} with the started response and a promise
 *   of the `execute/initialResponse`.
 * - `delegate/request`s go to {@link V1Client.onDelegate} (default: a tool call fails, a
 *   notification is delivered); every message received is kept in {@link V1Client.received}.
 * - {@link V1Client.pause} stops reading stdout (the pipe fills), {@link V1Client.resume} goes on.
 *
 * @module
 */

// deno-lint-ignore no-explicit-any
export type Json = any;

/** The repository root (this file is in tests/). */
export const REPO_ROOT = new URL("..", import.meta.url).pathname;
/** The launcher Codex starts (README "Use it from Codex"). */
export const LAUNCHER = `${REPO_ROOT}bin/codex-code-mode-host`;

/** Encodes a frame: 4-byte little-endian length, then the UTF-8 JSON. */
export function frame(message: unknown): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(message));
  const out = new Uint8Array(4 + json.length);
  new DataView(out.buffer).setUint32(0, json.length, true);
  out.set(json, 4);
  return out;
}

/**
 * Splits bytes into frames; throws when they do not end at a frame boundary.
 *
 * @param bytes a whole stdout
 * @returns the decoded messages
 */
export function parseFrames(bytes: Uint8Array): Json[] {
  const out: Json[] = [];
  let at = 0;
  while (at < bytes.length) {
    if (bytes.length - at < 4) throw new Error(`stdout ends inside a frame length at ${at}`);
    const n = new DataView(bytes.buffer, bytes.byteOffset + at, 4).getUint32(0, true);
    if (bytes.length - at - 4 < n) throw new Error(`stdout ends inside a ${n}-byte frame at ${at}`);
    out.push(
      JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(at + 4, at + 4 + n))),
    );
    at += 4 + n;
  }
  return out;
}

/** What a delegate handler answers: the `result` of a `delegate/response`, or nothing (no answer). */
export type DelegateHandler = (request: Json) => Json | undefined | Promise<Json | undefined>;

/** A tool result. */
export const toolResult = (result: unknown): Json => ({
  status: "ok",
  value: { type: "tool/result", result },
});
/** A delivered notification. */
export const delivered: Json = { status: "ok", value: { type: "notification/delivered" } };
/** An error result. */
export const failure = (message: string): Json => ({ status: "error", message });

/** The capabilities Codex 0.171 offers (all optional). */
export const CODEX_CAPABILITIES = [
  "bounded-output-v1",
  "delegate-capacity-4096",
  "session-cell-execution-resource-limits",
  "tool-catalog-revision-v1",
  "yield-observation",
];

/** An execute in flight. */
export interface Execution {
  id: number;
  /** The `operation/response` result (`execution/started` or an error). */
  started: Promise<Json>;
  /**
   * The `execute/initialResponse` result; when the execute was refused (no initial response comes,
   * as with Codex's own host), the refusal.
   */
  initial: Promise<Json>;
}

/** Options of {@link V1Client.spawn}. */
export interface SpawnOptions {
  /** Arguments of the launcher (default none: Codex's launch). */
  args?: string[];
  /** Extra environment (default only `PATH` with deno's directory and `HOME`). */
  env?: Record<string, string>;
  /** The program (default {@link LAUNCHER}). */
  command?: string;
  /** The working directory (default `/`). */
  cwd?: string;
  /** Keep every byte read from stdout (default true), for {@link V1Client.stdoutBytes}. */
  keepStdout?: boolean;
}

/** A V1 client over a pair of streams. */
export class V1Client {
  readonly received: Json[] = [];
  /** The JSON text of every message received, as written (key order, exact numbers). */
  readonly raw: string[] = [];
  readonly child?: Deno.ChildProcess;
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #reader: ReadableStreamDefaultReader<Uint8Array>;
  #nextId = 1;
  #responses = new Map<number, PromiseWithResolvers<Json>>();
  #initials = new Map<number, PromiseWithResolvers<Json>>();
  #hello = Promise.withResolvers<Json>();
  #watchers: { predicate: (m: Json) => boolean; resolve: (m: Json) => void }[] = [];
  #paused: PromiseWithResolvers<void> | undefined;
  #keep: boolean;
  #stdout: Uint8Array[] = [];
  #stdoutBytes = 0;
  /** Resolves when stdout ended (at a frame boundary) or rejects on a framing error. */
  readonly closed: Promise<void>;
  /** Delegate requests go here. */
  onDelegate: DelegateHandler = (request) =>
    request.request.type === "notification/send" ? delivered : failure("no tool here");

  /**
   * @param readable the host's stdout
   * @param writable the host's stdin
   * @param child the host process, when spawned
   * @param keepStdout keep the raw bytes
   */
  constructor(
    readable: ReadableStream<Uint8Array>,
    writable: WritableStream<Uint8Array>,
    child?: Deno.ChildProcess,
    keepStdout = true,
  ) {
    this.#writer = writable.getWriter();
    this.#reader = readable.getReader();
    this.child = child;
    this.#keep = keepStdout;
    this.closed = this.#readLoop();
    this.closed.catch(() => {});
  }

  /**
   * Spawns `bin/codex-code-mode-host` over real pipes, stderr inherited... or captured.
   *
   * @param options arguments and environment
   * @returns the client
   */
  static spawn(options: SpawnOptions = {}): V1Client {
    const denoDir = Deno.execPath().replace(/\/[^/]+$/, "");
    const child = new Deno.Command(options.command ?? LAUNCHER, {
      args: options.args ?? [],
      clearEnv: true,
      env: { PATH: `${denoDir}:/usr/bin:/bin`, HOME: Deno.env.get("HOME") ?? "/tmp", ...options.env },
      cwd: options.cwd ?? "/",
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const client = new V1Client(child.stdout, child.stdin, child, options.keepStdout ?? true);
    client.stderr = (async () => {
      const chunks: string[] = [];
      const decoder = new TextDecoder();
      for await (const chunk of child.stderr) chunks.push(decoder.decode(chunk, { stream: true }));
      return chunks.join("");
    })();
    return client;
  }

  /** The child's stderr, once it ended (spawned clients only). */
  stderr: Promise<string> = Promise.resolve("");

  /** Every byte read from stdout so far. */
  stdoutBytes(): Uint8Array {
    const out = new Uint8Array(this.#stdoutBytes);
    let at = 0;
    for (const c of this.#stdout) {
      out.set(c, at);
      at += c.length;
    }
    return out;
  }

  async #read(buffer: { chunks: Uint8Array[]; size: number }, n: number): Promise<Uint8Array | undefined> {
    while (buffer.size < n) {
      if (this.#paused) await this.#paused.promise;
      const { value, done } = await this.#reader.read();
      if (done) {
        if (buffer.size === 0) return undefined;
        throw new Error(`host stdout ended inside a frame (${buffer.size} of ${n} bytes)`);
      }
      if (this.#keep) this.#stdout.push(value);
      this.#stdoutBytes += this.#keep ? value.length : 0;
      buffer.chunks.push(value);
      buffer.size += value.length;
    }
    const all = buffer.chunks.length === 1 ? buffer.chunks[0] : concat(buffer.chunks, buffer.size);
    const head = all.subarray(0, n);
    const rest = all.subarray(n);
    buffer.chunks = rest.length ? [rest] : [];
    buffer.size = rest.length;
    return head;
  }

  async #readLoop(): Promise<void> {
    const buffer = { chunks: [] as Uint8Array[], size: 0 };
    for (;;) {
      const prefix = await this.#read(buffer, 4);
      if (!prefix) break;
      const n = new DataView(prefix.buffer, prefix.byteOffset, 4).getUint32(0, true);
      const payload = n === 0 ? new Uint8Array() : await this.#read(buffer, n);
      if (!payload) throw new Error("host stdout ended inside a frame");
      const text = new TextDecoder("utf-8", { fatal: true }).decode(payload);
      this.raw.push(text);
      this.#dispatch(JSON.parse(text));
    }
    for (const p of [...this.#responses.values(), ...this.#initials.values()]) {
      p.reject(new Error("host stdout ended"));
    }
    this.#hello.reject(new Error("host stdout ended"));
    this.#hello.promise.catch(() => {});
  }

  #dispatch(message: Json): void {
    this.received.push(message);
    switch (message.type) {
      case "connection/ready":
      case "connection/rejected":
        this.#hello.resolve(message);
        break;
      case "operation/response":
        this.#responses.get(message.id)?.resolve(message.result);
        this.#responses.delete(message.id);
        break;
      case "execute/initialResponse":
        this.#initials.get(message.id)?.resolve(message.result);
        this.#initials.delete(message.id);
        break;
      case "delegate/request":
        void Promise.resolve(this.onDelegate(message)).then((result) => {
          if (result !== undefined) return this.send({ type: "delegate/response", id: message.id, result });
        }).catch(() => {});
        break;
    }
    for (const w of this.#watchers.slice()) {
      if (w.predicate(message)) {
        this.#watchers.splice(this.#watchers.indexOf(w), 1);
        w.resolve(message);
      }
    }
  }

  /**
   * Resolves with the first message (already received or later) matching `predicate`.
   *
   * @param predicate which message
   * @returns the message
   */
  waitFor(predicate: (m: Json) => boolean): Promise<Json> {
    const seen = this.received.find(predicate);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => this.#watchers.push({ predicate, resolve }));
  }

  /** Writes one message. */
  async send(message: unknown): Promise<void> {
    await this.#writer.write(frame(message));
  }

  /** Writes raw bytes. */
  async sendRaw(bytes: Uint8Array): Promise<void> {
    await this.#writer.write(bytes);
  }

  /**
   * Sends `connection/hello` and resolves with `connection/ready` or `connection/rejected`.
   *
   * @param options the hello's fields (default version 1, Codex's five capabilities optional)
   * @returns the host's answer
   */
  async hello(options: {
    supportedVersions?: number[];
    requiredCapabilities?: string[];
    optionalCapabilities?: string[];
  } = {}): Promise<Json> {
    await this.send({
      type: "connection/hello",
      supportedVersions: options.supportedVersions ?? [1],
      requiredCapabilities: options.requiredCapabilities ?? [],
      optionalCapabilities: options.optionalCapabilities ?? CODEX_CAPABILITIES,
    });
    return await this.#hello.promise;
  }

  /** Allocates a request id. */
  nextId(): number {
    return this.#nextId++;
  }

  /**
   * Sends an `operation/request` and resolves with its `operation/response` result.
   *
   * @param request the request object (with `method`)
   * @param id the id (default the next one)
   * @returns the result
   */
  request(request: Json, id: number = this.nextId()): Promise<Json> {
    const response = Promise.withResolvers<Json>();
    // Left unawaited, a request the host never answers (it ended) is no unhandled rejection.
    response.promise.catch(() => {});
    this.#responses.set(id, response);
    void this.send({ type: "operation/request", id, request }).catch(response.reject);
    return response.promise;
  }

  /**
   * `session/open`.
   *
   * @param sessionId the session
   * @param cellExecutionLimits `{maxYieldTimeMs?, maxHeapSizeBytes?}`, sent when given
   * @param outputTruncation `client` or `server` (Codex sends `server`), sent when given
   * @returns the result
   */
  open(sessionId: string, cellExecutionLimits?: Json, outputTruncation?: string): Promise<Json> {
    const request: Json = { method: "session/open", sessionId };
    if (cellExecutionLimits !== undefined) request.cellExecutionLimits = cellExecutionLimits;
    if (outputTruncation !== undefined) request.outputTruncation = outputTruncation;
    return this.request(request);
  }

  /**
   * `session/execute`.
   *
   * @param sessionId the session
   * @param source the cell's source
   * @param options other fields of the inner request
   * @returns the execution
   */
  execute(sessionId: string, source: string, options: Json = {}): Execution {
    const id = this.nextId();
    const initial = Promise.withResolvers<Json>();
    initial.promise.catch(() => {});
    this.#initials.set(id, initial);
    // Codex's key order; `catalog_revision` only when given.
    const request: Json = options.catalog_revision === undefined
      ? {}
      : { catalog_revision: options.catalog_revision };
    Object.assign(request, {
      tool_call_id: options.tool_call_id ?? `call-${id}`,
      enabled_tools: options.enabled_tools ?? [],
      source,
      yield_time_ms: options.yield_time_ms ?? null,
      max_output_tokens: options.max_output_tokens ?? null,
    });
    const started = this.request({ method: "session/execute", sessionId, request }, id);
    // A refused execute gets no initial response: settle it with the refusal.
    void started.then((result) => {
      if (result.status !== "ok" && this.#initials.get(id) === initial) {
        this.#initials.delete(id);
        initial.resolve(result);
      }
    }, () => {});
    return { id, started, initial: initial.promise };
  }

  /** Runs a cell to its initial response; throws when it was not started. */
  async run(sessionId: string, source: string, options: Json = {}): Promise<Json> {
    const e = this.execute(sessionId, source, options);
    const started = await e.started;
    if (started.status !== "ok") throw new Error(`execute failed: ${started.message}`);
    return await e.initial;
  }

  /**
   * `session/wait`.
   *
   * @param sessionId the session
   * @param cellId the cell
   * @param yieldTimeMs its yield time (default 0)
   * @param id the request id (default the next one)
   * @param maxOutputTokens the wait call's `max_tokens`, sent as Codex sends it (outside `request`)
   * @returns the result
   */
  wait(
    sessionId: string,
    cellId: string,
    yieldTimeMs = 0,
    id?: number,
    maxOutputTokens?: number,
  ): Promise<Json> {
    const request: Json = {
      method: "session/wait",
      sessionId,
      request: { cell_id: cellId, yield_time_ms: yieldTimeMs },
    };
    if (maxOutputTokens !== undefined) request.maxOutputTokens = maxOutputTokens;
    return this.request(request, id);
  }

  /** `session/terminate` (with the wait call's `max_tokens` as `maxOutputTokens` when given). */
  terminate(sessionId: string, cellId: string, maxOutputTokens?: number): Promise<Json> {
    const request: Json = { method: "session/terminate", sessionId, cellId };
    if (maxOutputTokens !== undefined) request.maxOutputTokens = maxOutputTokens;
    return this.request(request);
  }

  /** `session/shutdown`. */
  shutdown(sessionId: string): Promise<Json> {
    return this.request({ method: "session/shutdown", sessionId });
  }

  /** Stops reading the host's stdout. */
  pause(): void {
    this.#paused ??= Promise.withResolvers<void>();
  }

  /** Reads the host's stdout again. */
  resume(): void {
    this.#paused?.resolve();
    this.#paused = undefined;
  }

  /** Closes the host's stdin (EOF). */
  async end(): Promise<void> {
    await this.#writer.close().catch(() => {});
  }

  /** Closes stdin and resolves with the exit status once stdout ended (spawned clients only). */
  async finish(): Promise<Deno.CommandStatus> {
    await this.end();
    await this.closed.catch(() => {});
    return await this.child!.status;
  }

  /** Kills the child if it still runs, and waits for it (for `finally`). */
  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.child) return;
    await this.end();
    this.resume();
    const timer = setTimeout(() => {
      try {
        this.child!.kill("SIGKILL");
      } catch { /* gone */ }
    }, 10_000);
    await this.child.status;
    clearTimeout(timer);
    await this.closed.catch(() => {});
    await this.stderr;
  }
}

function concat(chunks: Uint8Array[], size: number): Uint8Array {
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/**
 * A message with its timings zeroed (`code_mode_host_duration_ns`, `result_buffered_for_ns`), for
 * comparisons.
 *
 * @param message a decoded message
 * @returns a copy
 */
export function untimed(message: Json): Json {
  return JSON.parse(
    JSON.stringify(message).replace(/"(code_mode_host_duration_ns|result_buffered_for_ns)":\d+/g, '"$1":0'),
  );
}

/** The texts of a runtime response's content items. */
export function texts(response: Json): string[] {
  const inner = Object.values(response as Record<string, Json>)[0];
  return (inner.content_items as Json[]).filter((i) => i.type === "input_text").map((i) => i.text);
}

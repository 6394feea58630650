/**
 * The transport-neutral driver of the conformance suite: one scenario drives a session over gRPC
 * (stdio or TCP) or JSON V1 through the same calls, and every answer keeps its wire form for the
 * observation. Folder-private.
 *
 * - Sessions open the way Codex 0.171 opens them: gRPC `OpenSession{output_truncation: SERVER,
 *   max_pending_delegate_calls: 4096}` then one unfiltered `SubscribeToToolCalls` (its response
 *   headers awaited, so tool calls never race it); V1 `session/open{outputTruncation: "server"}` after
 *   a hello offering Codex's five capabilities. {@link SessionOptions} changes that per scenario.
 * - Like Codex, the driver sends what needs a capability only to a host that has it: V1
 *   `outputTruncation` and a wait's `maxOutputTokens` with `bounded-output-v1`, a catalog revision
 *   with `tool-catalog-revision-v1` (V1) or `supports_catalog_revision` (gRPC); without it, each cell
 *   carries its revision's whole tool list.
 * - Notifications are acknowledged as Codex does (V1: `notification/delivered`; gRPC: nothing).
 * - Tool calls queue until the scenario takes them ({@link Session.toolCall}) and answers.
 * - {@link Session.close} closes the session (gRPC `CloseSession`, V1 `session/shutdown`) and waits
 *   until its event streams ended, so the session's logs are complete and in order.
 *
 * @module
 */
import type { HostProcess, Transport } from "./_hosts.ts";
import type { Json, V1Connection } from "./_v1.ts";
import type { UnaryResult, WireClient, WireStream } from "./_wire.ts";

/** The five capabilities Codex 0.171 offers in its V1 hello (all optional). */
export const CODEX_CAPABILITIES = [
  "bounded-output-v1",
  "delegate-capacity-4096",
  "session-cell-execution-resource-limits",
  "tool-catalog-revision-v1",
  "yield-observation",
];

/** How a session is opened. */
export interface SessionOptions {
  /** Output truncation asked for: `server` (Codex 0.171's default), `client`, or `none` (not sent). */
  truncation?: "server" | "client" | "none";
  /** `cell_execution_limits.max_yield_time_ms`. */
  maxYieldTimeMs?: number;
  /** `cell_execution_limits.max_heap_size_bytes`. */
  maxHeapSizeBytes?: number;
  /** gRPC: subscribe to tool calls at open (default true, as Codex). */
  subscribe?: boolean;
  /** V1: the session ID (default `session-<UUID>`). */
  sessionId?: string;
}

/** A tool a cell may call. */
export interface ToolSpec {
  /** The JS-facing name. */
  name: string;
  /** The routing name (default `name`). */
  toolName?: string;
  /** The namespace (default absent / null). */
  namespace?: string | null;
  /** Default `function`. */
  kind?: "function" | "freeform";
  description?: string;
  inputSchema?: Json;
}

/** How a cell is started. */
export interface ExecOptions {
  toolCallId?: string;
  tools?: ToolSpec[];
  /** Default 20,000 ms; `null` leaves it out. */
  yieldTimeMs?: number | null;
  /** Default left out. */
  maxOutputTokens?: number | null;
  /** Sent only when given (Codex 0.171 sends 1). */
  catalogRevision?: number;
}

/** How a cell is observed. */
export interface WaitOptions {
  /** Default 20,000 ms. */
  yieldTimeMs?: number;
  /** The wait call's `max_tokens` (gRPC `WaitRequest` field 5, V1 `maxOutputTokens`); default absent. */
  maxTokens?: number;
}

/** A content item, transport-neutral. */
export type Item = { text: string } | { image: string; detail?: string } | { audio: string } | {
  other: Json;
};

/** What an Execute, Wait or Terminate gave, transport-neutral, with its wire form. */
export interface Outcome {
  /** `error` when the call failed (a gRPC status or a V1 error result). */
  kind: "yielded" | "terminated" | "completed" | "error" | "none";
  cell?: string;
  /** Wait/Terminate: whether the cell was missing. */
  missing?: boolean;
  items: Item[];
  /** `completed`: the error text, null when none. */
  error?: string | null;
  /** `error`: the status code name (gRPC) and message. */
  code?: string;
  message?: string;
  /** The answer as it was on the wire. */
  wire: Json;
}

/** An Execute in flight. */
export interface Exec {
  /** The started answer (`cell` set) or the failure. */
  started: Promise<Outcome>;
  /** The initial observation. */
  outcome: Promise<Outcome>;
  /** Ends the current observation now (gRPC `YieldObservation{execution_id}`, V1 `operation/yield`). */
  yieldNow(): Promise<Json>;
  /** Abandons the Execute (gRPC: cancels the stream; V1: `operation/cancel`). */
  cancel(): Promise<void>;
}

/** A Wait in flight. */
export interface Observation {
  result: Promise<Outcome>;
  /** gRPC `YieldObservation{wait_id}`, V1 `operation/yield`. */
  yieldNow(): Promise<Json>;
  /** gRPC `CancelWait` (its own answer is returned), V1 `operation/cancel`. */
  cancel(): Promise<Json>;
}

/** A tool call made by a cell. */
export interface ToolCall {
  cell: string;
  runtimeId: string;
  name: string;
  namespace?: string | null;
  kind: string;
  input: Json;
  wire: Json;
  /** Answers with a result value. */
  succeed(value: Json): Promise<Json>;
  /** Answers with a failure message. */
  fail(message: string): Promise<Json>;
}

/** A session, transport-neutral. */
export interface Session {
  readonly transport: Transport;
  /** The session's ID as the host or client knows it. */
  readonly id: string;
  /** The opening answer on the wire. */
  readonly opened: Json;
  exec(source: string, options?: ExecOptions): Exec;
  wait(cellId: string, options?: WaitOptions): Observation;
  terminate(cellId: string): Promise<Outcome>;
  /** The next tool call not yet taken (in arrival order). */
  toolCall(): Promise<ToolCall>;
  /** The same, or undefined once `until` settles first (the waiter is then withdrawn). */
  toolCallUntil(until: Promise<unknown>): Promise<ToolCall | undefined>;
  /** Resolves when the host reported the cell closed (gRPC `CellClosed`, V1 `cell/closed`). */
  cellClosed(cellId: string): Promise<void>;
  /** Notifications received so far: text, cell and call ID. */
  readonly notifications: Notifications;
  /** Closes the session and waits until its streams ended; resolves with the answer. */
  close(): Promise<Json>;
  /** The session's event log(s), complete after {@link close}. */
  log(): Json;
}

/** Reads a gRPC `ExecutionOutcome` (or a V1 runtime response) into an {@link Outcome}. */
function grpcItems(outcome: Json): Item[] {
  return (outcome?.content_items ?? []).map((c: Json): Item =>
    c.text
      ? { text: c.text.text ?? "" }
      : c.image
      ? { image: c.image.image_url ?? "", detail: c.image.detail }
      : c.audio
      ? { audio: c.audio.audio_url ?? "" }
      : { other: c }
  );
}

function grpcOutcome(outcome: Json, wire: Json, missing?: boolean): Outcome {
  const kind = outcome?.yielded
    ? "yielded"
    : outcome?.terminated
    ? "terminated"
    : outcome?.completed
    ? "completed"
    : "none";
  return {
    kind,
    cell: outcome?.cell_id ?? "",
    ...(missing === undefined ? {} : { missing }),
    items: grpcItems(outcome),
    ...(kind === "completed" ? { error: outcome.completed.error_text ?? null } : {}),
    wire,
  };
}

function grpcFailure(status: { code: string; details: string }, wire: Json): Outcome {
  return { kind: "error", code: status.code, message: status.details, items: [], wire };
}

function v1Items(response: Json): Item[] {
  return (response?.content_items ?? []).map((c: Json): Item =>
    c.type === "input_text"
      ? { text: c.text }
      : c.type === "input_image"
      ? { image: c.image_url, detail: c.detail }
      : c.type === "input_audio"
      ? { audio: c.audio_url }
      : { other: c }
  );
}

function v1Outcome(runtime: Json, wire: Json, missing?: boolean): Outcome {
  const tag = runtime && typeof runtime === "object" ? Object.keys(runtime)[0] : undefined;
  const body = tag ? runtime[tag] : undefined;
  const kind = tag === "Yielded"
    ? "yielded"
    : tag === "Terminated"
    ? "terminated"
    : tag === "Result"
    ? "completed"
    : "none";
  return {
    kind,
    cell: body?.cell_id,
    ...(missing === undefined ? {} : { missing }),
    items: v1Items(body),
    ...(kind === "completed" ? { error: body.error_text ?? null } : {}),
    wire,
  };
}

function v1Result(result: Json, wire: Json): Outcome {
  if (result === undefined) {
    const none = "<no answer: host output ended>";
    return { kind: "error", message: none, items: [], wire: wire ?? none };
  }
  if (result.status !== "ok") return { kind: "error", message: result.message, items: [], wire };
  const value = result.value;
  if (value?.type === "wait/completed") {
    const o = value.outcome ?? {};
    return "MissingCell" in o ? v1Outcome(o.MissingCell, wire, true) : v1Outcome(o.LiveCell, wire, false);
  }
  return v1Outcome(value, wire);
}

function unaryWire(r: UnaryResult): Json {
  return {
    status: r.status,
    ...(Object.keys(r.headers).length ? { headers: r.headers } : {}),
    ...(Object.keys(r.trailers).length ? { trailers: r.trailers } : {}),
    ...(r.response !== undefined ? { response: r.response } : {}),
  };
}

function grpcTools(tools: ToolSpec[] = []): Json[] {
  return tools.map((t) => ({
    name: t.name,
    tool_name: {
      name: t.toolName ?? t.name,
      ...(t.namespace === undefined || t.namespace === null ? {} : { namespace: t.namespace }),
    },
    description: t.description ?? "",
    kind: t.kind === "freeform" ? "TOOL_KIND_FREEFORM" : "TOOL_KIND_FUNCTION",
    ...(t.inputSchema === undefined ? {} : { input_schema_json: JSON.stringify(t.inputSchema) }),
  }));
}

function v1Tools(tools: ToolSpec[] = []): Json[] {
  return tools.map((t) => ({
    name: t.name,
    tool_name: { name: t.toolName ?? t.name, namespace: t.namespace ?? null },
    description: t.description ?? "",
    kind: t.kind ?? "function",
    input_schema: t.inputSchema ?? null,
    output_schema: null,
  }));
}

/** Notifications received, with waiters. */
export class Notifications extends Array<{ text: string; cell: string; callId: string }> {
  #waiters: { text: string; resolve: () => void }[] = [];
  add(n: { text: string; cell: string; callId: string }): void {
    this.push(n);
    for (const w of this.#waiters.slice()) {
      if (w.text === n.text) {
        this.#waiters.splice(this.#waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  }
  /** Resolves once a notification with this text has arrived. */
  arrived(text: string): Promise<void> {
    if (this.some((n) => n.text === text)) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ text, resolve }));
  }
}

/**
 * The tools to send for a cell, as Codex 0.171 does: with a catalog revision the host supports, the
 * tools as given (empty after the revision's first cell); without that support, no revision and the
 * revision's whole tool list again.
 */
class Catalogs {
  #byRevision = new Map<number, ToolSpec[]>();
  resolve(options: ExecOptions, supported: boolean): { tools: ToolSpec[]; revision?: number } {
    const tools = options.tools ?? [];
    const revision = options.catalogRevision;
    if (revision === undefined) return { tools };
    if (tools.length) this.#byRevision.set(revision, tools);
    if (supported) return { tools, revision };
    return { tools: tools.length ? tools : this.#byRevision.get(revision) ?? [] };
  }
}

/** A queue of tool calls with waiters. */
class CallQueue {
  #items: ToolCall[] = [];
  #waiters: ((c: ToolCall) => void)[] = [];
  push(call: ToolCall): void {
    const w = this.#waiters.shift();
    if (w) w(call);
    else this.#items.push(call);
  }
  take(until?: Promise<unknown>): Promise<ToolCall | undefined> {
    const c = this.#items.shift();
    if (c) return Promise.resolve(c);
    return new Promise((resolve) => {
      const waiter = (call: ToolCall) => resolve(call);
      this.#waiters.push(waiter);
      void until?.then(() => {
        const at = this.#waiters.indexOf(waiter);
        if (at >= 0) {
          this.#waiters.splice(at, 1);
          resolve(undefined);
        }
      });
    });
  }
}

/** A gRPC session (stdio or TCP). */
class GrpcSession implements Session {
  readonly transport: Transport;
  readonly id: string;
  readonly opened: Json;
  readonly notifications = new Notifications();
  readonly #client: WireClient;
  readonly #lease: WireStream;
  readonly #subscription?: WireStream;
  readonly #calls = new CallQueue();
  readonly #catalogs = new Catalogs();
  #closeAnswer?: Json;
  #nextCall = 1;
  #leaseStatus?: Json;
  #subscriptionStatus?: Json;
  #leaseHeaders: Json;
  #subscriptionHeaders?: Json;

  constructor(
    transport: Transport,
    client: WireClient,
    lease: WireStream,
    opened: Json,
    leaseHeaders: Json,
    subscription?: WireStream,
    subscriptionHeaders?: Json,
  ) {
    this.transport = transport;
    this.#client = client;
    this.#lease = lease;
    this.opened = opened;
    this.id = opened?.opened?.session_id ?? "";
    this.#leaseHeaders = leaseHeaders;
    this.#subscription = subscription;
    this.#subscriptionHeaders = subscriptionHeaders;
    void this.#watchLease();
    if (subscription) void this.#watchCalls(subscription);
  }

  static async open(transport: Transport, client: WireClient, options: SessionOptions): Promise<GrpcSession> {
    const request: Json = { max_pending_delegate_calls: 4096 };
    const truncation = options.truncation ?? "server";
    if (truncation !== "none") {
      request.output_truncation = truncation === "server"
        ? "OUTPUT_TRUNCATION_MODE_SERVER"
        : "OUTPUT_TRUNCATION_MODE_CLIENT";
    }
    if (options.maxYieldTimeMs !== undefined || options.maxHeapSizeBytes !== undefined) {
      request.cell_execution_limits = {
        ...(options.maxYieldTimeMs === undefined ? {} : { max_yield_time_ms: options.maxYieldTimeMs }),
        ...(options.maxHeapSizeBytes === undefined ? {} : { max_heap_size_bytes: options.maxHeapSizeBytes }),
      };
    }
    const lease = client.stream("OpenSession", request);
    const opened = await lease.next();
    const headers = await lease.headers;
    if (!opened?.opened) {
      const status = await lease.status;
      throw new OpenFailure({ status: { code: status.code, details: status.details }, first: opened });
    }
    let subscription: WireStream | undefined;
    let subscriptionHeaders: Json;
    if (options.subscribe ?? true) {
      subscription = client.stream("SubscribeToToolCalls", { session_id: opened.opened.session_id });
      subscriptionHeaders = await subscription.headers;
    }
    return new GrpcSession(transport, client, lease, opened, headers, subscription, subscriptionHeaders);
  }

  async #watchLease(): Promise<void> {
    for (let i = 1;; i++) {
      const event = await this.#lease.next(() => true, i);
      if (!event) break;
      if (event.notification) {
        this.notifications.add({
          text: event.notification.text ?? "",
          cell: event.notification.cell_id ?? "",
          callId: event.notification.call_id ?? "",
        });
      }
    }
  }

  async #watchCalls(subscription: WireStream): Promise<void> {
    for (let i = 0;; i++) {
      const call = await subscription.next(() => true, i);
      if (!call) break;
      const complete = async (outcome: Json) =>
        unaryWire(
          await this.#client.unary("CompleteToolCall", {
            session_id: this.id,
            invocation_id: call.invocation_id,
            ...outcome,
          }),
        );
      let input: Json;
      try {
        input = call.input_json === undefined ? undefined : JSON.parse(call.input_json);
      } catch {
        input = call.input_json;
      }
      this.#calls.push({
        cell: call.cell_id,
        runtimeId: call.runtime_tool_call_id,
        name: call.tool_name?.name,
        namespace: call.tool_name?.namespace,
        kind: call.tool_kind,
        input,
        wire: call,
        succeed: (value) =>
          complete({ succeeded: { output_json: value === undefined ? "null" : JSON.stringify(value) } }),
        fail: (message) => complete({ failed: { message } }),
      });
    }
  }

  exec(source: string, options: ExecOptions = {}): Exec {
    const executionId = crypto.randomUUID();
    const catalog = this.#catalogs.resolve(options, this.opened?.opened?.supports_catalog_revision === true);
    const request: Json = {
      session_id: this.id,
      execution_id: executionId,
      tool_call_id: options.toolCallId ?? `call-${this.#nextCall++}`,
      source,
      enabled_tools: grpcTools(catalog.tools),
    };
    const yieldTime = options.yieldTimeMs === undefined ? 20_000 : options.yieldTimeMs;
    if (yieldTime !== null) request.yield_time_ms = yieldTime;
    if (options.maxOutputTokens !== undefined && options.maxOutputTokens !== null) {
      request.max_output_tokens = options.maxOutputTokens;
    }
    if (catalog.revision !== undefined) request.catalog_revision = catalog.revision;
    const stream = this.#client.stream("Execute", request);
    const wire = async () => {
      const status = await stream.status;
      return {
        events: stream.messages,
        status: { code: status.code, details: status.details },
        ...(Object.keys(status.trailers).length ? { trailers: status.trailers } : {}),
      };
    };
    const started = (async (): Promise<Outcome> => {
      const first = await stream.next((m) => m.started !== undefined);
      if (first) return { kind: "none", cell: first.started.cell_id, items: [], wire: first };
      const status = await stream.status;
      return grpcFailure(status, await wire());
    })();
    const outcome = (async (): Promise<Outcome> => {
      const last = await stream.next((m) => m.outcome !== undefined);
      const w = await wire();
      if (last) {
        const o = grpcOutcome(last.outcome, w);
        return w.status.code === "OK" ? o : { ...o, code: w.status.code, message: w.status.details };
      }
      return grpcFailure(w.status, w);
    })();
    return {
      started,
      outcome,
      yieldNow: async () =>
        unaryWire(
          await this.#client.unary("YieldObservation", { session_id: this.id, execution_id: executionId }),
        ),
      cancel: () => {
        stream.cancel();
        return Promise.resolve();
      },
    };
  }

  wait(cellId: string, options: WaitOptions = {}): Observation {
    const waitId = crypto.randomUUID();
    const request: Json = {
      session_id: this.id,
      cell_id: cellId,
      wait_id: waitId,
      yield_time_ms: options.yieldTimeMs ?? 20_000,
    };
    if (options.maxTokens !== undefined) request.max_tokens = options.maxTokens;
    const result = this.#client.unary("Wait", request).then((r) => {
      const wire = unaryWire(r);
      if (r.status.code !== "OK") return grpcFailure(r.status, wire);
      const response = r.response ?? {};
      return response.missing_cell
        ? grpcOutcome(response.missing_cell, wire, true)
        : grpcOutcome(response.live_cell, wire, false);
    });
    return {
      result,
      yieldNow: async () =>
        unaryWire(await this.#client.unary("YieldObservation", { session_id: this.id, wait_id: waitId })),
      cancel: async () =>
        unaryWire(await this.#client.unary("CancelWait", { session_id: this.id, wait_id: waitId })),
    };
  }

  async terminate(cellId: string): Promise<Outcome> {
    const r = await this.#client.unary("Terminate", { session_id: this.id, cell_id: cellId });
    const wire = unaryWire(r);
    if (r.status.code !== "OK") return grpcFailure(r.status, wire);
    const response = r.response ?? {};
    return response.missing_cell
      ? grpcOutcome(response.missing_cell, wire, true)
      : grpcOutcome(response.live_cell, wire, false);
  }

  toolCall(): Promise<ToolCall> {
    return this.#calls.take() as Promise<ToolCall>;
  }

  toolCallUntil(until: Promise<unknown>): Promise<ToolCall | undefined> {
    return this.#calls.take(until);
  }

  async cellClosed(cellId: string): Promise<void> {
    await this.#lease.next((m) => m.cell_closed?.cell_id === cellId);
  }

  async close(): Promise<Json> {
    if (this.#closeAnswer) return this.#closeAnswer;
    const r = await this.#client.unary("CloseSession", { session_id: this.id });
    this.#closeAnswer = unaryWire(r);
    await this.ended();
    return this.#closeAnswer;
  }

  /** Waits until the lease and the subscription ended (after a close or a crash). */
  async ended(): Promise<void> {
    const lease = await this.#lease.status;
    this.#leaseStatus = { code: lease.code, details: lease.details };
    if (this.#subscription) {
      const sub = await this.#subscription.status;
      this.#subscriptionStatus = { code: sub.code, details: sub.details };
    }
  }

  /** The lease stream, for scenarios about it. */
  get lease(): WireStream {
    return this.#lease;
  }

  /** The subscription stream, if any. */
  get subscription(): WireStream | undefined {
    return this.#subscription;
  }

  log(): Json {
    return {
      lease: {
        ...(Object.keys(this.#leaseHeaders ?? {}).length ? { headers: this.#leaseHeaders } : {}),
        events: this.#lease.messages.filter((m) => m.opened === undefined),
        ...(this.#leaseStatus ? { status: this.#leaseStatus } : {}),
      },
      ...(this.#subscription
        ? {
          tool_calls: {
            ...(Object.keys(this.#subscriptionHeaders ?? {}).length
              ? { headers: this.#subscriptionHeaders }
              : {}),
            calls: this.#subscription.messages,
            ...(this.#subscriptionStatus ? { status: this.#subscriptionStatus } : {}),
          },
        }
        : {}),
    };
  }
}

/** Thrown when a session could not be opened; carries the wire answer. */
export class OpenFailure extends Error {
  constructor(readonly wire: Json) {
    super(`session did not open: ${JSON.stringify(wire)}`);
  }
}

/** A V1 connection shared by the sessions of one host, with the hello done once. */
export class V1Host {
  readonly conn: V1Connection;
  #hello?: Promise<Json>;
  /** Which session each delegate request id belongs to (for `delegate/cancel`, which carries none). */
  readonly delegateSession = new Map<number, string>();
  /** Which session each request id belongs to. */
  readonly requestSession = new Map<number, string>();

  constructor(conn: V1Connection) {
    this.conn = conn;
  }

  #granted = new Set<string>();

  /** Sends Codex's hello once; resolves with the answer. */
  hello(): Promise<Json> {
    this.#hello ??= (async () => {
      const answer = this.conn.next((m) => m.type === "connection/ready" || m.type === "connection/rejected");
      await this.conn.send({
        type: "connection/hello",
        supportedVersions: [1],
        requiredCapabilities: [],
        optionalCapabilities: CODEX_CAPABILITIES,
      });
      const ready = await answer;
      for (const c of ready?.capabilities ?? []) this.#granted.add(c);
      return ready;
    })();
    return this.#hello;
  }

  /** Whether the host granted a capability in its answer to the hello. */
  granted(capability: string): boolean {
    return this.#granted.has(capability);
  }

  /**
   * A fresh session ID: `session-<UUID>`, so that it never repeats on a connection that many
   * scenarios share and normalises to the same text on both hosts.
   */
  nextSessionId(): string {
    return `session-${crypto.randomUUID()}`;
  }
}

/** A V1 session. */
class V1Session implements Session {
  readonly transport: Transport = "v1";
  readonly id: string;
  readonly opened: Json;
  readonly notifications = new Notifications();
  readonly #host: V1Host;
  readonly #frames: Json[] = [];
  readonly #calls = new CallQueue();
  readonly #catalogs = new Catalogs();
  #nextCall = 1;
  #closeAnswer?: Json;

  constructor(host: V1Host, id: string, opened: Json) {
    this.#host = host;
    this.id = id;
    this.opened = opened;
  }

  static async open(host: V1Host, options: SessionOptions): Promise<V1Session> {
    await host.hello();
    const id = options.sessionId ?? host.nextSessionId();
    const request: Json = { method: "session/open", sessionId: id };
    if (options.maxYieldTimeMs !== undefined || options.maxHeapSizeBytes !== undefined) {
      // camelCase inside cellExecutionLimits too: the reference refuses `max_yield_time_ms` there.
      request.cellExecutionLimits = {
        ...(options.maxYieldTimeMs === undefined ? {} : { maxYieldTimeMs: options.maxYieldTimeMs }),
        ...(options.maxHeapSizeBytes === undefined ? {} : { maxHeapSizeBytes: options.maxHeapSizeBytes }),
      };
    }
    // Codex asks for an output mode only when the host granted bounded output.
    const truncation = options.truncation ?? "server";
    if (truncation !== "none" && host.granted("bounded-output-v1")) request.outputTruncation = truncation;
    const requestId = host.conn.nextId();
    const session = new V1Session(host, id, undefined);
    host.requestSession.set(requestId, id);
    session.#attach();
    const answer = await host.conn.request(request, requestId);
    (session as { opened: Json }).opened = answer;
    if (answer?.result?.status !== "ok") throw new OpenFailure(answer);
    return session;
  }

  #attach(): void {
    const conn = this.#host.conn;
    const previous = conn.onFrame;
    conn.onFrame = (m) => {
      previous(m);
      this.#onFrame(m);
    };
  }

  #mine(m: Json): boolean {
    if (m.sessionId !== undefined) return m.sessionId === this.id;
    if (m.type === "delegate/cancel") return this.#host.delegateSession.get(m.id) === this.id;
    if (m.type === "operation/response" || m.type === "execute/initialResponse") {
      return this.#host.requestSession.get(m.id) === this.id;
    }
    return false;
  }

  #onFrame(m: Json): void {
    if (!this.#mine(m)) return;
    this.#frames.push(m);
    if (m.type !== "delegate/request") return;
    this.#host.delegateSession.set(m.id, this.id);
    const request = m.request ?? {};
    if (request.type === "notification/send") {
      this.notifications.add({ text: request.text, cell: request.cellId, callId: request.callId });
      void this.#host.conn.send({
        type: "delegate/response",
        id: m.id,
        result: { status: "ok", value: { type: "notification/delivered" } },
      });
      return;
    }
    const inv = request.invocation ?? {};
    const respond = async (result: Json) => {
      const sent = { type: "delegate/response", id: m.id, result };
      await this.#host.conn.send(sent);
      return { sent: "delegate/response" };
    };
    this.#calls.push({
      cell: inv.cell_id,
      runtimeId: inv.runtime_tool_call_id,
      name: inv.tool_name?.name,
      namespace: inv.tool_name?.namespace,
      kind: inv.tool_kind,
      input: inv.input,
      wire: m,
      succeed: (value) => respond({ status: "ok", value: { type: "tool/result", result: value ?? null } }),
      fail: (message) => respond({ status: "error", message }),
    });
  }

  #request(request: Json, id = this.#host.conn.nextId()): Promise<Json | undefined> {
    this.#host.requestSession.set(id, this.id);
    return this.#host.conn.request(request, id);
  }

  exec(source: string, options: ExecOptions = {}): Exec {
    const conn = this.#host.conn;
    const id = conn.nextId();
    this.#host.requestSession.set(id, this.id);
    const yieldTime = options.yieldTimeMs === undefined ? 20_000 : options.yieldTimeMs;
    const catalog = this.#catalogs.resolve(options, this.#host.granted("tool-catalog-revision-v1"));
    const inner: Json = {
      ...(catalog.revision === undefined ? {} : { catalog_revision: catalog.revision }),
      tool_call_id: options.toolCallId ?? `call-${this.#nextCall++}`,
      enabled_tools: v1Tools(catalog.tools),
      source,
      yield_time_ms: yieldTime,
      max_output_tokens: options.maxOutputTokens ?? null,
    };
    const initial = conn.next((m) => m.type === "execute/initialResponse" && m.id === id);
    const response = conn.request({ method: "session/execute", sessionId: this.id, request: inner }, id);
    const started = response.then((r): Outcome => {
      if (r === undefined || r.result?.status !== "ok") return v1Result(r?.result, r);
      return { kind: "none", cell: r.result.value?.cellId, items: [], wire: r };
    });
    const outcome = (async (): Promise<Outcome> => {
      const first = await started;
      if (first.kind === "error") return first;
      const frame = await initial;
      return v1Result(frame?.result, frame);
    })();
    return {
      started,
      outcome,
      yieldNow: async () => {
        await conn.send({ type: "operation/yield", id });
        return { sent: "operation/yield" };
      },
      cancel: async () => {
        await conn.send({ type: "operation/cancel", id });
      },
    };
  }

  wait(cellId: string, options: WaitOptions = {}): Observation {
    const conn = this.#host.conn;
    const id = conn.nextId();
    const request: Json = {
      method: "session/wait",
      sessionId: this.id,
      request: { cell_id: cellId, yield_time_ms: options.yieldTimeMs ?? 20_000 },
    };
    // Codex sends the wait's token budget only to a host that granted bounded output.
    if (options.maxTokens !== undefined && this.#host.granted("bounded-output-v1")) {
      request.maxOutputTokens = options.maxTokens;
    }
    const result = this.#request(request, id).then((r) => v1Result(r?.result, r));
    return {
      result,
      yieldNow: async () => {
        await conn.send({ type: "operation/yield", id });
        return { sent: "operation/yield" };
      },
      cancel: async () => {
        await conn.send({ type: "operation/cancel", id });
        return { sent: "operation/cancel" };
      },
    };
  }

  async terminate(cellId: string): Promise<Outcome> {
    const r = await this.#request({ method: "session/terminate", sessionId: this.id, cellId });
    return v1Result(r?.result, r);
  }

  toolCall(): Promise<ToolCall> {
    return this.#calls.take() as Promise<ToolCall>;
  }

  toolCallUntil(until: Promise<unknown>): Promise<ToolCall | undefined> {
    return this.#calls.take(until);
  }

  async cellClosed(cellId: string): Promise<void> {
    await this.#host.conn.next((m) =>
      m.type === "cell/closed" && m.sessionId === this.id && m.cellId === cellId
    );
  }

  async close(): Promise<Json> {
    this.#closeAnswer ??= await this.#request({ method: "session/shutdown", sessionId: this.id });
    return this.#closeAnswer;
  }

  log(): Json {
    return { frames: this.#frames.filter((m) => m.result?.value?.type !== "session/ready") };
  }
}

/**
 * Opens a session on a host with Codex's defaults and the scenario's options.
 *
 * @param host the host process
 * @param v1 the shared V1 state of that host (V1 only)
 * @param options how to open it
 * @returns the session
 * @throws {OpenFailure} when the host refused
 */
export function openSession(
  host: HostProcess,
  v1: V1Host | undefined,
  options: SessionOptions = {},
): Promise<Session> {
  if (host.transport === "v1") return V1Session.open(v1!, options);
  return GrpcSession.open(host.transport, host.grpc!, options);
}

/** The gRPC-only parts of a session (lease, subscription), for transport-specific scenarios. */
export function grpcParts(
  session: Session,
): { lease: WireStream; subscription?: WireStream; ended(): Promise<void> } {
  if (!(session instanceof GrpcSession)) throw new Error("not a gRPC session");
  return { lease: session.lease, subscription: session.subscription, ended: () => session.ended() };
}

import assert from "node:assert/strict";
import type {
  CodeModeCore,
  ExecuteEvent,
  ExecuteRequest,
  ExecutionOutcome,
  LeaseEvent,
  ObservationResult,
  ToolCall,
} from "../../core/code_mode_core.ts";
import { HostError } from "../../core/errors.ts";
import type { Permits } from "../../core/permits.ts";
import { Logger } from "../../ops/log.ts";
import { type ConnectionEnd, DELEGATE_CAPACITY, MAX_IN_FLIGHT, V1Connection } from "./connection.ts";
import { encodeFrame, readFrames } from "./framing.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

const outcome = (kind: ExecutionOutcome["kind"], text?: string, cellId = "1"): ExecutionOutcome =>
  ({
    cellId,
    contentItems: text === undefined ? [] : [{ text: { text } }],
    hostDurationNs: 7,
    kind,
  }) as ExecutionOutcome;

/** A fake core: sessions with scripted lease events and tool calls; executes and waits the test drives. */
class FakeCore {
  sessions = new Map<string, { lease: Channel<LeaseEvent>; calls: Channel<ToolCall> }>();
  opened: Json[] = [];
  executed: ExecuteRequest[] = [];
  waited: Json[] = [];
  terminated: Json[] = [];
  completed: Json[] = [];
  acknowledged: Json[] = [];
  yielded: Json[] = [];
  /** What an execute does; by default `started` for cell 1 and a completion. */
  onExecute: (request: ExecuteRequest, signal: AbortSignal) => AsyncGenerator<ExecuteEvent> =
    async function* (r) {
      yield { type: "started", executionId: r.executionId, cellId: "1" };
      yield { type: "outcome", outcome: outcome("completed") };
    };
  onWait: (signal: AbortSignal) => Promise<ObservationResult> = (signal) =>
    new Promise((_, reject) =>
      signal.addEventListener("abort", () => reject(new HostError("cancelled", "x")))
    );
  onTerminate: () => Promise<ObservationResult> = () =>
    Promise.resolve({ state: "liveCell", outcome: outcome("terminated") });

  openSession(request: { sessionId: string }) {
    this.opened.push(request);
    if (this.sessions.has(request.sessionId)) {
      return Promise.reject(
        new HostError("session_exists", `code-mode session ID \`${request.sessionId}\` is already open`),
      );
    }
    const session = { lease: new Channel<LeaseEvent>(), calls: new Channel<ToolCall>() };
    this.sessions.set(request.sessionId, session);
    return Promise.resolve({
      sessionId: request.sessionId,
      outputMode: "client",
      get backlog() {
        return session.lease.size;
      },
      events: () => session.lease.iterate(),
    });
  }
  subscribeToToolCalls(request: { sessionId: string }) {
    const session = this.sessions.get(request.sessionId)!;
    return { calls: () => session.calls.iterate(), close() {}, [Symbol.dispose]() {} };
  }
  closeSession(sessionId: string) {
    const session = this.sessions.get(sessionId);
    if (!session) {
      return Promise.reject(new HostError("unknown_session", `unknown code-mode session ${sessionId}`));
    }
    session.lease.end();
    session.calls.end();
    return Promise.resolve();
  }
  execute(request: ExecuteRequest, options: { signal: AbortSignal }) {
    this.executed.push(request);
    return this.onExecute(request, options.signal);
  }
  wait(request: Json, options: { signal: AbortSignal }) {
    this.waited.push(request);
    return this.onWait(options.signal);
  }
  terminate(request: Json) {
    this.terminated.push(request);
    return this.onTerminate();
  }
  yieldObservation(request: Json) {
    this.yielded.push(request);
  }
  completeToolCall(request: Json) {
    this.completed.push(request);
  }
  acknowledgeNotification(request: Json) {
    this.acknowledged.push(request);
  }
}

class Channel<T> {
  #items: T[] = [];
  #wake: (() => void) | undefined;
  #ended = false;
  get size() {
    return this.#items.length;
  }
  push(item: T) {
    this.#items.push(item);
    this.#wake?.();
  }
  end() {
    this.#ended = true;
    this.#wake?.();
  }
  async *iterate(): AsyncGenerator<T> {
    for (;;) {
      while (this.#items.length) yield this.#items.shift()!;
      if (this.#ended) return;
      await new Promise<void>((r) => this.#wake = r);
    }
  }
}

/** A connection over in-memory pipes, with a client side that records every message and log line. */
function connect(
  core = new FakeCore(),
  options: { queueFrames?: number; maxFrameBytes?: number; slowReader?: boolean } = {},
) {
  const { slowReader, ...connectionOptions } = options;
  const toHost = new TransformStream<Uint8Array, Uint8Array>();
  const fromHost = new TransformStream<Uint8Array, Uint8Array>();
  const logs: Json[] = [];
  const log = new Logger("warn", (line) => logs.push(JSON.parse(line)));
  const connection = new V1Connection({
    core: core as unknown as CodeModeCore,
    log,
    readable: toHost.readable,
    writable: fromHost.writable,
    ...connectionOptions,
  });
  const ended: Promise<ConnectionEnd> = connection.run();
  const writer = toHost.writable.getWriter();
  const received: Json[] = [];
  const raw: string[] = [];
  const watchers: [(m: Json) => boolean, (m: Json) => void][] = [];
  let reading = true;
  let resume: (() => void) | undefined;
  const read = (async () => {
    for await (const f of readFrames(fromHost.readable)) {
      while (!reading) await new Promise<void>((r) => resume = r);
      // A slow reader takes one frame per event-loop turn.
      if (slowReader) await new Promise((r) => setTimeout(r, 0));
      const text = new TextDecoder().decode(f);
      raw.push(text);
      const m = JSON.parse(text);
      received.push(m);
      for (const w of watchers.slice()) if (w[0](m)) watchers.splice(watchers.indexOf(w), 1), w[1](m);
    }
  })();
  return {
    core,
    connection,
    ended,
    received,
    raw,
    logs,
    read,
    send: (m: unknown) => writer.write(encodeFrame(m)),
    text: (t: string) => {
      const json = new TextEncoder().encode(t);
      const frame = new Uint8Array(4 + json.length);
      new DataView(frame.buffer).setUint32(0, json.length, true);
      frame.set(json, 4);
      return writer.write(frame);
    },
    bytes: (b: Uint8Array) => writer.write(b),
    end: () => writer.close(),
    pause: () => reading = false,
    resume: () => {
      reading = true;
      resume?.();
    },
    next: (predicate: (m: Json) => boolean) =>
      new Promise<Json>((resolve) => {
        const seen = received.find(predicate);
        if (seen) resolve(seen);
        else watchers.push([predicate, resolve]);
      }),
  };
}
type Client = ReturnType<typeof connect>;

const ALL = [
  "bounded-output-v1",
  "delegate-capacity-4096",
  "session-cell-execution-resource-limits",
  "tool-catalog-revision-v1",
  "yield-observation",
];
const HELLO = {
  type: "connection/hello",
  supportedVersions: [1],
  requiredCapabilities: [],
  optionalCapabilities: ALL,
};
const response = (id: number) => (m: Json) => m.type === "operation/response" && m.id === id;
const initial = (id: number) => (m: Json) => m.type === "execute/initialResponse" && m.id === id;
const tick = () => new Promise((r) => setTimeout(r, 10));

async function ready(c: Client, hello: Json = HELLO) {
  await c.send(hello);
  return await c.next((m) => m.type === "connection/ready");
}

async function opened(c: Client, sessionId = "s1", id = 1) {
  await c.send({ type: "operation/request", id, request: { method: "session/open", sessionId } });
  return await c.next(response(id));
}

function execute(c: Client, id: number, request: Json = {}, sessionId = "s1") {
  return c.send({
    type: "operation/request",
    id,
    request: {
      method: "session/execute",
      sessionId,
      request: {
        tool_call_id: "c",
        enabled_tools: [],
        source: "",
        yield_time_ms: 100,
        max_output_tokens: null,
        ...request,
      },
    },
  });
}

function wait(c: Client, id: number, extra: Json = {}) {
  return c.send({
    type: "operation/request",
    id,
    request: {
      method: "session/wait",
      sessionId: "s1",
      request: { cell_id: "1", yield_time_ms: 1000 },
      ...extra,
    },
  });
}

/** An execute the test ends: `started` for the cell, then the outcome it is given. */
function scripted(core: FakeCore, cellId = "1") {
  const done = Promise.withResolvers<ExecutionOutcome>();
  const started = Promise.withResolvers<void>();
  core.onExecute = async function* (r, signal) {
    yield { type: "started", executionId: r.executionId, cellId };
    started.resolve();
    // As the core: the caller going away abandons the cell (no outcome).
    const aborted = new Promise<never>((_, reject) =>
      signal.addEventListener("abort", () => reject(signal.reason))
    );
    yield { type: "outcome", outcome: await Promise.race([done.promise, aborted]) };
  };
  return { finish: done.resolve, started: started.promise };
}

const closed = (cellId: string): LeaseEvent => ({
  type: "cellClosed",
  executionId: "e",
  cellId,
  finalToolCallSequence: 0,
});
const notification = (id: string, cellId = "1"): LeaseEvent => ({
  type: "notification",
  notificationId: id,
  executionId: "e",
  cellId,
  callId: "call-1",
  text: `note ${id}`,
});
const toolCall = (invocationId: string, cellId = "1", input = "{}"): ToolCall => ({
  sessionId: "s1",
  executionId: "e",
  cellId,
  invocationId,
  runtimeToolCallId: "tool-1",
  toolName: { name: "t" },
  toolKind: 1,
  inputJson: new TextEncoder().encode(input),
  sequence: 1,
});

Deno.test("V1Connection: ready grants every known capability offered, in the reference's order", async () => {
  const c = connect();
  assert.deepEqual(
    await ready(c, {
      ...HELLO,
      requiredCapabilities: ["yield-observation"],
      optionalCapabilities: ["unknown", "tool-catalog-revision-v1", "bounded-output-v1"],
    }),
    {
      type: "connection/ready",
      selectedVersion: 1,
      capabilities: ["bounded-output-v1", "tool-catalog-revision-v1", "yield-observation"],
    },
  );
  assert.deepEqual([...c.connection.capabilities].sort(), [
    "bounded-output-v1",
    "tool-catalog-revision-v1",
    "yield-observation",
  ]);
  await c.end();
  assert.equal((await c.ended).type, "eof");
  assert.equal(
    c.raw[0],
    JSON.stringify({
      type: "connection/ready",
      selectedVersion: 1,
      capabilities: ["bounded-output-v1", "tool-catalog-revision-v1", "yield-observation"],
    }),
  );
});

Deno.test("V1Connection: the three rejections are written, then the connection ends (not fatal)", async (t) => {
  const cases: [string, Json, Json][] = [
    [
      "not a hello first",
      { type: "operation/request", id: 1, request: { method: "session/open", sessionId: "s" } },
      { type: "invalidHello", message: "first message must be connection/hello" },
    ],
    ["no version 1", { ...HELLO, supportedVersions: [2] }, {
      type: "noCompatibleVersion",
      supportedVersions: [1],
    }],
    [
      "an unknown required capability",
      { ...HELLO, requiredCapabilities: ["foo"], optionalCapabilities: [] },
      { type: "missingRequiredCapability", capability: "foo" },
    ],
  ];
  for (const [name, first, reason] of cases) {
    await t.step(name, async () => {
      const c = connect();
      await c.send(first);
      assert.equal((await c.ended).type, "rejected");
      await c.read;
      assert.deepEqual(c.received, [{ type: "connection/rejected", reason }]);
      assert.equal(c.core.opened.length, 0);
    });
  }
});

Deno.test("V1Connection: malformed input is fatal with Codex's texts, and nothing more is written", async (t) => {
  const cases: [string, (c: Client) => Promise<unknown>, string, boolean?][] = [
    [
      "undecodable JSON",
      (c) => c.text("{nope"),
      "failed to read code-mode client message: failed to decode code-mode IPC frame: ",
    ],
    [
      "an unknown field",
      (c) => c.send({ type: "operation/cancel", id: 1, x: 1 }),
      "failed to read code-mode client message: failed to decode code-mode IPC frame: unknown field `x`, expected `id`",
    ],
    [
      "an undecodable hello",
      (c) => c.send({ ...HELLO, x: 1 }),
      "failed to read code-mode client hello: failed to decode code-mode IPC frame: unknown field `x`, expected one of `supportedVersions`, `requiredCapabilities`, `optionalCapabilities`",
      true,
    ],
    ["a second hello", (c) => c.send(HELLO), "received a second code-mode client hello"],
    ["a duplicate request ID", async (c) => {
      await opened(c, "s1", 5);
      await c.send({
        type: "operation/request",
        id: 5,
        request: { method: "session/shutdown", sessionId: "s1" },
      });
    }, "duplicate code-mode request ID RequestId(5)"],
    ["EOF inside a frame", async (c) => {
      await c.bytes(new Uint8Array([9, 0, 0, 0, 0x7b]));
      await c.end();
    }, "failed to read code-mode client message: early eof"],
    [
      "a length over the limit",
      (c) => c.bytes(new Uint8Array([0xe9, 0x03, 0, 0])),
      "failed to read code-mode client message: code-mode IPC frame length 1001 exceeds 1000 bytes",
    ],
  ];
  for (const [name, act, message, beforeHello] of cases) {
    await t.step(name, async () => {
      const c = connect(new FakeCore(), { maxFrameBytes: 1_000 });
      if (!beforeHello) await ready(c);
      const before = c.received.length;
      await act(c);
      const end = await c.ended;
      assert.equal(end.type, "fatal");
      assert.ok(end.type === "fatal" && end.message.startsWith(message), JSON.stringify(end));
      assert.ok(c.logs.some((l) => l.level === "error" && l.msg.startsWith(message)));
      await c.read;
      assert.equal(c.received.length, before + (name === "a duplicate request ID" ? 1 : 0));
    });
  }
});

Deno.test("V1Connection: an execute answers started, then its initial response, then cell/closed", async () => {
  const core = new FakeCore();
  const cell = scripted(core);
  const c = connect(core);
  await ready(c);
  await opened(c);
  await execute(c, 2, { catalog_revision: 1, max_output_tokens: 50 });
  assert.equal(c.raw.at(-1) ?? "", JSON.stringify(c.received.at(-1)));
  await c.next(response(2));
  assert.equal(
    c.raw[c.received.findIndex(response(2))],
    '{"type":"operation/response","id":2,"result":{"status":"ok","value":{"type":"execution/started","cellId":"1"}}}',
  );
  // The lease reports the cell closed before the door has its outcome: cell/closed waits.
  core.sessions.get("s1")!.lease.push(closed("1"));
  await tick();
  assert.ok(!c.received.some((m) => m.type === "cell/closed"), "cell/closed before the initial response");
  cell.finish({ ...outcome("completed", "hi"), resultBufferedForNs: 12 } as unknown as ExecutionOutcome);
  const answer = await c.next(initial(2));
  assert.equal(
    c.raw[c.received.indexOf(answer)],
    '{"type":"execute/initialResponse","id":2,"result":{"status":"ok","value":{"Result":{"cell_id":"1","content_items":[{"type":"input_text","text":"hi"}],"error_text":null,"result_buffered_for_ns":12,"code_mode_host_duration_ns":7}}}}',
  );
  const closedFrame = await c.next((m) => m.type === "cell/closed");
  assert.equal(
    c.raw[c.received.indexOf(closedFrame)],
    '{"type":"cell/closed","sessionId":"s1","cellId":"1"}',
  );
  assert.ok(c.received.indexOf(answer) < c.received.indexOf(closedFrame));
  // The core got the request as Codex meant it.
  const request = core.executed[0];
  assert.equal(request.catalogRevision, 1n);
  assert.equal(request.maxOutputTokens, 50n);
  assert.equal(request.yieldTimeMs, 100n);
  assert.equal(request.toolCallId, "c");
  await c.end();
  assert.equal((await c.ended).type, "eof");
});

Deno.test("V1Connection: an execute refused before it started gets only its operation/response", async () => {
  const core = new FakeCore();
  // deno-lint-ignore require-yield
  core.onExecute = async function* () {
    throw new HostError("catalog", "unknown code-mode catalog revision");
  };
  const c = connect(core);
  await ready(c);
  await opened(c);
  await execute(c, 2, { catalog_revision: 2 });
  assert.deepEqual((await c.next(response(2))).result, {
    status: "error",
    message: "unknown code-mode catalog revision",
  });
  // A negative token budget (an i32 that is no token count) fails only its request, before the core.
  await execute(c, 3, { max_output_tokens: -1 });
  assert.deepEqual((await c.next(response(3))).result, {
    status: "error",
    message: "invalid code-mode execute request: number too small to fit in target type",
  });
  await c.end();
  await c.ended;
  await c.read;
  assert.ok(!c.received.some((m) => m.type === "execute/initialResponse"));
  assert.equal(core.executed.length, 1);
});

Deno.test("V1Connection: cell/closed waits for the final outcome, or for the session's end", async () => {
  const core = new FakeCore();
  const cell = scripted(core);
  const c = connect(core);
  await ready(c);
  await opened(c);
  await execute(c, 2);
  cell.finish(outcome("yielded", "a"));
  await c.next(initial(2));
  // The cell completed and the core closed it, but its result was not taken yet.
  core.sessions.get("s1")!.lease.push(closed("1"));
  await tick();
  assert.ok(!c.received.some((m) => m.type === "cell/closed"));
  core.onWait = () => Promise.resolve({ state: "liveCell", outcome: outcome("completed", "b") });
  await wait(c, 3);
  const result = await c.next(response(3));
  const closedFrame = await c.next((m) => m.type === "cell/closed");
  assert.ok(c.received.indexOf(result) < c.received.indexOf(closedFrame));
  // A yielded cell closed by the session's shutdown is reported before session/closed.
  const second = scripted(core, "2");
  await execute(c, 4);
  second.finish(outcome("yielded", undefined, "2"));
  await c.next(initial(4));
  const shutdown = c.send({
    type: "operation/request",
    id: 5,
    request: { method: "session/shutdown", sessionId: "s1" },
  });
  core.sessions.get("s1")!.lease.push(closed("2"));
  await shutdown;
  const sessionClosed = await c.next(response(5));
  assert.deepEqual(sessionClosed.result, {
    status: "ok",
    value: { type: "session/closed", sessionId: "s1" },
  });
  const cell2 = c.received.find((m) => m.type === "cell/closed" && m.cellId === "2");
  assert.ok(cell2 && c.received.indexOf(cell2) < c.received.indexOf(sessionClosed));
  await c.end();
  await c.ended;
});

Deno.test("V1Connection: operation/cancel stops only a wait; operation/yield needs no capability", async () => {
  const core = new FakeCore();
  let executionSignal: AbortSignal | undefined;
  const cell = scripted(core);
  const original = core.onExecute;
  core.onExecute = (r, signal) => {
    executionSignal = signal;
    return original(r, signal);
  };
  const c = connect(core);
  await ready(c, { ...HELLO, optionalCapabilities: [] });
  await opened(c);
  await wait(c, 2, { maxOutputTokens: 20 });
  await c.send({ type: "operation/cancel", id: 2 });
  assert.deepEqual((await c.next(response(2))).result, {
    status: "error",
    message: "code-mode request cancelled",
  });
  assert.equal(core.waited[0].maxTokens, 20n);
  await execute(c, 3);
  await c.next(response(3));
  await c.send({ type: "operation/yield", id: 3 });
  await c.send({ type: "operation/cancel", id: 3 });
  await c.send({ type: "operation/cancel", id: 99 });
  await c.send({ type: "operation/yield", id: 98 });
  await tick();
  assert.equal(executionSignal?.aborted, false);
  assert.equal(core.yielded.length, 1);
  assert.equal(core.yielded[0].observation.kind, "execution");
  cell.finish(outcome("completed", "done"));
  assert.equal((await c.next(initial(3))).result.value.Result.content_items[0].text, "done");
  // terminate passes its maxOutputTokens too.
  await c.send({
    type: "operation/request",
    id: 4,
    request: { method: "session/terminate", sessionId: "s1", cellId: "1", maxOutputTokens: 5 },
  });
  assert.ok("Terminated" in (await c.next(response(4))).result.value.outcome.LiveCell);
  assert.deepEqual(core.terminated, [{ sessionId: "s1", cellId: "1", maxTokens: 5n }]);
  await c.end();
  await c.ended;
});

Deno.test(`V1Connection: the ${MAX_IN_FLIGHT + 1}th request in flight is refused; EOF ends the rest silently`, async () => {
  const c = connect();
  await ready(c);
  await opened(c);
  for (let id = 2; id <= MAX_IN_FLIGHT + 2; id++) await wait(c, id);
  assert.deepEqual((await c.next(response(MAX_IN_FLIGHT + 2))).result, {
    status: "error",
    message: "code-mode host has too many in-flight requests",
  });
  assert.equal(c.connection.inFlight, MAX_IN_FLIGHT);
  const before = c.received.length;
  await c.end();
  assert.equal((await c.ended).type, "eof");
  await c.read;
  assert.equal(c.connection.inFlight, 0);
  // Codex's host writes nothing after its client's EOF: the cancelled waits are not answered.
  assert.equal(c.received.length, before);
});

Deno.test("V1Connection: request IDs are echoed exactly, negative and past 2^53", async () => {
  const c = connect();
  await ready(c);
  await c.text(
    '{"type":"operation/request","id":-9223372036854775808,"request":{"method":"session/open","sessionId":"a"}}',
  );
  await c.text(
    '{"type":"operation/request","id":9007199254740993,"request":{"method":"session/open","sessionId":"b"}}',
  );
  await c.next((m) => m.type === "operation/response" && m.result.value?.sessionId === "b");
  await c.next((m) => m.type === "operation/response" && m.result.value?.sessionId === "a");
  assert.ok(c.raw.some((r) => r.startsWith('{"type":"operation/response","id":-9223372036854775808,')));
  assert.ok(c.raw.some((r) => r.startsWith('{"type":"operation/response","id":9007199254740993,')));
  await c.end();
  await c.ended;
});

Deno.test("V1Connection: delegate requests follow their cell's started; results, errors and wrong kinds", async () => {
  const core = new FakeCore();
  const cell = scripted(core);
  const c = connect(core);
  await ready(c);
  await opened(c);
  const session = core.sessions.get("s1")!;
  // The core reports a tool call and a notification of cell 1 before its execute has started.
  session.calls.push(toolCall("inv-1"));
  session.lease.push(notification("n-1"));
  await tick();
  assert.ok(!c.received.some((m) => m.type === "delegate/request"));
  await execute(c, 2);
  const started = await c.next(response(2));
  const call = await c.next((m) => m.type === "delegate/request" && m.request.type === "tool/invoke");
  const note = await c.next((m) => m.type === "delegate/request" && m.request.type === "notification/send");
  assert.ok(c.received.indexOf(started) < c.received.indexOf(call));
  assert.ok(c.received.indexOf(started) < c.received.indexOf(note));
  assert.equal(
    c.raw[c.received.indexOf(note)],
    `{"type":"delegate/request","id":${note.id},"sessionId":"s1","request":{"type":"notification/send","callId":"call-1","cellId":"1","text":"note n-1"}}`,
  );
  // A tool call answered as a notification fails with Codex's text; an error result fails with its message.
  await c.send({
    type: "delegate/response",
    id: call.id,
    result: { status: "ok", value: { type: "notification/delivered" } },
  });
  session.calls.push(toolCall("inv-2"));
  const call2 = await c.next((m) =>
    m.type === "delegate/request" && m.request.type === "tool/invoke" && m.id !== call.id
  );
  await c.send({ type: "delegate/response", id: call2.id, result: { status: "error", message: "nope" } });
  session.calls.push(toolCall("inv-3"));
  const call3 = await c.next((m) => m.type === "delegate/request" && m.id === call2.id + 1);
  await c.text(
    `{"type":"delegate/response","id":${call3.id},"result":{"status":"ok","value":{"type":"tool/result","result":{"n":12345678901234567890}}}}`,
  );
  // A notification answered as a tool result still ends its delivery (logged).
  await c.send({
    type: "delegate/response",
    id: note.id,
    result: { status: "ok", value: { type: "tool/result", result: 1 } },
  });
  // Unknown and repeated delegate IDs are ignored.
  await c.send({ type: "delegate/response", id: 777, result: { status: "error", message: "x" } });
  await c.send({ type: "delegate/response", id: call3.id, result: { status: "error", message: "again" } });
  await tick();
  assert.deepEqual(
    core.completed.map((r) => [r.invocationId, r.outcome.type, r.outcome.message]),
    [
      ["inv-1", "failed", "code-mode client returned an invalid tool result"],
      ["inv-2", "failed", "nope"],
      ["inv-3", "succeeded", undefined],
    ],
  );
  assert.equal(new TextDecoder().decode(core.completed[2].outcome.outputJson), '{"n":12345678901234567890}');
  assert.deepEqual(core.acknowledged, [{ sessionId: "s1", notificationId: "n-1" }]);
  assert.ok(c.logs.some((l) =>
    l.level === "warn" &&
    l.msg ===
      "failed to deliver code mode notification: code-mode client returned an invalid notification result"
  ));
  cell.finish(outcome("completed"));
  await c.next(initial(2));
  await c.end();
  await c.ended;
});

Deno.test("V1Connection: a notification and a tool cancel the core produced come before the cell's outcome", async () => {
  const core = new FakeCore();
  const c = connect(core);
  await ready(c);
  await opened(c);
  const session = core.sessions.get("s1")!;
  core.onExecute = async function* (r) {
    yield { type: "started", executionId: r.executionId, cellId: "1" };
    session.calls.push(toolCall("inv-1"));
    await c.next((m) => m.type === "delegate/request" && m.request.type === "tool/invoke"); // the call is written
    // In one turn: a notification, a cancel of the unanswered call, then the result.
    session.lease.push(notification("n-1"));
    session.lease.push({ type: "toolCallCancelled", invocationId: "inv-1" });
    yield { type: "outcome", outcome: outcome("completed", "done") };
  };
  await execute(c, 2);
  // The client answers the notification: the result waits for that (the next test).
  const sent = await c.next((m) => m.type === "delegate/request" && m.request.type === "notification/send");
  await c.send({
    type: "delegate/response",
    id: sent.id,
    result: { status: "ok", value: { type: "notification/delivered" } },
  });
  const answer = await c.next(initial(2));
  const types = c.received.map((m) => m.type === "delegate/request" ? m.request.type : m.type);
  assert.deepEqual(types.slice(types.indexOf("tool/invoke")), [
    "tool/invoke",
    "notification/send",
    "delegate/cancel",
    "execute/initialResponse",
  ]);
  assert.ok(answer.result.value.Result);
  await c.end();
  await c.ended;
});

/** A session whose cell 1 (Execute 2, started) sent notifications n-1 and n-2 (delegates 1 and 2). */
async function cellWithTwoNotifications() {
  const core = new FakeCore();
  const cell = scripted(core);
  const c = connect(core);
  await ready(c);
  await opened(c);
  const session = core.sessions.get("s1")!;
  await execute(c, 2);
  await c.next(response(2));
  session.lease.push(notification("n-1"));
  session.lease.push(notification("n-2"));
  await c.next((m) => m.type === "delegate/request" && m.id === 2);
  return { core, cell, c, session };
}

Deno.test("V1Connection: a cell's final outcome waits until each of its notifications is answered (a yield is not: the next test)", async () => {
  const { cell, c } = await cellWithTwoNotifications();
  cell.finish(outcome("completed", "done"));
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(c.received.some((m) => m.type === "execute/initialResponse"), false, "held: nothing answered");
  await c.send({ type: "delegate/response", id: 2, result: { status: "error", message: "failed" } });
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(c.received.some((m) => m.type === "execute/initialResponse"), false, "held: one left");
  await c.send({
    type: "delegate/response",
    id: 1,
    result: { status: "ok", value: { type: "notification/delivered" } },
  });
  const answer = await c.next(initial(2));
  assert.equal(answer.result.value.Result.content_items[0].text, "done");
  await c.end();
  await c.ended;
});

Deno.test("V1Connection: notifications produced after an outcome do not hold it back", async () => {
  const core = new FakeCore();
  const cell = scripted(core);
  const c = connect(core, { queueFrames: 4, slowReader: true });
  await ready(c);
  await opened(c);
  await execute(c, 2);
  await c.next(response(2));
  const session = core.sessions.get("s1")!;
  let n = 0;
  for (; n < 100; n++) session.lease.push(notification(`n-${n}`));
  // A cell that notifies without end, two per turn, faster than its client reads (one frame a
  // turn): the lease pump is never idle, and the outcome must still come once the notifications
  // produced before it are written.
  let answered = false;
  const feeding = (async () => {
    while (!answered) {
      await new Promise((r) => setTimeout(r, 0));
      session.lease.push(notification(`n-${n++}`));
      session.lease.push(notification(`n-${n++}`));
    }
  })();
  cell.finish(outcome("yielded", "still yields"));
  const answer = await c.next(initial(2));
  answered = true;
  await feeding;
  assert.equal(answer.result.value.Yielded.content_items[0].text, "still yields");
  const before = c.received.filter((m, i) => m.type === "delegate/request" && i < c.received.indexOf(answer));
  assert.ok(before.length >= 100, `${before.length} notifications before the outcome`);
  assert.ok(before.length < n, `the outcome waited for all ${n} notifications`);
  await c.end();
  await c.ended;
});

Deno.test("V1Connection: a termination cancels the cell's notifications still being delivered, newest first", async () => {
  const { core, cell, c, session } = await cellWithTwoNotifications();
  cell.finish(outcome("yielded"));
  await c.next(initial(2));
  await c.send({
    type: "delegate/response",
    id: 1,
    result: { status: "ok", value: { type: "notification/delivered" } },
  });
  session.lease.push(notification("n-3"));
  await c.next((m) => m.type === "delegate/request" && m.id === 3);
  await c.send({
    type: "operation/request",
    id: 3,
    request: { method: "session/terminate", sessionId: "s1", cellId: "1" },
  });
  const terminated = await c.next(response(3));
  const tail = c.received.slice(c.received.findIndex((m) => m.type === "delegate/cancel"));
  assert.deepEqual(tail, [
    { type: "delegate/cancel", id: 3 },
    { type: "delegate/cancel", id: 2 },
    terminated,
  ]);
  assert.deepEqual(core.acknowledged.map((a) => a.notificationId), ["n-1", "n-3", "n-2"]);
  assert.equal(
    c.logs.filter((l) =>
      l.msg === "failed to deliver code mode notification: code mode delegate request cancelled"
    )
      .length,
    2,
  );
  await c.end();
  await c.ended;
});

Deno.test("V1Connection: notifications unanswered at EOF end their delivery, logged as Codex logs them", async () => {
  const core = new FakeCore();
  scripted(core);
  const c = connect(core);
  await ready(c);
  await opened(c);
  await execute(c, 2);
  await c.next(response(2));
  core.sessions.get("s1")!.lease.push(notification("n-1"));
  await c.next((m) => m.type === "delegate/request");
  await c.end();
  await c.ended;
  assert.deepEqual(core.acknowledged.map((a) => a.notificationId), ["n-1"]);
  assert.ok(
    c.logs.some((l) =>
      l.msg === "failed to deliver code mode notification: code-mode client connection closed"
    ),
  );
});

Deno.test("V1Connection: sessions share the connection's delegate capacity (1,024, or 4,096 when granted)", async () => {
  for (
    const [capabilities, capacity] of [[[], DELEGATE_CAPACITY.standard], [
      ALL,
      DELEGATE_CAPACITY.extended,
    ]] as const
  ) {
    const core = new FakeCore();
    const c = connect(core);
    await ready(c, { ...HELLO, optionalCapabilities: capabilities });
    await opened(c, "a", 1);
    await opened(c, "b", 2);
    const [a, b] = core.opened as { maxPendingDelegateCalls: number; delegatePermits: Permits }[];
    assert.equal(a.maxPendingDelegateCalls, capacity);
    assert.equal(a.delegatePermits, b.delegatePermits);
    const held = Array.from({ length: capacity }, () => a.delegatePermits.tryAcquire());
    assert.ok(held.every((p) => p !== undefined));
    assert.equal(a.delegatePermits.tryAcquire(), undefined);
    await c.end();
    await c.ended;
  }
});

Deno.test("V1Connection: session/open passes the truncation mode and camelCase limits to the core", async () => {
  const core = new FakeCore();
  const c = connect(core);
  await ready(c, { ...HELLO, optionalCapabilities: [] });
  await c.send({
    type: "operation/request",
    id: 1,
    request: {
      method: "session/open",
      sessionId: "s1",
      cellExecutionLimits: { maxYieldTimeMs: 1, maxHeapSizeBytes: 16777216 },
      outputTruncation: "server",
    },
  });
  assert.equal((await c.next(response(1))).result.status, "ok");
  const { outputMode, maxYieldTimeMs, maxHeapSizeBytes } = core.opened[0];
  assert.deepEqual({ outputMode, maxYieldTimeMs, maxHeapSizeBytes }, {
    outputMode: "server",
    maxYieldTimeMs: 1n,
    maxHeapSizeBytes: 16777216n,
  });
  assert.deepEqual((await opened(c, "s1", 2)).result, {
    status: "error",
    message: "code-mode session ID `s1` is already open",
  });
  await c.end();
  await c.ended;
});

Deno.test("V1Connection: responses and tool calls too large for a frame fail with Codex's texts", async () => {
  const core = new FakeCore();
  core.onWait = () => Promise.resolve({ state: "liveCell", outcome: outcome("yielded", "x".repeat(2_000)) });
  const cell = scripted(core);
  const c = connect(core, { maxFrameBytes: 1_000 });
  await ready(c);
  await opened(c);
  await wait(c, 2);
  const replaced = await c.next(response(2));
  assert.match(
    replaced.result.message,
    /^code-mode host response exceeds the IPC frame limit: code-mode IPC frame length \d+ exceeds 1000 bytes$/,
  );
  await execute(c, 3);
  await c.next(response(3));
  const session = core.sessions.get("s1")!;
  session.calls.push(toolCall("inv-big", "1", JSON.stringify({ arg: "y".repeat(2_000) })));
  session.calls.push(toolCall("inv-small"));
  const small = await c.next((m) => m.type === "delegate/request");
  // The oversized call used up delegate ID 1 and failed with its frame's length.
  assert.equal(small.id, 2);
  assert.equal(core.completed[0].invocationId, "inv-big");
  assert.match(core.completed[0].outcome.message, /^code-mode IPC frame length \d+ exceeds 1000 bytes$/);
  cell.finish(outcome("completed", "z".repeat(2_000)));
  assert.match(
    (await c.next(initial(3))).result.message,
    /^code-mode initial response exceeds the IPC frame limit: code-mode IPC frame length \d+ exceeds 1000 bytes$/,
  );
  await c.end();
  await c.ended;
});

Deno.test("V1Connection: a client that stops reading holds producers back at the queue bound", async () => {
  const core = new FakeCore();
  scripted(core);
  const c = connect(core, { queueFrames: 8 });
  await ready(c);
  await opened(c);
  await execute(c, 2);
  await c.next(response(2));
  c.pause();
  const session = core.sessions.get("s1")!;
  for (let i = 0; i < 500; i++) session.lease.push(notification(`n-${i}`));
  await new Promise((r) => setTimeout(r, 50));
  const sent = c.received.length;
  assert.ok(sent < 20, `received ${sent} frames while paused`);
  c.resume();
  await c.next((m) => m.type === "delegate/request" && m.id === 500);
  await c.end();
  await c.ended;
});

import assert from "node:assert/strict";
import type {
  CodeModeCore,
  ExecuteEvent,
  ExecuteRequest,
  LeaseEvent,
  ObservationResult,
  ToolCall,
} from "../../core/code_mode_core.ts";
import { HostError } from "../../core/errors.ts";
import { Logger } from "../../ops/log.ts";
import { type ConnectionEnd, MAX_IN_FLIGHT, oversizedId, V1Connection } from "./connection.ts";
import { encodeFrame, readFrames } from "./framing.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

/** A fake core: sessions with scripted lease events, tool calls, executes and waits. */
class FakeCore {
  sessions = new Map<string, { lease: Channel<LeaseEvent>; calls: Channel<ToolCall> }>();
  completed: Json[] = [];
  acknowledged: Json[] = [];
  yielded: Json[] = [];
  /** What an execute does: yields the events, by default started and a completion. */
  onExecute: (request: ExecuteRequest, signal: AbortSignal) => AsyncGenerator<ExecuteEvent> =
    async function* (r) {
      yield { type: "started", executionId: r.executionId, cellId: "1" };
      yield {
        type: "outcome",
        outcome: { cellId: "1", contentItems: [], hostDurationNs: 0, kind: "completed" },
      };
    };
  onWait: (signal: AbortSignal) => Promise<ObservationResult> = (signal) =>
    new Promise((_, reject) =>
      signal.addEventListener("abort", () => reject(new HostError("cancelled", "x")))
    );

  openSession(request: { sessionId: string }) {
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
    return this.onExecute(request, options.signal);
  }
  wait(_request: unknown, options: { signal: AbortSignal }) {
    return this.onWait(options.signal);
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

/** A connection over in-memory pipes, with a client side that records every message. */
function connect(core = new FakeCore(), options: { queueFrames?: number; maxFrameBytes?: number } = {}) {
  const toHost = new TransformStream<Uint8Array, Uint8Array>();
  const fromHost = new TransformStream<Uint8Array, Uint8Array>();
  const log = new Logger("error", () => {});
  const connection = new V1Connection({
    core: core as unknown as CodeModeCore,
    log,
    readable: toHost.readable,
    writable: fromHost.writable,
    ...options,
  });
  const ended: Promise<ConnectionEnd> = connection.run();
  const writer = toHost.writable.getWriter();
  const received: Json[] = [];
  const watchers: [(m: Json) => boolean, (m: Json) => void][] = [];
  let reading = true;
  let resume: (() => void) | undefined;
  const read = (async () => {
    for await (const f of readFrames(fromHost.readable)) {
      while (!reading) await new Promise<void>((r) => resume = r);
      if (f.type !== "frame") throw new Error("oversized from host");
      const m = JSON.parse(new TextDecoder().decode(f.payload));
      received.push(m);
      for (const w of watchers.slice()) if (w[0](m)) watchers.splice(watchers.indexOf(w), 1), w[1](m);
    }
  })();
  return {
    core,
    connection,
    ended,
    received,
    read,
    send: (m: unknown) => writer.write(encodeFrame(m)),
    raw: (b: Uint8Array) => writer.write(b),
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

const HELLO = {
  type: "connection/hello",
  supportedVersions: [1],
  requiredCapabilities: [],
  optionalCapabilities: ["yield-observation"],
};
const response = (id: number) => (m: Json) => m.type === "operation/response" && m.id === id;

async function ready(c: ReturnType<typeof connect>) {
  await c.send(HELLO);
  await c.next((m) => m.type === "connection/ready");
}

async function opened(c: ReturnType<typeof connect>, sessionId = "s1", id = 1) {
  await c.send({ type: "operation/request", id, request: { method: "session/open", sessionId } });
  return await c.next(response(id));
}

Deno.test("V1Connection: ready grants only the listed known capabilities; EOF ends it as eof", async () => {
  const c = connect();
  await c.send({ ...HELLO, optionalCapabilities: ["unknown", "yield-observation"] });
  assert.deepEqual(await c.next((m) => m.type === "connection/ready"), {
    type: "connection/ready",
    selectedVersion: 1,
    capabilities: ["yield-observation"],
  });
  await c.end();
  assert.equal((await c.ended).type, "eof");
});

Deno.test("V1Connection: undecodable JSON, a second hello, a duplicate id and EOF inside a frame are fatal", async (t) => {
  const cases: [string, (c: ReturnType<typeof connect>) => Promise<unknown>, string][] = [
    [
      "bad JSON",
      (c) => c.raw(new Uint8Array([2, 0, 0, 0, 0x7b, 0x7b])),
      "failed to decode code-mode IPC frame: ",
    ],
    ["second hello", (c) => c.send(HELLO), "received a second code-mode client hello"],
    ["duplicate id", async (c) => {
      await opened(c, "s1", 5);
      await c.send({
        type: "operation/request",
        id: 5,
        request: { method: "session/shutdown", sessionId: "s1" },
      });
    }, "duplicate code-mode request ID 5"],
    ["EOF inside a frame", async (c) => {
      await c.raw(new Uint8Array([9, 0, 0, 0, 0x7b]));
      await c.end();
    }, "code-mode IPC stream ended inside a 9-byte frame"],
    ["yield without the capability", async (c) => {
      await c.send({ type: "operation/yield", id: 1 });
    }, "yield-observation"],
  ];
  for (const [name, act, message] of cases) {
    await t.step(name, async () => {
      const c = connect();
      if (name === "yield without the capability") {
        await c.send({ ...HELLO, optionalCapabilities: [] });
        await c.next((m) => m.type === "connection/ready");
      } else await ready(c);
      await act(c);
      const end = await c.ended;
      assert.equal(end.type, "fatal");
      assert.ok(end.type === "fatal" && end.message.includes(message), JSON.stringify(end));
    });
  }
});

Deno.test("V1Connection: an execute answers started, then its initial response; cell/closed waits for it", async () => {
  const core = new FakeCore();
  const gate = Promise.withResolvers<void>();
  core.onExecute = async function* (r) {
    yield { type: "started", executionId: r.executionId, cellId: "1" };
    // The lease reports the cell closed before the door has the outcome.
    core.sessions.get("s1")!.lease.push({
      type: "cellClosed",
      executionId: r.executionId,
      cellId: "1",
      finalToolCallSequence: 0,
    });
    await gate.promise;
    yield {
      type: "outcome",
      outcome: {
        cellId: "1",
        contentItems: [{ text: { text: "hi" } }],
        hostDurationNs: 0,
        kind: "completed",
      },
    };
  };
  const c = connect(core);
  await ready(c);
  await opened(c);
  await c.send({
    type: "operation/request",
    id: 2,
    request: { method: "session/execute", sessionId: "s1", request: { tool_call_id: "c", source: "" } },
  });
  assert.deepEqual((await c.next(response(2))).result, {
    status: "ok",
    value: { type: "execution/started", cellId: "1" },
  });
  await new Promise((r) => setTimeout(r, 20));
  assert.ok(!c.received.some((m) => m.type === "cell/closed"), "cell/closed before the initial response");
  gate.resolve();
  const initial = await c.next((m) => m.type === "execute/initialResponse");
  assert.deepEqual(initial.result, {
    status: "ok",
    value: {
      Result: { cell_id: "1", content_items: [{ type: "input_text", text: "hi" }], error_text: null },
    },
  });
  const closed = await c.next((m) => m.type === "cell/closed");
  assert.deepEqual(closed, { type: "cell/closed", sessionId: "s1", cellId: "1" });
  assert.ok(c.received.indexOf(initial) < c.received.indexOf(closed));
  // An invalid inner request fails only that request.
  await c.send({
    type: "operation/request",
    id: 3,
    request: { method: "session/execute", sessionId: "s1", request: { source: "" } },
  });
  assert.deepEqual((await c.next(response(3))).result, {
    status: "error",
    message: "invalid code-mode execute request: unknown field `x` in execute request".replace(
      "unknown field `x` in",
      "missing field `tool_call_id` in",
    ),
  });
  await c.end();
  assert.equal((await c.ended).type, "eof");
});

Deno.test("V1Connection: operation/cancel and operation/yield reach the right observation", async () => {
  const core = new FakeCore();
  let executionSignal: AbortSignal | undefined;
  core.onExecute = async function* (r, signal) {
    executionSignal = signal;
    yield { type: "started", executionId: r.executionId, cellId: "1" };
    await new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error("aborted"))));
  };
  const c = connect(core);
  await ready(c);
  await opened(c);
  await c.send({
    type: "operation/request",
    id: 2,
    request: { method: "session/wait", sessionId: "s1", request: { cell_id: "1", yield_time_ms: 1000 } },
  });
  await c.send({ type: "operation/cancel", id: 2 });
  assert.deepEqual((await c.next(response(2))).result, {
    status: "error",
    message: "code-mode request cancelled",
  });
  await c.send({
    type: "operation/request",
    id: 3,
    request: { method: "session/execute", sessionId: "s1", request: { tool_call_id: "c", source: "" } },
  });
  await c.next(response(3));
  await c.send({ type: "operation/yield", id: 3 });
  await c.send({ type: "operation/cancel", id: 3 });
  const initial = await c.next((m) => m.type === "execute/initialResponse");
  assert.deepEqual(initial, {
    type: "execute/initialResponse",
    id: 3,
    result: { status: "error", message: "code-mode request cancelled" },
  });
  assert.equal(executionSignal?.aborted, true);
  assert.equal(core.yielded.length, 1);
  assert.equal(core.yielded[0].observation.kind, "execution");
  await c.end();
  await c.ended;
});

Deno.test(`V1Connection: the ${MAX_IN_FLIGHT + 1}th request in flight is refused; EOF cancels the rest`, async () => {
  const c = connect();
  await ready(c);
  await opened(c);
  for (let id = 2; id <= MAX_IN_FLIGHT + 2; id++) {
    await c.send({
      type: "operation/request",
      id,
      request: { method: "session/wait", sessionId: "s1", request: { cell_id: "1" } },
    });
  }
  assert.deepEqual((await c.next(response(MAX_IN_FLIGHT + 2))).result, {
    status: "error",
    message: "code-mode host has too many in-flight requests",
  });
  assert.equal(c.connection.inFlight, MAX_IN_FLIGHT);
  await c.end();
  assert.equal((await c.ended).type, "eof");
  assert.equal(c.connection.inFlight, 0);
  assert.equal(c.core.sessions.size, 1);
});

Deno.test("V1Connection: tool calls and notifications become delegate requests; cancels follow their request", async () => {
  const core = new FakeCore();
  const c = connect(core);
  await ready(c);
  await opened(c);
  const session = core.sessions.get("s1")!;
  const call = (invocationId: string): ToolCall => ({
    sessionId: "s1",
    executionId: "e",
    cellId: "1",
    invocationId,
    runtimeToolCallId: "tool-1",
    toolName: { name: "t" },
    toolKind: 1,
    inputJson: new TextEncoder().encode("{}"),
    sequence: 1,
  });
  session.calls.push(call("inv-1"));
  const request = await c.next((m) => m.type === "delegate/request");
  assert.equal(request.id, 1);
  assert.equal(request.request.type, "tool/invoke");
  await c.send({
    type: "delegate/response",
    id: 1,
    result: { status: "ok", value: { type: "tool/result", result: { a: 1 } } },
  });
  session.lease.push({
    type: "notification",
    notificationId: "n-1",
    executionId: "e",
    cellId: "1",
    callId: "c",
    text: "hi",
  });
  const note = await c.next((m) => m.type === "delegate/request" && m.request.type === "notification/send");
  assert.deepEqual(note, {
    type: "delegate/request",
    id: 2,
    sessionId: "s1",
    request: { type: "notification/send", callId: "c", cellId: "1", text: "hi" },
  });
  await c.send({
    type: "delegate/response",
    id: 2,
    result: { status: "ok", value: { type: "notification/delivered" } },
  });
  session.calls.push(call("inv-2"));
  await c.next((m) => m.type === "delegate/request" && m.id === 3);
  session.lease.push({ type: "toolCallCancelled", invocationId: "inv-2" });
  assert.deepEqual(await c.next((m) => m.type === "delegate/cancel"), { type: "delegate/cancel", id: 3 });
  await c.send({ type: "delegate/response", id: 3, result: { status: "error", message: "late" } });
  // Cancelled before the door saw the call: never sent.
  session.lease.push({ type: "toolCallCancelled", invocationId: "inv-3" });
  session.calls.push(call("inv-3"));
  session.calls.push(call("inv-4"));
  assert.equal(
    (await c.next((m) => m.type === "delegate/request" && m.id === 4)).request.type,
    "tool/invoke",
  );
  await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(core.completed.map((r) => [r.invocationId, r.outcome.type]), [["inv-1", "succeeded"]]);
  assert.equal(new TextDecoder().decode(core.completed[0].outcome.outputJson), '{"a":1}');
  assert.deepEqual(core.acknowledged, [{ sessionId: "s1", notificationId: "n-1" }]);
  assert.equal(c.received.filter((m) => m.type === "delegate/request").length, 4);
  await c.end();
  await c.ended;
});

Deno.test("V1Connection: an oversized frame is answered by id; an oversized response is replaced", async () => {
  const core = new FakeCore();
  core.onWait = () =>
    Promise.resolve({
      state: "liveCell",
      outcome: {
        cellId: "1",
        contentItems: [{ text: { text: "x".repeat(2_000) } }],
        hostDurationNs: 0,
        kind: "yielded",
      },
    });
  const c = connect(core, { maxFrameBytes: 1_000 });
  await ready(c);
  await opened(c);
  const big = encodeFrame({
    type: "operation/request",
    id: 7,
    request: { method: "session/execute", sessionId: "s1", request: { source: "x".repeat(5_000) } },
  });
  await c.raw(big);
  const first = await c.next(response(7));
  assert.deepEqual(first.result, {
    status: "error",
    message: `code-mode IPC frame length ${big.length - 4} exceeds 1000 bytes`,
  });
  assert.deepEqual((await c.next((m) => m.type === "execute/initialResponse")).result, first.result);
  // The connection stays up: a wait whose answer does not fit gets the error result instead.
  await c.send({
    type: "operation/request",
    id: 8,
    request: { method: "session/wait", sessionId: "s1", request: { cell_id: "1" } },
  });
  const replaced = await c.next(response(8));
  assert.equal(replaced.result.status, "error");
  assert.match(
    replaced.result.message,
    /^code-mode host response exceeded the 1000-byte IPC frame limit: \d+ bytes$/,
  );
  await c.end();
  await c.ended;
  assert.deepEqual(oversizedId(new TextEncoder().encode('{"id":12,"type":"delegate/response","result":')), {
    type: "delegate/response",
    id: 12,
    execute: false,
  });
  assert.equal(oversizedId(new TextEncoder().encode('{"request":{},"id":1')), undefined);
});

Deno.test("V1Connection: a client that stops reading holds producers back at the queue bound", async () => {
  const core = new FakeCore();
  const c = connect(core, { queueFrames: 8 });
  await ready(c);
  await opened(c);
  c.pause();
  const session = core.sessions.get("s1")!;
  for (let i = 0; i < 500; i++) {
    session.lease.push({
      type: "notification",
      notificationId: `n-${i}`,
      executionId: "e",
      cellId: "1",
      callId: "c",
      text: "x",
    });
  }
  await new Promise((r) => setTimeout(r, 50));
  const sent = c.received.length;
  assert.ok(sent < 20, `received ${sent} frames while paused`);
  c.resume();
  await c.next((m) => m.type === "delegate/request" && m.id === 500);
  await c.end();
  await c.ended;
});

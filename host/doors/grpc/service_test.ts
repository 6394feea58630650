/**
 * Unit tests of the gRPC door's service (`service.ts`) without a server: each method is called
 * as nice-grpc calls it, with a recorded {@link CallContext}, over a fake core that records what
 * the door asked of it and answers what the test scripts. What is checked is the door's own job:
 * wire message → core request, core result → wire message, and the few things the door adds
 * (headers, heartbeats, the write confirmation of notifications).
 */
import assert from "node:assert/strict";
import { type CallContext, Metadata, ServerError, Status } from "nice-grpc";
import type {
  CodeModeCore,
  ExecuteEvent,
  ExecuteRequest,
  ExecutionOutcome,
  LeaseEvent,
  ObservationResult,
  OpenSessionRequest,
  ToolCall,
} from "../../core/code_mode_core.ts";
import { HostError } from "../../core/errors.ts";
import { OutputTruncationMode } from "../../../proto/code_mode_types.ts";
import {
  createCodeModeService,
  ON_SENT,
  PROCESS_METRICS_UNSUPPORTED,
  RESULT_BUFFERED_HEADER,
  SUBSCRIPTION_HEADER,
  type WithOnSent,
} from "./service.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

const SESSION = "6f0b1c6e-6a43-4b4e-9d51-0f3c1f5e2a10";

/** An async queue the test feeds: the lease's events and a subscription's calls. */
class Feed<T> {
  #items: T[] = [];
  #wake: (() => void) | undefined;
  #ended = false;
  /** How many items the consumer has asked for (a pull that found the queue empty counts too). */
  pulls = 0;
  push(item: T): void {
    this.#items.push(item);
    this.#wake?.();
  }
  end(): void {
    this.#ended = true;
    this.#wake?.();
  }
  async *iterate(signal?: AbortSignal): AsyncGenerator<T> {
    const aborted = new Promise<void>((resolve) => signal?.addEventListener("abort", () => resolve()));
    for (;;) {
      this.pulls++;
      while (this.#items.length === 0 && !this.#ended && !signal?.aborted) {
        await Promise.race([new Promise<void>((r) => this.#wake = r), aborted]);
      }
      if (this.#items.length === 0) return;
      yield this.#items.shift()!;
    }
  }
}

/** A core that records every request; each answer is scripted by the test. */
class FakeCore {
  readonly calls: [string, Json][] = [];
  readonly lease = new Feed<LeaseEvent>();
  readonly toolCalls = new Feed<ToolCall>();
  outputMode: "client" | "server" = "client";
  subscriptionClosed = false;
  executeEvents: ExecuteEvent[] = [];
  observation: ObservationResult = { state: "liveCell", outcome: outcome({ kind: "yielded" }) };
  failure: Error | undefined;

  openSession(request: OpenSessionRequest) {
    this.calls.push(["openSession", request]);
    if (this.failure) return Promise.reject(this.failure);
    const lease = this.lease;
    return Promise.resolve({
      sessionId: SESSION,
      outputMode: request.outputMode ?? "client",
      backlog: 0,
      events: (signal?: AbortSignal) => lease.iterate(signal),
    });
  }
  closeSession(sessionId: string) {
    this.calls.push(["closeSession", sessionId]);
    return this.failure ? Promise.reject(this.failure) : Promise.resolve();
  }
  async *execute(request: ExecuteRequest, options: { signal: AbortSignal }) {
    this.calls.push(["execute", { request, signal: options.signal }]);
    for (const event of this.executeEvents) yield event;
  }
  wait(request: Json, options: { signal: AbortSignal }) {
    this.calls.push(["wait", { request, signal: options.signal }]);
    return Promise.resolve(this.observation);
  }
  terminate(request: Json) {
    this.calls.push(["terminate", request]);
    return Promise.resolve(this.observation);
  }
  yieldObservation(request: Json) {
    this.calls.push(["yieldObservation", request]);
  }
  cancelWait(request: Json) {
    this.calls.push(["cancelWait", request]);
    return Promise.resolve();
  }
  acknowledgeNotification(request: Json) {
    this.calls.push(["acknowledgeNotification", request]);
  }
  completeToolCall(request: Json) {
    this.calls.push(["completeToolCall", request]);
  }
  subscribeToToolCalls(request: Json) {
    this.calls.push(["subscribeToToolCalls", request]);
    const feed = this.toolCalls;
    const close = () => void (this.subscriptionClosed = true);
    return {
      sessionId: SESSION,
      calls: (signal?: AbortSignal) => feed.iterate(signal),
      close,
      [Symbol.dispose]: close,
    };
  }
  /** The requests of one method, in order. */
  requests(method: string): Json[] {
    return this.calls.filter(([m]) => m === method).map(([, r]) => r);
  }
}

function outcome(fields: Partial<ExecutionOutcome> & { kind: ExecutionOutcome["kind"] }): ExecutionOutcome {
  return { cellId: "1", contentItems: [], hostDurationNs: 5, ...fields } as ExecutionOutcome;
}

/** A call context as nice-grpc makes one, recording the headers it was given and when they went. */
function callContext(
  options: { signal?: AbortSignal; metadata?: Record<string, string> } = {},
): CallContext & { headersSent: number } {
  const metadata = Metadata();
  for (const [key, value] of Object.entries(options.metadata ?? {})) metadata.set(key, value);
  const context = {
    metadata,
    peer: "test",
    header: Metadata(),
    trailer: Metadata(),
    headersSent: 0,
    sendHeader() {
      context.headersSent++;
    },
    signal: options.signal ?? new AbortController().signal,
  };
  return context;
}

function service(core: FakeCore, options: { routeToken?: string; confirmsWrites?: boolean } = {}) {
  return createCodeModeService({ core: core as unknown as CodeModeCore, ...options });
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail("did not reject");
}

Deno.test("openSession: the wire limits become the core's request (uint64 strings as bigints, the traceparent header, the peer as the client)", async () => {
  const core = new FakeCore();
  const events = service(core).openSession(
    {
      cellExecutionLimits: { maxYieldTimeMs: "18446744073709551615", maxHeapSizeBytes: "33554432" },
      maxPendingDelegateCalls: 7,
      outputTruncation: OutputTruncationMode.OUTPUT_TRUNCATION_MODE_SERVER,
    } as Json,
    callContext({ metadata: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" } }),
  )[Symbol.asyncIterator]();
  core.lease.end();
  await events.next();
  assert.deepEqual(core.requests("openSession"), [{
    outputMode: "server",
    maxYieldTimeMs: 18446744073709551615n,
    maxHeapSizeBytes: 33554432n,
    maxPendingDelegateCalls: 7,
    traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    // The connection's peer scopes runtime handover to one client's sessions.
    client: "test",
  }]);
});

Deno.test("openSession: the output mode of each truncation value; one that is no mode is refused after the delegate capacity", async () => {
  const modes: [number | undefined, string][] = [
    [undefined, "client"],
    [OutputTruncationMode.OUTPUT_TRUNCATION_MODE_UNSPECIFIED, "client"],
    [OutputTruncationMode.OUTPUT_TRUNCATION_MODE_CLIENT, "client"],
    [OutputTruncationMode.OUTPUT_TRUNCATION_MODE_SERVER, "server"],
  ];
  for (const [outputTruncation, mode] of modes) {
    const core = new FakeCore();
    core.lease.end();
    for await (const _ of service(core).openSession({ outputTruncation } as Json, callContext())) {
      /* none */
    }
    assert.equal(core.requests("openSession")[0].outputMode, mode, `truncation ${outputTruncation}`);
  }
  const core = new FakeCore();
  const open = (request: Json) =>
    service(core).openSession(request, callContext())[Symbol.asyncIterator]().next();
  const unknownMode = await rejection(open({ outputTruncation: 9 }));
  assert.ok(unknownMode instanceof HostError);
  assert.deepEqual([unknownMode.code, unknownMode.message], [
    "invalid_request",
    "unknown code-mode output truncation mode",
  ]);
  // The reference checks the delegate capacity first.
  const both = await rejection(open({ outputTruncation: 9, maxPendingDelegateCalls: 0 }));
  assert.ok(both instanceof HostError);
  assert.equal(both.message, "callback capacity must be positive");
  assert.deepEqual(core.calls, [], "nothing reached the core");
});

Deno.test("openSession: headers go out before the first event, with the route token when there is one", async () => {
  for (const routeToken of [undefined, "route-7"]) {
    const core = new FakeCore();
    const context = callContext();
    const events = service(core, { routeToken }).openSession({} as Json, context)[Symbol.asyncIterator]();
    core.lease.push({ type: "opened", sessionId: SESSION, outputMode: "client" });
    await events.next();
    assert.equal(context.headersSent, 1);
    assert.equal(context.header.get("x-code-mode-route"), routeToken);
    core.lease.end();
    assert.equal((await events.next()).done, true);
  }
});

Deno.test("openSession: lease events in wire form; a Server-mode opening names its mode, a 0 sequence and a closing cell's CellClosed are left out", async () => {
  const core = new FakeCore();
  const events: Json[] = [];
  core.lease.push({ type: "opened", sessionId: SESSION, outputMode: "server" });
  core.lease.push({ type: "opened", sessionId: SESSION, outputMode: "client" });
  core.lease.push({ type: "toolCallCancelled", invocationId: "inv-1" });
  core.lease.push({
    type: "notification",
    notificationId: "n-1",
    executionId: "e-1",
    cellId: "1",
    callId: "call-1",
    text: "hello",
  });
  core.lease.push({ type: "cellClosed", executionId: "e-1", cellId: "1", finalToolCallSequence: 0 });
  core.lease.push({ type: "cellClosed", executionId: "e-2", cellId: "2", finalToolCallSequence: 3 });
  core.lease.push({
    type: "cellClosed",
    executionId: "e-3",
    cellId: "3",
    finalToolCallSequence: 1,
    closing: true,
  });
  core.lease.end();
  for await (const event of service(core).openSession({} as Json, callContext())) events.push(event);
  assert.deepEqual(events, [
    {
      opened: {
        sessionId: SESSION,
        outputTruncation: OutputTruncationMode.OUTPUT_TRUNCATION_MODE_SERVER,
        supportsCatalogRevision: true,
      },
    },
    { opened: { sessionId: SESSION, supportsCatalogRevision: true } },
    { toolCallCancelled: { invocationId: "inv-1" } },
    {
      notification: {
        notificationId: "n-1",
        executionId: "e-1",
        cellId: "1",
        callId: "call-1",
        text: "hello",
      },
    },
    { cellClosed: { executionId: "e-1", cellId: "1" } },
    { cellClosed: { executionId: "e-2", cellId: "2", finalToolCallSequence: 3 } },
  ]);
});

Deno.test("openSession with confirmsWrites: the event after a notification is asked for only once the notification was sent", async () => {
  const core = new FakeCore();
  const events = service(core, { confirmsWrites: true }).openSession({} as Json, callContext())[
    Symbol.asyncIterator
  ]();
  core.lease.push({
    type: "notification",
    notificationId: "n-1",
    executionId: "e-1",
    cellId: "1",
    callId: "c",
    text: "t",
  });
  core.lease.push({ type: "toolCallCancelled", invocationId: "inv-1" });
  const first = (await events.next()).value as WithOnSent<Json>;
  assert.equal(first.notification.notificationId, "n-1");
  assert.equal(typeof first[ON_SENT], "function");
  const pullsBefore = core.lease.pulls;
  let second: Json;
  const next = events.next().then((r) => second = r.value);
  // The generator now waits for the write: the lease is not read further.
  for (let i = 0; i < 5; i++) await Promise.resolve();
  assert.equal(core.lease.pulls, pullsBefore);
  assert.equal(second, undefined);
  first[ON_SENT]!();
  await next;
  assert.deepEqual(second, { toolCallCancelled: { invocationId: "inv-1" } });
  // Without confirmsWrites a notification carries no callback and nothing waits for it.
  const plain = new FakeCore();
  plain.lease.push({
    type: "notification",
    notificationId: "n-2",
    executionId: "e-1",
    cellId: "1",
    callId: "c",
    text: "t",
  });
  plain.lease.end();
  const all: Json[] = [];
  for await (const event of service(plain).openSession({} as Json, callContext())) all.push(event);
  assert.equal(all.length, 1);
  assert.equal(ON_SENT in all[0], false);
});

Deno.test("openSession with confirmsWrites: a caller gone before the write does not hold the lease forever", async () => {
  const core = new FakeCore();
  const abort = new AbortController();
  const events = service(core, { confirmsWrites: true }).openSession(
    {} as Json,
    callContext({ signal: abort.signal }),
  )[
    Symbol.asyncIterator
  ]();
  core.lease.push({
    type: "notification",
    notificationId: "n-1",
    executionId: "e-1",
    cellId: "1",
    callId: "c",
    text: "t",
  });
  await events.next(); // never confirmed as sent
  const next = events.next();
  abort.abort();
  assert.equal((await next).done, true);
});

Deno.test("openSession and closeSession: a core failure propagates unchanged (errors.ts maps it)", async () => {
  const core = new FakeCore();
  core.failure = new HostError("unknown_session", `unknown code-mode session ${SESSION}`);
  const error = await rejection(
    service(core).openSession({} as Json, callContext())[Symbol.asyncIterator]().next(),
  );
  assert.equal(error, core.failure);
  assert.equal(
    await rejection(service(core).closeSession({ sessionId: SESSION } as Json, callContext())),
    core.failure,
  );
});

Deno.test("closeSession: the session ID reaches the core (empty when absent) and the answer is empty", async () => {
  const core = new FakeCore();
  assert.deepEqual(await service(core).closeSession({ sessionId: SESSION } as Json, callContext()), {});
  assert.deepEqual(await service(core).closeSession({} as Json, callContext()), {});
  assert.deepEqual(core.requests("closeSession"), [SESSION, ""]);
});

Deno.test("execute: the request in core form, the caller's signal passed on, started and each outcome kind in wire form", async () => {
  const core = new FakeCore();
  core.executeEvents = [
    { type: "started", executionId: "e-1", cellId: "4" },
    {
      type: "outcome",
      outcome: outcome({ kind: "yielded", cellId: "4", contentItems: [{ text: { text: "a" } }] as Json }),
    },
    { type: "outcome", outcome: outcome({ kind: "terminated", cellId: "4" }) },
    { type: "outcome", outcome: outcome({ kind: "completed", cellId: "4" }) },
    { type: "outcome", outcome: outcome({ kind: "completed", cellId: "4", errorText: "boom" }) },
  ];
  const context = callContext({ metadata: { traceparent: "tp" } });
  const events: Json[] = [];
  const request = {
    sessionId: SESSION,
    executionId: "e-1",
    toolCallId: "call-1",
    source: "text(1)",
    enabledTools: [
      { name: "a", toolName: { name: "a", namespace: "ns" }, description: "d", kind: 2 },
      { name: "b", inputSchemaJson: "{}", outputSchemaJson: "{}" },
    ],
    yieldTimeMs: "250",
    maxOutputTokens: "9007199254740993",
    catalogRevision: "3",
  };
  for await (const event of service(core).execute(request as Json, context)) events.push(event);
  const [{ request: sent, signal }] = core.requests("execute");
  assert.equal(signal, context.signal);
  assert.deepEqual(sent, {
    sessionId: SESSION,
    executionId: "e-1",
    toolCallId: "call-1",
    source: "text(1)",
    enabledTools: [
      {
        name: "a",
        toolName: { name: "a", namespace: "ns" },
        description: "d",
        kind: 2,
        inputSchemaJson: undefined,
        outputSchemaJson: undefined,
      },
      {
        name: "b",
        toolName: undefined,
        description: undefined,
        kind: undefined,
        inputSchemaJson: "{}",
        outputSchemaJson: "{}",
      },
    ],
    yieldTimeMs: 250n,
    maxOutputTokens: 9007199254740993n,
    catalogRevision: 3n,
    traceparent: "tp",
  });
  const base = { cellId: "4", contentItems: [], codeModeHostDurationNs: 5 };
  assert.deepEqual(events, [
    { started: { executionId: "e-1", cellId: "4" } },
    { outcome: { ...base, contentItems: [{ text: { text: "a" } }], yielded: {} } },
    { outcome: { ...base, terminated: {} } },
    { outcome: { ...base, completed: {} } },
    { outcome: { ...base, completed: { errorText: "boom" } } },
  ]);
});

Deno.test("execute: absent fields become empty strings and absent numbers stay absent", async () => {
  const core = new FakeCore();
  for await (const _ of service(core).execute({} as Json, callContext())) { /* none */ }
  assert.deepEqual(core.requests("execute")[0].request, {
    sessionId: "",
    executionId: "",
    toolCallId: "",
    source: "",
    enabledTools: undefined,
    yieldTimeMs: undefined,
    maxOutputTokens: undefined,
    catalogRevision: undefined,
    traceparent: undefined,
  });
});

Deno.test("execute: an outcome ended by the session's closure is not sent; an oversized one is OUT_OF_RANGE with tonic's text", async () => {
  const closing = new FakeCore();
  closing.executeEvents = [
    { type: "started", executionId: "e-1", cellId: "1" },
    { type: "outcome", outcome: outcome({ kind: "terminated" }), closing: true },
  ];
  const sent: Json[] = [];
  for await (const event of service(closing).execute({} as Json, callContext())) sent.push(event);
  assert.deepEqual(sent, [{ started: { executionId: "e-1", cellId: "1" } }]);

  const oversized = new FakeCore();
  oversized.executeEvents = [{
    type: "outcome",
    outcome: outcome({
      kind: "completed",
      oversize: {
        messageBytes: 70_000_000,
        limit: 67_108_864,
        content: { payloadBytes: 0, shapes: new Map() },
      },
    }),
  }];
  const error = await rejection((async () => {
    for await (const _ of service(oversized).execute({} as Json, callContext())) { /* none */ }
  })());
  assert.ok(error instanceof ServerError);
  assert.equal(error.code, Status.OUT_OF_RANGE);
  assert.equal(
    error.details,
    "Error, encoded message length too large: found 70000000 bytes, the limit is: 67108864 bytes",
  );
});

Deno.test("wait: the request in core form with the caller's signal; live and missing cells in wire form", async () => {
  const core = new FakeCore();
  const context = callContext({ metadata: { traceparent: "tp" } });
  core.observation = { state: "liveCell", outcome: outcome({ kind: "yielded" }) };
  assert.deepEqual(
    await service(core).wait(
      { sessionId: SESSION, cellId: "1", waitId: "w", yieldTimeMs: "10", maxTokens: "20" } as Json,
      context,
    ),
    { liveCell: { cellId: "1", contentItems: [], codeModeHostDurationNs: 5, yielded: {} } },
  );
  const [{ request, signal }] = core.requests("wait");
  assert.equal(signal, context.signal);
  assert.deepEqual(request, {
    sessionId: SESSION,
    cellId: "1",
    waitId: "w",
    yieldTimeMs: 10n,
    maxTokens: 20n,
    traceparent: "tp",
  });
  core.observation = {
    state: "missingCell",
    outcome: outcome({ kind: "completed", cellId: "9", errorText: "exec cell 9 not found" }),
  };
  assert.deepEqual(await service(core).wait({} as Json, callContext()), {
    missingCell: {
      cellId: "9",
      contentItems: [],
      codeModeHostDurationNs: 5,
      completed: { errorText: "exec cell 9 not found" },
    },
  });
  assert.deepEqual(core.requests("wait")[1].request, {
    sessionId: "",
    cellId: "",
    waitId: "",
    yieldTimeMs: undefined,
    maxTokens: undefined,
    traceparent: undefined,
  });
});

Deno.test("wait and terminate: only a live cell's completion carries the result-buffered header", async () => {
  const cases: [ObservationResult, string | undefined][] = [
    [{ state: "liveCell", outcome: outcome({ kind: "completed", resultBufferedForNs: 1234 }) }, "1234"],
    [{ state: "liveCell", outcome: outcome({ kind: "completed", resultBufferedForNs: 0 }) }, "0"],
    [{ state: "liveCell", outcome: outcome({ kind: "completed" }) }, undefined],
    [{ state: "liveCell", outcome: outcome({ kind: "terminated", resultBufferedForNs: 5 }) }, undefined],
    [{ state: "missingCell", outcome: outcome({ kind: "completed", resultBufferedForNs: 5 }) }, undefined],
  ];
  for (const [observation, header] of cases) {
    for (const method of ["wait", "terminate"] as const) {
      const core = new FakeCore();
      core.observation = observation;
      const context = callContext();
      await service(core)[method]({ sessionId: SESSION, cellId: "1" } as Json, context);
      assert.equal(
        context.header.get(RESULT_BUFFERED_HEADER),
        header,
        `${method} ${JSON.stringify(observation)}`,
      );
    }
  }
});

Deno.test("terminate: the request in core form; an oversized outcome is OUT_OF_RANGE", async () => {
  const core = new FakeCore();
  core.observation = { state: "liveCell", outcome: outcome({ kind: "terminated" }) };
  assert.deepEqual(
    await service(core).terminate(
      { sessionId: SESSION, cellId: "2" } as Json,
      callContext({ metadata: { traceparent: "tp" } }),
    ),
    { liveCell: { cellId: "1", contentItems: [], codeModeHostDurationNs: 5, terminated: {} } },
  );
  assert.deepEqual(core.requests("terminate"), [{ sessionId: SESSION, cellId: "2", traceparent: "tp" }]);
  core.observation = {
    state: "liveCell",
    outcome: outcome({
      kind: "terminated",
      oversize: { messageBytes: 9, limit: 8, content: { payloadBytes: 0, shapes: new Map() } },
    }),
  };
  const error = await rejection(service(core).terminate({} as Json, callContext()));
  assert.ok(error instanceof ServerError);
  assert.equal(error.code, Status.OUT_OF_RANGE);
});

Deno.test("yieldObservation: the oneof becomes an execution, a wait, or no observation", async () => {
  const core = new FakeCore();
  const s = service(core);
  assert.deepEqual(
    await s.yieldObservation(
      { sessionId: SESSION, observation: "executionId", executionId: "e" } as Json,
      callContext(),
    ),
    {},
  );
  await s.yieldObservation({ sessionId: SESSION, observation: "waitId", waitId: "w" } as Json, callContext());
  await s.yieldObservation({} as Json, callContext());
  assert.deepEqual(core.requests("yieldObservation"), [
    { sessionId: SESSION, observation: { kind: "execution", executionId: "e" } },
    { sessionId: SESSION, observation: { kind: "wait", waitId: "w" } },
    { sessionId: "", observation: undefined },
  ]);
});

Deno.test("cancelWait, acknowledgeNotification and completeToolCall reach the core in its form", async () => {
  const core = new FakeCore();
  const s = service(core);
  assert.deepEqual(await s.cancelWait({ sessionId: SESSION, waitId: "w" } as Json, callContext()), {});
  assert.deepEqual(
    await s.acknowledgeNotification({ sessionId: SESSION, notificationId: "n" } as Json, callContext()),
    {},
  );
  const output = new TextEncoder().encode("42");
  await s.completeToolCall(
    {
      sessionId: SESSION,
      invocationId: "i-1",
      outcome: "succeeded",
      succeeded: { outputJson: output },
    } as Json,
    callContext(),
  );
  await s.completeToolCall(
    { sessionId: SESSION, invocationId: "i-2", outcome: "succeeded", succeeded: {} } as Json,
    callContext(),
  );
  await s.completeToolCall(
    { sessionId: SESSION, invocationId: "i-3", outcome: "failed", failed: { message: "no" } } as Json,
    callContext(),
  );
  await s.completeToolCall(
    { sessionId: SESSION, invocationId: "i-4", outcome: "failed", failed: {} } as Json,
    callContext(),
  );
  assert.deepEqual(await s.completeToolCall({} as Json, callContext()), {});
  assert.deepEqual(core.requests("cancelWait"), [{ sessionId: SESSION, waitId: "w" }]);
  assert.deepEqual(core.requests("acknowledgeNotification"), [{ sessionId: SESSION, notificationId: "n" }]);
  assert.deepEqual(core.requests("completeToolCall"), [
    { sessionId: SESSION, invocationId: "i-1", outcome: { type: "succeeded", outputJson: output } },
    { sessionId: SESSION, invocationId: "i-2", outcome: { type: "succeeded", outputJson: new Uint8Array() } },
    { sessionId: SESSION, invocationId: "i-3", outcome: { type: "failed", message: "no" } },
    { sessionId: SESSION, invocationId: "i-4", outcome: { type: "failed", message: "" } },
    { sessionId: "", invocationId: "", outcome: undefined },
  ]);
});

Deno.test("getProcessMetrics answers UNIMPLEMENTED with the reference's text", async () => {
  const error = await rejection(service(new FakeCore()).getProcessMetrics({} as Json, callContext()));
  assert.ok(error instanceof ServerError);
  assert.equal(error.code, Status.UNIMPLEMENTED);
  assert.equal(error.details, PROCESS_METRICS_UNSUPPORTED);
});

const CALL: ToolCall = {
  sessionId: SESSION,
  executionId: "e-1",
  cellId: "1",
  invocationId: "i-1",
  runtimeToolCallId: "r-1",
  toolName: { name: "echo" },
  toolKind: 1,
  sequence: 1,
};

Deno.test("subscribeToToolCalls: the header block goes out (named, for server.ts to empty) before any call; calls pass through; the subscription is closed at the end", async () => {
  const core = new FakeCore();
  const context = callContext();
  const calls = service(core).subscribeToToolCalls(
    { sessionId: SESSION, toolNames: [{ name: "echo" }, { name: "x", namespace: "ns" }] } as Json,
    context,
  )[Symbol.asyncIterator]();
  const first = calls.next();
  await Promise.resolve();
  assert.equal(context.headersSent, 1);
  assert.equal(context.header.get(SUBSCRIPTION_HEADER), "registered");
  assert.deepEqual(core.requests("subscribeToToolCalls"), [{
    sessionId: SESSION,
    toolNames: [{ name: "echo" }, { name: "x", namespace: "ns" }],
  }]);
  core.toolCalls.push(CALL);
  assert.deepEqual((await first).value, CALL);
  core.toolCalls.end();
  assert.equal((await calls.next()).done, true);
  assert.equal(core.subscriptionClosed, true);
});

Deno.test("subscribeToToolCalls with heartbeat_interval_s: a heartbeat whenever nothing was sent for the interval, none while calls flow", async () => {
  const core = new FakeCore();
  const abort = new AbortController();
  const calls = service(core).subscribeToToolCalls(
    { sessionId: SESSION, heartbeatIntervalS: 0.05 } as Json,
    callContext({ signal: abort.signal }),
  )[Symbol.asyncIterator]();
  // The interval is the thing under test: a 50 ms interval, nothing sent meanwhile.
  const started = performance.now();
  assert.deepEqual((await calls.next()).value, { sessionId: SESSION, heartbeat: {} });
  assert.ok(performance.now() - started >= 45, "not before the interval");
  core.toolCalls.push(CALL);
  assert.deepEqual((await calls.next()).value, CALL);
  assert.deepEqual((await calls.next()).value, { sessionId: SESSION, heartbeat: {} });
  abort.abort();
  assert.equal((await calls.next()).done, true);
  assert.equal(core.subscriptionClosed, true);
});

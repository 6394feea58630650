/**
 * The embedded provider's messages against the protobuf encoding they stand in for: what the
 * gRPC door would read from a client's request, and what a gRPC client would read from the door's
 * response, through the repository's own codec (`proto/loader.ts`).
 */
import assert from "node:assert/strict";
import { ServerError, Status } from "nice-grpc";
import { codeModeHostDefinition, UndecodableRequest } from "../proto/loader.ts";
import type { ExecutionOutcome as CoreOutcome, LeaseEvent } from "../host/core/code_mode_core.ts";
import { HostError } from "../host/core/errors.ts";
import {
  completionRequest,
  decodedExecuteEvent,
  decodedObservation,
  decodedOutcome,
  decodedSessionEvent,
  decodedToolCall,
  executeRequest,
  openSessionRequest,
  toolNameFilters,
  uint64,
  waitRequest,
  yieldRequest,
} from "./messages.ts";

const definition = codeModeHostDefinition();

/** What the gRPC door reads from what a client sends. */
function viaWire(method: string, request: unknown): unknown {
  const m = definition[method];
  return m.requestDeserialize(m.requestSerialize(request));
}

/** What a gRPC client reads from what the door sends. */
function responseViaWire(method: string, response: unknown): unknown {
  const m = definition[method];
  return m.responseDeserialize(m.responseSerialize(response));
}

/** Bytes as plain `Uint8Array`s (the decoder gives `Buffer`s), for deep equality. */
function plain(value: unknown): unknown {
  if (value instanceof Uint8Array) return new Uint8Array(value);
  if (Array.isArray(value)) return value.map(plain);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  }
  return value;
}

const NUMBERS = [
  0,
  -0,
  1,
  1.7,
  99.999,
  -1,
  -1.5,
  2 ** 31,
  2 ** 32 + 5,
  2 ** 53 - 1,
  2 ** 64,
  2 ** 70,
  -(2 ** 63),
  NaN,
];
const MORE_NUMBERS = [...NUMBERS, Infinity, -Infinity, 4_294_967_296.5, -4_294_967_297];

Deno.test("a 64-bit request field reads as protobufjs writes a JS number", () => {
  for (const n of MORE_NUMBERS) {
    const decoded = viaWire("execute", { yieldTimeMs: n }) as { yieldTimeMs?: string };
    assert.equal(uint64(n), BigInt(decoded.yieldTimeMs!), String(n));
  }
  assert.equal(uint64(undefined), undefined);
});

Deno.test("OpenSession: limits, delegate capacity and mode as the gRPC door reads them", () => {
  for (const n of NUMBERS) {
    const request = {
      cellExecutionLimits: { maxYieldTimeMs: n, maxHeapSizeBytes: n },
      maxPendingDelegateCalls: n,
    };
    const decoded = viaWire("openSession", request) as {
      cellExecutionLimits: { maxYieldTimeMs: string; maxHeapSizeBytes: string };
      maxPendingDelegateCalls: number;
    };
    if (decoded.maxPendingDelegateCalls === 0) {
      assert.throws(() => openSessionRequest(request), { message: "callback capacity must be positive" });
      continue;
    }
    assert.deepEqual(openSessionRequest(request), {
      outputMode: "client",
      maxYieldTimeMs: BigInt(decoded.cellExecutionLimits.maxYieldTimeMs),
      maxHeapSizeBytes: BigInt(decoded.cellExecutionLimits.maxHeapSizeBytes),
      maxPendingDelegateCalls: decoded.maxPendingDelegateCalls,
      traceparent: undefined,
    }, String(n));
  }
  for (const n of [...NUMBERS, 2, 2.5, 3, 2 ** 32 + 2, 2 ** 31 + 1]) {
    const mode =
      (viaWire("openSession", { outputTruncation: n }) as { outputTruncation: number }).outputTruncation;
    if (mode === 0 || mode === 1 || mode === 2) {
      assert.equal(
        openSessionRequest({ outputTruncation: n }).outputMode,
        mode === 2 ? "server" : "client",
        String(n),
      );
    } else {
      assert.throws(
        () => openSessionRequest({ outputTruncation: n }),
        (e) => e instanceof HostError && e.message === "unknown code-mode output truncation mode",
        String(n),
      );
    }
  }
  assert.deepEqual(openSessionRequest({}, "00-t"), {
    outputMode: "client",
    maxYieldTimeMs: undefined,
    maxHeapSizeBytes: undefined,
    maxPendingDelegateCalls: undefined,
    traceparent: "00-t",
  });
});

Deno.test("Execute, Wait, YieldObservation, CompleteToolCall: fields as the gRPC door reads them", () => {
  const tool = {
    name: "t",
    toolName: { name: "n", namespace: "" },
    description: "",
    kind: 1,
    inputSchemaJson: new TextEncoder().encode("{}"),
  };
  const execute = {
    sessionId: "s",
    executionId: "e",
    toolCallId: "c",
    source: "",
    enabledTools: [tool, { name: "", toolName: { name: "" }, kind: 2 }],
    yieldTimeMs: 5,
    catalogRevision: 3,
  };
  const wire = viaWire("execute", execute) as Record<string, unknown> & {
    enabledTools: { name?: string; toolName?: { name?: string; namespace?: string } }[];
  };
  assert.deepEqual(plain(executeRequest(execute)), {
    sessionId: "s",
    executionId: "e",
    toolCallId: "c",
    source: "",
    enabledTools: [
      { ...tool, toolName: { name: "n", namespace: "" }, outputSchemaJson: undefined },
      {
        name: "",
        toolName: { name: "" },
        description: undefined,
        kind: 2,
        inputSchemaJson: undefined,
        outputSchemaJson: undefined,
      },
    ],
    yieldTimeMs: 5n,
    maxOutputTokens: undefined,
    catalogRevision: 3n,
    traceparent: undefined,
  });
  // The wire keeps the namespace's presence (proto3 optional), as the conversion does.
  assert.equal(wire.enabledTools[0].toolName?.namespace, "");
  assert.equal(wire.enabledTools[1].toolName?.namespace, undefined);

  assert.deepEqual(waitRequest({ sessionId: "s", cellId: "1", waitId: "w", yieldTimeMs: 0 }), {
    sessionId: "s",
    cellId: "1",
    waitId: "w",
    yieldTimeMs: 0n,
    maxTokens: undefined,
    traceparent: undefined,
  });
  assert.deepEqual(yieldRequest({ sessionId: "s", executionId: "" }), {
    sessionId: "s",
    observation: { kind: "execution", executionId: "" },
  });
  assert.deepEqual(yieldRequest({ sessionId: "s", waitId: "w" }), {
    sessionId: "s",
    observation: { kind: "wait", waitId: "w" },
  });
  assert.deepEqual(yieldRequest({ sessionId: "s" }), { sessionId: "s", observation: undefined });
  assert.deepEqual(completionRequest({ sessionId: "s", invocationId: "i", succeeded: {} }), {
    sessionId: "s",
    invocationId: "i",
    outcome: { type: "succeeded", outputJson: new Uint8Array() },
  });
  assert.deepEqual(completionRequest({ sessionId: "s", invocationId: "i", failed: {} }), {
    sessionId: "s",
    invocationId: "i",
    outcome: { type: "failed", message: "" },
  });
  assert.deepEqual(completionRequest({}), { sessionId: "", invocationId: "", outcome: undefined });
});

Deno.test("a request text with a lone surrogate is refused with the gRPC door's INTERNAL text", () => {
  const bad = "a\uD800";
  const cases: [string, Record<string, unknown>, () => unknown][] = [];
  const add = (method: string, request: Record<string, unknown>, convert: (r: never) => unknown) =>
    cases.push([method, request, () => convert(request as never)]);
  const tool = (name: string, toolName: Record<string, string>, description = "") => ({
    name,
    toolName,
    description,
    kind: 1,
  });
  add("execute", { sessionId: bad, source: bad }, executeRequest);
  add("execute", { sessionId: "s", toolCallId: "c", source: bad }, executeRequest);
  add(
    "execute",
    { sessionId: "s", enabledTools: [tool("a", { name: "b" }), tool(bad, { name: "b" })] },
    executeRequest,
  );
  add("execute", { sessionId: "s", enabledTools: [tool("a", { name: bad })] }, executeRequest);
  add(
    "execute",
    { sessionId: "s", enabledTools: [tool("a", { name: "b", namespace: bad })] },
    executeRequest,
  );
  add("execute", { sessionId: "s", enabledTools: [tool("a", { name: "b" }, bad)] }, executeRequest);
  add("wait", { sessionId: "s", cellId: bad, waitId: bad }, waitRequest);
  add("yieldObservation", { sessionId: "s", waitId: bad }, yieldRequest);
  add("yieldObservation", { sessionId: "s", executionId: bad }, yieldRequest);
  add("completeToolCall", { sessionId: "s", invocationId: "i", failed: { message: bad } }, completionRequest);
  add("completeToolCall", { sessionId: "s", invocationId: bad, failed: { message: bad } }, completionRequest);
  add(
    "subscribeToToolCalls",
    { sessionId: "s", toolNames: [{ name: "x" }, { name: "y", namespace: bad }] },
    (r: { sessionId?: string; toolNames?: { name: string }[] }) => toolNameFilters(r.sessionId, r.toolNames),
  );
  for (const [method, request, convert] of cases) {
    const refusal = viaWire(method, request);
    assert.ok(refusal instanceof UndecodableRequest, `${method} ${JSON.stringify(request)}`);
    assert.throws(convert, (error) => {
      assert.ok(error instanceof ServerError);
      assert.equal(error.code, Status.INTERNAL);
      assert.equal(error.details, refusal.detail);
      return true;
    });
  }
});

/** Asserts that `message` is exactly what a gRPC client decodes from it. */
function assertDecoded(method: string, message: unknown): void {
  assert.deepEqual(plain(responseViaWire(method, message)), plain(message));
}

const OUTCOMES: CoreOutcome[] = [
  { cellId: "1", contentItems: [], hostDurationNs: 0, kind: "yielded" },
  {
    cellId: "1",
    contentItems: [{ text: { text: "" } }, { text: { text: "x" } }],
    hostDurationNs: 12,
    kind: "terminated",
  },
  {
    cellId: "2",
    contentItems: [{ image: { imageUrl: "data:,", detail: 0 } }, { audio: { audioUrl: "" } }],
    hostDurationNs: 2 ** 40,
    kind: "completed",
  },
  {
    cellId: "2",
    contentItems: [],
    hostDurationNs: 1,
    kind: "completed",
    errorText: "",
    resultBufferedForNs: 5,
  },
  { cellId: "3", contentItems: [], hostDurationNs: 1, kind: "completed", errorText: "boom" },
];

Deno.test("outcomes, Execute events and Wait answers are what a gRPC client decodes", () => {
  for (const outcome of OUTCOMES) {
    assertDecoded("execute", decodedExecuteEvent({ type: "outcome", outcome }));
    assertDecoded("wait", decodedObservation({ state: "liveCell", outcome }));
    assertDecoded("terminate", decodedObservation({ state: "missingCell", outcome }));
  }
  assertDecoded("execute", decodedExecuteEvent({ type: "started", executionId: "e", cellId: "1" }));
  assert.deepEqual(decodedOutcome(OUTCOMES[2]).codeModeHostDurationNs, String(2 ** 40));
  assert.deepEqual(decodedOutcome(OUTCOMES[3]).completed, { errorText: "", _errorText: "errorText" });
});

Deno.test("an outcome too large for a gRPC message fails OUT_OF_RANGE with the gRPC door's text", () => {
  const oversize = { messageBytes: 70, limit: 64, content: { payloadBytes: 0, shapes: new Map() } };
  assert.throws(() => decodedOutcome({ ...OUTCOMES[0], oversize }), (error: unknown) => {
    assert.ok(error instanceof ServerError);
    assert.equal(error.code, Status.OUT_OF_RANGE);
    assert.equal(
      error.details,
      "Error, encoded message length too large: found 70 bytes, the limit is: 64 bytes",
    );
    return true;
  });
});

Deno.test("lease events and tool calls are what a gRPC client decodes", () => {
  const events: LeaseEvent[] = [
    { type: "opened", sessionId: "s", outputMode: "client" },
    { type: "opened", sessionId: "s", outputMode: "server" },
    { type: "toolCallCancelled", invocationId: "i" },
    { type: "notification", notificationId: "n", executionId: "e", cellId: "1", callId: "c", text: "" },
    { type: "cellClosed", executionId: "e", cellId: "1", finalToolCallSequence: 0 },
    { type: "cellClosed", executionId: "e", cellId: "1", finalToolCallSequence: 7 },
  ];
  for (const event of events) assertDecoded("openSession", decodedSessionEvent(event));
  const call = {
    sessionId: "s",
    executionId: "e",
    cellId: "1",
    invocationId: "i",
    runtimeToolCallId: "tool-1",
    toolName: { name: "n" },
    toolKind: 1,
    sequence: 1,
  };
  assertDecoded("subscribeToToolCalls", decodedToolCall(call));
  assertDecoded(
    "subscribeToToolCalls",
    decodedToolCall({
      ...call,
      toolName: { name: "n", namespace: "" },
      inputJson: new Uint8Array(),
      sequence: 0,
      traceparent: "",
    }),
  );
});

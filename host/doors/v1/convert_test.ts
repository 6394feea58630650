import assert from "node:assert/strict";
import {
  parseClientMessage,
  parseExecute,
  parseHello,
  parseRequest,
  runtimeResponse,
  toolInvoke,
  waitOutcome,
  WireError,
} from "./convert.ts";
import { TOOL_KIND_FREEFORM, TOOL_KIND_FUNCTION } from "../../core/code_mode_core.ts";

Deno.test("parseHello() checks versions and capabilities and rejects unknown fields", () => {
  const hello = {
    type: "connection/hello",
    supportedVersions: [1, 2],
    requiredCapabilities: [],
    optionalCapabilities: ["a"],
  };
  assert.deepEqual(parseHello(hello), {
    supportedVersions: [1, 2],
    requiredCapabilities: [],
    optionalCapabilities: ["a"],
  });
  for (
    const bad of [
      { ...hello, supportedVersions: [] },
      { ...hello, supportedVersions: [1, 1] },
      { ...hello, supportedVersions: [0] },
      { ...hello, requiredCapabilities: [" "] },
      { ...hello, requiredCapabilities: ["a"] },
      { ...hello, optionalCapabilities: ["a", "a"] },
      { ...hello, extra: 1 },
      { type: "connection/hello", supportedVersions: [1], requiredCapabilities: [] },
    ]
  ) assert.throws(() => parseHello(bad), WireError, JSON.stringify(bad));
});

Deno.test("parseClientMessage() reads each envelope and rejects unknown types and fields", () => {
  assert.deepEqual(parseClientMessage({ type: "operation/cancel", id: 3 }), {
    type: "operation/cancel",
    id: 3,
  });
  assert.deepEqual(
    parseClientMessage({
      type: "delegate/response",
      id: 1,
      result: { status: "ok", value: { type: "tool/result", result: [1] } },
    }),
    {
      type: "delegate/response",
      id: 1,
      result: { status: "ok", value: { type: "tool/result", result: [1] } },
    },
  );
  assert.throws(() => parseClientMessage({ type: "operation/cancel", id: 3, x: 1 }), /unknown field `x`/);
  assert.throws(() => parseClientMessage({ type: "operation/cancel", id: 1.5 }), /id must be an integer/);
  assert.throws(() => parseClientMessage({ type: "nope" }), /unknown message type "nope"/);
  assert.throws(() => parseClientMessage([]), /message must be an object/);
  assert.throws(
    () =>
      parseClientMessage({
        type: "delegate/response",
        id: 1,
        result: { status: "ok", value: { type: "tool/result" } },
      }),
    /missing field `result`/,
  );
});

Deno.test("parseRequest() reads the five methods; limits only when granted", () => {
  assert.deepEqual(parseRequest({ method: "session/open", sessionId: "s" }, false), {
    method: "session/open",
    sessionId: "s",
  });
  assert.deepEqual(
    parseRequest(
      { method: "session/open", sessionId: "s", cellExecutionLimits: { max_yield_time_ms: 5 } },
      true,
    ),
    { method: "session/open", sessionId: "s", limits: { maxYieldTimeMs: 5n, maxHeapSizeBytes: undefined } },
  );
  assert.throws(
    () => parseRequest({ method: "session/open", sessionId: "s", cellExecutionLimits: {} }, false),
    WireError,
  );
  assert.throws(
    () => parseRequest({ method: "session/open", sessionId: "s", cellExecutionLimits: { other: 1 } }, true),
    { name: "LimitsError", message: "unknown field `other` in cellExecutionLimits" },
  );
  assert.deepEqual(
    parseRequest(
      { method: "session/wait", sessionId: "s", request: { cell_id: "1", yield_time_ms: 9 } },
      false,
    ),
    { method: "session/wait", sessionId: "s", cellId: "1", yieldTimeMs: 9n },
  );
  assert.deepEqual(parseRequest({ method: "session/terminate", sessionId: "s", cellId: "2" }, false), {
    method: "session/terminate",
    sessionId: "s",
    cellId: "2",
  });
  assert.throws(
    () => parseRequest({ method: "session/wait", sessionId: "s", request: { cell_id: "1", x: 0 } }, false),
    WireError,
  );
  assert.throws(() => parseRequest({ method: "session/list" }, false), /unknown request method/);
});

Deno.test("parseExecute() converts tools and bounds max_output_tokens", () => {
  const request = parseExecute("s", "e", {
    tool_call_id: "c",
    source: "text(1)",
    enabled_tools: [
      {
        name: "a",
        tool_name: { name: "a", namespace: "ns" },
        description: "d",
        kind: "freeform",
        input_schema: { type: "string" },
        output_schema: null,
      },
      { name: "b", tool_name: { name: "b" }, kind: "function" },
    ],
    yield_time_ms: null,
    max_output_tokens: 2 ** 31 - 1,
  });
  assert.equal(request.maxOutputTokens, 2147483647n);
  assert.equal(request.yieldTimeMs, undefined);
  assert.deepEqual(request.enabledTools![0], {
    name: "a",
    toolName: { name: "a", namespace: "ns" },
    description: "d",
    kind: TOOL_KIND_FREEFORM,
    inputSchemaJson: new TextEncoder().encode('{"type":"string"}'),
    outputSchemaJson: undefined,
  });
  assert.equal(request.enabledTools![1].kind, TOOL_KIND_FUNCTION);
  const base = { tool_call_id: "c", source: "" };
  assert.throws(() => parseExecute("s", "e", { ...base, max_output_tokens: -1 }), /max_output_tokens/);
  assert.throws(() => parseExecute("s", "e", { ...base, max_output_tokens: 2 ** 31 }), /max_output_tokens/);
  assert.throws(() => parseExecute("s", "e", { ...base, surprise: 1 }), /unknown field `surprise`/);
  assert.throws(
    () =>
      parseExecute("s", "e", {
        ...base,
        enabled_tools: [{ name: "a", tool_name: { name: "a" }, kind: "other" }],
      }),
    /kind must be/,
  );
});

Deno.test("runtime responses and wait outcomes are externally tagged with snake_case items", () => {
  const items = [{ text: { text: "t" } }, { image: { imageUrl: "data:x", detail: 2 } }, {
    image: { imageUrl: "u", detail: 0 },
  }];
  const out = (kind: "yielded" | "terminated" | "completed", errorText?: string) =>
    runtimeResponse({ cellId: "1", contentItems: items, hostDurationNs: 0, kind, errorText } as never);
  const wireItems = [
    { type: "input_text", text: "t" },
    { type: "input_image", image_url: "data:x", detail: "low" },
    { type: "input_image", image_url: "u" },
  ];
  assert.deepEqual(out("yielded"), { Yielded: { cell_id: "1", content_items: wireItems } });
  assert.deepEqual(out("terminated"), { Terminated: { cell_id: "1", content_items: wireItems } });
  assert.deepEqual(out("completed"), {
    Result: { cell_id: "1", content_items: wireItems, error_text: null },
  });
  assert.deepEqual(out("completed", "boom").Result, {
    cell_id: "1",
    content_items: wireItems,
    error_text: "boom",
  });
  const outcome = {
    cellId: "9",
    contentItems: [],
    hostDurationNs: 0,
    kind: "completed" as const,
    errorText: "exec cell 9 not found",
  };
  assert.deepEqual(waitOutcome({ state: "missingCell", outcome }), {
    MissingCell: { Result: { cell_id: "9", content_items: [], error_text: "exec cell 9 not found" } },
  });
  assert.ok("LiveCell" in waitOutcome({ state: "liveCell", outcome }));
});

Deno.test("toolInvoke() names the cell, the runtime call ID, the tool and its parsed input", () => {
  const call = {
    sessionId: "s",
    executionId: "e",
    cellId: "2",
    invocationId: "i",
    runtimeToolCallId: "tool-1",
    toolName: { name: "t" },
    toolKind: TOOL_KIND_FUNCTION,
    inputJson: new TextEncoder().encode('{"a":[1]}'),
    sequence: 1,
  };
  assert.deepEqual(toolInvoke(call), {
    type: "tool/invoke",
    invocation: {
      cell_id: "2",
      runtime_tool_call_id: "tool-1",
      tool_name: { name: "t", namespace: null },
      tool_kind: "function",
      input: { a: [1] },
    },
  });
  assert.equal(
    (toolInvoke({ ...call, inputJson: undefined, toolKind: TOOL_KIND_FREEFORM }) as {
      invocation: { tool_kind: string };
    })
      .invocation.tool_kind,
    "freeform",
  );
});

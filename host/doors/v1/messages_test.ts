import assert from "node:assert/strict";
import { TOOL_KIND_FREEFORM, TOOL_KIND_FUNCTION } from "../../core/code_mode_core.ts";
import { decodeClientMessage, KNOWN_CAPABILITIES } from "./client_messages.ts";
import { runtimeResponse, toolInvoke, waitOutcome, wireContentItems, wireId } from "./host_messages.ts";
import { DecodeError, parseJson } from "./serde.ts";

/** Decodes a frame's JSON text as the connection does. */
const decode = (text: string) => decodeClientMessage(parseJson(new TextEncoder().encode(text)), text);
const decodeValue = (value: unknown) => decode(JSON.stringify(value));

/** Every text here is what Codex's own host (0.171) wrote to stderr for the same frame. */
function refused(value: unknown, message: string): void {
  assert.throws(() => typeof value === "string" ? decode(value) : decodeValue(value), (error) => {
    assert.ok(error instanceof DecodeError, String(error));
    assert.equal(error.message, message);
    return true;
  });
}

const HELLO = {
  type: "connection/hello",
  supportedVersions: [1],
  requiredCapabilities: [],
  optionalCapabilities: [...KNOWN_CAPABILITIES],
};

Deno.test("the known capabilities are Codex 0.171's five, in the reference's order", () => {
  assert.deepEqual(KNOWN_CAPABILITIES, [
    "bounded-output-v1",
    "delegate-capacity-4096",
    "session-cell-execution-resource-limits",
    "tool-catalog-revision-v1",
    "yield-observation",
  ]);
});

Deno.test("decodeClientMessage() reads a hello and refuses what the reference refuses, with its texts", () => {
  assert.deepEqual(decodeValue(HELLO), {
    type: "connection/hello",
    hello: {
      supportedVersions: [1],
      requiredCapabilities: [],
      optionalCapabilities: [...KNOWN_CAPABILITIES],
    },
  });
  refused({ ...HELLO, supportedVersions: [] }, "at least one protocol version is required");
  refused({ ...HELLO, supportedVersions: [1, 1] }, "duplicate protocol version 1");
  refused({ ...HELLO, supportedVersions: [0, 1] }, "invalid value: integer `0`, expected a nonzero u32");
  refused({ ...HELLO, optionalCapabilities: ["a", "a"] }, "duplicate capability `a`");
  refused(
    { ...HELLO, requiredCapabilities: ["a"], optionalCapabilities: ["a"] },
    "capability `a` cannot be both required and optional",
  );
  refused({ ...HELLO, optionalCapabilities: [" "] }, "identifier must not be empty");
  refused({ ...HELLO, optionalCapabilities: [""] }, "identifier must not be empty");
  refused(
    { type: "connection/hello", supportedVersions: [1], requiredCapabilities: [] },
    "missing field `optionalCapabilities`",
  );
  refused(
    { ...HELLO, x: 1 },
    "unknown field `x`, expected one of `supportedVersions`, `requiredCapabilities`, `optionalCapabilities`",
  );
  // The top-level tag's errors name a position, as serde_json's streaming decoder does.
  refused("[1]", "invalid type: integer `1`, expected variant identifier at line 1 column 2");
  refused(
    '{"supportedVersions":[1],"requiredCapabilities":[],"optionalCapabilities":[]}',
    "missing field `type` at line 1 column 77",
  );
  refused(
    '{"type":"what"}',
    "unknown variant `what`, expected one of `connection/hello`, `operation/request`, `operation/cancel`, `operation/yield`, `delegate/response` at line 1 column 14",
  );
  refused('{"id":1}', "missing field `type` at line 1 column 8");
  refused("", "EOF while parsing a value at line 1 column 0");
});

Deno.test("decodeClientMessage() reads the five methods as Codex sends them", () => {
  assert.deepEqual(
    decodeValue({
      type: "operation/request",
      id: 1,
      request: { method: "session/open", sessionId: "session-1", outputTruncation: "server" },
    }),
    {
      type: "operation/request",
      id: 1n,
      request: { method: "session/open", sessionId: "session-1", outputTruncation: "server" },
    },
  );
  assert.deepEqual(
    decodeValue({
      type: "operation/request",
      id: 2,
      request: {
        method: "session/open",
        sessionId: " s ",
        cellExecutionLimits: { maxYieldTimeMs: 5, maxHeapSizeBytes: null },
        outputTruncation: null,
      },
    }),
    {
      type: "operation/request",
      id: 2n,
      request: {
        method: "session/open",
        sessionId: " s ",
        limits: { maxYieldTimeMs: 5n, maxHeapSizeBytes: undefined },
      },
    },
  );
  assert.deepEqual(
    decodeValue({
      type: "operation/request",
      id: -3,
      request: {
        method: "session/wait",
        sessionId: "s",
        request: { cell_id: "", yield_time_ms: 2000 },
        maxOutputTokens: 20,
      },
    }),
    {
      type: "operation/request",
      id: -3n,
      request: {
        method: "session/wait",
        sessionId: "s",
        cellId: "",
        yieldTimeMs: 2000n,
        maxOutputTokens: 20n,
      },
    },
  );
  assert.deepEqual(
    decodeValue({
      type: "operation/request",
      id: 4,
      request: { method: "session/terminate", sessionId: "s", cellId: "1", maxOutputTokens: 5 },
    }).type,
    "operation/request",
  );
  assert.deepEqual(
    decodeValue({
      type: "operation/request",
      id: 5,
      request: { method: "session/shutdown", sessionId: "s" },
    }),
    { type: "operation/request", id: 5n, request: { method: "session/shutdown", sessionId: "s" } },
  );
});

Deno.test("decodeClientMessage() reads an execute: catalog revision, tools, i32 token budget", () => {
  const message = decodeValue({
    type: "operation/request",
    id: 2,
    request: {
      method: "session/execute",
      sessionId: "session-1",
      request: {
        catalog_revision: 1,
        tool_call_id: "call-1",
        enabled_tools: [
          {
            name: "a",
            tool_name: { name: "a", namespace: "ns" },
            description: "d",
            kind: "freeform",
            input_schema: { type: "string" },
            output_schema: null,
          },
          { name: "", tool_name: { name: "" }, description: "", kind: "function" },
        ],
        source: "text(1)",
        yield_time_ms: 100,
        max_output_tokens: -1,
      },
    },
  });
  assert.equal(message.type, "operation/request");
  if (message.type !== "operation/request" || message.request.method !== "session/execute") return;
  const fields = message.request.request;
  assert.equal(fields.catalogRevision, 1n);
  assert.equal(fields.toolCallId, "call-1");
  assert.equal(fields.yieldTimeMs, 100n);
  assert.equal(fields.maxOutputTokens, -1);
  assert.deepEqual(fields.enabledTools[0], {
    name: "a",
    toolName: { name: "a", namespace: "ns" },
    description: "d",
    kind: TOOL_KIND_FREEFORM,
    inputSchemaJson: new TextEncoder().encode('{"type":"string"}'),
    outputSchemaJson: undefined,
  });
  assert.deepEqual(fields.enabledTools[1], {
    name: "",
    toolName: { name: "" },
    description: "",
    kind: TOOL_KIND_FUNCTION,
  });
  // No revision, nulls for the optional numbers.
  const plain = decodeValue({
    type: "operation/request",
    id: 3,
    request: {
      method: "session/execute",
      sessionId: "s",
      request: {
        tool_call_id: "",
        enabled_tools: [],
        source: "",
        yield_time_ms: null,
        max_output_tokens: null,
      },
    },
  });
  if (plain.type === "operation/request" && plain.request.method === "session/execute") {
    assert.deepEqual(plain.request.request, {
      toolCallId: "",
      enabledTools: [],
      source: "",
      yieldTimeMs: undefined,
      maxOutputTokens: undefined,
    });
  } else assert.fail("not an execute");
});

Deno.test("decodeClientMessage() refuses malformed requests with serde's texts", () => {
  const execute = (request: Record<string, unknown>) => ({
    type: "operation/request",
    id: 2,
    request: { method: "session/execute", sessionId: "s", request },
  });
  const base = {
    tool_call_id: "c",
    enabled_tools: [],
    source: "",
    yield_time_ms: 1,
    max_output_tokens: null,
  };
  const tool = { name: "a", tool_name: { name: "a", namespace: null }, description: "", kind: "function" };
  refused(
    execute({ ...base, bogus: 1 }),
    "unknown field `bogus`, expected one of `catalog_revision`, `tool_call_id`, `enabled_tools`, `source`, `yield_time_ms`, `max_output_tokens`",
  );
  refused(execute({ tool_call_id: "c", enabled_tools: [] }), "missing field `source`");
  refused(execute({ tool_call_id: "c", source: "" }), "missing field `enabled_tools`");
  refused(execute({ ...base, enabled_tools: null }), "invalid type: null, expected a sequence");
  refused(execute({ ...base, catalog_revision: -1 }), "invalid value: integer `-1`, expected u64");
  refused(execute({ ...base, catalog_revision: "1" }), 'invalid type: string "1", expected u64');
  refused(execute({ ...base, catalog_revision: 1.5 }), "invalid type: map, expected u64");
  refused(execute({ ...base, yield_time_ms: -1 }), "invalid value: integer `-1`, expected u64");
  refused(
    execute({ ...base, max_output_tokens: 2 ** 31 }),
    "invalid value: integer `2147483648`, expected i32",
  );
  refused(
    execute({ ...base, enabled_tools: [{ ...tool, description: null }] }),
    "invalid type: null, expected a string",
  );
  refused(
    execute({ ...base, enabled_tools: [{ ...tool, kind: "x" }] }),
    "unknown variant `x`, expected `function` or `freeform`",
  );
  refused(
    execute({ ...base, enabled_tools: [{ ...tool, x: 1 }] }),
    "unknown field `x`, expected one of `name`, `tool_name`, `description`, `kind`, `input_schema`, `output_schema`",
  );
  refused(
    execute({ ...base, enabled_tools: [{ ...tool, tool_name: { name: "a", x: 1 } }] }),
    "unknown field `x`, expected `name` or `namespace`",
  );
  refused(
    { type: "operation/request", id: 1, request: { method: "session/open", sessionId: "s", bogus: 1 } },
    "unknown field `bogus`, expected one of `sessionId`, `cellExecutionLimits`, `outputTruncation`",
  );
  refused(
    {
      type: "operation/request",
      id: 1,
      request: { method: "session/open", sessionId: "s", cellExecutionLimits: { max_yield_time_ms: 1 } },
    },
    "unknown field `max_yield_time_ms`, expected `maxYieldTimeMs` or `maxHeapSizeBytes`",
  );
  refused(
    {
      type: "operation/request",
      id: 1,
      request: { method: "session/open", sessionId: "s", outputTruncation: "x" },
    },
    "unknown variant `x`, expected `client` or `server`",
  );
  refused(
    { type: "operation/request", id: 1, request: { method: "session/open", sessionId: "  " } },
    "identifier must not be empty",
  );
  refused(
    {
      type: "operation/request",
      id: 1,
      request: { method: "session/wait", sessionId: "s", request: { cell_id: "1", yield_time_ms: 1, x: 1 } },
    },
    "unknown field `x`, expected `cell_id` or `yield_time_ms`",
  );
  refused(
    {
      type: "operation/request",
      id: 1,
      request: { method: "session/wait", sessionId: "s", request: { cell_id: "1" } },
    },
    "missing field `yield_time_ms`",
  );
  refused(
    {
      type: "operation/request",
      id: 1,
      request: {
        method: "session/wait",
        sessionId: "s",
        request: { cell_id: "1", yield_time_ms: 1 },
        maxOutputTokens: -1,
      },
    },
    "invalid value: integer `-1`, expected usize",
  );
  refused(
    {
      type: "operation/request",
      id: 1,
      request: { method: "session/terminate", sessionId: "s", cellId: "1", x: 1 },
    },
    "unknown field `x`, expected one of `sessionId`, `cellId`, `maxOutputTokens`",
  );
  refused(
    {
      type: "operation/request",
      id: 1,
      request: { method: "session/shutdown", sessionId: "s", maxOutputTokens: 1 },
    },
    "unknown field `maxOutputTokens`, expected `sessionId`",
  );
  refused(
    { type: "operation/request", id: 1, request: { method: "session/what", sessionId: "s" } },
    "unknown variant `session/what`, expected one of `session/open`, `session/execute`, `session/wait`, `session/terminate`, `session/shutdown`",
  );
  refused({ type: "operation/request", id: 1, request: { sessionId: "s" } }, "missing field `method`");
  refused(
    { type: "operation/request", id: 1, request: 5 },
    "invalid type: integer `5`, expected internally tagged enum HostRequest",
  );
  refused(
    { type: "operation/request", request: { method: "session/shutdown", sessionId: "s" } },
    "missing field `id`",
  );
  refused(
    { type: "operation/request", id: 1, request: { method: "session/shutdown", sessionId: "s" }, x: 1 },
    "unknown field `x`, expected `id` or `request`",
  );
  // Fields are read in the message's order: a bad value before an unknown field is the error.
  refused({ type: "operation/request", id: 1, request: {}, x: 1 }, "missing field `method`");
  refused({ type: "operation/cancel", id: "1" }, 'invalid type: string "1", expected i64');
});

Deno.test("decodeClientMessage() keeps request IDs and revisions exact to 64 bits", () => {
  const open = (id: string) =>
    `{"type":"operation/request","id":${id},"request":{"method":"session/shutdown","sessionId":"s"}}`;
  for (const id of ["9007199254740993", "9223372036854775807", "-9223372036854775808"]) {
    const message = decode(open(id));
    assert.equal(message.type === "operation/request" && message.id, BigInt(id));
    assert.equal(JSON.stringify({ id: wireId(BigInt(id)) }), `{"id":${id}}`);
  }
  refused(open("9223372036854775808"), "invalid value: integer `9223372036854775808`, expected i64");
  refused(open("18446744073709551615"), "invalid type: map, expected i64");
  const execute = (revision: string) =>
    `{"type":"operation/request","id":1,"request":{"method":"session/execute","sessionId":"s","request":{"catalog_revision":${revision},"tool_call_id":"c","enabled_tools":[],"source":"","yield_time_ms":null,"max_output_tokens":null}}}`;
  const big = decode(execute("18446744073709551614"));
  assert.ok(big.type === "operation/request" && big.request.method === "session/execute");
  assert.equal(big.request.request.catalogRevision, 18446744073709551614n);
  refused(execute("1.0"), "invalid type: map, expected u64");
  refused(execute("1e2"), "invalid type: map, expected u64");
});

Deno.test("decodeClientMessage() reads delegate responses; a notification's extra fields are ignored", () => {
  assert.deepEqual(
    decodeValue({
      type: "delegate/response",
      id: 1,
      result: { status: "ok", value: { type: "tool/result", result: [1] } },
    }),
    {
      type: "delegate/response",
      id: 1n,
      result: { status: "ok", value: { type: "tool/result", result: [1] } },
    },
  );
  assert.deepEqual(
    decodeValue({
      type: "delegate/response",
      id: 2,
      result: { status: "ok", value: { type: "notification/delivered", x: 1 } },
    }),
    {
      type: "delegate/response",
      id: 2n,
      result: { status: "ok", value: { type: "notification/delivered" } },
    },
  );
  assert.deepEqual(
    decodeValue({ type: "delegate/response", id: -1, result: { status: "error", message: "m" } }),
    { type: "delegate/response", id: -1n, result: { status: "error", message: "m" } },
  );
  const response = (result: unknown) => ({ type: "delegate/response", id: 1, result });
  refused(response({ status: "ok", value: { type: "tool/result" } }), "missing field `result`");
  refused(
    response({ status: "ok", value: { type: "tool/result", result: 1, x: 1 } }),
    "unknown field `x`, expected `result`",
  );
  refused(
    response({ status: "ok", value: { type: "tool/result", result: 1 }, x: 1 }),
    "unknown field `x`, expected `value`",
  );
  refused(response({ status: "error", message: "m", x: 1 }), "unknown field `x`, expected `message`");
  refused(response({ status: "what" }), "unknown variant `what`, expected `ok` or `error`");
  refused(
    response({ status: "ok", value: { type: "what" } }),
    "unknown variant `what`, expected `tool/result` or `notification/delivered`",
  );
  refused(
    { type: "delegate/response", id: 1, result: { status: "error", message: "m" }, x: 1 },
    "unknown field `x`, expected `id` or `result`",
  );
  // A tool result keeps its numbers' exact text when it is passed on.
  const exact = decode(
    '{"type":"delegate/response","id":1,"result":{"status":"ok","value":{"type":"tool/result","result":{"n":12345678901234567890,"f":1.50}}}}',
  );
  assert.ok(
    exact.type === "delegate/response" && exact.result.status === "ok" &&
      exact.result.value.type === "tool/result",
  );
  assert.equal(JSON.stringify(exact.result.value.result), '{"n":12345678901234567890,"f":1.50}');
});

Deno.test("runtime responses have the reference's fields, in its order", () => {
  const items = [
    { text: { text: "t" } },
    { image: { imageUrl: "data:x", detail: 3 } },
    { image: { imageUrl: "u", detail: 0 } },
    { audio: { audioUrl: "data:audio/wav;base64,AA" } },
  ];
  const outcome = (kind: "yielded" | "terminated" | "completed", extra: Record<string, unknown> = {}) =>
    JSON.stringify(
      runtimeResponse(
        { cellId: "1", contentItems: items, hostDurationNs: 112226978, kind, ...extra } as never,
      ),
    );
  const wire =
    '[{"type":"input_text","text":"t"},{"type":"input_image","image_url":"data:x","detail":"high"},' +
    '{"type":"input_image","image_url":"u"},{"type":"input_audio","audio_url":"data:audio/wav;base64,AA"}]';
  assert.equal(
    outcome("yielded"),
    `{"Yielded":{"cell_id":"1","content_items":${wire},"code_mode_host_duration_ns":112226978}}`,
  );
  assert.equal(
    outcome("terminated"),
    `{"Terminated":{"cell_id":"1","content_items":${wire},"code_mode_host_duration_ns":112226978}}`,
  );
  assert.equal(
    outcome("completed"),
    `{"Result":{"cell_id":"1","content_items":${wire},"error_text":null,"result_buffered_for_ns":0,"code_mode_host_duration_ns":112226978}}`,
  );
  // The core's resultBufferedForNs, when it reports one.
  assert.equal(
    outcome("completed", { errorText: "boom", resultBufferedForNs: 322614 }),
    `{"Result":{"cell_id":"1","content_items":${wire},"error_text":"boom","result_buffered_for_ns":322614,"code_mode_host_duration_ns":112226978}}`,
  );
  assert.deepEqual(wireContentItems([{ image: { imageUrl: "d", detail: 4 } }]), [
    { type: "input_image", image_url: "d", detail: "original" },
  ]);
  const missing = {
    cellId: "7",
    contentItems: [],
    hostDurationNs: 5,
    kind: "completed" as const,
    errorText: "exec cell 7 not found",
  };
  assert.equal(
    JSON.stringify(waitOutcome({ state: "missingCell", outcome: missing })),
    '{"MissingCell":{"Result":{"cell_id":"7","content_items":[],"error_text":"exec cell 7 not found","result_buffered_for_ns":0,"code_mode_host_duration_ns":5}}}',
  );
  assert.ok("LiveCell" in waitOutcome({ state: "liveCell", outcome: missing }));
});

Deno.test("toolInvoke() has the reference's shape and keeps the input's numbers exact", () => {
  const call = {
    sessionId: "s",
    executionId: "e",
    cellId: "2",
    invocationId: "i",
    runtimeToolCallId: "tool-1",
    toolName: { name: "exec_command" },
    toolKind: TOOL_KIND_FUNCTION,
    inputJson: new TextEncoder().encode('{"cmd":"echo hi","n":12345678901234567890}'),
    sequence: 1,
  };
  assert.equal(
    JSON.stringify(toolInvoke(call)),
    '{"type":"tool/invoke","invocation":{"cell_id":"2","runtime_tool_call_id":"tool-1","tool_name":{"name":"exec_command","namespace":null},"tool_kind":"function","input":{"cmd":"echo hi","n":12345678901234567890}}}',
  );
  const freeform = toolInvoke({
    ...call,
    inputJson: undefined,
    toolKind: TOOL_KIND_FREEFORM,
    toolName: { name: "b", namespace: "mcp__srv" },
  });
  assert.deepEqual(freeform.invocation, {
    cell_id: "2",
    runtime_tool_call_id: "tool-1",
    tool_name: { name: "b", namespace: "mcp__srv" },
    tool_kind: "freeform",
    input: null,
  });
});

import assert from "node:assert/strict";
import { type CallContext, Metadata, ServerError, type ServerMiddlewareCall, Status } from "nice-grpc";
import { HostError, type HostErrorCode } from "../../core/errors.ts";
import { Logger } from "../../ops/log.ts";
import { errorMiddleware, INTERNAL_MESSAGE, STATUS_OF, toServerError } from "./errors.ts";

/** Every domain code with the status it must become on the wire. */
const EXPECTED: [HostErrorCode, Status, string][] = [
  ["invalid_request", Status.INVALID_ARGUMENT, "code-mode execution ID must not be empty"],
  ["unknown_session", Status.NOT_FOUND, "unknown code-mode session 00000000-0000-4000-8000-000000000000"],
  ["unknown_invocation", Status.NOT_FOUND, "unknown code-mode tool invocation x"],
  ["id_reused", Status.ALREADY_EXISTS, "code-mode execution ID `e` was reused"],
  ["session_exists", Status.ALREADY_EXISTS, "code-mode session ID `s` is already open"],
  ["overloaded", Status.RESOURCE_EXHAUSTED, "code-mode host has too many sessions"],
  [
    "too_large",
    Status.RESOURCE_EXHAUSTED,
    "code-mode tool invocation exceeds the 10-byte gRPC message limit",
  ],
  ["lease_overflow", Status.RESOURCE_EXHAUSTED, "code-mode session event queue is full"],
  ["shutting_down", Status.UNAVAILABLE, "code-mode host is shutting down"],
  ["session_closed", Status.CANCELLED, "code-mode session is closed"],
  ["cancelled", Status.CANCELLED, "code-mode wait was cancelled"],
  ["cell_busy", Status.FAILED_PRECONDITION, "exec cell 1 already has an active observer"],
  ["unsupported", Status.FAILED_PRECONDITION, "code-mode session provider does not support resource limits"],
  ["catalog", Status.FAILED_PRECONDITION, "unknown code-mode catalog revision"],
  ["session_crashed", Status.INTERNAL, "code-mode V8 runtime thread ended unexpectedly: exit code 1"],
  ["runtime_failed", Status.INTERNAL, "code-mode session runtime ended before use"],
  ["internal", Status.INTERNAL, "something the host knows"],
];

function capturingLogger(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  return { log: new Logger("debug", (line) => lines.push(JSON.parse(line))), lines };
}

function context(signal = new AbortController().signal): CallContext {
  return {
    metadata: Metadata(),
    peer: "test",
    header: Metadata(),
    sendHeader() {},
    trailer: Metadata(),
    signal,
  } as CallContext;
}

/** A middleware call whose service method fails with `error` (after `before` responses). */
function failingCall(
  error: unknown,
  responseStream: boolean,
  before: string[] = [],
): ServerMiddlewareCall<string, string> {
  return {
    method: { path: "/codex.code_mode.v1.CodeModeHost/X", requestStream: false, responseStream, options: {} },
    requestStream: false,
    request: "request",
    responseStream,
    next: async function* () {
      for (const item of before) yield item;
      throw error;
    },
  } as unknown as ServerMiddlewareCall<string, string>;
}

async function run(call: ServerMiddlewareCall<string, string>, ctx: CallContext, log: Logger) {
  const out: string[] = [];
  const generator = errorMiddleware(log)(call, ctx);
  try {
    for (;;) {
      const step = await generator.next();
      if (step.done) return { out, error: undefined };
      out.push(step.value);
    }
  } catch (error) {
    return { out, error };
  }
}

Deno.test("every domain code has its status, and the table covers every code", () => {
  assert.deepEqual(Object.keys(STATUS_OF).sort(), EXPECTED.map(([code]) => code).sort());
  for (const [code, status] of EXPECTED) assert.equal(STATUS_OF[code], status, code);
});

Deno.test("errorMiddleware turns each HostError into its status with its exact message", async () => {
  for (const responseStream of [false, true]) {
    for (const [code, status, message] of EXPECTED) {
      const { log, lines } = capturingLogger();
      const { error } = await run(failingCall(new HostError(code, message), responseStream), context(), log);
      assert.ok(error instanceof ServerError, code);
      assert.equal(error.code, status, code);
      assert.equal(error.details, message, code);
      assert.equal(lines.length, 0, "a domain error is not logged");
    }
  }
});

Deno.test("errorMiddleware turns an unknown failure into INTERNAL with a generic message and logs its stack", async () => {
  const { log, lines } = capturingLogger();
  const failure = new TypeError("x is undefined");
  const { error } = await run(failingCall(failure, false), context(), log);
  assert.ok(error instanceof ServerError);
  assert.equal(error.code, Status.INTERNAL);
  assert.equal(error.details, INTERNAL_MESSAGE);
  assert.equal(lines.length, 1);
  assert.equal(lines[0].level, "error");
  assert.equal(lines[0].msg, "unexpected failure in an RPC");
  assert.match(String(lines[0].error), /TypeError: x is undefined\n\s+at /);
});

Deno.test("errorMiddleware passes a ServerError through unchanged and unlogged", async () => {
  const { log, lines } = capturingLogger();
  const original = new ServerError(Status.UNAUTHENTICATED, "no");
  const { error } = await run(failingCall(original, false), context(), log);
  assert.equal(error, original);
  assert.equal(lines.length, 0);
});

Deno.test("errorMiddleware passes responses through and keeps the streamed ones before a failure", async () => {
  const { log } = capturingLogger();
  const { out, error } = await run(
    failingCall(new HostError("session_crashed", "crashed"), true, ["a", "b"]),
    context(),
    log,
  );
  assert.deepEqual(out, ["a", "b"]);
  assert.ok(error instanceof ServerError);
  assert.equal(error.code, Status.INTERNAL);
  assert.equal(error.details, "crashed");
});

Deno.test("a streaming call whose client went away ends quietly; a unary one still gets its status", async () => {
  const aborted = new AbortController();
  aborted.abort();
  for (const failure of [new Error("boom"), new HostError("cancelled", "code-mode wait was cancelled")]) {
    const { log, lines } = capturingLogger();
    const streamed = await run(failingCall(failure, true, ["a"]), context(aborted.signal), log);
    assert.deepEqual(streamed, { out: ["a"], error: undefined });
    assert.equal(lines.length, 0, "nothing is logged for a stream the client left");
  }
  const { log } = capturingLogger();
  const unary = await run(
    failingCall(new HostError("cancelled", "code-mode wait was cancelled"), false),
    context(aborted.signal),
    log,
  );
  assert.ok(unary.error instanceof ServerError);
  assert.equal(unary.error.code, Status.CANCELLED);
  assert.equal(unary.error.details, "code-mode wait was cancelled");
});

Deno.test("toServerError maps like the middleware", () => {
  const { log, lines } = capturingLogger();
  assert.equal(toServerError(new HostError("overloaded", "full"), log).code, Status.RESOURCE_EXHAUSTED);
  assert.equal(toServerError("a string", log).details, INTERNAL_MESSAGE);
  assert.equal(lines.length, 1);
});

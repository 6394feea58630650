/**
 * The embedded provider's client over a stand-in core: failures as the gRPC door would send them,
 * cancellation as nice-grpc's client reports it, and calls that run on after their caller left.
 */
import assert from "node:assert/strict";
import { ClientError, Status } from "nice-grpc";
import type { ExecuteEvent, ObservationResult } from "../host/core/code_mode_core.ts";
import { HostError } from "../host/core/errors.ts";
import { Logger } from "../host/ops/log.ts";
import { coreClient, type CoreOperations } from "./core_client.ts";

const WAIT = "/codex.code_mode.v1.CodeModeHost/Wait";

function capturingLogger(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  return { log: new Logger("debug", (line) => lines.push(JSON.parse(line))), lines };
}

function unused(): never {
  throw new Error("not used by this test");
}

/** A core whose operations this test does not use fail loudly; `parts` replaces some. */
function core(parts: Partial<CoreOperations>): CoreOperations {
  return {
    openSession: unused,
    closeSession: unused,
    execute: unused,
    wait: unused,
    terminate: unused,
    yieldObservation: unused,
    cancelWait: unused,
    acknowledgeNotification: unused,
    subscribeToToolCalls: unused,
    completeToolCall: unused,
    ...parts,
  };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail("expected a rejection");
}

const missing: ObservationResult = {
  state: "missingCell",
  outcome: {
    cellId: "9",
    contentItems: [],
    hostDurationNs: 3,
    kind: "completed",
    errorText: "exec cell 9 not found",
  },
};

Deno.test("a call answers with the decoded message; the core gets the request's values", async () => {
  const { log } = capturingLogger();
  const seen: unknown[] = [];
  const { client } = coreClient(
    core({ wait: (request) => (seen.push(request), Promise.resolve(missing)) }),
    log,
  );
  const answer = await client.wait({ sessionId: "s", cellId: "9", waitId: "w", yieldTimeMs: 10 });
  assert.deepEqual(answer, {
    state: "missingCell",
    missingCell: {
      cellId: "9",
      codeModeHostDurationNs: "3",
      outcome: "completed",
      completed: { errorText: "exec cell 9 not found", _errorText: "errorText" },
    },
  });
  assert.deepEqual(seen, [{
    sessionId: "s",
    cellId: "9",
    waitId: "w",
    yieldTimeMs: 10n,
    maxTokens: undefined,
    traceparent: undefined,
  }]);
});

Deno.test("a domain error reaches the caller as the gRPC door's status and text, unlogged", async () => {
  const { log, lines } = capturingLogger();
  const { client } = coreClient(
    core({ wait: () => Promise.reject(new HostError("unknown_session", "unknown code-mode session s")) }),
    log,
  );
  const error = await rejection(client.wait({ sessionId: "s", cellId: "1", waitId: "w" }));
  assert.ok(error instanceof ClientError);
  assert.equal(error.path, WAIT);
  assert.equal(error.code, Status.NOT_FOUND);
  assert.equal(error.details, "unknown code-mode session s");
  assert.deepEqual(lines, []);
});

Deno.test("a fault becomes INTERNAL with the generic text; its stack is logged with the method", async () => {
  const { log, lines } = capturingLogger();
  const { client } = coreClient(core({ wait: () => Promise.reject(new TypeError("x is undefined")) }), log);
  const error = await rejection(client.wait({ sessionId: "s", cellId: "1", waitId: "w" }));
  assert.ok(error instanceof ClientError);
  assert.equal(error.code, Status.INTERNAL);
  assert.equal(error.details, "code-mode host internal error");
  assert.equal(lines.length, 1);
  assert.equal(lines[0].level, "error");
  assert.equal(lines[0].rpc, WAIT);
  assert.match(String(lines[0].error), /TypeError: x is undefined\n\s+at /);
});

Deno.test("a text without a UTF-8 form is refused as the gRPC door refuses its bytes", async () => {
  const { log, lines } = capturingLogger();
  const { client } = coreClient(core({}), log);
  const error = await rejection(client.wait({ sessionId: "s", cellId: "\uDC00", waitId: "w" }));
  assert.ok(error instanceof ClientError);
  assert.equal(error.code, Status.INTERNAL);
  assert.equal(
    error.details,
    "failed to decode Protobuf message: WaitRequest.cell_id: invalid string value: data is not UTF-8 encoded",
  );
  assert.deepEqual(lines, []);
});

Deno.test("an aborted call fails with AbortError; the core's call runs on and is awaited by settled()", async () => {
  const { log, lines } = capturingLogger();
  const release = Promise.withResolvers<void>();
  let coreSignal: AbortSignal | undefined;
  const calls = coreClient(
    core({
      wait: async (_request, options) => {
        coreSignal = options?.signal;
        await release.promise;
        throw new HostError("cancelled", "code-mode wait was cancelled");
      },
    }),
    log,
  );
  const abort = new AbortController();
  const pending = calls.client.wait({ sessionId: "s", cellId: "1", waitId: "w" }, { signal: abort.signal });
  abort.abort();
  const error = await rejection(pending);
  assert.equal((error as Error).name, "AbortError");
  assert.equal(coreSignal?.aborted, true);
  let settled = false;
  const done = calls.settled().then(() => settled = true);
  await Promise.resolve();
  assert.equal(settled, false);
  release.resolve();
  await done;
  assert.deepEqual(lines.map((l) => [l.level, l.msg, l.rpc]), [
    ["debug", "code-mode in-process call failed after its caller left", WAIT],
  ]);
});

Deno.test("a stream sends its headers first and runs on to its end after its caller stops reading", async () => {
  const { log } = capturingLogger();
  const finished = Promise.withResolvers<void>();
  let coreSignal: AbortSignal | undefined;
  const calls = coreClient(
    core({
      execute: async function* (_request, options): AsyncGenerator<ExecuteEvent> {
        coreSignal = options?.signal;
        yield { type: "started", executionId: "e", cellId: "1" };
        await finished.promise;
        yield {
          type: "outcome",
          outcome: { cellId: "1", contentItems: [], hostDurationNs: 1, kind: "completed" },
        };
      },
    }),
    log,
  );
  const order: string[] = [];
  const stream = calls.client.execute({ sessionId: "s", executionId: "e", toolCallId: "c", source: "1" }, {
    onHeader: () => order.push("header"),
  }) as AsyncIterable<unknown>;
  for await (const event of stream) {
    order.push(JSON.stringify(event));
    break;
  }
  assert.deepEqual(order, ["header", '{"event":"started","started":{"executionId":"e","cellId":"1"}}']);
  assert.equal(coreSignal?.aborted, true, "the core sees the call cancelled");
  let settled = false;
  const done = calls.settled().then(() => settled = true);
  await Promise.resolve();
  assert.equal(settled, false, "the core's stream is still running");
  finished.resolve();
  await done;
});

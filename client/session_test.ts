import assert from "node:assert/strict";
import { Status } from "nice-grpc";
import type { ExecuteEvent, ExecutionOutcome } from "../proto/code_mode_types.ts";
import { CodeModeError } from "../proto/errors.ts";
import type { Binding } from "./binding.ts";
import type { BindingOpener, OpeningRequest } from "./binding_opener.ts";
import {
  FakeHost,
  type FakeStream,
  grpcError,
  ManualClock,
  openBinding,
  RecordingDelegate,
} from "./_fake_host_test.ts";
import { GrpcCodeModeSession } from "./session.ts";
import { RESET_MESSAGE, timeoutText } from "./status_text.ts";
import type { CodeModeOutputTruncation, ToolDefinition } from "./types.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const encoder = new TextEncoder();

/** Opens bindings on a fake host, one generation after the other, as the provider does. */
class FakeOpener implements BindingOpener {
  readonly host = new FakeHost();
  readonly clock = new ManualClock();
  readonly transportTimeoutMs = 60_000;
  readonly requests: OpeningRequest[] = [];
  readonly bindings: Binding[] = [];
  supportsCatalogRevision = false;
  /** The mode the first opening selects. */
  mode: CodeModeOutputTruncation = "client";

  async openBinding(request: OpeningRequest): Promise<{ binding: Binding; mode: CodeModeOutputTruncation }> {
    this.requests.push(request);
    const { binding } = await openBinding(this.host, {
      generation: this.bindings.length + 1,
      sessionId: `session-${this.bindings.length + 1}`,
      supportsCatalogRevision: this.supportsCatalogRevision,
    });
    this.bindings.push(binding);
    return { binding, mode: request.pinned ? request.mode : this.mode };
  }
}

const lookup: ToolDefinition = {
  name: "lookup",
  toolName: { name: "lookup", namespace: "mcp__kb" },
  description: "looks things up",
  kind: "function",
  inputSchema: { type: "object" },
};

/** The `n`th Execute's stream, once it was sent. */
async function executeStream(host: FakeHost, n = 1): Promise<FakeStream<ExecuteEvent>> {
  await host.called("execute", n);
  return host.streams("execute")[n - 1];
}

/** Starts the `n`th Execute on host cell `cellId`. */
async function start(host: FakeHost, cellId: string, n = 1): Promise<FakeStream<ExecuteEvent>> {
  const stream = await executeStream(host, n);
  const request = host.callsOf("execute")[n - 1].request;
  stream.push({ event: "started", started: { executionId: request.executionId, cellId } });
  return stream;
}

function yielded(cellId: string): ExecutionOutcome {
  return { cellId, contentItems: [], outcome: "yielded", yielded: {} };
}

Deno.test("execute sends the Execute and maps the started cell and its outcome to public values", async () => {
  const opener = new FakeOpener();
  const { host } = opener;
  const session = await GrpcCodeModeSession.open(opener, {});
  const delegate = new RecordingDelegate();
  const starting = session.execute(
    {
      toolCallId: "call-1",
      enabledTools: [lookup],
      source: "text(1)",
      yieldTimeMs: 100,
      maxOutputTokens: 50,
    },
    delegate,
  );
  const stream = await start(host, "1");
  const cell = await starting;
  const [execute] = host.callsOf("execute");
  assert.match(execute.request.executionId ?? "", UUID);
  assert.deepEqual({ ...execute.request, executionId: "" }, {
    sessionId: "session-1",
    executionId: "",
    toolCallId: "call-1",
    source: "text(1)",
    enabledTools: [{
      name: "lookup",
      toolName: { name: "lookup", namespace: "mcp__kb" },
      description: "looks things up",
      kind: 1,
      inputSchemaJson: encoder.encode('{"type":"object"}'),
    }],
    yieldTimeMs: 100,
    maxOutputTokens: 50,
  });
  assert.equal(cell.cellId, "1");
  const initial = cell.initialResponse();
  stream.push({
    event: "outcome",
    outcome: {
      cellId: "1",
      contentItems: [
        { item: "text", text: { text: "a" } },
        { item: "image", image: { imageUrl: "data:x", detail: 3 } },
        { item: "audio", audio: { audioUrl: "data:y" } },
      ],
      codeModeHostDurationNs: "12",
      outcome: "completed",
      completed: { errorText: "boom" },
    },
  });
  // A result waits for its cell's CellClosed.
  host.streams("openSession")[0].push({
    event: "cellClosed",
    cellClosed: { executionId: execute.request.executionId, cellId: "1" },
  });
  assert.deepEqual(await initial, {
    type: "result",
    cellId: "1",
    contentItems: [
      { type: "input_text", text: "a" },
      { type: "input_image", image_url: "data:x", detail: "high" },
      { type: "input_audio", audio_url: "data:y" },
    ],
    errorText: "boom",
    codeModeHostDurationNs: 12,
  });
  assert.deepEqual(delegate.closed, ["1"]);
  await session.shutdown();
});

Deno.test("wait observes a cell by its host ID; a second observer of the same cell is refused", async () => {
  const opener = new FakeOpener();
  const { host } = opener;
  const session = await GrpcCodeModeSession.open(opener, {});
  const starting = session.execute(
    { toolCallId: "call-1", enabledTools: [], source: "1" },
    new RecordingDelegate(),
  );
  const stream = await start(host, "1");
  const cell = await starting;
  stream.push({ event: "outcome", outcome: yielded("1") });
  assert.equal((await cell.initialResponse()).type, "yielded");

  const waiting = session.wait({ cellId: "1", yieldTimeMs: 10, maxTokens: 20 });
  const { request } = await host.called("wait");
  assert.match(request.waitId ?? "", UUID);
  assert.deepEqual({ ...request, waitId: "" }, {
    sessionId: "session-1",
    cellId: "1",
    waitId: "",
    yieldTimeMs: 10,
    maxTokens: 20,
  });
  await assert.rejects(session.wait({ cellId: "1", yieldTimeMs: 10 }), {
    message: "exec cell 1 already has an active observer",
  });
  host.pending("wait")[0].resolve({
    state: "liveCell",
    liveCell: { cellId: "1", outcome: "terminated", terminated: {} },
  });
  assert.deepEqual(await waiting, {
    type: "liveCell",
    response: { type: "terminated", cellId: "1", contentItems: [], codeModeHostDurationNs: 0 },
  });
  await session.shutdown();
});

Deno.test("after the binding fails, the next call opens the pinned mode and fails with the reset message; the one after runs as g2", async () => {
  const opener = new FakeOpener();
  opener.mode = "server";
  const { host } = opener;
  const session = await GrpcCodeModeSession.open(opener, { outputTruncation: "server" });
  assert.deepEqual(opener.requests[0], {
    mode: "server",
    pinned: false,
    limits: undefined,
    maxPendingDelegateCalls: undefined,
  });
  host.streams("openSession")[0].end();
  await opener.bindings[0].ended;
  const request = { toolCallId: "call-1", enabledTools: [], source: "1" };
  await assert.rejects(session.execute(request, new RecordingDelegate()), { message: RESET_MESSAGE });
  assert.equal(opener.requests.length, 2);
  assert.equal(opener.requests[1].mode, "server");
  assert.equal(opener.requests[1].pinned, true);
  assert.equal(host.callsOf("execute").length, 0, "a failed call sends nothing");

  const starting = session.execute(request, new RecordingDelegate());
  await start(host, "1");
  assert.equal((await starting).cellId, "g2:1");
  assert.equal(host.callsOf("execute")[0].request.sessionId, "session-2");
  await assert.rejects(session.wait({ cellId: "1", yieldTimeMs: 0 }), {
    message: "cell belongs to a stale code-mode host generation",
  });
  await session.shutdown();
});

Deno.test("terminate never reopens: after a failure it rejects with the binding's failure", async () => {
  const opener = new FakeOpener();
  const session = await GrpcCodeModeSession.open(opener, {});
  opener.bindings[0].fail(new CodeModeError(undefined, "lost"));
  await assert.rejects(session.terminate("1"), { message: "lost" });
  assert.equal(opener.requests.length, 1);
  assert.equal(opener.host.callsOf("terminate").length, 0);
  await session.shutdown();
});

Deno.test("an Execute's starting event times out after transportTimeoutMs on the provider clock: the call is cancelled and the binding fails", async () => {
  const opener = new FakeOpener();
  const { host, clock } = opener;
  const session = await GrpcCodeModeSession.open(opener, {});
  const starting = session.execute(
    { toolCallId: "call-1", enabledTools: [], source: "1" },
    new RecordingDelegate(),
  );
  const stream = await executeStream(host);
  clock.advance(59_999);
  assert.ok(!stream.cancelled);
  clock.advance(1);
  await assert.rejects(starting, {
    code: "DEADLINE_EXCEEDED",
    message: timeoutText("execution starting event"),
  });
  assert.ok(stream.cancelled);
  assert.equal(opener.bindings[0].failure?.message, timeoutText("execution starting event"));
  await session.shutdown();
});

Deno.test("catalog revisions: the same tools go as the revision alone once started; an unknown revision is sent again with its tools", async () => {
  const opener = new FakeOpener();
  opener.supportsCatalogRevision = true;
  const { host } = opener;
  const session = await GrpcCodeModeSession.open(opener, {});
  const request = { toolCallId: "call-1", enabledTools: [lookup], source: "1" };
  const first = session.execute(request, new RecordingDelegate());
  await start(host, "1", 1);
  await first;
  const second = session.execute(request, new RecordingDelegate());
  const refused = await executeStream(host, 2);
  refused.fail(grpcError(Status.FAILED_PRECONDITION, "unknown code-mode catalog revision"));
  await start(host, "2", 3);
  assert.equal((await second).cellId, "2");
  const sent = host.callsOf("execute").map((
    c,
  ) => [c.request.catalogRevision, c.request.enabledTools?.length]);
  assert.deepEqual(sent, [[1, 1], [1, 0], [2, 1]]);
  await session.shutdown();
});

Deno.test("abandon() cancels the Execute, terminates the cell in the background and reports it closed", async () => {
  const opener = new FakeOpener();
  const { host } = opener;
  const session = await GrpcCodeModeSession.open(opener, {});
  const delegate = new RecordingDelegate();
  const starting = session.execute({ toolCallId: "call-1", enabledTools: [], source: "1" }, delegate);
  const stream = await start(host, "5");
  const cell = await starting;
  const initial = cell.initialResponse();
  cell.abandon();
  await assert.rejects(initial, { code: "CANCELLED", message: "gRPC code-mode execution was abandoned" });
  assert.ok(stream.cancelled);
  assert.deepEqual((await host.called("terminate")).request, { sessionId: "session-1", cellId: "5" });
  assert.deepEqual(delegate.closed, ["5"]);
  await session.shutdown();
});

Deno.test("shutdown closes the session on the host once and fails later calls with the shutting-down text", async () => {
  const opener = new FakeOpener();
  const session = await GrpcCodeModeSession.open(opener, {});
  const first = session.shutdown();
  assert.equal(session.shutdown(), first, "idempotent");
  await first;
  assert.deepEqual(opener.host.callsOf("closeSession").map((c) => c.request), [{ sessionId: "session-1" }]);
  assert.equal(opener.bindings[0].failure?.message, "code mode session is shutting down");
  const shuttingDown = { message: "code mode session is shutting down" };
  await assert.rejects(
    session.execute({ toolCallId: "c", enabledTools: [], source: "1" }, new RecordingDelegate()),
    shuttingDown,
  );
  await assert.rejects(session.wait({ cellId: "1", yieldTimeMs: 0 }), shuttingDown);
  await assert.rejects(session.terminate("1"), shuttingDown);
});

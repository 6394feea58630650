import assert from "node:assert/strict";
import { Cell } from "./cell.ts";
import type { CellPort } from "./cell_port.ts";
import { FakeClock } from "../testing.ts";
import type { OutputMode } from "../output/output_collector.ts";

/** A cell whose session records its `Credit` returns (the counts, in order). */
function creditCell(mode: OutputMode, queue = { capacity: 8, bytes: 1_000 }) {
  const clock = new FakeClock();
  const credits: number[] = [];
  const port: CellPort = {
    clock,
    mode,
    maxMessageBytes: 1_048_576,
    queue,
    credit: (events) => void credits.push(events),
    commit: (_writes, buildEvent, state) => Promise.resolve(state.commitCompletion(buildEvent, () => {})),
    stop: () => {},
    failed: () => {},
    forget: () => {},
    closed: () => {},
    notify: () => {},
    invokeTool: () => Promise.resolve(),
  };
  const cell = new Cell({
    id: "1",
    executionId: "e",
    toolCallId: "c",
    port: () => port,
    heapLimitMb: 64,
    initial: { yieldMs: 60_000 },
    maxOutputTokens: 1_000,
  });
  const text = (t: string) => cell.onEvent({ cellId: "1", event: "contentItem", contentItem: { text: t } });
  return { cell, clock, credits, text };
}

/** One turn of the event loop (a credit returned "at once" goes out from `setImmediate`). */
const turn = () => new Promise((resolve) => setTimeout(resolve, 0));

for (const mode of ["client", "server"] as const) {
  Deno.test(`${mode} mode: credit far from the limits waits 2 ms, and a cell that ends meanwhile gets none`, async () => {
    const a = creditCell(mode);
    a.cell.onEvent({ cellId: "1", event: "started", started: {} });
    a.text("x");
    a.text("y");
    await turn();
    assert.deepEqual(a.credits, [], "not at once");
    a.clock.advance(2);
    await turn();
    assert.deepEqual(a.credits, [2], "one Credit frame for the burst");

    const b = creditCell(mode);
    b.text("x");
    b.cell.onEvent({ cellId: "1", event: "result", result: {} });
    b.cell.onEvent({ cellId: "1", event: "exited", exited: { reason: "normal" } });
    b.clock.advance(10);
    await turn();
    assert.deepEqual(b.credits, [], "an ended cell needs no credit");
    await b.cell.initial;
  });

  Deno.test(`${mode} mode: credit goes back at once when half the event or byte limit is unacknowledged`, async () => {
    const events = creditCell(mode);
    for (const t of ["a", "b", "c", "d"]) events.text(t); // 4 of 8 events
    await turn();
    assert.deepEqual(events.credits, [4], "without moving the clock");

    const bytes = creditCell(mode);
    bytes.text("🦀".repeat(125)); // 500 UTF-8 bytes of 1,000 (250 UTF-16 units)
    await turn();
    assert.deepEqual(bytes.credits, [1]);

    const below = creditCell(mode);
    below.text("x".repeat(499));
    await turn();
    assert.deepEqual(below.credits, [], "499 bytes is under half");
  });
}

/** A client-mode cell whose session records every call of the cell's port, in order. */
function recordingCell() {
  const calls: string[] = [];
  const built: Cell[] = [];
  const cell: Cell = new Cell({
    id: "1",
    executionId: "e",
    toolCallId: "c",
    port: (c) => {
      built.push(c);
      return {
        clock: new FakeClock(),
        mode: "client",
        maxMessageBytes: 1_048_576,
        queue: { capacity: 8, bytes: 1_000 },
        credit: () => {},
        commit: (writes, buildEvent, state) => {
          calls.push(`commit ${[...writes]}`);
          return Promise.resolve(state.commitCompletion(buildEvent, () => {}));
        },
        stop: () => void calls.push(`stop running=${cell.running}`),
        failed: (reason, detail) => void calls.push(`failed ${reason} (${detail})`),
        forget: () => void calls.push("forget"),
        closed: () => void calls.push("closed"),
        notify: (callId, text) => void calls.push(`notify ${callId} ${text}`),
        invokeTool: (call, signal) => {
          calls.push(`tool ${call.id} ${call.name.name} ${JSON.stringify(call.input)}`);
          signal.addEventListener("abort", () => calls.push(`tool ${call.id} cancelled`));
          return Promise.resolve();
        },
      };
    },
    heapLimitMb: 64,
    initial: { yieldMs: 60_000 },
    maxOutputTokens: 1_000,
  });
  assert.deepEqual(built, [cell], "the port is built once, for this cell");
  return { cell, calls };
}

Deno.test("a terminated cell's tool call, notification and stop reach the session's port; closed waits for the isolate", async () => {
  const { cell, calls } = recordingCell();
  cell.onEvent({
    cellId: "1",
    event: "toolCall",
    toolCall: { runtimeToolCallId: "tool-1", globalName: "echo", inputJson: '{"a":1}' },
  });
  cell.onEvent({ cellId: "1", event: "notify", notify: "hello" });
  cell.onEvent({ cellId: "1", event: "yieldRequested" });
  assert.equal((await cell.initial).kind, "yielded");
  const terminated = cell.terminate();
  await turn();
  cell.onEvent({ cellId: "1", event: "result", result: {} });
  assert.equal((await terminated).kind, "terminated");
  await cell.done;
  assert.deepEqual(calls, [
    'tool tool-1 echo {"a":1}',
    "notify c hello",
    "tool tool-1 cancelled",
    "stop running=true",
    "forget",
  ]);
  cell.onEvent({ cellId: "1", event: "exited", exited: { reason: "normal" } });
  assert.deepEqual(calls.slice(5), ["closed"], "closed once the isolate has stopped too");
});

Deno.test("a completed cell commits its stored writes through the session's port, then forgets and closes", async () => {
  const { cell, calls } = recordingCell();
  cell.onEvent({ cellId: "1", event: "storedWrite", storedWrite: { key: "k", valueJson: "1" } });
  cell.onEvent({ cellId: "1", event: "result", result: {} });
  cell.onEvent({ cellId: "1", event: "exited", exited: { reason: "normal" } });
  assert.equal((await cell.initial).kind, "completed");
  await cell.done;
  assert.deepEqual(calls, ["commit k,1", "forget", "closed"]);
});

Deno.test("an isolate's fault reaches the session's port as a panicked runtime thread, once, and the cell completes with the A9 text", async () => {
  const { cell, calls } = recordingCell();
  cell.onEvent({ cellId: "1", event: "started", started: {} });
  cell.onEvent({ cellId: "1", event: "exited", exited: { reason: "fault", detail: "bootstrap broke" } });
  const outcome = await cell.initial;
  assert.equal(outcome.kind, "completed");
  assert.equal(outcome.errorText, "exec runtime ended unexpectedly");
  await cell.done;
  assert.deepEqual(calls, [
    "failed code-mode V8 runtime thread panicked (fault: bootstrap broke)",
    "commit ", // the completion, with no writes (A9)
    "forget",
    "closed",
  ]);
});

Deno.test("an isolate at its heap limit, and a runtime restart, reach the session's port as an ended runtime thread", async () => {
  const heap = recordingCell();
  heap.cell.onEvent({ cellId: "1", event: "exited", exited: { reason: "heap_limit" } });
  assert.equal(
    (await heap.cell.initial).errorText,
    "exec runtime ended unexpectedly: cell heap limit of 64 MiB reached",
  );
  assert.deepEqual(heap.calls.slice(0, 1), [
    "failed code-mode V8 runtime thread ended unexpectedly (heap_limit)",
  ]);

  const restart = recordingCell();
  restart.cell.end({ kind: "restart", stoppedCellId: "3" });
  await restart.cell.initial;
  assert.deepEqual(restart.calls.slice(0, 1), [
    "failed code-mode V8 runtime thread ended unexpectedly (the session runtime was restarted to stop cell 3)",
  ]);
});

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

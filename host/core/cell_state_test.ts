import assert from "node:assert/strict";
import { type CellEvent, CellState, type CompletedEvent, sendYield } from "./cell_state.ts";
import { FakeClock } from "../testing.ts";
import {
  createOutputCollector,
  type OutputCollector,
  type OutputItem,
  type OutputMode,
  SERVER_IMAGE_BYTES,
} from "../output/output_collector.ts";

const textItem = (text: string): OutputItem => ({ type: "text", text });

function collector(mode: OutputMode, ...texts: string[]): OutputCollector {
  const out = createOutputCollector(mode);
  for (const t of texts) out.push(textItem(t));
  return out;
}

const terminated = (c: OutputCollector): CellEvent => ({ type: "terminated", content: c });
const completed = (c: OutputCollector, resultBufferedForMs = 0): CellEvent => ({
  type: "completed",
  content: c,
  resultBufferedForMs,
});

/** Cell events are equal when kinds, fields and renderings are (SPEC §4.12). */
function assertEvent(actual: CellEvent, expected: CellEvent): void {
  const plain = (e: CellEvent) => ({ ...e, content: { mode: e.content.mode, items: e.content.render() } });
  assert.deepEqual(plain(actual), plain(expected));
}

// ---------------------------------------------------------------------------------------------
// Seed scenarios 50–53 (SPEC §12.4): the cell state and the yield delivery

Deno.test("50 only the first termination claims a buffered completion", async () => {
  const state = new CellState({ clock: new FakeClock() });
  const completion = completed(collector("client")) as CompletedEvent;
  assert.equal(state.commitCompletion(() => completion, () => {}), "committed");
  assert.equal(state.deliverCompletion(undefined), "buffered");
  const first = state.requestTermination();
  await assert.rejects(state.requestTermination(), { kind: "alreadyTerminating" });
  assertEvent(await first, completion);
  assertEvent(state.finishTermination(terminated(collector("client"))), completion);
});

Deno.test("51 a termination claim prevents the stored value commit", async () => {
  const state = new CellState({ clock: new FakeClock() });
  const termination = state.requestTermination();
  let commitRan = false;
  assert.equal(
    state.commitCompletion(() => assert.fail("terminated cell must not construct completion output"), () => {
      commitRan = true;
    }),
    "rejected",
  );
  assert.equal(commitRan, false);
  const t = terminated(collector("client"));
  assert.equal(state.finishTermination(t), t);
  assert.equal(await termination, t);
});

Deno.test("52 a failed completion delivery re-buffers the event and keeps its clock running", () => {
  const clock = new FakeClock();
  const state = new CellState({ clock });
  assert.equal(
    state.commitCompletion(() => completed(collector("client", "done")) as CompletedEvent, () => {}),
    "committed",
  );
  const gone = { signal: AbortSignal.abort(), resolve: () => assert.fail("gone responder") };
  assert.equal(state.deliverCompletion(gone), "buffered");
  assert.ok(state.acceptingObservations());
  clock.advance(5_000);
  assert.equal(state.routeObservation(gone), "buffered");
  clock.advance(5_000);
  const received: CellEvent[] = [];
  assert.equal(
    state.routeObservation({ signal: new AbortController().signal, resolve: (e) => received.push(e) }),
    "delivered",
  );
  assert.equal(received.length, 1);
  assertEvent(received[0], completed(collector("client", "done"), 10_000));
});

Deno.test("53 a failed yield restores image allocation and omission order", () => {
  const output = createOutputCollector("server");
  const big: OutputItem = { type: "image", imageUrl: "i".repeat(SERVER_IMAGE_BYTES), detail: "auto" };
  output.push(big);
  output.push({ type: "image", imageUrl: "excess", detail: "auto" });
  assert.equal(
    sendYield(output, { signal: AbortSignal.abort(), resolve: () => assert.fail("gone") }),
    "restored",
  );
  output.push(textItem("after"));
  let event: CellEvent | undefined;
  assert.equal(
    sendYield(output, { signal: new AbortController().signal, resolve: (e) => event = e }),
    "delivered",
  );
  assert.equal(event?.type, "yielded");
  const items = event!.content.render();
  assert.equal(items.length, 3);
  assert.equal(items[0], big);
  assert.ok(items[1].type === "text" && items[1].text.includes("1 images"), JSON.stringify(items[1]));
  assert.deepEqual(items[2], textItem("after"));
  assert.ok(output.isEmpty);
});

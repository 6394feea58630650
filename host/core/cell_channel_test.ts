import assert from "node:assert/strict";
import { type RuntimeEvent, RuntimeEventChannel } from "./cell_channel.ts";

const content = (text: string): RuntimeEvent => ({ type: "contentItem", item: { type: "text", text } });

// Seed scenario 53d (SPEC §12.4), the channel alone; with an actor it is in cell_actor_test.ts.

Deno.test("53d a Server-mode queue bounded to 1024 bytes blocks the second 600-byte send until the first is taken", async () => {
  const channel = new RuntimeEventChannel({ mode: "server", bytes: 1024 });
  assert.equal(await channel.send(content("a".repeat(600))), true);
  let accepted = false;
  const second = channel.send(content("b".repeat(600))).then((ok) => accepted = ok);
  await Promise.resolve();
  assert.equal(accepted, false);
  assert.equal(channel.waitingSends, 1);
  assert.equal(channel.take()?.type, "contentItem");
  await second;
  assert.equal(accepted, true);
  const empty = new RuntimeEventChannel({ mode: "server", bytes: 1024 });
  assert.equal(empty.trySend(content("c".repeat(4096))), true, "an empty queue accepts any event");
  assert.equal(empty.trySend(content("")), false, "nothing more fits while the queue is over its byte bound");
});

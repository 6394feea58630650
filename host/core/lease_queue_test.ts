import assert from "node:assert/strict";
import { LeaseQueue } from "./lease_queue.ts";

Deno.test("LeaseQueue.handedOff resolves once the consumer comes back for the next item, not when it takes it", async () => {
  const queue = new LeaseQueue<string>(8);
  queue.push("a");
  queue.push("b");
  assert.equal(queue.pushed, 2);
  let handed = false;
  const a = queue.handedOff(1).then(() => handed = true);
  const consumer = queue.drain();
  assert.equal((await consumer.next()).value, "a");
  await Promise.resolve();
  assert.equal(handed, false, "taken, not yet handed off");
  assert.equal((await consumer.next()).value, "b");
  await a;
  assert.equal(handed, true);
  await consumer.return(undefined);
});

Deno.test("LeaseQueue.handedOff resolves when the consumer stops, and at once afterwards", async () => {
  const queue = new LeaseQueue<string>(8);
  queue.push("a");
  queue.push("b");
  const b = queue.handedOff(2);
  const consumer = queue.drain();
  await consumer.next();
  await consumer.return(undefined);
  await b;
  await queue.handedOff(5);
});

import assert from "node:assert/strict";
import { STORE_BATCH_UNITS } from "../../proto/store_batches.ts";
import { StoredValues, type StoreUpdate, SYNC_ENTRIES } from "./stored_values.ts";

function writes(n: number, prefix = "k"): Map<string, string> {
  return new Map(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, String(i)]));
}

Deno.test("StoredValues: a small commit on an idle store is done in the caller's turn, as one update", () => {
  const store = new StoredValues(1_000);
  const sent: StoreUpdate[] = [];
  assert.equal(store.commit(writes(3), () => true, (u) => sent.push(u)), undefined);
  assert.equal(store.settling, undefined);
  assert.equal(store.version, 1);
  assert.deepEqual(sent, [{
    version: 1,
    entries: [0, 1, 2].map((i) => ({ key: `k${i}`, valueJson: String(i) })),
  }]);
});

Deno.test("StoredValues: a large commit runs in slices after the one before it; updates are batched; a later small one waits its turn", async () => {
  const store = new StoredValues(64 * 1024 * 1024);
  const sent: StoreUpdate[] = [];
  const order: string[] = [];
  const big = writes(200_000);
  const first = store.commit(big, () => (order.push("big decided"), true), (u) => sent.push(u));
  assert.ok(first instanceof Promise);
  assert.ok(store.settling);
  // A small commit while the large one runs is queued, not done at once.
  const second = store.commit(
    new Map([["k0", '"last"']]),
    () => (order.push("small decided"), true),
    (u) => sent.push(u),
  );
  assert.ok(second instanceof Promise);
  // The event loop turns meanwhile.
  let ticks = 0;
  const timer = setInterval(() => ticks++, 1);
  await Promise.all([first, second]);
  clearInterval(timer);
  assert.equal(store.settling, undefined);
  assert.deepEqual(order, ["big decided", "small decided"]);
  assert.equal(store.version, 2);
  const bigUpdates = sent.filter((u) => u.version === 1);
  assert.ok(bigUpdates.length > 1);
  for (const u of bigUpdates) {
    const units = u.entries.reduce((n, e) => n + e.key.length + e.valueJson.length, 0);
    assert.ok(units < STORE_BATCH_UNITS + 64, `${units} units`);
  }
  assert.equal(bigUpdates.reduce((n, u) => n + u.entries.length, 0), 200_000);
  assert.deepEqual(sent.at(-1), { version: 2, entries: [{ key: "k0", valueJson: '"last"' }] });
  // A replica: the whole map, `reset` on its first batch only, at the last version.
  const replica: StoreUpdate[] = [];
  store.sendReplica((u) => replica.push(u));
  await store.settling;
  assert.equal(replica[0].reset, true);
  assert.ok(replica.slice(1).every((u) => u.reset === undefined && u.version === 2));
  const keys = new Map(replica.flatMap((u) => u.entries).map((e) => [e.key, e.valueJson]));
  assert.equal(keys.size, 200_000);
  assert.equal(keys.get("k0"), '"last"');
  assert.ok(ticks > 0, "timers ran while the commit was applied");
});

Deno.test("StoredValues: a large commit over the cap is refused whole; one whose completion was not committed applies nothing", async () => {
  const store = new StoredValues(10_000);
  const sent: StoreUpdate[] = [];
  let refusal: string | undefined;
  await store.commit(writes(SYNC_ENTRIES + 1), (refused) => (refusal = refused, true), (u) => sent.push(u));
  assert.equal(refusal, "stored values exceed the 10000-byte session limit");
  await store.commit(writes(SYNC_ENTRIES + 1, "x"), () => false, (u) => sent.push(u));
  assert.deepEqual(sent, []);
  assert.equal(store.version, 0);
  const replica: StoreUpdate[] = [];
  store.sendReplica((u) => replica.push(u));
  assert.deepEqual(replica, [], "nothing was applied: the map is empty");
});

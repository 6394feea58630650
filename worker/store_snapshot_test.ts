import assert from "node:assert/strict";
import fc from "fast-check";
import { utf8ByteLength } from "../proto/bytes.ts";
import { buildSnapshot, SMALL_OVERLAY, SnapshotReader, StoreReplica } from "./store_snapshot.ts";

Deno.test("a base answers every key it was built from with its exact JSON text, and no other key", () => {
  fc.assert(
    fc.property(
      fc.dictionary(
        fc.string({ unit: "binary", maxLength: 12 }),
        fc.string({ unit: "binary", maxLength: 40 }),
      ),
      fc.array(fc.string({ unit: "binary", maxLength: 12 }), { maxLength: 20 }),
      (object, others) => {
        const entries = new Map(Object.entries(object));
        const reader = new SnapshotReader(buildSnapshot(entries));
        for (const [key, value] of entries) assert.equal(reader.get(key), value);
        for (const key of others) assert.equal(reader.get(key), entries.get(key));
      },
    ),
    { numRuns: 300 },
  );
});

Deno.test("a base holds an empty key, lone surrogates, a value longer than one decode chunk, and 100,000 keys", () => {
  const big = "é\ud800".repeat(50_000);
  const entries = new Map<string, string>([["", "null"], ["\udfff", '"x"'], ["big", big]]);
  for (let i = 0; i < 100_000; i++) entries.set(`k${i}`, String(i));
  const reader = new SnapshotReader(buildSnapshot(entries));
  assert.equal(reader.get(""), "null");
  assert.equal(reader.get("\udfff"), '"x"');
  assert.equal(reader.get("big"), big);
  for (let i = 0; i < 100_000; i += 997) assert.equal(reader.get(`k${i}`), String(i));
  assert.equal(reader.get("k100000"), undefined);
  assert.equal(new SnapshotReader(buildSnapshot(new Map())).get(""), undefined);
});

Deno.test("StoreReplica: a small map goes whole with no base; a large one gets a shared base and then only what changed", () => {
  const replica = new StoreReplica();
  replica.update(false, [{ key: "a", valueJson: "1" }, { key: "é", valueJson: '"v"' }]);
  assert.deepEqual(replica.start(), { store: [["a", "1"], ["é", '"v"']], storeBytes: 1 + 1 + 2 + 3 });
  const many = Array.from({ length: SMALL_OVERLAY }, (_, i) => ({ key: `k${i}`, valueJson: String(i) }));
  replica.update(false, many);
  const first = replica.start();
  assert.ok(first.storeBase instanceof SharedArrayBuffer);
  assert.deepEqual(first.store, []);
  const bytes = 7 + many.reduce((n, e) => n + utf8ByteLength(e.key) + e.valueJson.length, 0);
  assert.equal(first.storeBytes, bytes);
  // The same base for the next cells; what changed travels beside it.
  replica.update(false, [{ key: "a", valueJson: "22" }, { key: "new", valueJson: "true" }]);
  const second = replica.start();
  assert.equal(second.storeBase, first.storeBase);
  assert.deepEqual(second.store, [["a", "22"], ["new", "true"]]);
  assert.equal(second.storeBytes, bytes + 1 + 3 + 4);
  const reader = new SnapshotReader(second.storeBase!);
  assert.equal(reader.get("a"), "1", "the base is immutable: the overlay wins in the cell");
  // A reset (a replacement runtime's first update) starts over.
  replica.update(true, [{ key: "z", valueJson: "0" }]);
  assert.deepEqual(replica.start(), { store: [["z", "0"]], storeBytes: 2 });
});

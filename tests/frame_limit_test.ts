/**
 * The host's `maxWorkerFrameBytes` reaches its runtimes (issue 15, item 4): with the limits raised,
 * a stored value whose frames exceed the default limit crosses the runtime's pipe both ways.
 */
import assert from "node:assert/strict";
import { MIB } from "../proto/bytes.ts";
import { DEFAULT_LIMITS } from "../host/core/limits.ts";
import { openSession, run, startHost } from "./_harness.ts";

Deno.test("A raised maxWorkerFrameBytes reaches the runtime: a stored value over the default frame limit round-trips", async () => {
  const limits = { maxMessageBytes: 80 * MIB, maxStoredValueBytes: 80 * MIB, maxWorkerFrameBytes: 81 * MIB };
  await using h = await startHost({ warmSessions: 0, limits });
  await using s = await openSession(h.client);
  // 66 MiB of JSON text: the cell's result frame (its stored write) and the host's StoreUpdate and
  // StartCell snapshot for the next cell are all over the default 65 MiB.
  const bytes = 66 * MIB;
  assert.ok(bytes > DEFAULT_LIMITS.maxWorkerFrameBytes);
  const stored = await run(h.client, s.id, `store("k", "x".repeat(${bytes - 2}))`);
  assert.equal(stored.error ?? "", "");
  const loaded = await run(h.client, s.id, 'text(String(load("k").length))');
  assert.deepEqual(loaded.texts, [String(bytes - 2)]);
});

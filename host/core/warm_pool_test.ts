import assert from "node:assert/strict";
import { spawnConcurrency, WARM_RATE_WINDOW_MS, WarmPoolSizer } from "./warm_pool.ts";

Deno.test("WarmPoolSizer: no more takes than the floor holds is no burst; a burst grows the pool to the runtimes taken during one spawn, within the limit", () => {
  let now = 0;
  const sizer = new WarmPoolSizer(16, () => now);
  assert.equal(sizer.target(2), 2);
  sizer.took();
  now += 10;
  sizer.took();
  assert.equal(sizer.target(2), 2, "two takes, a floor of two");
  // One take every 10 ms with a spawn taking 150 ms: ~15 runtimes taken while one starts.
  for (let i = 0; i < 8; i++) {
    now += 10;
    sizer.took();
  }
  assert.equal(sizer.target(2), 16, "bounded by warmRuntimesMax");
  assert.equal(sizer.target(20), 20, "a floor above the limit wins");
  sizer.readyAfter(0);
  sizer.readyAfter(0);
  sizer.readyAfter(0);
  const faster = sizer.target(2);
  assert.ok(faster > 2 && faster < 16, `quicker spawns need fewer: ${faster}`);
  now += WARM_RATE_WINDOW_MS + 1;
  assert.equal(sizer.target(2), 2, "back to the floor once the window passed");
  assert.equal(sizer.recentTakes, 0);
});

Deno.test("WarmPoolSizer: a limit at or below the floor turns growth off", () => {
  let now = 0;
  const sizer = new WarmPoolSizer(2, () => now);
  for (let i = 0; i < 10; i++, now++) sizer.took();
  assert.equal(sizer.target(2), 2);
});

Deno.test("spawnConcurrency(): the limit, or the cores when 0", () => {
  assert.equal(spawnConcurrency(3, 8), 3);
  assert.equal(spawnConcurrency(0, 8), 8);
  assert.equal(spawnConcurrency(0, 0), 1);
});

Deno.test("a floor of 0 is no pool: demand never grows it", () => {
  let now = 0;
  const sizer = new WarmPoolSizer(16, () => now);
  for (let i = 0; i < 10; i++) sizer.took(), now += 10;
  assert.equal(sizer.target(0), 0);
  assert.ok(sizer.target(1) > 1, "the same demand grows a pool of one");
});

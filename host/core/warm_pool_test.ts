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

Deno.test("WarmPoolSizer: a burst is over after three of its mean gaps with no take: the floor again, within the window", () => {
  let now = 0;
  const sizer = new WarmPoolSizer(16, () => now);
  // 8 takes 30 ms apart (8 sessions opened back to back).
  for (let i = 0; i < 8; i++, now += 30) sizer.took();
  now -= 30;
  assert.ok(sizer.target(2) > 2, "grows while the burst goes on");
  now += 100;
  assert.ok(sizer.target(2) > 2, "at three mean gaps (and MIN_SPAN_MS) it still goes on");
  now += 1;
  assert.equal(sizer.target(2), 2, "over");
  assert.equal(sizer.recentTakes, 8, "still inside the rate window");
  // Takes 60 ms apart: the burst goes on for 180 ms after the last.
  const slow = new WarmPoolSizer(16, () => now);
  for (let i = 0; i < 6; i++, now += 60) slow.took();
  now += 120 - 60;
  assert.ok(slow.target(2) > 2);
  now += 61;
  assert.equal(slow.target(2), 2);
  // A take after the pause starts a burst again.
  slow.took();
  assert.ok(slow.target(2) > 2);
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

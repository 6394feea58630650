/**
 * The adaptive warm pool (issue 29): a burst of OpenSession grows the pool above `--warm-sessions`
 * (runtimes start in parallel, bounded by `runtimeSpawnConcurrency`), and once the burst has passed
 * the surplus is stopped: the idle pool is back at its floor.
 */
import assert from "node:assert/strict";
import { eventually, openSession, run, startHost } from "./_harness.ts";

Deno.test("A burst of sessions grows the warm pool above its floor, and the pool shrinks back once it has passed", async () => {
  await using h = await startHost({
    warmSessions: 2,
    limits: { warmRuntimesMax: 6, runtimeSpawnConcurrency: 3 },
  });
  assert.ok(await eventually(() => h.host.state.warmCount === 2, 20_000), "the floor is filled");
  let most = 0;
  const sample = setInterval(() => {
    most = Math.max(most, h.host.state.warmCount);
  }, 5);
  const sessions = [];
  try {
    for (let i = 0; i < 8; i++) {
      const s = await openSession(h.client);
      sessions.push(s);
      assert.deepEqual((await run(h.client, s.id, `text(${i})`)).texts, [String(i)]);
      most = Math.max(most, h.host.state.warmCount);
    }
  } finally {
    clearInterval(sample);
  }
  assert.ok(most > 2, `the pool grew during the burst (at most ${most} warm)`);
  assert.ok(most <= 6, `within warmRuntimesMax (${most})`);
  // Once no runtime was taken for 2 s, the surplus is stopped (generous under load).
  assert.ok(
    await eventually(() => h.host.state.warmCount === 2 && h.host.state.runtimeCount === 8 + 2, 20_000),
    `back at the floor: ${h.host.state.warmCount} warm, ${h.host.state.runtimeCount} runtimes`,
  );
  for (const s of sessions) s.cancel();
});

/**
 * Dropped notifications do not flood the log (issue 20, item 4): a cell calling `notify()` many
 * times while its lease is not read gets most of them dropped (SPEC §7.8), and the host writes
 * one warning per second per session, each with the count it left out, not one per drop.
 */
import assert from "node:assert/strict";
import { CapturedLog, eventually, openSession, run, startHost } from "./_harness.ts";
import { REPEAT_INTERVAL_MS } from "../host/ops/log.ts";

const CALLS = 5_000;

Deno.test("A notify() flood into an unread lease logs one warning per second with the count left out", async () => {
  // The log's repeat interval runs on a clock of this test's own.
  let now = 0;
  await using h = await startHost({ log: new CapturedLog("info", () => now) });
  await using s = await openSession(h.client);
  // The lease is not read: it fills, and further notifications are dropped.
  const flood = await run(h.client, s.id, `for (let i = 0; i < ${CALLS}; i++) notify("n" + i); text("done")`);
  assert.deepEqual(flood.texts, ["done"]);
  now += REPEAT_INTERVAL_MS + 100;
  // One more drop after the interval: its line carries the count of those left out before it.
  await run(h.client, s.id, 'notify("last")');
  const lines = h.log.lines.filter((l) => l.msg === "code-mode notification dropped");
  const dropped = lines.reduce((n, l) => n + 1 + Number(l.suppressed ?? 0), 0);
  s.pump();
  const delivered = () => s.events.filter((e) => e.notification).length;
  // Every call was delivered or counted as dropped (the queued ones are read meanwhile).
  assert.ok(
    await eventually(() => delivered() + dropped === CALLS + 1, 5_000),
    `${delivered()} + ${dropped}`,
  );
  assert.ok(delivered() < CALLS, "some notifications were dropped");
  assert.ok(lines.length <= 10, `${lines.length} warning lines for ${dropped} drops`);
  assert.equal(lines.at(-1)!.error, "the lease is full");
});

/**
 * Fault: commits that cannot stall (issue 27, build item 4), against a real host in this process
 * (its event loop is this test's) with real runtimes:
 *
 * - a cell that stores 300,000 small keys commits them without blocking the host's event loop: a
 *   5 ms timer in the host process never fires late by more than a bound, another session's cells
 *   keep answering meanwhile, and a runtime restart afterwards (the whole map sent again) does not
 *   block it either; the keys load back, in the restarted runtime too;
 * - a cell that stores 1,000,000 keys (~10 MB, inside the 64 MiB `maxStoredValueBytes`) commits
 *   them (its Worker does not run out of heap encoding the commit), and the next cell loads every
 *   one back.
 *
 * Before the fix the host's timer was ~0.9–1.1 s late at 300,000 keys (another session's cell took
 * up to 1.3 s), and the 1,000,000-key cell failed with `cell heap limit of 1024 MiB reached`, its
 * writes lost. Bounds are generous: the machine may be loaded (the lag here stays near 100 ms with
 * a load average of 10, from the CPU others take).
 */
import assert from "node:assert/strict";
import { execute, openSession, run, SPIN, startHost } from "../_harness.ts";

/** How late the host's 5 ms timer may fire, ms: the event loop's longest stall plus the machine's noise. */
const MAX_LAG_MS = 400;

/** How long another session's cell may take meanwhile, ms (~10 ms when idle; 1.3 s before the fix). */
const MAX_BYSTANDER_MS = 1_000;

/** The host's event loop, watched with a 5 ms timer: its latest firing, ms. */
function lagProbe(): { readonly max: number; stop(): void } {
  let last = performance.now();
  let max = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    max = Math.max(max, now - last - 5);
    last = now;
  }, 5);
  return {
    get max() {
      return max;
    },
    stop: () => clearInterval(timer),
  };
}

Deno.test("fault: a 300,000-key commit and its replica after a restart do not stall the host; another session's cells keep answering", async () => {
  await using h = await startHost();
  await using writer = await openSession(h.client);
  await using bystander = await openSession(h.client);
  writer.pump();
  bystander.pump();
  assert.deepEqual((await run(h.client, bystander.id, 'text("warm")')).texts, ["warm"]);

  let stop = false;
  const latencies: number[] = [];
  const other = (async () => {
    while (!stop) {
      const started = performance.now();
      assert.deepEqual((await run(h.client, bystander.id, 'text("b")')).texts, ["b"]);
      latencies.push(performance.now() - started);
    }
  })();
  const lag = lagProbe();
  try {
    const stored = await run(
      h.client,
      writer.id,
      'for (let i = 0; i < 300_000; i++) store("k" + i, i); text("stored")',
    );
    assert.deepEqual({ texts: stored.texts, error: stored.error }, { texts: ["stored"], error: undefined });
    const commitLag = lag.max;
    // A runtime restart (a spinning cell terminated): the replacement gets the whole map again.
    const spawned = h.host.state.spawnCount;
    assert.ok((await execute(h.client, writer.id, SPIN, { yieldTimeMs: 60_000 })).outcome.yielded);
    assert.ok((await h.client.terminate({ sessionId: writer.id, cellId: "2" })).liveCell.terminated);
    const loaded = await run(
      h.client,
      writer.id,
      'let sum = 0; for (let i = 0; i < 300_000; i++) sum += load("k" + i); text(String(sum))',
    );
    assert.ok(h.host.state.spawnCount > spawned, "the spinning cell's runtime was replaced");
    assert.deepEqual({ texts: loaded.texts, error: loaded.error }, {
      texts: [String(299_999 * 300_000 / 2)],
      error: undefined,
    });
    stop = true;
    await other;
    const sorted = latencies.toSorted((a, b) => a - b);
    const figures = `host timer lag: ${commitLag.toFixed(0)} ms during the commit, ${
      lag.max.toFixed(0)
    } ms in all; another session's cell: p50 ${sorted[sorted.length >> 1].toFixed(0)} ms, max ${
      sorted.at(-1)!.toFixed(0)
    } ms over ${sorted.length} cells`;
    console.log(figures);
    assert.ok(lag.max < MAX_LAG_MS, figures);
    assert.ok(sorted.at(-1)! < MAX_BYSTANDER_MS, figures);
    assert.ok(sorted.length > 10, figures);
  } finally {
    stop = true;
    lag.stop();
    await other.catch(() => {});
  }
});

Deno.test("fault: a 1,000,000-key commit (~10 MB) succeeds and every key loads back", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  s.pump();
  const stored = await execute(
    h.client,
    s.id,
    'for (let i = 0; i < 1_000_000; i++) store(i.toString(36), i); text("stored")',
    { yieldTimeMs: 120_000 },
  );
  assert.deepEqual(stored.outcome.completed, {});
  const loaded = await execute(
    h.client,
    s.id,
    `let sum = 0, n = 0;
     for (let i = 0; i < 1_000_000; i++) { const v = load(i.toString(36)); if (v === i) n++; sum += v; }
     text(n + " " + sum)`,
    { yieldTimeMs: 120_000 },
  );
  assert.deepEqual(loaded.outcome.completed, {});
  assert.equal(loaded.outcome.contentItems[0].text.text, `1000000 ${999_999 * 1_000_000 / 2}`);
});

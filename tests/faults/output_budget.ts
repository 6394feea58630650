/**
 * Fault: buffered output from many cells (issue 27, break 2). Four sessions start ten cells each in
 * Client output mode; every cell prints ~63 MiB of text with a character past Latin-1 in each item
 * (V8 would keep it as two bytes per character) and nobody reads the outcomes. The host stays up
 * under the host-wide memory budget (`hostBufferedBytes`): its RSS stays under
 * {@link RSS_BOUND_BYTES}, a bystander session is served while the flood runs and after it, and a
 * flooding session's next cell gets its refused output reported in a notice, not lost silently.
 * With a small `--limit hostBufferedBytes`, one session's unread output is held to its share while
 * another's cell is delivered whole, and a commit past the share fails with the budget's text.
 */
import assert from "node:assert/strict";
import { childrenOf } from "../_procs.ts";
import {
  eventually,
  execute,
  type OpenSession,
  openSession,
  rawClient,
  run,
  serve,
  startHost,
  texts,
} from "../_harness.ts";

const SESSIONS = 4;
const CELLS = 10;
const ITEMS = 63;
/** The host's resident memory bound: the default budget (~1 GiB here) plus room for delivery copies. */
const RSS_BOUND_BYTES = 2.5 * 2 ** 30;
/** Waits first (so the Execute's yield carries nothing), then ~63 MiB in 1 MiB items, each with a `中`. */
const FLOOD = `await new Promise((r) => setTimeout(r, 100));
const s = "\\u4e2d" + "x".repeat(1_048_000);
for (let i = 0; i < ${ITEMS}; i++) text(s);`;
const NOTICE = "[Code Mode host memory budget reached: refused ";

function rssBytes(pid: number): number {
  try {
    const status = Deno.readTextFileSync(`/proc/${pid}/status`);
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}

Deno.test(`fault: ${SESSIONS} sessions × ${CELLS} cells of ~63 MiB unread output: the host stays up under its memory budget, a bystander is served`, async () => {
  const p = await serve(["--listen", "grpc://127.0.0.1:0", "--warm-sessions", "2"]);
  const [host] = childrenOf(p.child.pid);
  const raw = rawClient(p.url);
  let maxRss = 0;
  const sampler = setInterval(() => maxRss = Math.max(maxRss, rssBytes(host)), 50);
  const sessions: OpenSession[] = [];
  try {
    const bystander = await openSession(raw.client);
    for (let i = 0; i < SESSIONS; i++) {
      const s = await openSession(raw.client);
      s.pump();
      sessions.push(s);
    }
    const started = performance.now();
    await Promise.all(sessions.flatMap((s) =>
      Array.from({ length: CELLS }, async () => {
        const { outcome } = await execute(raw.client, s.id, FLOOD, { yieldTimeMs: 1 });
        assert.ok(outcome?.yielded, `the flood cell yields first: ${JSON.stringify(outcome)?.slice(0, 200)}`);
      })
    ));
    // Served while the flood runs.
    const during = await execute(raw.client, bystander.id, 'text("served during")', { yieldTimeMs: 30_000 });
    assert.deepEqual(texts(during.outcome), ["served during"]);
    const allClosed = await eventually(
      () => sessions.every((s) => s.events.filter((e) => e.cellClosed).length === CELLS),
      90_000,
    );
    const floodMs = Math.round(performance.now() - started);
    maxRss = Math.max(maxRss, rssBytes(host));
    assert.ok(
      allClosed,
      `every flood cell closed (host alive: ${rssBytes(host) > 0}): ${p.stderr().slice(-2_000)}`,
    );
    const after = await execute(raw.client, bystander.id, 'text("served after")', { yieldTimeMs: 30_000 });
    assert.deepEqual(texts(after.outcome), ["served after"]);
    // A flooding session's next cell: its output past the session's share is refused, with a notice.
    const next = await execute(raw.client, sessions[0].id, FLOOD, { yieldTimeMs: 60_000 });
    assert.ok(next.outcome?.completed, JSON.stringify(next.outcome)?.slice(0, 200));
    assert.equal(next.outcome.completed.errorText, undefined);
    const nextTexts = texts(next.outcome);
    const notice = nextTexts.at(-1)!;
    assert.ok(notice.startsWith(NOTICE), `the last item is the budget notice: ${notice.slice(0, 120)}`);
    console.log(
      `${SESSIONS * CELLS} flood cells closed in ${floodMs} ms; host RSS peaked at ${
        Math.round(maxRss / 2 ** 20)
      } MiB (bound ${RSS_BOUND_BYTES / 2 ** 20} MiB); next cell kept ${
        nextTexts.length - 1
      } items, then: ${notice}`,
    );
    assert.ok(maxRss < RSS_BOUND_BYTES, `host RSS peaked at ${maxRss} bytes`);
  } finally {
    clearInterval(sampler);
    for (const s of sessions) s.cancel();
    raw.channel.close();
    try {
      Deno.kill(p.child.pid, "SIGKILL");
      if (host) Deno.kill(host, "SIGKILL");
    } catch {
      // Already gone.
    }
    await p.exited();
  }
});

Deno.test("fault: under an 8 MiB budget one session's unread output is held to its share, another's is whole, a commit past the share fails", async () => {
  const MIB = 1_048_576;
  await using h = await startHost({ limits: { hostBufferedBytes: 8 * MIB } });
  await using greedy = await openSession(h.client);
  await using other = await openSession(h.client);
  const { started } = await execute(
    h.client,
    greedy.id,
    `await new Promise((r) => setTimeout(r, 100)); for (let i = 0; i < 10; i++) text("\\u20ac" + "x".repeat(${MIB}));`,
    { yieldTimeMs: 1 },
  );
  const done = await h.client.wait({
    sessionId: greedy.id,
    cellId: started.cellId,
    waitId: "w",
    yieldTimeMs: 30_000,
  });
  const kept = texts(done.liveCell);
  assert.ok(kept.length >= 2 && kept.length < 10, `${kept.length}`);
  assert.match(kept.at(-1)!, /^\[Code Mode host memory budget reached: refused \d+ later output items/);
  // Read outcomes hold nothing: the greedy session's next cell is delivered whole.
  const again = await run(
    h.client,
    greedy.id,
    `for (let i = 0; i < 3; i++) text("\\u20ac" + "y".repeat(${MIB}))`,
  );
  assert.equal(again.texts.length, 3);
  assert.ok(again.texts.every((t) => t.length === MIB + 1));
  const small = await run(h.client, other.id, 'for (let i = 0; i < 3; i++) text("ok" + i)');
  assert.deepEqual(small.texts, ["ok0", "ok1", "ok2"]);
  const stored = await run(h.client, other.id, `store("big", "x".repeat(${8 * MIB}))`);
  assert.match(
    stored.error!,
    /^stored values exceed the host's memory budget: the host holds at most 8388608 bytes/,
  );
  assert.ok(
    h.log.lines.some((l) => String(l.msg).startsWith("host memory budget reached")),
    "the refusal is logged",
  );
});

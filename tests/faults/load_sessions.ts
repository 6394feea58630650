/**
 * Fault: N sessions × M cells at once (issue 20, fault suite). Eight sessions run fifteen cells
 * each, three at a time per session and all sessions concurrently, against one real host; every
 * cell's output is checked item by item: no item is lost, duplicated, reordered or delivered to
 * another cell or session, every notification reaches its own lease, and every stored value lands
 * in its own session only.
 */
import assert from "node:assert/strict";
import { execute, type OpenSession, openSession, run, startHost, texts } from "../_harness.ts";

const SESSIONS = 8;
const CELLS = 15;
const PER_SESSION_CONCURRENCY = 3;
const ITEMS = 6;

function cellSource(tag: string, cell: number): string {
  return `for (let i = 0; i < ${ITEMS}; i++) {
    text(${JSON.stringify(tag)} + ":${cell}:" + i);
    if (i % 2) await new Promise((r) => setTimeout(r, 1)); else await null;
  }
  notify(${JSON.stringify(tag)} + ":${cell}:n");
  store("c${cell}", ${JSON.stringify(tag)});`;
}

Deno.test(`fault: ${SESSIONS} sessions × ${CELLS} cells concurrently, every output checked: no loss, duplication or crosstalk`, async () => {
  await using h = await startHost({ warmSessions: 2 });
  const sessions: { s: OpenSession; tag: string }[] = [];
  for (let i = 0; i < SESSIONS; i++) {
    const s = await openSession(h.client);
    s.pump();
    sessions.push({ s, tag: `s${i}-${crypto.randomUUID().slice(0, 8)}` });
  }
  const started = performance.now();
  try {
    await Promise.all(sessions.map(async ({ s, tag }) => {
      let next = 0;
      const worker = async () => {
        while (next < CELLS) {
          const cell = next++;
          const { outcome } = await execute(h.client, s.id, cellSource(tag, cell), { yieldTimeMs: 60_000 });
          assert.ok(outcome?.completed, `${tag} cell ${cell}: ${JSON.stringify(outcome)}`);
          assert.equal(outcome.completed.errorText, undefined, `${tag} cell ${cell}`);
          assert.deepEqual(
            texts(outcome),
            Array.from({ length: ITEMS }, (_, i) => `${tag}:${cell}:${i}`),
            `${tag} cell ${cell}`,
          );
        }
      };
      await Promise.all(Array.from({ length: PER_SESSION_CONCURRENCY }, worker));
    }));
    const ms = performance.now() - started;
    console.log(
      `${SESSIONS * CELLS} cells in ${Math.round(ms)} ms: ${
        (SESSIONS * CELLS / ms * 1000).toFixed(1)
      } cells/s`,
    );
    for (const { s, tag } of sessions) {
      const keys = Array.from({ length: CELLS }, (_, c) => `c${c}`);
      const loaded = await run(
        h.client,
        s.id,
        `text(JSON.stringify(${JSON.stringify(keys)}.map((k) => load(k))))`,
      );
      assert.deepEqual(JSON.parse(loaded.texts[0]), keys.map(() => tag), tag);
      const notes = s.events.filter((e) => e.notification).map((e) => e.notification.text).sort();
      assert.deepEqual(notes, Array.from({ length: CELLS }, (_, c) => `${tag}:${c}:n`).sort(), tag);
    }
  } finally {
    for (const { s } of sessions) s.cancel();
  }
});

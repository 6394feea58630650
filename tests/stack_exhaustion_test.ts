/**
 * Helpers called at stack exhaustion (issue 20, item 1), against a real host: a cell that recurses
 * until its stack is full and then calls a helper completes, each helper call either takes effect
 * once or throws without effect, and no other cell of the session is affected (the stream lock
 * shared by the runtime's threads is never left held).
 *
 * The cells use a cascade: every frame of a recursion at the limit calls the helper in its
 * `catch`, so the helper runs at every depth from the deepest up until it succeeds, and its path
 * runs out of stack at every point it can. Each cascade is repeated with 0…15 extra frames before
 * the call, to shift where the overflow lands.
 */
import assert from "node:assert/strict";
import { execute, type Msg, openSession, run, startHost, texts } from "./_harness.ts";

const PADS = 16;

/** A cell that runs `call` in cascades at stack exhaustion, then prints how many calls succeeded. */
function cascadeSource(call: string): string {
  return `
let ok = 0;
function pad(j) { if (j > 0) return pad(j - 1) + 1; ${call}; ok++; return 0; }
function cascade(j) { try { cascade(j); } catch { pad(j); } }
for (let j = 0; j < ${PADS}; j++) { try { cascade(j); } catch {} }
await 0;
text("ok " + ok);
`;
}

const HELPERS: [string, string][] = [
  ["text", 'text("x")'],
  ["image", 'image("data:image/png;base64,AAAA")'],
  ["store", 'store("k", { a: [1, 2] })'],
  ["load", 'load("k")'],
  ["notify", 'notify("n")'],
  ["tools.x", "tools.echo({ a: 1 }).catch(() => {})"],
  ["exit", 'try { exit(); } catch (e) { if (e !== "__codex_code_mode_exit__") throw e; }'],
  ["yield_control", "yield_control()"],
  ["setTimeout", "setTimeout(() => {}, 0)"],
  ["clearTimeout", "clearTimeout(setTimeout(() => {}, 100000))"],
];

Deno.test("A helper called at stack exhaustion takes effect once or throws, and never wedges its cell or session (every helper)", async () => {
  await using h = await startHost({ warmSessions: 0 });
  await using s = await openSession(h.client);
  const enabledTools = [{ name: "echo", toolName: { name: "echo" }, description: "echo", kind: 1 }];
  s.pump();
  for (const [name, call] of HELPERS) {
    const notices = s.events.filter((e) => e.notification?.text === "n").length;
    let { outcome } = await execute(h.client, s.id, cascadeSource(call), {
      yieldTimeMs: 20_000,
      enabledTools,
    });
    const items: Msg[] = [...(outcome?.contentItems ?? [])];
    // yield_control() yields the Execute: the rest of the cell comes to Waits.
    for (let i = 0; outcome?.yielded && i < 100; i++) {
      outcome = (await h.client.wait({
        sessionId: s.id,
        cellId: outcome.cellId,
        waitId: `w-${i}`,
        yieldTimeMs: 20_000,
      })).liveCell;
      items.push(...(outcome?.contentItems ?? []));
    }
    assert.ok(
      outcome?.completed,
      `${name}: the cell did not complete: ${JSON.stringify(outcome).slice(0, 300)}`,
    );
    assert.equal(outcome.completed.errorText, undefined, name);
    const printed = texts({ contentItems: items });
    if (name === "exit") {
      // exit() ends the cell at its first successful call (as the reference's termination does).
      assert.deepEqual(printed, [], name);
      assert.deepEqual((await run(h.client, s.id, 'text("C")')).texts, ["C"], `${name}: the next cell`);
      continue;
    }
    assert.equal(printed.at(-1), `ok ${PADS}`, `${name}: every cascade's call succeeded once`);
    if (name === "text") assert.deepEqual(printed.slice(0, -1), Array(PADS).fill("x"), name);
    else if (name === "image") assert.equal(printed.length - 1, PADS, name);
    else assert.equal(printed.length, 1, name);
    if (name === "notify") {
      // The cell's notifications precede its CellClosed on the lease.
      await s.received((e) => e.cellClosed?.cellId === outcome.cellId);
      assert.equal(s.events.filter((e) => e.notification?.text === "n").length - notices, PADS, name);
    }
    assert.deepEqual((await run(h.client, s.id, 'text("C")')).texts, ["C"], `${name}: the next cell`);
    const timer = await run(h.client, s.id, 'await new Promise((r) => setTimeout(r, 5)); text("T")');
    assert.deepEqual(timer.texts, ["T"], `${name}: a timer cell`);
  }
  assert.deepEqual((await run(h.client, s.id, 'text(JSON.stringify(load("k")))')).texts, ['{"a":[1,2]}']);
});

/**
 * Information a cell should not see (issue 20, item 6), against a real host: no call site or stack
 * frame names a host path (the runtime's directory holds the host's PID), however user code asks
 * (its own `Error.prepareStackTrace`, replaced call site methods, from a timer, after an await), and
 * no clock is finer than `Date.now()`'s milliseconds (no `Temporal`, no `performance`).
 */
import assert from "node:assert/strict";
import { openSession, run, startHost } from "./_harness.ts";

/** Every file name and function name a cell's call sites show, in several kinds of entry. */
const SITES = `
const seen = [];
const proto = (() => { let p; Error.prepareStackTrace = (e, s) => { p = Object.getPrototypeOf(s[0]); return ""; }; new Error().stack; return p; })();
const fileName = proto.getFileName, functionName = proto.getFunctionName, str = proto.toString;
// Replaced methods must not fool the filter: the originals are called on what user code gets.
for (const name of ["getFileName", "isEval"]) {
  try { Object.defineProperty(proto, name, { value: name === "isEval" ? () => true : () => "exec_main.mjs" }); } catch {}
}
const look = () => {
  Error.prepareStackTrace = (e, sites) => {
    for (const s of sites) seen.push(String(fileName.call(s)), String(functionName.call(s)), str.call(s));
    return "";
  };
  new Error().stack;
  Error.prepareStackTrace = undefined;
  seen.push(new Error().stack);
};
look();
await 0;
look();
await new Promise((resolve) => setTimeout(() => { look(); resolve(); }, 1));
Promise.resolve().then(look);
await null;
text(JSON.stringify(seen));
`;

Deno.test("No call site or stack frame a cell can see names a host path or a bootstrap function", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const r = await run(h.client, s.id, SITES);
  assert.equal(r.error, undefined);
  const seen: string[] = JSON.parse(r.texts[0]);
  assert.ok(seen.length > 8, "call sites were seen");
  for (const item of seen) {
    assert.ok(!item.includes("/"), `a path: ${item}`);
    assert.ok(!item.includes(String(Deno.pid)), `the host's PID: ${item}`);
    assert.ok(
      !/#enter|#evaluate|runInContext|code-mode-host|cell\.js|ext:/.test(item),
      `the bootstrap: ${item}`,
    );
  }
});

Deno.test("No clock in a cell is finer than Date.now()'s milliseconds: no Temporal, no performance", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  // The reference host has no Temporal either.
  const r = await run(
    h.client,
    s.id,
    "text(typeof Temporal); text(typeof performance); text(Date.now() % 1 === 0)",
  );
  assert.equal(r.error, undefined);
  assert.deepEqual(r.texts, ["undefined", "undefined", "true"]);
});

import assert from "node:assert/strict";
import { budgetFloor, HostMemoryBudget } from "./memory_budget.ts";
import { StoredValues, type StoreUpdate } from "./stored_values.ts";
import { BudgetedCollector, createOutputCollector, ITEM_OVERHEAD_BYTES } from "../output/output_collector.ts";

const MIB = 1_048_576;

Deno.test("HostMemoryBudget: the host never holds more than the total; a refused charge takes nothing", () => {
  const budget = new HostMemoryBudget(16 * MIB);
  const accounts = Array.from({ length: 4 }, () => budget.account());
  let taken = 0;
  for (let round = 0; round < 100; round++) {
    for (const a of accounts) if (a.tryCharge(MIB / 4)) taken += MIB / 4;
  }
  assert.equal(budget.used, taken);
  assert.ok(budget.used <= 16 * MIB);
  const before = budget.used;
  assert.equal(accounts[0].tryCharge(16 * MIB), false);
  assert.equal(budget.used, before);
});

Deno.test("HostMemoryBudget: one session holds at most all but the floor; a small session is still served", () => {
  const budget = new HostMemoryBudget(64 * MIB);
  assert.equal(budget.floor, budgetFloor(64 * MIB));
  const greedy = budget.account();
  while (greedy.tryCharge(MIB)) { /* fill */ }
  assert.equal(greedy.held, 64 * MIB - budget.floor);
  const small = budget.account();
  assert.ok(small.tryCharge(budget.floor));
  assert.equal(small.tryCharge(1), false, "the host is full");
});

Deno.test("HostMemoryBudget: past the floor, a session holds at most its fair share of the holders", () => {
  const budget = new HostMemoryBudget(80 * MIB);
  const [a, b, c, d] = Array.from({ length: 4 }, () => budget.account());
  for (const x of [a, b, c, d]) assert.ok(x.tryCharge(1));
  for (const x of [a, b, c, d]) while (x.tryCharge(MIB)) { /* fill */ }
  for (const x of [a, b, c, d]) assert.ok(x.held <= 20 * MIB + 1, `${x.held}`);
  assert.ok(a.held >= 19 * MIB);
});

Deno.test("HostMemoryBudget: closing an account releases what it holds; a closed account counts nothing", () => {
  const budget = new HostMemoryBudget(64 * MIB);
  const a = budget.account();
  assert.ok(a.tryCharge(10 * MIB));
  a.close();
  assert.equal(budget.used, 0);
  assert.ok(a.tryCharge(100 * MIB));
  assert.equal(budget.used, 0);
});

Deno.test("HostMemoryBudget: a total of 0 turns the budget off", () => {
  const budget = new HostMemoryBudget(0);
  const a = budget.account();
  assert.ok(a.tryCharge(2 ** 40));
});

Deno.test("StoredValues: a commit past the session's share of the host budget is refused whole; applied commits are charged", () => {
  const budget = new HostMemoryBudget(8 * MIB);
  const account = budget.account();
  const store = new StoredValues(64 * MIB, account);
  const sent: StoreUpdate[] = [];
  const commit = (key: string, value: string) => {
    let refusal: string | undefined;
    store.commit(new Map([[key, value]]), (refused) => (refusal = refused, true), (u) => sent.push(u));
    return refusal;
  };
  assert.match(
    commit("k", JSON.stringify("€".repeat(3 * MIB)))!,
    /^stored values exceed the host's memory budget: the host holds at most 8388608 bytes/,
  );
  assert.deepEqual(sent, []);
  assert.equal(account.held, 0);
  assert.equal(commit("k", JSON.stringify("x".repeat(MIB))), undefined);
  assert.equal(account.held, 1 + MIB + 2);
  commit("k", "1");
  assert.equal(account.held, 2);
  const replica: StoreUpdate[] = [];
  store.sendReplica((u) => replica.push(u));
  assert.deepEqual(replica, [{ version: 2, reset: true, entries: [{ key: "k", valueJson: "1" }] }]);
});

Deno.test("StoredValues: a long value held as UTF-8 bytes comes back unchanged in the replica", () => {
  const store = new StoredValues(64 * MIB);
  const value = JSON.stringify("中€x".repeat(2_000));
  store.commit(new Map([["k", value]]), () => true, () => {});
  const replica: StoreUpdate[] = [];
  store.sendReplica((u) => replica.push(u));
  assert.equal(replica[0].entries[0].valueJson, value);
});

Deno.test("BudgetedCollector: each item is charged its payload and overhead; release gives the window's charge back", () => {
  const budget = new HostMemoryBudget(64 * MIB);
  const account = budget.account();
  const out = createOutputCollector("client", {}, account);
  out.push({ type: "text", text: "中".repeat(1_000) });
  assert.equal(account.held, 3_000 + ITEM_OVERHEAD_BYTES);
  const taken = out.take();
  assert.equal(account.held, 3_000 + ITEM_OVERHEAD_BYTES, "the taken window keeps its charge");
  taken.release!();
  assert.equal(account.held, 0);
});

Deno.test("BudgetedCollector: a refused item and every later one are not kept; the window ends with the notice; kept output is delivered", () => {
  const budget = new HostMemoryBudget(8 * MIB);
  const account = budget.account();
  const out = createOutputCollector("client", {}, account);
  const item = { type: "text" as const, text: "中" + "x".repeat(MIB) };
  for (let i = 0; i < 10; i++) out.push(item);
  out.push({ type: "text", text: "tiny" });
  const rendered = out.render();
  const kept = rendered.length - 1;
  assert.ok(kept >= 5 && kept < 10, `${kept}`);
  assert.deepEqual(rendered.slice(0, kept), Array(kept).fill(item));
  assert.equal(
    (rendered.at(-1) as { text: string }).text,
    `[Code Mode host memory budget reached: refused ${11 - kept} later output items (${
      (10 - kept) * (MIB + 3) + 4
    } bytes) of this cell; the host buffers at most 8388608 bytes of unread output and stored values, shared by its sessions]`,
  );
  const entries = out.entries();
  assert.equal(entries.length, kept + 1);
  // The next window (after a take) is charged afresh.
  const taken = out.take();
  taken.release!();
  out.push({ type: "text", text: "again" });
  assert.deepEqual(out.render(), [{ type: "text", text: "again" }]);
});

Deno.test("BudgetedCollector: a Client window past maxMessageBytes holds no charge; a Server window's charge is capped", () => {
  const budget = new HostMemoryBudget(256 * MIB);
  const account = budget.account();
  const client = createOutputCollector("client", { maxMessageBytes: 4 * MIB }, account);
  for (let i = 0; i < 6; i++) client.push({ type: "text", text: "x".repeat(MIB) });
  assert.equal(account.held, 0);
  assert.throws(() => client.render(), RangeError);
  const server = createOutputCollector("server", { maxAudioBytes: 0, maxImageBytes: 0 }, account);
  for (let i = 0; i < 20; i++) server.push({ type: "text", text: "x".repeat(MIB) });
  assert.ok(account.held <= 2 * MIB + 32_768 * ITEM_OVERHEAD_BYTES, `${account.held}`);
  assert.ok(server instanceof BudgetedCollector);
  server.pushForced({ type: "text", text: "Script error:\nboom" });
  assert.equal(server.render().at(-1)!.type, "text");
});

Deno.test("HostMemoryBudget: an account's first refusal is reported once", () => {
  const budget = new HostMemoryBudget(8 * MIB);
  let reports = 0;
  const a = budget.account(() => reports++);
  assert.equal(a.tryCharge(16 * MIB), false);
  assert.equal(a.fits(16 * MIB), false);
  assert.equal(reports, 1);
});

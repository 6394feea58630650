/**
 * The JavaScript environment of a cell, through a real host and real runtimes (SPEC §5, §12.5).
 */
import assert from "node:assert/strict";
import { execute, notified, openSession, run, startHost, type TestHost, texts } from "./_harness.ts";
import { REMOVED_GLOBALS, SCENARIO_55_GLOBALS } from "./_spec_lists.ts";

async function withSession(fn: (h: TestHost, sessionId: string) => Promise<void>): Promise<void> {
  await using h = await startHost();
  await using s = await openSession(h.client);
  await fn(h, s.id);
}

Deno.test("A cell's global scope has no console and no platform APIs (scenarios 54, 55)", async () => {
  await withSession(async (h, id) => {
    assert.deepEqual((await run(h.client, id, 'text(Object.hasOwn(globalThis, "console"))')).texts, [
      "false",
    ]);
    const names = SCENARIO_55_GLOBALS;
    const r = await run(
      h.client,
      id,
      `text(${JSON.stringify(names)}.map((n) => typeof globalThis[n]).join(","))`,
    );
    assert.deepEqual(r.texts, [names.map(() => "undefined").join(",")]);
  });
});

Deno.test("V8's gc, used by the runtime on its warmed spares, is never visible to a cell", async () => {
  await withSession(async (h, id) => {
    // Several cells: each runs in a spare that collected its garbage (worker/collect_garbage.ts).
    for (let i = 0; i < 3; i++) {
      const r = await run(
        h.client,
        id,
        'text(`${typeof gc} ${typeof globalThis.gc} ${Object.hasOwn(globalThis, "gc")}`)',
      );
      assert.deepEqual(r.texts, ["undefined undefined false"]);
    }
  });
});

Deno.test("The rehearsal cell a spare runs at warm-up leaves nothing a cell or the client sees", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  s.pump();
  // The rehearsal (worker/cell_rehearsal.ts) prints, stores "k", notifies "n" and reads "s".
  for (let i = 0; i < 3; i++) {
    const r = await run(h.client, s.id, 'text(`${load("k")} ${load("s")}`); text(Object.keys(globalThis))');
    assert.equal(r.texts.length, 2);
    assert.equal(r.texts[0], "undefined undefined");
    assert.ok(!r.texts[1].split(",").includes("k"));
  }
  // A barrier notification: everything the lease carried before it is in `events` by then.
  await run(h.client, s.id, 'notify("barrier")');
  assert.ok(await notified(s, "barrier"));
  assert.deepEqual(
    s.events.filter((e) => e.notification).map((e) => e.notification.text),
    ["barrier"],
  );
});

Deno.test("Helpers return undefined and text() converts values (scenarios 56, 57, 58)", async () => {
  await withSession(async (h, id) => {
    const r = await run(
      h.client,
      id,
      'text([text("first"), image("data:image/png;base64,AAA"), notify("n")].map(v => v === undefined))',
    );
    assert.equal(r.texts.at(-1), "[true,true,true]");
    const conv = await run(h.client, id, 'text(); text(null); text(1e21); text({a: 1}); text([1, "x"])');
    assert.deepEqual(conv.texts, ["undefined", "null", "1e+21", '{"a":1}', '[1,"x"]']);
    const cyc = await run(
      h.client,
      id,
      "const o = {}; o.self = o; try { text(o) } catch (e) { text(typeof e) }",
    );
    assert.deepEqual(cyc.texts, ["string"]);
  });
});

Deno.test("store/load convert keys, refuse undefined and hand out copies (scenario 65)", async () => {
  await withSession(async (h, id) => {
    assert.deepEqual((await run(h.client, id, 'store(1, "a"); text(load("1"))')).texts, ["a"]);
    const refused = await run(h.client, id, 'store("k", undefined)');
    assert.equal(refused.error, 'Unable to store "k". Only plain serializable objects can be stored.');
    const copy = await run(
      h.client,
      id,
      'store("o", {a: 1}); const v = load("o"); v.a = 2; text(load("o").a)',
    );
    assert.deepEqual(copy.texts, ["1"]);
  });
});

Deno.test("exit() completes successfully with the output before it (scenarios 67, 68)", async () => {
  await withSession(async (h, id) => {
    const r = await run(h.client, id, 'text("before"); exit(); text("after");');
    assert.deepEqual(r.texts, ["before"]);
    assert.equal(r.error, undefined);
    const t = await run(h.client, id, "setTimeout(() => exit(), 0); await new Promise(() => {})");
    assert.equal(t.error, undefined);
  });
});

Deno.test("Timers: validation, discarding at completion and failures (scenarios 69, 70, 71)", async () => {
  await withSession(async (h, id) => {
    assert.equal(
      (await run(h.client, id, 'setTimeout("x")')).error,
      "setTimeout expects a function callback",
    );
    assert.equal(
      (await run(h.client, id, "clearTimeout(Symbol())")).error,
      "clearTimeout expects a numeric timeout id",
    );
    assert.equal((await run(h.client, id, "clearTimeout(); clearTimeout(-1); text(1)")).error, undefined);
    assert.deepEqual((await run(h.client, id, 'setTimeout(() => text("late"), 50); text("now")')).texts, [
      "now",
    ]);
    const tick = await run(
      h.client,
      id,
      'setTimeout(() => { throw new Error("tick") }, 0); await new Promise(() => {})',
    );
    assert.ok(tick.error?.startsWith("Error: tick"), String(tick.error));
  });
});

Deno.test("Imports are refused statically and dynamically (scenarios 72, 80c, 80e)", async () => {
  await withSession(async (h, id) => {
    assert.equal(
      (await run(h.client, id, 'import fs from "node:fs";')).error,
      "Unsupported import in exec: node:fs",
    );
    // A dynamic import() rejects with the reference's string, which names no specifier.
    assert.deepEqual(
      (await run(h.client, id, 'try { await import("./x.js") } catch (e) { text(e) }')).texts,
      ["unsupported import in exec"],
    );
    assert.deepEqual(
      (await run(h.client, id, `try { await eval('import("node:fs")') } catch (e) { text(e) }`)).texts,
      ["unsupported import in exec"],
    );
    assert.deepEqual(
      (await run(h.client, id, `try { await Function('return import("node:fs")')() } catch (e) { text(e) }`))
        .texts,
      ["unsupported import in exec"],
    );
    assert.equal(
      (await run(h.client, id, 'import a from "x"; import b from "y";')).error,
      "Unsupported import in exec: x",
    );
    assert.equal((await run(h.client, id, 'export { c } from "z";')).error, "Unsupported import in exec: z");
    // A TypeScript cell's type-only import is gone once its types are stripped.
    assert.equal(
      (await run(h.client, id, 'import type { T } from "npm:t"; const v: T = 1;')).error,
      undefined,
    );
  });
});

Deno.test("TypeScript is stripped and run once; syntax errors are reported (scenarios 73, 74, 80d, 80f)", async () => {
  await withSession(async (h, id) => {
    const ts = await run(
      h.client,
      id,
      'const n: number = 2; interface P { a: string }; const p = { a: "x" } as P; text(n + p.a)',
    );
    assert.deepEqual(ts.texts, ["2x"]);
    assert.ok((await run(h.client, id, "text(1")).error?.startsWith("SyntaxError: "));
    // A cell is an ES module, as in the reference host.
    assert.equal((await run(h.client, id, "return 5")).error, "SyntaxError: Illegal return statement");
    assert.deepEqual((await run(h.client, id, "export const x = 1; text(typeof import.meta)")).texts, [
      "object",
    ]);
    assert.deepEqual((await run(h.client, id, 'text("once"); const n: number = 1; text(String(n))')).texts, [
      "once",
      "1",
    ]);
    const bad = await run(h.client, id, 'text("once"); const x: = 1;');
    assert.ok(bad.error?.startsWith("SyntaxError: "), String(bad.error));
    assert.deepEqual(bad.texts, []);
  });
});

Deno.test("Thrown values become error texts; unawaited rejections are ignored (scenarios 75, 76)", async () => {
  await withSession(async (h, id) => {
    assert.equal((await run(h.client, id, 'throw "plain failure"')).error, "plain failure");
    assert.ok((await run(h.client, id, 'throw new Error("boom")')).error?.startsWith("Error: boom"));
    const r = await run(h.client, id, 'Promise.reject("ignored"); text("ok")');
    assert.deepEqual(r.texts, ["ok"]);
    assert.equal(r.error, undefined);
  });
});

Deno.test("Intl has full ICU data (scenario 77)", async () => {
  await withSession(async (h, id) => {
    const r = await run(
      h.client,
      id,
      'text(new Date(Date.UTC(2025,0,2,3,4,5)).toLocaleString("fr-FR", {timeZone:"UTC", weekday:"long", day:"numeric", month:"long", hour:"2-digit", minute:"2-digit", second:"2-digit"}))',
    );
    assert.deepEqual(r.texts, ["jeudi 2 janvier à 03:04:05"]);
  });
});

Deno.test("Nothing of one cell is visible to the next (scenario 78)", async () => {
  await withSession(async (h, id) => {
    await run(h.client, id, "globalThis.leak = 1; Array.prototype.leak = 2");
    assert.deepEqual((await run(h.client, id, "text(typeof leak + ',' + typeof [].leak)")).texts, [
      "undefined,undefined",
    ]);
  });
});

Deno.test("Helpers keep working when user code replaces JSON.stringify (scenario 79)", async () => {
  await withSession(async (h, id) => {
    const r = await run(h.client, id, 'JSON.stringify = () => "x"; text({a: 1}); store("k", {a: 1})');
    assert.deepEqual(r.texts, ['{"a":1}']);
    assert.deepEqual((await run(h.client, id, 'text(load("k").a)')).texts, ["1"]);
  });
});

Deno.test("No outer-realm object is reachable through constructors (scenario 80a)", async () => {
  await withSession(async (h, id) => {
    const r = await run(
      h.client,
      id,
      'text(text.constructor("return typeof process")()); text(globalThis.constructor.constructor("return typeof Deno")()); text(Object.getPrototypeOf(text) === Function.prototype)',
    );
    assert.deepEqual(r.texts, ["undefined", "undefined", "true"]);
  });
});

Deno.test("Stack frames name exec_main.mjs and never the source (scenario 80b)", async () => {
  await withSession(async (h, id) => {
    const [stack] = (await run(h.client, id, "try { null.x } catch (e) { text(e.stack) }")).texts;
    assert.ok(stack.includes("exec_main.mjs:1:"), stack);
    assert.ok(!stack.includes("data:") && !stack.includes("base64"), stack);
  });
});

Deno.test("Every removed global is absent, and a later rejection does not fail the cell (scenario 80h)", async () => {
  await withSession(async (h, id) => {
    const source = `const bad = ${
      JSON.stringify(REMOVED_GLOBALS)
    }.filter((n) => Object.hasOwn(globalThis, n) || (n in globalThis) || typeof globalThis[n] !== "undefined");
text(JSON.stringify(bad)); Promise.reject("x"); text("after")`;
    const r = await run(h.client, id, source);
    assert.deepEqual(r.texts, ["[]", "after"]);
    assert.equal(r.error, undefined);
  });
});

Deno.test("Two concurrent cells of one session run in separate isolates", async () => {
  await withSession(async (h, id) => {
    const [a, b] = await Promise.all([
      execute(
        h.client,
        id,
        'globalThis.mark = "a"; await new Promise((r) => setTimeout(r, 50)); text(globalThis.mark)',
      ),
      execute(
        h.client,
        id,
        'globalThis.mark = "b"; await new Promise((r) => setTimeout(r, 50)); text(globalThis.mark)',
      ),
    ]);
    assert.deepEqual([texts(a.outcome), texts(b.outcome)].sort(), [["a"], ["b"]]);
  });
});

/**
 * Fault: storage abuse (issue 20, fault suite), against a real host, each case as SPEC §5.3, §5.7
 * and §6 say: a session's stored values exactly at the 64 MiB `maxStoredValueBytes` limit (key
 * bytes plus JSON text bytes) are stored and load back; one byte over is refused with `stored
 * values exceed the 67108864-byte session limit` and records nothing; values nested deeper than
 * 127 levels are refused with the reference host's JSON parser message (127 store and load back);
 * `__proto__` and other `Object.prototype` names are plain keys, and a `__proto__` own property
 * survives as data, polluting nothing; `undefined` is refused with the SPEC's message, functions
 * and symbols with the reference's, BigInt and cycles with stringify's own error, and the §5.7
 * conversions apply.
 */
import assert from "node:assert/strict";
import { openSession, run, startHost } from "../_harness.ts";

const LIMIT = 67_108_864;

Deno.test("fault: stored values at the 64 MiB limit are kept; one byte over is refused with the SPEC message", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  // Key "k" (1 byte) + the JSON text of a string of n characters (n + 2 bytes) = the limit.
  const n = LIMIT - 3;
  const at = await run(h.client, s.id, `store("k", "x".repeat(${n})); text("stored")`);
  assert.deepEqual({ texts: at.texts, error: at.error }, { texts: ["stored"], error: undefined });
  assert.deepEqual((await run(h.client, s.id, 'text(load("k").length)')).texts, [String(n)]);
  const over = await run(
    h.client,
    s.id,
    `for (const [k, v] of [["k", "x".repeat(${n + 1})], ["k2", 1], ["", null]]) {
       try { store(k, v); text("stored " + k); } catch (e) { text(typeof e + ": " + e); }
     }
     text(load("k").length); text(String(load("k2")));`,
  );
  const refused = `string: stored values exceed the ${LIMIT}-byte session limit`;
  assert.deepEqual(over.texts, [refused, refused, refused, String(n), "undefined"]);
  assert.equal(over.error, undefined);
  // Nothing was recorded: the next cell sees the value at the limit, and no other key.
  assert.deepEqual(
    (await run(h.client, s.id, 'text(load("k").length); text(String(load("k2"))); text(String(load("")))'))
      .texts,
    [String(n), "undefined", "undefined"],
  );
  // Replacing the value by a smaller one frees the room.
  assert.deepEqual(
    (await run(h.client, s.id, 'store("k", "small"); store("k2", 2); text(load("k") + load("k2"))')).texts,
    ["small2"],
  );
  assert.deepEqual((await run(h.client, s.id, 'text(load("k") + load("k2"))')).texts, ["small2"]);
});

Deno.test("fault: deep values, __proto__ keys and non-JSON values are stored or refused exactly as SPEC §5.3/§5.7/§6 say", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  await using bystander = await openSession(h.client);
  // Deep values: the reference host reads a stored value back with a JSON parser that stops at 128
  // levels of nesting, so 1,000,000 nested arrays (or objects) are refused with its message and
  // store nothing; 127 levels store and load back whole.
  const walk =
    `const depth = (d) => { let n = 0; while (d !== null && typeof d === "object") { d = Array.isArray(d) ? d[0] : d.a; n++; } return n + ":" + d; };`;
  const deep = await run(
    h.client,
    s.id,
    `${walk}
     let v = 0, o = "end"; for (let i = 0; i < 1_000_000; i++) { v = [v]; o = { a: o }; }
     try { store("deep", v) } catch (e) { text(e) }
     try { store("deepObject", o) } catch (e) { text(e) }
     let w = 0; for (let i = 0; i < 127; i++) w = [w]; store("deep127", w);
     text(String(load("deep"))); text(depth(load("deep127")));`,
  );
  assert.deepEqual({ texts: deep.texts, error: deep.error }, {
    texts: [
      "failed to serialize JavaScript value: recursion limit exceeded at line 1 column 128",
      "failed to serialize JavaScript value: recursion limit exceeded at line 1 column 636",
      "undefined",
      "127:0",
    ],
    error: undefined,
  });
  assert.deepEqual(
    (await run(h.client, s.id, `${walk} text(depth(load("deep127")));`)).texts,
    ["127:0"],
  );

  // __proto__ and Object.prototype names are plain keys: absent until stored, then exactly the value.
  const names = ["__proto__", "constructor", "hasOwnProperty", "toString", "valueOf", "prototype"];
  const absent = await run(
    h.client,
    s.id,
    `for (const k of ${JSON.stringify(names)}) text(k + "=" + String(load(k)));`,
  );
  assert.deepEqual(absent.texts, names.map((k) => `${k}=undefined`));
  await run(
    h.client,
    s.id,
    `for (const k of ${JSON.stringify(names)}) store(k, { name: k });
     store("own", JSON.parse('{"__proto__": {"polluted": true}, "a": 1}'));`,
  );
  const proto = await run(
    h.client,
    s.id,
    `for (const k of ${JSON.stringify(names)}) text(k + "=" + JSON.stringify(load(k)));
     const own = load("own");
     text(JSON.stringify([Object.getPrototypeOf(own) === Object.prototype, Object.hasOwn(own, "__proto__"),
       own.__proto__ === Object.prototype, own.polluted ?? null, ({}).polluted ?? null, own.a, JSON.stringify(own)]));`,
  );
  assert.deepEqual(proto.texts, [
    ...names.map((k) => `${k}=${JSON.stringify({ name: k })}`),
    JSON.stringify([true, true, false, null, null, 1, '{"__proto__":{"polluted":true},"a":1}']),
  ]);

  // Non-JSON values.
  const unable = (k: string) =>
    `string: Unable to store ${JSON.stringify(k)}. Only plain serializable objects can be stored.`;
  const odd = await run(
    h.client,
    s.id,
    `const cycle = { a: 1 }; cycle.self = cycle;
     const cases = [["fn", () => 1], ["sym", Symbol("s")], ["undef", undefined], ["big", 1n], ["nestedBig", { n: 2n }],
       ["cycle", cycle]];
     for (const [k, v] of cases) {
       try { store(k, v); text(k + " stored"); } catch (e) { text(typeof e + ": " + String(e).split("\\n")[0]); }
     }
     store("conv", { nan: NaN, inf: -Infinity, date: new Date(0), map: new Map([[1, 2]]), set: new Set([1]),
       fn: () => 1, undef: undefined, arr: [undefined, () => 1, Symbol("x")], json: { toJSON: () => "custom" } });
     for (const [k] of cases) text(k + "=" + String(load(k)));
     text(JSON.stringify(load("conv")));`,
  );
  assert.equal(odd.error, undefined);
  // The reference's texts: a value with no JSON text fails its JSON reader ("undefined" is not JSON).
  const noJson = "string: failed to serialize JavaScript value: expected value at line 1 column 1";
  assert.deepEqual(odd.texts, [
    noJson,
    noJson,
    unable("undef"),
    "string: TypeError: Do not know how to serialize a BigInt",
    "string: TypeError: Do not know how to serialize a BigInt",
    "string: TypeError: Converting circular structure to JSON",
    "fn=undefined",
    "sym=undefined",
    "undef=undefined",
    "big=undefined",
    "nestedBig=undefined",
    "cycle=undefined",
    JSON.stringify({
      nan: null,
      inf: null,
      date: "1970-01-01T00:00:00.000Z",
      map: {},
      set: {},
      arr: [null, null, null],
      json: "custom",
    }),
  ]);
  // The bystander session sees none of it.
  assert.deepEqual(
    (await run(
      h.client,
      bystander.id,
      `text([...${
        JSON.stringify([...names, "own", "conv", "deep127", "deepObject"])
      }].map((k) => String(load(k))).join())`,
    ))
      .texts,
    [Array(names.length + 4).fill("undefined").join()],
  );
});

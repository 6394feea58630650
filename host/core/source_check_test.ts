import assert from "node:assert/strict";
import vm from "node:vm";
import { CELL_FILE_NAME, CELL_LINE_OFFSET, wrapCellSource } from "../../proto/cell_source.ts";
import { checkCellSource, type SourceCheck } from "./source_check.ts";

/** Asserts that the check accepted the source, and returns what the runtime would evaluate. */
function accepted(check: SourceCheck, typescript: boolean): string {
  assert.ok(check.ok, `expected the source to be accepted, got ${JSON.stringify(check)}`);
  assert.equal(check.typescript, typescript);
  return check.source;
}

/** Asserts that the check refused the source, and returns the error text. */
function refused(check: SourceCheck): string {
  assert.ok(!check.ok, `expected the source to be refused, got ${JSON.stringify(check)}`);
  return check.errorText;
}

/**
 * Test-only stand-in for the cell runtime: evaluates a checked source once, wrapped as the runtime
 * wraps it, in a fresh context whose `text()` collects outputs.
 */
async function evaluate(source: string): Promise<string[]> {
  const outputs: string[] = [];
  const context = vm.createContext({ text: (value: unknown) => outputs.push(String(value)) });
  const script = new vm.Script(wrapCellSource(source), {
    filename: CELL_FILE_NAME,
    lineOffset: CELL_LINE_OFFSET,
  });
  await script.runInContext(context)();
  return outputs;
}

Deno.test("checkCellSource() accepts plain JavaScript unchanged", async () => {
  const source = 'const a = [1, 2].map((x) => x * 2);\ntext(a.join(","));\nreturn;';
  assert.deepEqual(await checkCellSource(source), { ok: true, source, typescript: false });
});

Deno.test("checkCellSource() strips TypeScript that does not compile as JavaScript", async () => {
  const source = 'const n: number = 2; interface P { a: string }; const p = { a: "x" } as P; text(n + p.a)';
  const stripped = accepted(await checkCellSource(source), true);
  assert.deepEqual(await evaluate(stripped), ["2x"]);
});

Deno.test("checkCellSource() accepts type-only syntax, enum and namespace", async (t) => {
  const cases: [name: string, source: string, outputs: string[]][] = [
    [
      "annotations",
      "function f(a: number, b?: string): string { return a + (b ?? ''); }\ntext(f(1))",
      [
        "1",
      ],
    ],
    ["interface", "interface A { x: number; y?: A }\nconst a: A = { x: 1 };\ntext(a.x)", ["1"]],
    ["type alias", "type Pair<T> = [T, T];\nconst p: Pair<number> = [1, 2];\ntext(p[1])", ["2"]],
    ["as", "const v = (JSON.parse('3') as number) + 1;\ntext(v)", ["4"]],
    ["satisfies", "const o = { a: 1 } satisfies Record<string, number>;\ntext(o.a)", ["1"]],
    ["generic call f<T>()", "function id<T>(x: T): T { return x; }\ntext(id<string>('g'))", ["g"]],
    ["generic arrow", "const id = <T,>(x: T): T => x;\ntext(id(5))", ["5"]],
    ["declare", "declare const missing: number;\ndeclare function g(): void;\ntext('d')", ["d"]],
    ["non-null !", "const m = new Map([[1, 'one']]);\ntext(m.get(1)!.length)", ["3"]],
    ["non-null ! before division", "const a: number | undefined = 6;\ntext(a! / 2)", ["3"]],
    [
      "class members",
      "class C { private x = 1; constructor(public y: number) {} }\ntext(new C(2).y)",
      [
        "2",
      ],
    ],
    ["import type with no specifier list", "type T = typeof globalThis;\ntext('t')", ["t"]],
    ["enum", "enum Color { Red, Green = 5 }\ntext(Color.Green); text(Color[0])", ["5", "Red"]],
    ["namespace", "namespace N { export const a = 7; }\ntext(N.a)", ["7"]],
    ["enum with top-level return", "enum E { A = 1 }\ntext(E.A);\nreturn;\ntext('no')", ["1"]],
    [
      "top-level await and return",
      "const v: number = await Promise.resolve(8);\ntext(v);\nreturn v;",
      [
        "8",
      ],
    ],
  ];
  for (const [name, source, outputs] of cases) {
    await t.step(name, async () => {
      const stripped = accepted(await checkCellSource(source), true);
      assert.deepEqual(await evaluate(stripped), outputs);
    });
  }
});

Deno.test("checkCellSource() keeps lines and columns when it strips types only", async () => {
  const source = [
    "interface Point {",
    "  x: number;",
    "  y: number;",
    "}",
    "const p: Point = { x: 1, y: 2 } as Point;",
    "function where(): string {",
    "  return new Error('here').stack!.split('\\n')[1];",
    "}",
    "text(where());",
  ].join("\n");
  const stripped = accepted(await checkCellSource(source), true);
  assert.equal(stripped.length, source.length);
  assert.deepEqual(
    stripped.split("\n").map((line) => line.length),
    source.split("\n").map((line) => line.length),
  );
  assert.equal(stripped.indexOf("text(where())"), source.indexOf("text(where())"));
  const [frame] = await evaluate(stripped);
  assert.match(frame, /exec_main\.mjs:7:10\)?$/);
});

Deno.test("checkCellSource() reports a syntax error with V8's message", async (t) => {
  await t.step("text(1", async () => {
    assert.equal(
      refused(await checkCellSource("text(1")),
      "SyntaxError: missing ) after argument list",
    );
  });
  await t.step("export declaration", async () => {
    assert.equal(
      refused(await checkCellSource("export const x = 1;")),
      "SyntaxError: Unexpected token 'export'",
    );
  });
  await t.step("import.meta", async () => {
    assert.equal(
      refused(await checkCellSource("text(typeof import.meta)")),
      "SyntaxError: Cannot use 'import.meta' outside a module",
    );
  });
  await t.step("broken TypeScript after a statement that would output", async () => {
    assert.equal(
      refused(await checkCellSource('text("once"); const x: = 1;')),
      "SyntaxError: Missing initializer in const declaration",
    );
  });
  await t.step("the JavaScript error wins when the stripped source fails differently", async () => {
    assert.equal(
      refused(await checkCellSource("let n: number = 1;\nexport const x = n;")),
      "SyntaxError: Unexpected token ':'",
    );
  });
  await t.step("TypeScript export declaration", async () => {
    assert.match(refused(await checkCellSource("export const x: number = 1;")), /^SyntaxError: /);
  });
});

Deno.test("checkCellSource() refuses the first static import in source order", async (t) => {
  const cases: [source: string, specifier: string][] = [
    ['import fs from "node:fs";', "node:fs"],
    ['import a from "x"; import b from "y";', "x"],
    ['export { c } from "z";', "z"],
    ['export * from "w";', "w"],
    ['import "side-effect";', "side-effect"],
    ['import * as ns from "star"; text(ns)', "star"],
    ['import data from "./d.json" with { type: "json" };', "./d.json"],
    ['import type { T } from "npm:t"; const v: T = 1;', "npm:t"],
    ['export type { T } from "type-re-export"; const v: number = 1;', "type-re-export"],
    ['export type * as ns from "type-star"; const v: number = 1;', "type-star"],
    ['const n: number = 1;\ntext(n);\nimport { a } from "late";', "late"],
    ['text(await import("dynamic-first"));\nimport b from "static";', "static"],
    // The lexer cannot parse `a! / 2` (it reads a regular expression); the stripped text stands in.
    ['const a: number = 4;\ntext(a! / 2);\nimport x from "after-non-null";', "after-non-null"],
    ['let a: number = 4;\ntext(a! / 2);\nimport type { T } from "type-only";', "type-only"],
    ['let a = 4;\ntext(a! / 2);\nexport type { T } from "re-export";\nimport "v";', "re-export"],
    ['let a = 4;\ntext(a! / 2);\nimport { type T } from "t";\nimport type U from "u";', "t"],
  ];
  for (const [source, specifier] of cases) {
    await t.step(source, async () => {
      assert.equal(
        refused(await checkCellSource(source)),
        `Unsupported import in exec: ${specifier}`,
      );
    });
  }
});

Deno.test("checkCellSource() leaves dynamic import() to the runtime", async () => {
  const source = 'try { await import("./x.js") } catch (e) { text(e) }';
  assert.deepEqual(await checkCellSource(source), { ok: true, source, typescript: false });
});

Deno.test("checkCellSource() ignores import text in strings, comments and templates", async (t) => {
  const sources = [
    `const s = "import x from 'y'"; text(s)`,
    `// import a from "b"\n/* export { c } from "d" */ text(1)`,
    "const t = `import x from 'y'`; text(t)",
    "const r = /import x from 'y'/; text(r)",
    // HTML-like comments are comments in scripts; the lexer reads them as code.
    `const x = 1;\nx <!-- import a from "b"\n--> import c from "d"\ntext(x)`,
    // The same inside TypeScript, which needs stripping.
    `const s: string = "import x from 'y'"; // import a from "b"\ntext(s)`,
    `const s: string = "export type { T } from 'y'"; type Q = { a: 1 }; text(s)`,
  ];
  for (const source of sources) {
    await t.step(source, async () => {
      const check = await checkCellSource(source);
      assert.ok(check.ok, JSON.stringify(check));
    });
  }
});

Deno.test("checkCellSource() never runs the source", async (t) => {
  const marker = "__sourceCheckRan";
  const sources = [
    `globalThis.${marker} = true; throw new Error("ran")`,
    `(globalThis as any).${marker} = true; throw new Error("ran")`,
    `globalThis.${marker} = true; text(1`,
    `globalThis.${marker} = true; import x from "y";`,
    `(globalThis as any).${marker} = true; enum E { A = (globalThis.${marker} = true, 1) }`,
  ];
  for (const source of sources) {
    await t.step(source, async () => {
      await checkCellSource(source);
      assert.equal(marker in globalThis, false);
    });
  }
});

Deno.test("checkCellSource() accepts a 1 MB JavaScript source unchanged", async () => {
  // Its speed is measured in bench/source_check_bench.ts, not asserted here.
  const line = "{ const v = [1, 2, 3].map((x) => x * 2).join(','); text(v); }\n";
  const source = line.repeat(Math.ceil(1_000_000 / line.length));
  const check = await checkCellSource(source);
  assert.ok(check.ok && check.source === source && !check.typescript, "not accepted unchanged");
});

import assert from "node:assert/strict";
import vm from "node:vm";
import { CELL_FILE_NAME } from "../../proto/cell_source.ts";
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

/** Deno 2.9.6's `vm.SourceTextModule`, with the linking API the bundled Node types lack. */
const SourceTextModule = vm.SourceTextModule as unknown as new (
  source: string,
  options: { context: vm.Context; identifier: string },
) => { linkRequests(modules: unknown[]): void; instantiate(): void; evaluate(): Promise<void> };

/**
 * Test-only stand-in for the cell runtime: evaluates a checked source once, as the module the
 * runtime evaluates, in a fresh context whose `text()` collects outputs.
 */
async function evaluate(source: string): Promise<string[]> {
  const outputs: string[] = [];
  const context = vm.createContext({ text: (value: unknown) => outputs.push(String(value)) });
  const module = new SourceTextModule(source, { context, identifier: CELL_FILE_NAME });
  module.linkRequests([]);
  module.instantiate();
  await module.evaluate();
  return outputs;
}

Deno.test("checkCellSource() accepts plain JavaScript unchanged", async () => {
  const source = 'const a = [1, 2].map((x) => x * 2);\ntext(a.join(","));\nexport const b = await 1;';
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
    ["enum and an export", "enum E { A = 1 }\ntext(E.A);\nexport const e = E.A;", ["1"]],
    ["top-level await", "const v: number = await Promise.resolve(8);\ntext(v);", ["8"]],
    ["import type and an exported type", 'import type { T } from "npm:t"; export type U = T; text("u")', [
      "u",
    ]],
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
  // A cell is a module: a top-level return, an HTML-like comment and sloppy-mode syntax are errors.
  await t.step("top-level return", async () => {
    assert.equal(
      refused(await checkCellSource("text(1);\nreturn 5")),
      "SyntaxError: Illegal return statement",
    );
  });
  await t.step("HTML-like comment", async () => {
    assert.equal(
      refused(await checkCellSource("<!-- x\ntext(1)")),
      "SyntaxError: HTML comments are not allowed in modules",
    );
  });
  await t.step("with statement", async () => {
    assert.equal(
      refused(await checkCellSource("with ({}) {}")),
      "SyntaxError: Strict mode code may not include a with statement",
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
      refused(await checkCellSource("let n: number = 1;\nreturn n;")),
      "SyntaxError: Unexpected token ':'",
    );
  });
  await t.step("a module's export and import.meta are fine", async () => {
    for (const source of ["export const x = 1;", "text(typeof import.meta)", "export const y: number = 1;"]) {
      assert.ok((await checkCellSource(source)).ok, source);
    }
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
    ['export { c } from "z"; import d from "y";', "z"],
    ['const n: number = 1;\ntext(n);\nimport { a } from "late";', "late"],
    ['text(await import("dynamic-first"));\nimport b from "static";', "static"],
    ['const a: number = 4;\ntext(a! / 2);\nimport x from "after-non-null";', "after-non-null"],
    // Type-only imports are gone once types are stripped; a value import stays.
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

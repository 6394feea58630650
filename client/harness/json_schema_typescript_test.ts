import assert from "node:assert/strict";
import { renderJsonSchemaToTypeScript as render } from "./json_schema_typescript.ts";

Deno.test("scenario 146: a recursive $defs pointer with escapes expands at most twice; $ref siblings intersect", () => {
  const node = {
    type: "object",
    properties: { value: { type: "number" }, next: { $ref: "#/$defs/list~1node~0v1" } },
    required: ["value"],
  };
  const schema = { $ref: "#/$defs/list~1node~0v1", $defs: { "list/node~v1": node } };
  assert.equal(render(schema), "{ next?: { next?: unknown; value: number; }; value: number; }");

  // Two pointers that refer to each other: each is active at most twice on one path.
  const mutual = {
    $ref: "#/definitions/a",
    definitions: {
      a: { type: "object", properties: { b: { $ref: "#/definitions/b" } } },
      b: { type: "array", items: { $ref: "#/definitions/a" } },
    },
  };
  assert.equal(render(mutual), "{ b?: Array<{ b?: Array<unknown>; }>; }");

  const sibling = { $ref: "#/$defs/name", enum: ["A"], $defs: { name: { type: "string" } } };
  assert.equal(render(sibling), '(string) & ("A")');
});

Deno.test("rule 1: true, false and non-objects", () => {
  assert.deepEqual([true, false, null, 3, "x", [1]].map(render), [
    "unknown",
    "never",
    "unknown",
    "unknown",
    "unknown",
    "unknown",
  ]);
  assert.equal(render({}), "unknown");
});

Deno.test("rule 2: non-local and unresolvable refs are unknown; a sibling that is unknown is dropped", () => {
  assert.equal(render({ $ref: "https://example.com/schema.json" }), "unknown");
  assert.equal(render({ $ref: "#/$defs/missing" }), "unknown");
  assert.equal(render({ $ref: "#/$defs/missing", type: "string" }), "string");
  assert.equal(render({ $ref: "#/$defs/s", description: "x", $defs: { s: { type: "string" } } }), "string");
  // A sibling named __proto__ (as JSON.parse makes it) is a keyword like any other, not a prototype.
  assert.equal(
    render(
      JSON.parse(
        '{"$ref": "#/$defs/s", "__proto__": {"type": "object"}, "$defs": {"s": {"type": "string"}}}',
      ),
    ),
    "string",
  );
  // `#` is the root itself, and array indexes resolve.
  assert.equal(
    render({ type: "object", properties: { self: { $ref: "#" } } }),
    "{ self?: { self?: { self?: unknown; }; }; }",
  );
  assert.equal(render({ anyOf: [{ type: "string" }, { $ref: "#/anyOf/0" }] }), "string | string");
});

Deno.test("rule 3: const, then enum, then anyOf/oneOf, then allOf, then type", () => {
  assert.equal(render({ const: { a: [1, "x"] }, enum: [1], type: "string" }), '{"a":[1,"x"]}');
  assert.equal(render({ enum: ["a", 1, null, true], type: "string" }), '"a" | 1 | null | true');
  assert.equal(render({ anyOf: [{ type: "string" }, { type: "null" }], type: "number" }), "string | null");
  assert.equal(render({ oneOf: [{ type: "integer" }, { const: "x" }] }), 'number | "x"');
  assert.equal(
    render({ allOf: [{ type: "object", properties: { a: { type: "string" } } }, { required: ["b"] }] }),
    "{ a?: string; } & { [key: string]: unknown; }",
  );
  assert.equal(render({ type: ["string", "null"] }), "string | null");
  assert.equal(render({ type: "weird" }), "unknown");
  assert.equal(render({ properties: { a: { type: "boolean" } } }), "{ a?: boolean; }");
  assert.equal(render({ items: { type: "string" } }), "Array<string>");
});

Deno.test("rule 4: types, arrays and tuples", () => {
  assert.deepEqual(
    ["string", "number", "integer", "boolean", "null"].map((type) => render({ type })),
    ["string", "number", "number", "boolean", "null"],
  );
  assert.equal(render({ type: "array" }), "unknown[]");
  assert.equal(render({ type: "array", items: { enum: ["a", "b"] } }), 'Array<"a" | "b">');
  assert.equal(
    render({ type: "array", prefixItems: [{ type: "string" }, { type: "number" }] }),
    "[string, number]",
  );
  assert.equal(render({ type: ["array", "null"], items: true }), "Array<unknown> | null");
});

Deno.test("rule 5: objects sort properties, quote non-identifiers, mark optional ones, and add index signatures", () => {
  assert.equal(
    render({
      type: "object",
      properties: {
        zeta: { type: "string" },
        "with space": { type: "number" },
        alpha: {},
        $id: { type: "null" },
      },
      required: ["zeta", "with space"],
    }),
    '{ $id?: null; alpha?: unknown; "with space": number; zeta: string; }',
  );
  assert.equal(render({ type: "object" }), "{ [key: string]: unknown; }");
  assert.equal(render({ type: "object", properties: {}, additionalProperties: false }), "{}");
  assert.equal(render({ type: "object", additionalProperties: true }), "{ [key: string]: unknown; }");
  assert.equal(
    render({
      type: "object",
      properties: { a: { type: "string" } },
      additionalProperties: { type: "number" },
    }),
    "{ a?: string; [key: string]: number; }",
  );
  assert.equal(render({ type: "object", properties: { a: { type: "string" } } }), "{ a?: string; }");
});

Deno.test("rule 5: a described property makes the object multi-line, with one comment per non-blank line", () => {
  const schema = {
    type: "object",
    properties: {
      city: { type: "string", description: "  The city.\n\n  Any spelling.  \r\n" },
      days: { type: "integer" },
      options: {
        type: "object",
        properties: { units: { enum: ["metric", "imperial"], description: "Units" } },
      },
    },
    required: ["city"],
    additionalProperties: { type: "string" },
  };
  assert.equal(
    render(schema),
    [
      "{",
      "  // The city.",
      "  // Any spelling.",
      "  city: string;",
      "  days?: number;",
      "  options?: {",
      "    // Units",
      '    units?: "metric" | "imperial";',
      "  };",
      "  [key: string]: string;",
      "}",
    ].join("\n"),
  );
});

Deno.test("bounds of our own: deep nesting and fanned-out refs render unknown instead of exhausting resources", () => {
  let deep: unknown = { type: "string" };
  for (let i = 0; i < 10_000; i++) deep = { type: "array", items: deep };
  const rendered = render(deep);
  assert.ok(rendered.startsWith("Array<Array<"));
  assert.ok(rendered.includes("unknown"));

  // 30 definitions, each referring to the next twice: 2^30 expansions without a bound.
  const defs: Record<string, unknown> = {};
  for (let i = 0; i < 30; i++) {
    defs[`d${i}`] = {
      type: "object",
      properties: { l: { $ref: `#/$defs/d${i + 1}` }, r: { $ref: `#/$defs/d${i + 1}` } },
    };
  }
  const wide = render({ $ref: "#/$defs/d0", $defs: defs });
  assert.ok(wide.startsWith("{ l?: { l?: "));
  assert.ok(wide.length < 2_000_000);
});

import assert from "node:assert/strict";
import { HostError } from "./errors.ts";
import { type CatalogTool, ToolCatalog } from "./tool_catalog.ts";

const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
const tool = (name: string, extra: Partial<CatalogTool> = {}): CatalogTool => ({
  name,
  toolName: { name },
  description: `the ${name} tool`,
  kind: 1,
  inputSchemaJson: json({ type: "object", properties: {} }),
  ...extra,
});

function refused(fn: () => unknown, message: string): void {
  assert.throws(fn, (error) => {
    assert.ok(error instanceof HostError);
    assert.equal(error.code, "catalog");
    assert.equal(error.message, message);
    return true;
  });
}

Deno.test("ToolCatalog: no revision uses the request's tools and leaves the catalog alone", () => {
  const catalog = new ToolCatalog();
  const a = [tool("a")];
  assert.equal(catalog.resolve(undefined, a), a);
  assert.deepEqual(catalog.resolve(undefined, []), []);
  assert.equal(catalog.revision, undefined);
  refused(() => catalog.resolve(1n, []), "unknown code-mode catalog revision");
});

Deno.test("ToolCatalog: revision 0 is invalid, with or without tools", () => {
  const catalog = new ToolCatalog();
  refused(() => catalog.resolve(0n, []), "invalid code-mode catalog revision");
  refused(() => catalog.resolve(0n, [tool("a")]), "invalid code-mode catalog revision");
  catalog.resolve(1n, [tool("a")]);
  refused(() => catalog.resolve(0n, []), "invalid code-mode catalog revision");
});

Deno.test("ToolCatalog: tools stored under a revision are reused by an Execute with no tools", () => {
  const catalog = new ToolCatalog();
  const ab = [tool("a"), tool("b")];
  assert.deepEqual(catalog.resolve(1n, ab), ab);
  assert.deepEqual(catalog.resolve(1n, []), ab);
  assert.deepEqual(catalog.resolve(1n, []), ab);
  assert.equal(catalog.revision, 1n);
});

Deno.test("ToolCatalog: an empty first catalog cannot be stored (no tools is a reuse)", () => {
  const catalog = new ToolCatalog();
  refused(() => catalog.resolve(1n, []), "unknown code-mode catalog revision");
  assert.equal(catalog.revision, undefined);
});

Deno.test("ToolCatalog: the stored revision with other tools conflicts; equal tools are accepted", () => {
  const catalog = new ToolCatalog();
  catalog.resolve(1n, [tool("a"), tool("b")]);
  assert.equal(catalog.resolve(1n, [tool("a"), tool("b")]).length, 2);
  refused(() => catalog.resolve(1n, [tool("c")]), "conflicting code-mode catalog revision");
  refused(() => catalog.resolve(1n, [tool("b"), tool("a")]), "conflicting code-mode catalog revision");
  refused(
    () => catalog.resolve(1n, [tool("a"), tool("b", { description: "x" })]),
    "conflicting code-mode catalog revision",
  );
  refused(
    () => catalog.resolve(1n, [tool("a"), tool("b", { kind: 2 })]),
    "conflicting code-mode catalog revision",
  );
  refused(
    () => catalog.resolve(1n, [tool("a"), tool("b", { toolName: { name: "b", namespace: "ns" } })]),
    "conflicting code-mode catalog revision",
  );
  refused(() => catalog.resolve(1n, [tool("a")]), "conflicting code-mode catalog revision");
  // A refusal changes nothing.
  assert.deepEqual(catalog.resolve(1n, []).map((t) => t.name), ["a", "b"]);
});

Deno.test("ToolCatalog: schemas compare as JSON values (key order, null and absent do not matter)", () => {
  const catalog = new ToolCatalog();
  catalog.resolve(1n, [tool("a", { inputSchemaJson: json({ type: "object", properties: { x: 1 } }) })]);
  catalog.resolve(1n, [
    tool("a", { inputSchemaJson: new TextEncoder().encode(`{ "properties": {"x":1}, "type":"object" }`) }),
  ]);
  catalog.resolve(1n, [
    tool("a", {
      inputSchemaJson: json({ properties: { x: 1 }, type: "object" }),
      outputSchemaJson: json(null),
    }),
  ]);
  refused(
    () =>
      catalog.resolve(1n, [tool("a", { inputSchemaJson: json({ type: "object", properties: { x: 2 } }) })]),
    "conflicting code-mode catalog revision",
  );
});

Deno.test("ToolCatalog: a higher revision replaces the catalog; the old revision becomes unknown", () => {
  const catalog = new ToolCatalog();
  catalog.resolve(1n, [tool("a")]);
  assert.deepEqual(catalog.resolve(2n, [tool("c")]).map((t) => t.name), ["c"]);
  refused(() => catalog.resolve(1n, []), "unknown code-mode catalog revision");
  assert.deepEqual(catalog.resolve(2n, []).map((t) => t.name), ["c"]);
  refused(() => catalog.resolve(3n, []), "unknown code-mode catalog revision");
});

Deno.test("ToolCatalog: tools under a lower revision are used but not stored", () => {
  const catalog = new ToolCatalog();
  catalog.resolve(3n, [tool("c")]);
  assert.deepEqual(catalog.resolve(2n, [tool("d")]).map((t) => t.name), ["d"]);
  assert.deepEqual(catalog.resolve(2n, [tool("e")]).map((t) => t.name), ["e"]);
  refused(() => catalog.resolve(2n, []), "unknown code-mode catalog revision");
  assert.deepEqual(catalog.resolve(3n, []).map((t) => t.name), ["c"]);
  assert.equal(catalog.revision, 3n);
});

Deno.test("ToolCatalog: revisions are exact 64-bit values", () => {
  const catalog = new ToolCatalog();
  catalog.resolve(9_007_199_254_740_993n, [tool("a")]);
  refused(() => catalog.resolve(9_007_199_254_740_992n, []), "unknown code-mode catalog revision");
  assert.equal(catalog.resolve(9_007_199_254_740_993n, []).length, 1);
  catalog.resolve(18_446_744_073_709_551_614n, [tool("z")]);
  assert.equal(catalog.resolve(18_446_744_073_709_551_614n, [])[0].name, "z");
});

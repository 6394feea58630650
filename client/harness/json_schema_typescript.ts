/**
 * JSON Schema → TypeScript (SPEC §11.4): {@link renderJsonSchemaToTypeScript} renders a tool's input or
 * output schema as the type the model reads in the `exec` declarations.
 *
 * @module
 */
import { normalizeCodeModeIdentifier } from "../../proto/identifiers.ts";

type JsonObject = Record<string, unknown>;

/** How many times one `$ref` pointer may be active on the current expansion path (§11.4 rule 2). */
const MAX_ACTIVE_REF = 2;
/**
 * Schema nesting deeper than this renders `unknown`: a bound of our own (the SPEC has none) so that a
 * schema nested thousands deep cannot exhaust the stack of the harness that renders it.
 */
const MAX_DEPTH = 64;
/**
 * Schema nodes rendered per call before the rest renders `unknown`: a bound of our own against schemas
 * whose `$ref`s fan out (each pointer twice per path, so a chain of n references can expand 2^n times).
 */
const MAX_NODES = 20_000;

interface RenderState {
  readonly root: unknown;
  readonly active: Map<string, number>;
  nodes: number;
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function own(object: JsonObject, key: string): unknown {
  return Object.hasOwn(object, key) ? object[key] : undefined;
}

/**
 * Renders a JSON Schema as a TypeScript type (SPEC §11.4).
 *
 * - `true` → `unknown`, `false` → `never`, anything that is not an object → `unknown`.
 * - A local `$ref` (`#` or `#/…`, with `~0`/`~1` escapes) is expanded inline; one pointer is expanded at most
 *   twice on the current path, deeper → `unknown`; other refs and unresolvable pointers → `unknown`. Sibling
 *   keywords (besides `$defs`/`definitions`) are intersected: `({ref}) & ({siblings})`, or the side that is
 *   not `unknown` alone.
 * - Then, first match: `const`, `enum` (` | `), `anyOf`/`oneOf` (` | `), `allOf` (` & `), `type` (an array
 *   of types joined with ` | `), object keywords (`properties`, `additionalProperties`, `required`), array
 *   keywords (`items`, `prefixItems`), else `unknown`.
 * - Objects: properties sorted by name, `?` unless required, non-identifier names JSON-quoted; one line
 *   when no property has a description, else one property per line, two-space indented, after `// …`
 *   lines of its description. `additionalProperties` (or its absence with no properties) adds an index
 *   signature `[key: string]: T;`.
 * - Pathological schemas are bounded: nesting deeper than 64 levels, and anything past the 20,000th schema
 *   node of one call, render `unknown` (bounds of this library; SPEC §11.4 names none).
 *
 * @param schema a JSON Schema (any JSON value); local `$ref`s resolve against it
 * @returns the TypeScript type
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { renderJsonSchemaToTypeScript } from "./json_schema_typescript.ts";
 *
 * assert.equal(
 *   renderJsonSchemaToTypeScript({
 *     type: "object",
 *     properties: { mode: { $ref: "#/$defs/mode" }, "max-depth": { type: "integer" } },
 *     required: ["mode"],
 *     $defs: { mode: { enum: ["fast", "safe"] } },
 *   }),
 *   '{ "max-depth"?: number; mode: "fast" | "safe"; }',
 * );
 * assert.equal(
 *   renderJsonSchemaToTypeScript({ type: "object", properties: { q: { type: "string", description: "Query" } } }),
 *   "{\n  // Query\n  q?: string;\n}",
 * );
 * ```
 */
export function renderJsonSchemaToTypeScript(schema: unknown): string {
  return render(schema, { root: schema, active: new Map(), nodes: 0 }, 0);
}

function render(schema: unknown, state: RenderState, depth: number): string {
  if (schema === true) return "unknown";
  if (schema === false) return "never";
  if (!isObject(schema) || depth > MAX_DEPTH || ++state.nodes > MAX_NODES) return "unknown";

  const ref = own(schema, "$ref");
  if (typeof ref === "string") {
    const referenced = renderRef(ref, state, depth);
    // `fromEntries` defines each key as its own property, even one named `__proto__`.
    const siblings: JsonObject = Object.fromEntries(
      Object.entries(schema).filter(([key]) => key !== "$ref" && key !== "$defs" && key !== "definitions"),
    );
    const rest = Object.keys(siblings).length === 0 ? "unknown" : render(siblings, state, depth + 1);
    if (rest === "unknown") return referenced;
    if (referenced === "unknown") return rest;
    return `(${referenced}) & (${rest})`;
  }

  if (Object.hasOwn(schema, "const")) return literal(schema.const);
  const values = own(schema, "enum");
  if (Array.isArray(values) && values.length > 0) return values.map(literal).join(" | ");
  for (const key of ["anyOf", "oneOf", "allOf"]) {
    const variants = own(schema, key);
    if (Array.isArray(variants) && variants.length > 0) {
      return variants.map((variant) => render(variant, state, depth + 1)).join(
        key === "allOf" ? " & " : " | ",
      );
    }
  }
  const type = own(schema, "type");
  if (typeof type === "string") return renderType(schema, type, state, depth);
  if (Array.isArray(type)) {
    const types = type.filter((t): t is string => typeof t === "string");
    if (types.length > 0) return types.map((t) => renderType(schema, t, state, depth)).join(" | ");
  }
  if (["properties", "additionalProperties", "required"].some((key) => Object.hasOwn(schema, key))) {
    return renderObject(schema, state, depth);
  }
  if (Object.hasOwn(schema, "items") || Object.hasOwn(schema, "prefixItems")) {
    return renderArray(schema, state, depth);
  }
  return "unknown";
}

function renderType(schema: JsonObject, type: string, state: RenderState, depth: number): string {
  switch (type) {
    case "string":
    case "boolean":
    case "null":
      return type;
    case "number":
    case "integer":
      return "number";
    case "array":
      return renderArray(schema, state, depth);
    case "object":
      return renderObject(schema, state, depth);
    default:
      return "unknown";
  }
}

function renderRef(ref: string, state: RenderState, depth: number): string {
  if (!ref.startsWith("#")) return "unknown";
  const target = resolvePointer(state.root, ref.slice(1));
  if (target === undefined) return "unknown";
  const count = state.active.get(ref) ?? 0;
  if (count >= MAX_ACTIVE_REF) return "unknown";
  state.active.set(ref, count + 1);
  try {
    return render(target, state, depth + 1);
  } finally {
    if (count === 0) state.active.delete(ref);
    else state.active.set(ref, count);
  }
}

/** Resolves a JSON pointer (RFC 6901: `~1` is `/`, `~0` is `~`); `undefined` when it leads nowhere. */
function resolvePointer(root: unknown, pointer: string): unknown {
  if (pointer === "") return root;
  if (!pointer.startsWith("/")) return undefined;
  let node = root;
  for (const raw of pointer.slice(1).split("/")) {
    const token = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    if (Array.isArray(node)) {
      if (!/^(0|[1-9][0-9]*)$/.test(token) || Number(token) >= node.length) return undefined;
      node = node[Number(token)];
    } else if (isObject(node) && Object.hasOwn(node, token)) {
      node = node[token];
    } else {
      return undefined;
    }
  }
  return node;
}

function renderArray(schema: JsonObject, state: RenderState, depth: number): string {
  if (Object.hasOwn(schema, "items") && !Array.isArray(schema.items)) {
    return `Array<${render(schema.items, state, depth + 1)}>`;
  }
  // A tuple: `prefixItems` (2020-12), or an `items` array (drafts before 2020-12).
  const tuple = Array.isArray(schema.prefixItems) ? schema.prefixItems : schema.items;
  if (Array.isArray(tuple) && tuple.length > 0) {
    return `[${tuple.map((item) => render(item, state, depth + 1)).join(", ")}]`;
  }
  return "unknown[]";
}

function renderObject(schema: JsonObject, state: RenderState, depth: number): string {
  const properties = isObject(schema.properties) ? schema.properties : {};
  const required = new Set(
    Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === "string") : [],
  );
  const names = Object.keys(properties).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const members = names.map((name) => {
    const key = normalizeCodeModeIdentifier(name) === name ? name : JSON.stringify(name);
    const optional = required.has(name) ? "" : "?";
    return { line: `${key}${optional}: ${render(properties[name], state, depth + 1)};`, name };
  });
  const index = indexSignature(schema, names.length, state, depth);
  const described = names.some((name) => descriptionOf(properties[name]) !== "");
  if (!described) {
    const lines = members.map((member) => member.line);
    if (index !== undefined) lines.push(index);
    return lines.length === 0 ? "{}" : `{ ${lines.join(" ")} }`;
  }
  const lines = ["{"];
  for (const { line, name } of members) {
    for (const comment of descriptionOf(properties[name]).split(/\r?\n/)) {
      if (comment.trim() !== "") lines.push(`  // ${comment.trim()}`);
    }
    lines.push(indent(line));
  }
  if (index !== undefined) lines.push(indent(index));
  lines.push("}");
  return lines.join("\n");
}

function indexSignature(schema: JsonObject, count: number, state: RenderState, depth: number) {
  if (!Object.hasOwn(schema, "additionalProperties")) {
    return count === 0 ? "[key: string]: unknown;" : undefined;
  }
  const additional = schema.additionalProperties;
  if (additional === false) return undefined;
  const type = additional === true ? "unknown" : render(additional, state, depth + 1);
  return `[key: string]: ${type};`;
}

function descriptionOf(schema: unknown): string {
  return isObject(schema) && typeof schema.description === "string" ? schema.description : "";
}

/** Two spaces before every line, so that a nested multi-line object stays indented under its property. */
function indent(text: string): string {
  return text.split("\n").map((line) => `  ${line}`).join("\n");
}

function literal(value: unknown): string {
  return JSON.stringify(value) ?? "unknown";
}

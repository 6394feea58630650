/**
 * A session's tool catalog (`tool-catalog-revision-v1`): an Execute that names a catalog revision
 * may leave its tool list empty and reuse the tools last sent under that revision. Both doors share
 * it through the core's `catalogRevision` Execute parameter. The rules are those Codex's own host
 * (0.171) follows, over JSON host V1 and gRPC alike:
 *
 * - No revision: the Execute's own tools are used; the catalog is untouched.
 * - Revision 0: refused, `invalid code-mode catalog revision`.
 * - Tools given under a revision higher than the stored one (or with none stored): they are stored
 *   under that revision and used.
 * - Tools given under the stored revision: used when they equal the stored ones, else refused,
 *   `conflicting code-mode catalog revision`. Order matters; schemas are compared as JSON values
 *   (key order and absent-versus-null do not matter).
 * - Tools given under a lower revision: used, and not stored.
 * - No tools: the stored tools when the revision is the stored one, else refused,
 *   `unknown code-mode catalog revision` (so an empty catalog cannot be stored).
 * - One catalog per session; a new session starts empty.
 *
 * @module
 */
import { HostError } from "./errors.ts";

/** What the catalog compares of a tool (the core's validated definition). */
export interface CatalogTool {
  name: string;
  toolName?: { name: string; namespace?: string };
  description?: string;
  kind?: number;
  inputSchemaJson?: Uint8Array;
  outputSchemaJson?: Uint8Array;
}

/** `invalid code-mode catalog revision` (revision 0). */
export const INVALID_CATALOG_REVISION = "invalid code-mode catalog revision";
/** `conflicting code-mode catalog revision` (the stored revision with other tools). */
export const CONFLICTING_CATALOG_REVISION = "conflicting code-mode catalog revision";
/** `unknown code-mode catalog revision` (no tools, and not the stored revision). */
export const UNKNOWN_CATALOG_REVISION = "unknown code-mode catalog revision";

/** A JSON value with object keys sorted, as text: equal values give equal texts. */
function canonicalJson(bytes: Uint8Array | undefined): string | undefined {
  if (bytes === undefined) return undefined;
  const value = JSON.parse(new TextDecoder().decode(bytes));
  if (value === null) return undefined;
  const sort = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sort);
    if (v !== null && typeof v === "object") {
      return Object.fromEntries(
        Object.keys(v).sort().map((k) => [k, sort((v as Record<string, unknown>)[k])]),
      );
    }
    return v;
  };
  return JSON.stringify(sort(value));
}

function sameTool(a: CatalogTool, b: CatalogTool): boolean {
  return a.name === b.name &&
    a.toolName?.name === b.toolName?.name &&
    a.toolName?.namespace === b.toolName?.namespace &&
    (a.description ?? "") === (b.description ?? "") &&
    a.kind === b.kind &&
    canonicalJson(a.inputSchemaJson) === canonicalJson(b.inputSchemaJson) &&
    canonicalJson(a.outputSchemaJson) === canonicalJson(b.outputSchemaJson);
}

/**
 * One session's catalog: the last revision stored and its tools.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ToolCatalog } from "./tool_catalog.ts";
 *
 * const catalog = new ToolCatalog<{ name: string }>();
 * assert.deepEqual(catalog.resolve(1n, [{ name: "a" }]), [{ name: "a" }]);
 * assert.deepEqual(catalog.resolve(1n, []), [{ name: "a" }]);
 * assert.throws(() => catalog.resolve(2n, []), /unknown code-mode catalog revision/);
 * ```
 */
export class ToolCatalog<T extends CatalogTool> {
  #revision: bigint | undefined;
  #tools: readonly T[] = [];

  /** The stored revision, if any. */
  get revision(): bigint | undefined {
    return this.#revision;
  }

  /**
   * The tools an Execute runs with (module doc for the rules); stores them when they start a newer
   * revision.
   *
   * @param revision the Execute's catalog revision (undefined: none)
   * @param tools the Execute's (validated) tools
   * @returns the tools to use
   * @throws {HostError} `catalog` with one of the three messages
   */
  resolve(revision: bigint | undefined, tools: readonly T[]): readonly T[] {
    if (revision === undefined) return tools;
    if (revision === 0n) throw new HostError("catalog", INVALID_CATALOG_REVISION);
    if (tools.length === 0) {
      if (this.#revision === revision) return this.#tools;
      throw new HostError("catalog", UNKNOWN_CATALOG_REVISION);
    }
    if (this.#revision === undefined || revision > this.#revision) {
      this.#revision = revision;
      this.#tools = [...tools];
      return tools;
    }
    if (revision === this.#revision) {
      const same = tools.length === this.#tools.length && tools.every((t, i) => sameTool(t, this.#tools[i]));
      if (!same) throw new HostError("catalog", CONFLICTING_CATALOG_REVISION);
    }
    return tools;
  }
}

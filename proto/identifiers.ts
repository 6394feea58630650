/**
 * `normalizeCodeModeIdentifier` (SPEC §11.3): the JS-facing name of a tool, shared by the host core
 * (the `tools.<name>` of a cell) and the harness kit (`client/harness/`).
 *
 * @module
 */

/**
 * Replaces every character that cannot stand at its position of an ASCII JS identifier with `_`.
 *
 * @param name a tool definition name
 * @returns the identifier (`_` for an empty name)
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(normalizeCodeModeIdentifier("hidden-dynamic-tool"), "hidden_dynamic_tool");
 * assert.equal(normalizeCodeModeIdentifier("1x"), "_x");
 * assert.equal(normalizeCodeModeIdentifier(""), "_");
 * ```
 */
export function normalizeCodeModeIdentifier(name: string): string {
  let out = "";
  let first = true;
  for (const ch of name) {
    const ok = first ? /^[A-Za-z_$]$/.test(ch) : /^[A-Za-z0-9_$]$/.test(ch);
    out += ok ? ch : "_";
    first = false;
  }
  return out === "" ? "_" : out;
}

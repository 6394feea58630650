/**
 * How a cell's source is wrapped for evaluation (SPEC §5.1 item 2), shared by the host's
 * compile-only check (§5.5) and the cell bootstrap, so both compile exactly the same text.
 *
 * - The source becomes the body of a strict-mode async function, so top-level `await` and a
 *   top-level `return` work and declarations stay local to the cell.
 * - The prefix sits on a line of its own and is compiled with `lineOffset: -1`, so line numbers
 *   in stack frames are those of the user's source.
 * - `export` declarations and `import.meta` are syntax errors in this form.
 *
 * @module
 */

/** The file name every cell is compiled under; stack frames of user code name it. */
export const CELL_FILE_NAME = "exec_main.mjs";

/** The first line of the wrapper; it shifts the user's source down by one line. */
export const CELL_SOURCE_PREFIX = '(async function () {"use strict";\n';

/** The end of the wrapper, on a line of its own so a trailing line comment cannot swallow it. */
export const CELL_SOURCE_SUFFIX = "\n})";

/** The `lineOffset` to compile the wrapped source with, so line 1 is the user's first line. */
export const CELL_LINE_OFFSET = -1;

/**
 * Wraps a cell's source as the body of a strict-mode async function expression.
 *
 * @param source the user's (JavaScript) source
 * @returns the text to compile with `vm.Script` under {@link CELL_FILE_NAME}
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.ok(wrapCellSource("text(1)").includes("\ntext(1)\n"));
 * ```
 */
export function wrapCellSource(source: string): string {
  return CELL_SOURCE_PREFIX + source + CELL_SOURCE_SUFFIX;
}

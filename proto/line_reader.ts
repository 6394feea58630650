/**
 * The one reader of newline-delimited messages with a bound (issue 27, item 3): the MCP stdio door's
 * JSON-RPC lines and the `deno task exec` keeper's socket read through it.
 *
 * - A line is the bytes before a `\n` (a `\r` before it is dropped too, as the MCP SDK does). A
 *   line of at most `maxBytes` (counting that `\r`) is delivered whole, as one {@link LinePart}
 *   `line`.
 * - A line over `maxBytes` is never buffered whole: its bytes are delivered as they arrive, as
 *   `overlong` parts (the caller may scan them, or drop them; a part is valid only until the next
 *   step), then one `overlongEnd` with its total length. The next line starts after its `\n`, as
 *   usual.
 * - Memory: at most `maxBytes` plus one chunk of the stream. The search for `\n` looks at each byte
 *   once, however the line is split into chunks.
 * - At EOF, bytes after the last `\n` are a last line (or the end of an overlong one, `eof` set).
 *
 * @module
 */

/** One step of {@link readLines}. */
export type LinePart =
  | { readonly line: Uint8Array }
  | { readonly overlong: Uint8Array }
  | { readonly overlongEnd: number; readonly eof: boolean };

const NEWLINE = 0x0a;
const RETURN = 0x0d;

function concat(parts: Uint8Array[], length: number): Uint8Array {
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

function withoutReturn(line: Uint8Array): Uint8Array {
  return line.length > 0 && line[line.length - 1] === RETURN ? line.subarray(0, line.length - 1) : line;
}

/**
 * Splits a byte stream into lines of at most `maxBytes` (the `\n` not counted).
 *
 * @param readable the byte stream; released (not cancelled) when the generator ends
 * @param maxBytes the longest line delivered whole
 * @param options `signal`: cancels the stream, which ends the lines (a pending read included)
 * @returns the lines, and the parts of each line over the limit
 * @throws {RangeError} when `maxBytes` is not a positive integer
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { readLines } from "./line_reader.ts";
 *
 * const bytes = new TextEncoder().encode("ok\nmuch too long\nok again\n");
 * const parts = [];
 * for await (const part of readLines(ReadableStream.from([bytes]), 8)) parts.push(part);
 * assert.deepEqual(parts.map((p) => "line" in p ? new TextDecoder().decode(p.line) : Object.keys(p)[0]), [
 *   "ok", "overlong", "overlongEnd", "ok again",
 * ]);
 * ```
 */
export async function* readLines(
  readable: ReadableStream<Uint8Array>,
  maxBytes: number,
  options: { signal?: AbortSignal } = {},
): AsyncGenerator<LinePart> {
  if (!Number.isSafeInteger(maxBytes) || maxBytes <= 0) {
    throw new RangeError(`line limit must be a positive integer, got ${maxBytes}`);
  }
  const reader = readable.getReader();
  const signal = options.signal;
  const cancel = () => void reader.cancel(signal?.reason).catch(() => {});
  if (signal?.aborted) cancel();
  signal?.addEventListener("abort", cancel, { once: true });
  /** The current line's bytes while it is within the limit. */
  let parts: Uint8Array[] = [];
  let length = 0;
  /** The current line went over the limit: its bytes are passed on, not kept. */
  let overlong = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      let chunk = value;
      while (chunk.length > 0) {
        const newline = chunk.indexOf(NEWLINE);
        const piece = newline < 0 ? chunk : chunk.subarray(0, newline);
        chunk = newline < 0 ? chunk.subarray(chunk.length) : chunk.subarray(newline + 1);
        if (!overlong && length + piece.length > maxBytes) {
          overlong = true;
          for (const kept of parts) yield { overlong: kept };
          parts = [];
        }
        length += piece.length;
        if (overlong) {
          if (piece.length > 0) yield { overlong: piece };
        } else if (piece.length > 0) {
          // A copy: the stream may reuse its chunk's buffer.
          parts.push(piece.slice());
        }
        if (newline < 0) continue;
        if (overlong) {
          yield { overlongEnd: length, eof: false };
        } else {
          yield { line: withoutReturn(concat(parts, length)) };
        }
        parts = [];
        length = 0;
        overlong = false;
      }
    }
    if (overlong) yield { overlongEnd: length, eof: true };
    else if (length > 0) yield { line: withoutReturn(concat(parts, length)) };
  } finally {
    signal?.removeEventListener("abort", cancel);
    reader.releaseLock();
  }
}

/**
 * The cell helpers written in plain JavaScript: `as_settled`, `stream_settled` and the `content`
 * wrapper that walks an iterable of MCP content blocks. Codex's own host ships these as one
 * unnamed script, so a stack frame inside them reads `at as_settled (<anonymous>:25:27)`. This
 * host compiles its own implementation, {@link CELL_COMBINATORS_SOURCE}, once per isolate under an
 * empty file name and runs it in each cell's context; every expression a stack frame can point at
 * (an iteration of the caller's iterable, a `then` of the caller's promise, the `emit` callback,
 * the block emitter) sits on the same line and column as in the reference, so frames read the same.
 * The function the script evaluates to takes the native-like block emitter of `content()` and
 * returns the three helpers.
 *
 * Observable semantics (measured against the reference host):
 * - `as_settled(promises)` iterates `promises` at once (a `Map` gives `[key, promise]` entries, any
 *   other iterable positions 0, 1, …), attaches one reaction to each through `Promise.resolve`,
 *   and returns an async iterator of `{ index, status: "fulfilled", value }` and
 *   `{ index, status: "rejected", reason }` records in settlement order. Ending the iteration early
 *   drops the settlements that are still to come.
 * - `stream_settled(promises, emit)` awaits `emit(record)` for each record in that order; a
 *   non-function `emit` rejects with `TypeError: stream_settled requires a callback`.
 * - `content(value)`: a string or a non-iterable is one block; any other iterable is walked and
 *   each element emitted as a block (the iterator is closed if the emitter throws).
 *
 * @module
 */

/** The source of the combinators script; line and column of each call site are load-bearing. */
export const CELL_COMBINATORS_SOURCE = `\
// Cell helpers implemented in JavaScript: the promise combinators and content().
// Every call site that can appear in a stack frame keeps the line and column it has
// in Codex's host, so that the frames of errors passing through them read the same.
(emitBlock) => {
  function as_settled(promises) {
    let queue = [];
    let outstanding = 0;
    let waiting;
    let finished = false;
    const record = (result) => {
      outstanding--;
      if (finished) {
        return;
      }
      queue.push(result);
      if (waiting !== undefined) {
        const wake = waiting;
        waiting = undefined;
        wake();
      }
    };
    const keyed = promises instanceof Map;
    let position = 0;
    try {
      for (const entry of promises) {
        const [index, promise] = keyed ? entry : [position++, entry];
        outstanding++;
        Promise.resolve(promise).then(
          (value) => record({ index, status: "fulfilled", value }),
          (reason) => record({ index, status: "rejected", reason }),
        );
      }
    } catch (error) {
      finished = true;
      throw error;
    }
    const drain = async function* () {
      try {
        while (outstanding > 0 || queue.length > 0) {
          if (queue.length === 0) {
            await new Promise((resolve) => {
              waiting = resolve;
            });
          }
          const taken = queue;
          queue = [];
          yield* taken;
        }
      } finally {
        finished = true;
        queue = [];
      }
    };
    return drain();
  }

  async function stream_settled(promises, emit) {
    if (typeof emit !== "function") {
      throw new TypeError("stream_settled requires a callback");
    }
    for await (const result of as_settled(promises)) {
      await emit(result);
    }
  }

  // content(): one block, or each element of an iterable of blocks. A string is
  // one block (never its characters). The iterator method is read once, through a
  // getter if it is one, and called on its own receiver, so a stateful getter or a
  // generator sees exactly one read and one call. Each block goes to emitBlock,
  // which validates it and throws a plain string when it is not a content block.
  const iteratorKey = Symbol.iterator;
  const apply = Reflect.apply;

  const content = function content(value) {
    const iterate =
      typeof value === "string" ? undefined : value?.[iteratorKey];
    if (typeof iterate !== "function") {
      return emitBlock(value);
    }

    // A fresh iterable around the method already read: the for-of below then closes
    // the iterator when the emitter throws.
    const blocks = { [iteratorKey]: () => apply(iterate, value, []) };
    for (const block of blocks) {
      emitBlock(block);
    }
  };
  return { as_settled, stream_settled, content };
}
`;

/**
 * `Promise.withResolvers()` for runtimes that lack it (Node 20): the client library runs there too.
 *
 * @module
 */

/**
 * A promise with its resolve and reject functions.
 *
 * @returns the promise and its settlers
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { deferred } from "./deferred.ts";
 *
 * const d = deferred<number>();
 * d.resolve(1);
 * assert.equal(await d.promise, 1);
 * ```
 */
export function deferred<T>(): PromiseWithResolvers<T> {
  let resolve!: (value: T | PromiseLike<T>) => void;
  let reject!: (reason?: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

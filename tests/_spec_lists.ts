/**
 * Lists the SPEC states once, shared by the cell-level and end-to-end tests.
 *
 * @module
 */

/** Globals SPEC §5.2 says are removed from a cell's context (at least). */
export const REMOVED_GLOBALS: readonly string[] = [
  "Deno",
  "process",
  "Buffer",
  "require",
  "global",
  "setImmediate",
  "fetch",
  "WebSocket",
  "Worker",
  "console",
  "Atomics",
  "SharedArrayBuffer",
  "WebAssembly",
  "self",
  "postMessage",
  "onmessage",
  "close",
  "addEventListener",
  "removeEventListener",
  "dispatchEvent",
  "navigator",
  "location",
  "performance",
  "crypto",
  "setInterval",
  "clearInterval",
  "queueMicrotask",
  "structuredClone",
  "TextEncoder",
  "TextDecoder",
  "URL",
  "atob",
  "btoa",
  "Blob",
  "Request",
  "Response",
  "Headers",
  "EventTarget",
  "Event",
];

/** The plain-function helpers of SPEC §5.3 (`tools` and `ALL_TOOLS` are objects). */
export const HELPER_FUNCTIONS: readonly string[] = [
  "text",
  "image",
  "generatedImage",
  "store",
  "load",
  "notify",
  "exit",
  "setTimeout",
  "clearTimeout",
  "yield_control",
];

/** The globals scenario 55 of SPEC §12.5 checks are `undefined` in a cell. */
export const SCENARIO_55_GLOBALS: readonly string[] = [
  "Deno",
  "fetch",
  "WebSocket",
  "Worker",
  "Atomics",
  "SharedArrayBuffer",
  "WebAssembly",
  "postMessage",
  "self",
  "navigator",
];

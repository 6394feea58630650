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

/** The helpers of Codex's own host (0.171) that SPEC §5.3 does not list. */
export const REFERENCE_EXTRA_HELPERS: readonly string[] = [
  "audio",
  "content",
  "as_settled",
  "stream_settled",
];

/**
 * Every own property name of a cell's `globalThis` in Codex's own host (0.171), sorted: measured
 * with `Object.getOwnPropertyNames(globalThis).sort()` (tests/reference/cells/globals.json).
 */
export const REFERENCE_GLOBAL_NAMES: readonly string[] = (
  "ALL_TOOLS,AggregateError,Array,ArrayBuffer,AsyncDisposableStack,BigInt,BigInt64Array,BigUint64Array," +
  "Boolean,DataView,Date,DisposableStack,Error,EvalError,FinalizationRegistry,Float16Array,Float32Array," +
  "Float64Array,Function,Infinity,Int16Array,Int32Array,Int8Array,Intl,Iterator,JSON,Map,Math,NaN,Number," +
  "Object,Promise,Proxy,RangeError,ReferenceError,Reflect,RegExp,Set,String,SuppressedError,Symbol," +
  "SyntaxError,TypeError,URIError,Uint16Array,Uint32Array,Uint8Array,Uint8ClampedArray,WeakMap,WeakRef," +
  "WeakSet,as_settled,audio,clearTimeout,content,decodeURI,decodeURIComponent,encodeURI,encodeURIComponent," +
  "escape,eval,exit,generatedImage,globalThis,image,isFinite,isNaN,load,notify,parseFloat,parseInt," +
  "setTimeout,store,stream_settled,text,tools,undefined,unescape,yield_control"
).split(",");

/**
 * The session runtime's entry (bundled into `worker/dist/runtime.js`). It writes `Ready` first,
 * before anything of Deno's Node compatibility layer is loaded (that layer's first module costs a
 * runtime ~15 ms and the whole runtime ~33 ms of start-up), then loads the runtime itself
 * (`runtime_main.ts`, bundled into `runtime_main.js` next to this file). Frames the host sends
 * meanwhile wait in the pipe. A cold OpenSession waits only for `Ready`.
 *
 * @module
 */
import { encodeReadyFrame } from "../proto/worker_ready.ts";

const ready = encodeReadyFrame(Deno.version.deno);
for (let offset = 0; offset < ready.length;) offset += Deno.stdout.writeSync(ready.subarray(offset));
// A computed specifier: the bundler leaves it to be loaded from the runtime directory at run time.
const main = new URL("./runtime_main.js", import.meta.url).href;
await import(main);

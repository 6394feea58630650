/**
 * The session runtime's main module (bundled into `worker/dist/runtime_main.js`, loaded by
 * `runtime_entry.ts` once `Ready` is out): the {@link Runtime} on the process's stdin and stdout.
 *
 * @module
 */
import { writeAllSync } from "./cell_events.ts";
import { Runtime } from "./runtime.ts";

await new Runtime({ input: Deno.stdin, output: writeAllSync, exit: (code) => Deno.exit(code) }).run();

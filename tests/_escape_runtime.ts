/**
 * The stand-in for a Deno permission bug plus a JavaScript escape, for the OS sandbox tests: a
 * runtime directory whose cell bootstrap leaves the runtime's `Deno` in every cell's globals, and a
 * runtime factory that grants the runtime every Deno permission (and says so in the host's log).
 * Whatever such a cell still cannot do, only the OS sandbox refuses.
 *
 * Folder-private: never re-exported.
 */
import assert from "node:assert/strict";
import type { CapturedLog, TestHostOptions } from "./_harness.ts";
import { hostTempParent, RUNTIME_FILES } from "../host/runtime/runtime_files.ts";
import { spawnRuntimeProcess } from "../host/runtime/runtime_process.ts";

/** The factory call that ends the cell context's set-up in the bundled bootstrap. */
const CONTEXT_READY = "JSON.stringify(CELL_GLOBAL_ALLOWLIST), CELL_FILE_NAME, CELL_HELPERS_FILE_NAME);";

/** The warning a host with {@link escapeOptions} logs once. */
export const EVERY_PERMISSION = "TEST ONLY: session runtimes run with every Deno permission";

let escapeRuntime: string | undefined;
/** A runtime directory whose cell bootstrap puts the runtime's `Deno` into every cell's globals. */
export function escapeRuntimeFiles(): string {
  if (escapeRuntime) return escapeRuntime;
  const parent = hostTempParent();
  Deno.mkdirSync(parent, { recursive: true, mode: 0o700 });
  const dir = Deno.makeTempDirSync({ dir: parent, prefix: `r-${Deno.pid}-escape-` });
  globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
  const dist = new URL("../worker/dist/", import.meta.url);
  for (const name of RUNTIME_FILES) {
    let text = Deno.readTextFileSync(new URL(name, dist));
    if (name === "cell.js") {
      assert.equal(text.split(CONTEXT_READY).length, 2, "the bootstrap's context set-up was found once");
      text = text.replace(CONTEXT_READY, `${CONTEXT_READY} context.Deno = Deno;`);
    }
    Deno.writeTextFileSync(`${dir}/${name}`, text);
  }
  return escapeRuntime = dir;
}

/** Host options whose runtimes run the escape bootstrap with every Deno permission. */
export function escapeOptions(
  log: CapturedLog,
): Pick<TestHostOptions, "runtimeFiles" | "log" | "runtimeFactory"> {
  let said = false;
  return {
    runtimeFiles: escapeRuntimeFiles(),
    log,
    runtimeFactory: (spec) => {
      if (!said) log.warn(EVERY_PERMISSION);
      said = true;
      return spawnRuntimeProcess({ ...spec, permissions: ["--allow-all"] });
    },
  };
}

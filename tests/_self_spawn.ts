/**
 * The self-spawned session runtime of a compiled executable (SPEC §9.9), from source: the argv a
 * host uses to start `cli/main.ts` as its runtime under exactly the permissions `deno task
 * compile` gives the executable (read from deno.json), so that tests exercise the same entry
 * dispatch and the same narrowing. Only two things differ from the executable, both because the
 * program is loaded from source: `--config` (the import map) and the npm cache (`DENO_DIR`, passed
 * through the worker prefix since a runtime's environment is cleared).
 *
 * @module
 */
import { SELF_RUNTIME_ARG } from "../host/runtime/self_runtime.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

/** The `deno task compile` command line, split into words. */
export function compileCommand(): string[] {
  const config = JSON.parse(Deno.readTextFileSync(`${ROOT}/deno.json`));
  const task = config.tasks.compile;
  return (typeof task === "string" ? task : task.command).split(/\s+/);
}

/** The permission flags of the compiled executable. */
export function compilePermissionFlags(): string[] {
  return compileCommand().filter((word) => /^--(allow|deny)-/.test(word));
}

/** The `--include` paths of `deno task compile`. */
export function compileIncludes(): string[] {
  const words = compileCommand();
  return words.flatMap((word, i) => word === "--include" ? [words[i + 1]] : []);
}

let denoDir: string | undefined;

function cacheDir(): string {
  if (denoDir) return denoDir;
  const info = new Deno.Command(Deno.execPath(), { args: ["info", "--json"], stdout: "piped" }).outputSync();
  return denoDir = JSON.parse(new TextDecoder().decode(info.stdout)).denoDir;
}

/**
 * The host options that make runtimes self-spawned: `runtimeCommand` is `deno run <the
 * executable's permission flags> cli/main.ts --code-mode-session-runtime`. The OS sandbox is off
 * here: from source the runtime command reads this repository and Deno's cache, which the sandbox
 * (rightly) hides; a compiled executable needs only itself inside it.
 *
 * @param flags permission flags (default those of `deno task compile`)
 */
export function selfSpawnOptions(flags: string[] = compilePermissionFlags()): {
  runtimeCommand: string[];
  workerPrefix: string[];
  osSandbox: "off";
} {
  return {
    osSandbox: "off",
    workerPrefix: ["/usr/bin/env", `DENO_DIR=${cacheDir()}`],
    runtimeCommand: [
      Deno.execPath(),
      "run",
      "--quiet",
      "--cached-only",
      `--config=${ROOT}/deno.json`,
      ...flags,
      `${ROOT}/cli/main.ts`,
      SELF_RUNTIME_ARG,
    ],
  };
}

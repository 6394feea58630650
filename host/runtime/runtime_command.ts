/**
 * Pure policy → argv for a session runtime (the per-session Deno subprocess, SPEC §9.3). No I/O here.
 *
 * @module
 */

import { buildSandboxArgv } from "./os_sandbox_command.ts";

/** File name of the bundled runtime entry inside the runtime directory. */
export const RUNTIME_ENTRY = "runtime.js";

/** Inputs of {@link buildRuntimeCommand}. */
export interface RuntimeCommandOptions {
  /** The Deno binary for runtimes (`--deno`, default `Deno.execPath()`). */
  deno: string;
  /** `--worker-prefix`: placed before `<deno>` (default none). */
  prefix?: readonly string[];
  /**
   * Argv that starts this program as a session runtime (SPEC §9.9): in a compiled executable
   * `[Deno.execPath(), SELF_RUNTIME_ARG]`. The runtime directory is appended, and the argv replaces
   * `<deno> run …`: the executable's permissions are fixed, so the runtime narrows them itself
   * (`self_runtime.ts`), and no `--v8-flags` can be passed (`workerMainHeapMb` does not apply).
   */
  self?: readonly string[];
  /** Directory holding the runtime's own files; the only readable path. */
  runtimeDir: string;
  /** Fresh private working directory of this runtime; also holds its `DENO_DIR`. */
  workDir: string;
  /**
   * V8 old-space limit, MiB, passed as `--v8-flags=--max-old-space-size`; 0 passes no flag.
   *
   * On Deno 2.9.6 a V8 flag is not per isolate: it overrides the `resourceLimits` of every Worker
   * in the process, so with the flag set each cell's heap limit becomes this value instead of the
   * session's. The host therefore passes it only when an operator asks (`--limit
   * workerMainHeapMb=N`), and by default relies on per-cell Worker limits.
   */
  workerMainHeapMb: number;
  /**
   * Run inside this bubblewrap sandbox (issue 22): its argv goes after `prefix` and before
   * `<deno>` (the prefix wraps the sandbox, so a prefix tool needs no access inside it, and
   * `--die-with-parent` ties the sandbox to the prefix's process, which must exec or wait).
   */
  sandbox?: { bwrap: string; readOnly: readonly string[]; seccomp?: string; disableUserns?: boolean };
  /**
   * The runtime's Deno permission flags (default `--allow-read=<runtimeDir>`: the runtime directory
   * is its only readable path, SPEC §9.3). The host never sets them; a runtime factory
   * (`RuntimeFactory`) that runs a patched runtime needing other permissions passes them. Ignored
   * with `self` (a compiled executable's permissions are fixed; it narrows them itself).
   */
  permissions?: readonly string[];
}

/** A complete spawn description. */
export interface RuntimeCommand {
  command: string;
  args: string[];
  /**
   * The six variables of SPEC §9.3, `MALLOC_ARENA_MAX` and `TZ` (see {@link buildRuntimeCommand});
   * the spawn clears everything else.
   */
  env: Record<string, string>;
  cwd: string;
}

/**
 * Builds the runtime's argv, environment and working directory.
 *
 * The environment is SPEC §9.3's six variables plus `MALLOC_ARENA_MAX=2`, a deliberate departure
 * from §9.3 (scenario 109 says exactly six): issue 7 requires ≤ 60 MB RSS per idle session, and
 * the arena limit is what brings it there (see the comment at the variable). And `TZ=UTC`
 * (issue 27): cells see UTC whatever the host's time zone (the OS sandbox mounts no
 * `/etc/localtime`). Both are constants, so no variable of the host's own environment reaches a
 * runtime.
 *
 * @param options see {@link RuntimeCommandOptions}
 * @returns the command; `args` excludes `command` itself
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const c = buildRuntimeCommand({ deno: "/d", runtimeDir: "/r", workDir: "/w", workerMainHeapMb: 512 });
 * assert.equal(c.command, "/d");
 * assert.equal(c.args[0], "run");
 * assert.equal(c.env.DENO_DIR, "/w/deno_dir");
 * ```
 */
export function buildRuntimeCommand(options: RuntimeCommandOptions): RuntimeCommand {
  const runtimeDir = options.runtimeDir.replace(/\/+$/, "");
  // The prefix wraps the sandbox, which wraps the runtime (a separate Deno, or this executable).
  const outer = [
    ...(options.prefix ?? []),
    ...(options.sandbox
      ? buildSandboxArgv({ ...options.sandbox, runtimeDir, workDir: options.workDir })
      : []),
  ];
  const argv = options.self !== undefined ? [...outer, ...options.self, runtimeDir] : [
    ...outer,
    options.deno,
    "run",
    "--no-prompt",
    "--no-config",
    "--no-lock",
    "--no-remote",
    "--no-npm",
    "--no-code-cache",
    ...(options.permissions ?? [`--allow-read=${runtimeDir}`]),
    ...(options.workerMainHeapMb > 0 ? [`--v8-flags=--max-old-space-size=${options.workerMainHeapMb}`] : []),
    `${runtimeDir}/${RUNTIME_ENTRY}`,
  ];
  return {
    command: argv[0],
    args: argv.slice(1),
    env: {
      NO_COLOR: "1",
      DENO_NO_UPDATE_CHECK: "1",
      DENO_NO_PROMPT: "1",
      DENO_UNSTABLE_ALLOW_ALL_BY_DEFAULT: "0",
      DENO_UNSTABLE_RELAXED_PERMISSIONS: "0",
      DENO_DIR: `${options.workDir.replace(/\/+$/, "")}/deno_dir`,
      // glibc gives each thread that allocates its own malloc arena; an idle runtime's threads
      // (main, the spare's, Deno's blocking pool, V8's helpers) left ~7 MiB resident in five of
      // them. Two arenas: RSS per idle session 58.0 → 55.7 MiB, cells and floods as fast.
      MALLOC_ARENA_MAX: "2",
      // Cells see UTC: the host's time zone (its /etc/localtime) is none of a cell's business.
      TZ: "UTC",
    },
    cwd: options.workDir,
  };
}

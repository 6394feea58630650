/**
 * Pure policy → argv of the OS sandbox (bubblewrap) around one session runtime (issue 22). No I/O
 * here; `os_sandbox.ts` finds the paths and checks that bubblewrap works.
 *
 * The sandbox is a second wall behind Deno's permissions: both hold, and the runtime's argv,
 * environment and permissions (SPEC §9.3) are the same inside it.
 *
 * @module
 */

/** Size of the sandbox's private `/tmp` (a tmpfs, held in memory): 16 MiB. */
export const SANDBOX_TMP_BYTES = 16 * 1024 * 1024;

/** Inputs of {@link buildSandboxArgv}. */
export interface SandboxArgvOptions {
  /** Absolute path of `bwrap`. */
  bwrap: string;
  /**
   * Host paths made visible read-only at the same path: the Deno binary and the directories of
   * its shared libraries (and nothing else of the host's filesystem).
   */
  readOnly: readonly string[];
  /** The runtime directory (read-only inside, SPEC §9.3). */
  runtimeDir: string;
  /** The runtime's private working directory (writable inside; it holds `DENO_DIR`). */
  workDir: string;
}

/**
 * The bubblewrap argv placed before `<deno> run …`.
 *
 * - New user (when allowed), network (only `lo`), PID, IPC, UTS and cgroup namespaces
 *   (`--unshare-all`); no capabilities; `--die-with-parent` (no runtime outlives the host, even
 *   on SIGKILL); `--new-session` (no terminal to inject into).
 * - Filesystem: an empty read-only root holding only `readOnly`, the runtime directory
 *   (read-only) and the work directory (writable); a private `/tmp` of
 *   {@link SANDBOX_TMP_BYTES}, a private `/proc` (only the
 *   sandbox's own processes), a minimal `/dev`. No `/home`, `/etc`, `/run` or `/var`: no host
 *   Unix sockets, and abstract sockets are per network namespace.
 * - Paths keep their host names, so `--allow-read=<runtimeDir>` and `DENO_DIR` mean the same
 *   inside. The working directory is the work directory, as without the sandbox.
 *
 * @param options see {@link SandboxArgvOptions}
 * @returns the argv, `bwrap` first, ending with `--`
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const argv = buildSandboxArgv({ bwrap: "/usr/bin/bwrap", readOnly: ["/d"], runtimeDir: "/r", workDir: "/w" });
 * assert.equal(argv[0], "/usr/bin/bwrap");
 * assert.equal(argv.at(-1), "--");
 * assert.ok(argv.includes("--die-with-parent"));
 * ```
 */
export function buildSandboxArgv(options: SandboxArgvOptions): string[] {
  const strip = (path: string) => path.replace(/(.)\/+$/, "$1");
  const runtimeDir = strip(options.runtimeDir);
  const workDir = strip(options.workDir);
  const readOnly = [...new Set(options.readOnly.map(strip))];
  return [
    options.bwrap,
    "--unshare-all",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
    "--hostname",
    "code-mode-runtime",
    // tmpfs pages are not in any process's RSS, so the memory bound would not see them.
    "--size",
    String(SANDBOX_TMP_BYTES),
    "--tmpfs",
    "/tmp",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    ...readOnly.flatMap((path) => ["--ro-bind", path, path]),
    "--ro-bind",
    runtimeDir,
    runtimeDir,
    "--bind",
    workDir,
    workDir,
    "--chdir",
    workDir,
    "--remount-ro",
    "/",
    "--",
  ];
}

const SIGNALS = [
  "SIGHUP",
  "SIGINT",
  "SIGQUIT",
  "SIGILL",
  "SIGTRAP",
  "SIGABRT",
  "SIGBUS",
  "SIGFPE",
  "SIGKILL",
  "SIGUSR1",
  "SIGSEGV",
  "SIGUSR2",
  "SIGPIPE",
  "SIGALRM",
  "SIGTERM",
  "SIGSTKFLT",
  "SIGCHLD",
  "SIGCONT",
  "SIGSTOP",
  "SIGTSTP",
  "SIGTTIN",
  "SIGTTOU",
  "SIGURG",
  "SIGXCPU",
  "SIGXFSZ",
  "SIGVTALRM",
  "SIGPROF",
  "SIGWINCH",
  "SIGIO",
  "SIGPWR",
  "SIGSYS",
];

/**
 * The signal that ended a sandboxed runtime. bubblewrap reports its child's death by signal N as
 * its own exit code 128 + N, so without this the SPEC §3.5 reason of a runtime killed by SIGKILL
 * would read `exited with code 137`.
 *
 * @param code the exit code of `bwrap`
 * @param signal the signal that ended `bwrap` itself, if any
 * @returns the signal name to report, or null
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(sandboxedSignal(137, null), "SIGKILL");
 * assert.equal(sandboxedSignal(1, null), null);
 * ```
 */
export function sandboxedSignal(code: number | null, signal: string | null): string | null {
  if (signal !== null) return signal;
  if (code === null || code <= 128 || code > 128 + SIGNALS.length) return null;
  return SIGNALS[code - 129];
}

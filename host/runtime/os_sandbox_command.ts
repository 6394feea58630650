/**
 * Pure policy → argv of the OS sandbox (bubblewrap) around one session runtime (issue 22). No I/O
 * here; `os_sandbox.ts` finds the paths and checks that bubblewrap works.
 *
 * The sandbox is a second wall behind Deno's permissions: both hold, and the runtime's argv,
 * environment and permissions (SPEC §9.3) are the same inside it.
 *
 * @module
 */

/** Size of each of the sandbox's writable places, `/tmp` and the work directory (tmpfs, held in memory): 16 MiB. */
export const SANDBOX_TMP_BYTES = 16 * 1024 * 1024;

/**
 * The shell that opens the seccomp filter as file descriptor 3 for bubblewrap, then becomes it
 * (`exec`): `Deno.Command` cannot pass a descriptor beyond stdin, stdout and stderr.
 */
export const SECCOMP_SHELL: readonly string[] = ["/bin/sh", "-c", 'exec "$@" 3<"$0"'];

/** Inputs of {@link buildSandboxArgv}. */
export interface SandboxArgvOptions {
  /** Absolute path of `bwrap`. */
  bwrap: string;
  /**
   * Host paths made visible read-only at the same path: the Deno binary, the shared libraries it
   * loads and its dynamic loader (and nothing else of the host's filesystem).
   */
  readOnly: readonly string[];
  /** The runtime directory (read-only inside, SPEC §9.3). */
  runtimeDir: string;
  /**
   * The runtime's working directory: inside, a fresh tmpfs of {@link SANDBOX_TMP_BYTES} at this
   * path (nothing of the host's directory shows through), holding `DENO_DIR` (`deno_dir`).
   */
  workDir: string;
  /** A file holding the seccomp filter (`seccomp.ts`); none: no filter. */
  seccomp?: string;
  /** `--disable-userns` (bubblewrap 0.8 and later): no nested user namespace inside. */
  disableUserns?: boolean;
}

/**
 * The bubblewrap argv placed before `<deno> run …`.
 *
 * - New user, network (only `lo`), PID, IPC, UTS and cgroup namespaces (`--unshare-all`); with
 *   `disableUserns` no nested user namespace can be made inside; no capabilities;
 *   `--die-with-parent` (no runtime outlives the host, even on SIGKILL); `--new-session` (no
 *   terminal to inject into).
 * - Two processes per runtime (issue 29): bubblewrap itself (outside the namespaces: it created them
 *   with `clone`, reports the runtime's exit as its own, and its death kills the runtime), and Deno
 *   as PID 1 of the new PID namespace (`--as-pid-1`: no bubblewrap init in between; Deno starts no
 *   process, so there is nothing to reap). The seccomp shell `exec`s bubblewrap: no process of its own.
 * - With `seccomp`: the argv starts with {@link SECCOMP_SHELL} and the filter's file, and bubblewrap
 *   installs the filter (`--seccomp 3`) on the runtime just before it runs Deno.
 * - Filesystem: an empty read-only root holding only `readOnly` and the runtime directory
 *   (read-only); the work directory and `/tmp` are private tmpfs of {@link SANDBOX_TMP_BYTES}
 *   each (writes past it fail with "No space left on device"; nothing reaches the host's disk);
 *   a private `/proc` (only the sandbox's own processes), a minimal `/dev`. No `/home`, `/etc`
 *   (so no `/etc/localtime`: runtimes run with `TZ=UTC`), `/run` or `/var`: no host Unix
 *   sockets, and abstract sockets are per network namespace.
 * - Paths keep their host names, so `--allow-read=<runtimeDir>` and `DENO_DIR` mean the same
 *   inside. The working directory is the work directory, as without the sandbox.
 *
 * @param options see {@link SandboxArgvOptions}
 * @returns the argv (`bwrap` first, or {@link SECCOMP_SHELL} with a filter), ending with `--`
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
    ...(options.seccomp !== undefined ? [...SECCOMP_SHELL, options.seccomp] : []),
    options.bwrap,
    "--unshare-all",
    ...(options.disableUserns ? ["--unshare-user", "--disable-userns"] : []),
    ...(options.seccomp !== undefined ? ["--seccomp", "3"] : []),
    "--die-with-parent",
    "--as-pid-1",
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
    "--size",
    String(SANDBOX_TMP_BYTES),
    "--perms",
    "0700",
    "--tmpfs",
    workDir,
    "--perms",
    "0700",
    "--dir",
    `${workDir}/deno_dir`,
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

/**
 * The compiled executable as its own session runtime (SPEC §9.9). A host built with `deno compile`
 * spawns itself with {@link SELF_RUNTIME_ARG} and its runtime directory; `cli/main.ts` hands such a
 * process to {@link runSelfSpawnedRuntime} before anything of the host runs. Because a compiled
 * executable's permissions are fixed at compile time, the runtime narrows them itself first, to
 * what SPEC §9.3's `deno run` flags would have given it: read of its runtime directory, nothing
 * else. Then it runs the same bundled entry (`runtime.js` in that directory) as a `deno run`
 * runtime.
 *
 * Narrowing (measured on Deno 2.9.6, DENO-NOTES): a path-scoped revoke under a global read grant
 * does nothing, so the executable is built with `--allow-read=/` (a list) and the other grants
 * global; then `request(read dir)` is granted without a prompt, `revoke(read /)` leaves only `dir`
 * readable, and `write`, `net`, `env`, `run`, `ffi`, `sys` and `import` are revoked whole. Workers
 * inherit the narrowed set. The runtime checks the result and refuses to run if anything is still
 * granted (e.g. an executable built with `--allow-all`).
 *
 * @module
 */

/** The argument, given only by the host, that starts this program as a session runtime. */
export const SELF_RUNTIME_ARG = "--code-mode-session-runtime";

/** Permissions revoked whole. */
const REVOKED = ["write", "net", "env", "run", "ffi", "sys", "import"] as const;

/**
 * Narrows this process's permissions to reading `dir` (see the module doc).
 *
 * @param dir the runtime directory
 * @throws {Error} when a permission other than reading `dir` is still granted afterwards
 */
export async function narrowPermissions(dir: string): Promise<void> {
  const own = await Deno.permissions.request({ name: "read", path: dir });
  if (own.state !== "granted") throw new Error(`read access to ${dir} was not granted`);
  await Deno.permissions.revoke({ name: "read", path: "/" });
  for (const name of REVOKED) await Deno.permissions.revoke({ name });
  const left = [
    ...(Deno.permissions.querySync({ name: "read", path: "/" }).state === "granted" ? ["read /"] : []),
    ...REVOKED.filter((name) => Deno.permissions.querySync({ name }).state === "granted"),
  ];
  if (left.length > 0) {
    throw new Error(
      `could not narrow the runtime's permissions (still granted: ${left.join(", ")}); ` +
        "build the executable with --allow-read=/ rather than --allow-all or a bare --allow-read",
    );
  }
}

/**
 * Runs this process as a session runtime: narrows its permissions, then loads the runtime entry
 * from the runtime directory. On failure it writes the reason to stderr and exits with 70 before
 * `Ready`, which the host reports as a runtime that failed to start.
 *
 * @param args the arguments after {@link SELF_RUNTIME_ARG}: the runtime directory
 */
export async function runSelfSpawnedRuntime(args: string[]): Promise<void> {
  const dir = (args[0] ?? "").replace(/\/+$/, "");
  try {
    if (!dir.startsWith("/")) throw new Error("the runtime directory must be an absolute path");
    await narrowPermissions(dir);
  } catch (error) {
    const text = `code-mode session runtime refused to start: ${(error as Error).message}\n`;
    Deno.stderr.writeSync(new TextEncoder().encode(text));
    Deno.exit(70);
  }
  await import(new URL(`file://${dir}/runtime.js`).href);
}

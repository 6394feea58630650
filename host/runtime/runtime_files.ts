/**
 * The runtime directory (SPEC §9.3, §9.9): the bundled runtime entry and the cell bootstrap,
 * copied to a host-private directory that is the runtimes' only readable path (the worker protocol
 * is compiled into the runtime: `proto/worker_codec.ts`).
 * Works the same from source and from a compiled executable (which embeds these files).
 *
 * @module
 */
/** The files of a runtime directory. */
export const RUNTIME_FILES: readonly string[] = ["runtime.js", "runtime_main.js", "cell.js"];

/** The bundled runtime (`worker/dist/`), relative to this module. */
const BUNDLE = new URL("../../worker/dist/", import.meta.url);

/** The host-private parent of runtime and work directories: `<TMPDIR>/code-mode-host`. */
export function hostTempParent(): string {
  const tmp = Deno.env.get("TMPDIR") || "/tmp";
  return `${tmp.replace(/\/+$/, "")}/code-mode-host`;
}

/** Whether `pid` may be running. Only a definite "no such process" counts as dead. */
function processAlive(pid: number): boolean {
  try {
    Deno.statSync(`/proc/${pid}`);
    return true;
  } catch (error) {
    // Without read access to /proc (Deno treats it as special), nothing can be proven dead.
    return !(error instanceof Deno.errors.NotFound);
  }
}

/**
 * Removes directories left under the parent by hosts that no longer run (SPEC §9.9).
 *
 * @param parent the host-private parent directory
 * @returns the names removed
 */
export function removeStaleDirectories(parent: string): string[] {
  const removed: string[] = [];
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(parent)];
  } catch {
    return removed;
  }
  for (const entry of entries) {
    const match = /^(?:[wr]|tls)-(\d+)-/.exec(entry.name);
    if (!match) continue;
    const pid = Number(match[1]);
    if (pid === Deno.pid || processAlive(pid)) continue;
    try {
      Deno.removeSync(`${parent}/${entry.name}`, { recursive: true });
      removed.push(entry.name);
    } catch {
      // Another host may be cleaning up too.
    }
  }
  return removed;
}

/**
 * Writes the runtime files to a fresh `<parent>/r-<pid>-<random>` and returns that directory (one
 * per host, so several hosts in one process never share or delete each other's files).
 *
 * @param parent the host-private parent directory
 * @param from a directory holding the {@link RUNTIME_FILES} to use instead of the bundled ones
 * @returns the runtime directory
 * @throws {Deno.errors.NotFound} when a file is missing (for the bundle: run `deno task bundle`)
 */
export function prepareRuntimeDirectory(parent: string, from?: string): string {
  const files = RUNTIME_FILES.map((name) =>
    [
      name,
      Deno.readFileSync(from === undefined ? new URL(name, BUNDLE) : `${from.replace(/\/+$/, "")}/${name}`),
    ] as const
  );
  const dir = Deno.makeTempDirSync({ dir: parent, prefix: `r-${Deno.pid}-` });
  for (const [name, bytes] of files) Deno.writeFileSync(`${dir}/${name}`, bytes, { mode: 0o600 });
  return dir;
}

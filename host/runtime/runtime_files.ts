/**
 * The runtime directory (SPEC §9.3, §9.9): the bundled runtime entry and the cell bootstrap,
 * copied to a host-private directory that is the runtimes' only readable path (the worker protocol
 * is compiled into the runtime: `proto/worker_codec.ts`).
 * Works the same from source and from a compiled executable (which embeds these files).
 *
 * @module
 */
/** Files of the runtime directory and where they come from (relative to this module). */
const SOURCES: [name: string, read: () => Uint8Array][] = [
  ["runtime.js", () => Deno.readFileSync(new URL("../../worker/dist/runtime.js", import.meta.url))],
  ["runtime_main.js", () => Deno.readFileSync(new URL("../../worker/dist/runtime_main.js", import.meta.url))],
  ["cell.js", () => Deno.readFileSync(new URL("../../worker/dist/cell.js", import.meta.url))],
];

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
 * @returns the runtime directory
 * @throws {Deno.errors.NotFound} when the bundle is missing (run `deno task bundle`)
 */
export function prepareRuntimeDirectory(parent: string): string {
  const dir = Deno.makeTempDirSync({ dir: parent, prefix: `r-${Deno.pid}-` });
  for (const [name, read] of SOURCES) Deno.writeFileSync(`${dir}/${name}`, read(), { mode: 0o600 });
  return dir;
}

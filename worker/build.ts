/**
 * Builds the runtime bundles in `worker/dist/` with `deno bundle`, then rewrites esbuild's module
 * paths so the output does not depend on where the npm cache lives (`../../root/.cache/deno/npm/
 * registry.npmjs.org/long/5.3.2/…` becomes `npm:long/5.3.2/…`). The committed bundles and the
 * freshness test both go through {@link buildBundles}, so any machine produces the same bytes.
 *
 * Run: `deno task bundle` (writes `worker/dist/`).
 */

/** The entry points and the file each one is bundled into. */
export const BUNDLES: ReadonlyArray<readonly [entry: string, name: string]> = [
  ["worker/runtime_entry.ts", "runtime.js"],
  ["worker/runtime_main.ts", "runtime_main.js"],
  ["worker/cell_bootstrap.ts", "cell.js"],
];

const REPO_ROOT = new URL("..", import.meta.url).pathname;
const NPM_CACHE_PATH = /[^\s"'`]*\/npm\/registry\.npmjs\.org\//g;

/**
 * Makes the bundle independent of the npm cache location: esbuild names every npm module by its
 * path relative to the working directory, in `// <path>` comments and in `__commonJS` keys.
 */
export function normaliseBundle(code: string): string {
  return code.replace(NPM_CACHE_PATH, "npm:");
}

/** Bundles every entry of {@link BUNDLES} into `outDir`, normalised. */
export async function buildBundles(outDir: string): Promise<void> {
  for (const [entry, name] of BUNDLES) {
    const target = `${outDir}/${name}`;
    const result = await new Deno.Command(Deno.execPath(), {
      args: ["bundle", "--quiet", "--platform", "deno", "-o", target, entry],
      cwd: REPO_ROOT,
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!result.success) {
      throw new Error(`deno bundle ${entry} failed:\n${new TextDecoder().decode(result.stderr)}`);
    }
    await Deno.writeTextFile(target, normaliseBundle(await Deno.readTextFile(target)));
  }
}

if (import.meta.main) {
  await buildBundles(`${REPO_ROOT}worker/dist`);
}

/**
 * `deno task codex:install [--codex PATH] [--uninstall]`: makes an installed Codex (0.171) use
 * this checkout's host, or undoes that.
 *
 * - Finds Codex: `--codex PATH` (the `codex` command, npm's JS shim, the native binary, or the
 *   platform package's vendor directory), else `codex` on PATH. The npm shim is followed to its
 *   platform package (`@openai/codex-<platform>`, resolved the way the shim resolves it), whose
 *   `vendor/<target>/` directory holds `codex-package.json`, `bin/` and `codex-resources/`.
 * - Installs a launcher at `<vendor>/codex-resources/codex-code-mode-host`, where Codex 0.171
 *   looks first (before `bin/codex-code-mode-host`). The launcher execs this checkout's
 *   `bin/codex-code-mode-host` by its absolute path, so it works from any directory.
 * - Whatever was at that path before (a host Codex shipped there) is moved to
 *   `codex-code-mode-host.codex-backup` and restored by `--uninstall`. An existing backup is
 *   never overwritten: the install refuses.
 * - Idempotent: installing again rewrites the launcher; uninstalling what is not installed says
 *   so and succeeds. Codex's own `bin/` is never touched.
 * - Exit codes: 0 done (or nothing to do), 1 refused or failed (with the reason), 2 usage error.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { dirname, join, resolve } from "node:path";

/** The file name Codex 0.171 looks for in its resources directory. */
export const HOST_NAME = "codex-code-mode-host";
/** Where Codex's own file goes while this host is installed. */
export const BACKUP_SUFFIX = ".codex-backup";
/** The line that marks a launcher this installer wrote. */
export const MARKER = "# Installed by code-mode-host: deno task codex:install";

const USAGE = `usage: deno task codex:install [--codex PATH] [--uninstall]

  --codex PATH   the Codex to change: the 'codex' command, the native binary or its vendor
                 directory (default: 'codex' on PATH)
  --uninstall    remove this host's launcher and restore what Codex had there`;

const PLATFORM_PACKAGES: Record<string, { pkg: string; target: string }> = {
  "linux-x86_64": { pkg: "@openai/codex-linux-x64", target: "x86_64-unknown-linux-musl" },
  "linux-aarch64": { pkg: "@openai/codex-linux-arm64", target: "aarch64-unknown-linux-musl" },
  "darwin-x86_64": { pkg: "@openai/codex-darwin-x64", target: "x86_64-apple-darwin" },
  "darwin-aarch64": { pkg: "@openai/codex-darwin-arm64", target: "aarch64-apple-darwin" },
};

/** A refusal or failure the user can act on (exit 1). */
export class InstallError extends Error {}

function stat(path: string): Deno.FileInfo | undefined {
  try {
    return Deno.statSync(path);
  } catch {
    return undefined;
  }
}

function lstat(path: string): Deno.FileInfo | undefined {
  try {
    return Deno.lstatSync(path);
  } catch {
    return undefined;
  }
}

/** `codex` on PATH, as the shell would find it. */
function onPath(name: string): string | undefined {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (!dir) continue;
    const candidate = join(dir, name);
    const info = stat(candidate);
    if (info?.isFile && (info.mode ?? 0o111) & 0o111) return candidate;
  }
  return undefined;
}

function isVendorDir(dir: string): boolean {
  return stat(join(dir, "codex-package.json"))?.isFile === true;
}

/** The platform package's vendor directory for npm's `@openai/codex` package at `root`. */
function vendorOfShimPackage(root: string): string | undefined {
  const platform = PLATFORM_PACKAGES[`${Deno.build.os}-${Deno.build.arch}`];
  if (!platform) return undefined;
  // Node's resolution from <root>/bin/codex.js: node_modules of each ancestor, nearest first.
  for (let dir = root;; dir = dirname(dir)) {
    const vendor = join(dir, "node_modules", platform.pkg, "vendor", platform.target);
    if (isVendorDir(vendor)) return vendor;
    if (dirname(dir) === dir) break;
  }
  const bundled = join(root, "vendor", platform.target);
  return isVendorDir(bundled) ? bundled : undefined;
}

/**
 * Finds the vendor directory of an installed Codex.
 *
 * @param given `--codex`: a command, a binary or a vendor directory; default `codex` on PATH
 * @returns the vendor directory (it holds `codex-package.json`)
 * @throws {InstallError} when no Codex is found there
 */
export function findVendor(given?: string): string {
  const start = given ?? onPath("codex");
  if (!start) {
    throw new InstallError(
      "no 'codex' on PATH: install it (npm i -g @openai/codex@0.171.0) or pass --codex PATH",
    );
  }
  let real: string;
  try {
    // `deno task` runs in the checkout; a relative --codex is relative to where it was typed.
    real = Deno.realPathSync(resolve(Deno.env.get("INIT_CWD") ?? Deno.cwd(), start));
  } catch {
    throw new InstallError(`${start}: no such file or directory`);
  }
  const info = stat(real)!;
  const candidates: string[] = [];
  if (info.isDirectory) {
    candidates.push(real);
    const fromPackage = vendorOfShimPackage(real);
    if (fromPackage) candidates.push(fromPackage);
  } else {
    // The native binary lives in <vendor>/bin/; npm's shim in <package>/bin/codex.js.
    candidates.push(dirname(dirname(real)));
    const fromShim = vendorOfShimPackage(dirname(dirname(real)));
    if (fromShim) candidates.push(fromShim);
  }
  const vendor = candidates.find(isVendorDir);
  if (!vendor) {
    throw new InstallError(
      `${start} (${real}) is not a Codex install this knows: no codex-package.json next to its bin/ and no platform package (npm's @openai/codex)`,
    );
  }
  return vendor;
}

/** The paths the installer works with. */
export interface Layout {
  readonly vendor: string;
  readonly version: string;
  /** `<vendor>/<resourcesDir>/codex-code-mode-host`. */
  readonly target: string;
  readonly backup: string;
}

/**
 * Reads `codex-package.json` of a vendor directory.
 *
 * @param vendor the vendor directory
 * @returns where the launcher and the backup go
 */
export function layoutOf(vendor: string): Layout {
  let manifest: { version?: string; resourcesDir?: string };
  try {
    manifest = JSON.parse(Deno.readTextFileSync(join(vendor, "codex-package.json")));
  } catch (error) {
    throw new InstallError(`${join(vendor, "codex-package.json")}: ${(error as Error).message}`);
  }
  const resources = join(vendor, manifest.resourcesDir ?? "codex-resources");
  const target = join(resources, HOST_NAME);
  return { vendor, version: manifest.version ?? "unknown", target, backup: target + BACKUP_SUFFIX };
}

/** Whether the file at `path` is a launcher this installer wrote. */
export function isOurs(path: string): boolean {
  const info = lstat(path);
  if (!info?.isFile || info.size > 4096) return false;
  try {
    return Deno.readTextFileSync(path).includes(MARKER);
  } catch {
    return false;
  }
}

/** The launcher installed into Codex: it execs this checkout's by its absolute path. */
export function launcherScript(checkoutLauncher: string): string {
  const quoted = `'${checkoutLauncher.replaceAll("'", `'\\''`)}'`;
  return `#!/bin/sh
${MARKER}
# Runs the code-mode host of the checkout below in place of Codex's own. Undo with
# 'deno task codex:install --uninstall' in that checkout.
exec ${quoted} "$@"
`;
}

function writeLauncher(target: string, checkoutLauncher: string): void {
  const temporary = `${target}.installing`;
  Deno.writeTextFileSync(temporary, launcherScript(checkoutLauncher), { mode: 0o755 });
  Deno.chmodSync(temporary, 0o755);
  Deno.renameSync(temporary, target);
}

/**
 * Installs the launcher into the Codex whose vendor directory is `layout.vendor`.
 *
 * @param layout where
 * @param checkoutLauncher this checkout's `bin/codex-code-mode-host` (absolute)
 * @returns what was done, one line each
 * @throws {InstallError} when a backup exists and the target is not ours
 */
export function install(layout: Layout, checkoutLauncher: string): string[] {
  const out: string[] = [];
  if (isOurs(layout.target)) {
    writeLauncher(layout.target, checkoutLauncher);
    out.push(`already installed: ${layout.target} (rewritten to run ${checkoutLauncher})`);
    return out;
  }
  if (lstat(layout.target)) {
    if (lstat(layout.backup)) {
      throw new InstallError(
        `${layout.target} is not this host's launcher, and a backup already exists at ${layout.backup}: refusing to overwrite it. Move one of them away, then run the install again.`,
      );
    }
    Deno.renameSync(layout.target, layout.backup);
    out.push(`kept Codex's own host: ${layout.target} -> ${layout.backup}`);
  }
  Deno.mkdirSync(dirname(layout.target), { recursive: true });
  writeLauncher(layout.target, checkoutLauncher);
  out.push(`installed: ${layout.target} runs ${checkoutLauncher}`);
  return out;
}

/**
 * Removes the launcher and restores the backup, if any.
 *
 * @param layout where
 * @returns what was done, one line each
 * @throws {InstallError} when the target is not ours
 */
export function uninstall(layout: Layout): string[] {
  const out: string[] = [];
  if (lstat(layout.target)) {
    if (!isOurs(layout.target)) {
      if (lstat(layout.backup)) {
        throw new InstallError(
          `${layout.target} is not this host's launcher: left alone, and so is the backup ${layout.backup}`,
        );
      }
      out.push(`not installed: ${layout.target} is not this host's launcher (left alone)`);
      return out;
    }
    Deno.removeSync(layout.target);
    out.push(`removed: ${layout.target}`);
  } else {
    out.push(`not installed: nothing at ${layout.target}`);
  }
  if (lstat(layout.backup)) {
    Deno.renameSync(layout.backup, layout.target);
    out.push(`restored Codex's own host: ${layout.backup} -> ${layout.target}`);
  } else if (lstat(join(layout.vendor, "bin", HOST_NAME))) {
    out.push(`Codex uses its own host again: ${join(layout.vendor, "bin", HOST_NAME)}`);
  }
  return out;
}

function main(args: string[]): number {
  let values: { codex?: string; uninstall: boolean; help: boolean };
  try {
    ({ values } = parseArgs({
      args,
      options: {
        codex: { type: "string" },
        uninstall: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    console.error(`codex:install: ${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const checkoutLauncher = new URL("./codex-code-mode-host", import.meta.url).pathname;
  try {
    const layout = layoutOf(findVendor(values.codex));
    console.log(`Codex ${layout.version} at ${layout.vendor}`);
    if (!layout.version.startsWith("0.171.")) {
      console.log(`note: this host is tested with Codex 0.171; this one is ${layout.version}`);
    }
    const lines = values.uninstall ? uninstall(layout) : install(layout, checkoutLauncher);
    for (const line of lines) console.log(line);
    if (!values.uninstall) {
      console.log(
        "Turn code mode on with `features.code_mode = true` in ~/.codex/config.toml (or --enable code_mode).",
      );
    }
    return 0;
  } catch (error) {
    if (error instanceof InstallError) {
      console.error(`codex:install: ${error.message}`);
      return 1;
    }
    if (error instanceof Deno.errors.PermissionDenied) {
      console.error(
        `codex:install: ${
          (error as Error).message
        } (a global npm install may need sudo, or --codex a Codex you own)`,
      );
      return 1;
    }
    throw error;
  }
}

if (import.meta.main) Deno.exit(main(Deno.args));

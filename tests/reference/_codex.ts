/**
 * The reference: Codex 0.171 and its own `codex-code-mode-host`, installed pinned from npm into a
 * cache directory that later runs reuse (`../shared/CODEX-0.171.md`). Folder-private.
 *
 * - The cache is `$CODE_MODE_HOST_CODEX_CACHE`, else `~/.cache/code-mode-host/codex-0.171.0`.
 * - An exclusive lock on `<cache>/.lock` serialises installers, so test files running at once never
 *   download it twice; a `<cache>/.installed` marker, written after the version check passes, makes
 *   every later call a stat and nothing more.
 *
 * @module
 */
import { join } from "node:path";

/** The pinned Codex version. */
export const CODEX_VERSION = "0.171.0";

/** Paths of an installed reference. */
export interface CodexInstall {
  /** The cache directory (holds `node_modules/`). */
  readonly dir: string;
  /** The platform package's vendor directory: `bin/`, `codex-path/`, `codex-resources/`. */
  readonly vendor: string;
  /** The real `codex` CLI. */
  readonly codex: string;
  /** Codex's own `codex-code-mode-host`: the oracle. */
  readonly host: string;
}

/** Where the reference is (or will be) installed. */
export function codexCacheDir(): string {
  const set = Deno.env.get("CODE_MODE_HOST_CODEX_CACHE");
  if (set) return set;
  const home = Deno.env.get("HOME") ?? "/tmp";
  return join(home, ".cache", "code-mode-host", `codex-${CODEX_VERSION}`);
}

function vendorDir(dir: string): string {
  const triple = Deno.build.arch === "aarch64" ? "aarch64-unknown-linux-musl" : "x86_64-unknown-linux-musl";
  const pkg = Deno.build.arch === "aarch64" ? "codex-linux-arm64" : "codex-linux-x64";
  return join(dir, "node_modules", "@openai", pkg, "vendor", triple);
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

async function output(command: string, args: string[], cwd?: string): Promise<Deno.CommandOutput> {
  return await new Deno.Command(command, { args, cwd, stdin: "null", stdout: "piped", stderr: "piped" })
    .output();
}

let installing: Promise<CodexInstall> | undefined;

/**
 * Installs `@openai/codex@0.171.0` into {@link codexCacheDir} unless it is already there, and
 * returns its paths.
 *
 * @returns the installed reference
 * @throws {Error} when npm fails or the installed CLI does not report the pinned version
 */
export function ensureCodex(): Promise<CodexInstall> {
  installing ??= install();
  return installing;
}

async function install(): Promise<CodexInstall> {
  const dir = codexCacheDir();
  const vendor = vendorDir(dir);
  const paths: CodexInstall = {
    dir,
    vendor,
    codex: join(vendor, "bin", "codex"),
    host: join(vendor, "bin", "codex-code-mode-host"),
  };
  const marker = join(dir, ".installed");
  if (exists(marker) && exists(paths.codex) && exists(paths.host)) return paths;
  await Deno.mkdir(dir, { recursive: true });
  using lock = await Deno.open(join(dir, ".lock"), { create: true, write: true });
  await lock.lock(true);
  try {
    if (exists(marker) && exists(paths.codex) && exists(paths.host)) return paths;
    if (!exists(paths.codex) || !exists(paths.host)) {
      if (!exists(join(dir, "package.json"))) {
        await Deno.writeTextFile(join(dir, "package.json"), '{ "private": true }\n');
      }
      const npm = await output("npm", [
        "install",
        "--no-audit",
        "--no-fund",
        "--no-save",
        "--loglevel=error",
        `@openai/codex@${CODEX_VERSION}`,
      ], dir);
      if (!npm.success) {
        throw new Error(
          `npm install @openai/codex@${CODEX_VERSION} failed: ${new TextDecoder().decode(npm.stderr)}`,
        );
      }
    }
    const version = await output(paths.codex, ["--version"]);
    const printed = new TextDecoder().decode(version.stdout).trim();
    if (printed !== `codex-cli ${CODEX_VERSION}`) {
      throw new Error(`the reference in ${dir} reports '${printed}', not codex-cli ${CODEX_VERSION}`);
    }
    await Deno.writeTextFile(marker, `${CODEX_VERSION}\n`);
    return paths;
  } finally {
    await lock.unlock();
  }
}

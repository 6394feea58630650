/**
 * Shadow installs of Codex 0.171: the real `codex` pointed at a host under test without touching
 * the installed package (`../../shared/CODEX-0.171.md`). Folder-private.
 *
 * A shadow is a directory laid out like the platform package's vendor directory:
 *
 * - `bin/codex`: a hard link to the real binary (a copy when the link crosses filesystems);
 * - `codex-path/`, every `codex-resources/*` and `codex-package.json`: symlinks to the package's.
 *   Without `codex-package.json` Codex does not look in `codex-resources/` at all and falls back
 *   to `bin/codex-code-mode-host`;
 * - `codex-resources/codex-code-mode-host`: the host under test, where 0.171 looks first.
 *
 * @module
 */
import { join } from "node:path";
import type { CodexInstall } from "./_codex.ts";

/** The repository root. */
export const REPO_ROOT = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");
/** This checkout's launcher. */
export const LAUNCHER = `${REPO_ROOT}/bin/codex-code-mode-host`;

/** A shadow install. */
export interface Shadow {
  /** The shadow's vendor-like directory. */
  readonly dir: string;
  /** Its `bin/codex`. */
  readonly codex: string;
  /** Its `codex-resources/codex-code-mode-host`. */
  readonly host: string;
}

/** What `codex-resources/codex-code-mode-host` of a shadow is. */
export type ShadowHost =
  /** a symlink to this executable (Codex's own host for the reference) */
  | { readonly link: string }
  /** a `/bin/sh` script with this body */
  | { readonly script: string };

async function linkOrCopy(from: string, to: string): Promise<void> {
  try {
    await Deno.link(from, to);
  } catch (error) {
    if ((error as { code?: string }).code !== "EXDEV") throw error;
    await Deno.copyFile(from, to);
    await Deno.chmod(to, 0o755);
  }
}

/** Options of {@link makeShadow}. */
export interface ShadowOptions {
  /**
   * The binary `bin/codex` is linked to; default the package's. Pass another shadow's `codex` so
   * that a fallback copy (across filesystems) is made once, not once per shadow.
   */
  readonly codex?: string;
}

/**
 * Makes a shadow install of `install` in `dir` (created; must not exist yet).
 *
 * @param install the reference install
 * @param dir the shadow's directory
 * @param host what Codex will find as its code-mode host
 * @param options where `bin/codex` comes from
 * @returns the shadow's paths
 */
export async function makeShadow(
  install: CodexInstall,
  dir: string,
  host: ShadowHost,
  options: ShadowOptions = {},
): Promise<Shadow> {
  await Deno.mkdir(join(dir, "bin"), { recursive: true });
  await Deno.mkdir(join(dir, "codex-resources"));
  await linkOrCopy(options.codex ?? install.codex, join(dir, "bin", "codex"));
  await Deno.symlink(join(install.vendor, "codex-path"), join(dir, "codex-path"));
  await Deno.symlink(join(install.vendor, "codex-package.json"), join(dir, "codex-package.json"));
  for await (const entry of Deno.readDir(join(install.vendor, "codex-resources"))) {
    if (entry.name === "codex-code-mode-host") continue;
    await Deno.symlink(
      join(install.vendor, "codex-resources", entry.name),
      join(dir, "codex-resources", entry.name),
    );
  }
  const path = join(dir, "codex-resources", "codex-code-mode-host");
  if ("link" in host) {
    await Deno.symlink(host.link, path);
  } else {
    await Deno.writeTextFile(path, `#!/bin/sh\n${host.script}\n`, { mode: 0o755 });
  }
  return { dir, codex: join(dir, "bin", "codex"), host: path };
}

/** Quotes a word for `/bin/sh`. */
export function shQuote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

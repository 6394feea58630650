/**
 * Resolves `--os-sandbox auto|bwrap|off` at start-up (issues 22, 27): finds bubblewrap and the
 * files the Deno binary loads, writes the seccomp filter (`seccomp.ts`) into the runtime
 * directory, and runs one sandboxed `deno --version` to prove the sandbox works here. The argv
 * itself is built by the pure `os_sandbox_command.ts`.
 *
 * - The tightest sandbox that works is taken: with the seccomp filter and `--disable-userns`;
 *   else (bubblewrap before 0.8) without `--disable-userns`; else (no seccomp here) without the
 *   filter. Each step down is named in `warnings`.
 *
 * @module
 */
import { buildSandboxArgv } from "./os_sandbox_command.ts";
import { buildSeccompFilter } from "./seccomp.ts";

/** The `--os-sandbox` modes. */
export type OsSandboxMode = "auto" | "bwrap" | "off";

/** A working sandbox: what {@link buildSandboxArgv} needs besides the per-runtime directories. */
export interface OsSandbox {
  bwrap: string;
  /** The Deno binary, the shared libraries it loads and its dynamic loader (files, not folders). */
  readOnly: string[];
  /** The Deno binary, run inside the sandbox at the same path. */
  deno: string;
  /** The seccomp filter's file (in the runtime directory), when one is applied. */
  seccomp?: string;
  /** Whether bubblewrap forbids nested user namespaces (`--disable-userns`). */
  disableUserns: boolean;
}

/** The file name of the seccomp filter in the runtime directory. */
export const SECCOMP_FILE = "seccomp.bpf";

function findOnPath(name: string): string | undefined {
  for (const dir of (Deno.env.get("PATH") ?? "/usr/local/bin:/usr/bin:/bin").split(":")) {
    if (dir === "") continue;
    try {
      const path = `${dir}/${name}`;
      if (Deno.statSync(path).isFile) return path;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * The ELF interpreter (`PT_INTERP`) of a 64-bit little-endian executable when it is glibc's dynamic
 * loader (`ld-linux*.so.N`), else undefined.
 */
export function glibcLoader(path: string): string | undefined {
  try {
    const file = Deno.openSync(path);
    try {
      const header = new Uint8Array(64);
      if (file.readSync(header) !== 64) return undefined;
      const h = new DataView(header.buffer);
      // "\x7fELF", 64-bit, little-endian.
      if (h.getUint32(0) !== 0x7f454c46 || header[4] !== 2 || header[5] !== 1) return undefined;
      const phoff = Number(h.getBigUint64(32, true));
      const phentsize = h.getUint16(54, true);
      const phnum = h.getUint16(56, true);
      if (phentsize < 56 || phnum > 64) return undefined;
      const table = new Uint8Array(phentsize * phnum);
      file.seekSync(phoff, Deno.SeekMode.Start);
      if (file.readSync(table) !== table.length) return undefined;
      const t = new DataView(table.buffer);
      for (let i = 0; i < phnum; i++) {
        const at = i * phentsize;
        if (t.getUint32(at, true) !== 3) continue; // PT_INTERP
        const bytes = new Uint8Array(Number(t.getBigUint64(at + 32, true)));
        if (bytes.length > 4096) return undefined;
        file.seekSync(Number(t.getBigUint64(at + 8, true)), Deno.SeekMode.Start);
        if (file.readSync(bytes) !== bytes.length) return undefined;
        const loader = new TextDecoder().decode(bytes).replace(/\0+$/, "");
        return /^\/[^\0]*\/ld-linux[\w.-]*\.so\.\d+$/.test(loader) ? loader : undefined;
      }
      return undefined;
    } finally {
      file.close();
    }
  } catch {
    return undefined;
  }
}

/**
 * The shared libraries `deno` loads and its dynamic loader, at the paths the loader looks them up:
 * from glibc's loader itself (`ld-linux… --list`, what `ldd` runs, <1 ms) when `deno` names it, else
 * from `ldd` (a shell script: ~10 ms, more under load); the whole library directories when neither
 * is there or says nothing (a static binary needs none: then the list is empty).
 */
export async function libraryFiles(deno: string): Promise<{ paths: string[]; why?: string }> {
  const loader = glibcLoader(deno);
  const ldd = loader ?? findOnPath("ldd");
  const args = loader ? ["--list", deno] : [deno];
  const whole = ["/lib", "/lib64", "/usr/lib", "/usr/lib64"].filter(exists);
  if (!ldd) return { paths: whole, why: "ldd is missing: whole library directories are mounted" };
  try {
    const out = await new Deno.Command(ldd, { args, stdout: "piped", stderr: "piped" }).output();
    const text = new TextDecoder().decode(out.stdout);
    if (!out.success) {
      return /not a dynamic executable/.test(new TextDecoder().decode(out.stderr))
        ? { paths: [] }
        : { paths: whole, why: `ldd ${deno} failed: whole library directories are mounted` };
    }
    // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` and `/lib64/ld-linux-x86-64.so.2 (0x…)`.
    const paths = [...text.matchAll(/(?:^|=>)\s*(\/\S+)\s+\(0x/gm)].map((m) => m[1]).filter(exists);
    return { paths: [...new Set(paths)] };
  } catch (error) {
    return { paths: whole, why: `ldd ${deno} failed (${error}): whole library directories are mounted` };
  }
}

/**
 * Decides the OS sandbox for this host.
 *
 * @param mode the `--os-sandbox` mode
 * @param deno the Deno binary for runtimes
 * @param runtimeDir the host's runtime directory (the probe runs in a work dir next to it)
 * @param workParent the parent of work directories
 * @returns the sandbox, or undefined (off) with the reason why; `warnings`: what was left out
 * @throws {Error} in `bwrap` mode when bubblewrap is missing or does not work
 */
export async function resolveOsSandbox(
  mode: OsSandboxMode,
  deno: string,
  runtimeDir: string,
  workParent: string,
): Promise<{ sandbox?: OsSandbox; why: string; warnings: string[] }> {
  if (mode === "off") return { why: "--os-sandbox off", warnings: [] };
  const refuse = (why: string) => {
    if (mode === "bwrap") throw new Error(`--os-sandbox bwrap: ${why}`);
    return { why, warnings: [] };
  };
  const bwrap = findOnPath("bwrap");
  if (!bwrap) return refuse("bubblewrap (bwrap) is not installed");
  const real = Deno.realPathSync(deno);
  const libraries = await libraryFiles(real);
  const warnings = libraries.why ? [libraries.why] : [];
  const readOnly = [real, ...libraries.paths];
  let seccomp: string | undefined;
  try {
    seccomp = `${runtimeDir.replace(/\/+$/, "")}/${SECCOMP_FILE}`;
    Deno.writeFileSync(seccomp, buildSeccompFilter(), { mode: 0o600 });
  } catch (error) {
    seccomp = undefined;
    warnings.push(`no seccomp filter: ${error instanceof Error ? error.message : error}`);
  }
  // The tightest that works here, one step down at a time.
  const tries = [
    { seccomp, disableUserns: true },
    { seccomp, disableUserns: false, lost: "bubblewrap cannot --disable-userns (0.8 and later can)" },
    ...(seccomp ? [{ disableUserns: false, lost: "bubblewrap cannot apply the seccomp filter here" }] : []),
  ];
  let failure = "";
  for (const { lost, ...tighter } of tries) {
    const sandbox: OsSandbox = { bwrap, readOnly, deno: real, ...tighter };
    const error = await probe(sandbox, runtimeDir, workParent);
    if (error === undefined) {
      if (lost) warnings.push(`${lost} (${failure})`);
      return { sandbox, why: `bubblewrap ${bwrap}`, warnings };
    }
    failure ||= error;
  }
  return { ...refuse(`bubblewrap does not work here (${failure})`), warnings };
}

/** Runs `deno --version` in the sandbox; returns why it failed, or undefined. */
async function probe(
  sandbox: OsSandbox,
  runtimeDir: string,
  workParent: string,
): Promise<string | undefined> {
  const workDir = Deno.makeTempDirSync({ dir: workParent, prefix: `w-${Deno.pid}-probe-` });
  try {
    const argv = buildSandboxArgv({ ...sandbox, runtimeDir, workDir });
    const out = await new Deno.Command(argv[0], {
      args: [...argv.slice(1), sandbox.deno, "--version"],
      clearEnv: true,
      env: { NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stdout = new TextDecoder().decode(out.stdout);
    if (out.success && stdout.startsWith("deno ")) return undefined;
    const stderr = new TextDecoder().decode(out.stderr).trim().split("\n")[0] ?? "";
    return `exit ${out.code}: ${stderr || "no output"}`;
  } finally {
    Deno.removeSync(workDir, { recursive: true });
  }
}

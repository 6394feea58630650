/**
 * Resolves `--os-sandbox auto|bwrap|off` at start-up (issue 22): finds bubblewrap and the paths
 * the Deno binary needs, and runs one sandboxed `deno --version` to prove the sandbox works here.
 * The argv itself is built by the pure `os_sandbox_command.ts`.
 *
 * @module
 */
import { buildSandboxArgv } from "./os_sandbox_command.ts";

/** The `--os-sandbox` modes. */
export type OsSandboxMode = "auto" | "bwrap" | "off";

/** A working sandbox: what {@link buildSandboxArgv} needs besides the per-runtime directories. */
export interface OsSandbox {
  bwrap: string;
  /** The Deno binary, its library directories and `/etc/localtime`. */
  readOnly: string[];
  /** The Deno binary, run inside the sandbox at the same path. */
  deno: string;
}

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
 * The directories of `deno`'s shared libraries and loader, as `ldd` lists them: from glibc's
 * loader itself (`ld-linux… --list`, what `ldd` runs, <1 ms) when `deno` names it, else from `ldd`
 * (a shell script: ~10 ms, more under load); a fixed list without either. Synchronous: the probe,
 * and then the host's first runtime, wait for it.
 */
export function libraryDirectories(deno: string): string[] {
  const loader = glibcLoader(deno);
  for (const [command, args] of [[loader, ["--list", deno]], [findOnPath("ldd"), [deno]]] as const) {
    if (command === undefined) continue;
    try {
      const out = new Deno.Command(command, { args: [...args], stdout: "piped", stderr: "null" })
        .outputSync();
      if (out.success) {
        const paths = [...new TextDecoder().decode(out.stdout).matchAll(/(\/\S+)/g)].map((m) => m[1]);
        const dirs = paths.map((p) => p.slice(0, p.lastIndexOf("/")) || "/");
        if (dirs.length > 0) return [...new Set(dirs)];
      }
    } catch {
      // The next way.
    }
  }
  return ["/lib", "/lib64", "/usr/lib", "/usr/lib64"].filter(exists);
}

/**
 * Decides the OS sandbox for this host.
 *
 * @param mode the `--os-sandbox` mode
 * @param deno the Deno binary for runtimes
 * @param runtimeDir the host's runtime directory (the probe runs in a work dir next to it)
 * @param workParent the parent of work directories
 * @returns the sandbox, or undefined (off) with the reason why
 * @throws {Error} in `bwrap` mode when bubblewrap is missing or does not work
 */
export async function resolveOsSandbox(
  mode: OsSandboxMode,
  deno: string,
  runtimeDir: string,
  workParent: string,
): Promise<{ sandbox?: OsSandbox; why: string }> {
  if (mode === "off") return { why: "--os-sandbox off" };
  const refuse = (why: string) => {
    if (mode === "bwrap") throw new Error(`--os-sandbox bwrap: ${why}`);
    return { why };
  };
  const bwrap = findOnPath("bwrap");
  if (!bwrap) return refuse("bubblewrap (bwrap) is not installed");
  const real = Deno.realPathSync(deno);
  const readOnly = [
    real,
    ...libraryDirectories(real),
    ...(exists("/etc/localtime") ? ["/etc/localtime"] : []),
  ];
  const sandbox = { bwrap, readOnly, deno: real };
  const workDir = Deno.makeTempDirSync({ dir: workParent, prefix: `w-${Deno.pid}-probe-` });
  try {
    const argv = buildSandboxArgv({ bwrap, readOnly, runtimeDir, workDir });
    const out = await new Deno.Command(argv[0], {
      args: [...argv.slice(1), deno, "--version"],
      clearEnv: true,
      env: { NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stdout = new TextDecoder().decode(out.stdout);
    if (!out.success || !stdout.startsWith("deno ")) {
      const stderr = new TextDecoder().decode(out.stderr).trim().split("\n")[0] ?? "";
      return refuse(`bubblewrap does not work here (exit ${out.code}: ${stderr || "no output"})`);
    }
  } finally {
    Deno.removeSync(workDir, { recursive: true });
  }
  return { sandbox, why: `bubblewrap ${bwrap}` };
}

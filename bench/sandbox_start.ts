/**
 * `deno task bench:sandbox-start`: what the OS sandbox adds to a session runtime's start (issue 27).
 *
 * A runtime start is the spawn of the real session runtime (`worker/dist/`, the host's argv and
 * environment from `buildRuntimeCommand`) until its first frame (`Ready`) arrives on stdout; the
 * process is then killed and reaped. Three variants, measured round-robin in one run so that the
 * machine's drift hits each alike:
 *
 * - `none`: no sandbox (`--os-sandbox off`);
 * - `old`: the issue-22 sandbox, rebuilt here as it was: whole library directories and
 *   `/etc/localtime` mounted, the work directory bound from the host's disk, no seccomp filter,
 *   nested user namespaces allowed;
 * - `new`: the sandbox the host builds now (`resolveOsSandbox`): the seccomp filter through
 *   `/bin/sh` as fd 3, `--disable-userns`, only the files `ldd` names, a tmpfs work directory.
 *
 * `BENCH_ROUNDS` (default 60) samples per variant after 5 warm-up rounds; prints p50/p95 per
 * variant and one JSON line.
 *
 * @module
 */
import { buildRuntimeCommand } from "../host/runtime/runtime_command.ts";
import { resolveOsSandbox } from "../host/runtime/os_sandbox.ts";
import { SANDBOX_TMP_BYTES } from "../host/runtime/os_sandbox_command.ts";
import { hostTempParent, prepareRuntimeDirectory } from "../host/runtime/runtime_files.ts";

const ROUNDS = Number(Deno.env.get("BENCH_ROUNDS") ?? 60);
const WARMUP = 5;

const parent = hostTempParent();
Deno.mkdirSync(parent, { recursive: true, mode: 0o700 });
const runtimeDir = prepareRuntimeDirectory(parent);
const deno = Deno.realPathSync(Deno.execPath());
const resolved = await resolveOsSandbox("bwrap", deno, runtimeDir, parent);
const sandbox = resolved.sandbox!;

/** The issue-22 argv (before issue 27), for the `old` row. */
function oldSandboxArgv(workDir: string): string[] {
  const libraryDirs = [...new Set(sandbox.readOnly.slice(1).map((p) => p.slice(0, p.lastIndexOf("/"))))];
  const readOnly = [deno, ...libraryDirs, "/etc/localtime"].filter((p) => {
    try {
      Deno.statSync(p);
      return true;
    } catch {
      return false;
    }
  });
  return [
    sandbox.bwrap,
    ...["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"],
    ...["--hostname", "code-mode-runtime", "--size", String(SANDBOX_TMP_BYTES), "--tmpfs", "/tmp"],
    ...["--proc", "/proc", "--dev", "/dev"],
    ...readOnly.flatMap((p) => ["--ro-bind", p, p]),
    ...["--ro-bind", runtimeDir, runtimeDir, "--bind", workDir, workDir, "--chdir", workDir],
    ...["--remount-ro", "/", "--"],
  ];
}

type Variant = "none" | "old" | "new";

async function startOnce(variant: Variant): Promise<number> {
  const workDir = Deno.makeTempDirSync({ dir: parent, prefix: `w-${Deno.pid}-bench-` });
  Deno.mkdirSync(`${workDir}/deno_dir`, { mode: 0o700 });
  try {
    const command = buildRuntimeCommand({
      deno,
      runtimeDir,
      workDir,
      workerMainHeapMb: 0,
      sandbox: variant === "new" ? sandbox : undefined,
    });
    const argv = variant === "old"
      ? [...oldSandboxArgv(workDir), command.command, ...command.args]
      : [command.command, ...command.args];
    const started = performance.now();
    const child = new Deno.Command(argv[0], {
      args: argv.slice(1),
      env: command.env,
      clearEnv: true,
      cwd: command.cwd,
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const reader = child.stdout.getReader();
    const first = await reader.read();
    const elapsed = performance.now() - started;
    if (first.done) throw new Error(`${variant}: the runtime wrote nothing`);
    child.kill("SIGKILL");
    reader.releaseLock();
    await child.stdout.cancel();
    await child.stdin.abort().catch(() => {});
    await child.status;
    return elapsed;
  } finally {
    Deno.removeSync(workDir, { recursive: true });
  }
}

const variants: Variant[] = ["none", "old", "new"];
const samples: Record<Variant, number[]> = { none: [], old: [], new: [] };
for (let round = 0; round < WARMUP + ROUNDS; round++) {
  // Rotate the order each round: none of the three always goes first.
  for (let i = 0; i < variants.length; i++) {
    const variant = variants[(round + i) % variants.length];
    const ms = await startOnce(variant);
    if (round >= WARMUP) samples[variant].push(ms);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
Deno.removeSync(runtimeDir, { recursive: true });

const quantile = (xs: number[], q: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};
const labels: Record<Variant, string> = {
  none: "no sandbox (--os-sandbox off)",
  old: "issue-22 sandbox (library dirs, host work dir, no seccomp)",
  new: "issue-27 sandbox (seccomp, --disable-userns, ldd files, tmpfs work dir)",
};
const load = Deno.loadavg()[0].toFixed(2);
console.log(`runtime start until Ready, ${ROUNDS} rounds, load ${load}`);
console.log("| runtime start | p50 ms | p95 ms | vs none |");
console.log("| --- | ---: | ---: | ---: |");
const result: Record<string, { p50: number; p95: number }> = {};
for (const variant of variants) {
  const p50 = quantile(samples[variant], 0.5);
  const p95 = quantile(samples[variant], 0.95);
  result[variant] = { p50: Number(p50.toFixed(2)), p95: Number(p95.toFixed(2)) };
  const ratio = (p50 / quantile(samples.none, 0.5)).toFixed(2);
  console.log(`| ${labels[variant]} | ${p50.toFixed(2)} | ${p95.toFixed(2)} | ${ratio}× |`);
}
console.log(JSON.stringify({ bench: "sandbox_start", rounds: ROUNDS, load: Number(load), ...result }));

import assert from "node:assert/strict";
import { buildSandboxArgv, SANDBOX_TMP_BYTES, sandboxedSignal, SECCOMP_SHELL } from "./os_sandbox_command.ts";
import { buildRuntimeCommand } from "./runtime_command.ts";

const options = {
  bwrap: "/usr/bin/bwrap",
  readOnly: ["/opt/deno", "/lib/x86_64-linux-gnu", "/lib64", "/lib64/"],
  runtimeDir: "/tmp/code-mode-host/r-1-a/",
  workDir: "/tmp/code-mode-host/w-1-1-b",
};

/** The value after each occurrence of `flag`, as `[flag, a, b]` tuples for two-operand flags. */
function binds(argv: string[], flag: string): [string, string][] {
  const out: [string, string][] = [];
  argv.forEach((a, i) => a === flag && out.push([argv[i + 1], argv[i + 2]]));
  return out;
}

Deno.test("buildSandboxArgv(): new namespaces, no capabilities, dies with its parent, runtime as PID 1, new session", () => {
  const argv = buildSandboxArgv(options);
  assert.equal(argv[0], "/usr/bin/bwrap");
  for (const flag of ["--unshare-all", "--die-with-parent", "--as-pid-1", "--new-session"]) {
    assert.ok(argv.includes(flag), flag);
  }
  assert.ok(!argv.some((a) => a.startsWith("--share-net")), "the network stays unshared");
  assert.equal(argv[argv.indexOf("--cap-drop") + 1], "ALL");
  assert.equal(argv.at(-1), "--");
});

Deno.test("buildSandboxArgv(): the filesystem holds only Deno, its libraries, the runtime dir (read-only) and a tmpfs work dir", () => {
  const argv = buildSandboxArgv(options);
  assert.deepEqual(binds(argv, "--ro-bind"), [
    ["/opt/deno", "/opt/deno"],
    ["/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"],
    ["/lib64", "/lib64"],
    ["/tmp/code-mode-host/r-1-a", "/tmp/code-mode-host/r-1-a"],
  ]);
  assert.deepEqual(binds(argv, "--bind"), [], "nothing of the host is writable");
  // The work dir: a bounded tmpfs of its own (the host's directory does not show through).
  const work = argv.lastIndexOf("--tmpfs");
  assert.deepEqual(argv.slice(work - 4, work + 2), [
    "--size",
    String(SANDBOX_TMP_BYTES),
    "--perms",
    "0700",
    "--tmpfs",
    options.workDir,
  ]);
  assert.ok(work > argv.lastIndexOf("--ro-bind"), "mounted after the runtime dir");
  assert.equal(argv[argv.indexOf("--dir") + 1], `${options.workDir}/deno_dir`);
  assert.equal(argv[argv.indexOf("--chdir") + 1], options.workDir);
  // Private /tmp, /proc and /dev, mounted before the binds under /tmp; a read-only root last.
  assert.ok(argv.indexOf("--tmpfs") < argv.indexOf("--ro-bind"));
  assert.equal(argv[argv.indexOf("--tmpfs") + 1], "/tmp");
  assert.equal(argv[argv.indexOf("--tmpfs") - 2], "--size", "/tmp is bounded (its pages are in no RSS)");
  assert.equal(argv[argv.indexOf("--tmpfs") - 1], String(SANDBOX_TMP_BYTES));
  assert.equal(argv[argv.indexOf("--proc") + 1], "/proc");
  assert.equal(argv[argv.indexOf("--dev") + 1], "/dev");
  assert.deepEqual(argv.slice(-3), ["--remount-ro", "/", "--"]);
  assert.ok(!argv.some((a) => /^\/(home|etc|run|var)(\/|$)/.test(a)), "no /home, /etc, /run or /var");
  assert.ok(!argv.includes("--dev-bind") && !argv.includes("--bind-try"));
});

Deno.test("buildSandboxArgv(): a seccomp filter goes in as fd 3 through a shell that execs bwrap; --disable-userns with --unshare-user", () => {
  const plain = buildSandboxArgv(options);
  assert.ok(!plain.includes("--seccomp") && !plain.includes("--disable-userns"));
  const argv = buildSandboxArgv({ ...options, seccomp: "/rt/seccomp.bpf", disableUserns: true });
  assert.deepEqual(argv.slice(0, 5), [...SECCOMP_SHELL, "/rt/seccomp.bpf", "/usr/bin/bwrap"]);
  assert.equal(SECCOMP_SHELL.at(-1), 'exec "$@" 3<"$0"');
  assert.equal(argv[argv.indexOf("--seccomp") + 1], "3");
  assert.ok(argv.indexOf("--unshare-user") < argv.indexOf("--disable-userns"));
  assert.deepEqual(argv.slice(5).filter((a) => !plain.includes(a)), [
    "--unshare-user",
    "--disable-userns",
    "--seccomp",
    "3",
  ]);
});

Deno.test("buildRuntimeCommand() with a sandbox: prefix, then bwrap, then the unchanged SPEC §9.3 argv", () => {
  const plain = buildRuntimeCommand({
    deno: "/opt/deno",
    runtimeDir: "/rt",
    workDir: "/w",
    workerMainHeapMb: 0,
  });
  const boxed = buildRuntimeCommand({
    deno: "/opt/deno",
    prefix: ["nice", "-n", "5"],
    runtimeDir: "/rt",
    workDir: "/w",
    workerMainHeapMb: 0,
    sandbox: { bwrap: "/usr/bin/bwrap", readOnly: ["/opt/deno"] },
  });
  const argv = [boxed.command, ...boxed.args];
  assert.deepEqual(argv.slice(0, 4), ["nice", "-n", "5", "/usr/bin/bwrap"]);
  const deno = argv.indexOf("--") + 1;
  assert.deepEqual(argv.slice(deno), [plain.command, ...plain.args]);
  assert.deepEqual(boxed.env, plain.env);
  assert.equal(boxed.cwd, plain.cwd);
  assert.ok(argv.includes("--allow-read=/rt") && !argv.includes("--allow-all"));
});

Deno.test("sandboxedSignal(): bubblewrap's 128 + N exit is the signal N", () => {
  assert.equal(sandboxedSignal(137, null), "SIGKILL");
  assert.equal(sandboxedSignal(133, null), "SIGTRAP");
  assert.equal(sandboxedSignal(143, null), "SIGTERM");
  assert.equal(sandboxedSignal(0, null), null);
  assert.equal(sandboxedSignal(128, null), null);
  assert.equal(sandboxedSignal(200, null), null);
  assert.equal(sandboxedSignal(null, "SIGKILL"), "SIGKILL");
});

/**
 * Fault: the OS sandbox, tightened (issue 27, item 5), on a real host with real runtimes inside
 * bubblewrap. The cells here run on a stand-in for a Deno permission bug plus a JavaScript escape
 * (`_escape_runtime.ts`: every Deno permission, `Deno` in the cell's globals), so whatever they
 * still cannot do, only the sandbox refuses:
 *
 * - the system calls of an escape get `EPERM` from the seccomp filter, made through libc's
 *   `syscall()` over Deno's FFI with arguments that the kernel would answer otherwise (success,
 *   `ESRCH`, `EFAULT`, `EINVAL`, `EBADF`): a new user namespace (`clone(CLONE_NEWUSER)`, which
 *   works in a multi-threaded process), `ptrace`, `mount`, `umount2`, `keyctl`, `bpf`, `setns`,
 *   `perf_event_open`;
 * - the work directory is a tmpfs of 16 MiB: a cell filling it gets "No space left on device"
 *   before 17 MiB, and nothing reaches the host's directory;
 * - cells see UTC (`TZ=UTC`, no `/etc/localtime`) even with `TZ` set to another zone in the host;
 * - the libraries mounted are the files `ldd` names for Deno, not their directories;
 * - and a plain host (Deno's own permissions) still runs cells in Workers, and still refuses
 *   `fetch`.
 *
 * Skipped, with the reason logged, where bubblewrap is missing or cannot make namespaces.
 */
import assert from "node:assert/strict";
import { CapturedLog, openSession, run, startHost } from "../_harness.ts";
import { escapeOptions } from "../_escape_runtime.ts";

const MIB = 1024 * 1024;

/** Why the sandbox cannot be tested here, or undefined. */
const SKIP = (() => {
  try {
    const out = new Deno.Command("bwrap", {
      args: ["--unshare-all", "--ro-bind", "/", "/", "true"],
      stdout: "null",
      stderr: "piped",
    }).outputSync();
    if (out.success) return undefined;
    return `bubblewrap cannot make namespaces here: ${new TextDecoder().decode(out.stderr).trim()}`;
  } catch (error) {
    return `bubblewrap is not installed (${error})`;
  }
})();
if (SKIP) console.error(`sandbox_hardening: skipped: ${SKIP}`);

/** The libraries `ldd` names for this Deno: `{ path, name }`. */
function lddLibraries(): string[] {
  const out = new Deno.Command("ldd", { args: [Deno.realPathSync(Deno.execPath())], stdout: "piped" })
    .outputSync();
  return [...new TextDecoder().decode(out.stdout).matchAll(/(?:^|=>)\s*(\/\S+)\s+\(0x/gm)].map((m) => m[1]);
}

/** A cell of the escape runtime that makes the system calls through libc and reports each result. */
const SYSCALLS = `
  const D = globalThis.Deno;
  const libc = D.dlopen("libc.so.6", {
    syscall: { parameters: ["i64", "i64", "i64", "i64", "i64", "i64"], result: "i64" },
    __errno_location: { parameters: [], result: "pointer" },
  });
  const errno = () => new D.UnsafePointerView(libc.symbols.__errno_location()).getInt32();
  const N = D.build.arch === "x86_64"
    ? { clone: 56, exit_group: 231, wait4: 61, ptrace: 101, mount: 165, umount2: 166, keyctl: 250, bpf: 321, setns: 308, perf: 298 }
    : { clone: 220, exit_group: 94, wait4: 260, ptrace: 117, mount: 40, umount2: 39, keyctl: 219, bpf: 280, setns: 268, perf: 241 };
  const raw = (nr, ...args) => libc.symbols.syscall(BigInt(nr), ...[...args.map(BigInt), 0n, 0n, 0n, 0n, 0n].slice(0, 5));
  const call = (nr, ...args) => { const r = raw(nr, ...args); return r === -1n ? "errno " + errno() : "ok"; };
  const userns = (() => {
    // fork() into a new user namespace (CLONE_NEWUSER | SIGCHLD): the child leaves at once.
    const pid = raw(N.clone, 0x10000000 | 17);
    if (pid === 0n) raw(N.exit_group, 0);
    if (pid === -1n) return "errno " + errno();
    raw(N.wait4, pid, 0, 0, 0);
    return "ok";
  })();
  text(JSON.stringify({
    userns,
    ptrace: call(N.ptrace, 16, 999999999), // PTRACE_ATTACH to no such pid: ESRCH
    mount: call(N.mount, 0, 0, 0, 0, 0), // a NULL target: EFAULT
    umount2: call(N.umount2, 0, 0xffffffff), // unknown flags: EINVAL
    keyctl: call(N.keyctl, 0, -3, 0), // KEYCTL_GET_KEYRING_ID of the session keyring: ok
    bpf: call(N.bpf, 0, 0, 0), // BPF_MAP_CREATE with no attributes: EINVAL
    setns: call(N.setns, -1, 0), // a bad descriptor: EBADF
    perf_event_open: call(N.perf, 0, 0, -1, -1, 0), // no attributes: EFAULT
  }));
`;

Deno.test({
  name:
    "fault: a cell past Deno's permissions gets EPERM for a user namespace, ptrace, mount, keyctl, bpf, setns",
  ignore: SKIP !== undefined,
  fn: async () => {
    await using h = await startHost({
      warmSessions: 0,
      osSandbox: "bwrap",
      ...escapeOptions(new CapturedLog()),
    });
    await using s = await openSession(h.client);
    const { texts, error } = await run(h.client, s.id, SYSCALLS);
    assert.equal(error, undefined);
    const EPERM = "errno 1";
    assert.deepEqual(JSON.parse(texts[0]), {
      userns: EPERM,
      ptrace: EPERM,
      mount: EPERM,
      umount2: EPERM,
      keyctl: EPERM,
      bpf: EPERM,
      setns: EPERM,
      perf_event_open: EPERM,
    });
    // The runtime is still whole: its next cell runs.
    assert.deepEqual((await run(h.client, s.id, "text(2 + 2)")).texts, ["4"]);
  },
});

Deno.test({
  name:
    "fault: the work directory is a 16 MiB tmpfs (a cell filling it gets ENOSPC, the host's disk gets nothing); cells see UTC; only Deno's libraries are mounted",
  ignore: SKIP !== undefined,
  fn: async () => {
    const hostTz = Deno.env.get("TZ");
    Deno.env.set("TZ", "Asia/Tokyo");
    try {
      await using h = await startHost({
        warmSessions: 0,
        osSandbox: "bwrap",
        ...escapeOptions(new CapturedLog()),
      });
      await using s = await openSession(h.client);
      const pid = h.host.state.session(s.id)!.runtimePid!;
      const cwd = Deno.readLinkSync(`/proc/${pid}/cwd`);
      const libraries = lddLibraries();
      const dirs = [...new Set(libraries.map((p) => p.slice(0, p.lastIndexOf("/"))))];
      const { texts, error } = await run(
        h.client,
        s.id,
        `const D = globalThis.Deno;
         const fill = (path) => {
           const chunk = new Uint8Array(${MIB}).fill(7);
           let written = 0;
           try {
             const file = D.openSync(path, { write: true, create: true });
             try { while (written < ${24 * MIB}) written += file.writeSync(chunk); } finally { file.close(); }
             return { written, error: null };
           } catch (e) { return { written, error: String(e.message).split(":")[0] }; }
         };
         const exists = (p) => { try { D.statSync(p); return true; } catch { return false; } };
         text(JSON.stringify({
           work: fill(D.cwd() + "/fill"),
           tmp: fill("/tmp/fill"),
           tz: D.env.get("TZ") ?? null,
           localtime: exists("/etc/localtime"),
           offset: new Date(2026, 6, 1, 12).getTimezoneOffset(),
           zone: Intl.DateTimeFormat().resolvedOptions().timeZone,
           dirs: Object.fromEntries(${
          JSON.stringify(dirs)
        }.map((d) => [d, [...D.readDirSync(d)].map((e) => e.name).sort()])),
         }));`,
      );
      assert.equal(error, undefined);
      const seen = JSON.parse(texts[0]);
      const ENOSPC = "No space left on device (os error 28)";
      // Each library directory shows only the files of ldd's list (and the folders on the way).
      const stray = Object.fromEntries(dirs.map((dir) => {
        const want = libraries.filter((p) => p.startsWith(`${dir}/`)).map((p) => p.slice(dir.length + 1));
        const names: string[] = seen.dirs[dir];
        return [dir, names.filter((name) => !want.includes(name) && !dirs.includes(`${dir}/${name}`)).length];
      }));
      // One comparison, so that a failure shows every difference at once.
      assert.deepEqual({
        work: {
          error: seen.work.error,
          bounded: seen.work.written <= 16 * MIB && seen.work.written >= 12 * MIB,
        },
        tmp: { error: seen.tmp.error, bounded: seen.tmp.written <= 16 * MIB },
        onHostDisk: [...Deno.readDirSync(cwd)].map((e) => e.name).filter((n) => n !== "deno_dir"),
        tz: seen.tz,
        localtime: seen.localtime,
        offset: seen.offset,
        zone: seen.zone,
        stray,
      }, {
        work: { error: ENOSPC, bounded: true },
        tmp: { error: ENOSPC, bounded: true },
        onHostDisk: [],
        tz: "UTC",
        localtime: false,
        offset: 0,
        zone: "UTC",
        stray: Object.fromEntries(dirs.map((dir) => [dir, 0])),
      });
    } finally {
      if (hostTz === undefined) Deno.env.delete("TZ");
      else Deno.env.set("TZ", hostTz);
    }
  },
});

Deno.test({
  name:
    "fault: with the tighter sandbox a plain host still runs cells in Workers, stores values and refuses fetch",
  ignore: SKIP !== undefined,
  fn: async () => {
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    try {
      await using h = await startHost({ warmSessions: 1, osSandbox: "bwrap" });
      assert.ok(
        h.log.lines.some((l) => String(l.msg).startsWith("OS sandbox: bubblewrap ") && l.seccomp === true),
      );
      await using s = await openSession(h.client);
      const first = await run(h.client, s.id, 'store("k", [1, 2]); text(new Date(0).toString())');
      assert.deepEqual(first.texts, ["Thu Jan 01 1970 00:00:00 GMT+0000 (Coordinated Universal Time)"]);
      const second = await run(
        h.client,
        s.id,
        `try { await fetch("http://127.0.0.1:${listener.addr.port}/"); text("fetched"); }
         catch (e) { text(e.name); }
         text(JSON.stringify(load("k")));`,
      );
      assert.equal(second.error, undefined);
      assert.notEqual(second.texts[0], "fetched");
      assert.deepEqual(second.texts.slice(1), ["[1,2]"]);
    } finally {
      listener.close();
    }
  },
});

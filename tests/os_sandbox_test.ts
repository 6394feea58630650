/**
 * The OS sandbox (`--os-sandbox`, issue 22): both layers hold. With a runtime factory that
 * grants the runtime every Deno permission, and a cell bootstrap patched to leave `Deno` in the
 * cell's global scope (a stand-in for a Deno permission bug plus a JavaScript escape), a cell still
 * cannot reach a TCP port the test listens on, read a file the test placed outside the runtime
 * directory, see the host's processes, write outside its private directory or reach a host Unix
 * socket. With `--os-sandbox off` each of those succeeds, so the test cannot pass vacuously. From
 * outside: a runtime's network, PID and mount namespaces differ from the host's, and no runtime
 * survives the host's SIGKILL.
 */
import assert from "node:assert/strict";
import { HAVE_BWRAP } from "./_procs.ts";
import {
  CapturedLog,
  eventually,
  openSession,
  processExists,
  rawClient,
  run,
  serve,
  startHost,
  type TestHostOptions,
} from "./_harness.ts";
import { escapeOptions, EVERY_PERMISSION } from "./_escape_runtime.ts";
import { processTree } from "../host/runtime/memory_watchdog.ts";

/** The five probes, run from inside a cell; each reports "ok" or the error's name. */
function probeSource(
  p: { port: number; file: string; hostPid: number; out: string; socket: string },
): string {
  return `
    const D = globalThis.Deno;
    // A Deno op's promise settles in the Worker's realm; the cell's continuation then waits for
    // the next entry into its context, which this timer chain provides.
    let pumping = true;
    const pump = () => { if (pumping) setTimeout(pump, 5); };
    pump();
    const probe = async (f) => { try { await f(); return "ok"; } catch (e) { return e?.name ?? String(e); } };
    const results = {
      tcp: await probe(async () => (await D.connect({ hostname: "127.0.0.1", port: ${p.port} })).close()),
      read: await probe(async () => { if ((await D.readTextFile(${
    JSON.stringify(p.file)
  })) !== "secret") throw new Error("wrong"); }),
      processes: await probe(async () => {
        for await (const e of D.readDir("/proc")) if (e.name === "${p.hostPid}") return;
        throw new Error("HostProcessNotListed");
      }),
      write: await probe(() => D.writeTextFile(${JSON.stringify(p.out)}, "written")),
      unix: await probe(async () => (await D.connect({ transport: "unix", path: ${
    JSON.stringify(p.socket)
  } })).close()),
    };
    pumping = false;
    text(JSON.stringify(results));
  `;
}

async function probeWith(osSandbox: "bwrap" | "off") {
  const dir = await Deno.makeTempDir({ prefix: "cmh-outside-" });
  const tcp = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const unix = Deno.listen({ transport: "unix", path: `${dir}/host.sock` });
  try {
    await Deno.writeTextFile(`${dir}/secret.txt`, "secret");
    // Every runtime this host starts runs with every Deno permission (and says so in the host's log).
    const options: TestHostOptions = { warmSessions: 1, osSandbox, ...escapeOptions(new CapturedLog()) };
    await using h = await startHost(options);
    await using s = await openSession(h.client);
    const { texts, error } = await run(
      h.client,
      s.id,
      probeSource({
        port: tcp.addr.port,
        file: `${dir}/secret.txt`,
        hostPid: Deno.pid,
        out: `${dir}/written.txt`,
        socket: `${dir}/host.sock`,
      }),
    );
    assert.equal(error, undefined);
    const written = await Deno.readTextFile(`${dir}/written.txt`).catch(() => undefined);
    return { results: JSON.parse(texts[0]), written, log: h.log.lines };
  } finally {
    tcp.close();
    unix.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name:
    "Every Deno permission granted: the OS sandbox still refuses TCP, outside files, host processes, outside writes and host sockets",
  ignore: !HAVE_BWRAP,
  fn: async () => {
    const { results, written, log } = await probeWith("bwrap");
    assert.ok(log.some((l) => l.msg === EVERY_PERMISSION));
    assert.ok(log.some((l) => String(l.msg).startsWith("OS sandbox: bubblewrap ")));
    assert.deepEqual(results, {
      tcp: "ConnectionRefused",
      read: "NotFound",
      processes: "Error",
      write: "NotFound",
      unix: "NotFound",
    });
    assert.equal(written, undefined, "nothing was written outside");
  },
});

Deno.test("The same probes with --os-sandbox off all succeed (the sandbox test is not vacuous)", async () => {
  const { results, written, log } = await probeWith("off");
  assert.ok(log.some((l) => l.msg === "OS sandbox: off (--os-sandbox off)"));
  assert.deepEqual(results, { tcp: "ok", read: "ok", processes: "ok", write: "ok", unix: "ok" });
  assert.equal(written, "written");
});

function namespace(pid: number | "self", kind: string): string {
  return Deno.readLinkSync(`/proc/${pid}/ns/${kind}`);
}

Deno.test({
  name: "A sandboxed runtime's network, PID and mount namespaces differ from the host's",
  ignore: !HAVE_BWRAP,
  fn: async () => {
    await using h = await startHost({ warmSessions: 1, osSandbox: "bwrap" });
    await using s = await openSession(h.client);
    const pid = h.host.state.session(s.id)!.runtimePid!;
    assert.match(Deno.readTextFileSync(`/proc/${pid}/cmdline`), /runtime\.js/, "the pid is the Deno runtime");
    for (const kind of ["net", "pid", "mnt", "ipc", "uts"]) {
      assert.notEqual(namespace(pid, kind), namespace("self", kind), kind);
    }
    assert.deepEqual((await run(h.client, s.id, "text(1)")).texts, ["1"]);
  },
});

function status(pid: number): Record<string, string> {
  const lines = Deno.readTextFileSync(`/proc/${pid}/status`).split("\n");
  return Object.fromEntries(lines.map((l) => l.split(/:\s*/, 2)).filter((kv) => kv.length === 2));
}

Deno.test({
  name:
    "A sandboxed runtime is one process under one bubblewrap: host → bwrap → deno, PID 1 of its namespace",
  ignore: !HAVE_BWRAP,
  fn: async () => {
    await using h = await startHost({ warmSessions: 1, osSandbox: "bwrap" });
    await using s = await openSession(h.client);
    const pid = h.host.state.session(s.id)!.runtimePid!;
    const bwrap = Number(status(pid).PPid);
    assert.match(Deno.readTextFileSync(`/proc/${bwrap}/cmdline`).split("\0")[0], /bwrap$/);
    assert.equal(Number(status(bwrap).PPid), Deno.pid, "bubblewrap is the host's own child");
    assert.deepEqual(processTree(bwrap), [bwrap, pid], "nothing else under bubblewrap");
    assert.equal(status(pid).NSpid.split(/\s+/).at(-1), "1", "the runtime is PID 1 inside");
    assert.deepEqual((await run(h.client, s.id, "text(1)")).texts, ["1"]);
  },
});

Deno.test({
  name: "--os-sandbox off: a runtime shares the host's namespaces",
  fn: async () => {
    await using h = await startHost({ warmSessions: 1, osSandbox: "off" });
    await using s = await openSession(h.client);
    const pid = h.host.state.session(s.id)!.runtimePid!;
    for (const kind of ["net", "pid", "mnt"]) {
      assert.equal(namespace(pid, kind), namespace("self", kind), kind);
    }
  },
});

Deno.test({
  name: "No sandboxed runtime survives the host's SIGKILL (--die-with-parent)",
  ignore: !HAVE_BWRAP,
  fn: async () => {
    await using host = await serve([
      "--listen",
      "grpc://127.0.0.1:0",
      "--os-sandbox",
      "bwrap",
      "--warm-sessions",
      "2",
    ]);
    using raw = rawClient(host.url);
    const s = await openSession(raw.client);
    assert.deepEqual((await run(raw.client, s.id, "text(1)")).texts, ["1"]);
    const hostPid = processTree(host.child.pid).find((pid) => {
      try {
        return Deno.readTextFileSync(`/proc/${pid}/cmdline`).includes("cli/main.ts");
      } catch {
        return false;
      }
    })!;
    assert.ok(hostPid !== undefined, "found the host process");
    let runtimes: number[] = [];
    assert.ok(await eventually(() => (runtimes = processTree(hostPid).slice(1)).length >= 6, 10_000));
    // Three runtimes (one session, two warm), each bwrap → deno.
    Deno.kill(hostPid, "SIGKILL");
    assert.ok(
      await eventually(() => runtimes.every((pid) => !processExists(pid)), 5_000),
      `still alive: ${runtimes.filter(processExists)}`,
    );
    s.cancel();
  },
});

Deno.test("auto falls back with one warning when bubblewrap is installed but does not work; bwrap refuses to start", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cmh-fake-bwrap-" });
  await Deno.writeTextFile(
    `${dir}/bwrap`,
    "#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n",
    { mode: 0o755 },
  );
  const path = Deno.env.get("PATH") ?? "";
  Deno.env.set("PATH", `${dir}:${path}`);
  try {
    await using h = await startHost({ warmSessions: 1, osSandbox: "auto" });
    const warnings = h.log.lines.filter((l) => l.level === "warn" && String(l.msg).startsWith("OS sandbox"));
    assert.deepEqual(warnings.map((l) => l.msg), [
      "OS sandbox: off, runtimes are walled by Deno's permissions alone: bubblewrap does not work here " +
      "(exit 1: bwrap: No permissions to create a new namespace)",
    ]);
    await using s = await openSession(h.client);
    assert.deepEqual((await run(h.client, s.id, "text(1)")).texts, ["1"]);
    const pid = h.host.state.session(s.id)!.runtimePid!;
    assert.equal(namespace(pid, "net"), namespace("self", "net"), "no sandbox");
    await assert.rejects(
      startHost({ warmSessions: 0, osSandbox: "bwrap" }),
      /^Error: --os-sandbox bwrap: bubblewrap does not work here \(exit 1: bwrap: No permissions/,
    );
  } finally {
    Deno.env.set("PATH", path);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "A bubblewrap without --disable-userns: the host warns once and keeps the seccomp filter",
  ignore: !HAVE_BWRAP,
  fn: async () => {
    const real = new TextDecoder().decode(
      new Deno.Command("sh", { args: ["-c", "command -v bwrap"], stdout: "piped" }).outputSync().stdout,
    ).trim();
    const dir = await Deno.makeTempDir({ prefix: "cmh-old-bwrap-" });
    await Deno.writeTextFile(
      `${dir}/bwrap`,
      `#!/bin/sh\nfor a; do [ "$a" = --disable-userns ] && { echo 'bwrap: Unknown option --disable-userns' >&2; exit 1; }; done\nexec ${real} "$@"\n`,
      { mode: 0o755 },
    );
    const path = Deno.env.get("PATH") ?? "";
    Deno.env.set("PATH", `${dir}:${path}`);
    try {
      await using h = await startHost({ warmSessions: 0, osSandbox: "bwrap" });
      const lines = h.log.lines.filter((l) => String(l.msg).startsWith("OS sandbox"));
      assert.deepEqual(lines.filter((l) => l.level === "warn").map((l) => l.msg), [
        "OS sandbox: bubblewrap cannot --disable-userns (0.8 and later can) " +
        "(exit 1: bwrap: Unknown option --disable-userns)",
      ]);
      const info = lines.find((l) => l.level === "info")!;
      assert.deepEqual([info.seccomp, info.nestedUserNamespaces], [true, true]);
      await using s = await openSession(h.client);
      assert.deepEqual((await run(h.client, s.id, "text(1)")).texts, ["1"]);
    } finally {
      Deno.env.set("PATH", path);
      await Deno.remove(dir, { recursive: true });
    }
  },
});

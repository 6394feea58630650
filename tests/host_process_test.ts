/**
 * The host process: CLI, endpoint line, logging, health, graceful shutdown and no orphaned
 * runtimes (SPEC §9, scenarios 105–108, 111, 114a, 114c–114g).
 */
import assert from "node:assert/strict";
import { Status } from "nice-grpc";
import { createChannel, createClient } from "nice-grpc";
import { HealthDefinition } from "nice-grpc-server-health";
import { removeStaleDirectories } from "../host/runtime/runtime_files.ts";
import { descendants } from "./_v1_helpers.ts";
import {
  CapturedLog,
  collect,
  eventually,
  execute,
  grpcError,
  openSession,
  processExists,
  rawClient,
  run,
  serve,
  SPIN,
  startHost,
} from "./_harness.ts";

/** The runtime (Deno) processes under a host; an OS sandbox's bubblewrap processes are not runtimes. */
function runtimePids(hostPid: number): number[] {
  return descendants(hostPid).filter((pid) => {
    try {
      const cmdline = Deno.readTextFileSync(`/proc/${pid}/cmdline`);
      return cmdline.includes("runtime.js") && !/(^|\/)bwrap$/.test(cmdline.split("\0")[0]);
    } catch {
      return false;
    }
  });
}

Deno.test("deno task serve prints exactly one endpoint line and serves sessions (scenario 105)", async () => {
  await using host = await serve(["--listen", "grpc://127.0.0.1:0"]);
  assert.match(host.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  using raw = rawClient(host.url);
  await using s = await openSession(raw.client);
  assert.deepEqual((await run(raw.client, s.id, 'text("hello")')).texts, ["hello"]);
  const listening = host.stderr().split("\n").filter(Boolean).map((l) => JSON.parse(l));
  assert.ok(listening.some((l) => l.msg === `code-mode-host listening on ${host.url}` && l.level === "info"));
  assert.equal(host.stdoutLines.length, 1);
});

Deno.test("Bad --listen values fail with exit code 2 and the SPEC message (scenarios 106, 114a, 114c)", async (t) => {
  const cases: [string[], string][] = [
    [["--listen", "grpc://localhost:9000"], "expected `grpc://IP:PORT`"],
    [["--listen", "http://127.0.0.1:1"], "unsupported --listen URL"],
    [
      ["--listen", "grpc://0.0.0.0:0"],
      "refusing to listen on non-loopback address `0.0.0.0:0` without --allow-non-loopback",
    ],
    [["--listen", "unix:"], "invalid Unix --listen URL `unix:` (the socket path is empty)"],
    [["--tls-cert", "x.pem"], "--tls-cert and --tls-key must be given together"],
  ];
  for (const [args, message] of cases) {
    await t.step(args.join(" "), async () => {
      await using host = await serve(args, { expectFailure: true });
      const status = await host.exited();
      assert.equal(status.code, 2);
      assert.ok(host.stderr().includes(message), host.stderr());
      assert.equal(host.stdoutLines.length, 0);
    });
  }
  await t.step("--allow-non-loopback lets 0.0.0.0 start", async () => {
    await using host = await serve([
      "--listen",
      "grpc://0.0.0.0:0",
      "--allow-non-loopback",
      "--warm-sessions",
      "0",
    ]);
    assert.match(host.url, /^http:\/\/0\.0\.0\.0:\d+$/);
  });
});

Deno.test("SIGTERM drains: leases end UNAVAILABLE, health turns NOT_SERVING, exit 0, no runtime left (scenarios 107, 108)", async () => {
  const host = await serve(["--listen", "grpc://127.0.0.1:0"]);
  const address = host.url.replace("http://", "");
  using raw = rawClient(host.url);
  const healthChannel = createChannel(address);
  const health = createClient(HealthDefinition, healthChannel);
  try {
    assert.equal((await health.check({ service: "codex.code_mode.v1.CodeModeHost" })).status, 1);
    const a = await openSession(raw.client);
    const b = await openSession(raw.client);
    a.pump();
    b.pump();
    // The yield returns the Execute as the loop starts.
    const spinning = await execute(raw.client, a.id, SPIN, {
      yieldTimeMs: 60_000,
    });
    assert.ok(spinning.outcome.yielded);
    await execute(raw.client, b.id, "await new Promise(() => {})", { yieldTimeMs: 1 });
    await eventually(() => runtimePids(host.child.pid).length >= 2, 5_000);
    const watch = health.watch({ service: "codex.code_mode.v1.CodeModeHost" })[Symbol.asyncIterator]();
    assert.equal((await watch.next()).value?.status, 1);
    const started = performance.now();
    host.child.kill("SIGTERM");
    assert.equal((await watch.next()).value?.status, 2, "NOT_SERVING once draining");
    const status = await host.child.status;
    assert.equal(status.code, 0);
    assert.ok(performance.now() - started < 11_000);
    for (const s of [a, b]) {
      const end = await s.end;
      assert.equal(end?.code, Status.UNAVAILABLE);
      assert.equal(end?.details, "code-mode host is shutting down");
    }
    assert.deepEqual(runtimePids(host.child.pid), []);
  } finally {
    healthChannel.close();
    await host[Symbol.asyncDispose]();
  }
});

Deno.test("No runtime survives the host: SIGINT, and SIGKILL of the host while a cell spins (scenario 111)", async (t) => {
  for (const signal of ["SIGINT", "SIGKILL"] as const) {
    await t.step(signal, async () => {
      const host = await serve(["--listen", "grpc://127.0.0.1:0", "--warm-sessions", "1"]);
      using raw = rawClient(host.url);
      const s = await openSession(raw.client);
      s.pump();
      await execute(raw.client, s.id, SPIN, { yieldTimeMs: 60_000 });
      let pids: number[] = [];
      await eventually(
        () =>
          (pids = descendants(host.child.pid).filter((p) => runtimePids(host.child.pid).includes(p)))
            .length >= 2,
        5_000,
      );
      assert.ok(pids.length >= 2, "a session runtime and a warm runtime run");
      // deno task runs the host as its child: signal the host process itself.
      const hostPid = descendants(host.child.pid).find((p) =>
        Deno.readTextFileSync(`/proc/${p}/cmdline`).includes("cli/main.ts")
      )!;
      Deno.kill(hostPid, signal);
      assert.ok(
        await eventually(() => pids.every((p) => !processExists(p)), signal === "SIGKILL" ? 3_000 : 12_000),
        `left: ${pids.filter(processExists)}`,
      );
      await host[Symbol.asyncDispose]();
    });
  }
});

Deno.test("Logs never carry session IDs above debug; debug 'session opened' pairs ID and ref (scenario 114d)", async () => {
  {
    const log = new CapturedLog("info");
    await using h = await startHost({ log });
    const s = await openSession(h.client);
    s.pump();
    const pid = h.host.state.session(s.id)!.runtimePid!;
    Deno.kill(pid, "SIGKILL");
    const end = await s.end;
    assert.equal(end?.code, Status.INTERNAL);
    assert.ok(
      end?.details.startsWith(
        "code-mode V8 runtime thread ended unexpectedly: worker process killed by signal SIGKILL",
      ),
    );
    const failed = log.lines.find((l) => String(l.msg).startsWith("code-mode host session failed: "));
    assert.ok(failed, "crash logged");
    assert.equal(failed.level, "error");
    assert.equal(typeof failed.session_ref, "number");
    assert.equal(failed.signal, "SIGKILL");
    assert.ok(!JSON.stringify(log.lines).includes(s.id));
    assert.deepEqual(await grpcError(execute(h.client, s.id, "text(1)")), {
      code: Status.NOT_FOUND,
      details: `unknown code-mode session ${s.id}`,
    });
    assert.ok(await eventually(() => !processExists(pid)));
  }
  {
    const log = new CapturedLog("debug");
    await using h = await startHost({ log });
    await using s = await openSession(h.client);
    const opened = log.lines.find((l) => l.msg === "session opened");
    assert.equal(opened?.session_id, s.id);
    assert.equal(typeof opened?.session_ref, "number");
  }
});

Deno.test("A runtime reporting another protocol version is refused and reaped (scenario 114e)", async () => {
  await using h = await startHost({ protocolVersion: 999, warmSessions: 0 });
  const { code, details } = await grpcError(collect(h.client.openSession({})));
  assert.equal(code, Status.INTERNAL);
  assert.ok(details.startsWith("code-mode session runtime version mismatch: "), details);
  assert.ok(await eventually(() => h.host.state.runtimeCount === 0));
});

Deno.test("Cell source never lands in DENO_DIR, and the work dir is removed after close (scenario 114f)", async () => {
  await using h = await startHost();
  const s = await openSession(h.client);
  const marker = `marker-${crypto.randomUUID()}`;
  const pid = h.host.state.session(s.id)!.runtimePid!;
  const cwd = Deno.readLinkSync(`/proc/${pid}/cwd`);
  await run(
    h.client,
    s.id,
    `text(${JSON.stringify(marker)}); const f = () => ${JSON.stringify(marker)}; f()`,
  );
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const e of Deno.readDirSync(dir)) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory) walk(path);
      else if (e.isFile) files.push(path);
    }
  };
  walk(cwd);
  for (const file of files) {
    assert.ok(!new TextDecoder().decode(Deno.readFileSync(file)).includes(marker), file);
  }
  await h.client.closeSession({ sessionId: s.id });
  assert.ok(
    await eventually(() => {
      try {
        Deno.statSync(cwd);
        return false;
      } catch {
        return true;
      }
    }),
  );
});

Deno.test("Leftover directories of dead hosts are removed at start-up (scenario 114g)", async () => {
  const parent = await Deno.makeTempDir({ prefix: "cmh-parent-" });
  try {
    // A pid far above pid_max cannot be running.
    Deno.mkdirSync(`${parent}/w-99999999-1/deno_dir`, { recursive: true });
    Deno.mkdirSync(`${parent}/w-${Deno.pid}-1`, { recursive: true });
    assert.deepEqual(removeStaleDirectories(parent), ["w-99999999-1"]);
    assert.ok(Deno.statSync(`${parent}/w-${Deno.pid}-1`).isDirectory);
  } finally {
    await Deno.remove(parent, { recursive: true });
  }
});

Deno.test("Server reflection lists the code-mode and health services (SPEC §9.2)", async () => {
  const { ServerReflectionService } = await import("nice-grpc-server-reflection");
  const pb = await import("nice-grpc-server-reflection/lib/proto/grpc/reflection/v1/reflection_pb.js");
  await using h = await startHost({ warmSessions: 0 });
  const channel = createChannel(h.address);
  try {
    const client = createClient(ServerReflectionService, channel);
    const requests = async function* () {
      yield new (pb.default ?? pb).ServerReflectionRequest().setListServices("*");
    };
    const names: string[] = [];
    for await (const response of client.serverReflectionInfo(requests())) {
      for (const service of response.getListServicesResponse()?.getServiceList() ?? []) {
        names.push(service.getName());
      }
    }
    assert.ok(names.includes("codex.code_mode.v1.CodeModeHost"), String(names));
    assert.ok(names.includes("grpc.health.v1.Health"), String(names));
  } finally {
    channel.close();
  }
});

Deno.test("Runtimes use --deno PATH and the private runtime directory (the compiled-executable path)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cmh-deno-" });
  const denoPath = `${dir}/my-deno`;
  await Deno.symlink(Deno.execPath(), denoPath);
  try {
    await using host = await serve([
      "--listen",
      "grpc://127.0.0.1:0",
      "--deno",
      denoPath,
      "--warm-sessions",
      "1",
    ]);
    using raw = rawClient(host.url);
    await using s = await openSession(raw.client);
    assert.deepEqual((await run(raw.client, s.id, 'text("self-spawn")')).texts, ["self-spawn"]);
    const argv = runtimePids(host.child.pid).map((pid) =>
      Deno.readTextFileSync(`/proc/${pid}/cmdline`).split("\0").filter(Boolean)
    );
    assert.ok(argv.length >= 1);
    for (const args of argv) {
      // Inside the OS sandbox the binary runs at its real path (the one mounted).
      assert.ok([denoPath, Deno.realPathSync(denoPath)].includes(args[0]), args[0]);
      const entry = args.at(-1)!;
      assert.match(entry, /\/code-mode-host\/r-\d+-[^/]+\/runtime\.js$/);
      assert.ok(!entry.startsWith(new URL("..", import.meta.url).pathname), "not read from the source tree");
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("A client that cancels its streams and closes its channel (GOAWAY) does not take the host down (denoland/deno#36788, http2_guard.ts)", async () => {
  // At debug level the GOAWAY guard logs each GOAWAY it keeps from nghttp2: the event each round waits for.
  await using host = await serve(["--listen", "grpc://127.0.0.1:0", "--log-level", "debug"]);
  let exited: Deno.CommandStatus | undefined;
  host.child.status.then((status) => exited = status);
  const goaways = () => host.stderr().split("a client's GOAWAY was not passed to nghttp2").length - 1;
  for (let round = 0; round < 3; round++) {
    const client = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-all", new URL("./_goaway_client.ts", import.meta.url).pathname, host.url],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(
      new TextDecoder().decode(client.stdout).trim(),
      "closed",
      new TextDecoder().decode(client.stderr),
    );
    // The host has read this round's GOAWAY (a host that died of it never logs it: bounded). Nothing
    // reports it but the log, so this polls.
    await eventually(() => goaways() > round || exited !== undefined, 5_000);
    assert.equal(exited, undefined, `the host died in round ${round}: ${host.stderr().slice(-400)}`);
  }
  // It still serves: a new connection opens a session and runs a cell.
  using raw = rawClient(host.url);
  await using s = await openSession(raw.client);
  assert.deepEqual((await run(raw.client, s.id, 'text("still here")')).texts, ["still here"]);
});

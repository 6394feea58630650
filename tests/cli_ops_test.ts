/**
 * Issue 19 parts 3–4: the CLI's messages for an invalid certificate or key, a port in use, a
 * negative `--warm-sessions` and a bad `--metrics-listen`; relative paths resolved against the
 * caller's directory; and every stderr line of a host run (debug logging, a workload, a crash)
 * parsing as JSON, with one line per RPC and the crash's exit code, signal and stderr tail.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createChannel, createClient, Metadata } from "nice-grpc";
import { HealthDefinition } from "nice-grpc-server-health";
import { eventually, type Msg, openSession, rawClient, run, selfSigned, serve } from "./_harness.ts";
import { descendants } from "./_v1_helpers.ts";
import { texts as v1Texts, V1Client } from "./_v1_client.ts";
import { scrape } from "./_ops.ts";

const repoRoot = new URL("..", import.meta.url).pathname;

/** Every stderr line as JSON (a line that is not JSON fails the assertion). */
function jsonLines(stderr: string): Record<string, Msg>[] {
  return stderr.split("\n").filter((line) => line !== "").map((line) => {
    try {
      return JSON.parse(line);
    } catch {
      assert.fail(`a stderr line is not JSON: ${line}`);
    }
  });
}

/** Runs the host with `args`, expecting it to fail: its exit code and its last log message. */
async function failing(args: string[]): Promise<{ code: number; msg: string }> {
  await using host = await serve(args, { expectFailure: true });
  const status = await host.exited();
  const lines = jsonLines(host.stderr());
  return { code: status.code, msg: lines.at(-1)?.msg };
}

Deno.test("An invalid TLS certificate or key is named with its cause (exit 2), before anything binds", async (t) => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${dir}/good`);
    await Deno.mkdir(`${dir}/other`);
    const good = await selfSigned(`${dir}/good`);
    const other = await selfSigned(`${dir}/other`);
    const garbage = `${dir}/garbage.pem`;
    await Deno.writeTextFile(garbage, "not a PEM file\n");
    const corrupt = `${dir}/corrupt.pem`;
    await Deno.writeTextFile(corrupt, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
    const listen = ["--listen", "grpc://127.0.0.1:0", "--warm-sessions", "0"];
    await t.step("a file with no certificate", async () => {
      assert.deepEqual(await failing([...listen, "--tls-cert", garbage, "--tls-key", good.key]), {
        code: 2,
        msg: `invalid TLS certificate ${garbage}: no PEM certificate found`,
      });
    });
    await t.step("a certificate that does not parse", async () => {
      const { code, msg } = await failing([...listen, "--tls-cert", corrupt, "--tls-key", good.key]);
      assert.equal(code, 2);
      assert.match(
        msg,
        new RegExp(`^invalid TLS certificate ${corrupt}: cannot parse the certificate \\(.+\\)$`),
      );
    });
    await t.step("a file with no private key", async () => {
      assert.deepEqual(await failing([...listen, "--tls-cert", good.cert, "--tls-key", garbage]), {
        code: 2,
        msg: `invalid TLS key ${garbage}: no PEM private key found`,
      });
    });
    await t.step("a key of another certificate", async () => {
      assert.deepEqual(await failing([...listen, "--tls-cert", good.cert, "--tls-key", other.key]), {
        code: 2,
        msg: `invalid TLS key ${other.key}: it does not match the certificate ${good.cert}`,
      });
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("A port in use: `failed to bind … : address already in use` (exit 1), and every stderr line is JSON", async (t) => {
  using taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = taken.addr.port;
  await t.step("the gRPC port", async () => {
    assert.deepEqual(await failing(["--listen", `grpc://127.0.0.1:${port}`, "--warm-sessions", "0"]), {
      code: 1,
      msg: `failed to bind code-mode gRPC host to 127.0.0.1:${port}: address already in use`,
    });
  });
  for (
    const [name, listen] of [["the metrics port", "grpc://127.0.0.1:0"], [
      "the metrics port of the MCP door",
      "mcp+http://127.0.0.1:0",
    ]]
  ) {
    await t.step(name, async () => {
      const args = ["--listen", listen, "--metrics-listen", `127.0.0.1:${port}`, "--warm-sessions", "0"];
      assert.deepEqual(await failing(args), {
        code: 1,
        msg: `failed to bind metrics listener to 127.0.0.1:${port}: address already in use`,
      });
    });
  }
});

Deno.test("The MCP door starts its engine before it listens: /readyz answers before any MCP client", async () => {
  await using host = await serve([
    "--listen",
    "mcp+http://127.0.0.1:0",
    "--metrics-listen",
    "127.0.0.1:0",
    "--warm-sessions",
    "0",
  ]);
  assert.match(host.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
  // Logged before the endpoint is printed; the two pipes are read separately.
  const listening = () => jsonLines(host.stderr()).find((line) => /^metrics listening on /.test(line.msg));
  assert.ok(await eventually(() => listening() !== undefined), "the metrics listener is up");
  const url = String(listening()!.msg).slice("metrics listening on ".length);
  assert.equal(await fetch(`${url}/readyz`).then((r) => r.text()), "ready\n");
  assert.equal((await fetch(`${url}/healthz`).then((r) => r.text())).length > 0, true);
});

Deno.test("Refused flag values: --warm-sessions -1, a --metrics-listen that is no IP:PORT or is outside loopback, a bad exporter URL (exit 2)", async () => {
  assert.deepEqual(await failing(["--warm-sessions", "-1"]), {
    code: 2,
    msg: "--warm-sessions must be a non-negative integer",
  });
  assert.deepEqual(await failing(["--metrics-listen", "localhost:9464"]), {
    code: 2,
    msg: "invalid --metrics-listen `localhost:9464`; expected `IP:PORT`",
  });
  assert.deepEqual(await failing(["--metrics-listen", "0.0.0.0:0"]), {
    code: 2,
    msg: "refusing to listen on non-loopback address `0.0.0.0:0` without --allow-non-loopback",
  });
  assert.deepEqual(await failing(["--otel-trace-exporter", "grpc://127.0.0.1:4317"]), {
    code: 2,
    msg: "invalid --otel-trace-exporter URL `grpc://127.0.0.1:4317`; expected http://HOST:PORT/PATH",
  });
});

Deno.test("deno task serve resolves relative paths against the directory it was run from", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/token.txt`, "relative-secret\n");
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "task",
        "-q",
        "--config",
        `${repoRoot}deno.json`,
        "serve",
        "--listen",
        "grpc://127.0.0.1:0",
        "--warm-sessions",
        "0",
        "--auth-token-file",
        "token.txt",
      ],
      cwd: dir,
      // As from a user's shell: `deno task` sets INIT_CWD only when it is unset, and a suite run by
      // `npx … task test` (CI) inherits npx's, which names the repository root.
      clearEnv: true,
      env: Object.fromEntries(Object.entries(Deno.env.toObject()).filter(([name]) => name !== "INIT_CWD")),
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    const { value: first } = await lines.read();
    const url = first!.trim();
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const channel = createChannel(url.slice("http://".length));
    const health = createClient(HealthDefinition, channel);
    const metadata = new Metadata({ authorization: "Bearer relative-secret" });
    assert.equal((await health.check({ service: "" }, { metadata })).status, 1);
    channel.close();
    child.kill("SIGTERM");
    assert.equal((await child.status).code, 0);
    await lines.cancel();
    jsonLines(await new Response(child.stderr).text());
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Every stderr line of a host run is JSON: debug RPC lines with method, status, duration, IDs and trace ID; the crash line with exit code, signal and stderr tail", async () => {
  const refused = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const exporter = `http://127.0.0.1:${refused.addr.port}`;
  refused.close();
  await using host = await serve([
    "--listen",
    "grpc://127.0.0.1:0",
    "--log-level",
    "debug",
    "--warm-sessions",
    "1",
    "--os-sandbox",
    "off",
    "--metrics-listen",
    "127.0.0.1:0",
    "--otel-trace-exporter",
    exporter,
  ]);
  const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  {
    using raw = rawClient(host.url);
    const s = await openSession(raw.client, {}, new Metadata({ traceparent }));
    s.pump();
    assert.deepEqual((await run(raw.client, s.id, "text(1)")).texts, ["1"]);
    await run(raw.client, s.id, 'throw new Error("no")');
    // Every runtime of the host (the session's and the warm one) ends by SIGKILL.
    for (const pid of descendants(host.child.pid)) {
      try {
        if (Deno.readTextFileSync(`/proc/${pid}/cmdline`).includes("runtime.js")) Deno.kill(pid, "SIGKILL");
      } catch { /* gone */ }
    }
    assert.ok(await s.end, "the session ended with the crash");
  }
  assert.ok(await eventually(() => host.stderr().includes("code-mode host session failed"), 10_000));
  host.child.kill("SIGTERM");
  assert.equal((await host.exited()).code, 0);
  const lines = jsonLines(host.stderr());
  for (const line of lines) {
    assert.match(line.ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.ok(["debug", "info", "warn", "error"].includes(line.level), JSON.stringify(line));
  }
  const rpc = lines.filter((line) => line.msg === "rpc");
  const execute = rpc.find((line) => line.method === "/codex.code_mode.v1.CodeModeHost/Execute")!;
  assert.equal(execute.status, "OK");
  assert.equal(typeof execute.duration_ms, "number");
  assert.match(execute.session_id, /^[0-9a-f-]{36}$/);
  assert.equal(execute.cell_id, "1");
  const open = rpc.find((line) => line.method === "/codex.code_mode.v1.CodeModeHost/OpenSession")!;
  assert.equal(open.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  assert.equal(open.session_id, execute.session_id);
  const crash = lines.find((line) => String(line.msg).startsWith("code-mode host session failed"))!;
  assert.equal(crash.level, "error");
  assert.equal(crash.signal, "SIGKILL");
  assert.ok("exit_code" in crash && "stderr_tail" in crash, JSON.stringify(crash));
  assert.ok(lines.some((line) => /^metrics listening on http:\/\/127\.0\.0\.1:\d+$/.test(line.msg)));
});

Deno.test("JSON host V1 (--listen stdio) feeds the same metrics, and its debug lines are JSON", async () => {
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = probe.addr.port;
  probe.close();
  await using c = V1Client.spawn({
    args: ["--metrics-listen", `127.0.0.1:${port}`, "--warm-sessions", "0", "--log-level", "debug"],
  });
  assert.equal((await c.hello()).type, "connection/ready");
  assert.equal((await c.open("v1-session")).status, "ok");
  assert.deepEqual(v1Texts((await c.run("v1-session", 'text("v1")')).value), ["v1"]);
  const url = `http://127.0.0.1:${port}`;
  assert.ok(
    await eventually(async () => (await scrape(url)).get('code_mode_cells_total{outcome="completed"}') === 1),
  );
  const m = await scrape(url);
  assert.equal(m.get("code_mode_sessions_open"), 1);
  assert.equal(m.get('code_mode_request_duration_seconds_count{method="Execute"}'), 1);
  assert.equal((await c.finish()).code, 0);
  const lines = jsonLines(await c.stderr!);
  const open = lines.find((line) => line.msg === "rpc" && line.method === "session/open");
  assert.deepEqual([open?.status, open?.session_id], ["ok", "v1-session"]);
});

/**
 * The host CLI's `--listen unix:PATH`, `--help`, `--version` and `--listen` errors (SPEC §9.1), with
 * the host as a subprocess (`deno task serve`).
 */
import assert from "node:assert/strict";
import { GrpcCodeModeSessionProvider } from "../mod.ts";
import { serve } from "./_harness.ts";
import { run, textResponse } from "./_client_harness.ts";
import denoConfig from "../deno.json" with { type: "json" };

const repoRoot = new URL("..", import.meta.url).pathname;
const FORMS = "`grpc://IP:PORT`, `unix:PATH`, `grpc+stdio://`, `stdio`, or `stdio://`";

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["task", "-q", "serve", ...args],
    cwd: repoRoot,
    stdin: "null",
  }).output();
  const decoder = new TextDecoder();
  return { code: output.code, stdout: decoder.decode(output.stdout), stderr: decoder.decode(output.stderr) };
}

Deno.test("140 through deno task serve --listen unix:PATH: endpoint line unix:PATH, socket mode 0600, both client forms; the socket is removed at shutdown", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cmh-unix-cli-" });
  const path = `${dir}/host.sock`;
  try {
    const host = await serve(["--listen", `unix:${path}`, "--warm-sessions", "1"]);
    try {
      assert.equal(host.url, `unix:${path}`);
      const info = await Deno.lstat(path);
      assert.ok(info.isSocket);
      assert.equal(info.mode! & 0o777, 0o600);
      for (const url of [`unix://${path}`, `unix:${path}`]) {
        const session = await new GrpcCodeModeSessionProvider(url).createSession();
        const result = await run(session, 'text("unix socket")');
        assert.deepEqual(result, textResponse("1", "unix socket", result.codeModeHostDurationNs));
        await session.shutdown();
      }
      const lines = host.stderr().split("\n").filter(Boolean).map((l) => JSON.parse(l));
      assert.ok(lines.some((l) => l.msg === `code-mode-host listening on unix:${path}`), host.stderr());
    } finally {
      host.child.kill("SIGTERM");
      assert.equal((await host.exited()).code, 0);
    }
    assert.equal(host.stdoutLines.length, 1);
    await assert.rejects(Deno.lstat(path), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("unix:PATH: a live host's socket is refused (exit 1), a dead host's stale socket is replaced, a path that is not a socket is left alone", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cmh-unix-stale-" });
  const path = `${dir}/host.sock`;
  try {
    // The host process itself (not `deno task`), so that SIGKILL reaches it.
    const live = new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-all", "cli/main.ts", "--listen", `unix:${path}`, "--warm-sessions", "0"],
      cwd: repoRoot,
      stdin: "null",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const endpoint = live.stdout.pipeThrough(new TextDecoderStream()).getReader();
    assert.equal((await endpoint.read()).value, `unix:${path}\n`);
    try {
      await using second = await serve(["--listen", `unix:${path}`, "--warm-sessions", "0"], {
        expectFailure: true,
      });
      assert.equal((await second.exited()).code, 1);
      assert.ok(
        second.stderr().includes(
          `failed to bind code-mode gRPC host to unix:${path}: another process is listening on ${path}`,
        ),
        second.stderr(),
      );
      assert.equal(second.stdoutLines.length, 0);
      // The refused host did not touch the live one's socket.
      const session = await new GrpcCodeModeSessionProvider(`unix:${path}`).createSession();
      await run(session, 'text("still live")');
      await session.shutdown();
    } finally {
      // A host killed without cleanup leaves its socket file behind.
      live.kill("SIGKILL");
      await live.status;
      await endpoint.cancel();
    }
    assert.ok((await Deno.lstat(path)).isSocket, "the dead host's socket file remains");
    await using replacement = await serve(["--listen", `unix:${path}`, "--warm-sessions", "0"]);
    assert.equal(replacement.url, `unix:${path}`);
    const again = await new GrpcCodeModeSessionProvider(`unix:${path}`).createSession();
    const result = await run(again, 'text("replaced")');
    assert.deepEqual(result, textResponse("1", "replaced", result.codeModeHostDurationNs));
    await again.shutdown();

    const file = `${dir}/plain`;
    await Deno.writeTextFile(file, "keep me");
    const refused = await cli(["--listen", `unix:${file}`, "--warm-sessions", "0"]);
    assert.equal(refused.code, 1);
    assert.ok(refused.stderr.includes(`${file} exists and is not a socket`), refused.stderr);
    assert.equal(refused.stdout, "");
    assert.equal(await Deno.readTextFile(file), "keep me");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("--help prints every flag and --listen form, --version the deno.json version; both exit 0 and start nothing", async () => {
  const help = await cli(["--help"]);
  assert.equal(help.code, 0, help.stderr);
  for (
    const text of [
      "--listen URL",
      "grpc://IP:PORT",
      "unix:PATH",
      "grpc+stdio://",
      "stdio, stdio://",
      "--allow-non-loopback",
      "--tls-cert",
      "--tls-key",
      "--auth-token-file",
      "--isolation",
      "--deno",
      "--worker-prefix",
      "--warm-sessions",
      "--route-token",
      "--limit",
      "--log-level",
      "--help",
      "--version",
    ]
  ) {
    assert.ok(help.stdout.includes(text), `--help mentions ${text}`);
  }
  assert.equal(help.stderr, "");
  const version = await cli(["--version"]);
  assert.equal(version.code, 0);
  assert.equal(version.stdout, `code-mode-host ${denoConfig.version}\n`);
  assert.match(denoConfig.version, /^\d+\.\d+\.\d+/);
  const unknown = await cli(["--frobnicate"]);
  assert.equal(unknown.code, 2);
  assert.equal(unknown.stdout, "");
});

Deno.test("--listen errors exit 2 and list every accepted form", async (t) => {
  const cases: [string, string][] = [
    ["unix:", `invalid Unix --listen URL \`unix:\` (the socket path is empty); expected ${FORMS}`],
    [
      "unix:///tmp/x.sock",
      `invalid Unix --listen URL \`unix:///tmp/x.sock\` (write \`unix:/ABSOLUTE/PATH\` or \`unix:RELATIVE/PATH\`); expected ${FORMS}`,
    ],
    ["grpc+stdio://x", `unsupported --listen URL \`grpc+stdio://x\`; expected ${FORMS}`],
    ["tcp://127.0.0.1:1", `unsupported --listen URL \`tcp://127.0.0.1:1\`; expected ${FORMS}`],
  ];
  for (const [url, message] of cases) {
    await t.step(url, async () => {
      const out = await cli(["--listen", url]);
      assert.equal(out.code, 2);
      assert.equal(out.stdout, "");
      const line = JSON.parse(out.stderr.trim().split("\n").at(-1)!);
      assert.equal(line.level, "error");
      assert.equal(line.msg, message);
    });
  }
  await t.step("grpc+stdio:// refuses TLS flags", async () => {
    const out = await cli(["--listen", "grpc+stdio://", "--tls-cert", "a", "--tls-key", "b"]);
    assert.equal(out.code, 2);
    assert.ok(out.stderr.includes("--tls-cert is not supported with --listen grpc+stdio://"), out.stderr);
  });
  await t.step("unix:PATH refuses TLS flags", async () => {
    const out = await cli(["--listen", "unix:/tmp/x.sock", "--tls-cert", "a", "--tls-key", "b"]);
    assert.equal(out.code, 2);
    assert.ok(out.stderr.includes("--tls-cert is not supported with --listen unix:PATH"), out.stderr);
  });
});

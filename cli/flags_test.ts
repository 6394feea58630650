import assert from "node:assert/strict";
import { type FlagFiles, HELP, type HostConfig, parseHostFlags } from "./flags.ts";
import denoConfig from "../deno.json" with { type: "json" };

const FORMS = "`grpc://IP:PORT`, `unix:PATH`, `grpc+stdio://`, `stdio`, or `stdio://`";

/** Files in memory; relative paths are relative to `/user` while the process runs in `/repo`. */
function files(contents: Record<string, string> = {}, base = "/user", cwd = "/repo"): FlagFiles {
  return { base, cwd, readTextFile: (path) => contents[path] };
}

async function serve(args: string[], fs: FlagFiles = files()): Promise<HostConfig> {
  const parsed = await parseHostFlags(args, fs);
  assert.equal(parsed.kind, "serve", JSON.stringify(parsed));
  return parsed as HostConfig;
}

async function refused(args: string[], fs: FlagFiles = files()): Promise<string> {
  const parsed = await parseHostFlags(args, fs);
  assert.equal(parsed.kind, "usage", JSON.stringify(parsed));
  return (parsed as { message: string }).message;
}

/** A self-signed certificate and its key, made with openssl. */
async function selfSigned(): Promise<{ cert: string; key: string }> {
  const dir = await Deno.makeTempDir();
  try {
    const out = await new Deno.Command("openssl", {
      args: [
        ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
        ...["-keyout", `${dir}/key.pem`, "-out", `${dir}/cert.pem`, "-days", "1", "-subj", "/CN=127.0.0.1"],
      ],
      stdout: "null",
      stderr: "piped",
    }).output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    return {
      cert: await Deno.readTextFile(`${dir}/cert.pem`),
      key: await Deno.readTextFile(`${dir}/key.pem`),
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("parseHostFlags() defaults: gRPC on 127.0.0.1:50051, info logs, subprocess isolation, the OS sandbox on auto", async () => {
  assert.deepEqual(await serve([]), {
    kind: "serve",
    listen: { kind: "grpc", ip: "127.0.0.1", port: 50051, bind: "127.0.0.1:50051", loopback: true },
    logLevel: "info",
    engine: {
      limits: {},
      isolation: "subprocess",
      deno: undefined,
      metricsListen: undefined,
      otelTraceExporter: undefined,
      workerPrefix: undefined,
      osSandbox: "auto",
      warmSessions: undefined,
    },
    routeToken: undefined,
    authToken: undefined,
    tls: undefined,
    mcpConfig: undefined,
    mcpSessionIdleTimeoutMs: undefined,
    exitWithParent: true,
  });
});

Deno.test("parseHostFlags() --help and --version print their text; --help wins over a later bad value", async () => {
  assert.deepEqual(await parseHostFlags(["--help"], files()), { kind: "print", text: HELP });
  assert.deepEqual(await parseHostFlags(["--isolation", "x", "--help"], files()), {
    kind: "print",
    text: HELP,
  });
  assert.deepEqual(await parseHostFlags(["--version"], files()), {
    kind: "print",
    text: `code-mode-host ${denoConfig.version}\n`,
  });
  for (
    const flag of ["--listen", "--mcp-config", "--tls-cert", "--metrics-listen", "--no-exit-with-parent"]
  ) {
    assert.ok(HELP.includes(flag), flag);
  }
});

Deno.test("parseHostFlags() reads every --listen form; unix:PATH is resolved against the user's directory", async () => {
  assert.deepEqual((await serve(["--listen", "grpc://[::1]:0"])).listen, {
    kind: "grpc",
    ip: "::1",
    port: 0,
    bind: "[::1]:0",
    loopback: true,
  });
  assert.deepEqual((await serve(["--listen", "unix:h.sock"])).listen, { kind: "unix", path: "/user/h.sock" });
  assert.deepEqual((await serve(["--listen", "unix:/tmp/h.sock"])).listen, {
    kind: "unix",
    path: "/tmp/h.sock",
  });
  assert.deepEqual((await serve(["--listen", "unix:h.sock"], files({}, "/repo"))).listen, {
    kind: "unix",
    path: "h.sock",
  });
  assert.deepEqual((await serve(["--listen", "grpc+stdio://"])).listen, { kind: "grpc-stdio" });
  assert.deepEqual((await serve(["--listen=mcp+stdio"])).listen, { kind: "mcp-stdio" });
  assert.equal((await serve(["--listen", "mcp+http://127.0.0.1:0"])).listen.kind, "mcp-http");
  for (const stdio of ["stdio", "stdio://"]) {
    const config = await serve(["--listen", stdio]);
    assert.deepEqual([config.listen, config.logLevel], [{ kind: "stdio" }, "warn"], "V1 logs warnings only");
  }
  assert.equal((await serve(["--listen", "stdio", "--log-level", "debug"])).logLevel, "debug");
  const wide = await serve(["--listen", "grpc://0.0.0.0:0", "--allow-non-loopback"]);
  assert.equal(wide.listen.kind === "grpc" && wide.listen.loopback, false);
});

Deno.test("parseHostFlags() reads the engine's flags", async () => {
  const config = await serve([
    ...["--isolation", "in-process", "--deno", "bin/deno", "--os-sandbox", "off"],
    ...["--worker-prefix", '["/usr/bin/env","A=1"]', "--warm-sessions", "0", "--route-token", "r1"],
    ...["--limit", "maxCells=3", "--limit=maxSessions=0", "--log-level", "error", "--no-exit-with-parent"],
    ...["--metrics-listen", "[::1]:9464", "--otel-trace-exporter", "https://127.0.0.1:4318/"],
  ]);
  assert.deepEqual(config.engine, {
    limits: { maxCells: 3, maxSessions: 0 },
    isolation: "in-process",
    deno: "/user/bin/deno",
    metricsListen: "[::1]:9464",
    otelTraceExporter: "https://127.0.0.1:4318/",
    workerPrefix: ["/usr/bin/env", "A=1"],
    osSandbox: "off",
    warmSessions: 0,
  });
  assert.deepEqual([config.routeToken, config.logLevel, config.exitWithParent], ["r1", "error", false]);
  assert.equal((await serve(["--deno", "deno"])).engine.deno, "deno", "a bare name is looked up on PATH");
  assert.equal(
    (await serve(["--metrics-listen", "0.0.0.0:0", "--allow-non-loopback"])).engine.metricsListen,
    "0.0.0.0:0",
  );
});

Deno.test("parseHostFlags() reads --auth-token-file (trimmed) and the TLS pair, resolved against the user's directory", async () => {
  const { cert, key } = await selfSigned();
  const fs = files({ "/user/token": " secret\n", "/user/cert.pem": cert, "/etc/key.pem": key });
  const config = await serve([
    "--auth-token-file",
    "token",
    "--tls-cert",
    "cert.pem",
    "--tls-key",
    "/etc/key.pem",
  ], fs);
  assert.deepEqual([config.authToken, config.tls], ["secret", { cert, key }]);
});

Deno.test("parseHostFlags() --mcp-config (resolved) and the mcp+http idle limit, which is no engine limit", async () => {
  const config = await serve([
    ...["--listen", "mcp+http://127.0.0.1:0", "--mcp-config", "servers.json"],
    ...["--limit", "mcpSessionIdleTimeoutMs=0", "--limit", "maxCells=2"],
  ]);
  assert.deepEqual([config.mcpConfig, config.mcpSessionIdleTimeoutMs, config.engine.limits], [
    "/user/servers.json",
    0,
    { maxCells: 2 },
  ]);
  const stdio = await serve(["--listen", "mcp+stdio", "--limit", "mcpSessionIdleTimeoutMs=5"]);
  assert.deepEqual([stdio.mcpSessionIdleTimeoutMs, stdio.engine.limits], [undefined, {
    mcpSessionIdleTimeoutMs: 5,
  }]);
});

Deno.test("parseHostFlags() refuses with the host's exact usage messages", async (t) => {
  const cases: [string[], string][] = [
    [["--frobnicate"], "Unknown option '--frobnicate'"],
    [["--warm-sessions"], "Option '--warm-sessions <value>' argument missing"],
    [["--log-level", "loud"], "invalid --log-level `loud`"],
    [
      ["--listen", "grpc://localhost:9000"],
      "invalid gRPC --listen URL `grpc://localhost:9000`; expected `grpc://IP:PORT`",
    ],
    [
      ["--listen", "mcp+http://localhost:1"],
      "invalid MCP --listen URL `mcp+http://localhost:1`; expected `mcp+http://IP:PORT`",
    ],
    [
      ["--listen", "grpc://0.0.0.0:0"],
      "refusing to listen on non-loopback address `0.0.0.0:0` without --allow-non-loopback",
    ],
    [
      ["--listen", "unix:"],
      `invalid Unix --listen URL \`unix:\` (the socket path is empty); expected ${FORMS}`,
    ],
    [
      ["--listen", "unix:///tmp/x.sock"],
      `invalid Unix --listen URL \`unix:///tmp/x.sock\` (write \`unix:/ABSOLUTE/PATH\` or \`unix:RELATIVE/PATH\`); expected ${FORMS}`,
    ],
    [["--listen", "tcp://127.0.0.1:1"], `unsupported --listen URL \`tcp://127.0.0.1:1\`; expected ${FORMS}`],
    [["--metrics-listen", "localhost:9464"], "invalid --metrics-listen `localhost:9464`; expected `IP:PORT`"],
    [
      ["--metrics-listen", "0.0.0.0:0"],
      "refusing to listen on non-loopback address `0.0.0.0:0` without --allow-non-loopback",
    ],
    [
      ["--otel-trace-exporter", "grpc://127.0.0.1:4317"],
      "invalid --otel-trace-exporter URL `grpc://127.0.0.1:4317`; expected http://HOST:PORT/PATH",
    ],
    [
      ["--otel-trace-exporter", "nope"],
      "invalid --otel-trace-exporter URL `nope`; expected http://HOST:PORT/PATH",
    ],
    [
      ["--listen", "stdio", "--tls-cert", "a", "--tls-key", "b"],
      "--tls-cert is not supported with --listen stdio",
    ],
    [
      ["--listen", "grpc+stdio://", "--tls-cert", "a", "--tls-key", "b"],
      "--tls-cert is not supported with --listen grpc+stdio://",
    ],
    [
      ["--listen", "unix:/tmp/x.sock", "--tls-cert", "a"],
      "--tls-cert is not supported with --listen unix:PATH",
    ],
    [["--tls-cert", "x.pem"], "--tls-cert and --tls-key must be given together"],
    [["--tls-key", "x.pem"], "--tls-cert and --tls-key must be given together"],
    [["--tls-cert", "missing.pem", "--tls-key", "k.pem"], "failed to read --tls-cert missing.pem"],
    [["--auth-token-file", "missing"], "failed to read --auth-token-file missing"],
    [["--isolation", "sideways"], "--isolation `sideways` is not supported by this build"],
    [["--worker-prefix", '"a"'], "--worker-prefix must be a JSON array of strings"],
    [["--worker-prefix", "[1]"], "--worker-prefix must be a JSON array of strings"],
    [["--worker-prefix", "["], "--worker-prefix must be a JSON array of strings"],
    [["--os-sandbox", "maybe"], "invalid --os-sandbox `maybe`; expected auto, bwrap or off"],
    [["--warm-sessions", "-1"], "--warm-sessions must be a non-negative integer"],
    [["--warm-sessions", "1.5"], "--warm-sessions must be a non-negative integer"],
    [["--limit", "maxCells"], "invalid --limit `maxCells`"],
    [["--limit", "=1"], "invalid --limit `=1`"],
    [["--limit", "maxCells=-1"], "invalid --limit `maxCells=-1`"],
    [["--limit", "maxCells=x"], "invalid --limit `maxCells=x`"],
    [["--mcp-config", "servers.json"], "--mcp-config needs an mcp+ --listen form"],
  ];
  for (const [args, message] of cases) {
    await t.step(args.join(" "), async () => assert.equal(await refused(args), message));
  }
});

Deno.test("parseHostFlags() names a certificate or key TLS cannot use, with the paths as written", async () => {
  const good = await selfSigned();
  const other = await selfSigned();
  const fs = files({
    "/user/cert.pem": good.cert,
    "/user/key.pem": good.key,
    "/user/other.pem": other.key,
    "/user/garbage.pem": "not a PEM file\n",
    "/user/corrupt.pem": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    "/user/empty": " \n",
  });
  const tls = (cert: string, key: string) => refused(["--tls-cert", cert, "--tls-key", key], fs);
  assert.equal(
    await tls("garbage.pem", "key.pem"),
    "invalid TLS certificate garbage.pem: no PEM certificate found",
  );
  assert.match(
    await tls("corrupt.pem", "key.pem"),
    /^invalid TLS certificate corrupt\.pem: cannot parse the certificate \(.+\)$/,
  );
  assert.equal(await tls("cert.pem", "garbage.pem"), "invalid TLS key garbage.pem: no PEM private key found");
  assert.equal(await tls("cert.pem", "missing.pem"), "failed to read --tls-key missing.pem");
  assert.equal(
    await tls("cert.pem", "other.pem"),
    "invalid TLS key other.pem: it does not match the certificate cert.pem",
  );
  assert.equal(await refused(["--auth-token-file", "empty"], fs), "failed to read --auth-token-file empty");
  assert.equal(
    await refused(
      ["--listen", "mcp+http://127.0.0.1:0", "--tls-cert", "cert.pem", "--tls-key", "key.pem"],
      fs,
    ),
    "--tls-cert is not supported with the MCP --listen forms",
  );
});

Deno.test("parseHostFlags() reports the first refusal in the host's order: files are read before the later flags are checked", async () => {
  assert.equal(
    await refused(["--isolation", "x", "--tls-cert", "missing.pem", "--tls-key", "k"]),
    "failed to read --tls-cert missing.pem",
  );
  assert.equal(
    await refused(["--os-sandbox", "x", "--auth-token-file", "missing"]),
    "failed to read --auth-token-file missing",
  );
  assert.equal(
    await refused(["--limit", "x", "--log-level", "loud", "--listen", "unix:"]),
    "invalid --log-level `loud`",
  );
  assert.equal(
    await refused(["--metrics-listen", "x", "--listen", "unix:"]),
    await refused(["--listen", "unix:"]),
  );
  assert.equal(await refused(["--mcp-config", "c", "--limit", "x"]), "invalid --limit `x`");
});

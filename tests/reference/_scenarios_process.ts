/**
 * Process scenarios: command-line flags and `--listen` forms, the endpoint line, how each host ends
 * on stdin EOF and SIGTERM (SPEC §12.9), and the deliberate differences that are flags. Each starts
 * its own processes with the flags under test. Folder-private.
 *
 * @module
 */
import assert from "node:assert/strict";
import { grpcParts } from "./_driver.ts";
import { hostEnv, hostProgram, type Kind, type Transport } from "./_hosts.ts";
import type { Json } from "./_observe.ts";
import { mapStep, type Scenario, step } from "./_scenario.ts";

const ONCE: readonly Transport[] = ["grpc-tcp"];

/** How a process started with some arguments behaved. */
interface Started {
  /** `running` when it was still running after printing its first stdout line (or after 8 s). */
  exit: number | "running";
  /** The first stdout line, with its port taken out. */
  stdout?: string;
  /** The error message it printed, if any (the reference's `error:`/`Error:` line, our JSON `msg`). */
  message?: string;
}

function errorMessage(stderr: string): string | undefined {
  for (const line of stderr.split("\n")) {
    const trimmed = line.trim();
    if (trimmed.startsWith("{")) {
      try {
        const parsed = JSON.parse(trimmed);
        if (parsed.level === "error") return parsed.msg;
      } catch { /* not JSON */ }
    }
    const m = /^(?:error|Error): (.*)$/.exec(trimmed);
    if (m) return m[1];
  }
  return undefined;
}

/**
 * Starts a host with `args`; resolves once it exited, or once it printed its first stdout line (or
 * 8 s passed) and was then stopped.
 */
async function tryStart(
  kind: Kind,
  args: string[],
  options: { closeStdin?: boolean; binaryStdout?: boolean } = {},
): Promise<Started> {
  const child = new Deno.Command(await hostProgram(kind), {
    args,
    clearEnv: true,
    env: hostEnv(),
    cwd: "/",
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (options.closeStdin) await child.stdin.close();
  const decoder = new TextDecoder();
  let stderr = "";
  const errPump = (async () => {
    for await (const chunk of child.stderr) stderr += decoder.decode(chunk, { stream: true });
  })();
  let stdout = "";
  const firstLine = Promise.withResolvers<void>();
  const outPump = (async () => {
    for await (const chunk of child.stdout) {
      stdout += decoder.decode(chunk, { stream: true });
      if (stdout.includes("\n")) firstLine.resolve();
    }
    firstLine.resolve();
  })();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const exited = await Promise.race([
    child.status.then((s) => s.code),
    firstLine.promise.then(() => "line" as const),
    new Promise<"timeout">((resolve) => timer = setTimeout(() => resolve("timeout"), 8_000)),
  ]);
  clearTimeout(timer);
  let exit: number | "running";
  if (typeof exited === "number") exit = exited;
  else {
    // Printed its endpoint (or nothing yet, e.g. waiting on stdin): it runs; did it exit right after?
    const after = await Promise.race([
      child.status.then((s) => s.code),
      new Promise<"running">((resolve) => timer = setTimeout(() => resolve("running"), 300)),
    ]);
    clearTimeout(timer);
    exit = after;
    if (after === "running") {
      try {
        child.kill("SIGKILL");
      } catch { /* exited */ }
    }
  }
  if (!options.closeStdin) await child.stdin.close().catch(() => {});
  await child.status;
  await Promise.allSettled([errPump, outPump]);
  const line = stdout.split("\n")[0];
  return {
    exit,
    ...(line && !options.binaryStdout ? { stdout: line.replace(/:\d+(\/|$)/, ":<port>$1") } : {}),
    ...(errorMessage(stderr) ? { message: errorMessage(stderr) } : {}),
  };
}

/** A flag scenario: the host is started with each argument list; each outcome is recorded. */
function flags(
  name: string,
  source: string,
  cases: [string, string[] | (() => Promise<string[]>)][],
  deliberate?: Scenario["deliberate"],
): Scenario {
  return {
    name,
    source,
    transports: ONCE,
    ...(deliberate ? { deliberate } : {}),
    run: async (ctx) => {
      for (const [label, args] of cases) {
        ctx.rec(label, await tryStart(ctx.kind, typeof args === "function" ? await args() : args));
      }
    },
  };
}

const TCP = ["--listen", "grpc://127.0.0.1:0"];

/** Asserts: the reference refused each listed case; ours ran it (and the other way round for `theirs`). */
function refusedByReference(ours: string[], theirs: string[] = []) {
  return (kind: Kind, observation: Json[]) => {
    for (const label of ours) {
      const s: Started = step(observation, label);
      if (kind === "reference") assert.notEqual(s.exit, "running", `${label}: the reference refuses it`);
      else assert.equal(s.exit, "running", `${label}: this host runs with it (${s.message ?? ""})`);
    }
    for (const label of theirs) {
      const s: Started = step(observation, label);
      if (kind === "reference") assert.equal(s.exit, "running", `${label}: the reference runs with it`);
      else assert.notEqual(s.exit, "running", `${label}: this host refuses it`);
    }
  };
}

let scratch: string | undefined;
function scratchDir(): string {
  scratch ??= Deno.makeTempDirSync({ prefix: "code-mode-reference-flags-" });
  return scratch;
}

async function tlsFiles(): Promise<string[]> {
  const dir = scratchDir();
  const cert = `${dir}/cert.pem`;
  const key = `${dir}/key.pem`;
  const out = await new Deno.Command("openssl", {
    args: [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-subj",
      "/CN=127.0.0.1",
      "-days",
      "1",
      "-keyout",
      key,
      "-out",
      cert,
    ],
    stdout: "null",
    stderr: "null",
  }).output();
  if (!out.success) throw new Error("openssl could not make a test certificate");
  return [...TCP, "--tls-cert", cert, "--tls-key", key];
}

export const PROCESS_SCENARIOS: Scenario[] = [
  flags("startup: the TCP endpoint line", "SPEC §12.9 105", [["grpc://127.0.0.1:0", TCP]]),
  flags(
    "startup: invalid --listen forms",
    "SPEC §12.9 106; deliberate: usage-errors",
    [
      ["grpc://localhost:9000", ["--listen", "grpc://localhost:9000"]],
      ["http://127.0.0.1:1", ["--listen", "http://127.0.0.1:1"]],
      ["grpc://127.0.0.1", ["--listen", "grpc://127.0.0.1"]],
      ["no value", ["--listen"]],
      ["unknown flag", ["--no-such-flag"]],
    ],
    {
      id: "usage-errors",
      check(kind, observation) {
        // Each side exactly: the exit codes and texts are the whole of this scenario.
        const forms = (list: string) =>
          `\`grpc://IP:PORT\`, ${list}\`grpc+stdio://\`, \`stdio\`, or \`stdio://\``;
        const bad = (url: string) => `invalid gRPC --listen URL \`${url}\`; expected \`grpc://IP:PORT\``;
        const reference = kind === "reference";
        assert.deepEqual(observation, [
          { "grpc://localhost:9000": { exit: reference ? 1 : 2, message: bad("grpc://localhost:9000") } },
          {
            "http://127.0.0.1:1": {
              exit: reference ? 1 : 2,
              message: `unsupported --listen URL \`http://127.0.0.1:1\`; expected ${
                forms(reference ? "" : "`unix:PATH`, ")
              }`,
            },
          },
          { "grpc://127.0.0.1": { exit: reference ? 1 : 2, message: bad("grpc://127.0.0.1") } },
          {
            "no value": {
              exit: 2,
              message: reference
                ? "a value is required for '--listen <URL>' but none was supplied"
                : "Option '--listen <value>' argument missing",
            },
          },
          {
            "unknown flag": {
              exit: 2,
              message: reference
                ? "unexpected argument '--no-such-flag' found"
                : "Unknown option '--no-such-flag'",
            },
          },
        ]);
      },
    },
  ),
  flags(
    "startup: a non-loopback address",
    "SPEC §12.9 114a; deliberate: non-loopback-listen",
    [["grpc://0.0.0.0:0", ["--listen", "grpc://0.0.0.0:0"]]],
    {
      id: "non-loopback-listen",
      check(kind, observation) {
        assert.deepEqual(
          step(observation, "grpc://0.0.0.0:0"),
          kind === "reference" ? { exit: "running", stdout: "http://0.0.0.0:<port>" } : {
            exit: 2,
            message: "refusing to listen on non-loopback address `0.0.0.0:0` without --allow-non-loopback",
          },
        );
      },
    },
  ),
  {
    name: "ending: stdin EOF of an idle stdio host",
    source: "SPEC §9.1 grpc+stdio, §9.10 ending",
    transports: ONCE,
    run: async (ctx) => {
      for (
        const [label, args] of [["grpc+stdio://", ["--listen", "grpc+stdio://"]], [
          "V1 (no arguments)",
          [],
        ]] as const
      ) {
        // stdout carries protocol bytes (the reference sends its HTTP/2 SETTINGS at once): not compared.
        ctx.rec(label, await tryStart(ctx.kind, [...args], { closeStdin: true, binaryStdout: true }));
      }
    },
  },
  {
    name: "ending: SIGTERM of a TCP host",
    source: "SPEC §12.9 107; deliberate: graceful-signals",
    transports: ONCE,
    deliberate: {
      id: "graceful-signals",
      check(kind, observation) {
        assert.deepEqual(
          step(observation, "exit"),
          kind === "reference" ? { code: 143, signal: "SIGTERM" } : { code: 0, signal: null },
        );
      },
      // The client's side of the ending (the lease, the session) is the same.
      rest: (observation) => mapStep(observation, "exit", () => undefined),
    },
    run: async (ctx) => {
      const host = await ctx.startHost();
      const s = await ctx.open({}, host);
      await s.exec("text(1)").outcome;
      host.kill("SIGTERM");
      const status = await ctx.within(host.status, 15_000);
      ctx.rec("exit", typeof status === "string" ? status : { code: status.code, signal: status.signal });
      await grpcParts(s).ended();
      // The code only: a connection reset's message is the client library's.
      ctx.rec("lease end", s.log().lease?.status?.code);
    },
  },
  flags(
    "startup: --limit",
    "deliberate: limits-flag",
    [["--limit maxSessions=4", [...TCP, "--limit", "maxSessions=4"]]],
    { id: "limits-flag", check: refusedByReference(["--limit maxSessions=4"]) },
  ),
  flags(
    "startup: --listen unix:PATH",
    "deliberate: unix-listener",
    [["unix:", () => Promise.resolve(["--listen", `unix:${scratchDir()}/h.sock`])]],
    { id: "unix-listener", check: refusedByReference(["unix:"]) },
  ),
  flags(
    "startup: metrics and trace flags",
    "deliberate: ops-flags",
    [
      ["--metrics-listen", [...TCP, "--metrics-listen", "127.0.0.1:0"]],
      ["--otel-trace-exporter", [...TCP, "--otel-trace-exporter", "http://127.0.0.1:9/v1/traces"]],
      ["--otel-trace-listen", [...TCP, "--otel-trace-listen", "ws://127.0.0.1:0"]],
    ],
    {
      id: "ops-flags",
      check: (kind, observation) => {
        refusedByReference(["--metrics-listen"], ["--otel-trace-listen"])(kind, observation);
        assert.equal(
          step(observation, "--otel-trace-exporter").exit,
          "running",
          "both hosts take --otel-trace-exporter",
        );
      },
    },
  ),
  flags(
    "startup: --os-sandbox",
    "deliberate: os-sandbox",
    [["--os-sandbox off", [...TCP, "--os-sandbox", "off"]]],
    { id: "os-sandbox", check: refusedByReference(["--os-sandbox off"]) },
  ),
  flags(
    "startup: the MCP front door",
    "deliberate: mcp-front-door",
    [["mcp+http://127.0.0.1:0", ["--listen", "mcp+http://127.0.0.1:0"]]],
    { id: "mcp-front-door", check: refusedByReference(["mcp+http://127.0.0.1:0"]) },
  ),
  flags(
    "startup: bearer-token auth and TLS",
    "deliberate: auth-tls",
    [
      ["--auth-token-file", async () => {
        const file = `${scratchDir()}/token`;
        await Deno.writeTextFile(file, "s3cret\n");
        return [...TCP, "--auth-token-file", file];
      }],
      ["--tls-cert --tls-key", tlsFiles],
    ],
    { id: "auth-tls", check: refusedByReference(["--auth-token-file", "--tls-cert --tls-key"]) },
  ),
];

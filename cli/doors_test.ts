import assert from "node:assert/strict";
import { Logger } from "../host/ops/log.ts";
import { parseHostFlags } from "./flags.ts";
import { DOORS, runtimeHandover, StartFailure } from "./doors.ts";

const files = { base: "/", cwd: "/", readTextFile: () => "token" };

/** Starts the door of `args`, expecting it to refuse: its message and exit code. */
async function refusal(args: string[]): Promise<[string, number]> {
  const config = await parseHostFlags([...args, "--warm-sessions", "0", "--os-sandbox", "off"], files);
  assert.equal(config.kind, "serve");
  if (config.kind !== "serve") throw new Error("unreachable");
  const log = new Logger("error", () => {});
  try {
    const door = await DOORS[config.listen.kind](config, log);
    await door.ended;
  } catch (error) {
    assert.ok(error instanceof StartFailure, String(error));
    return [error.message, error.exitCode];
  }
  throw new Error(`the door of ${args.join(" ")} started`);
}

Deno.test("DOORS has a start function for every --listen form", () => {
  assert.deepEqual(Object.keys(DOORS).sort(), [
    "grpc",
    "grpc-stdio",
    "mcp-http",
    "mcp-stdio",
    "stdio",
    "unix",
  ]);
});

Deno.test("A door refuses what the user must change with exit 2, before it serves", async () => {
  assert.deepEqual(await refusal(["--listen", "grpc://127.0.0.1:0", "--limit", "bogus=1"]), [
    "unknown limit `bogus`",
    2,
  ]);
  assert.deepEqual(await refusal(["--listen", "stdio", "--limit", "bogus=1"]), ["unknown limit `bogus`", 2]);
  assert.deepEqual(await refusal(["--listen", "mcp+stdio", "--auth-token-file", "t"]), [
    "--auth-token-file is not supported with --listen mcp+stdio",
    2,
  ]);
  const [message, code] = await refusal(["--listen", "mcp+stdio", "--mcp-config", "/nonexistent/mcp.json"]);
  assert.match(message, /^failed to read --mcp-config \/nonexistent\/mcp\.json: /);
  assert.equal(code, 2);
});

Deno.test("A door that cannot bind fails with exit 1 (V1: the metrics listener)", async () => {
  using taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const metrics = `127.0.0.1:${taken.addr.port}`;
  assert.deepEqual(await refusal(["--listen", "stdio", "--metrics-listen", metrics]), [
    `failed to bind metrics listener to ${metrics}: address already in use`,
    1,
  ]);
  assert.deepEqual(await refusal(["--listen", `grpc://${metrics}`]), [
    `failed to bind code-mode gRPC host to ${metrics}: address already in use`,
    1,
  ]);
});

/** The modules Deno loads with `entry` before it runs: its graph, followed along code (not type) imports. */
function startupGraph(entry: string): string[] {
  const out = new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", new URL(entry, import.meta.url).pathname],
    stdout: "piped",
    stderr: "null",
  }).outputSync();
  const info = JSON.parse(new TextDecoder().decode(out.stdout));
  const modules = new Map<string, { dependencies?: { code?: { specifier: string } }[] }>(
    info.modules.map((module: { specifier: string }) => [module.specifier, module]),
  );
  const resolve = (specifier: string) => info.redirects[specifier] ?? specifier;
  const reached = new Set<string>();
  const visit = (specifier: string) => {
    specifier = resolve(specifier);
    if (reached.has(specifier)) return;
    reached.add(specifier);
    for (const dependency of modules.get(specifier)?.dependencies ?? []) {
      if (dependency.code) visit(dependency.code.specifier);
    }
  };
  for (const root of info.roots) visit(root);
  return [...reached];
}

Deno.test("the command line's start loads no door: every door, metrics and tracing load when asked for", () => {
  const graph = startupGraph("./main.ts");
  assert.deepEqual(graph.filter((s) => s.startsWith("npm:")), [], "no npm package");
  const doors =
    /\/(host\/doors|host\/core|mcp)\/|\/host\/ops\/(prometheus|otel|ops_server)\.ts|\/host\/assemble\.ts/;
  // The TLS check of --tls-cert (flags.ts): one file, evaluated only with that flag.
  const tls = /\/host\/doors\/grpc\/tls_terminator\.ts$/;
  assert.deepEqual(graph.filter((s) => doors.test(s) && !tls.test(s)), []);
});

Deno.test("the gRPC door's graph holds neither metrics, tracing nor MCP", () => {
  const graph = startupGraph("../host/doors/grpc/server.ts");
  assert.ok(graph.some((s) => s.includes("grpc-js")), "the gRPC stack itself");
  const unused =
    /prom-client|opentelemetry|modelcontextprotocol|\/host\/ops\/(prometheus|otel|ops_server)\.ts/;
  assert.deepEqual(graph.filter((s) => unused.test(s)), []);
});

Deno.test("runtimeHandover: one client's sessions share runtimes in turn, except behind a router or mcp+http, unless set", async () => {
  const of = async (args: string[]) => {
    const config = await parseHostFlags(args, files);
    if (config.kind !== "serve") throw new Error("not serve");
    return runtimeHandover(config);
  };
  assert.equal(await of([]), 1);
  assert.equal(await of(["--listen", "grpc+stdio://"]), 1);
  assert.equal(await of(["--listen", "stdio"]), 1);
  assert.equal(await of(["--listen", "mcp+stdio"]), 1);
  assert.equal(await of(["--route-token", "r1"]), 0);
  assert.equal(await of(["--listen", "mcp+http://127.0.0.1:0"]), 0);
  assert.equal(await of(["--limit", "runtimeHandover=0"]), 0);
  assert.equal(await of(["--route-token", "r1", "--limit", "runtimeHandover=2"]), 2);
});

import assert from "node:assert/strict";
import { Logger } from "../host/ops/log.ts";
import { parseHostFlags } from "./flags.ts";
import { DOORS, StartFailure } from "./doors.ts";

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

/**
 * The client library on Node 20+ (issue 6 asks whether it runs there): bundled for Node with
 * `deno bundle --platform node`, with the `.proto` files beside the bundle, it opens a session on
 * the real host and runs a cell.
 */
import assert from "node:assert/strict";
import { startHost } from "./_harness.ts";

const repo = new URL("..", import.meta.url).pathname;

Deno.test("the client library, bundled for Node, runs a cell on the real host under node", async () => {
  const node = await new Deno.Command("node", { args: ["--version"], stdout: "piped" }).output().catch(() =>
    undefined
  );
  assert.ok(node?.success, "node is on PATH (npx installs Deno through it)");
  const dir = await Deno.makeTempDir({ prefix: "cmh-node-" });
  try {
    await Deno.writeTextFile(
      `${dir}/entry.ts`,
      `import process from "node:process";
import { GrpcCodeModeSessionProvider } from "${repo}client/provider.ts";
import { NoopCodeModeSessionDelegate } from "${repo}client/session.ts";
const session = await new GrpcCodeModeSessionProvider(process.argv[2]).createSession();
const cell = await session.execute({ toolCallId: "c", enabledTools: [], source: 'text("hello from " + "node")' },
  new NoopCodeModeSessionDelegate());
const response = await cell.initialResponse();
console.log(JSON.stringify({ cellId: response.cellId, items: response.contentItems }));
await session.shutdown();
`,
    );
    const bundle = await new Deno.Command(Deno.execPath(), {
      args: [
        "bundle",
        "--quiet",
        "--config",
        `${repo}deno.json`,
        "--platform",
        "node",
        "-o",
        `${dir}/client.mjs`,
        `${dir}/entry.ts`,
      ],
      stderr: "piped",
    }).output();
    assert.ok(bundle.success, new TextDecoder().decode(bundle.stderr));
    for (const proto of ["codex/code_mode/v1/code_mode_host.proto", "grpc/health/v1/health.proto"]) {
      await Deno.mkdir(`${dir}/${proto.slice(0, proto.lastIndexOf("/"))}`, { recursive: true });
      await Deno.copyFile(`${repo}proto/${proto}`, `${dir}/${proto}`);
    }
    await using h = await startHost();
    const run = await new Deno.Command("node", {
      args: [`${dir}/client.mjs`, h.host.url],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(run.success, new TextDecoder().decode(run.stderr));
    assert.deepEqual(JSON.parse(new TextDecoder().decode(run.stdout)), {
      cellId: "1",
      items: [{ type: "input_text", text: "hello from node" }],
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

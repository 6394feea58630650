/**
 * The MCP Inspector's CLI against `deno task mcp` (the stdio front door with the example config).
 * It fetches the Inspector with `npx`, so it runs only with `MCP_INSPECTOR_TEST=1` (network and
 * npm needed; about 10 s): `MCP_INSPECTOR_TEST=1 deno test --allow-all tests/mcp_inspector_test.ts`.
 * Version 0.16.4 is pinned: 0.22.0 and 1.0.x fail under `npx` alone with
 * `Cannot find module …/node_modules/@modelcontextprotocol/package.json`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { ROOT } from "./_mcp_helpers.ts";

const INSPECTOR = "@modelcontextprotocol/inspector-cli@0.16.4";

async function inspect(...args: string[]): Promise<unknown> {
  const output = await new Deno.Command("npx", {
    args: ["-y", INSPECTOR, "--cli", Deno.execPath(), "task", "mcp", ...args],
    cwd: ROOT,
    stdin: "null",
  }).output();
  const stdout = new TextDecoder().decode(output.stdout);
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  return JSON.parse(stdout);
}

Deno.test({
  name: "the MCP Inspector's CLI lists exec and wait and runs a cell that calls both upstream tools",
  ignore: Deno.env.get("MCP_INSPECTOR_TEST") !== "1",
  async fn() {
    const listed = await inspect("--method", "tools/list") as {
      tools: { name: string; description: string }[];
    };
    assert.deepEqual(listed.tools.map((tool) => tool.name), ["exec", "wait"]);
    assert.match(listed.tools[0].description, /### `mcp__fixture__slow_sum`/);
    const called = await inspect(
      "--method",
      "tools/call",
      "--tool-name",
      "exec",
      "--tool-arg",
      "code=const [hit, sum] = await Promise.all([tools.mcp__fixture__lookup({ key: 'answer' }), " +
        "tools.mcp__fixture__slow_sum({ a: 40, b: 2 })]); text(`${hit.value} ${sum}`)",
    ) as { content: { text: string }[] };
    assert.equal(called.content[1].text, "42 42");
  },
});

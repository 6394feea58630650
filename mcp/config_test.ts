import assert from "node:assert/strict";
import { McpConfigError, parseMcpConfig, readMcpConfig } from "./config.ts";

Deno.test("parseMcpConfig() reads stdio and HTTP servers; a stdio server's cwd starts at the config's directory", () => {
  const servers = parseMcpConfig({
    mcpServers: {
      files: { command: "files-mcp", args: ["--root", "."], env: { TOKEN: "t" } },
      sub: { type: "stdio", command: "x", cwd: "tools" },
      abs: { command: "x", cwd: "/opt/x" },
      web: { type: "http", url: "https://example.com/mcp", headers: { Authorization: "Bearer t" } },
    },
  }, { baseDir: "/etc/mcp" });
  assert.deepEqual(Object.keys(servers), ["files", "sub", "abs", "web"]);
  assert.deepEqual(servers.files, {
    command: "files-mcp",
    args: ["--root", "."],
    env: { TOKEN: "t" },
    cwd: "/etc/mcp",
  });
  assert.equal((servers.sub as { cwd: string }).cwd, "/etc/mcp/tools");
  assert.equal((servers.abs as { cwd: string }).cwd, "/opt/x");
  assert.deepEqual(servers.web, { url: "https://example.com/mcp", headers: { Authorization: "Bearer t" } });
});

Deno.test("parseMcpConfig() refuses every other shape with a message naming the server and field", async (t) => {
  const cases: [unknown, string][] = [
    [[], "MCP config must be a JSON object with an object `mcpServers`"],
    [{ servers: {} }, "MCP config must be a JSON object with an object `mcpServers`"],
    [{ mcpServers: { a: 1 } }, "MCP config: server `a` must be an object"],
    [{ mcpServers: { a: {} } }, "MCP config: server `a` needs exactly one of `command` and `url`"],
    [
      { mcpServers: { a: { command: "x", url: "http://h/" } } },
      "MCP config: server `a` needs exactly one of `command` and `url`",
    ],
    [{ mcpServers: { a: { command: "" } } }, "MCP config: server `a`: `command` must be a non-empty string"],
    [
      { mcpServers: { a: { command: "x", args: "y" } } },
      "MCP config: server `a`: `args` must be an array of strings",
    ],
    [
      { mcpServers: { a: { command: "x", env: { K: 1 } } } },
      "MCP config: server `a`: `env` must be an object of strings",
    ],
    [
      { mcpServers: { a: { url: "ftp://h/" } } },
      "MCP config: server `a`: `url` must be an http or https URL",
    ],
    [{ mcpServers: { a: { url: "nope" } } }, "MCP config: server `a`: `url` must be an http or https URL"],
    [
      { mcpServers: { a: { type: "sse", url: "http://h/" } } },
      'MCP config: server `a`: `type` "sse" is not supported (stdio, http or streamable-http)',
    ],
    [
      { mcpServers: { a: { type: "http", command: "x" } } },
      'MCP config: server `a`: `type` "http" does not go with `command`',
    ],
    [{ mcpServers: { " ": { command: "x" } } }, "MCP config: a server name is empty"],
  ];
  for (const [json, message] of cases) {
    await t.step(message, () => {
      assert.throws(() => parseMcpConfig(json), (e) => e instanceof McpConfigError && e.message === message);
    });
  }
});

Deno.test("readMcpConfig() names the file when it is missing or not JSON", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    await assert.rejects(
      readMcpConfig(`${dir}/none.json`),
      /^McpConfigError: failed to read --mcp-config .*none\.json/,
    );
    Deno.writeTextFileSync(`${dir}/bad.json`, "{");
    await assert.rejects(readMcpConfig(`${dir}/bad.json`), /--mcp-config .*bad\.json is not valid JSON/);
    Deno.writeTextFileSync(`${dir}/ok.json`, JSON.stringify({ mcpServers: { a: { command: "x" } } }));
    assert.deepEqual(await readMcpConfig(`${dir}/ok.json`), {
      a: { command: "x", args: [], env: {}, cwd: dir },
    });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

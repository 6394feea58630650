/**
 * The MCP front door end to end: the host in its own process (`--listen mcp+stdio` and
 * `--listen mcp+http://127.0.0.1:0` with a token), real session runtimes, the fixture upstream
 * server of `--mcp-config`, and the official SDK's client.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  DEFERRED_TOOLS_GUIDANCE,
  EXEC_TOOL_MAIN_DESCRIPTION,
  MCP_TYPESCRIPT_PREAMBLE,
  TOOL_AVAILABILITY_NOTICE,
  WAIT_TOOL_DESCRIPTION,
  WAIT_TOOL_PARAMETERS,
} from "../client/harness/mod.ts";
import type { CallToolResult, Client } from "../host/doors/mcp/sdk.ts";
import {
  connectHttp,
  connectStdio,
  exec,
  FixtureEvents,
  type McpTestClient,
  startHost,
  texts,
  writeFixtureConfig,
} from "./_mcp_helpers.ts";

const COMPLETED = "Script completed\nWall time ";

/**
 * `wait`s on a cell with a long yield time. Over HTTP a cancellation is a request of its own that may
 * arrive after this wait; until it does, the cancelled call still observes the cell and the wait is
 * refused at once, so the wait is repeated then.
 */
async function waitOnce(client: Client, id: string): Promise<CallToolResult> {
  for (;;) {
    const result = await client.callTool({ name: "wait", arguments: { cell_id: id, yield_time_ms: 30000 } });
    if (!texts(result as CallToolResult).join("\n").includes("active observer")) {
      return result as CallToolResult;
    }
  }
}

/** The scenarios every transport must pass, on one connection (one code-mode session). */
async function scenarios(t: Deno.TestContext, connection: McpTestClient): Promise<void> {
  const client: Client = connection.client;

  await t.step(
    "tools/list shows exec and wait with Codex 0.171's descriptions and the upstream declarations",
    async () => {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((tool) => tool.name), ["exec", "wait"]);
      const [execTool, waitTool] = tools;
      assert.ok(execTool.description!.startsWith(
        `${EXEC_TOOL_MAIN_DESCRIPTION}\n\n${DEFERRED_TOOLS_GUIDANCE}\n\n${TOOL_AVAILABILITY_NOTICE}\n\n` +
          `Shared MCP Types:\n\`\`\`ts\n${MCP_TYPESCRIPT_PREAMBLE}\n\`\`\`\n\n## mcp__fixture\n`,
      ));
      assert.ok(execTool.description!.includes(
        "mcp__fixture__lookup(args: {\n  // The key to look up.\n  key: string;\n}): Promise<{ key: string; value: number; }>;",
      ));
      assert.ok(execTool.description!.includes(
        "mcp__fixture__slow_sum(args: { a: number; b: number; delay_ms?: number; }): Promise<string>;",
      ));
      assert.deepEqual(execTool.inputSchema.required, ["code"]);
      assert.equal(waitTool.description, WAIT_TOOL_DESCRIPTION);
      assert.deepEqual(waitTool.inputSchema, WAIT_TOOL_PARAMETERS);
    },
  );

  await t.step("stored values persist across exec calls of one connection", async () => {
    const first = await exec(client, 'store("k", 41); text("ok")');
    assert.ok(texts(first)[0].startsWith(COMPLETED));
    assert.deepEqual(texts(first).slice(1), ["ok"]);
    const second = await exec(client, 'text(load("k") + 1)');
    assert.deepEqual(texts(second).slice(1), ["42"]);
    assert.equal(second.isError, undefined);
  });

  await t.step("a yielding cell returns its cell ID and continues through wait", async () => {
    const yielded = await exec(client, 'text("before"); yield_control(); await load("never"); text("after")');
    const header = texts(yielded)[0];
    const id = /^Script running with cell ID (\S+)\n/.exec(header)?.[1];
    assert.ok(id, header);
    assert.deepEqual(texts(yielded).slice(1), ["before"]);
    const waited = await client.callTool({ name: "wait", arguments: { cell_id: id } }) as CallToolResult;
    assert.ok(texts(waited)[0].startsWith(COMPLETED));
    assert.deepEqual(texts(waited).slice(1), ["after"]);
    const gone = await client.callTool({ name: "wait", arguments: { cell_id: id } }) as CallToolResult;
    assert.equal(gone.isError, true);
    assert.ok(texts(gone).at(-1)!.includes(`exec cell ${id} not found`));
  });

  await t.step("an image item arrives as MCP image content", async () => {
    const result = await exec(client, 'image("data:image/png;base64,iVBORw0KGgo="); text("done")');
    assert.deepEqual(result.content.slice(1), [
      { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" },
      { type: "text", text: "done" },
    ]);
  });

  await t.step("a thrown error comes back as Script failed with isError", async () => {
    const result = await exec(client, 'text("partial"); throw new Error("boom")');
    assert.equal(result.isError, true);
    assert.ok(texts(result)[0].startsWith("Script failed\nWall time "));
    assert.equal(texts(result)[1], "partial");
    assert.ok(texts(result)[2].startsWith("Script error:\nError: boom"));
  });

  await t.step("a flood is truncated to the pragma's token budget", async () => {
    const code = '// @exec: {"max_output_tokens": 100}\nfor (let i = 0; i < 5000; i++) text("line " + i);';
    const result = await exec(client, code);
    const output = texts(result).slice(1).join("\n");
    assert.match(output, /tokens truncated/);
    assert.ok(
      output.startsWith("Total output lines: 5000") || output.includes("line 0"),
      output.slice(0, 200),
    );
    assert.ok(output.length < 100 * 4 + 200, `${output.length} characters`);
  });

  await t.step("a wait's max_tokens is the budget of its output (the host applies it, once)", async () => {
    const yielded = await exec(
      client,
      'text("a"); yield_control(); text("b".repeat(100)); text("c".repeat(100))',
    );
    const id = /^Script running with cell ID (\S+)\n/.exec(texts(yielded)[0])?.[1];
    assert.ok(id, texts(yielded)[0]);
    const waited = await client.callTool({
      name: "wait",
      arguments: { cell_id: id, yield_time_ms: 30000, max_tokens: 5 },
    }) as CallToolResult;
    assert.deepEqual(texts(waited).slice(1), [
      "Warning: truncated output (original token count: 51)\nTotal output lines: 2\n\n" +
      "bbbbbbbbbb…46 tokens truncated…cccccccccc",
    ]);
  });

  await t.step("a pragma error is the tool's error result and runs nothing", async () => {
    const result = await exec(client, '// @exec: {"foo": 1}\ntext("x")');
    assert.equal(result.isError, true);
    assert.deepEqual(texts(result), [
      "exec pragma only supports `yield_time_ms` and `max_output_tokens`; got `foo`",
    ]);
  });

  await t.step(
    "a cell calls both upstream tools with Promise.all; an upstream error rejects in the cell",
    async () => {
      const result = await exec(
        client,
        `const [hit, sum] = await Promise.all([
         tools.mcp__fixture__lookup({ key: "answer" }),
         tools.mcp__fixture__slow_sum({ a: 40, b: 2, delay_ms: 300 }),
       ]);
       text(hit.value + ":" + sum);
       try { await tools.mcp__fixture__lookup({ key: "nope" }); } catch (error) { text("rejected: " + error); }`,
      );
      assert.deepEqual(texts(result).slice(1), ["42:42", 'rejected: no entry for key "nope"']);
    },
  );

  await t.step("cancelling an exec request terminates its cell", async () => {
    // Cell IDs are allocated in order: a yielding probe tells the next one.
    const probe = texts(await exec(client, "yield_control()"))[0];
    const id = String(Number(/cell ID (\d+)/.exec(probe)![1]) + 1);
    const abort = new AbortController();
    const started = connection.nextNote();
    const code =
      '// @exec: {"yield_time_ms": 60000}\nnotify("started"); await new Promise((r) => setTimeout(r, 60000));';
    const call = client.callTool({ name: "exec", arguments: { code } }, undefined, { signal: abort.signal });
    call.catch(() => {});
    assert.equal(await started, "started");
    abort.abort();
    await assert.rejects(call);
    const text = texts(await waitOnce(client, id)).join("\n");
    assert.ok(text.includes(`exec cell ${id} not found`) || text.startsWith("Script terminated"), text);
    // The session stays usable.
    assert.deepEqual(texts(await exec(client, 'text("next")')).slice(1), ["next"]);
  });

  await t.step("cancelling a wait ends only that wait: the cell runs on", async () => {
    const code = 'yield_control(); await new Promise((r) => setTimeout(r, 300)); text("done")';
    const id = /cell ID (\d+)/.exec(texts(await exec(client, code))[0])![1];
    const abort = new AbortController();
    const call = client.callTool(
      { name: "wait", arguments: { cell_id: id, yield_time_ms: 30000 } },
      undefined,
      {
        signal: abort.signal,
      },
    );
    call.catch(() => {});
    abort.abort();
    await assert.rejects(call);
    const result = await waitOnce(client, id);
    assert.ok(texts(result)[0].startsWith(COMPLETED), texts(result)[0]);
    assert.deepEqual(texts(result).slice(1), ["done"]);
  });
}

Deno.test("the MCP front door over stdio: exec, wait, images, errors, truncation, upstream tools", async (t) => {
  await using events = new FixtureEvents();
  const dir = Deno.makeTempDirSync();
  try {
    const config = writeFixtureConfig(dir, events);
    {
      await using connection = await connectStdio(["--mcp-config", config]);
      await scenarios(t, connection);
    }
    await t.step("a new connection is a new session: the stored value is gone", async () => {
      await using connection = await connectStdio(["--mcp-config", config]);
      const result = await exec(connection.client, 'text(String(load("k")))');
      assert.deepEqual(texts(result).slice(1), ["undefined"]);
    });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("the MCP front door over Streamable HTTP with a bearer token: the same scenarios", async (t) => {
  await using events = new FixtureEvents();
  const dir = Deno.makeTempDirSync();
  try {
    const config = writeFixtureConfig(dir, events);
    const tokenFile = `${dir}/token`;
    Deno.writeTextFileSync(tokenFile, "s3cret\n");
    await using host = await startHost("mcp+http://127.0.0.1:0", [
      "--mcp-config",
      config,
      "--auth-token-file",
      tokenFile,
    ]);
    assert.match(host.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);

    await t.step("a request without the token is refused with 401", async () => {
      const response = await fetch(host.url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      });
      assert.equal(response.status, 401);
      assert.equal((await response.json()).error.message, "code-mode host requires a valid token");
    });

    await t.step("a request whose Host header names another host is refused with 403", async () => {
      const url = new URL(host.url);
      const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
      const conn = await Deno.connect({ hostname: url.hostname, port: Number(url.port) });
      await conn.write(new TextEncoder().encode(
        `POST /mcp HTTP/1.1\r\nHost: evil.example:${url.port}\r\nAuthorization: Bearer s3cret\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      ));
      const reply = await new Response(conn.readable).text();
      assert.match(reply, /^HTTP\/1\.1 403 /);
      assert.match(reply, /Invalid Host header: evil\.example:/);
    });

    {
      await using connection = await connectHttp(host.url, "s3cret");
      await scenarios(t, connection);
    }
    await t.step("a new MCP session is a new code-mode session: the stored value is gone", async () => {
      await using connection = await connectHttp(host.url, "s3cret");
      const result = await exec(connection.client, 'text(String(load("k")))');
      assert.deepEqual(texts(result).slice(1), ["undefined"]);
    });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

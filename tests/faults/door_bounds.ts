/**
 * Fault: every front door bounds what it reads before it parses (issue 27, item 3), on real host
 * processes over real sockets and pipes:
 *
 * - MCP Streamable HTTP: an initialize request of 229 MiB (`DOOR_BOUNDS_BODY_MIB`), chunked or with
 *   its `Content-Length`, and a session's request of the same size, each get `413` with the JSON-RPC
 *   error `Payload Too Large: Request body must not exceed 4194304 bytes` before the host has read
 *   more than the limit (its peak RSS grows far less than the body), and the door serves the next
 *   client;
 * - MCP stdio: an 11 MiB JSON-RPC line is answered with the error `-32600`
 *   `code-mode MCP message of N bytes exceeds 4194304 bytes` under the request's `id`, and the
 *   connection goes on, its stored values kept;
 * - gRPC: a message whose 5-byte header announces 4 GiB gets `RESOURCE_EXHAUSTED` on its header alone
 *   (grpc-js's `grpc.max_receive_message_length`, 64 MiB), and the host serves the next call;
 * - JSON V1: a frame whose 4-byte length announces 4 GiB ends the connection on its length alone;
 * - the `deno task exec` keeper: a line over 65 MiB on its socket is answered with an error and the
 *   connection closed, and the keeper serves the next command with its stored values.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import { Buffer } from "node:buffer";
import { createHost } from "../../mod.ts";
import { connectHttp, exec, hostArgs, startHost, texts } from "../_mcp_helpers.ts";
import { openSession, rawClient, run, serve } from "../_harness.ts";
import { KEEPER_LINE_MAX_BYTES, KEEPER_LINE_TOO_LONG } from "../../client/exec.ts";
import { alive } from "../_v1_helpers.ts";

const MIB = 1024 * 1024;
const LIMIT = 4 * MIB;
const BODY_BYTES = Number(Deno.env.get("DOOR_BOUNDS_BODY_MIB") ?? 229) * MIB;
const ROOT = new URL("../..", import.meta.url).pathname;
const utf8 = new TextEncoder();

/** Peak resident memory of a process so far (`VmHWM`), bytes. */
function peakRss(pid: number): number {
  const kb = /VmHWM:\s+(\d+) kB/.exec(Deno.readTextFileSync(`/proc/${pid}/status`));
  return Number(kb![1]) * 1024;
}

interface RawResponse {
  status: number;
  headers: Map<string, string>;
  body: string;
  /** Body bytes the client had handed to the socket when the answer came. */
  sent: number;
}

/**
 * POSTs a JSON body of `total` bytes over a raw TCP connection (chunked, or with its
 * `Content-Length`), sending 1 MiB at a time until the whole body is out or the answer arrives.
 */
async function rawPost(
  url: URL,
  options: { framing: "chunked" | "length"; total: number; head: string; tail: string; sessionId?: string },
): Promise<RawResponse> {
  const conn = await Deno.connect({ hostname: url.hostname, port: Number(url.port) });
  try {
    const lines = [
      `POST ${url.pathname} HTTP/1.1`,
      `Host: ${url.host}`,
      "Content-Type: application/json",
      "Accept: application/json, text/event-stream",
      options.framing === "chunked" ? "Transfer-Encoding: chunked" : `Content-Length: ${options.total}`,
      ...(options.sessionId
        ? [`Mcp-Session-Id: ${options.sessionId}`, "Mcp-Protocol-Version: 2025-03-26"]
        : []),
    ];
    const answer = readResponse(conn);
    const writer = conn.writable.getWriter();
    const put = async (bytes: Uint8Array) => {
      const framed = options.framing === "chunked"
        ? [utf8.encode(`${bytes.length.toString(16)}\r\n`), bytes, utf8.encode("\r\n")]
        : [bytes];
      for (const piece of framed) await writer.write(piece);
    };
    let sent = 0;
    let answered = false;
    void answer.then(() => answered = true, () => answered = true);
    const sending = (async () => {
      await writer.write(utf8.encode(lines.join("\r\n") + "\r\n\r\n"));
      const head = utf8.encode(options.head), tail = utf8.encode(options.tail);
      await put(head);
      sent += head.length;
      const pad = new Uint8Array(MIB).fill(0x78);
      while (!answered && sent + tail.length < options.total) {
        const n = Math.min(pad.length, options.total - tail.length - sent);
        await put(pad.subarray(0, n));
        sent += n;
      }
      if (answered) return;
      await put(tail);
      sent += tail.length;
      if (options.framing === "chunked") await writer.write(utf8.encode("0\r\n\r\n"));
    })();
    sending.catch(() => {}); // the host may close the connection on a refused body
    const response = await Promise.race([answer, sending.then(() => answer)]);
    return { ...response, sent };
  } finally {
    try {
      conn.close();
    } catch { /* closed by the host */ }
  }
}

/** Reads one HTTP/1.1 response, its body framed by `Content-Length` or chunked. */
async function readResponse(conn: Deno.Conn): Promise<Omit<RawResponse, "sent">> {
  const reader = conn.readable.getReader();
  let text = "";
  const decoder = new TextDecoder();
  const more = async () => {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the response ended early: ${text}`);
    text += decoder.decode(value, { stream: true });
  };
  while (!text.includes("\r\n\r\n")) await more();
  const headEnd = text.indexOf("\r\n\r\n");
  const [statusLine, ...headerLines] = text.slice(0, headEnd).split("\r\n");
  const headers = new Map(headerLines.map((l) => {
    const at = l.indexOf(":");
    return [l.slice(0, at).toLowerCase(), l.slice(at + 1).trim()] as [string, string];
  }));
  let body: string;
  if (headers.get("transfer-encoding") === "chunked") {
    while (!text.endsWith("\r\n0\r\n\r\n")) await more();
    body = "";
    for (let at = headEnd + 4;;) {
      const lineEnd = text.indexOf("\r\n", at);
      const size = parseInt(text.slice(at, lineEnd), 16);
      if (size === 0) break;
      body += text.slice(lineEnd + 2, lineEnd + 2 + size); // ASCII bodies: characters are bytes
      at = lineEnd + 2 + size + 2;
    }
  } else {
    const length = Number(headers.get("content-length"));
    while (text.length - headEnd - 4 < length) await more();
    body = text.slice(headEnd + 4, headEnd + 4 + length);
  }
  reader.releaseLock();
  return { status: Number(statusLine.split(" ")[1]), headers, body };
}

const INITIALIZE_HEAD =
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26",' +
  '"capabilities":{},"clientInfo":{"name":"big","version":"1"},"pad":"';

Deno.test(`fault: MCP Streamable HTTP refuses ${BODY_BYTES / MIB} MiB bodies with 413 before reading them; the door keeps serving`, async () => {
  await using host = await startHost("mcp+http://127.0.0.1:0");
  const url = new URL(host.url);
  const pid = host.child.pid;
  const tooLarge = {
    jsonrpc: "2.0",
    error: { code: -32000, message: `Payload Too Large: Request body must not exceed ${LIMIT} bytes` },
    id: null,
  };
  // A session for the third case, opened with a plain initialize.
  const init = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: INITIALIZE_HEAD + '"}}',
  });
  const sessionId = init.headers.get("mcp-session-id")!;
  await init.body?.cancel();
  assert.ok(sessionId, "a small initialize opens a session");
  const before = peakRss(pid);
  for (
    const [name, framing, head, sessionIdHeader] of [
      ["initialize, chunked", "chunked", INITIALIZE_HEAD, undefined],
      ["initialize, Content-Length", "length", INITIALIZE_HEAD, undefined],
      [
        "a session's request, chunked",
        "chunked",
        '{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"',
        sessionId,
      ],
    ] as const
  ) {
    const response = await rawPost(url, {
      framing,
      total: BODY_BYTES,
      head,
      tail: '"}}',
      sessionId: sessionIdHeader,
    });
    assert.equal(response.status, 413, `${name}: ${response.body}`);
    assert.deepEqual(JSON.parse(response.body), tooLarge, name);
    assert.ok(
      response.sent < BODY_BYTES,
      `${name}: answered before the whole body was sent (${response.sent})`,
    );
  }
  const grown = peakRss(pid) - before;
  console.log(`host peak RSS grew ${(grown / MIB).toFixed(1)} MiB over three ${BODY_BYTES / MIB} MiB bodies`);
  assert.ok(grown < 64 * MIB, `the host read no body whole (peak RSS +${grown} bytes)`);
  // The door serves the next client, the session opened before included.
  await using client = await connectHttp(host.url);
  assert.deepEqual(texts(await exec(client.client, 'text("served")')).slice(1), ["served"]);
  const ping = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-session-id": sessionId,
      "mcp-protocol-version": "2025-03-26",
    },
    body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
  });
  await ping.body?.cancel();
  assert.equal(ping.status, 202);
});

/** A host on `--listen mcp+stdio` spoken to in raw JSON lines over its pipes. */
function stdioHost() {
  const child = new Deno.Command(Deno.execPath(), {
    args: hostArgs("mcp+stdio"),
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const stderr = new Response(child.stderr).text();
  let pending = "";
  const messages: Record<string, unknown>[] = [];
  const next = async (): Promise<Record<string, unknown>> => {
    while (!pending.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the host's output ended; stderr: ${await stderr}`);
      pending += value;
    }
    const at = pending.indexOf("\n");
    const line = pending.slice(0, at);
    pending = pending.slice(at + 1);
    return JSON.parse(line);
  };
  return {
    child,
    stderr,
    send: (message: unknown) => writer.write(utf8.encode(JSON.stringify(message) + "\n")),
    sendRaw: (bytes: Uint8Array) => writer.write(bytes),
    /** The response to request `id` (notifications before it are kept in `messages`). */
    async response(id: number): Promise<Record<string, unknown>> {
      for (;;) {
        const message = await next();
        if (message.id === id) return message;
        messages.push(message);
      }
    },
    async close(): Promise<Deno.CommandStatus> {
      await writer.close();
      await reader.cancel();
      return await child.status;
    },
  };
}

Deno.test("fault: MCP stdio answers an 11 MiB line with an error naming the limit and keeps serving the connection", async () => {
  const host = stdioHost();
  await host.send({
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "t", version: "1" } },
  });
  assert.ok((await host.response(1)).result);
  await host.send({ jsonrpc: "2.0", method: "notifications/initialized" });
  const call = (id: number, code: string) =>
    host.send({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "exec", arguments: { code } } });
  await call(2, 'store("k", "kept"); text("stored")');
  assert.equal((await host.response(2) as { result: { isError?: boolean } }).result.isError, undefined);
  // As the SDK's client writes a request: `id` last, after the (huge) params.
  const huge = utf8.encode(
    JSON.stringify({
      method: "tools/call",
      params: { name: "exec", arguments: { code: `//${"x".repeat(11 * MIB)}` } },
      jsonrpc: "2.0",
      id: 3,
    }) + "\n",
  );
  await host.sendRaw(huge);
  assert.deepEqual(await host.response(3), {
    jsonrpc: "2.0",
    id: 3,
    error: {
      code: -32600,
      message: `code-mode MCP message of ${huge.length - 1} bytes exceeds ${LIMIT} bytes`,
    },
  });
  await call(4, 'text(load("k"))');
  const loaded = await host.response(4) as { result: { content: { text: string }[] } };
  assert.deepEqual(loaded.result.content.slice(1).map((c) => c.text), ["kept"]);
  const status = await host.close();
  assert.equal(status.code, 0);
  assert.match(
    await host.stderr,
    /code-mode MCP message of \d+ bytes exceeds 4194304 bytes; answered and discarded/,
  );
});

Deno.test("fault: a gRPC message announcing 4 GiB is refused RESOURCE_EXHAUSTED on its header; the host serves on", async () => {
  await using p = await serve(["--listen", "grpc://127.0.0.1:0", "--warm-sessions", "1"]);
  const address = p.url.replace(/^(grpc|http):\/\//, "");
  const session = http2.connect(`http://${address}`);
  try {
    const stream = session.request({
      ":method": "POST",
      ":path": "/codex.code_mode.v1.CodeModeHost/Execute",
      "content-type": "application/grpc",
      te: "trailers",
    });
    const status = new Promise<Record<string, unknown>>((resolve) => {
      // A trailers-only answer carries the status in its headers.
      stream.on("response", (headers) => headers["grpc-status"] !== undefined && resolve(headers));
      stream.on("trailers", (trailers) => resolve(trailers));
    });
    stream.on("error", () => {});
    // Uncompressed, length 0xFFFFFFF0, and not one byte of it: the stream stays open.
    stream.write(Buffer.from([0, 0xff, 0xff, 0xff, 0xf0]));
    const answer = await status;
    assert.equal(answer["grpc-status"], "8");
    assert.equal(
      decodeURIComponent(String(answer["grpc-message"])),
      "Received message larger than max (4294967280 vs 67108864)",
    );
    stream.close();
  } finally {
    session.close();
  }
  using raw = rawClient(address);
  await using s = await openSession(raw.client);
  assert.deepEqual((await run(raw.client, s.id, 'text("served")')).texts, ["served"]);
});

Deno.test("fault: a JSON V1 frame announcing 4 GiB ends the connection on its 4 length bytes", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", `${ROOT}cli/main.ts`, "--listen", "stdio", "--warm-sessions", "0"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  // The length alone; stdin stays open, so a host that waited for the payload would wait for ever.
  await writer.write(new Uint8Array([0xf0, 0xff, 0xff, 0xff]));
  const out = await child.output();
  assert.equal(out.code, 1);
  assert.match(
    new TextDecoder().decode(out.stderr),
    /code-mode IPC frame length 4294967280 exceeds 67108864 bytes/,
  );
  await writer.close().catch(() => {});
});

/** Runs `deno task exec ARGS`. */
async function execCommand(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["task", "-q", "exec", ...args],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { code: out.code, stdout: decode(out.stdout), stderr: decode(out.stderr) };
}

Deno.test("fault: the exec keeper answers a line over 65 MiB with an error, closes that connection, and serves the next command", async () => {
  await using host = await createHost({ listen: "127.0.0.1:0", log: "warn" });
  const dir = await Deno.makeTempDir();
  const file = `${dir}/session.json`;
  const base = ["--endpoint", host.url, "--session-file", file];
  let keeper: number | undefined;
  try {
    const first = await execCommand([...base, 'store("n", 41); text("stored")']);
    assert.equal(first.code, 0, first.stderr);
    const kept = JSON.parse(await Deno.readTextFile(file)) as { pid: number; socket: string };
    keeper = kept.pid;
    const conn = await Deno.connect({ transport: "unix", path: kept.socket });
    // What the keeper writes before it closes; the close may reset the connection (our bytes unread).
    const answer = (async () => {
      let text = "";
      try {
        for await (const chunk of conn.readable.pipeThrough(new TextDecoderStream())) text += chunk;
      } catch (error) {
        if (!(error instanceof Deno.errors.ConnectionReset)) throw error;
      }
      return text;
    })();
    const writer = conn.writable.getWriter();
    // One byte over the limit, then its newline (the keeper answers before it arrives).
    const chunk = new Uint8Array(MIB).fill(0x20);
    try {
      for (let sent = 0; sent <= KEEPER_LINE_MAX_BYTES; sent += chunk.length) {
        const rest = KEEPER_LINE_MAX_BYTES + 1 - sent;
        await writer.write(rest < chunk.length ? chunk.subarray(0, rest) : chunk);
      }
      await writer.write(utf8.encode("\n"));
    } catch { /* the keeper closed the connection */ }
    assert.deepEqual(
      (await answer).trim().split("\n").map((l) => JSON.parse(l)),
      [{ error: KEEPER_LINE_TOO_LONG }, { exitCode: 1 }],
    );
    try {
      conn.close();
    } catch { /* closed */ }
    const next = await execCommand([...base, 'text(load("n") + 1)']);
    assert.equal(next.code, 0, next.stderr);
    assert.match(next.stdout, /\n42\n$/);
  } finally {
    await execCommand([...base, "--close"]);
    while (keeper !== undefined && alive(keeper)) await new Promise((r) => setTimeout(r, 10));
    await Deno.remove(dir, { recursive: true });
  }
});

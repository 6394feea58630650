import assert from "node:assert/strict";
import { BoundedStdioServerTransport, messageTooLarge } from "./stdio_transport.ts";

/** A transport on in-memory pipes: write lines to it, read its answers and what it delivered. */
function pipes(maxMessageBytes: number) {
  const input = new TransformStream<Uint8Array, Uint8Array>();
  const output = new TransformStream<Uint8Array, Uint8Array>();
  const transport = new BoundedStdioServerTransport(input.readable, output.writable, { maxMessageBytes });
  const delivered: unknown[] = [];
  const errors: string[] = [];
  let closes = 0;
  const arrived: PromiseWithResolvers<void>[] = [];
  transport.onmessage = (message) => {
    delivered.push(message);
    arrived.shift()?.resolve();
  };
  transport.onerror = (error) => errors.push(error.message);
  transport.onclose = () => closes++;
  const writer = input.writable.getWriter();
  const answers = output.readable.pipeThrough(new TextDecoderStream()).getReader();
  let pending = "";
  return {
    transport,
    delivered,
    errors,
    get closes() {
      return closes;
    },
    write: (text: string) => writer.write(new TextEncoder().encode(text)),
    end: () => writer.close(),
    /** Resolves when the next message has been delivered. */
    nextDelivery(): Promise<void> {
      const next = Promise.withResolvers<void>();
      arrived.push(next);
      return next.promise;
    },
    async answer(): Promise<unknown> {
      while (!pending.includes("\n")) {
        const { value, done } = await answers.read();
        if (done) throw new Error("output ended");
        pending += value;
      }
      const at = pending.indexOf("\n");
      const line = pending.slice(0, at);
      pending = pending.slice(at + 1);
      return JSON.parse(line);
    },
    async [Symbol.asyncDispose]() {
      await transport.close();
      await answers.cancel();
    },
  };
}

const ping = (id: number) => `{"jsonrpc":"2.0","id":${id},"method":"ping"}\n`;

Deno.test("BoundedStdioServerTransport: a line over the limit is answered -32600 with its id, then the next line is read", async () => {
  await using p = pipes(256);
  await p.transport.start();
  // The SDK's client puts `id` last, after the (large) params.
  const big = `{"method":"tools/call","params":{"code":"${"x".repeat(10_000)}"},"jsonrpc":"2.0","id":41}`;
  await p.write(big.slice(0, 3000));
  await p.write(big.slice(3000) + "\n");
  assert.deepEqual(await p.answer(), {
    jsonrpc: "2.0",
    id: 41,
    error: { code: -32600, message: messageTooLarge(big.length, 256) },
  });
  assert.equal(
    messageTooLarge(big.length, 256),
    `code-mode MCP message of ${big.length} bytes exceeds 256 bytes`,
  );
  const delivered = p.nextDelivery();
  await p.write(ping(42));
  await delivered;
  assert.deepEqual(p.delivered, [{ jsonrpc: "2.0", id: 42, method: "ping" }]);
  assert.deepEqual(p.errors, [`${messageTooLarge(big.length, 256)}; answered and discarded`]);
});

Deno.test("BoundedStdioServerTransport: the id of an oversized line, wherever it can be read", async (t) => {
  const pad = "y".repeat(300);
  const cases: [string, string, unknown][] = [
    ["first", `{"id":7,"jsonrpc":"2.0","method":"m","params":{"p":"${pad}"}}`, 7],
    ["a string", `{"jsonrpc":"2.0","method":"m","params":{"p":"${pad}"},"id":"req-1"}`, "req-1"],
    ["with spaces", `{ "jsonrpc" : "2.0", "params" : {"p":"${pad}"} , "id" : 12 }`, 12],
    ["escapes in the string", `{"id":"a\\"b","params":{"p":"${pad}"}}`, 'a"b'],
    ["the last of two", `{"id":1,"params":{"p":"${pad}"},"id":2}`, 2],
    ["nested ids are not it", `{"method":"m","params":{"id":5,"p":"${pad}"}}`, null],
    ['"id" inside a string is not it', `{"method":"m","params":{"p":"\\"id\\":5 ${pad}"}}`, null],
    ["no id (a notification)", `{"jsonrpc":"2.0","method":"m","params":{"p":"${pad}"}}`, null],
    ["an object id", `{"id":{"a":1},"params":{"p":"${pad}"}}`, null],
    ["a batch", `[{"id":3,"params":{"p":"${pad}"}}]`, null],
    ["not JSON", `${pad}`, null],
  ];
  for (const [name, line, id] of cases) {
    await t.step(name, async () => {
      await using p = pipes(128);
      await p.transport.start();
      await p.write(line + "\n");
      const answer = await p.answer() as { id: unknown; error: { code: number } };
      assert.equal(answer.id, id);
      assert.equal(answer.error.code, -32600);
    });
  }
});

Deno.test("BoundedStdioServerTransport: a line that is no message is reported through onerror, and the next is read", async () => {
  await using p = pipes(256);
  await p.transport.start();
  const delivered = p.nextDelivery();
  await p.write("not json\n\n" + ping(1));
  await delivered;
  assert.equal(p.errors.length, 1);
  assert.deepEqual(p.delivered, [{ jsonrpc: "2.0", id: 1, method: "ping" }]);
});

Deno.test("BoundedStdioServerTransport: the input's end closes it once; sends go out as JSON lines", async () => {
  await using p = pipes(256);
  const closed = Promise.withResolvers<void>();
  p.transport.onclose = () => closed.resolve();
  await p.transport.start();
  await p.transport.send({
    jsonrpc: "2.0",
    method: "notifications/message",
    params: { level: "info", data: "hi" },
  });
  assert.deepEqual(await p.answer(), {
    jsonrpc: "2.0",
    method: "notifications/message",
    params: { level: "info", data: "hi" },
  });
  await p.end();
  await closed.promise;
  await p.transport.close();
});

Deno.test("BoundedStdioServerTransport: close() stops a pending read and reports onclose once", async () => {
  await using p = pipes(256);
  await p.transport.start();
  await p.transport.close();
  await p.transport.close();
  assert.equal(p.closes, 1);
});

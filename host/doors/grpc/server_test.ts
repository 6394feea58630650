/**
 * Unit tests of the gRPC front door (`server.ts`): a real server on 127.0.0.1:0 (or a Unix
 * socket) over a real engine, with runtimes only where a test opens a session. What is checked is
 * the server's own job: listening and binding errors, the health status through the host's life,
 * the interceptor's wire details (no `OK` status message, the subscription header taken out), the
 * token check in front of every service, the route token, and shutdown.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import { ClientError, createChannel, createClient, Metadata, Status } from "nice-grpc";
import { HealthDefinition } from "nice-grpc-server-health";
import { CODE_MODE_SERVICE, codeModeHostDefinition } from "../../../proto/loader.ts";
import { Logger } from "../../ops/log.ts";
import { hostTempParent } from "../../runtime/runtime_files.ts";
import { UNAUTHENTICATED_MESSAGE } from "./access.ts";
import { createHost, type HostOptions, passFramedMessages, withoutSerializeCopy } from "./server.ts";
import { SUBSCRIPTION_HEADER } from "./service.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

const SERVING = 1;
const NOT_SERVING = 2;

/** A host that spawns no runtime until a session is opened, with its log lines kept. */
async function host(options: HostOptions = {}) {
  const lines: Json[] = [];
  const h = await createHost({
    listen: "127.0.0.1:0",
    warmSessions: 0,
    osSandbox: "off",
    log: new Logger("info", (line) => lines.push(JSON.parse(line))),
    ...options,
  });
  return Object.assign(h, { lines });
}

function channelTo(address: string) {
  return createChannel(address.replace(/^http:\/\//, ""));
}

/** This process's runtime directories under the host-private parent. */
function runtimeDirs(): string[] {
  return [...Deno.readDirSync(hostTempParent())].map((e) => e.name).filter((n) =>
    n.startsWith(`r-${Deno.pid}-`)
  );
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail("did not reject");
}

/** A unary call through grpc-js itself, with the raw status it ended with. */
function rawUnary(address: string, path: string): Promise<grpc.StatusObject> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const status = Promise.withResolvers<grpc.StatusObject>();
  const call = client.makeUnaryRequest(
    path,
    (request: Buffer) => request,
    (response: Buffer) => response,
    Buffer.alloc(0),
    () => {},
  );
  call.on("status", (s: grpc.StatusObject) => status.resolve(s));
  return status.promise.finally(() => client.close());
}

Deno.test("createHost on 127.0.0.1:0: url and port name the bound port; the server and the code-mode service are SERVING", async () => {
  await using h = await host();
  assert.ok(h.port > 0);
  assert.equal(h.url, `http://127.0.0.1:${h.port}`);
  const channel = channelTo(h.url);
  try {
    const health = createClient(HealthDefinition, channel);
    assert.equal((await health.check({ service: "" })).status, SERVING);
    assert.equal((await health.check({ service: CODE_MODE_SERVICE })).status, SERVING);
  } finally {
    channel.close();
  }
});

Deno.test("a successful call ends with an empty status message, as Codex's host; a failed one keeps its message", async () => {
  await using h = await host();
  const ok = await rawUnary(`127.0.0.1:${h.port}`, "/grpc.health.v1.Health/Check");
  assert.equal(ok.code, grpc.status.OK);
  assert.equal(ok.details, "");
  const failed = await rawUnary(`127.0.0.1:${h.port}`, `/${CODE_MODE_SERVICE}/GetProcessMetrics`);
  assert.equal(failed.code, grpc.status.UNIMPLEMENTED);
  assert.equal(failed.details, "process metrics are unsupported");
});

Deno.test("OpenSession carries the route token header; a subscription's header block arrives at once, without the header that made nice-grpc send it", async () => {
  await using h = await host({ routeToken: "route-7" });
  const channel = channelTo(h.url);
  const abort = new AbortController();
  try {
    // deno-lint-ignore no-explicit-any
    const client = createClient(codeModeHostDefinition() as any, channel) as Json;
    const opened = Promise.withResolvers<Metadata>();
    const lease = client.openSession({}, { signal: abort.signal, onHeader: opened.resolve })
      [Symbol.asyncIterator]();
    const sessionId = (await lease.next()).value.opened.sessionId;
    assert.equal((await opened.promise).get("x-code-mode-route"), "route-7");
    const subscribed = Promise.withResolvers<Metadata>();
    const calls = client.subscribeToToolCalls({ sessionId }, {
      signal: abort.signal,
      onHeader: subscribed.resolve,
    })[
      Symbol.asyncIterator
    ]();
    const pending = calls.next().catch(() => {});
    const header = await subscribed.promise; // before any call: the subscription is registered
    assert.equal(header.get(SUBSCRIPTION_HEADER), undefined);
    abort.abort();
    await pending;
    await lease.next().catch(() => {});
  } finally {
    channel.close();
  }
});

Deno.test("authToken: every service refuses a call without the token UNAUTHENTICATED, and serves one with it", async () => {
  await using h = await host({ authToken: "s3cret" });
  const channel = channelTo(h.url);
  try {
    const health = createClient(HealthDefinition, channel);
    for (const metadata of [undefined, { authorization: "Bearer wrong" }, { authorization: "s3cret" }]) {
      const error = await rejection(
        health.check({ service: "" }, metadata && { metadata: Metadata(metadata) }),
      );
      assert.ok(error instanceof ClientError, String(error));
      assert.equal(error.code, Status.UNAUTHENTICATED);
      assert.equal(error.details, UNAUTHENTICATED_MESSAGE);
    }
    // deno-lint-ignore no-explicit-any
    const client = createClient(codeModeHostDefinition() as any, channel) as Json;
    const refused = await rejection(client.getProcessMetrics({}));
    assert.ok(refused instanceof ClientError);
    assert.equal(refused.code, Status.UNAUTHENTICATED);
    const authorized = { metadata: Metadata({ authorization: "Bearer s3cret" }) };
    assert.equal((await health.check({ service: "" }, authorized)).status, SERVING);
    const unimplemented = await rejection(client.getProcessMetrics({}, authorized));
    assert.ok(unimplemented instanceof ClientError);
    assert.equal(unimplemented.code, Status.UNIMPLEMENTED, "past the token check");
  } finally {
    channel.close();
  }
});

Deno.test("an address in use: `failed to bind code-mode gRPC host to ADDR: address already in use`, and the engine started for it is gone", async () => {
  await using first = await host();
  const before = runtimeDirs();
  const error = await rejection(host({ listen: `127.0.0.1:${first.port}` }));
  assert.ok(error instanceof Error);
  assert.equal(
    error.message,
    `failed to bind code-mode gRPC host to 127.0.0.1:${first.port}: address already in use`,
  );
  assert.deepEqual(runtimeDirs(), before, "the failed host's runtime directory was removed");
});

Deno.test("an invalid TLS pair is refused before anything starts", async () => {
  const before = runtimeDirs();
  const error = await rejection(host({ tls: { cert: "not a certificate", key: "" } }));
  assert.ok(error instanceof RangeError);
  assert.match(error.message, /^invalid TLS certificate: /);
  assert.deepEqual(runtimeDirs(), before);
});

Deno.test("unix:PATH: the url is the address, the socket is 0600 and serves; a live one is refused; shutdown removes it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "server-test-" });
  try {
    const path = `${dir}/host.sock`;
    const h = await host({ listen: `unix:${path}` });
    try {
      assert.equal(h.url, `unix:${path}`);
      assert.equal(h.port, 0);
      const info = Deno.lstatSync(path);
      assert.ok(info.isSocket);
      assert.equal(info.mode! & 0o777, 0o600);
      const channel = createChannel(`unix://${path}`); // nice-grpc reads `unix:/ABS` as a host name
      try {
        assert.equal((await createClient(HealthDefinition, channel).check({ service: "" })).status, SERVING);
      } finally {
        channel.close();
      }
      const error = await rejection(host({ listen: `unix:${path}` }));
      assert.equal(
        (error as Error).message,
        `failed to bind code-mode gRPC host to unix:${path}: another process is listening on ${path}`,
      );
    } finally {
      await h.shutdown();
    }
    assert.throws(() => Deno.lstatSync(path), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("connection: one HTTP/2 connection over given streams: the server answers the preface on them; ended resolves when the client's side ends", async () => {
  const toHost = new TransformStream<Uint8Array, Uint8Array>();
  const fromHost = new TransformStream<Uint8Array, Uint8Array>();
  const h = await host({ connection: { readable: toHost.readable, writable: fromHost.writable } });
  const writer = toHost.writable.getWriter();
  const reader = fromHost.readable.getReader();
  try {
    assert.equal(h.url, "grpc+stdio://");
    assert.equal(h.port, 0);
    await writer.write(new TextEncoder().encode("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
    await writer.write(new Uint8Array([0, 0, 0, 4, 0, 0, 0, 0, 0])); // an empty SETTINGS
    const { value } = await reader.read();
    assert.ok(value && value.length >= 9);
    assert.equal(value[3], 4, "the server's first frame is SETTINGS");
    await writer.close();
    await h.ended;
  } finally {
    // The host's side is read to its end, as a stdout would be.
    const drained = (async () => {
      while (!(await reader.read()).done) { /* discard */ }
    })().catch(() => {});
    await h.shutdown();
    await drained;
  }
});

Deno.test("shutdown: a health watcher sees NOT_SERVING, the log names both stages, the port closes; a second shutdown is the same", async () => {
  const h = await host();
  const channel = channelTo(h.url);
  const abort = new AbortController();
  const statuses: number[] = [];
  const serving = Promise.withResolvers<void>();
  const notServing = Promise.withResolvers<void>();
  const watching = (async () => {
    try {
      for await (
        const r of createClient(HealthDefinition, channel).watch({ service: "" }, { signal: abort.signal })
      ) {
        statuses.push(r.status);
        if (r.status === SERVING) serving.resolve();
        if (r.status === NOT_SERVING) notServing.resolve();
      }
    } catch { /* the server went away or the watch was cancelled */ }
  })();
  try {
    await serving.promise;
    const first = h.shutdown();
    assert.equal(h.shutdown(), first, "one shutdown");
    await notServing.promise;
    abort.abort();
    await first;
    assert.deepEqual(statuses, [SERVING, NOT_SERVING]);
    const messages = h.lines.map((l) => l.msg);
    assert.ok(
      messages.indexOf("code-mode host shutting down") < messages.indexOf("code-mode host shut down"),
    );
    await assert.rejects(
      Deno.connect({ hostname: "127.0.0.1", port: h.port }),
      Deno.errors.ConnectionRefused,
    );
  } finally {
    abort.abort();
    await watching;
    channel.close();
  }
});

Deno.test("kill: the server closes at once and the runtime directory goes", async () => {
  const before = runtimeDirs();
  const h = await host();
  assert.equal(runtimeDirs().length, before.length + 1);
  await h.kill();
  assert.deepEqual(runtimeDirs(), before);
  await assert.rejects(Deno.connect({ hostname: "127.0.0.1", port: h.port }), Deno.errors.ConnectionRefused);
});

Deno.test("a large response goes to the HTTP/2 stream as the buffer it was encoded in (no copy behind the gRPC prefix); a small one as grpc-js frames it", () => {
  const serialize = withoutSerializeCopy(codeModeHostDefinition()).execute.responseSerialize;
  /** grpc-js's server call class, as far as `serializeMessage` goes (a fake: its body is grpc-js 1.14's). */
  class Call {
    handler = { serialize: (value: unknown) => Buffer.from(serialize(value)) };
    serializeMessage(value: unknown): Buffer {
      const message = this.handler.serialize(value);
      const output = Buffer.allocUnsafe(message.byteLength + 5);
      output.writeUInt8(0, 0);
      output.writeUInt32BE(message.byteLength, 1);
      message.copy(output, 5);
      return output;
    }
  }
  const call = new Call();
  passFramedMessages(call);
  const seen: Buffer[] = [];
  const handler = call.handler.serialize;
  call.handler.serialize = (value) => {
    const bytes = handler(value);
    seen.push(bytes);
    return bytes;
  };
  const plain = codeModeHostDefinition().execute.responseSerialize;
  for (const text of ["x".repeat(1 << 20), "small"]) {
    const event = { outcome: { cellId: "c1", contentItems: [{ text: { text } }], completed: {} } };
    const sent = call.serializeMessage(event);
    const expected = plain(event);
    assert.equal(sent.readUInt32BE(1), expected.length);
    assert.equal(sent[0], 0);
    assert.ok(sent.subarray(5).equals(Buffer.from(expected)));
    assert.equal(sent === seen.at(-1), text !== "small", "only the large response is sent as encoded");
  }
});

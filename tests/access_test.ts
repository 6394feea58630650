/**
 * Access control end to end (SPEC §2.5, §9.1): the bearer token on every RPC of every service
 * (scenario 14d) and TLS (scenario 114b), in-process and through `deno task serve`.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { ChannelCredentials } from "@grpc/grpc-js";
import { createChannel, createClient, Metadata, Status } from "nice-grpc";
import { HealthDefinition } from "nice-grpc-server-health";
import { codeModeHostDefinition } from "../proto/loader.ts";
import { GrpcCodeModeSessionProvider } from "../client/provider.ts";
import { NoopCodeModeSessionDelegate } from "../client/session.ts";
import {
  CHANNEL_OPTIONS,
  grpcError,
  openSession,
  type RawClient,
  run,
  selfSigned,
  serve,
  startHost,
} from "./_harness.ts";

const REFUSED = { code: Status.UNAUTHENTICATED, details: "code-mode host requires a valid token" };
const bearer = (token: string) => ({ metadata: Metadata({ authorization: `Bearer ${token}` }) });

Deno.test("a token host refuses every RPC without the right bearer token before any other check", async () => {
  await using h = await startHost({ authToken: "s3cret" });
  assert.deepEqual(await grpcError(openSession(h.client)), REFUSED);
  assert.deepEqual(
    await grpcError(openSession(h.client, {}, Metadata({ authorization: "Bearer wrong" }))),
    REFUSED,
  );
  assert.deepEqual(
    await grpcError(openSession(h.client, {}, Metadata({ authorization: "s3cret" }))),
    REFUSED,
  );
  // Before validation and lookup: an unknown session is UNAUTHENTICATED, not NOT_FOUND.
  assert.deepEqual(await grpcError(h.client.closeSession({ sessionId: "nope" })), REFUSED);
  assert.deepEqual(await grpcError(h.client.wait({ sessionId: "", cellId: "", waitId: "" })), REFUSED);
  const channel = createChannel(h.address, undefined, CHANNEL_OPTIONS);
  try {
    const health = createClient(HealthDefinition, channel);
    assert.deepEqual(await grpcError(health.check({ service: "" })), REFUSED);
    assert.equal((await health.check({ service: "" }, bearer("s3cret"))).status, 1);
  } finally {
    channel.close();
  }
  // With the token, the session works end to end.
  await using s = await openSession(h.client, {}, Metadata({ authorization: "Bearer s3cret" }));
  const ran = await h.client.execute(
    { sessionId: s.id, executionId: "e1", toolCallId: "c", source: 'text("ok")', yieldTimeMs: 10_000 },
    bearer("s3cret"),
  );
  const events = [];
  for await (const event of ran) events.push(event);
  assert.equal(events.at(-1).outcome.contentItems[0].text.text, "ok");
  // The token never reaches the log.
  assert.ok(!JSON.stringify(h.log.lines).includes("s3cret"));
});

Deno.test("14d: `deno task serve --auth-token-file` requires `Bearer s3cret` on OpenSession and health", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cmh-token-" });
  try {
    await Deno.writeTextFile(`${dir}/token`, "  s3cret\n");
    await using host = await serve(["--listen", "grpc://127.0.0.1:0", "--auth-token-file", `${dir}/token`]);
    const channel = createChannel(host.url.replace("http://", ""), undefined, CHANNEL_OPTIONS);
    try {
      // deno-lint-ignore no-explicit-any
      const client = createClient(codeModeHostDefinition() as any, channel) as unknown as RawClient;
      assert.deepEqual(await grpcError(openSession(client)), REFUSED);
      assert.deepEqual(
        await grpcError(openSession(client, {}, Metadata({ authorization: "Bearer wrong" }))),
        REFUSED,
      );
      await using s = await openSession(client, {}, Metadata({ authorization: "Bearer s3cret" }));
      assert.ok(s.id);
      const health = createClient(HealthDefinition, channel);
      assert.deepEqual(await grpcError(health.check({ service: "" })), REFUSED);
    } finally {
      channel.close();
    }
    assert.ok(!host.stderr().includes("s3cret"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("an empty or unreadable token file stops the host with exit 2", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cmh-token-" });
  try {
    await Deno.writeTextFile(`${dir}/empty`, " \n");
    for (const path of [`${dir}/empty`, `${dir}/missing`]) {
      const host = await serve(["--listen", "grpc://127.0.0.1:0", "--auth-token-file", path], {
        expectFailure: true,
      });
      assert.equal((await host.exited()).code, 2);
      assert.match(host.stderr(), new RegExp(`failed to read --auth-token-file ${path}`));
      assert.deepEqual(host.stdoutLines, []);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/**
 * Client options for TLS to 127.0.0.1: Deno's `node:tls` refuses an IP address as the SNI server
 * name (grpc-js passes the target host), so the client names the certificate's `localhost` instead.
 */
const TLS_CHANNEL_OPTIONS = { ...CHANNEL_OPTIONS, "grpc.ssl_target_name_override": "localhost" };

Deno.test("114b: with --tls-cert and --tls-key the host prints https:// and a client trusting the certificate opens a session", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cmh-tls-" });
  try {
    const { cert, key } = await selfSigned(dir);
    await using host = await serve(["--listen", "grpc://127.0.0.1:0", "--tls-cert", cert, "--tls-key", key]);
    assert.match(host.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    assert.deepEqual(host.stdoutLines, [host.url]);
    const credentials = ChannelCredentials.createSsl(Buffer.from(await Deno.readTextFile(cert)));
    const channel = createChannel(host.url.replace("https://", ""), credentials, TLS_CHANNEL_OPTIONS);
    try {
      // deno-lint-ignore no-explicit-any
      const client = createClient(codeModeHostDefinition() as any, channel) as unknown as RawClient;
      await using s = await openSession(client);
      assert.deepEqual((await run(client, s.id, 'text("over tls")')).texts, ["over tls"]);
    } finally {
      channel.close();
    }
    // A plaintext client cannot talk to it.
    const plain = createChannel(host.url.replace("https://", ""), undefined, CHANNEL_OPTIONS);
    try {
      const health = createClient(HealthDefinition, plain);
      const error = await grpcError(health.check({ service: "" }, { signal: AbortSignal.timeout(5_000) }))
        .catch((e) => ({ code: -1, details: String(e) }));
      assert.notEqual(error.code, Status.OK);
    } finally {
      plain.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("114b: --tls-cert alone fails with exit 2", async () => {
  const host = await serve(["--listen", "grpc://127.0.0.1:0", "--tls-cert", "/nonexistent.pem"], {
    expectFailure: true,
  });
  assert.equal((await host.exited()).code, 2);
  assert.match(host.stderr(), /--tls-cert and --tls-key must be given together/);
});

Deno.test("TLS and a token together: the in-process host serves https and still checks the token", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cmh-tls-" });
  try {
    const paths = await selfSigned(dir);
    const tls = { cert: await Deno.readTextFile(paths.cert), key: await Deno.readTextFile(paths.key) };
    await using h = await startHost({ tls, authToken: "t0k" });
    assert.match(h.host.url, /^https:\/\//);
    const channel = createChannel(
      h.address,
      ChannelCredentials.createSsl(Buffer.from(tls.cert)),
      TLS_CHANNEL_OPTIONS,
    );
    try {
      const health = createClient(HealthDefinition, channel);
      assert.deepEqual(await grpcError(health.check({ service: "" })), REFUSED);
      assert.equal((await health.check({ service: "" }, bearer("t0k"))).status, 1);
    } finally {
      channel.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the client library opens a session over TLS with rootCertificates and tlsServerName, and a token", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cmh-tls-" });
  try {
    const paths = await selfSigned(dir);
    const tls = { cert: await Deno.readTextFile(paths.cert), key: await Deno.readTextFile(paths.key) };
    await using h = await startHost({ tls, authToken: "t0k" });
    const session = await new GrpcCodeModeSessionProvider(h.host.url, {
      rootCertificates: tls.cert,
      tlsServerName: "localhost",
      authToken: "t0k",
    }).createSession();
    const cell = await session.execute(
      { toolCallId: "c", enabledTools: [], source: 'text("secure")' },
      new NoopCodeModeSessionDelegate(),
    );
    assert.deepEqual((await cell.initialResponse()).contentItems, [{ type: "input_text", text: "secure" }]);
    await session.shutdown();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

import assert from "node:assert/strict";
import { isIP as nodeIsIP } from "node:net";
import fc from "fast-check";
import { isIP, ListenError, parseListenUrl, parseMetricsListen } from "./listen_url.ts";

Deno.test("parseListenUrl() accepts IP literals with any port, IPv6 in brackets", () => {
  assert.deepEqual(parseListenUrl("grpc://127.0.0.1:0", false), {
    kind: "grpc",
    ip: "127.0.0.1",
    port: 0,
    bind: "127.0.0.1:0",
    loopback: true,
  });
  assert.deepEqual(parseListenUrl("grpc://[::1]:50051", false), {
    kind: "grpc",
    ip: "::1",
    port: 50051,
    bind: "[::1]:50051",
    loopback: true,
  });
  const wide = parseListenUrl("grpc://10.0.0.1:1", true);
  assert.equal(wide.kind === "grpc" && wide.loopback, false);
});

Deno.test("parseListenUrl() returns the Unix and stdio forms", () => {
  assert.deepEqual(parseListenUrl("unix:/tmp/h.sock", false), { kind: "unix", path: "/tmp/h.sock" });
  assert.deepEqual(parseListenUrl("unix:./h.sock", false), { kind: "unix", path: "./h.sock" });
  assert.deepEqual(parseListenUrl("grpc+stdio://", false), { kind: "grpc-stdio" });
  assert.deepEqual(parseListenUrl("stdio", false), { kind: "stdio" });
  assert.deepEqual(parseListenUrl("stdio://", false), { kind: "stdio" });
});

Deno.test("parseListenUrl() rejects every other form with the SPEC §9.1 messages", async (t) => {
  const cases: [string, string][] = [
    ["grpc://localhost:9000", "invalid gRPC --listen URL `grpc://localhost:9000`; expected `grpc://IP:PORT`"],
    ["grpc://127.0.0.1", "invalid gRPC --listen URL `grpc://127.0.0.1`; expected `grpc://IP:PORT`"],
    ["grpc://::1:5", "invalid gRPC --listen URL `grpc://::1:5`; expected `grpc://IP:PORT`"],
    [
      "grpc://0.0.0.0:0",
      "refusing to listen on non-loopback address `0.0.0.0:0` without --allow-non-loopback",
    ],
    ["grpc://[::]:0", "refusing to listen on non-loopback address `[::]:0` without --allow-non-loopback"],
    [
      "unix:",
      "invalid Unix --listen URL `unix:` (the socket path is empty); expected `grpc://IP:PORT`, `unix:PATH`, `grpc+stdio://`, `stdio`, or `stdio://`",
    ],
    [
      "unix:///tmp/h.sock",
      "invalid Unix --listen URL `unix:///tmp/h.sock` (write `unix:/ABSOLUTE/PATH` or `unix:RELATIVE/PATH`); expected `grpc://IP:PORT`, `unix:PATH`, `grpc+stdio://`, `stdio`, or `stdio://`",
    ],
    [
      "grpc+stdio://x",
      "unsupported --listen URL `grpc+stdio://x`; expected `grpc://IP:PORT`, `unix:PATH`, `grpc+stdio://`, `stdio`, or `stdio://`",
    ],
    [
      "stdio:",
      "unsupported --listen URL `stdio:`; expected `grpc://IP:PORT`, `unix:PATH`, `grpc+stdio://`, `stdio`, or `stdio://`",
    ],
    [
      "http://127.0.0.1:1",
      "unsupported --listen URL `http://127.0.0.1:1`; expected `grpc://IP:PORT`, `unix:PATH`, `grpc+stdio://`, `stdio`, or `stdio://`",
    ],
  ];
  for (const [url, message] of cases) {
    await t.step(url, () => {
      assert.throws(
        () => parseListenUrl(url, false),
        (e) => e instanceof ListenError && e.message === message,
      );
    });
  }
});

Deno.test("parseListenUrl() accepts the MCP front door's forms, with the gRPC form's address rules", () => {
  assert.deepEqual(parseListenUrl("mcp+stdio", false), { kind: "mcp-stdio" });
  assert.deepEqual(parseListenUrl("mcp+stdio://", false), { kind: "mcp-stdio" });
  assert.deepEqual(parseListenUrl("mcp+http://[::1]:8080", false), {
    kind: "mcp-http",
    ip: "::1",
    port: 8080,
    bind: "[::1]:8080",
    loopback: true,
  });
  const wide = parseListenUrl("mcp+http://0.0.0.0:0", true);
  assert.equal(wide.kind === "mcp-http" && wide.loopback, false);
  assert.throws(
    () => parseListenUrl("mcp+http://0.0.0.0:0", false),
    (e) =>
      e instanceof ListenError &&
      e.message === "refusing to listen on non-loopback address `0.0.0.0:0` without --allow-non-loopback",
  );
  assert.throws(
    () => parseListenUrl("mcp+http://localhost:80", false),
    (e) =>
      e instanceof ListenError &&
      e.message === "invalid MCP --listen URL `mcp+http://localhost:80`; expected `mcp+http://IP:PORT`",
  );
  assert.throws(() => parseListenUrl("mcp+stdio:", false), /^ListenError: unsupported --listen URL/);
});

Deno.test("parseMetricsListen() reads IP:PORT as --listen does, with its own refusal", () => {
  assert.deepEqual(parseMetricsListen("[::1]:9464"), { hostname: "::1", port: 9464, address: "[::1]:9464" });
  assert.equal(parseMetricsListen("10.0.0.1:0", true).address, "10.0.0.1:0");
  for (
    const text of [
      "localhost:9464",
      "127.0.0.1",
      "[127.0.0.1]:1",
      "::1:5",
      "127.0.0.1:65536",
      "grpc://127.0.0.1:1",
    ]
  ) {
    assert.throws(
      () => parseMetricsListen(text),
      (e) =>
        e instanceof ListenError &&
        e.message === `invalid --metrics-listen \`${text}\`; expected \`IP:PORT\``,
      text,
    );
  }
  assert.throws(
    () => parseMetricsListen("[::]:0"),
    (e) =>
      e instanceof ListenError &&
      e.message === "refusing to listen on non-loopback address `[::]:0` without --allow-non-loopback",
  );
});

Deno.test("isIP gives the family node:net's isIP gives, for listed and random texts", () => {
  for (
    const text of [
      "127.0.0.1",
      "0.0.0.0",
      "255.255.255.255",
      "256.0.0.1",
      "01.2.3.4",
      "1.2.3",
      "127.1",
      "::",
      "::1",
      "0:0:0:0:0:0:0:1",
      "fe80::1%eth0",
      "::ffff:127.0.0.1",
      "1:2:3:4:5:6:7:8",
      "1:2:3:4:5:6:7:8:9",
      "1::2::3",
      "[::1]",
      "localhost",
      "",
      " 127.0.0.1",
      "2001:db8::ff00:42:8329",
      "::ffff:1.2.3.256",
    ]
  ) assert.equal(isIP(text), nodeIsIP(text), text);
  const chars = fc.constantFrom(..."0123456789abcdefABCDEF:.%[]x -".split(""));
  fc.assert(
    fc.property(fc.array(chars, { maxLength: 40 }).map((c: string[]) => c.join("")), (text: string) => {
      assert.equal(isIP(text), nodeIsIP(text), text);
    }),
    { numRuns: 20_000 },
  );
  fc.assert(
    fc.property(fc.ipV4(), fc.ipV6(), (v4: string, v6: string) => {
      assert.equal(isIP(v4), 4, v4);
      assert.equal(isIP(v6), 6, v6);
    }),
  );
});

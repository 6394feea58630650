import assert from "node:assert/strict";
import { ListenError, parseListenUrl } from "./listen_url.ts";

Deno.test("parseListenUrl() accepts IP literals with any port, IPv6 in brackets", () => {
  assert.deepEqual(parseListenUrl("grpc://127.0.0.1:0", false), {
    ip: "127.0.0.1",
    port: 0,
    bind: "127.0.0.1:0",
    loopback: true,
  });
  assert.deepEqual(parseListenUrl("grpc://[::1]:50051", false), {
    ip: "::1",
    port: 50051,
    bind: "[::1]:50051",
    loopback: true,
  });
  assert.equal((parseListenUrl("grpc://10.0.0.1:1", true) as { loopback: boolean }).loopback, false);
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
    ["unix:./h.sock", "--listen `unix:./h.sock` is not supported by this build"],
    ["grpc+stdio://", "--listen `grpc+stdio://` is not supported by this build"],
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

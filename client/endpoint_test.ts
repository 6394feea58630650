import assert from "node:assert/strict";
import { parseEndpoint } from "./endpoint.ts";

function messageOf(endpoint: string): string {
  try {
    parseEndpoint(endpoint);
  } catch (error) {
    assert.ok(error instanceof Error);
    return error.message;
  }
  assert.fail(`${JSON.stringify(endpoint)} was accepted`);
}

function tcpPort(endpoint: string): number {
  const parsed = parseEndpoint(endpoint);
  assert.equal(parsed.kind, "tcp");
  return parsed.kind === "tcp" ? parsed.port : NaN;
}

function assertRejects(endpoint: string, message: string | RegExp) {
  assert.throws(
    () => parseEndpoint(endpoint),
    (error) => {
      assert.ok(error instanceof Error);
      if (typeof message === "string") assert.equal(error.message, message);
      else assert.match(error.message, message);
      return true;
    },
  );
}

Deno.test("parseEndpoint() accepts http and https with a host and port", () => {
  assert.deepEqual(parseEndpoint("http://127.0.0.1:50051"), {
    kind: "tcp",
    secure: false,
    host: "127.0.0.1",
    port: 50051,
    address: "127.0.0.1:50051",
  });
  assert.deepEqual(parseEndpoint("https://example.com:8443"), {
    kind: "tcp",
    secure: true,
    host: "example.com",
    port: 8443,
    address: "example.com:8443",
  });
  assert.deepEqual(parseEndpoint("http://localhost:1/"), {
    kind: "tcp",
    secure: false,
    host: "localhost",
    port: 1,
    address: "localhost:1",
  });
});

Deno.test("parseEndpoint() keeps an IPv6 literal in brackets in the address only", () => {
  assert.deepEqual(parseEndpoint("http://[::1]:50051"), {
    kind: "tcp",
    secure: false,
    host: "::1",
    port: 50051,
    address: "[::1]:50051",
  });
  assert.equal(parseEndpoint("https://[0:0:0:0:0:0:0:1]:443").address, "[::1]:443");
});

Deno.test("parseEndpoint() defaults a missing or explicit default port to 80 for http and 443 for https", () => {
  assert.equal(tcpPort("http://127.0.0.1"), 80);
  assert.equal(parseEndpoint("http://127.0.0.1:80").address, "127.0.0.1:80");
  assert.equal(tcpPort("https://example.com"), 443);
  assert.equal(parseEndpoint("https://example.com:443").address, "example.com:443");
  assert.equal(tcpPort("https://example.com:80"), 80);
});

Deno.test("parseEndpoint() normalises the scheme and host the way a URL does", () => {
  assert.deepEqual(parseEndpoint("HTTP://LocalHost:7"), {
    kind: "tcp",
    secure: false,
    host: "localhost",
    port: 7,
    address: "localhost:7",
  });
  assert.equal(parseEndpoint("  http://127.0.0.1:7/.  ").address, "127.0.0.1:7");
});

Deno.test("parseEndpoint() prefixes dns: to a host that grpc-js would read as a resolver scheme", () => {
  assert.equal(parseEndpoint("http://unix:50051").address, "dns:unix:50051");
  assert.equal(parseEndpoint("http://dns:1").address, "dns:dns:1");
  assert.equal(parseEndpoint("https://ipv4").address, "dns:ipv4:443");
  assert.equal(parseEndpoint("http://ipv6:2").address, "dns:ipv6:2");
  assert.equal(parseEndpoint("http://unixes:2").address, "unixes:2");
});

Deno.test("parseEndpoint() accepts unix:PATH and unix://PATH, absolute or relative", () => {
  assert.deepEqual(parseEndpoint("unix:/tmp/h.sock"), {
    kind: "unix",
    path: "/tmp/h.sock",
    address: "unix:///tmp/h.sock",
  });
  assert.deepEqual(parseEndpoint("unix:///tmp/h.sock"), {
    kind: "unix",
    path: "/tmp/h.sock",
    address: "unix:///tmp/h.sock",
  });
  assert.deepEqual(parseEndpoint("unix:./h.sock"), {
    kind: "unix",
    path: "./h.sock",
    address: "unix://././h.sock",
  });
  assert.deepEqual(parseEndpoint("unix:h.sock"), {
    kind: "unix",
    path: "h.sock",
    address: "unix://./h.sock",
  });
  assert.deepEqual(parseEndpoint("unix://run/h.sock"), {
    kind: "unix",
    path: "run/h.sock",
    address: "unix://./run/h.sock",
  });
  assert.deepEqual(parseEndpoint("unix:/tmp/a b?c#d@e:80"), {
    kind: "unix",
    path: "/tmp/a b?c#d@e:80",
    address: "unix:///tmp/a b?c#d@e:80",
  });
});

Deno.test("parseEndpoint() refuses an empty Unix socket path", () => {
  assertRejects("unix:", "invalid gRPC code-mode Unix socket endpoint: the socket path is empty");
  assertRejects("unix://", "invalid gRPC code-mode Unix socket endpoint: the socket path is empty");
});

Deno.test("parseEndpoint() refuses a Unix socket path containing NUL", () => {
  assertRejects(
    "unix:/tmp/a\0b",
    "invalid gRPC code-mode Unix socket endpoint: the socket path contains a NUL character",
  );
  assertRejects(
    "unix://\0",
    "invalid gRPC code-mode Unix socket endpoint: the socket path contains a NUL character",
  );
});

Deno.test("parseEndpoint() refuses a Unix socket path containing a line break", () => {
  for (const endpoint of ["unix:/tmp/a\nb", "unix:/tmp/a\rb", "unix:a\u2028b", "unix://a\u2029b"]) {
    assertRejects(
      endpoint,
      "invalid gRPC code-mode Unix socket endpoint: the socket path contains a line break",
    );
  }
});

Deno.test("parseEndpoint() reports an unparseable URL with a reason that never repeats it", async (t) => {
  const cases: [string, string][] = [
    ["", "relative URL without a base"],
    ["127.0.0.1:50051x", "relative URL without a base"],
    ["/tmp/h.sock", "relative URL without a base"],
    ["http://", "empty host"],
    ["http://:50051", "empty host"],
    ["https://secret@:1", "empty host"],
    ["http://[::1:50051", "invalid IPv6 address"],
    ["http://[::g]:1", "invalid IPv6 address"],
    ["http://1.2.3.256:1", "invalid IPv4 address"],
    ["http://exa mple:1", "invalid domain character"],
    ["http://127.0.0.1:99999", "invalid port number"],
    ["http://127.0.0.1:5x", "invalid port number"],
    ["http://user:secret@127.0.0.1:99999", "invalid port number"],
  ];
  for (const [endpoint, reason] of cases) {
    await t.step(JSON.stringify(endpoint), () => {
      assertRejects(endpoint, `invalid gRPC code-mode host URL: ${reason}`);
    });
  }
});

Deno.test("parseEndpoint() requires the http or https scheme", () => {
  for (
    const endpoint of [
      "grpc://127.0.0.1:1",
      "ftp://127.0.0.1:1",
      "HTTPS+x://h:1",
      "UNIX:/tmp/h.sock",
      "ws://h:1",
    ]
  ) {
    assertRejects(endpoint, "gRPC code-mode host URL must use http or https");
  }
});

Deno.test("parseEndpoint() refuses credentials without repeating them", async (t) => {
  const cases = [
    "http://user:pa55@127.0.0.1:1",
    "http://alice:secret@127.0.0.1:1",
    "https://alice@127.0.0.1:1",
    "https://:secret@127.0.0.1:1",
    "http://alice:secret@127.0.0.1:1/path?q#f",
  ];
  for (const endpoint of cases) {
    await t.step(endpoint, () => {
      assertRejects(endpoint, "gRPC code-mode host URL must not include credentials");
    });
  }
});

Deno.test("parseEndpoint() error for http://user:pa55@127.0.0.1:1 contains neither user nor pa55", () => {
  const message = messageOf("http://user:pa55@127.0.0.1:1");
  assert.equal(message, "gRPC code-mode host URL must not include credentials");
  assert.ok(!message.includes("user") && !message.includes("pa55"), message);
});

Deno.test("parseEndpoint() never repeats credentials of an unparseable URL", () => {
  for (
    const endpoint of ["http://alice:secret@[::1", "http://alice:secret@exa mple:1", "http://alice:secret@:1"]
  ) {
    const message = messageOf(endpoint);
    assert.match(message, /^invalid gRPC code-mode host URL: /);
    assert.ok(!message.includes("alice") && !message.includes("secret"), message);
  }
});

Deno.test("parseEndpoint() refuses a path, query or fragment, even an empty ? or #", async (t) => {
  const cases = [
    "http://127.0.0.1:1/a",
    "http://127.0.0.1:1/a/",
    "http://127.0.0.1:1//",
    "http://127.0.0.1:1/?",
    "http://127.0.0.1:1?",
    "http://127.0.0.1:1#",
    "http://127.0.0.1:1/#",
    "http://127.0.0.1:1?q=1",
    "http://127.0.0.1:1#frag",
    "https://[::1]:1/grpc",
    "http://127.0.0.1:1/%3F",
  ];
  for (const endpoint of cases) {
    await t.step(endpoint, () => {
      assertRejects(endpoint, "gRPC code-mode host URL must not include a path, query, or fragment");
    });
  }
});

Deno.test("parseEndpoint() checks the scheme before credentials and credentials before the path", () => {
  assertRejects("ftp://u:p@h:1/x", "gRPC code-mode host URL must use http or https");
  assertRejects("http://u:p@h:1/x?y", "gRPC code-mode host URL must not include credentials");
});

/**
 * Parsing of the provider's endpoint (SPEC §10.2) into a gRPC channel address, with the exact error
 * messages. No error message ever repeats the endpoint, so credentials in it cannot leak.
 *
 * @module
 */

/**
 * A parsed endpoint. `address` is the target to hand to nice-grpc's `createChannel(address,
 * credentials, options)` (and equally to grpc-js's `new Channel(address, credentials, options)`).
 *
 * - `tcp`: `host` is the URL's host name (lower-cased, IDNA-encoded, an IPv6 literal without
 *   brackets); `port` is the explicit port or the scheme's default (80 for http, 443 for https);
 *   `secure` is true for https (TLS), false for http (HTTP/2 prior knowledge). `address` is
 *   `HOST:PORT`, an IPv6 literal in brackets; a host named like a grpc-js resolver scheme (`dns`,
 *   `ipv4`, `ipv6`, `unix`) gets a `dns:` prefix so that it is not read as that scheme.
 * - `unix`: `path` is the socket path exactly as written. `address` is `unix:///ABS` for an absolute
 *   path and `unix://./REL` for a relative one (resolved against the working directory when the
 *   connection is made). The plainer `unix:/ABS` and `unix:REL` do not work with nice-grpc's
 *   `createChannel`, which appends `:80` to any address without `://`.
 */
export type ParsedEndpoint =
  | { kind: "tcp"; secure: boolean; host: string; port: number; address: string }
  | { kind: "unix"; path: string; address: string };

const RESOLVER_SCHEMES = new Set(["dns", "ipv4", "ipv6", "unix"]);

function unixEndpoint(path: string): ParsedEndpoint {
  let reason: string | undefined;
  if (path === "") reason = "the socket path is empty";
  else if (path.includes("\0")) reason = "the socket path contains a NUL character";
  // grpc-js and nice-grpc parse targets with `.`, which matches no line terminator.
  else if (/[\n\r\u2028\u2029]/.test(path)) reason = "the socket path contains a line break";
  if (reason !== undefined) throw new Error(`invalid gRPC code-mode Unix socket endpoint: ${reason}`);
  const address = path.startsWith("/") ? `unix://${path}` : `unix://./${path}`;
  return { kind: "unix", path, address };
}

/**
 * Why the URL parser refused `endpoint`, as a short fixed phrase (in the url crate's wording) that
 * never quotes the endpoint: the WHATWG parser's own message (`Invalid URL: '…'`) repeats the
 * whole input, credentials included.
 */
function urlParseReason(endpoint: string): string {
  // The WHATWG parser first trims C0 controls and spaces, then drops every tab and newline.
  // deno-lint-ignore no-control-regex
  const input = endpoint.replace(/^[\x00-\x20]+|[\x00-\x20]+$/g, "").replace(/[\t\n\r]/g, "");
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:/.exec(input);
  if (scheme === null) return "relative URL without a base";
  const authority = input.slice(scheme[0].length).replace(/^[/\\]*/, "").split(/[/\\?#]/, 1)[0];
  const hostPort = authority.slice(authority.lastIndexOf("@") + 1);
  const [, host, port] = /^(\[[^\]]*\]?|[^:]*)(?::(.*))?$/s.exec(hostPort)!;
  if (host === "") return "empty host";
  if (!URL.canParse(`http://${host}/`)) {
    if (host.startsWith("[")) return "invalid IPv6 address";
    if (/(?:^|\.)(?:\d+|0x[0-9a-f]*)\.?$/i.test(host)) return "invalid IPv4 address";
    if (/[\u0080-\uffff]/.test(host)) return "invalid international domain name";
    return "invalid domain character";
  }
  if (port !== undefined && (!/^\d*$/.test(port) || Number(port) > 65535)) return "invalid port number";
  return "invalid URL";
}

/**
 * Parses a provider endpoint (SPEC §10.2): `http://HOST:PORT`, `https://HOST:PORT`, `unix:PATH` or
 * `unix://PATH`.
 *
 * - `unix://PATH` and `unix:PATH` (checked first, case-sensitive) take everything after the prefix
 *   as the socket path; `unix:///tmp/h.sock` is `/tmp/h.sock`, `unix://./h.sock` and `unix:h.sock`
 *   are relative. An empty path or one containing NUL (or a line break, which the gRPC target
 *   parser cannot carry) is refused.
 * - Anything else is parsed as a WHATWG URL (surrounding spaces and controls are ignored, like the
 *   url crate does); a missing port defaults to 80 for http and 443 for https. The only path allowed
 *   is `/` (or one that normalises to it, like `/.`).
 *
 * @param endpoint the endpoint given to the provider
 * @returns the endpoint kind, its parts and the channel address
 * @throws {Error} with the SPEC §10.2 message, checked in this order: `invalid gRPC code-mode host
 *   URL: {reason}`, `gRPC code-mode host URL must use http or https`, `gRPC code-mode host URL must
 *   not include credentials`, `gRPC code-mode host URL must not include a path, query, or fragment`;
 *   for Unix forms `invalid gRPC code-mode Unix socket endpoint: {reason}`. No message repeats the
 *   endpoint.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.deepEqual(parseEndpoint("http://[::1]:50051"), {
 *   kind: "tcp",
 *   secure: false,
 *   host: "::1",
 *   port: 50051,
 *   address: "[::1]:50051",
 * });
 * assert.equal(parseEndpoint("unix:///tmp/h.sock").address, "unix:///tmp/h.sock");
 * assert.throws(() => parseEndpoint("http://u:p@127.0.0.1:1"), {
 *   message: "gRPC code-mode host URL must not include credentials",
 * });
 * ```
 */
export function parseEndpoint(endpoint: string): ParsedEndpoint {
  if (endpoint.startsWith("unix://")) return unixEndpoint(endpoint.slice("unix://".length));
  if (endpoint.startsWith("unix:")) return unixEndpoint(endpoint.slice("unix:".length));
  const url = URL.parse(endpoint);
  if (url === null) throw new Error(`invalid gRPC code-mode host URL: ${urlParseReason(endpoint)}`);
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new Error("gRPC code-mode host URL must use http or https");
  }
  if (url.username !== "" || url.password !== "") {
    throw new Error("gRPC code-mode host URL must not include credentials");
  }
  // `search` and `hash` are "" for both an absent and an empty `?`/`#`; the serialisation keeps
  // the delimiter of an empty one, and encodes any `?`/`#` elsewhere.
  if (url.pathname !== "/" || url.href.includes("?") || url.href.includes("#")) {
    throw new Error("gRPC code-mode host URL must not include a path, query, or fragment");
  }
  const secure = url.protocol === "https:";
  const port = url.port === "" ? (secure ? 443 : 80) : Number(url.port);
  const bracketed = url.hostname.startsWith("[");
  const host = bracketed ? url.hostname.slice(1, -1) : url.hostname;
  const hostPort = `${url.hostname}:${port}`;
  const address = RESOLVER_SCHEMES.has(host) ? `dns:${hostPort}` : hostPort;
  return { kind: "tcp", secure, host, port, address };
}

/**
 * Parsing of `--listen` (SPEC §9.1) into one of the transports this build serves, with the exact
 * error messages.
 *
 * @module
 */

// `node:net`'s `isIP`, with Node's own expressions (lib/internal/net.js): importing `node:net` costs a
// host ~10 ms of its thread before its first runtime can be spawned (the flags are read first).
const V4_SEG = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])";
const V4_STR = `(?:${V4_SEG}\\.){3}${V4_SEG}`;
const IPV4 = new RegExp(`^${V4_STR}$`);
const V6_SEG = "(?:[0-9a-fA-F]{1,4})";
const IPV6 = new RegExp(
  "^(?:" +
    `(?:${V6_SEG}:){7}(?:${V6_SEG}|:)|` +
    `(?:${V6_SEG}:){6}(?:${V4_STR}|:${V6_SEG}|:)|` +
    `(?:${V6_SEG}:){5}(?::${V4_STR}|(?::${V6_SEG}){1,2}|:)|` +
    `(?:${V6_SEG}:){4}(?:(?::${V6_SEG}){0,1}:${V4_STR}|(?::${V6_SEG}){1,3}|:)|` +
    `(?:${V6_SEG}:){3}(?:(?::${V6_SEG}){0,2}:${V4_STR}|(?::${V6_SEG}){1,4}|:)|` +
    `(?:${V6_SEG}:){2}(?:(?::${V6_SEG}){0,3}:${V4_STR}|(?::${V6_SEG}){1,5}|:)|` +
    `(?:${V6_SEG}:){1}(?:(?::${V6_SEG}){0,4}:${V4_STR}|(?::${V6_SEG}){1,6}|:)|` +
    `(?::(?:(?::${V6_SEG}){0,5}:${V4_STR}|(?::${V6_SEG}){1,7}|:))` +
    ")(?:%[0-9a-zA-Z-.:]{1,})?$",
);

/**
 * The family of an IP literal, as `node:net`'s `isIP` gives it.
 *
 * @param ip the text
 * @returns 4, 6, or 0 for no IP literal
 */
export function isIP(ip: string): 0 | 4 | 6 {
  return IPV4.test(ip) ? 4 : IPV6.test(ip) ? 6 : 0;
}

/** A parsed `grpc://IP:PORT`. */
export interface ListenAddress {
  kind: "grpc";
  /** The IP literal (IPv6 without brackets). */
  ip: string;
  port: number;
  /** `IP:PORT` as gRPC binds it (IPv6 in brackets). */
  bind: string;
  loopback: boolean;
}

/** A parsed `--listen` value: one variant per transport of SPEC §9.1. */
export type ListenTarget =
  | ListenAddress
  /** `unix:PATH`: gRPC on a Unix domain socket; `path` exactly as written. */
  | { kind: "unix"; path: string }
  /** `grpc+stdio://`: gRPC over one HTTP/2 connection on stdin/stdout. */
  | { kind: "grpc-stdio" }
  /** `stdio` or `stdio://`: JSON host V1 (SPEC §9.10) on stdin/stdout. */
  | { kind: "stdio" }
  /** `mcp+stdio`, `mcp+stdio://`: the MCP server front door on stdin/stdout. */
  | { kind: "mcp-stdio" }
  /** `mcp+http://IP:PORT`: the MCP server front door over Streamable HTTP. */
  | Omit<ListenAddress, "kind"> & { kind: "mcp-http" };

/** Every form of `--listen` this build accepts, as the error messages list them. */
export const LISTEN_FORMS = "`grpc://IP:PORT`, `unix:PATH`, `grpc+stdio://`, `stdio`, or `stdio://`";

/** A `--listen` value this build refuses, with its exact message and exit code 2. */
export class ListenError extends Error {
  override name = "ListenError";
}

function loopback(ip: string): boolean {
  return isIP(ip) === 4 ? ip.startsWith("127.") : ip === "::1" || ip === "0:0:0:0:0:0:0:1";
}

/**
 * The one `IP:PORT` reader of every listen address (`--listen grpc://`, `mcp+http://`,
 * `--metrics-listen`): an IP literal (IPv6 in brackets) and a port up to 65535, refused outside
 * loopback unless allowed.
 *
 * @returns the address, or `undefined` when `text` is no `IP:PORT` (each caller words that refusal)
 * @throws {ListenError} ``refusing to listen on non-loopback address `{IP:PORT}` without --allow-non-loopback``
 */
function parseIpPort(text: string, allowNonLoopback: boolean): Omit<ListenAddress, "kind"> | undefined {
  const match = /^(?:\[([^\]]+)\]|([^:\[\]]+)):(\d{1,5})$/.exec(text);
  const ip = match ? (match[1] ?? match[2]) : "";
  const port = match ? Number(match[3]) : NaN;
  const family = isIP(ip);
  if (!match || family === 0 || (match[1] !== undefined && family !== 6) || port > 65535) return undefined;
  const bind = family === 6 ? `[${ip}]:${port}` : `${ip}:${port}`;
  const isLoopback = loopback(ip);
  if (!isLoopback && !allowNonLoopback) {
    throw new ListenError(
      `refusing to listen on non-loopback address \`${bind}\` without --allow-non-loopback`,
    );
  }
  return { ip, port, bind, loopback: isLoopback };
}

/** `SCHEME://IP:PORT` (see {@link parseIpPort}). */
function parseAddress(
  url: string,
  scheme: string,
  what: string,
  allowNonLoopback: boolean,
): Omit<ListenAddress, "kind"> {
  const address = parseIpPort(url.slice(scheme.length), allowNonLoopback);
  if (address === undefined) {
    throw new ListenError(`invalid ${what} --listen URL \`${url}\`; expected \`${scheme}IP:PORT\``);
  }
  return address;
}

/** Why a `unix:PATH` socket path is refused, or `undefined` when it is accepted. */
function unixPathProblem(path: string): string | undefined {
  if (path === "") return "the socket path is empty";
  if (path.startsWith("//")) return "write `unix:/ABSOLUTE/PATH` or `unix:RELATIVE/PATH`";
  if (path.includes("\0")) return "the socket path contains a NUL character";
  if (/[\n\r\u2028\u2029]/.test(path)) return "the socket path contains a line break";
  return undefined;
}

/**
 * Parses a `--listen` URL. Besides the forms of SPEC §9.1 it accepts the MCP front door's
 * `mcp+stdio` (or `mcp+stdio://`) and `mcp+http://IP:PORT`; the message for an unsupported URL
 * stays the SPEC's, which lists only the SPEC's forms.
 *
 * @param url the flag's value
 * @param allowNonLoopback `--allow-non-loopback`
 * @returns the transport and its address
 * @throws {ListenError} with the SPEC §9.1 message
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const target = parseListenUrl("grpc://127.0.0.1:0", false);
 * assert.equal(target.kind === "grpc" && target.bind, "127.0.0.1:0");
 * assert.deepEqual(parseListenUrl("unix:/tmp/h.sock", false), { kind: "unix", path: "/tmp/h.sock" });
 * assert.deepEqual(parseListenUrl("grpc+stdio://", false), { kind: "grpc-stdio" });
 * assert.deepEqual(parseListenUrl("mcp+stdio", false), { kind: "mcp-stdio" });
 * assert.equal(parseListenUrl("mcp+http://127.0.0.1:0", false).kind, "mcp-http");
 * assert.throws(() => parseListenUrl("grpc://localhost:9000", false), /expected `grpc:\/\/IP:PORT`/);
 * ```
 */
export function parseListenUrl(url: string, allowNonLoopback: boolean): ListenTarget {
  if (url.startsWith("grpc://")) {
    const address = parseAddress(url, "grpc://", "gRPC", allowNonLoopback);
    return { kind: "grpc", ...address };
  }
  if (url.startsWith("mcp+http://")) {
    const address = parseAddress(url, "mcp+http://", "MCP", allowNonLoopback);
    return { kind: "mcp-http", ...address };
  }
  if (url === "mcp+stdio" || url === "mcp+stdio://") return { kind: "mcp-stdio" };
  if (url.startsWith("unix:")) {
    const path = url.slice("unix:".length);
    const reason = unixPathProblem(path);
    if (reason !== undefined) {
      throw new ListenError(`invalid Unix --listen URL \`${url}\` (${reason}); expected ${LISTEN_FORMS}`);
    }
    return { kind: "unix", path };
  }
  if (url === "grpc+stdio://") return { kind: "grpc-stdio" };
  if (url === "stdio" || url === "stdio://") return { kind: "stdio" };
  throw new ListenError(`unsupported --listen URL \`${url}\`; expected ${LISTEN_FORMS}`);
}

/** A parsed `--metrics-listen IP:PORT`. */
export interface MetricsAddress {
  /** The IP literal (IPv6 without brackets). */
  hostname: string;
  port: number;
  /** `IP:PORT` as written back (IPv6 in brackets). */
  address: string;
}

/**
 * Parses `--metrics-listen IP:PORT` (IPv6 in brackets; port 0 picks a free port). As for every
 * listen address (SPEC §1: a non-loopback address needs `--allow-non-loopback`), an address outside
 * loopback is refused unless allowed, although the listener serves counts and probes only.
 *
 * @param text the flag's value
 * @param allowNonLoopback `--allow-non-loopback`
 * @returns the address
 * @throws {ListenError} ``invalid --metrics-listen `{text}`; expected `IP:PORT` ``, or
 * ``refusing to listen on non-loopback address `{IP:PORT}` without --allow-non-loopback``
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.deepEqual(parseMetricsListen("127.0.0.1:9464"), {
 *   hostname: "127.0.0.1",
 *   port: 9464,
 *   address: "127.0.0.1:9464",
 * });
 * assert.throws(() => parseMetricsListen("localhost:9464"), /expected `IP:PORT`/);
 * assert.throws(() => parseMetricsListen("0.0.0.0:9464"), /without --allow-non-loopback/);
 * assert.equal(parseMetricsListen("0.0.0.0:9464", true).address, "0.0.0.0:9464");
 * ```
 */
export function parseMetricsListen(text: string, allowNonLoopback = false): MetricsAddress {
  const address = parseIpPort(text, allowNonLoopback);
  if (address === undefined) {
    throw new ListenError(`invalid --metrics-listen \`${text}\`; expected \`IP:PORT\``);
  }
  return { hostname: address.ip, port: address.port, address: address.bind };
}

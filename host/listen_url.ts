/**
 * Parsing of `--listen` (SPEC §9.1) into a bind address, with the exact error messages.
 *
 * @module
 */
import { isIP } from "node:net";

/** A parsed `grpc://IP:PORT`. */
export interface ListenAddress {
  /** The IP literal (IPv6 without brackets). */
  ip: string;
  port: number;
  /** `IP:PORT` as gRPC binds it (IPv6 in brackets). */
  bind: string;
  loopback: boolean;
}

/** `stdio` or `stdio://`: JSON "host V1" on stdin/stdout (SPEC §9.10). */
export interface StdioListen {
  kind: "stdio";
}

/** A `--listen` value this build refuses, with its exact message and exit code 2. */
export class ListenError extends Error {
  override name = "ListenError";
}

function loopback(ip: string): boolean {
  return isIP(ip) === 4 ? ip.startsWith("127.") : ip === "::1" || ip === "0:0:0:0:0:0:0:1";
}

/**
 * Parses a `--listen` URL.
 *
 * @param url the flag's value
 * @param allowNonLoopback `--allow-non-loopback`
 * @returns the bind address
 * @throws {ListenError} with the SPEC §9.1 message
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.deepEqual(parseListenUrl("grpc://127.0.0.1:0", false), {
 *   ip: "127.0.0.1",
 *   port: 0,
 *   bind: "127.0.0.1:0",
 *   loopback: true,
 * });
 * assert.throws(() => parseListenUrl("grpc://localhost:9000", false), /expected `grpc:\/\/IP:PORT`/);
 * ```
 */
export function parseListenUrl(url: string, allowNonLoopback: boolean): ListenAddress | StdioListen {
  if (url === "stdio" || url === "stdio://") return { kind: "stdio" };
  if (url.startsWith("grpc://")) {
    const rest = url.slice("grpc://".length);
    const match = /^(?:\[([^\]]+)\]|([^:\[\]]+)):(\d{1,5})$/.exec(rest);
    const ip = match ? (match[1] ?? match[2]) : "";
    const port = match ? Number(match[3]) : NaN;
    const family = isIP(ip);
    if (!match || family === 0 || (match[1] !== undefined && family !== 6) || port > 65535) {
      throw new ListenError(`invalid gRPC --listen URL \`${url}\`; expected \`grpc://IP:PORT\``);
    }
    const bind = family === 6 ? `[${ip}]:${port}` : `${ip}:${port}`;
    const isLoopback = loopback(ip);
    if (!isLoopback && !allowNonLoopback) {
      throw new ListenError(
        `refusing to listen on non-loopback address \`${bind}\` without --allow-non-loopback`,
      );
    }
    return { ip, port, bind, loopback: isLoopback };
  }
  if (url.startsWith("unix:") || url === "grpc+stdio://") {
    throw new ListenError(`--listen \`${url}\` is not supported by this build`);
  }
  throw new ListenError(
    `unsupported --listen URL \`${url}\`; expected \`grpc://IP:PORT\`, \`unix:PATH\`, \`grpc+stdio://\`, \`stdio\`, or \`stdio://\``,
  );
}

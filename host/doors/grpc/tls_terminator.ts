/**
 * TLS for the gRPC server, terminated with Deno's own TLS (`Deno.listenTls`, rustls) in front of
 * the plaintext server, which then listens only on a Unix socket in a private directory.
 *
 * Why: on Deno 2.9.6 the `node:http2` secure server that grpc-js uses breaks the handshake (clients
 * fail with `excessive message size` after the server's Encrypted Extensions), so grpc-js cannot
 * serve TLS itself.
 *
 * - Each accepted TLS connection (ALPN `h2`) is relayed byte for byte to the Unix socket
 *   (`proto/byte_relay.ts`); HTTP/2, keep-alive PINGs and stream resets pass through unchanged.
 * - When either side ends, both are closed.
 * - `close()` stops accepting, closes every relayed connection and waits for the relays to end.
 *
 * @module
 */

import { createPrivateKey, X509Certificate } from "node:crypto";
import { relayBytes } from "../../../proto/byte_relay.ts";

/** A PEM certificate or key that TLS cannot use, found before anything is bound. */
export class TlsPemError extends Error {
  override name = "TlsPemError";
  /** What is wrong: the certificate, the key, or a key that is not the certificate's. */
  readonly part: "certificate" | "key" | "pair";
  /** The cause, lower-case. */
  readonly detail: string;
  /**
   * @param part what is wrong
   * @param detail the cause
   */
  constructor(part: "certificate" | "key" | "pair", detail: string) {
    super(
      part === "pair" ? `invalid TLS key: ${detail}` : `invalid TLS ${part}: ${detail}`,
    );
    this.part = part;
    this.detail = detail;
  }
}

/**
 * Checks a PEM certificate chain and private key before serving TLS with them.
 *
 * @param cert the PEM certificate chain (its first certificate is the server's)
 * @param key the PEM private key
 * @throws {TlsPemError} naming the part and the cause
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkTlsPem } from "./tls_terminator.ts";
 *
 * assert.throws(() => checkTlsPem("not a certificate", "no key"), /invalid TLS certificate: no PEM certificate found/);
 * ```
 */
export function checkTlsPem(cert: string, key: string): void {
  if (!cert.includes("-----BEGIN CERTIFICATE-----")) {
    throw new TlsPemError("certificate", "no PEM certificate found");
  }
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(cert);
  } catch (error) {
    throw new TlsPemError("certificate", `cannot parse the certificate (${(error as Error).message})`);
  }
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(key)) {
    throw new TlsPemError("key", "no PEM private key found");
  }
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch (error) {
    throw new TlsPemError("key", `cannot parse the private key (${(error as Error).message})`);
  }
  if (!certificate.checkPrivateKey(privateKey)) {
    throw new TlsPemError("pair", "the private key does not match the certificate");
  }
}

/** A running terminator. */
export interface TlsTerminator {
  /** The bound TCP port. */
  readonly port: number;
  /** Stops accepting and closes every connection; idempotent. */
  close(): Promise<void>;
}

/** Options of {@link startTlsTerminator}. */
export interface TlsTerminatorOptions {
  /** IP literal to bind (IPv6 without brackets). */
  hostname: string;
  /** TCP port (0 picks a free one). */
  port: number;
  /** PEM certificate chain. */
  cert: string;
  /** PEM private key. */
  key: string;
  /** The plaintext server's Unix socket path. */
  upstream: string;
}

/**
 * Binds the TLS listener and starts relaying.
 *
 * @param options address, PEM texts and the upstream socket
 * @returns the terminator
 * @throws {Error} when the address cannot be bound or the certificate or key is invalid
 */
export function startTlsTerminator(options: TlsTerminatorOptions): TlsTerminator {
  const listener = Deno.listenTls({
    hostname: options.hostname,
    port: options.port,
    cert: options.cert,
    key: options.key,
    alpnProtocols: ["h2"],
  });
  const open = new Set<Deno.Conn>();
  const relays = new Set<Promise<void>>();
  let closed = false;

  const relay = async (tls: Deno.TlsConn) => {
    open.add(tls);
    let upstream: Deno.UnixConn | undefined;
    try {
      await tls.handshake();
      upstream = await Deno.connect({ transport: "unix", path: options.upstream });
      open.add(upstream);
      await relayBytes(tls, upstream).ended;
    } catch {
      // A failed handshake or an unreachable upstream just ends this connection.
    } finally {
      for (const conn of [tls, upstream]) {
        if (!conn) continue;
        open.delete(conn);
        try {
          conn.close();
        } catch { /* already closed */ }
      }
    }
  };

  const accepting = (async () => {
    for (;;) {
      let conn: Deno.TlsConn;
      try {
        conn = await listener.accept();
      } catch {
        if (closed) return;
        continue;
      }
      // `relay` never rejects; the set holds it until it is over.
      const task: Promise<void> = relay(conn).finally(() => relays.delete(task));
      relays.add(task);
    }
  })();

  let closing: Promise<void> | undefined;
  return {
    port: (listener.addr as Deno.NetAddr).port,
    close() {
      closing ??= (async () => {
        closed = true;
        try {
          listener.close();
        } catch { /* already closed */ }
        for (const conn of open) {
          try {
            conn.close();
          } catch { /* already closed */ }
        }
        await accepting;
        await Promise.allSettled([...relays]);
      })();
      return closing;
    },
  };
}

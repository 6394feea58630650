/**
 * The one byte relay of the project: two byte-stream pairs joined so that what one side writes the
 * other reads, unchanged. The gRPC door relays `grpc+stdio://` and TLS connections to its private
 * socket with it, and the process-owned client provider relays its connection to a host process.
 *
 * - Two directions: `toServer` (the client's readable into the server's writable) and `toClient`
 *   (the server's readable into the client's writable).
 * - When a direction's source ends, its destination is closed, unless the options keep it open.
 *   When a direction fails (a reset connection, a closed pipe), its destination is aborted and its
 *   source cancelled; the failure is recorded in {@link RelayEnd}, never thrown.
 * - The relay does not close either side: what happens after `ended` (closing both, a grace
 *   period for a child process) is the caller's.
 *
 * @module
 */

/** One side of a relay: the bytes it sends (`readable`) and the bytes it receives (`writable`). */
export interface ByteStreams {
  readonly readable: ReadableStream<Uint8Array>;
  readonly writable: WritableStream<Uint8Array>;
}

/** Options of {@link relayBytes}. */
export interface RelayOptions {
  /** Leave the server's writable open when the client's readable ends (default false: close it). */
  keepServerOpen?: boolean;
  /** Leave the client's writable open when the server's readable ends (default false: close it). */
  keepClientOpen?: boolean;
}

/** How a direction of a relay stopped. */
export interface RelayEnd {
  /** Which direction. */
  readonly direction: "toServer" | "toClient";
  /** Why it stopped, when it was not its source's end: the stream's error. */
  readonly error?: unknown;
}

/** A running relay. Neither promise rejects. */
export interface ByteRelay {
  /** The first direction to stop: the connection is over. */
  readonly ended: Promise<RelayEnd>;
  /** Both directions stopped: each with how it stopped. */
  readonly settled: Promise<[RelayEnd, RelayEnd]>;
}

/**
 * Relays bytes between `client` and `server` until both directions have stopped.
 *
 * @param client the side that connected (a TLS connection, stdin/stdout, an accepted socket)
 * @param server the side that serves it (a Unix socket, a child process's stdin/stdout)
 * @param options which writables stay open when their source ends
 * @returns the relay's end and settlement
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { relayBytes } from "./byte_relay.ts";
 *
 * const fromServer = new TransformStream<Uint8Array, Uint8Array>();
 * const toServer = new TransformStream<Uint8Array, Uint8Array>();
 * const client = {
 *   readable: ReadableStream.from([new Uint8Array([1, 2])]),
 *   writable: new WritableStream<Uint8Array>(),
 * };
 * const relay = relayBytes(client, { readable: fromServer.readable, writable: toServer.writable });
 * assert.deepEqual(await new Response(toServer.readable).bytes(), new Uint8Array([1, 2]));
 * assert.deepEqual(await relay.ended, { direction: "toServer" });
 * await fromServer.writable.close();
 * assert.deepEqual((await relay.settled)[1], { direction: "toClient" });
 * ```
 */
export function relayBytes(client: ByteStreams, server: ByteStreams, options: RelayOptions = {}): ByteRelay {
  const pipe = (
    direction: RelayEnd["direction"],
    from: ReadableStream<Uint8Array>,
    to: WritableStream<Uint8Array>,
    preventClose: boolean,
  ): Promise<RelayEnd> =>
    from.pipeTo(to, { preventClose }).then(
      (): RelayEnd => ({ direction }),
      (error: unknown): RelayEnd => ({ direction, error }),
    );
  const toServer = pipe("toServer", client.readable, server.writable, options.keepServerOpen ?? false);
  const toClient = pipe("toClient", server.readable, client.writable, options.keepClientOpen ?? false);
  return { ended: Promise.race([toServer, toClient]), settled: Promise.all([toServer, toClient]) };
}

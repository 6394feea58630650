/**
 * The local transports of the gRPC door (SPEC §9.1): a Unix socket at a path the operator names,
 * and exactly one HTTP/2 connection over a pair of byte streams (stdin/stdout for
 * `--listen grpc+stdio://`).
 *
 * - `unix:PATH`: an existing socket file is probed first. If a process accepts on it, the host
 *   refuses to start (`UnixSocketInUse`); if nothing does (a dead host's leftover), the file is
 *   removed. A path that exists and is not a socket is never removed. The socket is created under
 *   umask 0177 and then set to mode 0600, so it is never reachable by other users.
 * - A connection: the gRPC server listens on a Unix socket in a host-private directory (like the
 *   TLS terminator does), and the streams are relayed byte for byte (`proto/byte_relay.ts`) to one
 *   connection to it. The server's sessions therefore get the GOAWAY guard (http2_guard.ts) exactly
 *   as on TCP. Only the HTTP/2 bytes reach the writable stream.
 *
 * @module
 */
import process from "node:process";
import { type ByteStreams, relayBytes } from "../../../proto/byte_relay.ts";

/** Refusal to take over a Unix socket that a live process accepts on. */
class UnixSocketInUse extends Error {
  override name = "UnixSocketInUse";
}

/**
 * Makes `path` free for a new socket: removes a stale socket file, refuses a live one or a file
 * that is not a socket.
 *
 * @param path the socket path
 * @throws {Error} named `UnixSocketInUse` when another process listens there or the path is not a socket
 */
export async function prepareUnixSocket(path: string): Promise<void> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return;
    throw error;
  }
  if (!info.isSocket) throw new UnixSocketInUse(`${path} exists and is not a socket`);
  try {
    const probe = await Deno.connect({ transport: "unix", path });
    probe.close();
  } catch (error) {
    if (error instanceof Deno.errors.ConnectionRefused || error instanceof Deno.errors.NotFound) {
      try {
        await Deno.remove(path);
      } catch {
        // Removed by someone else meanwhile, or not removable: binding then says why it fails.
      }
      return;
    }
    throw error;
  }
  throw new UnixSocketInUse(`another process is listening on ${path}`);
}

/**
 * Runs `listen` (which creates the socket at `path`) under umask 0177, then sets mode 0600.
 *
 * @param path the socket path
 * @param listen creates and binds the socket
 * @returns what `listen` returned
 */
export async function restrictUnixSocket<T>(path: string, listen: () => Promise<T>): Promise<T> {
  const previous = process.umask(0o177);
  let result: T;
  try {
    result = await listen();
  } finally {
    process.umask(previous);
  }
  await Deno.chmod(path, 0o600);
  return result;
}

/**
 * Connects to the server's private socket and relays the two streams to it until either side ends.
 *
 * @param connection the client's bytes in (`readable`) and the server's bytes out (`writable`)
 * @param socket the server's private Unix socket
 * @returns `ended`, resolved when the relay stopped, and `close()`, which stops it
 */
export async function relayConnection(
  connection: ByteStreams,
  socket: string,
): Promise<{ ended: Promise<void>; close(): Promise<void> }> {
  const upstream = await Deno.connect({ transport: "unix", path: socket });
  let closed = false;
  const closeUpstream = () => {
    if (closed) return;
    closed = true;
    try {
      upstream.close();
    } catch { /* already closed */ }
  };
  // Either direction's end (stdin EOF, the server closing) ends the connection; the socket is
  // closed then rather than half-closed when stdin ends.
  const relay = relayBytes(connection, upstream, { keepServerOpen: true });
  return {
    ended: relay.ended.then(closeUpstream),
    async close() {
      closeUpstream();
      await relay.settled;
    },
  };
}

/**
 * A TCP proxy in front of a host for tests: counts connections and, when asked, drops the HTTP/2
 * PING acknowledgements the client sends (so the server's keep-alive sees a dead peer).
 * Folder-private: never re-exported.
 *
 * @module
 */

const PREFACE = 24;
const PING = 0x6;
const ACK = 0x1;

/** A running proxy. */
export interface H2Proxy extends AsyncDisposable {
  /** `127.0.0.1:PORT` to connect to. */
  address: string;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** PING acknowledgements dropped so far. */
  readonly droppedPingAcks: number;
  /** Resolves when the first PING acknowledgement is dropped. */
  readonly pingAckDropped: Promise<void>;
}

/**
 * Starts a proxy to `target` (`IP:PORT`).
 *
 * @param target the host address
 * @param options `dropPingAcks`: drop client → server PING frames with the ACK flag
 * @returns the proxy
 */
export function startH2Proxy(target: string, options: { dropPingAcks?: boolean } = {}): H2Proxy {
  const [hostname, port] = [
    target.slice(0, target.lastIndexOf(":")),
    Number(target.slice(target.lastIndexOf(":") + 1)),
  ];
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.Conn>();
  const pumps: Promise<void>[] = [];
  let accepted = 0;
  let droppedPingAcks = 0;
  const firstDrop = Promise.withResolvers<void>();

  async function pumpRaw(from: Deno.Conn, to: Deno.Conn): Promise<void> {
    try {
      await from.readable.pipeTo(to.writable, { preventClose: true });
    } catch { /* closed */ }
    try {
      to.closeWrite();
    } catch { /* closed */ }
  }

  async function pumpFiltered(from: Deno.Conn, to: Deno.Conn): Promise<void> {
    const writer = to.writable.getWriter();
    let buffer = new Uint8Array(0);
    let prefaceLeft = PREFACE;
    try {
      for await (const chunk of from.readable) {
        const next = new Uint8Array(buffer.length + chunk.length);
        next.set(buffer);
        next.set(chunk, buffer.length);
        buffer = next;
        if (prefaceLeft > 0) {
          const n = Math.min(prefaceLeft, buffer.length);
          await writer.write(buffer.slice(0, n));
          buffer = buffer.slice(n);
          prefaceLeft -= n;
        }
        while (prefaceLeft === 0 && buffer.length >= 9) {
          const length = (buffer[0] << 16) | (buffer[1] << 8) | buffer[2];
          if (buffer.length < 9 + length) break;
          const frame = buffer.slice(0, 9 + length);
          buffer = buffer.slice(9 + length);
          if (options.dropPingAcks && frame[3] === PING && (frame[4] & ACK) !== 0) {
            droppedPingAcks++;
            firstDrop.resolve();
            continue;
          }
          await writer.write(frame);
        }
      }
    } catch { /* closed */ }
    try {
      await writer.close();
    } catch { /* closed */ }
  }

  const acceptLoop = (async () => {
    try {
      for await (const client of listener) {
        accepted++;
        const server = await Deno.connect({ hostname, port });
        conns.add(client);
        conns.add(server);
        pumps.push(pumpFiltered(client, server), pumpRaw(server, client));
      }
    } catch { /* listener closed */ }
  })();

  return {
    address: `127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    get accepted() {
      return accepted;
    },
    get droppedPingAcks() {
      return droppedPingAcks;
    },
    pingAckDropped: firstDrop.promise,
    async [Symbol.asyncDispose]() {
      listener.close();
      for (const conn of conns) {
        try {
          conn.close();
        } catch { /* closed */ }
      }
      await acceptLoop;
      await Promise.all(pumps);
    },
  };
}

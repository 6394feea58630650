/**
 * A TCP relay in front of a gRPC server that records both directions, and a reader of the gRPC
 * messages in the recording, per HTTP/2 stream, in the order they completed on the wire.
 * Folder-private: never re-exported.
 *
 * @module
 */

/** A running relay. */
export interface RecordingRelay extends AsyncDisposable {
  /** `127.0.0.1:PORT` to connect to. */
  readonly address: string;
  /** Bytes the clients sent, all connections in order of acceptance. */
  clientBytes(): Uint8Array;
  /** Bytes the server sent, all connections in order of acceptance. */
  serverBytes(): Uint8Array;
}

function concat(chunks: Uint8Array[]): Uint8Array {
  const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  chunks.reduce((at, c) => (all.set(c, at), at + c.length), 0);
  return all;
}

/**
 * Starts a relay to `target` that serves one connection.
 *
 * @param target `IP:PORT` of the server
 * @returns the relay; dispose it (idempotent) once the client closed its connection
 */
export function startRecordingRelay(target: string): RecordingRelay {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const up: Uint8Array[] = [];
  const down: Uint8Array[] = [];
  const record = (into: Uint8Array[]) =>
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        into.push(chunk.slice());
        controller.enqueue(chunk);
      },
    });
  const served = (async () => {
    const client = await listener.accept().catch(() => undefined);
    if (!client) return;
    const [hostname, port] = [
      target.slice(0, target.lastIndexOf(":")),
      target.slice(target.lastIndexOf(":") + 1),
    ];
    const server = await Deno.connect({ hostname, port: Number(port) });
    await Promise.all([
      client.readable.pipeThrough(record(up)).pipeTo(server.writable).catch(() => {}),
      server.readable.pipeThrough(record(down)).pipeTo(client.writable).catch(() => {}),
    ]);
  })();
  return {
    address: `127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    clientBytes: () => concat(up),
    serverBytes: () => concat(down),
    async [Symbol.asyncDispose]() {
      try {
        listener.close();
      } catch { /* disposed before */ }
      await served;
    },
  };
}

/** One gRPC message of a recording. */
export interface RecordedMessage {
  /** The HTTP/2 stream. */
  stream: number;
  /** The message bytes (uncompressed messages only). */
  message: Uint8Array;
}

/**
 * The gRPC messages of one direction of a recording, in the order their last byte arrived.
 *
 * @param bytes a recording of one direction of one connection
 * @param fromClient whether it starts with the client's 24-byte connection preface
 * @returns the messages
 */
export function grpcMessages(bytes: Uint8Array, fromClient = false): RecordedMessage[] {
  const out: RecordedMessage[] = [];
  const pending = new Map<number, number[]>();
  let at = fromClient ? 24 : 0;
  while (at + 9 <= bytes.length) {
    const length = (bytes[at] << 16) | (bytes[at + 1] << 8) | bytes[at + 2];
    const [type, flags] = [bytes[at + 3], bytes[at + 4]];
    const stream = ((bytes[at + 5] & 0x7f) << 24) | (bytes[at + 6] << 16) | (bytes[at + 7] << 8) |
      bytes[at + 8];
    let payload = bytes.subarray(at + 9, at + 9 + length);
    at += 9 + length;
    if (type !== 0) continue; // DATA only
    if (flags & 0x8) payload = payload.subarray(1, payload.length - payload[0]);
    const buffer = pending.get(stream) ?? [];
    buffer.push(...payload);
    while (buffer.length >= 5) {
      const size = ((buffer[1] << 24) >>> 0) + (buffer[2] << 16) + (buffer[3] << 8) + buffer[4];
      if (buffer.length < 5 + size) break;
      out.push({ stream, message: new Uint8Array(buffer.slice(5, 5 + size)) });
      buffer.splice(0, 5 + size);
    }
    pending.set(stream, buffer);
  }
  return out;
}

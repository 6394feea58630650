/**
 * Runs inside the loopback-only network namespace of `_netns.ts`: relays TCP connections on
 * 127.0.0.1:0 (the port is printed on stdout) to a Unix socket outside, the fake model's. Exits
 * when stdin ends, so it never outlives the test that started it.
 *
 * Usage: `deno run --allow-all _netns_relay.ts SOCKET`
 *
 * @module
 */
const [socket] = Deno.args;
const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
console.log((listener.addr as Deno.NetAddr).port);

async function relay(conn: Deno.Conn): Promise<void> {
  try {
    const upstream = await Deno.connect({ transport: "unix", path: socket });
    await Promise.allSettled([
      conn.readable.pipeTo(upstream.writable),
      upstream.readable.pipeTo(conn.writable),
    ]);
  } catch {
    conn.close();
  }
}

(async () => {
  for await (const _ of Deno.stdin.readable) {
    // Nothing is sent: stdin only tells when the parent is gone.
  }
  Deno.exit(0);
})();

for await (const conn of listener) relay(conn);

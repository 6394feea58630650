/**
 * Fault: raw HTTP/2 abuse of a host process (issue 20, fault suite), over plain TCP with
 * hand-made frames:
 *
 * - a garbage preface, frames whose length exceeds the peer's maximum or is cut short, and
 *   SETTINGS and PING floods: each abusive connection is ended or ignored by the host;
 * - a rapid reset (CVE-2023-44487): valid HPACK HEADERS for every RPC of the service, each stream
 *   reset at once, thousands per connection, from 20 connections at once. The host serves 200
 *   resets per connection (`http2ResetBurst`), then ends the connection with GOAWAY
 *   `ENHANCE_YOUR_CALM`; a client below the cap is served on the same connection;
 * - 300 idle connections (half of them never sent a byte) and a slow reader (a client whose
 *   16 MiB outcome it does not read): others are served meanwhile, and the slow reader gets its
 *   whole outcome once it reads.
 *
 * Afterwards the host process is alive, a session opened before the abuse still runs cells, and a
 * new client is served. Host CPU and RSS are printed (figures, not assertions, except a generous
 * bound on memory).
 */
import assert from "node:assert/strict";
import { openSession, rawClient, run, serve, type ServeProcess } from "../_harness.ts";
import { descendants, rssBytes } from "../_v1_helpers.ts";

const PREFACE = new TextEncoder().encode("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const utf8 = new TextEncoder();

function frame(type: number, flags: number, stream: number, payload: Uint8Array, length = payload.length) {
  const out = new Uint8Array(9 + payload.length);
  out.set([length >>> 16 & 0xff, length >>> 8 & 0xff, length & 0xff, type, flags], 0);
  new DataView(out.buffer).setUint32(5, stream & 0x7fff_ffff);
  out.set(payload, 9);
  return out;
}

/** HPACK: literal header fields without indexing, new names, no Huffman (all strings < 127 bytes). */
function headerBlock(headers: [string, string][]): Uint8Array {
  const bytes: number[] = [];
  for (const [name, value] of headers) {
    const n = utf8.encode(name), v = utf8.encode(value);
    bytes.push(0x00, n.length, ...n, v.length, ...v);
  }
  return new Uint8Array(bytes);
}

const SETTINGS = (ack = false) => frame(0x4, ack ? 0x1 : 0, 0, new Uint8Array(0));
const PING = (i: number) => {
  const p = new Uint8Array(8);
  new DataView(p.buffer).setUint32(4, i);
  return frame(0x6, 0, 0, p);
};

/** Connects, writes `chunks` (stopping quietly if the host closes), and reads until EOF or 3 s. */
async function abuse(port: number, chunks: Uint8Array[]): Promise<{ read: number; closed: boolean }> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  let read = 0;
  let closed = false;
  const reading = (async () => {
    const buffer = new Uint8Array(65_536);
    try {
      for (;;) {
        const n = await conn.read(buffer);
        if (n === null) return closed = true;
        read += n;
      }
    } catch {
      closed = true;
    }
  })();
  try {
    for (const chunk of chunks) await conn.write(chunk);
  } catch {
    // The host closed the connection.
  }
  await Promise.race([reading, new Promise((r) => setTimeout(r, 3_000))]);
  try {
    conn.close();
  } catch {
    // Already closed.
  }
  await reading;
  return { read, closed };
}

Deno.test("fault: raw HTTP/2 abuse (garbage, bad lengths, rapid reset, SETTINGS and PING floods) leaves the host serving", async () => {
  await using p = await serve(["--listen", "grpc://127.0.0.1:0", "--warm-sessions", "1"]);
  const address = p.url.replace(/^grpc:\/\//, "").replace(/^http:\/\//, "");
  const port = Number(address.split(":").at(-1));
  const plain = rawClient(address);
  let exited = false;
  p.child.status.then(() => exited = true);
  const before = await openSession(plain.client);
  try {
    const path = "/codex.code_mode.v1.CodeModeHost/Wait";
    const request = (stream: number) =>
      frame(
        0x1,
        0x4, // END_HEADERS
        stream,
        headerBlock([
          [":method", "POST"],
          [":scheme", "http"],
          [":path", path],
          [":authority", address],
          ["content-type", "application/grpc"],
          ["te", "trailers"],
        ]),
      );
    const rst = (stream: number) => frame(0x3, 0, stream, new Uint8Array([0, 0, 0, 8])); // CANCEL
    const cases: [string, Uint8Array[]][] = [
      ["garbage preface", [crypto.getRandomValues(new Uint8Array(4096))]],
      ["HTTP/1.1 request", [utf8.encode("GET / HTTP/1.1\r\nHost: x\r\n\r\n")]],
      ["preface then garbage", [PREFACE, SETTINGS(), crypto.getRandomValues(new Uint8Array(4096))]],
      ["frame over the maximum frame size", [PREFACE, SETTINGS(), frame(0x0, 0, 1, new Uint8Array(20_000))]],
      ["frame longer than its bytes, then EOF", [
        PREFACE,
        SETTINGS(),
        frame(0x6, 0, 0, new Uint8Array(8), 1_000),
      ]],
      ["PING of the wrong length", [PREFACE, SETTINGS(), frame(0x6, 0, 0, new Uint8Array(3))]],
      ["SETTINGS on a stream", [PREFACE, frame(0x4, 0, 1, new Uint8Array(0))]],
      ["rapid reset of 5,000 streams", [
        PREFACE,
        SETTINGS(),
        ...Array.from({ length: 5_000 }, (_, i) => {
          const stream = 2 * i + 1;
          return new Uint8Array([...request(stream), ...rst(stream)]);
        }),
      ]],
      ["SETTINGS flood (20,000)", [PREFACE, ...Array.from({ length: 20_000 }, () => SETTINGS())]],
      ["PING flood (20,000)", [PREFACE, SETTINGS(), ...Array.from({ length: 20_000 }, (_, i) => PING(i))]],
    ];
    for (const [name, chunks] of cases) {
      const result = await abuse(port, chunks);
      console.log(
        `${name}: ${result.read} bytes read, ${result.closed ? "closed by the host" : "left open"}`,
      );
      assert.ok(!exited, `the host exited after: ${name}`);
      assert.deepEqual((await run(plain.client, before.id, `text(${JSON.stringify(name)})`)).texts, [name]);
    }
    // Several abusers at once.
    await Promise.all(cases.map(([, chunks]) => abuse(port, chunks)));
    assert.ok(!exited, "the host exited after concurrent abuse");
    const fresh = rawClient(address);
    try {
      await using s = await openSession(fresh.client);
      assert.deepEqual((await run(fresh.client, s.id, 'text("served")')).texts, ["served"]);
    } finally {
      fresh.channel.close();
    }
  } finally {
    before.cancel();
    plain.channel.close();
  }
});

const SERVICE = "/codex.code_mode.v1.CodeModeHost/";
const RPCS = [
  "OpenSession",
  "CloseSession",
  "SubscribeToToolCalls",
  "CompleteToolCall",
  "AcknowledgeNotification",
  "Execute",
  "Wait",
  "YieldObservation",
  "CancelWait",
  "Terminate",
];
const ENHANCE_YOUR_CALM = 0xb;

/** The host process under `deno task serve` (the task's child running cli/main.ts). */
function hostPid(p: ServeProcess): number {
  const pid = descendants(p.child.pid).find((pid) => {
    try {
      return Deno.readTextFileSync(`/proc/${pid}/cmdline`).includes("cli/main.ts");
    } catch {
      return false;
    }
  });
  assert.ok(pid !== undefined, "the host process was not found");
  return pid;
}

/** CPU time (user + system) of a process, in ms. */
function cpuMs(pid: number): number {
  const fields = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 1_000 / 100;
}

const MIB = 1_048_576;

/** HPACK blocks of each RPC's request headers, by address and RPC. */
const blocks = new Map<string, Uint8Array>();

/** One request's HEADERS (valid HPACK, literal fields) and, unless `headersOnly`, its empty message. */
function requestFrames(address: string, rpc: string, stream: number, headersOnly: boolean): Uint8Array[] {
  const key = `${address} ${rpc}`;
  let block = blocks.get(key);
  if (block === undefined) {
    blocks.set(
      key,
      block = headerBlock([
        [":method", "POST"],
        [":scheme", "http"],
        [":path", rpc.startsWith("/") ? rpc : SERVICE + rpc],
        [":authority", address],
        ["content-type", "application/grpc"],
        ["te", "trailers"],
      ]),
    );
  }
  const headers = frame(0x1, 0x4, /* END_HEADERS */ stream, block);
  // An empty message, END_STREAM: the handler runs (and fails or answers at once), then is reset.
  return headersOnly ? [headers] : [headers, frame(0x0, 0x1, stream, new Uint8Array(5))];
}

const rstStream = (stream: number) => frame(0x3, 0, stream, new Uint8Array([0, 0, 0, 8])); // CANCEL

/** What one raw connection saw from the host: its GOAWAYs and the streams it answered. */
interface Seen {
  goaways: { lastStream: number; code: number }[];
  answered: Set<number>;
  closed: boolean;
}

/** Writes `bytes`, then reads frames until the host closes the connection, `until` holds, or `ms` pass. */
async function rawExchange(
  port: number,
  bytes: Uint8Array,
  until: (seen: Seen) => boolean = () => false,
  ms = 5_000,
): Promise<Seen> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const seen: Seen = { goaways: [], answered: new Set(), closed: false };
  const reading = (async () => {
    let pending = new Uint8Array(0);
    const buffer = new Uint8Array(65_536);
    try {
      for (;;) {
        const n = await conn.read(buffer);
        if (n === null) return seen.closed = true;
        const next = new Uint8Array(pending.length + n);
        next.set(pending);
        next.set(buffer.subarray(0, n), pending.length);
        let at = 0;
        while (next.length - at >= 9) {
          const length = next[at] << 16 | next[at + 1] << 8 | next[at + 2];
          if (next.length - at < 9 + length) break;
          const view = new DataView(next.buffer, next.byteOffset + at);
          const stream = view.getUint32(5) & 0x7fff_ffff;
          if (next[at + 3] === 0x7) {
            seen.goaways.push({ lastStream: view.getUint32(9) & 0x7fff_ffff, code: view.getUint32(13) });
          }
          if (next[at + 3] === 0x1) seen.answered.add(stream);
          at += 9 + length;
        }
        pending = next.slice(at);
        if (until(seen)) return;
      }
    } catch {
      seen.closed = true;
    }
  })();
  try {
    await conn.write(bytes);
  } catch {
    // The host closed the connection.
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([reading, new Promise((r) => timer = setTimeout(r, ms))]);
  clearTimeout(timer);
  try {
    conn.close();
  } catch {
    // Already closed.
  }
  await reading;
  return seen;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** A rapid reset: `streams` streams over every RPC, each reset right after its request. */
function rapidReset(address: string, streams: number, tail: Uint8Array[] = []): Uint8Array {
  const parts: Uint8Array[] = [PREFACE, SETTINGS()];
  for (let i = 0; i < streams; i++) {
    const stream = 2 * i + 1;
    const rpc = RPCS[i % RPCS.length];
    // OpenSession and Execute only as HEADERS: with their message they would open real sessions.
    parts.push(...requestFrames(address, rpc, stream, rpc === "OpenSession" || rpc === "Execute"));
    parts.push(rstStream(stream));
  }
  return concat([...parts, ...tail]);
}

/** A `deno task serve` host, its process ID, and a client with a bystander session open on it. */
async function servedHost() {
  const p = await serve(["--listen", "grpc://127.0.0.1:0", "--warm-sessions", "1"]);
  const address = p.url.replace(/^http:\/\//, "");
  const plain = rawClient(address);
  const bystander = await openSession(plain.client);
  return {
    address,
    port: Number(address.split(":").at(-1)),
    pid: hostPid(p),
    plain,
    bystander,
    async [Symbol.asyncDispose]() {
      await bystander[Symbol.asyncDispose]();
      plain.channel.close();
      await p[Symbol.asyncDispose]();
    },
  };
}

Deno.test("fault: HTTP/2 rapid reset (CVE-2023-44487) ends the abuser's connection with ENHANCE_YOUR_CALM and the host serves others", async () => {
  await using h = await servedHost();
  const { address, port, pid, plain, bystander } = h;
  const burst = 200; // the default http2ResetBurst

  // Below the cap: 150 reset streams, then a Health/Check answered on the same connection.
  const polite = await rawExchange(
    port,
    rapidReset(address, 150, requestFrames(address, "/grpc.health.v1.Health/Check", 301, false)),
    (seen) => seen.answered.has(301),
  );
  assert.ok(polite.answered.has(301), "the Health/Check after 150 resets was not answered");
  assert.deepEqual(polite.goaways, []);

  // 20 abusers at once, 5,000 reset streams each, while the bystander runs cells.
  const rssBefore = rssBytes(pid), cpuBefore = cpuMs(pid);
  const abuse = rapidReset(address, 5_000);
  const attack = Array.from({ length: 20 }, () => rawExchange(port, abuse));
  const cells: string[] = [];
  for (let i = 0; i < 5; i++) {
    cells.push(...(await run(plain.client, bystander.id, `text("during ${i}")`)).texts);
  }
  const seen = await Promise.all(attack);
  const rssAfter = rssBytes(pid), cpuAfter = cpuMs(pid);
  console.log(
    `rapid reset, 20 connections × 5,000 streams: host CPU ${cpuAfter - cpuBefore} ms, RSS ${
      (rssBefore / MIB).toFixed(0)
    } → ${(rssAfter / MIB).toFixed(0)} MiB; first GOAWAY ${JSON.stringify(seen[0].goaways[0])}`,
  );
  assert.deepEqual(cells, [0, 1, 2, 3, 4].map((i) => `during ${i}`));
  for (const abuser of seen) {
    assert.ok(abuser.closed, "an abuser's connection was left open");
    assert.equal(abuser.goaways[0]?.code, ENHANCE_YOUR_CALM, JSON.stringify(abuser.goaways));
    // nghttp2 saw at most the streams up to the first reset over the cap.
    assert.ok(abuser.goaways[0].lastStream <= 2 * burst + 1, JSON.stringify(abuser.goaways));
  }
  // ~12 KiB of garbage per served stream: 20 × 200 streams stay far below this bound (20 × 1,000
  // streams, nghttp2's own cap, grew the host by ~250 MiB).
  assert.ok(
    rssAfter - rssBefore < 160 * MIB,
    `host RSS grew by ${((rssAfter - rssBefore) / MIB).toFixed(0)} MiB`,
  );
  assert.deepEqual((await run(plain.client, bystander.id, 'text("after")')).texts, ["after"]);
  using fresh = rawClient(address);
  await using s = await openSession(fresh.client);
  assert.deepEqual((await run(fresh.client, s.id, 'text("served")')).texts, ["served"]);
});

/** A TCP relay to the host whose host-to-client direction can be stopped (a client that does not read). */
function stallingRelay(port: number) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let resume = Promise.withResolvers<void>();
  let stalled = false;
  const conns: Deno.Conn[] = [];
  const pumps: Promise<void>[] = [];
  const pump = async (from: Deno.Conn, to: Deno.Conn, stalls: boolean) => {
    const buffer = new Uint8Array(16_384);
    try {
      for (;;) {
        if (stalls && stalled) await resume.promise;
        const n = await from.read(buffer);
        if (n === null) break;
        let at = 0;
        while (at < n) at += await to.write(buffer.subarray(at, n));
      }
    } catch {
      // Either side closed.
    }
    try {
      to.close();
    } catch {
      // Already closed.
    }
  };
  const accepting = (async () => {
    for await (const client of listener) {
      const host = await Deno.connect({ hostname: "127.0.0.1", port });
      conns.push(client, host);
      pumps.push(pump(client, host, false), pump(host, client, true));
    }
  })();
  return {
    address: `127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    stall: () => stalled = true,
    resume: () => {
      stalled = false;
      resume.resolve();
      resume = Promise.withResolvers<void>();
    },
    async [Symbol.asyncDispose]() {
      listener.close();
      await accepting.catch(() => {});
      for (const conn of conns) {
        try {
          conn.close();
        } catch {
          // Already closed.
        }
      }
      await Promise.all(pumps);
    },
  };
}

Deno.test("fault: 300 idle connections and a client that stops reading its 16 MiB outcome leave others served", async () => {
  await using h = await servedHost();
  const { address, port, pid, plain, bystander } = h;
  const rssStart = rssBytes(pid);

  // 300 idle connections: half sent the preface and SETTINGS, half never sent a byte.
  const idle = await Promise.all(Array.from({ length: 300 }, async (_, i) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    if (i % 2 === 0) await conn.write(concat([PREFACE, SETTINGS()]));
    return conn;
  }));
  assert.deepEqual((await run(plain.client, bystander.id, 'text("idle")')).texts, ["idle"]);
  const rssIdle = rssBytes(pid);

  // A slow reader: its relay stops passing the host's bytes before its cell prints 16 MiB.
  await using relay = stallingRelay(port);
  using slow = rawClient(relay.address);
  await using slowSession = await openSession(slow.client);
  relay.stall();
  const big = run(
    slow.client,
    slowSession.id,
    "for (let i = 0; i < 256; i++) text(String(i % 10).repeat(65536))",
  );
  // Others are served while the slow reader's outcome waits in the host.
  for (let i = 0; i < 3; i++) {
    assert.deepEqual((await run(plain.client, bystander.id, `text("meanwhile ${i}")`)).texts, [
      `meanwhile ${i}`,
    ]);
  }
  const rssStalled = rssBytes(pid);
  relay.resume();
  const outcome = await big;
  assert.equal(outcome.texts.length, 256);
  assert.ok(
    outcome.texts.every((t, i) => t === String(i % 10).repeat(65536)),
    "the slow reader's outcome differs",
  );
  for (const conn of idle) conn.close();
  console.log(
    `host RSS: ${(rssStart / MIB).toFixed(0)} MiB, with 300 idle connections ${
      (rssIdle / MIB).toFixed(0)
    } MiB, with a stalled 16 MiB outcome ${(rssStalled / MIB).toFixed(0)} MiB`,
  );
  assert.ok(rssStalled - rssStart < 200 * MIB, "the host's memory grew past 200 MiB");
  using fresh = rawClient(address);
  await using s = await openSession(fresh.client);
  assert.deepEqual((await run(fresh.client, s.id, 'text("served")')).texts, ["served"]);
});

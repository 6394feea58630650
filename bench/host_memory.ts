/**
 * Host memory over repeated rounds of fuzz and load (issue 20, item 5): is the host's memory after
 * a fuzz + load suite a leak (it grows round after round) or a cache or garbage (it levels off)?
 *
 * Starts a host process (`deno run --inspect … cli/main.ts`, 127.0.0.1:0) and runs
 * `BENCH_MEMORY_ROUNDS` (default 5) rounds against it, each of:
 *
 * - fuzz: `BENCH_MEMORY_FUZZ` (default 2,000) requests over the ten RPCs, random bytes and
 *   mutated valid requests (as tests/faults/rpc_fuzz.ts, fixed seed per round), each to a status;
 * - load: 8 sessions × 15 cells, three at a time per session;
 * - a rapid reset: 20 connections × 5,000 reset streams.
 *
 * After each round it prints the host's RSS, then asks V8 (over the inspector) for a full GC and
 * prints the RSS and the JS heap used after it. A leak shows as heap-after-GC growing each round;
 * garbage as RSS falling after the GC; allocator retention as RSS staying high over a flat heap.
 * Prints a Markdown table; figures only. `deno task bench:host-memory`; `BENCH_MEMORY_HOST_ARGS`
 * adds host flags (e.g. `--limit http2ResetBurst=0` for the host without its reset cap).
 *
 * @module
 */
import fc from "fast-check";
import { ClientError, createChannel, createClient } from "nice-grpc";
import { codeModeHostDefinition } from "../proto/loader.ts";

const MIB = 1024 * 1024;
const ROUNDS = Number(Deno.env.get("BENCH_MEMORY_ROUNDS") ?? 5);
const FUZZ = Number(Deno.env.get("BENCH_MEMORY_FUZZ") ?? 2_000);
const CHANNEL = {
  "grpc.max_receive_message_length": 67_108_864,
  "grpc.max_send_message_length": 67_108_864,
  "grpc.use_local_subchannel_pool": 1,
};
// deno-lint-ignore no-explicit-any
type Any = any;

function rss(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(Deno.readTextFileSync(`/proc/${pid}/status`))![1]) * 1024;
}

// ---- the host, with an inspector ------------------------------------------------------------------

const repo = new URL("..", import.meta.url).pathname;
const child = new Deno.Command(Deno.execPath(), {
  args: [
    "run",
    "--allow-all",
    "--inspect=127.0.0.1:0",
    "cli/main.ts",
    "--listen",
    "grpc://127.0.0.1:0",
    "--warm-sessions",
    "1",
    "--no-exit-with-parent",
    ...(Deno.env.get("BENCH_MEMORY_HOST_ARGS") ?? "").split(" ").filter(Boolean),
  ],
  cwd: repo,
  stdin: "null",
  stdout: "piped",
  stderr: "piped",
}).spawn();
const lines = (stream: ReadableStream<Uint8Array>) =>
  stream.pipeThrough(new TextDecoderStream()).pipeThrough(
    new TransformStream<string, string>({
      transform(chunk, out) {
        for (const line of chunk.split("\n")) if (line) out.enqueue(line);
      },
    }),
  ).getReader();
const stdout = lines(child.stdout);
const stderr = lines(child.stderr);
let inspectorUrl = "";
while (!inspectorUrl) {
  const { value, done } = await stderr.read();
  if (done) throw new Error("the host ended before its inspector listened");
  inspectorUrl = /ws:\/\/\S+/.exec(value)?.[0] ?? "";
}
void (async () => {
  while (!(await stderr.read()).done) { /* drain the host's log */ }
})();
const address = (await stdout.read()).value!.replace(/^http:\/\//, "");

const inspector = new WebSocket(inspectorUrl);
await new Promise((resolve, reject) => {
  inspector.onopen = resolve;
  inspector.onerror = reject;
});
let nextId = 0;
const replies = new Map<number, (result: Any) => void>();
inspector.onmessage = (event) => {
  const message = JSON.parse(event.data);
  replies.get(message.id)?.(message.result);
  replies.delete(message.id);
};
const inspect = (method: string, params: Any = {}): Promise<Any> =>
  new Promise((resolve) => {
    const id = ++nextId;
    replies.set(id, resolve);
    inspector.send(JSON.stringify({ id, method, params }));
  });

// ---- the clients ----------------------------------------------------------------------------------

const definition: Any = codeModeHostDefinition();
const channel = createChannel(address, undefined, CHANNEL);
const client: Any = createClient(definition, channel);
const bytesDefinition: Any = {};
for (const [name, method] of Object.entries(definition)) {
  bytesDefinition[name] = { ...(method as Any), requestSerialize: (bytes: Uint8Array) => bytes };
}
const bytesClient: Any = createClient(bytesDefinition, channel);

async function openSession(): Promise<{ id: string; abort: AbortController; notes: string[] }> {
  const abort = new AbortController();
  const lease = client.openSession({}, { signal: abort.signal })[Symbol.asyncIterator]();
  const id = (await lease.next()).value.opened.sessionId;
  const notes: string[] = [];
  void (async () => {
    try {
      for (;;) {
        const r = await lease.next();
        if (r.done) return;
        if (r.value.notification) notes.push(r.value.notification.text);
      }
    } catch { /* cancelled */ }
  })();
  return { id, abort, notes };
}

async function fuzz(round: number): Promise<void> {
  const live = await openSession();
  const sessionId = live.id;
  const valid: Record<string, Any> = {
    openSession: { outputTruncation: 1 },
    closeSession: { sessionId: "no-such-session" },
    subscribeToToolCalls: { sessionId, toolNames: [{ namespace: "ns", name: "t" }] },
    completeToolCall: { sessionId, invocationId: "inv-1", succeeded: { outputJson: '{"a":1}' } },
    acknowledgeNotification: { sessionId, notificationId: "n-1" },
    execute: { sessionId, executionId: "e-1", toolCallId: "c-1", source: 'text("fuzz")', yieldTimeMs: 1 },
    wait: { sessionId, cellId: "1", waitId: "w-1", yieldTimeMs: 1 },
    yieldObservation: { sessionId, executionId: "e-1" },
    cancelWait: { sessionId, waitId: "w-1" },
    terminate: { sessionId, cellId: "999" },
  };
  const names = Object.keys(valid);
  for (const name of names) {
    const validBytes = new Uint8Array(definition[name].requestSerialize(valid[name]));
    const mutated = fc.tuple(
      fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 2 }),
      fc.nat({ max: validBytes.length }),
    ).map(([flips, cut]) => {
      const bytes = validBytes.slice(0, cut);
      for (const [at, value] of flips) if (bytes.length > 0) bytes[at % bytes.length] = value;
      return bytes;
    });
    const samples = fc.sample(fc.oneof(fc.uint8Array({ maxLength: 96 }), mutated), {
      seed: round,
      numRuns: Math.ceil(FUZZ / names.length),
    });
    for (const bytes of samples) {
      const abort = new AbortController();
      const timer = setTimeout(() => abort.abort(), 15_000);
      try {
        if (definition[name].responseStream) {
          const headers = Promise.withResolvers<void>();
          const events = (async () => {
            const options = { signal: abort.signal, onHeader: () => headers.resolve() };
            for await (const _ of bytesClient[name](bytes, options)) return;
          })();
          await Promise.race([events, headers.promise]);
        } else await bytesClient[name](bytes, { signal: abort.signal });
      } catch (error) {
        if (!(error instanceof ClientError)) throw error;
      } finally {
        clearTimeout(timer);
        abort.abort();
      }
    }
  }
  live.abort.abort();
}

async function load(): Promise<void> {
  const sessions = await Promise.all(Array.from({ length: 8 }, () => openSession()));
  await Promise.all(sessions.map(async (s) => {
    let next = 0;
    const worker = async () => {
      while (next < 15) {
        const cell = next++;
        const source = `for (let i = 0; i < 6; i++) { text("${cell}:" + i); await null; } notify("n"); ` +
          `store("c${cell}", ${cell});`;
        for await (
          const _ of client.execute({
            sessionId: s.id,
            executionId: crypto.randomUUID(),
            toolCallId: "c",
            source,
            yieldTimeMs: 60_000,
          })
        ) { /* to the outcome */ }
      }
    };
    await Promise.all([worker(), worker(), worker()]);
  }));
  for (const s of sessions) s.abort.abort();
}

/** 20 connections × 5,000 HEADERS each reset at once (as tests/faults/http2_abuse.ts). */
async function rapidReset(): Promise<void> {
  const utf8 = new TextEncoder();
  const frame = (type: number, flags: number, stream: number, payload: Uint8Array) => {
    const out = new Uint8Array(9 + payload.length);
    out.set([payload.length >>> 16 & 0xff, payload.length >>> 8 & 0xff, payload.length & 0xff, type, flags]);
    new DataView(out.buffer).setUint32(5, stream);
    out.set(payload, 9);
    return out;
  };
  const block: number[] = [];
  for (
    const [name, value] of [
      [":method", "POST"],
      [":scheme", "http"],
      [":path", "/codex.code_mode.v1.CodeModeHost/Wait"],
      [":authority", address],
      ["content-type", "application/grpc"],
    ]
  ) block.push(0, name.length, ...utf8.encode(name), value.length, ...utf8.encode(value));
  const parts = [utf8.encode("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), frame(0x4, 0, 0, new Uint8Array(0))];
  for (let i = 0; i < 5_000; i++) {
    parts.push(
      frame(0x1, 0x4, 2 * i + 1, new Uint8Array(block)),
      frame(0x3, 0, 2 * i + 1, new Uint8Array(4)),
    );
  }
  const bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  parts.reduce((at, p) => (bytes.set(p, at), at + p.length), 0);
  const port = Number(address.split(":").at(-1));
  await Promise.all(Array.from({ length: 20 }, async () => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    const reading = (async () => {
      const buffer = new Uint8Array(65_536);
      try {
        while (await conn.read(buffer) !== null) { /* to EOF */ }
      } catch { /* reset */ }
    })();
    await conn.write(bytes).catch(() => {});
    const timer = setTimeout(() => conn.close(), 5_000);
    await reading;
    clearTimeout(timer);
    try {
      conn.close();
    } catch { /* closed */ }
  }));
}

// ---- rounds ---------------------------------------------------------------------------------------

const hostPid = child.pid;
const heapUsed = async () => (await inspect("Runtime.getHeapUsage")).usedSize as number;
const rows: string[] = [];
const row = async (label: string, seconds: number) => {
  const before = rss(hostPid);
  await inspect("HeapProfiler.collectGarbage");
  rows.push(
    `| ${label} | ${(before / MIB).toFixed(0)} | ${(rss(hostPid) / MIB).toFixed(0)} | ${
      ((await heapUsed()) / MIB).toFixed(1)
    } | ${seconds.toFixed(1)} |`,
  );
  console.error(rows.at(-1));
};
await row("start", 0);
for (let round = 1; round <= ROUNDS; round++) {
  const started = performance.now();
  await fuzz(round);
  await load();
  await rapidReset();
  await row(`after round ${round}`, (performance.now() - started) / 1000);
}
inspector.close();
channel.close();
child.kill("SIGTERM");
await child.status;

console.log(
  `host memory, ${ROUNDS} rounds of ${FUZZ} fuzzed requests + 8 sessions × 15 cells + a rapid reset`,
);
console.log(
  "| when | host RSS (MiB) | RSS after a full GC (MiB) | JS heap used after GC (MiB) | round (s) |",
);
console.log("| --- | ---: | ---: | ---: | ---: |");
for (const line of rows) console.log(line);

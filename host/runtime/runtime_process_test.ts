/**
 * Unit tests of the subprocess runtime transport (`worker_process.ts`) with real Deno subprocesses:
 * the bundled runtime (`worker/dist/`) for the orderly path, and small scripted runtimes (a
 * `runtime.js` written per test into its own runtime directory) for every way a runtime can
 * misbehave. Frames the scripts write are encoded here, with the host's own codec.
 */
import assert from "node:assert/strict";
import { encodeFrame } from "../../proto/frame_codec.ts";
import { createWorkerCodec, type WorkerToHost } from "../../proto/worker_codec.ts";
import { encodeReadyFrame } from "../../proto/worker_ready.ts";
import { resolveLimits } from "../core/limits.ts";
import type { MemoryWatchdog } from "./memory_watchdog.ts";
import { crashReason, type RuntimeTransport } from "./runtime_transport.ts";
import { prepareRuntimeDirectory } from "./runtime_files.ts";
import { FrameBatches, type RuntimeProcessOptions, spawnRuntimeProcess } from "./runtime_process.ts";

const codec = createWorkerCodec();
const limits = resolveLimits({});
const parent = await Deno.makeTempDir({ prefix: "worker-process-test-" });
globalThis.addEventListener("unload", () => Deno.removeSync(parent, { recursive: true }));
/** The bundled runtime, as a host prepares it. */
const bundled = prepareRuntimeDirectory(parent);

const b64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));
const frame = (message: WorkerToHost) =>
  encodeFrame(codec.encodeWorkerToHost(message), limits.maxWorkerFrameBytes);
const READY = encodeReadyFrame(Deno.version.deno);
/** A ping's body starts with this tag byte, a pong's with the other; the rest (the seq) is the same. */
const [PING_TAG] = codec.encodeHostToWorker({ ping: { seq: 1 } });
const [PONG_TAG] = codec.encodeWorkerToHost({ pong: { seq: 1 } });

/** What every scripted runtime starts with: writing frames, and a reader that answers pings. */
const PRELUDE = `
const bytes = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
const write = (b) => { for (let at = 0; at < b.length;) at += Deno.stdout.writeSync(b.subarray(at)); };
const READY = bytes("${b64(READY)}");
async function readFrames(onFrame) {
  let buf = new Uint8Array(0);
  for await (const chunk of Deno.stdin.readable) {
    const joined = new Uint8Array(buf.length + chunk.length);
    joined.set(buf);
    joined.set(chunk, buf.length);
    buf = joined;
    while (buf.length >= 4) {
      const length = new DataView(buf.buffer, buf.byteOffset).getUint32(0);
      if (buf.length < 4 + length) break;
      onFrame(buf.slice(0, 4 + length));
      buf = buf.slice(4 + length);
    }
  }
}
const answerPings = (onPing = () => {}) => readFrames((f) => {
  if (f[4] !== ${PING_TAG}) return;
  f[4] = ${PONG_TAG};
  write(f);
  onPing();
});
`;

/** A runtime directory whose `runtime.js` is {@link PRELUDE} and then `body`. */
async function scripted(body: string): Promise<string> {
  const dir = await Deno.makeTempDir({ dir: parent, prefix: "scripted-" });
  await Deno.writeTextFile(`${dir}/runtime.js`, PRELUDE + body);
  return dir;
}

function spawn(runtimeDir: string, options: Partial<RuntimeProcessOptions> = {}) {
  const messages: WorkerToHost[] = [];
  const runtime = spawnRuntimeProcess({
    codec,
    deno: Deno.execPath(),
    runtimeDir,
    workParent: parent,
    workerMainHeapMb: 0,
    maxWorkerFrameBytes: limits.maxWorkerFrameBytes,
    stderrTailBytes: 1024,
    workerKillGraceMs: 2_000,
    ...options,
  });
  const waiters: [(m: WorkerToHost) => boolean, () => void][] = [];
  runtime.onMessage = (message) => {
    messages.push(message);
    for (const w of waiters.slice()) if (w[0](message)) waiters.splice(waiters.indexOf(w), 1), w[1]();
  };
  /** Resolves when a frame matching `predicate` has reached `onMessage`. */
  const received = (predicate: (m: WorkerToHost) => boolean) =>
    new Promise<void>((resolve) => {
      if (messages.some(predicate)) resolve();
      else waiters.push([predicate, resolve]);
    });
  return { runtime, messages, received };
}

/** The runtime's private working directory (the spawn's cwd), found through /proc. */
function workDir(runtime: RuntimeTransport): string {
  return Deno.readLinkSync(`/proc/${runtime.pid}/cwd`);
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  assert.fail("did not reject");
}

Deno.test("the bundled runtime: ready, frames of a cell reach onMessage in order, stop() ends it by the host with exit 0 and removes its work dir", async () => {
  const { runtime, messages, received } = spawn(bundled);
  await runtime.ready;
  assert.equal(runtime.alive, true);
  assert.ok(runtime.pid! > 0);
  const dir = workDir(runtime);
  assert.match(dir, new RegExp(`/w-${Deno.pid}-${runtime.id}-[^/]+$`));
  await runtime.send({
    configure: {
      sessionId: "s",
      outputTruncation: 0,
      cellHeapLimitMb: 64,
      maxMessageBytes: limits.maxMessageBytes,
      maxStoredValueBytes: limits.maxStoredValueBytes,
    },
  });
  await runtime.send({
    startCell: { cellId: "1", source: 'text("a"); text("b")', tools: [], storeVersion: 0 },
  });
  await received((m) => m.cellEvent?.result !== undefined);
  const events = messages.filter((m) => m.cellEvent?.cellId === "1").map((m) => m.cellEvent!);
  assert.deepEqual(
    events.filter((e) => e.contentItem).map((e) => (e.contentItem as { text?: string }).text),
    ["a", "b"],
  );
  assert.ok(events.findIndex((e) => e.started) < events.findIndex((e) => e.contentItem));
  assert.ok(messages.every((m) => !m.ready && !m.pong), "Ready and pongs stay inside the transport");
  const end = await runtime.stop();
  assert.deepEqual(end, { kind: "exit", byHost: true, code: 0, signal: null, stderrTail: "" });
  assert.equal(await runtime.ended, end);
  assert.equal(runtime.alive, false);
  assert.equal(await runtime.stop(), end, "stop() again returns the same end");
  assert.throws(() => Deno.statSync(dir), Deno.errors.NotFound);
  assert.equal((await rejection(runtime.send({ shutdown: {} }))).message, "session runtime has ended");
});

Deno.test("a runtime killed from outside ends on its own: not by the host, with the signal; kill() by the host says byHost", async () => {
  const outside = spawn(bundled).runtime;
  await outside.ready;
  Deno.kill(outside.pid!, "SIGKILL");
  const end = await outside.ended;
  assert.deepEqual(end, { kind: "exit", byHost: false, code: 137, signal: "SIGKILL", stderrTail: "" });
  assert.equal(crashReason(end), "worker process killed by signal SIGKILL");

  const killed = spawn(bundled).runtime;
  await killed.ready;
  const byHost = await killed.kill();
  assert.equal(byHost.kind, "exit");
  assert.equal(byHost.byHost, true);
  assert.equal(byHost.signal, "SIGKILL");
  assert.equal(killed.alive, false);
});

Deno.test("a runtime that reports another Deno or protocol version is refused with both versions and killed", async () => {
  for (
    const [options, want] of [
      [{ denoVersion: "0.0.0" }, `deno ${Deno.version.deno} protocol 4; host expects deno 0.0.0 protocol 4`],
      [
        { protocolVersion: 99 },
        `deno ${Deno.version.deno} protocol 4; host expects deno ${Deno.version.deno} protocol 99`,
      ],
    ] as const
  ) {
    const { runtime } = spawn(bundled, options);
    const error = await rejection(runtime.ready);
    assert.equal(error.message, `code-mode session runtime version mismatch: runtime reported ${want}`);
    assert.equal(runtime.alive, false, "stopping at once");
    const end = await runtime.ended;
    assert.equal(end.signal, "SIGKILL");
    assert.equal(end.byHost, true);
  }
});

Deno.test("a runtime that exits before Ready: ready rejects; the end carries its exit code and the tail of its stderr", async () => {
  const { runtime } = spawn(
    await scripted(`
      Deno.stderr.writeSync(new TextEncoder().encode("x".repeat(3000) + "the last words"));
      Deno.exit(3);
    `),
    { stderrTailBytes: 100 },
  );
  assert.equal((await rejection(runtime.ready)).message, "session runtime exited before it was ready");
  const end = await runtime.ended;
  assert.deepEqual({ ...end, stderrTail: undefined }, {
    kind: "exit",
    byHost: false,
    code: 3,
    signal: null,
    stderrTail: undefined,
  });
  assert.equal(end.stderrTail, "x".repeat(86) + "the last words", "exactly the last 100 bytes");
  assert.equal(crashReason(end), "worker process exited with code 3");
});

Deno.test("protocol errors kill the runtime: a first frame that is not Ready, an undecodable frame, a second Ready, an empty envelope", async () => {
  const cases: [string, RegExp][] = [
    [`write(bytes("${b64(frame({ pong: { seq: 1 } }))}"));`, /^the first frame was not Ready$/],
    [`write(READY); write(new Uint8Array([0, 0, 0, 2, 0xff, 0xff]));`, /^undecodable frame: /],
    [`write(READY); write(READY);`, /^an unexpected Ready frame$/],
    [`write(READY); write(new Uint8Array([0, 0, 0, 0]));`, /^an envelope with no message set$/],
  ];
  for (const [script, detail] of cases) {
    const { runtime } = spawn(await scripted(`${script} setInterval(() => {}, 1000);`));
    const end = await runtime.ended;
    assert.equal(end.kind, "protocol", script);
    assert.equal(end.byHost, false);
    assert.match(end.kind === "protocol" ? end.detail : "", detail);
    assert.equal(end.signal, "SIGKILL", "the host killed it");
    assert.match(crashReason(end), /^worker protocol error: /);
  }
});

Deno.test("a frame over maxWorkerFrameBytes is refused on its header", async () => {
  const { runtime } = spawn(
    await scripted(`write(READY); write(new Uint8Array([0, 0, 4, 1])); setInterval(() => {}, 1000);`),
    { maxWorkerFrameBytes: 1024 },
  );
  const end = await runtime.ended;
  assert.equal(end.kind, "protocol");
  assert.match(end.kind === "protocol" ? end.detail : "", /1025 exceeds 1024 bytes/);
});

Deno.test("a runtime that closes its stdout but keeps running is a protocol error (unexpected end of stream)", async () => {
  // A Deno runtime cannot close its own stdout: a shell in the prefix's place writes Ready, closes
  // stdout and sleeps (the runtime's own argv after it is ignored).
  const octal = [...READY].map((b) => "\\" + b.toString(8).padStart(3, "0")).join("");
  const { runtime } = spawn(bundled, {
    prefix: ["sh", "-c", `printf '${octal}'; exec 1>&-; exec sleep 60`, "sh"],
  });
  await runtime.ready;
  const end = await runtime.ended;
  assert.deepEqual({ kind: end.kind, detail: end.kind === "protocol" && end.detail, signal: end.signal }, {
    kind: "protocol",
    detail: "unexpected end of stream",
    signal: "SIGKILL",
  });
});

Deno.test("a RuntimeFault frame is passed on and names the end, even when the runtime exits right after it", async () => {
  const fault = frame({ runtimeFault: { detail: "the main loop broke" } });
  const { runtime, messages } = spawn(
    await scripted(`write(READY); write(bytes("${b64(fault)}")); Deno.exit(70);`),
  );
  const end = await runtime.ended;
  assert.deepEqual(end, {
    kind: "fault",
    byHost: false,
    detail: "the main loop broke",
    code: 70,
    signal: null,
    stderrTail: "",
  });
  assert.deepEqual(messages.map((m) => m.runtimeFault), [{ detail: "the main loop broke" }]);
  assert.equal(crashReason(end), "worker reported an internal fault: the main loop broke");
});

Deno.test("stop() escalates: stdin closed and Shutdown sent, then SIGTERM after the grace, then SIGKILL after another", async () => {
  // Ignore Shutdown and the end of stdin; the first exits on SIGTERM, the second ignores it too.
  // Each writes Ready only once its signal listener is in place.
  const ignoring = `readFrames(() => {}); setInterval(() => {}, 1000);`;
  const onTerm = await scripted(
    `${ignoring} Deno.addSignalListener("SIGTERM", () => Deno.exit(42)); write(READY);`,
  );
  const term = spawn(onTerm, { workerKillGraceMs: 100 }).runtime;
  await term.ready;
  const started = performance.now();
  const termEnd = await term.stop();
  assert.deepEqual(
    [termEnd.kind, termEnd.byHost, termEnd.code, termEnd.signal],
    ["exit", true, 42, null],
    termEnd.stderrTail,
  );
  assert.ok(performance.now() - started >= 90, "not before the grace");

  const deaf = await scripted(`${ignoring} Deno.addSignalListener("SIGTERM", () => {}); write(READY);`);
  const kill = spawn(deaf, { workerKillGraceMs: 100 }).runtime;
  await kill.ready;
  const killEnd = await kill.stop();
  assert.deepEqual(
    [killEnd.kind, killEnd.byHost, killEnd.signal],
    ["exit", true, "SIGKILL"],
    killEnd.stderrTail,
  );

  // One that exits when its stdin ends gets no signal at all.
  const polite = spawn(await scripted(`write(READY); await readFrames(() => {}); Deno.exit(0);`)).runtime;
  await polite.ready;
  assert.deepEqual(await polite.stop(), {
    kind: "exit",
    byHost: true,
    code: 0,
    signal: null,
    stderrTail: "",
  });
});

Deno.test("liveness: a busy runtime that answers pings stays; one that leaves a ping unanswered past the limit is killed as unresponsive", async () => {
  // Writes a notify frame after the fifth ping it answered.
  const note = frame({ cellEvent: { cellId: "0", notify: "five pings" } as never });
  const answering = await scripted(
    `write(READY); let n = 0; answerPings(() => { if (++n === 5) write(bytes("${b64(note)}")); });`,
  );
  const { runtime, received } = spawn(answering, { unresponsiveMs: 100 });
  await runtime.ready;
  runtime.setActive!(true);
  await received((m) => m.cellEvent?.notify === "five pings");
  assert.equal(runtime.alive, true, "five pings answered: still alive");
  assert.equal((await runtime.stop()).kind, "exit");

  const deaf = await scripted(`write(READY); setInterval(() => {}, 1000);`);
  const stuck = spawn(deaf, { unresponsiveMs: 100 }).runtime;
  await stuck.ready;
  const started = performance.now();
  stuck.setActive!(true);
  const end = await stuck.ended;
  const elapsed = performance.now() - started;
  assert.equal(end.kind, "unresponsive");
  assert.match(end.kind === "unresponsive" ? end.detail : "", /^no answer to a liveness ping in \d+ ms$/);
  assert.equal(end.signal, "SIGKILL");
  assert.ok(elapsed >= 100, `not before the limit (${elapsed} ms)`);
  assert.equal(crashReason(end), "session runtime stopped responding");
});

Deno.test("the memory watchdog: the runtime's pid is watched; crossing kills it with the memory reason; the watch ends with it", async () => {
  let watched: number | undefined;
  let exceeded: ((bytes: number) => void) | undefined;
  let unwatched = 0;
  const watchdog = {
    limitBytes: 256 * 1024 * 1024,
    watch(pid: number, onExceeded: (bytes: number) => void) {
      watched = pid;
      exceeded = onExceeded;
      return () => void unwatched++;
    },
  } as unknown as MemoryWatchdog;
  const { runtime } = spawn(bundled, { memoryWatchdog: watchdog });
  await runtime.ready;
  assert.equal(watched, runtime.pid);
  exceeded!(300 * 1024 * 1024);
  const end = await runtime.ended;
  assert.deepEqual(end, {
    kind: "memory",
    byHost: false,
    limitMb: 256,
    code: 137,
    signal: "SIGKILL",
    stderrTail: "",
  });
  assert.equal(unwatched, 1);
  assert.equal(crashReason(end), "session runtime exceeded its memory limit of 256 MiB");
  // A crossing reported while the host stops the runtime is not a memory end.
  const stopping = spawn(bundled, { memoryWatchdog: watchdog }).runtime;
  await stopping.ready;
  const stopped = stopping.stop();
  exceeded!(300 * 1024 * 1024);
  assert.equal((await stopped).kind, "exit");
});

Deno.test("frames sent before the runtime reads them are written in order, and await their write", async () => {
  // Echoes every frame it reads to stderr as its length: the host's order is the pipe's order.
  const echo = await scripted(`write(READY);
    await readFrames((f) => Deno.stderr.writeSync(new TextEncoder().encode(f.length - 4 + ",")));
    Deno.exit(0);`);
  const { runtime } = spawn(echo);
  await runtime.ready;
  const sources = ["a", "bb", "ccc", "dddd"];
  await Promise.all(
    sources.map((source, i) =>
      runtime.send({ startCell: { cellId: String(i), source, tools: [], storeVersion: 0 } })
    ),
  );
  const lengths = sources.map((source, i) =>
    codec.encodeHostToWorker({ startCell: { cellId: String(i), source, tools: [], storeVersion: 0 } }).length
  );
  const end = await runtime.stop();
  const shutdown = codec.encodeHostToWorker({ shutdown: {} }).length;
  assert.equal(end.stderrTail, [...lengths, shutdown].join(",") + ",");
});

Deno.test("FrameBatches: frames of one turn, and those sent while a write is under way, leave as one write, in order; a large batch frame by frame", async () => {
  const writes: number[][] = [];
  let release: (() => void) | undefined;
  const frames = new FrameBatches((bytes) => {
    writes.push([...bytes]);
    return new Promise<void>((resolve) => release = resolve);
  });
  const first = frames.write(new Uint8Array([1]));
  await Promise.resolve();
  assert.deepEqual(writes, [[1]], "the first frame leaves at once");
  const later = [frames.write(new Uint8Array([2])), frames.write(new Uint8Array([3, 4]))];
  release!();
  await first;
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(writes, [[1], [2, 3, 4]], "what came meanwhile: one write");
  release!();
  await Promise.all(later);
  const big = new Uint8Array(200 * 1024).fill(7);
  const both = [frames.write(big), frames.write(big)];
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(writes.length, 3, "over 256 KiB: not copied into one");
  assert.equal(writes[2].length, big.length);
  release!();
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(writes.length, 4);
  release!();
  await Promise.all(both);
});

Deno.test("FrameBatches: a failed write fails its batch's senders only; the next batch is written", async () => {
  const writes: number[][] = [];
  const frames = new FrameBatches((bytes) => {
    writes.push([...bytes]);
    return bytes[0] === 1 ? Promise.reject(new Error("pipe closed")) : Promise.resolve();
  });
  const failed = [frames.write(new Uint8Array([1])), frames.write(new Uint8Array([2]))];
  for (const sent of failed) await assert.rejects(sent, /pipe closed/);
  await frames.write(new Uint8Array([3]));
  assert.deepEqual(writes, [[1, 2], [3]]);
});

Deno.test("FrameBatches: a held frame leaves with the next frame sent without hold, or alone after HOLD_MS", async () => {
  const writes: number[][] = [];
  const frames = new FrameBatches((bytes) => {
    writes.push([...bytes]);
    return Promise.resolve();
  });
  // Microtask turns only: no timer can fire meanwhile, however loaded the machine (a 5 ms pause
  // outlasted HOLD_MS in a loaded CI run).
  const turns = async () => {
    for (let i = 0; i < 5; i++) await Promise.resolve();
  };
  const configure = frames.write(new Uint8Array([1]), true);
  const replica = frames.write(new Uint8Array([2]), true);
  await turns();
  assert.deepEqual(writes, [], "held");
  await frames.write(new Uint8Array([3])); // a StartCell
  await Promise.all([configure, replica]);
  assert.deepEqual(writes, [[1, 2, 3]]);
  const alone = frames.write(new Uint8Array([4]), true);
  await turns();
  assert.equal(writes.length, 1);
  await alone;
  assert.deepEqual(writes, [[1, 2, 3], [4]], "written once HOLD_MS passed");
});

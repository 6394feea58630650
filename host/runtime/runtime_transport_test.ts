/**
 * The {@link RuntimeTransport} contract, held by every transport the session core can be given:
 * the subprocess (`worker_process.ts`), in-process isolation (`in_process_runtime.ts`) and the
 * tests' `FakeRuntime` (`host/testing.ts`, which the core's unit tests trust to behave like the
 * others). And {@link crashReason}, the SPEC §3.5 reason of each way a runtime ends.
 */
import assert from "node:assert/strict";
import { createWorkerCodec, type WorkerToHost } from "../../proto/worker_codec.ts";
import { resolveLimits } from "../core/limits.ts";
import { FakeRuntime } from "../testing.ts";
import { InProcessRuntime } from "./in_process_runtime.ts";
import { prepareRuntimeDirectory } from "./runtime_files.ts";
import { crashReason, type RuntimeEnd, type RuntimeTransport } from "./runtime_transport.ts";
import { spawnRuntimeProcess } from "./runtime_process.ts";

const codec = createWorkerCodec();
const limits = resolveLimits({});
const parent = await Deno.makeTempDir({ prefix: "runtime-transport-test-" });
globalThis.addEventListener("unload", () => Deno.removeSync(parent, { recursive: true }));
const runtimeDir = prepareRuntimeDirectory(parent);

/** Each transport, with how a cell's text comes back from it. */
const TRANSPORTS: [string, () => RuntimeTransport][] = [
  ["subprocess", () =>
    spawnRuntimeProcess({
      codec,
      deno: Deno.execPath(),
      runtimeDir,
      workParent: parent,
      workerMainHeapMb: 0,
      maxWorkerFrameBytes: limits.maxWorkerFrameBytes,
      stderrTailBytes: limits.stderrTailBytes,
      workerKillGraceMs: limits.workerKillGraceMs,
    })],
  ["in-process", () =>
    new InProcessRuntime({
      codec,
      runtimeDir,
      maxWorkerFrameBytes: limits.maxWorkerFrameBytes,
      workerKillGraceMs: limits.workerKillGraceMs,
    })],
  ["fake", () => {
    const fake = new FakeRuntime({
      onStartCell: (cell) => cell.started().text(cell.start.source).complete(),
    });
    return fake;
  }],
];

/** Configures the runtime and runs a cell whose source is `text("<word>")` (the fake echoes it). */
async function runCell(runtime: RuntimeTransport, cellId: string, word: string): Promise<WorkerToHost[]> {
  const seen: WorkerToHost[] = [];
  const done = Promise.withResolvers<void>();
  runtime.onMessage = (message) => {
    if (message.cellEvent?.cellId !== cellId) return;
    seen.push(message);
    if (message.cellEvent.result !== undefined) done.resolve();
  };
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
    startCell: { cellId, source: `text(${JSON.stringify(word)})`, tools: [], storeVersion: 0 },
  });
  await done.promise;
  return seen;
}

const texts = (frames: WorkerToHost[]) =>
  frames.flatMap((m) => {
    const item = m.cellEvent?.contentItem as { text?: string } | undefined;
    return item?.text === undefined ? [] : [item.text];
  });

for (const [name, make] of TRANSPORTS) {
  Deno.test(`RuntimeTransport (${name}): ready, cell frames in order through onMessage, then an orderly stop by the host`, async () => {
    const runtime = make();
    await runtime.ready;
    assert.equal(runtime.alive, true);
    const frames = await runCell(runtime, "1", "hello");
    assert.ok(texts(frames).join("").includes("hello"), JSON.stringify(frames));
    assert.ok(
      frames.findIndex((m) => m.cellEvent?.started) < frames.findIndex((m) => m.cellEvent?.contentItem),
    );
    const end = await runtime.stop();
    assert.equal(end.kind, "exit");
    assert.equal(end.byHost, true);
    assert.equal(runtime.alive, false);
    assert.equal(await runtime.ended, end, "ended resolves with the same end");
  });

  Deno.test(`RuntimeTransport (${name}): stop and kill are idempotent, ended never rejects, send after the end rejects`, async () => {
    const runtime = make();
    await runtime.ready;
    const ends = await Promise.all([runtime.kill(), runtime.stop(), runtime.kill(), runtime.ended]);
    assert.ok(ends.every((end) => end === ends[0]), "one end for every caller");
    assert.equal(ends[0].byHost, true);
    assert.equal(runtime.alive, false);
    await assert.rejects(runtime.send({ shutdown: {} }));
    await runtime[Symbol.asyncDispose]();
  });

  Deno.test(`RuntimeTransport (${name}): ids are host-local and distinct`, async () => {
    const a = make();
    const b = make();
    assert.notEqual(a.id, b.id);
    await Promise.all([a.kill(), b.kill()]);
  });
}

Deno.test("crashReason: each end kind has its SPEC §3.5 reason; a heap-limit stderr wins over the signal", () => {
  const base = { code: null, signal: null, stderrTail: "" };
  const cases: [RuntimeEnd, string][] = [
    [{ kind: "protocol", byHost: false, detail: "bad frame", ...base }, "worker protocol error: bad frame"],
    [{ kind: "fault", byHost: false, detail: "broke", ...base }, "worker reported an internal fault: broke"],
    [
      { kind: "memory", byHost: false, limitMb: 512, ...base },
      "session runtime exceeded its memory limit of 512 MiB",
    ],
    [{ kind: "unresponsive", byHost: false, detail: "x", ...base }, "session runtime stopped responding"],
    [
      {
        kind: "exit",
        byHost: false,
        code: null,
        signal: "SIGABRT",
        stderrTail: "Fatal JavaScript out of memory",
      },
      "V8 heap limit reached",
    ],
    [
      { kind: "exit", byHost: false, code: 1, signal: null, stderrTail: "... Reached heap limit ..." },
      "V8 heap limit reached",
    ],
    [
      { kind: "exit", byHost: false, code: 137, signal: "SIGKILL", stderrTail: "" },
      "worker process killed by signal SIGKILL",
    ],
    [
      { kind: "exit", byHost: false, code: 3, signal: null, stderrTail: "some error" },
      "worker process exited with code 3",
    ],
    [
      { kind: "exit", byHost: false, code: null, signal: null, stderrTail: "" },
      "worker process exited with code null",
    ],
    // The kind decides before the stderr: a protocol error stays one whatever the runtime printed.
    [
      { kind: "protocol", byHost: false, detail: "d", code: null, signal: null, stderrTail: "heap limit" },
      "worker protocol error: d",
    ],
  ];
  for (const [end, reason] of cases) assert.equal(crashReason(end), reason, JSON.stringify(end));
});

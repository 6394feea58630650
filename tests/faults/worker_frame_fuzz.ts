/**
 * Fault: fuzzed worker frames (issue 20, fault suite), with fast-check (seed printed;
 * `FUZZ_SEED=<n>` replays a run).
 *
 * - The frame decoder of both sides (`FrameDecoder`) and the worker codec's decoders of both
 *   envelopes, fed 10,000 random byte streams in random chunks (raw bytes, and well-framed random
 *   bodies): they return or throw their own errors only (`FrameError`, `RangeError`), never
 *   anything else, and never hang.
 * - A real session runtime process fed random frames on its stdin (after a valid `Configure`,
 *   or without one), then EOF: it exits on its own within 10 s, with 0 or 1 (a `RuntimeFault`),
 *   never by a signal or a hang.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { encodeFrame, FrameDecoder, FrameError } from "../../proto/frame_codec.ts";
import { createWorkerCodec } from "../../proto/worker_codec.ts";
import { buildRuntimeCommand } from "../../host/runtime/runtime_command.ts";
import { prepareRuntimeDirectory } from "../../host/runtime/runtime_files.ts";

const seed = Number(Deno.env.get("FUZZ_SEED") ?? Math.floor(Math.random() * 2 ** 31));
const codec = createWorkerCodec();
const MAX_FRAME = 68_157_440;

/** A well-framed random body (often a known envelope field), or raw bytes. */
const body = fc.oneof(
  fc.uint8Array({ maxLength: 64 }),
  // A known field number of either envelope (1..12), any wire type, then random bytes.
  fc.tuple(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 0, max: 7 }), fc.uint8Array({ maxLength: 48 }))
    .map(([no, wire, rest]) => new Uint8Array([(no << 3) | wire, ...rest])),
);
const framed = fc.array(body, { maxLength: 6 }).map((bodies) =>
  new Uint8Array(bodies.flatMap((b) => [...encodeFrame(b, MAX_FRAME)]))
);
const stream = fc.oneof(fc.uint8Array({ maxLength: 128 }), framed, framed);

Deno.test("fault: 10,000 random byte streams through the frame decoder and both envelope decoders throw only their own errors", () => {
  console.log(`worker frame fuzz seed: ${seed} (FUZZ_SEED=${seed} replays it)`);
  const seen = { frames: 0, decoded: 0, frameErrors: 0, decodeErrors: 0 };
  fc.assert(
    fc.property(
      stream,
      fc.array(fc.integer({ min: 1, max: 32 }), { minLength: 1, maxLength: 8 }),
      fc.constantFrom(0, 16, 64, MAX_FRAME),
      (bytes, cuts, max) => {
        const decoder = new FrameDecoder(max);
        const frames: Uint8Array[] = [];
        try {
          let at = 0;
          for (let i = 0; at < bytes.length; i++) {
            const next = Math.min(bytes.length, at + cuts[i % cuts.length]);
            frames.push(...decoder.push(bytes.subarray(at, next)));
            at = next;
          }
          decoder.finish();
        } catch (error) {
          if (!(error instanceof FrameError)) throw error;
          seen.frameErrors++;
        }
        assert.ok(frames.reduce((n, f) => n + f.length + 4, 0) <= bytes.length);
        for (const frame of frames) {
          seen.frames++;
          for (const decode of [codec.decodeHostToWorker, codec.decodeWorkerToHost]) {
            try {
              decode(frame);
              seen.decoded++;
            } catch (error) {
              if (!(error instanceof RangeError)) throw error;
              seen.decodeErrors++;
            }
          }
        }
      },
    ),
    { seed, numRuns: 10_000 },
  );
  console.log(JSON.stringify(seen));
  assert.ok(seen.decoded > 0 && seen.decodeErrors > 0 && seen.frameErrors > 0, JSON.stringify(seen));
});

Deno.test("fault: a real session runtime fed random frames, then EOF, exits on its own with 0 or 1", async () => {
  const parent = await Deno.makeTempDir({ prefix: "f20-fuzz-" });
  try {
    const runtimeDir = prepareRuntimeDirectory(parent);
    const configure = encodeFrame(
      codec.encodeHostToWorker({
        configure: {
          sessionId: crypto.randomUUID(),
          outputTruncation: 0,
          cellHeapLimitMb: 64,
          maxMessageBytes: 67_108_864,
          maxStoredValueBytes: 67_108_864,
        },
      }),
      MAX_FRAME,
    );
    const exits: Record<string, number> = {};
    let n = 0;
    await fc.assert(
      fc.asyncProperty(stream, fc.boolean(), async (bytes, configured) => {
        const workDir = `${parent}/w${n++}`;
        await Deno.mkdir(workDir);
        const c = buildRuntimeCommand({ deno: Deno.execPath(), runtimeDir, workDir, workerMainHeapMb: 0 });
        const child = new Deno.Command(c.command, {
          args: c.args,
          env: c.env,
          clearEnv: true,
          cwd: c.cwd,
          stdin: "piped",
          stdout: "piped",
          stderr: "piped",
        }).spawn();
        const output = child.output();
        const writer = child.stdin.getWriter();
        try {
          if (configured) await writer.write(configure);
          await writer.write(bytes);
          await writer.close();
        } catch {
          // The runtime may have exited at the first bad frame: its stdin is closed.
        }
        let timer: ReturnType<typeof setTimeout> | undefined;
        const hung = new Promise<"hung">((r) => timer = setTimeout(() => r("hung"), 10_000));
        const status = await Promise.race([output, hung]);
        clearTimeout(timer);
        if (status === "hung") {
          child.kill("SIGKILL");
          await output;
          return false;
        }
        const key = status.signal ?? `exit ${status.code}`;
        exits[key] = (exits[key] ?? 0) + 1;
        return status.signal === null && (status.code === 0 || status.code === 1);
      }),
      { seed, numRuns: 48 },
    );
    console.log(JSON.stringify(exits));
  } finally {
    await Deno.remove(parent, { recursive: true });
  }
});

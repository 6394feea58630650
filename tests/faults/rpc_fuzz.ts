/**
 * Fault: fuzzed request bytes on every RPC (issue 20, fault suite). fast-check sends 1,000 cases
 * to each of the ten RPCs of a real host process (`deno task serve`): random bytes, and valid
 * requests naming a live session with bytes flipped, cut or appended. Every call ends with a
 * response or a gRPC status within 15 s (a streaming call is cancelled after its first event), the
 * host process never exits, its statuses are never `UNKNOWN`, and afterwards it serves a normal
 * client: a new session runs a cell. The seed is printed; `FUZZ_SEED=<n>` replays a run.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { ClientError, createChannel, createClient, Status } from "nice-grpc";
import { codeModeHostDefinition } from "../../proto/loader.ts";
import { CHANNEL_OPTIONS, type Msg, openSession, rawClient, run, serve } from "../_harness.ts";

const RUNS_PER_RPC = Number(Deno.env.get("FUZZ_RUNS") ?? 1_000);
const CALL_TIMEOUT_MS = 15_000;

Deno.test(`fault: ${RUNS_PER_RPC * 10} fuzzed requests over the ten RPCs each get a status; the host keeps serving`, async () => {
  const seed = Number(Deno.env.get("FUZZ_SEED") ?? Math.floor(Math.random() * 2 ** 31));
  console.log(`rpc fuzz seed: ${seed} (FUZZ_SEED=${seed} replays it)`);
  await using p = await serve([
    "--listen",
    "grpc://127.0.0.1:0",
    "--warm-sessions",
    "1",
    // Random bytes often decode as a valid OpenSessionRequest: at most a few runtimes at a time.
    "--limit",
    "maxSessions=6",
  ]);
  const address = p.url.replace(/^grpc:\/\//, "").replace(/^http:\/\//, "");
  const plain = rawClient(address);
  const definition: Msg = codeModeHostDefinition();
  const bytesDefinition: Msg = {};
  for (const [name, method] of Object.entries(definition)) {
    bytesDefinition[name] = { ...(method as Msg), requestSerialize: (bytes: Uint8Array) => bytes };
  }
  const channel = createChannel(address, undefined, CHANNEL_OPTIONS);
  const client = createClient(bytesDefinition, channel) as Msg;
  const live = await openSession(plain.client);
  const sessionId = live.id;
  const valid: Record<string, Msg> = {
    openSession: {
      cellExecutionLimits: { maxYieldTimeMs: 1000, maxHeapSizeBytes: 33_554_432 },
      outputTruncation: 1,
    },
    closeSession: { sessionId: "no-such-session" },
    subscribeToToolCalls: { sessionId, toolNames: [{ namespace: "ns", name: "t" }] },
    completeToolCall: { sessionId, invocationId: "inv-1", succeeded: { outputJson: '{"a":1}' } },
    acknowledgeNotification: { sessionId, notificationId: "n-1" },
    execute: {
      sessionId,
      executionId: "e-1",
      toolCallId: "c-1",
      source: 'text("fuzz")',
      enabledTools: [{ name: "t", description: "d", kind: 1 }],
      yieldTimeMs: 1,
      maxOutputTokens: 100,
    },
    wait: { sessionId, cellId: "1", waitId: "w-1", yieldTimeMs: 1 },
    yieldObservation: { sessionId, executionId: "e-1" },
    cancelWait: { sessionId, waitId: "w-1" },
    terminate: { sessionId, cellId: "999" },
  };
  const codes = new Map<string, number>();
  const hostExit = p.child.status.then(() => true);
  let hostExited = false;
  hostExit.then(() => hostExited = true);

  async function call(name: string, bytes: Uint8Array): Promise<string> {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), CALL_TIMEOUT_MS);
    try {
      if (definition[name].responseStream) {
        // A stream that the host accepted (its response headers arrived) is an answer too: a
        // subscription, for one, carries no event until a tool is called.
        const headers = Promise.withResolvers<string>();
        const events = (async () => {
          const options = { signal: abort.signal, onHeader: () => headers.resolve("headers") };
          for await (const _ of client[name](bytes, options) as AsyncIterable<Msg>) return "event";
          return "OK";
        })();
        return await Promise.race([events, headers.promise]);
      }
      await client[name](bytes, { signal: abort.signal });
      return "OK";
    } catch (error) {
      if (error instanceof ClientError) {
        if (Deno.env.get("FUZZ_DEBUG")) console.log(name, error.details);
        return Status[error.code];
      }
      throw error;
    } finally {
      clearTimeout(timer);
      abort.abort();
    }
  }

  const started = performance.now();
  try {
    for (const name of Object.keys(valid)) {
      // A copy, not the Buffer: `slice` of a Buffer is a view, and the flips below would corrupt it.
      const validBytes = new Uint8Array(definition[name].requestSerialize(valid[name]));
      // Mostly whole (a flip or two, no cut, no tail), so that many decode and reach the core.
      const mutated = fc.tuple(
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 2 }),
        fc.oneof(fc.constant(validBytes.length), fc.nat({ max: validBytes.length })),
        fc.oneof(fc.constant(new Uint8Array(0)), fc.uint8Array({ maxLength: 8 })),
      ).map(([flips, cut, tail]) => {
        const bytes = validBytes.slice(0, cut);
        for (const [at, value] of flips) if (bytes.length > 0) bytes[at % bytes.length] = value;
        return new Uint8Array([...bytes, ...tail]);
      });
      const arbitrary = fc.oneof(fc.uint8Array({ maxLength: 96 }), mutated, mutated);
      await fc.assert(
        fc.asyncProperty(arbitrary, async (bytes) => {
          const outcome = await call(name, bytes);
          const key = `${name} ${outcome}`;
          codes.set(key, (codes.get(key) ?? 0) + 1);
          return outcome !== "UNKNOWN" && !hostExited;
        }),
        { seed, numRuns: RUNS_PER_RPC, endOnFailure: true },
      );
    }
    const ms = performance.now() - started;
    console.log(`${RUNS_PER_RPC * 10} calls in ${Math.round(ms)} ms`);
    console.log([...codes].sort().map(([k, n]) => `${k}: ${n}`).join("\n"));
    assert.ok(!hostExited, "the host process is alive");
    // A normal client is served: a new session runs a cell, and the first session still works.
    await using fresh = await openSession(plain.client);
    assert.deepEqual((await run(plain.client, fresh.id, 'text("after")')).texts, ["after"]);
    assert.deepEqual((await run(plain.client, sessionId, 'text("live")')).texts, ["live"]);
  } finally {
    live.cancel();
    channel.close();
    plain.channel.close();
  }
});

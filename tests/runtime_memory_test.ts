/**
 * The runtime memory bound (`runtimeMemoryMb`, SPEC §3.5, issue 22): memory outside the V8 heap
 * (typed arrays) cannot grow a runtime past the limit; its session crashes with the memory reason
 * soon after the crossing, a bystander session keeps running and the host's own memory stays flat.
 */
import assert from "node:assert/strict";
import { Status } from "nice-grpc";
import { eventually, execute, openSession, processExists, run, startHost } from "./_harness.ts";
import { processTree, residentBytes } from "../host/runtime/memory_watchdog.ts";
import { crashReason } from "../host/runtime/runtime_transport.ts";

const MIB = 1024 * 1024;

/** 1 GiB of touched typed arrays, 32 MiB at a time with a short pause after each. */
const ALLOCATE_1GIB = `
  const kept = [];
  for (let i = 0; i < 32; i++) {
    const chunk = new Uint8Array(32 * 1024 * 1024);
    chunk.fill(1);
    kept.push(chunk);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  text("allocated " + kept.length * 32 + " MiB");
`;

function treeBytes(pid: number): number {
  return processTree(pid).reduce((sum, p) => sum + (residentBytes(p) ?? 0), 0);
}

Deno.test("crashReason() names the memory bound before any exit status", () => {
  assert.equal(
    crashReason({
      kind: "memory",
      byHost: false,
      limitMb: 256,
      code: 137,
      signal: "SIGKILL",
      stderrTail: "",
    }),
    "session runtime exceeded its memory limit of 256 MiB",
  );
});

Deno.test("runtimeMemoryMb=256: a cell allocating 1 GiB of typed arrays crashes its session with the memory reason within 1 s of the crossing; a bystander runs on", async () => {
  await using h = await startHost({ warmSessions: 2, limits: { runtimeMemoryMb: 256 } });
  assert.ok(
    h.log.lines.some((l) => String(l.msg).startsWith("runtime memory bound: 256 MiB per runtime")),
    "the start-up log names the mechanism",
  );
  await using bystander = await openSession(h.client);
  await using s = await openSession(h.client);
  s.pump();
  const pid = h.host.state.session(s.id)!.runtimePid!;
  const hostBefore = residentBytes(Deno.pid)!;

  // The spawned process's tree, sampled from outside, dates the crossing.
  // A sampler can miss the crossing when the host's watchdog kills the runtime first: the crossing
  // then came after the last sample, so that sample's time bounds the latency from above.
  let crossedAt: number | undefined;
  let lastSampleAt = performance.now();
  let peak = 0;
  const sampler = setInterval(() => {
    const bytes = treeBytes(pid);
    if (bytes === 0) return;
    peak = Math.max(peak, bytes);
    if (crossedAt === undefined && bytes > 256 * MIB) crossedAt = performance.now();
    if (crossedAt === undefined) lastSampleAt = performance.now();
  }, 5);
  const { outcome } = await execute(h.client, s.id, ALLOCATE_1GIB, { yieldTimeMs: 60_000 });
  const endedAt = performance.now();
  clearInterval(sampler);

  assert.equal(outcome.completed?.errorText, "exec runtime ended unexpectedly");
  const end = await s.end;
  assert.equal(end?.code, Status.INTERNAL);
  assert.equal(
    end?.details,
    "code-mode V8 runtime thread ended unexpectedly: session runtime exceeded its memory limit of 256 MiB",
  );
  assert.ok(peak > 128 * MIB, `the runtime grew (peak ${peak / MIB} MiB)`);
  const crossed = crossedAt ?? lastSampleAt;
  assert.ok(endedAt - crossed < 1_000, `ended ${endedAt - crossed} ms after the crossing`);
  assert.ok(peak < 1024 * MIB, `the runtime reached ${peak / MIB} MiB`);
  assert.ok(
    h.log.lines.some((l) =>
      l.level === "error" &&
      l.msg === "code-mode host session failed: session runtime exceeded its memory limit of 256 MiB"
    ),
  );
  assert.ok(await eventually(() => !processExists(pid)), "the runtime was reaped");
  // The host did not take the runtime's memory (the allocation was the runtime's alone).
  assert.ok(residentBytes(Deno.pid)! - hostBefore < 64 * MIB, "the host's memory stayed flat");
  assert.deepEqual((await run(h.client, bystander.id, "text(1)")).texts, ["1"]);
});

Deno.test("runtimeMemoryMb=0 turns the bound off: the same cell completes", async () => {
  await using h = await startHost({ warmSessions: 1, limits: { runtimeMemoryMb: 0 } });
  assert.ok(h.log.lines.some((l) => l.msg === "runtime memory bound: off (runtimeMemoryMb=0)"));
  await using s = await openSession(h.client);
  assert.deepEqual((await run(h.client, s.id, ALLOCATE_1GIB)).texts, ["allocated 1024 MiB"]);
});

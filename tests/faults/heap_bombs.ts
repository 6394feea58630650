/**
 * Fault: heap bombs (issue 20, fault suite). A cell that allocates without bound fails on its own
 * with `exec runtime ended unexpectedly: cell heap limit of {N} MiB reached` (SPEC §5.6), under the
 * default limit (1,024 MiB) and under a small one (16 MiB); the session runs its next cell, its
 * stored values are kept (the bomb's writes are discarded), and a bystander session is untouched.
 */
import assert from "node:assert/strict";
import { openSession, run, startHost } from "../_harness.ts";

const BOMB = 'store("lost", 1); const a = []; while (true) a.push(new Array(1_000_000).fill(a.length));';

for (
  const [name, heapBytes, mb] of [["the default", undefined, 1024], ["a 16 MiB", 16_777_216, 16]] as const
) {
  Deno.test(`fault: a heap bomb under ${name} heap limit fails its cell alone; the session and a bystander go on`, async () => {
    await using h = await startHost({ warmSessions: 2 });
    await using s = await openSession(
      h.client,
      heapBytes === undefined ? {} : { cellExecutionLimits: { maxHeapSizeBytes: heapBytes } },
    );
    await using bystander = await openSession(h.client);
    await run(h.client, s.id, 'store("kept", "k")');
    await run(h.client, bystander.id, 'store("b", [1, 2])');
    const pid = h.host.state.session(s.id)!.runtimePid!;
    const bystanderPid = h.host.state.session(bystander.id)!.runtimePid!;
    const bomb = await run(h.client, s.id, BOMB);
    assert.equal(bomb.error, `exec runtime ended unexpectedly: cell heap limit of ${mb} MiB reached`);
    assert.deepEqual(bomb.texts, []);
    assert.equal(h.host.state.session(s.id)!.runtimePid, pid, "the runtime process survived");
    const next = await run(h.client, s.id, 'text(JSON.stringify([load("kept"), load("lost") ?? null]))');
    assert.deepEqual(next.texts, ['["k",null]']);
    assert.equal(next.error, undefined);
    assert.equal(h.host.state.session(bystander.id)!.runtimePid, bystanderPid);
    assert.deepEqual((await run(h.client, bystander.id, 'text(JSON.stringify(load("b")))')).texts, ["[1,2]"]);
  });
}

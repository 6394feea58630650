/**
 * Fault: kill -9 of the host (issue 20, fault suite). Its session runtimes notice the end of
 * their input and exit: none survives 2 s, whether idle (the warm pool), running a cell that
 * waits, or running a cell that spins.
 */
import assert from "node:assert/strict";
import { childrenOf } from "../_procs.ts";
import {
  eventually,
  execute,
  FOREVER,
  openSession,
  processExists,
  rawClient,
  serve,
  SPIN,
} from "../_harness.ts";

Deno.test("fault: kill -9 of the host leaves no runtime alive after 2 s (idle, waiting and spinning cells)", async () => {
  const p = await serve(["--listen", "grpc://127.0.0.1:0", "--warm-sessions", "2"]);
  const [host] = childrenOf(p.child.pid);
  const raw = rawClient(p.url);
  try {
    const waiting = await openSession(raw.client);
    const spinning = await openSession(raw.client);
    await execute(raw.client, waiting.id, FOREVER, { yieldTimeMs: 1 });
    await execute(raw.client, spinning.id, SPIN, { yieldTimeMs: 1 });
    assert.ok(await eventually(() => childrenOf(host).length >= 4, 20_000), "two sessions and the warm pool");
    const runtimes = childrenOf(host);
    Deno.kill(host, "SIGKILL");
    const killedAt = performance.now();
    const gone = await eventually(() => runtimes.every((pid) => !processExists(pid)), 2_000);
    const alive = runtimes.filter(processExists);
    console.log(
      `${runtimes.length} runtimes gone ${
        Math.round(performance.now() - killedAt)
      } ms after the host's kill -9`,
    );
    for (const pid of alive) Deno.kill(pid, "SIGKILL");
    assert.ok(
      gone,
      `${alive.length} of ${runtimes.length} runtimes alive ${performance.now() - killedAt} ms after`,
    );
  } finally {
    raw.channel.close();
    try {
      Deno.kill(p.child.pid, "SIGKILL");
    } catch {
      // Already gone.
    }
    await p.exited();
  }
});

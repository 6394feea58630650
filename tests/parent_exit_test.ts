/**
 * The host exits with the process that started it (issue 20, item 3): `deno task serve` runs the
 * host as its child, and a supervisor that kills the task process (kill -9) must not leave the
 * host and its session runtimes running.
 */
import assert from "node:assert/strict";
import { childrenOf } from "./_procs.ts";
import { eventually, processExists, serve } from "./_harness.ts";

Deno.test("kill -9 of the `deno task serve` wrapper: the host shuts down and no runtime survives", async () => {
  const p = await serve(["--listen", "grpc://127.0.0.1:0", "--warm-sessions", "2"]);
  const wrapper = p.child.pid;
  const [host] = childrenOf(wrapper);
  assert.ok(host !== undefined, "the wrapper runs the host as its child");
  // The warm runtimes are the host's children.
  assert.ok(await eventually(() => childrenOf(host).length >= 2, 20_000), "the warm runtimes started");
  const runtimes = childrenOf(host);
  Deno.kill(wrapper, "SIGKILL");
  try {
    assert.ok(await eventually(() => !processExists(host), 15_000), "the host exited");
    assert.ok(
      await eventually(() => runtimes.every((pid) => !processExists(pid)), 5_000),
      "its runtimes are gone",
    );
  } finally {
    // Not left behind when the test fails (the host holds the wrapper's output pipes open).
    for (const pid of [host, ...runtimes]) if (processExists(pid)) Deno.kill(pid, "SIGKILL");
  }
  const status = await p.exited();
  assert.equal(status.signal, "SIGKILL");
  assert.ok(p.stderr().includes("code-mode-host parent process ended; shutting down"), p.stderr());
});

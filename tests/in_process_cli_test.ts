/**
 * `--isolation in-process` on the command line (SPEC §9.8): the host starts, warns that the mode is
 * not for untrusted code, runs cells in its own process (no runtime subprocess), and refuses a
 * heap limit with the §2.7 status; an unknown mode is still refused with exit 2.
 */
import assert from "node:assert/strict";
import { Status } from "nice-grpc";
import { grpcError, openSession, rawClient, run, serve } from "./_harness.ts";

function descendants(pid: number): number[] {
  const out = new Deno.Command("pgrep", { args: ["-P", String(pid)], stdout: "piped" }).outputSync();
  const children = new TextDecoder().decode(out.stdout).split("\n").filter(Boolean).map(Number);
  return children.flatMap((child) => [child, ...descendants(child)]);
}

Deno.test("--isolation in-process: the warning, cells without runtime subprocesses, max_heap_size_bytes refused", async () => {
  await using host = await serve(["--listen", "grpc://127.0.0.1:0", "--isolation", "in-process"]);
  using raw = rawClient(host.url.replace(/^http:\/\//, ""));
  await using s = await openSession(raw.client);
  const r = await run(raw.client, s.id, 'text("in-process")');
  assert.deepEqual(r.texts, ["in-process"]);
  const refused = await grpcError(
    openSession(raw.client, { cellExecutionLimits: { maxHeapSizeBytes: String(64 * 1024 * 1024) } }),
  );
  assert.deepEqual(refused, {
    code: Status.FAILED_PRECONDITION,
    details: "code-mode session provider does not support resource limits",
  });
  // No process below the CLI runs a session runtime (`<runtimeDir>/runtime.js`).
  const runtimes = descendants(host.child.pid).filter((pid) => {
    try {
      return Deno.readTextFileSync(`/proc/${pid}/cmdline`).includes("runtime.js");
    } catch {
      return false;
    }
  });
  assert.deepEqual(runtimes, []);
  const warning = host.stderr().split("\n").filter(Boolean).map((line) => JSON.parse(line))
    .find((line) =>
      line.level === "warn" && String(line.msg).startsWith("code-mode in-process isolation is not safe")
    );
  assert.ok(warning, host.stderr());
});

Deno.test("--isolation with an unknown mode is refused with exit 2", async () => {
  await using host = await serve(["--listen", "grpc://127.0.0.1:0", "--isolation", "sideways"], {
    expectFailure: true,
  });
  const status = await host.exited();
  assert.equal(status.code, 2);
  assert.match(host.stderr(), /--isolation `sideways` is not supported by this build/);
});

/**
 * Run by deny_run_test.ts as `deno test --allow-all --deny-run tests/_deny_run_suite.ts`: a process
 * that Deno itself forbids to spawn. The embedded provider (choosing in-process isolation on its
 * own) and `createHost({ isolation: "in-process" })` behind the gRPC provider both run the shared
 * client-library scenarios (open, cells, stored values, tools, notifications, CellClosed, waits,
 * terminate of a spinning cell, Server mode, and `max_heap_size_bytes` refused with the message of
 * SPEC §2.7), and both log the warning of SPEC §9.8.
 */
import assert from "node:assert/strict";
import { GrpcCodeModeSessionProvider } from "../client/provider.ts";
import { InProcessCodeModeSessionProvider } from "../embedded/provider.ts";
import { IN_PROCESS_WARNING } from "../host/runtime/in_process_runtime.ts";
import { CapturedLog, startHost } from "./_harness.ts";
import { providerScenarios } from "./_provider_suite.ts";

const WARNING = "code-mode in-process isolation is not safe for untrusted code: cells run in Workers of " +
  "the host process with the host's permissions, and a cell that ignores a stop cannot be stopped";

Deno.test("this process may not spawn: Deno refuses Deno.Command", () => {
  assert.equal(Deno.permissions.querySync({ name: "run" }).state, "denied");
  assert.throws(
    () => new Deno.Command(Deno.execPath(), { args: ["--version"] }).spawn(),
    Deno.errors.NotCapable,
  );
});

Deno.test("the embedded provider chooses in-process isolation and says so; the warning is logged", async () => {
  const log = new CapturedLog();
  await using provider = new InProcessCodeModeSessionProvider({ warmSessions: 0, log });
  const session = await provider.createSession();
  await session.shutdown();
  assert.equal(provider.isolation, "in-process");
  const messages = log.lines.map((line) => line.msg);
  assert.ok(
    messages.includes("code-mode embedded provider uses in-process isolation (run is not permitted)"),
  );
  assert.equal(IN_PROCESS_WARNING, WARNING);
  assert.equal(log.lines.find((line) => line.msg === WARNING)?.level, "warn");
});

Deno.test("createHost({ isolation: 'in-process' }) logs the warning at start", async () => {
  await using h = await startHost({ isolation: "in-process", warmSessions: 0 });
  assert.equal(h.log.lines.find((line) => line.msg === WARNING)?.level, "warn");
});

providerScenarios("embedded (default isolation, --deny-run)", () => {
  const provider = new InProcessCodeModeSessionProvider({ warmSessions: 1, log: "error" });
  return Promise.resolve({ provider, heapLimits: false, [Symbol.asyncDispose]: () => provider.shutdown() });
});

providerScenarios("gRPC to an in-process host (--deny-run)", async () => {
  const h = await startHost({ isolation: "in-process" });
  return {
    provider: new GrpcCodeModeSessionProvider(`http://127.0.0.1:${h.host.port}`),
    heapLimits: false,
    [Symbol.asyncDispose]: () => h[Symbol.asyncDispose](),
  };
});

/**
 * The embedded provider (`InProcessCodeModeSessionProvider`, SPEC §9.8) in both isolations runs the
 * client-library scenarios the gRPC provider runs (tests/_provider_suite.ts), with no gRPC server.
 */
import assert from "node:assert/strict";
import { InProcessCodeModeSessionProvider } from "../embedded/provider.ts";
import { CapturedLog } from "./_harness.ts";
import { providerScenarios } from "./_provider_suite.ts";

for (const isolation of ["subprocess", "in-process"] as const) {
  providerScenarios(`embedded ${isolation}`, () => {
    const provider = new InProcessCodeModeSessionProvider({ isolation, warmSessions: 1, log: "error" });
    return Promise.resolve({
      provider,
      heapLimits: isolation === "subprocess",
      [Symbol.asyncDispose]: () => provider.shutdown(),
    });
  });
}

Deno.test("the embedded provider logs the isolation it chose; in-process also logs the warning", async () => {
  for (const isolation of [undefined, "in-process"] as const) {
    const log = new CapturedLog();
    await using provider = new InProcessCodeModeSessionProvider({ isolation, warmSessions: 0, log });
    await (await provider.createSession()).shutdown();
    const chosen = isolation ?? "subprocess"; // this test process may run deno
    assert.equal(provider.isolation, chosen);
    const messages = log.lines.map((line) => line.msg);
    assert.ok(
      messages.includes(
        `code-mode embedded provider uses ${chosen} isolation${isolation ? "" : " (run is permitted)"}`,
      ),
      JSON.stringify(messages),
    );
    assert.equal(
      messages.includes(
        "code-mode in-process isolation is not safe for untrusted code: cells run in Workers of the host " +
          "process with the host's permissions, and a cell that ignores a stop cannot be stopped",
      ),
      chosen === "in-process",
    );
  }
});

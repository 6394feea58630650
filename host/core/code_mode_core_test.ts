import assert from "node:assert/strict";
import { FakeClock } from "../testing.ts";
import { Logger } from "../ops/log.ts";
import { CodeModeCore } from "./code_mode_core.ts";
import { HostError, type HostErrorCode } from "./errors.ts";
import { type Limits, resolveLimits } from "./limits.ts";
import { SessionManager } from "./session_manager.ts";

const UNKNOWN = "00000000-0000-4000-8000-000000000000";

/** A core whose manager never needs a runtime: every case here is refused before one is taken. */
function core(limits: Partial<Limits> = {}, clientSessionIds = false): CodeModeCore {
  const manager = new SessionManager({
    limits: resolveLimits(limits),
    log: new Logger("error", () => {}),
    clock: new FakeClock(),
    warmSessions: 0,
    runtime: { deno: "/nonexistent/deno", runtimeDir: "/nonexistent", workParent: "/nonexistent" },
  });
  return new CodeModeCore({ manager, clientSessionIds });
}

async function refusal(work: () => unknown): Promise<{ code: HostErrorCode; message: string }> {
  try {
    const result = work();
    if (result && typeof (result as AsyncIterator<unknown>).next === "function") {
      await (result as AsyncIterator<unknown>).next();
    } else await result;
  } catch (error) {
    assert.ok(error instanceof HostError, `not a HostError: ${error}`);
    return { code: error.code, message: error.message };
  }
  assert.fail("not refused");
}

Deno.test("CodeModeCore validates session IDs with the SPEC messages before anything else", async () => {
  const c = core();
  const cases: [() => unknown, HostErrorCode, string][] = [
    [() => c.closeSession(""), "invalid_request", "code-mode session ID must not be empty"],
    [() => c.closeSession("x".repeat(257)), "invalid_request", "code-mode session ID exceeds 256 bytes"],
    [() => c.closeSession("session-1"), "invalid_request", "code-mode session ID must be a UUID"],
    [() => c.closeSession(UNKNOWN), "unknown_session", `unknown code-mode session ${UNKNOWN}`],
    [
      () => c.execute({ sessionId: UNKNOWN, executionId: "", toolCallId: "", source: "" }),
      "unknown_session",
      `unknown code-mode session ${UNKNOWN}`,
    ],
    [
      () => c.wait({ sessionId: "", cellId: "1", waitId: "w" }),
      "invalid_request",
      "code-mode session ID must not be empty",
    ],
    [
      () => c.terminate({ sessionId: UNKNOWN, cellId: "1" }),
      "unknown_session",
      `unknown code-mode session ${UNKNOWN}`,
    ],
    [
      () => c.yieldObservation({ sessionId: UNKNOWN }),
      "unknown_session",
      `unknown code-mode session ${UNKNOWN}`,
    ],
    [
      () => c.acknowledgeNotification({ sessionId: UNKNOWN, notificationId: "n" }),
      "unknown_session",
      `unknown code-mode session ${UNKNOWN}`,
    ],
    [
      () => c.subscribeToToolCalls({ sessionId: "nope" }),
      "invalid_request",
      "code-mode session ID must be a UUID",
    ],
    [
      () => c.completeToolCall({ sessionId: UNKNOWN, invocationId: "i" }),
      "unknown_session",
      `unknown code-mode session ${UNKNOWN}`,
    ],
  ];
  for (const [work, code, message] of cases) assert.deepEqual(await refusal(work), { code, message });
});

Deno.test("CodeModeCore.openSession checks the heap size and gives the slot back", async () => {
  const c = core({ maxSessions: 1 });
  assert.deepEqual(await refusal(() => c.openSession({ maxHeapSizeBytes: 2n ** 53n })), {
    code: "invalid_request",
    message: "maximum heap size exceeds this platform",
  });
  const min = c.limits.minHeapSizeBytes;
  assert.deepEqual(await refusal(() => c.openSession({ maxHeapSizeBytes: BigInt(min - 1) })), {
    code: "invalid_request",
    message: `maximum heap size must be at least ${min} bytes`,
  });
  // The one slot came back both times: the next refusal is the heap again, not "too many sessions".
  assert.equal((await refusal(() => c.openSession({ maxHeapSizeBytes: 1n }))).code, "invalid_request");
});

Deno.test("CodeModeCore admission: no request permit, no session slot", async () => {
  assert.deepEqual(await refusal(() => core({ maxInFlightRequests: 0 }).openSession({})), {
    code: "overloaded",
    message: "code-mode host has too many in-flight requests",
  });
  assert.deepEqual(await refusal(() => core({ maxSessions: 0 }).openSession({})), {
    code: "overloaded",
    message: "code-mode host has too many sessions",
  });
});

Deno.test("CodeModeCore session IDs: host-chosen by default, client-chosen when enabled", async () => {
  assert.deepEqual(await refusal(() => core().openSession({ sessionId: "session-1" })), {
    code: "invalid_request",
    message: "code-mode session IDs are chosen by the host",
  });
  const client = core({}, true);
  assert.deepEqual(await refusal(() => client.openSession({})), {
    code: "invalid_request",
    message: "code-mode session ID must not be empty",
  });
  // Client-chosen IDs need not be UUIDs.
  assert.deepEqual(await refusal(() => client.closeSession("session-1")), {
    code: "unknown_session",
    message: "unknown code-mode session session-1",
  });
});

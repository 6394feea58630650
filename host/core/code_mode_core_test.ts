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

Deno.test("CodeModeCore.openSession refuses max_pending_delegate_calls 0 in the reference's words and gives the slot back", async () => {
  const c = core({ maxSessions: 1 });
  for (let i = 0; i < 2; i++) {
    // The one slot came back: the second refusal is the capacity again, not "too many sessions".
    assert.deepEqual(await refusal(() => c.openSession({ maxPendingDelegateCalls: 0 })), {
      code: "invalid_request",
      message: "callback capacity must be positive",
    });
  }
});

Deno.test("CodeModeCore looks a session up by any UUID form and quotes the ID as it was sent", async () => {
  const c = core();
  const upper = "ABCDEF12-2222-4333-8444-555555555555";
  for (const id of [upper, `{${upper}}`, `urn:uuid:${upper}`, upper.replaceAll("-", "")]) {
    assert.deepEqual(await refusal(() => c.closeSession(id)), {
      code: "unknown_session",
      message: `unknown code-mode session ${id}`,
    });
  }
  for (const id of [`{${upper.replaceAll("-", "")}}`, `URN:UUID:${upper}`, ` ${upper}`]) {
    assert.deepEqual(await refusal(() => c.closeSession(id)), {
      code: "invalid_request",
      message: "code-mode session ID must be a UUID",
    });
  }
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

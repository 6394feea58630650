import assert from "node:assert/strict";
import { FakeClock } from "../testing.ts";
import { Logger } from "../ops/log.ts";
import { CodeModeCore, type ExecuteRequest, type ToolDefinition } from "./code_mode_core.ts";
import { Permits } from "./permits.ts";
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

/** A real engine whose cells run in-process (Workers of this process): no subprocess needed. */
async function engine() {
  const { assembleHost } = await import("../assemble.ts");
  return await assembleHost({ isolation: "in-process", warmSessions: 0, log: new Logger("error", () => {}) });
}

/** Runs one cell to its initial outcome; its texts, or the refusal. */
async function run(
  c: CodeModeCore,
  request: Omit<ExecuteRequest, "executionId" | "toolCallId">,
): Promise<string[]> {
  let texts: string[] = [];
  for await (
    const event of c.execute({ ...request, executionId: crypto.randomUUID(), toolCallId: "call-1" })
  ) {
    if (event.type === "outcome") {
      texts = event.outcome.contentItems.flatMap((item) => "text" in item ? [item.text.text] : []);
    }
  }
  return texts;
}

const definition = (name: string, description = `the ${name} tool`): ToolDefinition => ({
  name,
  toolName: { name },
  description,
  kind: 1,
  inputSchemaJson: new TextEncoder().encode('{"type":"object"}'),
});

Deno.test("CodeModeCore catalogRevision: a session's cells reuse, replace and refuse catalogs (both doors' parameter)", async () => {
  await using e = {
    engine: await engine(),
    [Symbol.asyncDispose]() {
      return this.engine.shutdown();
    },
  };
  const c = e.engine.core;
  const one = await c.openSession({});
  const two = await c.openSession({});
  const source = `text(Object.keys(tools).join(","))`;
  const s = one.sessionId;
  assert.deepEqual(
    await run(c, {
      sessionId: s,
      source,
      catalogRevision: 1n,
      enabledTools: [definition("a"), definition("b")],
    }),
    ["a,b"],
  );
  assert.deepEqual(await run(c, { sessionId: s, source, catalogRevision: 1n }), ["a,b"]);
  assert.deepEqual(
    await run(c, {
      sessionId: s,
      source,
      catalogRevision: 1n,
      enabledTools: [definition("a"), definition("b")],
    }),
    ["a,b"],
  );
  for (
    const [request, message] of [
      [{ catalogRevision: 1n, enabledTools: [definition("c")] }, "conflicting code-mode catalog revision"],
      [
        { catalogRevision: 1n, enabledTools: [definition("a"), definition("b", "x")] },
        "conflicting code-mode catalog revision",
      ],
      [{ catalogRevision: 2n }, "unknown code-mode catalog revision"],
      [{ catalogRevision: 0n }, "invalid code-mode catalog revision"],
      [{ catalogRevision: 0n, enabledTools: [definition("a")] }, "invalid code-mode catalog revision"],
    ] as const
  ) {
    assert.deepEqual(
      await refusal(() =>
        c.execute({ sessionId: s, executionId: crypto.randomUUID(), toolCallId: "c", source, ...request })
      ),
      {
        code: "catalog",
        message,
      },
    );
  }
  // No revision: the request's tools, the catalog untouched.
  assert.deepEqual(await run(c, { sessionId: s, source, enabledTools: [definition("e")] }), ["e"]);
  assert.deepEqual(await run(c, { sessionId: s, source }), [""]);
  // A higher revision replaces it; a lower one is used and not stored.
  assert.deepEqual(
    await run(c, { sessionId: s, source, catalogRevision: 3n, enabledTools: [definition("c")] }),
    ["c"],
  );
  assert.deepEqual(
    await run(c, { sessionId: s, source, catalogRevision: 2n, enabledTools: [definition("d")] }),
    ["d"],
  );
  assert.deepEqual(await run(c, { sessionId: s, source, catalogRevision: 3n }), ["c"]);
  assert.equal(
    (await refusal(() =>
      c.execute({ sessionId: s, executionId: "x", toolCallId: "c", source, catalogRevision: 1n })
    )).code,
    "catalog",
  );
  // One catalog per session; an invalid tool is refused before the catalog is touched.
  assert.equal(
    (await refusal(() =>
      c.execute({ sessionId: two.sessionId, executionId: "y", toolCallId: "c", source, catalogRevision: 3n })
    )).message,
    "unknown code-mode catalog revision",
  );
  assert.deepEqual(
    await refusal(() =>
      c.execute({
        sessionId: two.sessionId,
        executionId: "z",
        toolCallId: "c",
        source,
        catalogRevision: 5n,
        enabledTools: [{ ...definition("a"), kind: 7 }],
      })
    ),
    { code: "invalid_request", message: "tool definition has an invalid kind" },
  );
  assert.equal(
    (await refusal(() =>
      c.execute({ sessionId: two.sessionId, executionId: "w", toolCallId: "c", source, catalogRevision: 5n })
    )).message,
    "unknown code-mode catalog revision",
  );
});

Deno.test("CodeModeCore delegate capacity: a session's own cap and a pool shared by a door's sessions", async () => {
  await using e = {
    engine: await engine(),
    [Symbol.asyncDispose]() {
      return this.engine.shutdown();
    },
  };
  const c = e.engine.core;
  const pool = new Permits(3);
  const a = await c.openSession({ maxPendingDelegateCalls: 2, delegatePermits: pool });
  const b = await c.openSession({ maxPendingDelegateCalls: 2, delegatePermits: pool });
  // Subscribed, never answered: every call stays pending.
  using _subA = c.subscribeToToolCalls({ sessionId: a.sessionId });
  using _subB = c.subscribeToToolCalls({ sessionId: b.sessionId });
  const source = (n: number) =>
    `for (let i = 0; i < ${n - 1}; i++) void tools.t({});
     try { await tools.t({}); } catch (e) { text(String(e)); }
     yield_control(); await new Promise(() => {})`; // the pending calls stay pending
  const enabledTools = [definition("t")];
  assert.deepEqual(await run(c, { sessionId: a.sessionId, source: source(3), enabledTools }), [
    "code-mode session has too many pending delegate calls",
  ]);
  // a holds 2 of the pool's 3: b's second call finds the pool empty.
  assert.deepEqual(await run(c, { sessionId: b.sessionId, source: source(2), enabledTools }), [
    "code-mode host has too many pending delegate calls",
  ]);
});

Deno.test("CodeModeCore lenientIds (JSON host V1): cell and session IDs are not checked; a small heap is raised", async () => {
  const { assembleHost } = await import("../assemble.ts");
  const engine = await assembleHost({
    isolation: "in-process",
    warmSessions: 0,
    clientSessionIds: true,
    log: new Logger("error", () => {}),
  });
  try {
    const c = engine.core;
    const long = "s".repeat(300);
    await c.openSession({ sessionId: long });
    for (const cellId of ["", "x".repeat(300)]) {
      const missing = await c.wait({ sessionId: long, cellId, waitId: crypto.randomUUID() });
      assert.equal(missing.state, "missingCell");
      assert.equal(
        missing.outcome.kind === "completed" && missing.outcome.errorText,
        `exec cell ${cellId} not found`,
      );
    }
    assert.deepEqual(await run(c, { sessionId: long, source: `text("ok")` }), ["ok"]);
    assert.deepEqual(await refusal(() => c.closeSession("nope")), {
      code: "unknown_session",
      message: "unknown code-mode session nope",
    });
  } finally {
    await engine.shutdown();
  }
});

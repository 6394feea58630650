/**
 * Wire contract and validation against a real host (SPEC §2, §12.1, §12.3 scenario 22 and 27).
 */
import assert from "node:assert/strict";
import { Status } from "nice-grpc";
import { collect, execute, grpcError, openSession, run, startHost, texts } from "./_harness.ts";

const UUID4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

// Scenarios 1 and 2 as Codex's own host answers them (it wins over SPEC §2.4): `opened` carries
// `output_truncation` only for SERVER (a CLIENT session leaves it out), and a number that is no
// mode is refused.
Deno.test("OpenSession with an empty request opens a CLIENT session with a UUIDv4 (scenario 1)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client, {});
  assert.match(s.id, UUID4);
  assert.equal(s.opened.outputTruncation, undefined);
  assert.equal(s.opened.supportsCatalogRevision, true);
});

Deno.test("OpenSession selects SERVER only when asked for SERVER (scenario 2)", async (t) => {
  await using h = await startHost();
  for (const [asked, selected] of [[2, 2], [0, undefined], [1, undefined]]) {
    await t.step(`asked ${asked} → ${selected}`, async () => {
      await using s = await openSession(h.client, { outputTruncation: asked });
      assert.equal(s.opened.outputTruncation, selected);
    });
  }
  await t.step("asked 7 → refused", async () => {
    assert.deepEqual(await grpcError(collect(h.client.openSession({ outputTruncation: 7 }))), {
      code: Status.INVALID_ARGUMENT,
      details: "unknown code-mode output truncation mode",
    });
  });
});

Deno.test("Execute validates execution IDs and a following valid Execute works (scenario 3)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  assert.deepEqual(await grpcError(execute(h.client, s.id, "text(1)", { executionId: "" })), {
    code: Status.INVALID_ARGUMENT,
    details: "code-mode execution ID must not be empty",
  });
  assert.deepEqual(await grpcError(execute(h.client, s.id, "text(1)", { executionId: "e".repeat(257) })), {
    code: Status.INVALID_ARGUMENT,
    details: "code-mode execution ID exceeds 256 bytes",
  });
  const ok = await run(h.client, s.id, "text(1)");
  assert.deepEqual(ok.texts, ["1"]);
  assert.equal(ok.outcome.cellId, "1");
});

Deno.test("A malformed session ID is INVALID_ARGUMENT and an unknown one NOT_FOUND (scenario 4)", async () => {
  await using h = await startHost();
  assert.deepEqual(await grpcError(execute(h.client, "not-a-uuid", "text(1)")), {
    code: Status.INVALID_ARGUMENT,
    details: "code-mode session ID must be a UUID",
  });
  const unknown = crypto.randomUUID();
  assert.deepEqual(await grpcError(execute(h.client, unknown, "text(1)")), {
    code: Status.NOT_FOUND,
    details: `unknown code-mode session ${unknown}`,
  });
  for (
    const call of [
      () => h.client.wait({ sessionId: unknown, cellId: "1", waitId: "w" }),
      () => h.client.terminate({ sessionId: unknown, cellId: "1" }),
      () => h.client.closeSession({ sessionId: unknown }),
      () => h.client.cancelWait({ sessionId: unknown, waitId: "w" }),
      () => h.client.yieldObservation({ sessionId: unknown, waitId: "w" }),
    ]
  ) {
    assert.deepEqual(await grpcError(call()), {
      code: Status.NOT_FOUND,
      details: `unknown code-mode session ${unknown}`,
    });
  }
  assert.deepEqual(await grpcError(h.client.closeSession({ sessionId: "" })), {
    code: Status.INVALID_ARGUMENT,
    details: "code-mode session ID must not be empty",
  });
});

Deno.test("Reused execution and wait IDs are ALREADY_EXISTS (scenario 8)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  await execute(h.client, s.id, "text(1)", { executionId: "e1" });
  assert.deepEqual(await grpcError(execute(h.client, s.id, "text(1)", { executionId: "e1" })), {
    code: Status.ALREADY_EXISTS,
    details: "code-mode execution ID `e1` was reused",
  });
  await h.client.wait({ sessionId: s.id, cellId: "9", waitId: "w1", yieldTimeMs: 0 });
  assert.deepEqual(
    await grpcError(h.client.wait({ sessionId: s.id, cellId: "9", waitId: "w1", yieldTimeMs: 0 })),
    {
      code: Status.ALREADY_EXISTS,
      details: "code-mode wait ID `w1` was reused",
    },
  );
});

Deno.test("YieldObservation without an ID is INVALID_ARGUMENT (scenario 9) and empty IDs are named (14b)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  assert.deepEqual(await grpcError(h.client.yieldObservation({ sessionId: s.id })), {
    code: Status.INVALID_ARGUMENT,
    details: "missing code-mode observation ID",
  });
  assert.deepEqual(await grpcError(h.client.yieldObservation({ sessionId: s.id, waitId: "" })), {
    code: Status.INVALID_ARGUMENT,
    details: "code-mode wait ID must not be empty",
  });
  assert.deepEqual(await grpcError(h.client.yieldObservation({ sessionId: s.id, executionId: "" })), {
    code: Status.INVALID_ARGUMENT,
    details: "code-mode execution ID must not be empty",
  });
});

Deno.test("AcknowledgeNotification accepts any well-formed UUID (scenario 12)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  assert.deepEqual(
    await h.client.acknowledgeNotification({ sessionId: s.id, notificationId: crypto.randomUUID() }),
    {},
  );
  assert.deepEqual(
    await grpcError(h.client.acknowledgeNotification({ sessionId: s.id, notificationId: "x" })),
    {
      code: Status.INVALID_ARGUMENT,
      details: "code-mode notification ID must be a UUID",
    },
  );
});

// Scenario 13 as Codex's own host answers it: every max_heap_size_bytes opens the session (this
// host keeps the limit it applies between 16 MiB and 2^53 - 1 bytes).
Deno.test("max_heap_size_bytes below 16 MiB or above 2^53 - 1 opens the session (scenario 13)", async () => {
  await using h = await startHost();
  for (const heap of [1_048_576, "9007199254740992", 16_777_216]) {
    await using s = await openSession(h.client, { cellExecutionLimits: { maxHeapSizeBytes: heap } });
    assert.deepEqual((await run(h.client, s.id, "text(1)")).texts, ["1"]);
  }
});

Deno.test("Tool definitions and names are validated (scenarios 7 and 14a)", async (t) => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const tool = (over: Record<string, unknown>) => ({
    name: "echo",
    toolName: { name: "echo" },
    description: "",
    kind: 1,
    ...over,
  });
  const cases: [string, unknown, string][] = [
    ["kind UNSPECIFIED", tool({ kind: 0 }), "tool definition has an invalid kind"],
    ["no tool_name", tool({ toolName: undefined }), "tool definition is missing its tool name"],
    ["empty tool name", tool({ toolName: { name: "" } }), "code-mode tool name must not be empty"],
    [
      "long namespace",
      tool({ toolName: { name: "echo", namespace: "n".repeat(257) } }),
      "code-mode tool namespace exceeds 256 bytes",
    ],
    ["empty definition name", tool({ name: "" }), "code-mode tool definition name must not be empty"],
  ];
  for (const [name, def, message] of cases) {
    await t.step(name, async () => {
      assert.deepEqual(await grpcError(execute(h.client, s.id, "text(1)", { enabledTools: [def] })), {
        code: Status.INVALID_ARGUMENT,
        details: message,
      });
    });
  }
  await t.step("bad input schema", async () => {
    const { code, details } = await grpcError(
      execute(h.client, s.id, "text(1)", {
        enabledTools: [tool({ inputSchemaJson: new TextEncoder().encode("{") })],
      }),
    );
    assert.equal(code, Status.INVALID_ARGUMENT);
    // serde_json's text, as Codex's host gives it.
    assert.equal(details, "invalid tool input schema: EOF while parsing an object at line 1 column 1");
  });
  await t.step('namespace "" is accepted in a definition', async () => {
    const r = await run(h.client, s.id, "text(typeof tools.echo)");
    assert.deepEqual(r.texts, ["undefined"]);
    const { outcome } = await execute(h.client, s.id, "text(typeof tools.echo)", {
      enabledTools: [tool({ toolName: { name: "echo", namespace: "" } })],
    });
    assert.deepEqual(texts(outcome), ["function"]);
  });
  await t.step("subscription filters are validated", async () => {
    assert.deepEqual(
      await grpcError(collect(h.client.subscribeToToolCalls({ sessionId: s.id, toolNames: [{ name: "" }] }))),
      { code: Status.INVALID_ARGUMENT, details: "code-mode tool name must not be empty" },
    );
    assert.deepEqual(
      await grpcError(
        collect(
          h.client.subscribeToToolCalls({
            sessionId: s.id,
            toolNames: [{ name: "a", namespace: "n".repeat(257) }],
          }),
        ),
      ),
      { code: Status.INVALID_ARGUMENT, details: "code-mode tool namespace exceeds 256 bytes" },
    );
    const filters = Array.from({ length: 65 }, (_, i) => ({ name: `t${i}` }));
    assert.deepEqual(
      await grpcError(collect(h.client.subscribeToToolCalls({ sessionId: s.id, toolNames: filters }))),
      { code: Status.INVALID_ARGUMENT, details: "code-mode tool subscription exceeds 64 filters" },
    );
  });
});

Deno.test('The first cell streams started{"1"} then completed, and the next cell is "2" (scenario 22)', async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const events: unknown[] = await collect(
    h.client.execute({
      sessionId: s.id,
      executionId: "first",
      toolCallId: "call-1",
      source: 'text("before")',
    }),
  );
  assert.equal(events.length, 2);
  assert.deepEqual((events[0] as { started: unknown }).started, { executionId: "first", cellId: "1" });
  const outcome = (events[1] as { outcome: { completed: unknown; cellId: string } }).outcome;
  assert.deepEqual(texts(outcome), ["before"]);
  assert.ok(outcome.completed);
  assert.equal(outcome.cellId, "1");
  assert.equal((await run(h.client, s.id, "text(2)")).outcome.cellId, "2");
});

Deno.test("Wait on an unknown cell answers missing_cell with its own duration (scenario 27)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const response = await h.client.wait({
    sessionId: s.id,
    cellId: "missing-cell",
    waitId: "w",
    yieldTimeMs: 0,
  });
  assert.equal(response.state, "missingCell");
  const missing = response.missingCell;
  assert.equal(missing.cellId, "missing-cell");
  assert.deepEqual(missing.contentItems ?? [], []);
  assert.equal(missing.completed.errorText, "exec cell missing-cell not found");
  assert.ok(BigInt(missing.codeModeHostDurationNs ?? 0) >= 0n);
  const terminated = await h.client.terminate({ sessionId: s.id, cellId: "missing-cell" });
  assert.equal(terminated.missingCell.completed.errorText, "exec cell missing-cell not found");
});

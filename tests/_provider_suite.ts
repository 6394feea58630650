/**
 * The client-library scenarios every `CodeModeSessionProvider` must pass the same way: the gRPC
 * provider (tests/client_test.ts) and the embedded provider in both isolations
 * (tests/embedded_test.ts, and under `--deny-run` in tests/_deny_run_suite.ts). A harness switches
 * providers by changing one constructor; these scenarios show that nothing else changes.
 *
 * @module
 */
import assert from "node:assert/strict";
import { NoopCodeModeSessionDelegate } from "../client/session.ts";
import type { CodeModeSession, CodeModeSessionOptions } from "../client/types.ts";
import { eventually } from "./_harness.ts";
import { RecordingDelegate, rejection, run, textResponse } from "./_client_harness.ts";

/** A provider under test and how to end it. */
export interface ProviderUnderTest extends AsyncDisposable {
  provider: { createSession(options?: CodeModeSessionOptions): Promise<CodeModeSession> };
  /** Whether sessions may set `maxHeapSizeBytes` (false in in-process isolation, SPEC §9.8). */
  heapLimits: boolean;
}

/**
 * Registers the shared scenarios for one provider.
 *
 * @param label names the provider in the test names
 * @param open makes a fresh provider (and whatever serves it) for one test
 */
/** Starts cell 1 of `session`, a cell that never ends, and checks that it yields at once. */
async function yieldedCell(session: CodeModeSession): Promise<void> {
  const cell = await session.execute(
    { toolCallId: "c", enabledTools: [], source: "await new Promise(() => {})", yieldTimeMs: 0 },
    new NoopCodeModeSessionDelegate(),
  );
  assert.equal((await cell.initialResponse()).type, "yielded");
}

export function providerScenarios(label: string, open: () => Promise<ProviderUnderTest>): void {
  Deno.test(`${label} provider: 131: once shutdown has started, execute, wait and terminate fail with the shutdown text`, async () => {
    await using h = await open();
    const session = await h.provider.createSession();
    const closing = session.shutdown();
    const delegate = new NoopCodeModeSessionDelegate();
    for (
      const call of [
        () => session.execute({ toolCallId: "c", enabledTools: [], source: "1" }, delegate),
        () => session.wait({ cellId: "1", yieldTimeMs: 0 }),
        () => session.terminate("1"),
      ]
    ) {
      assert.equal((await rejection(call())).message, "code mode session is shutting down");
    }
    await closing;
  });

  Deno.test(`${label} provider: 136: an execute aborted before \`started\` abandons its cell; the session stays usable`, async () => {
    await using h = await open();
    const session = await h.provider.createSession();
    const delegate = new RecordingDelegate();
    const abort = new AbortController();
    const pending = session.execute(
      { toolCallId: "c", enabledTools: [], source: "await new Promise(() => {})" },
      delegate,
      { signal: abort.signal },
    );
    abort.abort(new Error("caller went away"));
    await rejection(pending);
    assert.ok(await eventually(() => delegate.closed.includes("1"), 5_000));
    assert.ok(
      await eventually(async () => {
        try {
          return (await session.wait({ cellId: "1", yieldTimeMs: 0 })).type === "missingCell";
        } catch (error) {
          if ((error as Error).message.includes("already has an active observer")) return false;
          throw error;
        }
      }, 5_000),
    );
    const next = await run(session, 'text("still alive")');
    assert.deepEqual(next, textResponse("2", "still alive", next.codeModeHostDurationNs));
    await session.shutdown();
  });

  Deno.test(`${label} provider: 137: aborting initialResponse, or abandon(), closes a never-ending cell; the next cell is 2`, async (t) => {
    for (const how of ["signal", "abandon"] as const) {
      await t.step(how, async () => {
        await using h = await open();
        const session = await h.provider.createSession();
        const delegate = new RecordingDelegate();
        const cell = await session.execute(
          { toolCallId: "c", enabledTools: [], source: "await new Promise(() => {})", yieldTimeMs: 60_000 },
          delegate,
        );
        const abort = new AbortController();
        const outcome = cell.initialResponse({ signal: abort.signal });
        if (how === "signal") abort.abort();
        else cell.abandon();
        await rejection(outcome);
        assert.deepEqual(delegate.closed, ["1"]);
        const next = await run(session, 'text("next")');
        assert.equal(next.cellId, "2");
        await session.shutdown();
      });
    }
  });

  Deno.test(`${label} provider: 138: a second wait on a cell fails at once; the first is preempted to yielded; terminate then terminates`, async () => {
    await using h = await open();
    const session = await h.provider.createSession();
    await yieldedCell(session);
    const preempt = new AbortController();
    const first = session.wait({ cellId: "1", yieldTimeMs: 60_000 }, { preempt: preempt.signal });
    const started = performance.now();
    const second = await rejection(session.wait({ cellId: "1", yieldTimeMs: 60_000 }));
    assert.equal(second.message, "exec cell 1 already has an active observer");
    assert.ok(performance.now() - started < 1_000);
    await new Promise((r) => setTimeout(r, 100));
    preempt.abort();
    const outcome = await first;
    assert.equal(outcome.type, "liveCell");
    assert.equal(outcome.response.type, "yielded");
    const terminated = await session.terminate("1");
    assert.equal(terminated.type, "liveCell");
    assert.equal(terminated.response.type, "terminated");
    await session.shutdown();
  });

  Deno.test(`${label} provider: a wait cancelled before it is sent rejects, and the next wait on the cell is served`, async () => {
    await using h = await open();
    const session = await h.provider.createSession();
    await yieldedCell(session);
    const cancelled = new AbortController();
    cancelled.abort();
    await rejection(session.wait({ cellId: "1", yieldTimeMs: 60_000 }, { signal: cancelled.signal }));
    // Before the fix the cell's wait lock was never freed and this wait hung: bound it, so the test
    // fails instead of hanging the suite.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const hung = new Promise<"hung">((resolve) => timer = setTimeout(() => resolve("hung"), 20_000));
    const next = await Promise.race([session.wait({ cellId: "1", yieldTimeMs: 0 }), hung]);
    clearTimeout(timer);
    assert.notEqual(next, "hung", "the next wait was served");
    assert.equal((next as Exclude<typeof next, "hung">).type, "liveCell");
    await session.terminate("1");
    await session.shutdown();
  });

  Deno.test(`${label} provider: 139: shutting down a session reports its yielded cell closed`, async () => {
    await using h = await open();
    const session = await h.provider.createSession();
    const delegate = new RecordingDelegate();
    const cell = await session.execute(
      { toolCallId: "c", enabledTools: [], source: "await new Promise(() => {})", yieldTimeMs: 0 },
      delegate,
    );
    assert.equal((await cell.initialResponse()).type, "yielded");
    await session.shutdown();
    assert.deepEqual(delegate.closed, ["1"]);
  });

  Deno.test(`${label} provider: tools, notifications, stored values and CellClosed reach the delegate with public IDs`, async () => {
    await using h = await open();
    const first = await h.provider.createSession();
    const session = await h.provider.createSession(); // generation 2: public IDs are mapped
    const delegate = new RecordingDelegate((input: unknown) => (input as number) + 1);
    const echo = { name: "echo", toolName: { name: "echo" }, description: "", kind: "function" as const };
    const cell = await session.execute(
      {
        toolCallId: "call-7",
        enabledTools: [echo],
        source: 'notify("early"); store("k", await tools.echo(1)); text(String(load("k")))',
      },
      delegate,
    );
    const result = await cell.initialResponse();
    assert.deepEqual(result, textResponse("g2:1", "2", result.codeModeHostDurationNs));
    assert.deepEqual(delegate.calls, [{ cellId: "g2:1", name: "echo", input: 1 }]);
    assert.deepEqual(delegate.notifications, [{ callId: "call-7", cellId: "g2:1", text: "early" }]);
    assert.ok(await eventually(() => delegate.closed.includes("g2:1"), 5_000));
    const next = await run(session, 'text(String(load("k") + 1))');
    assert.deepEqual(next, textResponse("g2:2", "3", next.codeModeHostDurationNs));
    const failed = await run(session, "await tools.missing()", {}, delegate);
    assert.equal(failed.type, "result");
    assert.match((failed as { errorText?: string }).errorText ?? "", /missing/);
    await session.shutdown();
    await first.shutdown();
  });

  Deno.test(`${label} provider: a spinning cell's terminate answers terminated and the session runs the next cell`, async () => {
    await using h = await open();
    const session = await h.provider.createSession();
    const delegate = new RecordingDelegate();
    const cell = await session.execute(
      { toolCallId: "c", enabledTools: [], source: 'text("before"); for (;;) {}', yieldTimeMs: 1_000 },
      delegate,
    );
    const first = await cell.initialResponse();
    assert.equal(first.type, "yielded");
    assert.deepEqual(first.contentItems, [{ type: "input_text", text: "before" }]);
    const started = performance.now();
    const outcome = await session.terminate(cell.cellId);
    console.log(`${label}: terminate of a spinning cell took ${(performance.now() - started).toFixed(0)} ms`);
    assert.equal(outcome.type, "liveCell");
    assert.equal(outcome.response.type, "terminated");
    assert.ok(await eventually(() => delegate.closed.includes(cell.cellId), 5_000));
    const next = await run(session, 'text("after")');
    assert.deepEqual(next, textResponse("2", "after", next.codeModeHostDurationNs));
    await session.shutdown();
  });

  Deno.test(`${label} provider: Server mode is pinned and truncates to max_output_tokens`, async () => {
    await using h = await open();
    const session = await h.provider.createSession({ outputTruncation: "server" });
    assert.equal(session.outputTruncation, "server");
    const long = await run(session, 'text("word ".repeat(5000))', { maxOutputTokens: 10 });
    assert.equal(long.type, "result");
    const text = (long.contentItems[0] as { text: string }).text;
    assert.ok(text.length < 5000 * 5, `${text.length}`);
    assert.match(text, /truncated/);
    await session.shutdown();
  });

  Deno.test(`${label} provider: a heap limit is applied, or refused with the status of SPEC §2.7`, async () => {
    await using h = await open();
    const options = { cellExecutionLimits: { maxHeapSizeBytes: 64 * 1024 * 1024 } };
    if (h.heapLimits) {
      const session = await h.provider.createSession(options);
      const result = await run(session, 'text("ok")');
      assert.deepEqual(result, textResponse("1", "ok", result.codeModeHostDurationNs));
      await session.shutdown();
    } else {
      const error = await rejection(h.provider.createSession(options)) as Error & { grpcCode?: number };
      assert.equal(
        error.message,
        "gRPC code-mode session opening failed: code: 'The system is not in a state required for the " +
          "operation's execution', message: \"code-mode session provider does not support resource limits\"",
      );
      assert.equal(error.grpcCode, 9);
    }
    // Any size opens a session where heap limits exist, as on Codex's host (the limit applied is
    // at least 16 MiB); without them it is refused like any other.
    const tiny = { cellExecutionLimits: { maxYieldTimeMs: 1, maxHeapSizeBytes: 1 } };
    if (h.heapLimits) {
      await (await h.provider.createSession(tiny)).shutdown();
    } else {
      const tooSmall = await rejection(h.provider.createSession(tiny)) as Error & { grpcCode?: number };
      assert.equal(tooSmall.name, "CodeModeError");
      assert.equal(tooSmall.grpcCode, 9);
    }
  });

  Deno.test(`${label} provider: a Server-mode wait's maxTokens is the budget of its output; a bad one is refused before anything is sent`, async () => {
    await using h = await open();
    const session = await h.provider.createSession({ outputTruncation: "server" });
    const cell = await session.execute(
      {
        toolCallId: "c",
        enabledTools: [],
        source: 'text("a"); yield_control(); text("b".repeat(100)); text("c".repeat(100))',
        maxOutputTokens: 1_000,
      },
      new NoopCodeModeSessionDelegate(),
    );
    assert.equal((await cell.initialResponse()).type, "yielded");
    for (const maxTokens of [-1, 1.5, 2 ** 53]) {
      const refused = await rejection(session.wait({ cellId: cell.cellId, yieldTimeMs: 0, maxTokens }));
      assert.equal(refused.message, `invalid code-mode output token limit: ${maxTokens}`);
    }
    const outcome = await session.wait({ cellId: cell.cellId, yieldTimeMs: 10_000, maxTokens: 5 });
    assert.equal(outcome.type, "liveCell");
    assert.deepEqual(outcome.response.contentItems, [{
      type: "input_text",
      text: "Warning: truncated output (original token count: 51)\nTotal output lines: 2\n\n" +
        "bbbbbbbbbb…46 tokens truncated…cccccccccc",
    }]);
    await session.shutdown();
  });
}

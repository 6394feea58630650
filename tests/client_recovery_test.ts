/**
 * The specification's session-recovery seed (Codex's `session_recovery_tests.rs`), ported: the
 * client library against the real host, with connections counted by TCP relays and statuses injected
 * by a server middleware.
 */
import assert from "node:assert/strict";
import { type CallContext, ServerError, type ServerMiddleware, Status } from "nice-grpc";
import { GrpcCodeModeSessionProvider } from "../client/provider.ts";
import { startHost } from "./_harness.ts";
import { FakeClock, injector, rejection, relay, run, textResponse } from "./_client_harness.ts";

Deno.test("seed: a quiet session reuses its worker connection (120 s on the provider clock)", async () => {
  await using h = await startHost();
  const proxy = relay(h.host.port);
  try {
    const clock = new FakeClock();
    const session = await new GrpcCodeModeSessionProvider(`http://127.0.0.1:${proxy.port}`, { clock })
      .createSession();
    await run(session, 'store("key", "persisted");');
    clock.advance(120_000);
    const result = await run(session, 'text(load("key"));');
    assert.deepEqual(result, textResponse("2", "persisted", result.codeModeHostDurationNs));
    assert.equal(proxy.connections, 1);
    await session.shutdown();
  } finally {
    await proxy.close();
  }
});

Deno.test("seed: the last failed session releases the shared connection", async () => {
  const { state, middleware } = injector();
  await using h = await startHost({ middleware });
  const proxy = relay(h.host.port, true);
  try {
    const provider = new GrpcCodeModeSessionProvider(`http://127.0.0.1:${proxy.port}`);
    const first = await provider.createSession();
    const last = await provider.createSession();
    await first.shutdown();
    const result = await run(last, "text('still live')");
    assert.deepEqual(result, textResponse("g2:1", "still live", result.codeModeHostDurationNs));
    state.next = { code: Status.NOT_FOUND, message: "session was lost" };
    const error = await rejection(run(last, "text('must not run')"));
    assert.equal(
      error.message,
      `gRPC code-mode execution failed: code: 'Some requested entity was not found', message: "session was lost"`,
    );
    // The one relayed connection ends: the failed binding was its last holder.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const ended = await Promise.race([
      proxy.firstEnded.then(() => true),
      new Promise<boolean>((r) => timer = setTimeout(() => r(false), 10_000)),
    ]);
    clearTimeout(timer);
    assert.ok(ended, "last failed session kept its worker connection open");
    assert.equal(proxy.connections, 1);
  } finally {
    await proxy.close();
  }
});

Deno.test("seed: only missing sessions reopen, without replaying the execution", async (t) => {
  for (
    const [code, routeLost, expectedCell, expectedValue] of [
      [Status.NOT_FOUND, false, "g2:1", "undefined"],
      [Status.INVALID_ARGUMENT, false, "2", "1"],
      [Status.UNAVAILABLE, false, "2", "1"],
      [Status.UNAVAILABLE, true, "2", "1"],
    ] as const
  ) {
    await t.step(`${Status[code]}${routeLost ? " with x-code-mode-route-lost" : ""}`, async () => {
      const { state, middleware } = injector();
      await using h = await startHost({ middleware });
      const session = await new GrpcCodeModeSessionProvider(`http://127.0.0.1:${h.host.port}`)
        .createSession();
      assert.equal(session.outputTruncation, "client");
      await run(session, 'store("before", 1);');
      state.next = { code, message: "injected RPC rejection", routeLost };
      const before = state.count;
      const failed = await rejection(run(session, 'store("before", "replayed");'));
      const descriptions: Record<number, string> = {
        [Status.NOT_FOUND]: "Some requested entity was not found",
        [Status.INVALID_ARGUMENT]: "Client specified an invalid argument",
        [Status.UNAVAILABLE]: "The service is currently unavailable",
      };
      assert.equal(
        failed.message,
        `gRPC code-mode execution failed: code: '${descriptions[code]}', message: "injected RPC rejection"`,
      );
      assert.equal(
        state.count,
        before + 1,
        "the failed call must return without opening a session or replaying Execute",
      );
      if (code === Status.NOT_FOUND) {
        const reset = await rejection(run(session, 'store("before", "must not run");'));
        assert.ok(reset.message.includes("Stored values and running cells were lost"), reset.message);
      }
      const actual = await run(session, 'text(String(load("before")))');
      assert.deepEqual(actual, textResponse(expectedCell, expectedValue, actual.codeModeHostDurationNs));
      await session.shutdown();
    });
  }
});

Deno.test("seed: a session pins its output mode across recovery and shutdown", async (t) => {
  for (
    const [initialHost, replacementHost] of [["server", "server"], ["server", "client"], [
      "client",
      "server",
    ]] as const
  ) {
    await t.step(`${initialHost} host, then ${replacementHost} host`, async () => {
      let opens = 0;
      let subscriptions = 0;
      const middleware = async function* <Request, Response>(
        call: {
          method: { path: string };
          request: Request;
          next(request: Request, context: CallContext): AsyncGenerator<Response, Response | void, undefined>;
        },
        context: CallContext,
      ) {
        const path = call.method.path;
        let request = call.request;
        if (path.endsWith("/OpenSession")) {
          const host = opens++ === 0 ? initialHost : replacementHost;
          // A Client-only host ignores the new field.
          if (host === "client") request = { ...request, outputTruncation: undefined };
        } else if (path.endsWith("/Execute") && opens === 1) {
          throw new ServerError(Status.NOT_FOUND, "session was lost");
        } else if (path.endsWith("/SubscribeToToolCalls")) {
          subscriptions++;
        }
        return yield* call.next(request, context);
      } as unknown as ServerMiddleware;
      await using h = await startHost({ middleware });
      const session = await new GrpcCodeModeSessionProvider(`http://127.0.0.1:${h.host.port}`).createSession({
        outputTruncation: "server",
      });
      assert.equal(session.outputTruncation, initialHost);
      const failed = await rejection(run(session, "text('must not run')"));
      assert.ok(failed.message.includes("session was lost"), failed.message);
      const reset = await rejection(run(session, "text('must not replay')"));
      if (initialHost === "server" && replacementHost === "client") {
        assert.equal(
          reset.message,
          "gRPC code-mode host changed the session output truncation mode on reconnect",
        );
        assert.equal(subscriptions, 1, "the downgraded binding must not subscribe");
      } else {
        assert.ok(reset.message.includes("Stored values and running cells were lost"), reset.message);
        const source = initialHost === "client"
          ? "text('x'.repeat(2 * 1024 * 1024))"
          : "throw 'begin:' + 'X'.repeat(65 * 1024 * 1024) + ':end'";
        const response = await run(session, source, { maxOutputTokens: 5, yieldTimeMs: 60_000 });
        if (initialHost === "client") {
          assert.deepEqual(
            response,
            textResponse("g2:1", "x".repeat(2 * 1024 * 1024), response.codeModeHostDurationNs),
          );
        } else {
          assert.equal(response.type, "result");
          assert.equal(response.cellId, "g2:1");
          const diagnostic = (response as { errorText?: string }).errorText!;
          // Capped as Codex's host caps it: 64 KiB of UTF-8 (its first 32,766 bytes, "…", its last 32,767).
          assert.equal(new TextEncoder().encode(diagnostic).length, 64 * 1024);
          assert.ok(diagnostic.startsWith("begin:") && diagnostic.endsWith(":end"));
          assert.deepEqual(
            response.contentItems,
            [
              "Warning: truncated output (original token count: 262144)\nTotal output lines: 2\n\nScript err…262139 tokens truncated…",
              "[Code Mode session output limit reached: omitted 67108888 text bytes; discarded 0 text segments, 0 images, 0 audio items]",
              "XXXXXX:end",
            ].map((text) => ({ type: "input_text", text })),
          );
        }
      }
      await session.shutdown();
      assert.equal(session.outputTruncation, initialHost);
    });
  }
});

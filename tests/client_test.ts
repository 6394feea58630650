/**
 * SPEC §12.10 scenarios of the client library against the real host (the seed scenarios 115–125
 * are in client_recovery_test.ts).
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import { type CallContext, ServerError, type ServerMiddleware, Status } from "nice-grpc";
import { GrpcCodeModeSessionProvider } from "../client/provider.ts";
import { NoopCodeModeSessionDelegate } from "../client/session.ts";
import { RESET_MESSAGE } from "../client/status_text.ts";
import { createHost } from "../host/doors/grpc/server.ts";
import { Logger } from "../host/ops/log.ts";
import { turn } from "../host/testing.ts";
import { eventually, serve, settledWithin, startHost } from "./_harness.ts";
import { FakeClock, RecordingDelegate, rejection, relay, run, textResponse } from "./_client_harness.ts";
import { providerScenarios } from "./_provider_suite.ts";

type Call = {
  method: { path: string };
  request: unknown;
  next(request: unknown, context: CallContext): AsyncGenerator<unknown, unknown, undefined>;
};

/** A middleware from a per-call function that may throw, wait or rewrite the request. */
function around(
  fn: (method: string, context: CallContext) => Promise<void> | void,
): ServerMiddleware {
  return async function* (call: Call, context: CallContext) {
    await fn(call.method.path.replace(/^.*\//, ""), context);
    return yield* call.next(call.request, context);
  } as unknown as ServerMiddleware;
}

const endpoint = (port: number) => `http://127.0.0.1:${port}`;

// Scenarios 131 and 136–139 and the shared ones, through the gRPC provider (tests/_provider_suite.ts;
// tests/embedded_test.ts runs the same against the embedded provider).
providerScenarios("gRPC", async () => {
  const h = await startHost();
  return {
    provider: new GrpcCodeModeSessionProvider(endpoint(h.host.port)),
    heapLimits: true,
    [Symbol.asyncDispose]: () => h[Symbol.asyncDispose](),
  };
});

Deno.test("126: OpenSession admission retries only UNAVAILABLE and RESOURCE_EXHAUSTED, at most 5 attempts", async (t) => {
  for (
    const [label, failures, attempts, ok] of [
      ["UNAVAILABLE once", [Status.UNAVAILABLE], 2, true],
      ["RESOURCE_EXHAUSTED once", [Status.RESOURCE_EXHAUSTED], 2, true],
      ["UNAVAILABLE always", Array(10).fill(Status.UNAVAILABLE), 5, false],
      ["INVALID_ARGUMENT once", [Status.INVALID_ARGUMENT], 1, false],
      ["UNKNOWN once", [Status.UNKNOWN], 1, false],
    ] as const
  ) {
    await t.step(label, async () => {
      const queue: Status[] = [...failures];
      let opens = 0;
      await using h = await startHost({
        middleware: around((method) => {
          if (method !== "OpenSession") return;
          opens++;
          const code = queue.shift();
          if (code !== undefined) throw new ServerError(code, "injected");
        }),
      });
      const provider = new GrpcCodeModeSessionProvider(endpoint(h.host.port));
      if (ok) {
        const session = await provider.createSession();
        const result = await run(session, "text(42)");
        assert.deepEqual(result, textResponse("1", "42", result.codeModeHostDurationNs));
        await session.shutdown();
      } else {
        const error = await rejection(provider.createSession());
        assert.match(error.message, /^gRPC code-mode session opening failed: code: '/);
      }
      assert.equal(opens, attempts);
    });
  }
});

Deno.test("130: an endpoint with credentials is refused without repeating them", async () => {
  for (
    const url of [
      "http://alice:secret@127.0.0.1:1",
      "https://alice@127.0.0.1:1",
      "https://:secret@127.0.0.1:1",
    ]
  ) {
    const error = await rejection(new GrpcCodeModeSessionProvider(url).createSession());
    assert.ok(error.message.includes("must not include credentials"), error.message);
    assert.ok(!error.message.includes("alice") && !error.message.includes("secret"));
  }
});

Deno.test("132: a generation-2 binding refuses other generations' IDs without an RPC; generation 1 passes IDs through", async () => {
  let rpcs = 0;
  await using h = await startHost({ middleware: around(() => void rpcs++) });
  const provider = new GrpcCodeModeSessionProvider(endpoint(h.host.port));
  const first = await provider.createSession();
  const second = await provider.createSession();
  const before = rpcs;
  for (const id of ["42", "g1:42", "g3:42", "x".repeat(10_000), "g2:"]) {
    assert.match(
      (await rejection(second.wait({ cellId: id, yieldTimeMs: 0 }))).message,
      /stale code-mode host generation/,
    );
    assert.match((await rejection(second.terminate(id))).message, /stale code-mode host generation/);
  }
  assert.equal(rpcs, before);
  for (const id of ["g2:42", "graphics:1"]) {
    const outcome = await first.wait({ cellId: id, yieldTimeMs: 0 });
    assert.equal(outcome.type, "missingCell");
    assert.equal(outcome.response.cellId, id);
  }
  const missing = await second.wait({ cellId: "g2:7", yieldTimeMs: 0 });
  assert.equal(missing.response.cellId, "g2:7");
  await first.shutdown();
  await second.shutdown();
});

Deno.test("134: deadlines run on the provider clock: Terminate times out after 60 s, an Execute with yield 120 s not before 181 s", async () => {
  const clock = new FakeClock();
  await using h = await startHost({
    middleware: around(async (method, context) => {
      if (method !== "Terminate") return;
      await new Promise<void>((resolve) =>
        context.signal.addEventListener("abort", () => resolve(), { once: true })
      );
      throw new ServerError(Status.CANCELLED, "client went away");
    }),
  });
  const session = await new GrpcCodeModeSessionProvider(endpoint(h.host.port), { clock }).createSession();
  const started = await session.execute(
    { toolCallId: "c", enabledTools: [], source: "await new Promise(() => {})", yieldTimeMs: 120_000 },
    new NoopCodeModeSessionDelegate(),
  );
  let settled = false;
  const outcome = started.initialResponse().finally(() => settled = true);
  outcome.catch(() => {});
  assert.ok(await eventually(() => clock.sleeping === 1), "the outcome's deadline is armed");
  clock.advance(179_000);
  // A deadline that expired settles the outcome in promise callbacks alone (no I/O): one turn of
  // the event loop runs them all.
  await turn();
  assert.equal(settled, false, "the execution outcome deadline is 60 s + 120 s + 1 s");
  clock.advance(2_500);
  assert.equal(
    (await rejection(outcome)).message,
    "gRPC code-mode host timed out waiting for execution outcome response",
  );
  // The binding failed with the deadline; a new session shows Terminate's own deadline.
  const other = await new GrpcCodeModeSessionProvider(endpoint(h.host.port), { clock }).createSession();
  const cell = await other.execute(
    { toolCallId: "c", enabledTools: [], source: "await new Promise(() => {})", yieldTimeMs: 0 },
    new NoopCodeModeSessionDelegate(),
  );
  await cell.initialResponse();
  const terminating = other.terminate(cell.cellId);
  terminating.catch(() => {});
  assert.ok(await eventually(() => clock.sleeping === 1), "the Terminate's deadline is armed");
  clock.advance(60_001);
  assert.equal(
    (await rejection(terminating)).message,
    "gRPC code-mode host timed out waiting for termination response",
  );
  await session.shutdown();
  await other.shutdown();
});

Deno.test("135: a 2,000-byte opening failure is bounded to 512 bytes of valid UTF-8 ending in ...", async () => {
  const message = "é€🦀".repeat(222);
  await using h = await startHost({
    middleware: around((method) => {
      if (method === "OpenSession") throw new ServerError(Status.INVALID_ARGUMENT, message);
    }),
  });
  const error = await rejection(new GrpcCodeModeSessionProvider(endpoint(h.host.port)).createSession());
  const bytes = new TextEncoder().encode(error.message);
  assert.ok(bytes.length <= 512, String(bytes.length));
  assert.ok(error.message.startsWith("gRPC code-mode session opening failed:"));
  assert.ok(error.message.endsWith("..."));
  assert.equal(new TextDecoder("utf-8", { fatal: true }).decode(bytes), error.message);
});

Deno.test("141c: two providers for one endpoint use two connections; one shutting down closes only its own", async () => {
  await using h = await startHost();
  const proxy = relay(h.host.port);
  try {
    const a = await new GrpcCodeModeSessionProvider(endpoint(proxy.port)).createSession();
    const b = await new GrpcCodeModeSessionProvider(endpoint(proxy.port)).createSession();
    assert.equal(proxy.connections, 2);
    await a.shutdown();
    assert.ok(await eventually(() => proxy.ended[0] === true, 5_000));
    assert.equal(proxy.ended[1], false);
    assert.deepEqual((await run(b, 'text("b")')).contentItems, [{ type: "input_text", text: "b" }]);
    await b.shutdown();
  } finally {
    await proxy.close();
  }
});

Deno.test("141d: a status before `started` is an `execution` failure; after it, an `execution outcome` failure", async () => {
  let rejectNext = false;
  let failAfterStart = false;
  const middleware = async function* (call: Call, context: CallContext) {
    const method = call.method.path.replace(/^.*\//, "");
    if (method === "Execute" && rejectNext) {
      rejectNext = false;
      throw new ServerError(Status.FAILED_PRECONDITION, "rejected");
    }
    if (method === "Execute" && failAfterStart) {
      failAfterStart = false;
      for await (
        const response of call.next(call.request, context) as AsyncGenerator<{ started?: unknown }>
      ) {
        yield response;
        if (response.started) throw new ServerError(Status.INTERNAL, "broke after start");
      }
      return;
    }
    return yield* call.next(call.request, context);
  } as unknown as ServerMiddleware;
  await using h = await startHost({ middleware });
  const session = await new GrpcCodeModeSessionProvider(endpoint(h.host.port)).createSession();
  rejectNext = true;
  assert.match((await rejection(run(session, "1"))).message, /^gRPC code-mode execution failed: /);
  failAfterStart = true;
  assert.match((await rejection(run(session, "1"))).message, /^gRPC code-mode execution outcome failed: /);
  // INTERNAL keeps the binding: the session still works on generation 1 (the rejected Execute
  // never reached the host, so the cells so far are 1 and now 2).
  assert.equal((await run(session, 'text("ok")')).cellId, "2");
  await session.shutdown();
});

Deno.test("141e: a provider with the host's token works; without it the opening fails UNAUTHENTICATED", async () => {
  await using h = await startHost({ authToken: "s3cret" });
  const session = await new GrpcCodeModeSessionProvider(endpoint(h.host.port), { authToken: "s3cret" })
    .createSession();
  assert.equal((await run(session, 'text("in")')).cellId, "1");
  await session.shutdown();
  const error = await rejection(new GrpcCodeModeSessionProvider(endpoint(h.host.port)).createSession());
  assert.ok(
    error.message.includes("code: 'The request does not have valid authentication credentials'"),
    error.message,
  );
});

Deno.test("133: a host process killed and restarted on the same port: old work fails, calls made before the reopen get the reset message, later calls run as g2", async () => {
  let host = await serve(["--listen", "grpc://127.0.0.1:0", "--warm-sessions", "1"]);
  const port = Number(host.url.replace(/^.*:/, ""));
  try {
    const session = await new GrpcCodeModeSessionProvider(host.url).createSession();
    const delegate = new RecordingDelegate();
    const forever = "await new Promise(() => {})";
    for (let i = 0; i < 2; i++) {
      const cell = await session.execute({
        toolCallId: "c",
        enabledTools: [],
        source: forever,
        yieldTimeMs: 0,
      }, delegate);
      await cell.initialResponse();
    }
    const pendingWait = session.wait({ cellId: "1", yieldTimeMs: 60_000 });
    pendingWait.catch(() => {});
    await new Promise((r) => setTimeout(r, 100));
    // `deno task` runs the host as its child: kill the host process itself, as a crash would.
    const children = Deno.readTextFileSync(`/proc/${host.child.pid}/task/${host.child.pid}/children`).trim();
    for (const pid of children.split(/\s+/).filter(Boolean)) Deno.kill(Number(pid), "SIGKILL");
    await host.exited();
    await rejection(pendingWait);
    assert.ok(await eventually(() => delegate.closed.length === 2, 5_000));
    assert.deepEqual([...delegate.closed].sort(), ["1", "2"]);
    await rejection(session.terminate("1"));
    host = await serve(["--listen", `grpc://127.0.0.1:${port}`, "--warm-sessions", "1"]);
    // Created before the reopen: two concurrent executes, a queued one and a queued wait.
    const early = [
      run(session, 'text("a")'),
      run(session, 'text("b")'),
      run(session, 'text("c")'),
      session.wait({ cellId: "2", yieldTimeMs: 0 }),
    ];
    for (const call of early) assert.equal((await rejection(call)).message, RESET_MESSAGE);
    const tools = new RecordingDelegate((input: unknown) => ({ echoed: input }));
    const echo = { name: "echo", toolName: { name: "echo" }, description: "", kind: "function" as const };
    const started = await session.execute({
      toolCallId: "call-9",
      enabledTools: [echo],
      source: 'notify("hi"); text(JSON.stringify(await tools.echo(7)))',
    }, tools);
    const first = await started.initialResponse();
    assert.deepEqual(first, textResponse("g2:1", '{"echoed":7}', first.codeModeHostDurationNs));
    assert.deepEqual(tools.calls, [{ cellId: "g2:1", name: "echo", input: 7 }]);
    assert.deepEqual(tools.notifications, [{ callId: "call-9", cellId: "g2:1", text: "hi" }]);
    assert.equal((await run(session, 'text("two")')).cellId, "g2:2");
    for (const id of ["1", "2"]) {
      assert.match(
        (await rejection(session.wait({ cellId: id, yieldTimeMs: 0 }))).message,
        /stale code-mode host generation/,
      );
      assert.match((await rejection(session.terminate(id))).message, /stale code-mode host generation/);
    }
    await session.shutdown();
  } finally {
    await host[Symbol.asyncDispose]();
  }
});

Deno.test("127: a first connection reset after one byte is followed by a fresh connection within the admission retries", async () => {
  await using h = await startHost();
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let accepted = 0;
  const conns: Deno.Conn[] = [];
  const serving = (async () => {
    for (;;) {
      let client: Deno.Conn;
      try {
        client = await listener.accept();
      } catch {
        return;
      }
      conns.push(client);
      if (++accepted === 1) {
        await client.read(new Uint8Array(1)).catch(() => null);
        client.close();
        continue;
      }
      const upstream = await Deno.connect({ hostname: "127.0.0.1", port: h.host.port });
      conns.push(upstream);
      void Promise.race([
        client.readable.pipeTo(upstream.writable).catch(() => {}),
        upstream.readable.pipeTo(client.writable).catch(() => {}),
      ]).finally(() => {
        for (const c of [client, upstream]) {
          try {
            c.close();
          } catch { /* closed */ }
        }
      });
    }
  })();
  try {
    const port = (listener.addr as Deno.NetAddr).port;
    const session = await new GrpcCodeModeSessionProvider(endpoint(port)).createSession();
    const result = await run(session, "text(42)");
    assert.deepEqual(result, textResponse("1", "42", result.codeModeHostDurationNs));
    assert.ok(accepted >= 2);
    await session.shutdown();
  } finally {
    listener.close();
    for (const c of conns) {
      try {
        c.close();
      } catch { /* closed */ }
    }
    await serving;
  }
});

/** A host whose OpenSession answers carry per-session route tokens, recording every call's route. */
function routingHost(options: { failExecute?: () => { message: string; routeLost: boolean } | undefined }) {
  const tokens = ["rejected", "a", "b", "c"];
  let opens = 0;
  const routes = new Map<string, string>();
  const seen: { method: string; sessionId?: string; route?: string }[] = [];
  const middleware = async function* (call: Call, context: CallContext) {
    const method = call.method.path.replace(/^.*\//, "");
    const route = context.metadata.get("x-code-mode-route");
    const request = call.request as { sessionId?: string };
    seen.push({ method, sessionId: request.sessionId, route: typeof route === "string" ? route : undefined });
    if (method === "OpenSession") {
      const token = tokens[opens++];
      context.header.set("x-code-mode-route", token);
      if (token === "rejected") throw new ServerError(Status.RESOURCE_EXHAUSTED, "full");
      for await (
        const event of call.next(call.request, context) as AsyncGenerator<{ opened?: { sessionId: string } }>
      ) {
        if (event.opened) routes.set(event.opened.sessionId, token);
        yield event;
      }
      return;
    }
    if (method === "Execute") {
      const failure = options.failExecute?.();
      if (failure) {
        if (failure.routeLost) context.trailer.set("x-code-mode-route-lost", "true");
        throw new ServerError(Status.UNAVAILABLE, failure.message);
      }
    }
    return yield* call.next(call.request, context);
  } as unknown as ServerMiddleware;
  return {
    middleware,
    routes,
    seen,
    get opens() {
      return opens;
    },
  };
}

Deno.test("128: route tokens: none on OpenSession, each session's own on every other RPC, a rejected admission's never", async () => {
  const routing = routingHost({});
  await using h = await startHost({ middleware: routing.middleware });
  const provider = new GrpcCodeModeSessionProvider(endpoint(h.host.port));
  const parent = await provider.createSession();
  const child = await provider.createSession();
  const echo = { name: "echo", toolName: { name: "echo" }, description: "", kind: "function" as const };
  for (const session of [parent, child]) {
    const delegate = new RecordingDelegate();
    const cell = await session.execute({
      toolCallId: "c",
      enabledTools: [echo],
      source: 'notify("n"); await tools.echo(1); yield_control(); await new Promise(() => {})',
      yieldTimeMs: 5_000,
    }, delegate);
    assert.equal((await cell.initialResponse()).type, "yielded");
    assert.equal((await session.wait({ cellId: cell.cellId, yieldTimeMs: 0 })).response.type, "yielded");
    assert.equal((await session.terminate(cell.cellId)).response.type, "terminated");
  }
  await parent.shutdown();
  await child.shutdown();
  const opens = routing.seen.filter((s) => s.method === "OpenSession");
  assert.equal(opens.length, 3);
  assert.ok(opens.every((s) => s.route === undefined));
  const others = routing.seen.filter((s) => s.method !== "OpenSession");
  assert.ok(others.length > 10);
  for (const s of others) {
    assert.equal(s.route, routing.routes.get(s.sessionId!), `${s.method} carried ${s.route}`);
  }
  assert.ok(!routing.seen.some((s) => s.route === "rejected"));
  assert.deepEqual(new Set(others.map((s) => s.route)), new Set(["a", "b"]));
});

Deno.test("129: UNAVAILABLE keeps a routed binding; with x-code-mode-route-lost it retires only that session's binding", async () => {
  let next: { message: string; routeLost: boolean } | undefined;
  const routing = routingHost({
    failExecute: () => {
      const failure = next;
      next = undefined;
      return failure;
    },
  });
  await using h = await startHost({ middleware: routing.middleware });
  const provider = new GrpcCodeModeSessionProvider(endpoint(h.host.port));
  const parent = await provider.createSession();
  const child = await provider.createSession();
  for (const s of [parent, child]) await run(s, 'store("preserved", "original")');
  const load = async (s: typeof parent) => (await run(s, 'text(String(load("preserved")))')).contentItems;
  next = { message: "no healthy upstream", routeLost: false };
  const opensBefore = routing.opens;
  assert.match((await rejection(run(parent, "1"))).message, /no healthy upstream/);
  assert.equal(routing.opens, opensBefore);
  assert.deepEqual(await load(parent), [{ type: "input_text", text: "original" }]);
  next = { message: "no healthy upstream", routeLost: true };
  assert.match((await rejection(run(parent, "1"))).message, /no healthy upstream/);
  assert.equal((await rejection(run(parent, "1"))).message, RESET_MESSAGE);
  assert.deepEqual(await load(parent), [{ type: "input_text", text: "undefined" }]);
  assert.deepEqual(await load(child), [{ type: "input_text", text: "original" }]);
  assert.equal(routing.opens, opensBefore + 1);
  await parent.shutdown();
  await child.shutdown();
});

Deno.test("141: a CompleteToolCall failing NOT_FOUND after the invocation was cancelled leaves the binding live", async () => {
  let completions = 0;
  // The cell's CellClosed reached the client: the cancellation of its unawaited call came before
  // it on the same lease stream.
  const closed = Promise.withResolvers<void>();
  const answered = Promise.withResolvers<void>();
  await using h = await startHost({
    middleware: around(async (method) => {
      if (method !== "CompleteToolCall") return;
      completions++;
      // Answer only once the cell has finished and its unawaited call was cancelled.
      await settledWithin(closed.promise, 10_000);
      answered.resolve();
      throw new ServerError(Status.NOT_FOUND, "unknown code-mode tool invocation");
    }),
  });
  const session = await new GrpcCodeModeSessionProvider(endpoint(h.host.port)).createSession();
  const echo = { name: "echo", toolName: { name: "echo" }, description: "", kind: "function" as const };
  const delegate = new RecordingDelegate();
  delegate.cellClosed = (cellId) => {
    delegate.closed.push(cellId);
    closed.resolve();
  };
  const cell = await session.execute({
    toolCallId: "c",
    enabledTools: [echo],
    source: 'tools.echo(1).catch(() => {}); await new Promise((r) => setTimeout(r, 200)); text("done")',
  }, delegate);
  assert.equal((await cell.initialResponse()).type, "result");
  assert.ok(await eventually(() => completions === 1, 5_000));
  // The NOT_FOUND is on its way: the next cell's Execute, on the same connection, reaches the
  // host after it and its answer comes back after it, so a binding the NOT_FOUND failed would
  // fail that cell.
  await settledWithin(answered.promise, 10_000);
  assert.equal((await run(session, 'text("live")')).cellId, "2");
  await session.shutdown();
});

Deno.test("141a: a subscription registered 200 ms late still receives the first cell's tool call", async () => {
  await using h = await startHost({
    middleware: around(async (method) => {
      if (method === "SubscribeToToolCalls") await new Promise((r) => setTimeout(r, 200));
    }),
  });
  const session = await new GrpcCodeModeSessionProvider(endpoint(h.host.port)).createSession();
  const delegate = new RecordingDelegate((input: unknown) => (input as number) + 1);
  const echo = { name: "echo", toolName: { name: "echo" }, description: "", kind: "function" as const };
  const cell = await session.execute(
    { toolCallId: "c", enabledTools: [echo], source: "text(String(await tools.echo(41)))" },
    delegate,
  );
  const result = await cell.initialResponse();
  assert.deepEqual(result.contentItems, [{ type: "input_text", text: "42" }]);
  assert.deepEqual(delegate.calls, [{ cellId: "1", name: "echo", input: 41 }]);
  await session.shutdown();
});

Deno.test("140: providers reach a host on a Unix socket through unix://PATH and unix:PATH", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cmh-unix-" });
  const host = await createHost({
    listen: `unix:${dir}/host.sock`,
    warmSessions: 1,
    log: new Logger("error"),
  });
  try {
    for (const url of [`unix://${dir}/host.sock`, `unix:${dir}/host.sock`]) {
      const session = await new GrpcCodeModeSessionProvider(url).createSession();
      const result = await run(session, 'text("unix socket")');
      assert.deepEqual(result, textResponse("1", "unix socket", result.codeModeHostDurationNs));
      await session.shutdown();
    }
  } finally {
    await host.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("141b: no request of execute, wait or terminate carries grpc-timeout (headers handed to HTTP/2)", async () => {
  await using h = await startHost();
  // Record the header block of every request the client's HTTP/2 sessions send.
  const probe = http2.connect(`http://127.0.0.1:${h.host.port}`);
  probe.on("error", () => {});
  const proto = Object.getPrototypeOf(probe) as {
    request(headers: Record<string, unknown>, ...rest: unknown[]): unknown;
  };
  probe.close();
  const original = proto.request;
  const requests: Record<string, unknown>[] = [];
  proto.request = function (this: unknown, headers: Record<string, unknown>, ...rest: unknown[]) {
    requests.push({ ...headers });
    return original.call(this, headers, ...rest);
  };
  try {
    const session = await new GrpcCodeModeSessionProvider(endpoint(h.host.port)).createSession();
    const cell = await session.execute(
      { toolCallId: "c", enabledTools: [], source: "await new Promise(() => {})", yieldTimeMs: 0 },
      new NoopCodeModeSessionDelegate(),
    );
    assert.equal((await cell.initialResponse()).type, "yielded");
    assert.equal((await session.wait({ cellId: cell.cellId, yieldTimeMs: 0 })).response.type, "yielded");
    assert.equal((await session.terminate(cell.cellId)).response.type, "terminated");
    await session.shutdown();
  } finally {
    proto.request = original;
  }
  const paths = requests.map((r) => String(r[":path"]).replace(/^.*\//, ""));
  for (
    const method of ["OpenSession", "SubscribeToToolCalls", "Execute", "Wait", "Terminate", "CloseSession"]
  ) {
    assert.ok(paths.includes(method), `${method} was recorded: ${paths}`);
  }
  assert.ok(requests.every((r) => !("grpc-timeout" in r)), JSON.stringify(requests));
});

Deno.test("tool calls, notifications and CellClosed that arrive before the Execute's `started` still reach their cell", async () => {
  // Hold back the Execute stream's `started` so the other streams' events of the cell come first:
  // it goes out once the lease has sent the cell's notification and the subscription its tool call
  // (one connection carries all three streams, in the order they were written).
  const notified = Promise.withResolvers<void>();
  const called = Promise.withResolvers<void>();
  const middleware = async function* (call: Call, context: CallContext) {
    const method = call.method.path.replace(/^.*\//, "");
    if (method === "Execute") {
      for await (const event of call.next(call.request, context) as AsyncGenerator<{ started?: unknown }>) {
        if (event.started) await settledWithin(Promise.all([notified.promise, called.promise]), 10_000);
        yield event;
      }
      return;
    }
    if (method !== "OpenSession" && method !== "SubscribeToToolCalls") {
      return yield* call.next(call.request, context);
    }
    type Sent = { notification?: unknown; invocationId?: string };
    for await (const event of call.next(call.request, context) as AsyncGenerator<Sent>) {
      yield event;
      if (event.notification) notified.resolve();
      if (event.invocationId) called.resolve();
    }
  } as unknown as ServerMiddleware;
  await using h = await startHost({ middleware });
  const provider = new GrpcCodeModeSessionProvider(endpoint(h.host.port));
  const first = await provider.createSession();
  const session = await provider.createSession(); // generation 2: public IDs must be mapped
  const delegate = new RecordingDelegate((input: unknown) => (input as number) + 1);
  const echo = { name: "echo", toolName: { name: "echo" }, description: "", kind: "function" as const };
  const cell = await session.execute(
    {
      toolCallId: "call-7",
      enabledTools: [echo],
      source: 'notify("early"); text(String(await tools.echo(1)))',
    },
    delegate,
  );
  const result = await cell.initialResponse();
  assert.deepEqual(result, textResponse("g2:1", "2", result.codeModeHostDurationNs));
  assert.deepEqual(delegate.calls, [{ cellId: "g2:1", name: "echo", input: 1 }]);
  assert.deepEqual(delegate.notifications, [{ callId: "call-7", cellId: "g2:1", text: "early" }]);
  assert.deepEqual(delegate.closed, ["g2:1"]);
  await session.shutdown();
  await first.shutdown();
});

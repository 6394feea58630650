/**
 * gRPC-only scenarios (stdio and TCP): statuses with code and message for bad requests (SPEC §12.1),
 * lease and subscription streams (§12.2, §12.7), pre-registered cancels and yields (§12.3), metadata,
 * and the raw wire of a whole session (field presence, headers, the message of an `OK` status).
 * Folder-private.
 *
 * @module
 */
import assert from "node:assert/strict";
import { grpcParts } from "./_driver.ts";
import type { Transport } from "./_hosts.ts";
import type { Json } from "./_observe.ts";
import type { Ctx } from "./_runner.ts";
import { FOREVER, mapStep, pause, type Scenario, step } from "./_scenario.ts";
import { encodeMessage, type Method, METHODS, type UnaryResult, type WireClient } from "./_wire.ts";

const GRPC: readonly Transport[] = ["grpc-stdio", "grpc-tcp"];
const UNKNOWN_UUID = "00000000-0000-4000-8000-000000000000";
const UNKNOWN_UUID_2 = "00000000-0000-4000-8000-000000000001";

function unaryWire(r: UnaryResult): Json {
  return {
    status: r.status,
    ...(Object.keys(r.headers).length ? { headers: r.headers } : {}),
    ...(Object.keys(r.trailers).length ? { trailers: r.trailers } : {}),
    ...(r.response !== undefined ? { response: r.response } : {}),
  };
}

/** Any RPC whose call ends by itself (a stream that fails, or a unary call). */
async function rpc(client: WireClient, method: Method, request: Json, metadata?: Record<string, string>) {
  if (METHODS[method][2]) {
    const stream = client.stream(method, request, metadata);
    const status = await stream.status;
    return {
      messages: stream.messages,
      status: { code: status.code, details: status.details },
      ...(Object.keys(status.trailers).length ? { trailers: status.trailers } : {}),
    };
  }
  return unaryWire(await client.unary(method, request, metadata));
}

/**
 * Whether a stream that stays open on success was accepted: `open` once its headers came and no
 * status followed at once (a refusal is a trailers-only answer, which comes with its status).
 */
async function probeStream(ctx: Ctx, client: WireClient, method: Method, request: Json): Promise<Json> {
  const stream = client.stream(method, request);
  await stream.headers;
  const status = await ctx.within(stream.status, 300);
  if (typeof status !== "string") return { status: { code: status.code, details: status.details } };
  stream.cancel();
  await stream.status;
  return { open: true, messages: stream.messages };
}

function grpc(ctx: Ctx): WireClient {
  return ctx.host.grpc!;
}

async function sessionId(ctx: Ctx): Promise<string> {
  return (await ctx.open()).id;
}

function execute(session: string, overrides: Json = {}): Json {
  return {
    session_id: session,
    execution_id: crypto.randomUUID(),
    tool_call_id: "call-1",
    source: 'text("ok")',
    yield_time_ms: 20_000,
    ...overrides,
  };
}

/** The whole of a raw Execute: messages and status. */
function runExecute(client: WireClient, request: Json, metadata?: Record<string, string>) {
  return rpc(client, "Execute", request, metadata);
}

export const GRPC_SCENARIOS: Scenario[] = [
  {
    name: "OpenSession answers for each output truncation request",
    source: "SPEC §12.1 1, 2; CODEX-0.171: SessionOpened field 3",
    transports: GRPC,
    raw: true,
    run: async (ctx) => {
      const requests: [string, Json][] = [
        ["empty", {}],
        ["Codex 0.171", {
          output_truncation: "OUTPUT_TRUNCATION_MODE_SERVER",
          max_pending_delegate_calls: 4096,
        }],
        ["CLIENT", { output_truncation: "OUTPUT_TRUNCATION_MODE_CLIENT" }],
        ["UNSPECIFIED", { output_truncation: "OUTPUT_TRUNCATION_MODE_UNSPECIFIED" }],
        ["unknown number 7", { output_truncation: 7 }],
      ];
      for (const [label, request] of requests) {
        const lease = grpc(ctx).stream("OpenSession", request);
        const first = await lease.next();
        const headers = await lease.headers;
        if (first?.opened) {
          assert.match(
            first.opened.session_id,
            /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
          );
          ctx.rec(label, { headers, first });
          ctx.rec(
            `${label}: close`,
            unaryWire(await grpc(ctx).unary("CloseSession", { session_id: first.opened.session_id })),
          );
        }
        const status = await lease.status;
        ctx.rec(`${label}: lease end`, { messages: lease.messages.length, status });
      }
    },
  },
  {
    name: "a whole session on the raw wire: headers, trailers, field presence",
    source: "SPEC §2.3, §2.5",
    transports: GRPC,
    raw: true,
    run: async (ctx) => {
      const s = await ctx.open();
      ctx.rec("opened", s.opened);
      const e = s.exec(
        'notify("n"); const r = await tools.echo({a: 1}); text(r.b); image("data:image/png;base64,AAA")',
        {
          tools: [{ name: "echo", description: "Echo." }],
        },
      );
      const call = await s.toolCall();
      ctx.rec("tool call", call.wire);
      ctx.rec("complete", await call.succeed({ b: "from tool" }));
      ctx.rec("execute", await e.outcome);
      await s.cellClosed("1");
      const notification = grpcParts(s).lease.messages.find((m) => m.notification)?.notification;
      ctx.rec(
        "acknowledge",
        unaryWire(
          await grpc(ctx).unary("AcknowledgeNotification", {
            session_id: s.id,
            notification_id: notification?.notification_id ?? UNKNOWN_UUID,
          }),
        ),
      );
      ctx.rec("yielding", await s.exec(`text("y"); yield_control(); ${FOREVER}`).outcome);
      ctx.rec("wait", await s.wait("2", { yieldTimeMs: 1 }).result);
      ctx.rec("terminate", await s.terminate("2"));
      ctx.rec("wait missing", await s.wait("2", { yieldTimeMs: 1 }).result);
      ctx.rec("failing cell", await s.exec('throw new Error("boom")').outcome);
    },
  },
  {
    name: "Execute execution ID rules",
    source: "SPEC §12.1 3",
    transports: GRPC,
    run: async (ctx) => {
      const id = await sessionId(ctx);
      ctx.rec("empty", await runExecute(grpc(ctx), execute(id, { execution_id: "" })));
      ctx.rec("257 bytes", await runExecute(grpc(ctx), execute(id, { execution_id: "e".repeat(257) })));
      ctx.rec("256 bytes", await runExecute(grpc(ctx), execute(id, { execution_id: "e".repeat(256) })));
      ctx.rec("not a UUID", await runExecute(grpc(ctx), execute(id, { execution_id: "e1" })));
      ctx.rec("reused", await runExecute(grpc(ctx), execute(id, { execution_id: "e1" })));
    },
  },
  {
    name: "every session-scoped RPC with a malformed or unknown session ID",
    source: "SPEC §12.1 4, §2.6, §2.7",
    transports: GRPC,
    run: async (ctx) => {
      const requests: [Method, (session: string) => Json][] = [
        ["CloseSession", (s) => ({ session_id: s })],
        ["SubscribeToToolCalls", (s) => ({ session_id: s })],
        [
          "CompleteToolCall",
          (s) => ({ session_id: s, invocation_id: UNKNOWN_UUID_2, failed: { message: "x" } }),
        ],
        ["AcknowledgeNotification", (s) => ({ session_id: s, notification_id: UNKNOWN_UUID_2 })],
        ["Execute", (s) => execute(s)],
        ["Wait", (s) => ({ session_id: s, cell_id: "1", wait_id: "w", yield_time_ms: 1 })],
        ["YieldObservation", (s) => ({ session_id: s, wait_id: "w" })],
        ["CancelWait", (s) => ({ session_id: s, wait_id: "w" })],
        ["Terminate", (s) => ({ session_id: s, cell_id: "1" })],
      ];
      for (const [method, request] of requests) {
        for (
          const [label, session] of [["empty", ""], ["not a UUID", "not-a-uuid"], ["unknown", UNKNOWN_UUID]]
        ) {
          ctx.rec(`${method} ${label}`, await rpc(grpc(ctx), method, request(session)));
        }
      }
    },
  },
  {
    name: "subscription filter count and filter names",
    source: "SPEC §12.1 5, 14a",
    transports: GRPC,
    run: async (ctx) => {
      const id = await sessionId(ctx);
      const filters = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `t${i}` }));
      ctx.rec(
        "65 filters",
        await probeStream(ctx, grpc(ctx), "SubscribeToToolCalls", {
          session_id: id,
          tool_names: filters(65),
        }),
      );
      ctx.rec(
        "64 filters",
        await probeStream(ctx, grpc(ctx), "SubscribeToToolCalls", {
          session_id: id,
          tool_names: filters(64),
        }),
      );
      ctx.rec(
        "empty name",
        await probeStream(ctx, grpc(ctx), "SubscribeToToolCalls", {
          session_id: id,
          tool_names: [{ name: "" }],
        }),
      );
      ctx.rec(
        "namespace empty",
        await probeStream(ctx, grpc(ctx), "SubscribeToToolCalls", {
          session_id: id,
          tool_names: [{ name: "a", namespace: "" }],
        }),
      );
      ctx.rec(
        "namespace 257 bytes",
        await probeStream(ctx, grpc(ctx), "SubscribeToToolCalls", {
          session_id: id,
          tool_names: [{ name: "a", namespace: "n".repeat(257) }],
        }),
      );
      ctx.rec(
        "name 257 bytes",
        await probeStream(ctx, grpc(ctx), "SubscribeToToolCalls", {
          session_id: id,
          tool_names: [{ name: "n".repeat(257) }],
        }),
      );
    },
  },
  {
    name: "CompleteToolCall validation",
    source: "SPEC §12.1 6, 14c",
    transports: GRPC,
    run: async (ctx) => {
      const s = await ctx.open();
      const e = s.exec("const r = await tools.echo({}); text(JSON.stringify(r))", {
        tools: [{ name: "echo" }],
      });
      const call = await s.toolCall();
      const invocation = call.wire.invocation_id;
      const complete = (request: Json) =>
        rpc(grpc(ctx), "CompleteToolCall", { session_id: s.id, ...request });
      ctx.rec("not a UUID", await complete({ invocation_id: "nope", succeeded: { output_json: "1" } }));
      ctx.rec("empty", await complete({ invocation_id: "", succeeded: { output_json: "1" } }));
      ctx.rec("unknown", await complete({ invocation_id: UNKNOWN_UUID, succeeded: { output_json: "1" } }));
      ctx.rec("unknown without outcome", await complete({ invocation_id: UNKNOWN_UUID }));
      ctx.rec("without outcome", await complete({ invocation_id: invocation }));
      ctx.rec("invalid JSON", await complete({ invocation_id: invocation, succeeded: { output_json: "{" } }));
      ctx.rec("empty output", await complete({ invocation_id: invocation, succeeded: {} }));
      ctx.rec("valid", await complete({ invocation_id: invocation, succeeded: { output_json: '{"v":1}' } }));
      ctx.rec("execute", await e.outcome);
      ctx.rec("again without outcome", await complete({ invocation_id: invocation }));
      ctx.rec("again valid", await complete({ invocation_id: invocation, failed: { message: "late" } }));
    },
  },
  {
    name: "tool definition validation",
    source: "SPEC §12.1 7",
    transports: GRPC,
    run: async (ctx) => {
      const id = await sessionId(ctx);
      const tool = (overrides: Json) => ({
        name: "echo",
        tool_name: { name: "echo" },
        description: "",
        kind: "TOOL_KIND_FUNCTION",
        ...overrides,
      });
      const cases: [string, Json][] = [
        ["kind UNSPECIFIED", tool({ kind: "TOOL_KIND_UNSPECIFIED" })],
        ["kind 9", tool({ kind: 9 })],
        ["no tool_name", { name: "echo", description: "", kind: "TOOL_KIND_FUNCTION" }],
        ["empty tool name", tool({ tool_name: { name: "" } })],
        ["empty JS name", tool({ name: "" })],
        ["input schema {", tool({ input_schema_json: "{" })],
        ["output schema {", tool({ output_schema_json: "{" })],
        ["namespace empty", tool({ tool_name: { name: "echo", namespace: "" } })],
        ["namespace 257 bytes", tool({ tool_name: { name: "echo", namespace: "n".repeat(257) } })],
        ["valid schema", tool({ input_schema_json: '{"type":"object"}' })],
      ];
      for (const [label, definition] of cases) {
        ctx.rec(
          label,
          await runExecute(
            grpc(ctx),
            execute(id, { enabled_tools: [definition], source: "text(ALL_TOOLS.length)" }),
          ),
        );
      }
    },
  },
  {
    name: "reused wait IDs and wait ID rules",
    source: "SPEC §12.1 8",
    transports: GRPC,
    run: async (ctx) => {
      const s = await ctx.open();
      await s.exec(FOREVER, { yieldTimeMs: 1 }).outcome;
      const wait = (wait_id: string) =>
        rpc(grpc(ctx), "Wait", { session_id: s.id, cell_id: "1", wait_id, yield_time_ms: 1 });
      ctx.rec("w1", await wait("w1"));
      ctx.rec("w1 again", await wait("w1"));
      ctx.rec("empty", await wait(""));
      ctx.rec("257 bytes", await wait("w".repeat(257)));
      ctx.rec(
        "empty cell ID",
        await rpc(grpc(ctx), "Wait", { session_id: s.id, cell_id: "", wait_id: "w2", yield_time_ms: 1 }),
      );
      ctx.rec(
        "terminate empty cell ID",
        await rpc(grpc(ctx), "Terminate", { session_id: s.id, cell_id: "" }),
      );
      ctx.rec("terminate", await s.terminate("1"));
    },
  },
  {
    name: "YieldObservation ID rules",
    source: "SPEC §12.1 9, 14b",
    transports: GRPC,
    run: async (ctx) => {
      const id = await sessionId(ctx);
      ctx.rec("neither", await rpc(grpc(ctx), "YieldObservation", { session_id: id }));
      ctx.rec("empty wait ID", await rpc(grpc(ctx), "YieldObservation", { session_id: id, wait_id: "" }));
      ctx.rec(
        "empty execution ID",
        await rpc(grpc(ctx), "YieldObservation", { session_id: id, execution_id: "" }),
      );
      ctx.rec(
        "unknown wait ID",
        await rpc(grpc(ctx), "YieldObservation", { session_id: id, wait_id: "later" }),
      );
      ctx.rec("CancelWait unknown", await rpc(grpc(ctx), "CancelWait", { session_id: id, wait_id: "other" }));
      ctx.rec("CancelWait empty", await rpc(grpc(ctx), "CancelWait", { session_id: id, wait_id: "" }));
    },
  },
  {
    name: "AcknowledgeNotification of any well-formed UUID",
    source: "SPEC §12.1 12",
    transports: GRPC,
    run: async (ctx) => {
      const id = await sessionId(ctx);
      ctx.rec(
        "uuid",
        await rpc(grpc(ctx), "AcknowledgeNotification", { session_id: id, notification_id: UNKNOWN_UUID }),
      );
      ctx.rec(
        "not a uuid",
        await rpc(grpc(ctx), "AcknowledgeNotification", { session_id: id, notification_id: "n" }),
      );
      ctx.rec(
        "empty",
        await rpc(grpc(ctx), "AcknowledgeNotification", { session_id: id, notification_id: "" }),
      );
    },
  },
  {
    name: "cell execution limits at OpenSession",
    source: "SPEC §12.1 13, §2.7",
    transports: GRPC,
    run: async (ctx) => {
      const cases: [string, Json][] = [
        ["heap 1 MiB", { max_heap_size_bytes: 1024 * 1024 }],
        ["heap 16 MiB", { max_heap_size_bytes: 16 * 1024 * 1024 }],
        ["heap 2^53", { max_heap_size_bytes: 2 ** 53 }],
        ["yield 0", { max_yield_time_ms: 0 }],
      ];
      for (const [label, limits] of cases) {
        const lease = grpc(ctx).stream("OpenSession", { cell_execution_limits: limits });
        const first = await lease.next();
        if (first?.opened) await grpc(ctx).unary("CloseSession", { session_id: first.opened.session_id });
        const status = await lease.status;
        ctx.rec(label, {
          opened: first?.opened !== undefined,
          end: { code: status.code, details: status.details },
        });
      }
    },
  },
  {
    name: "Execute limits on yield time and output tokens",
    source: "SPEC §12.3 39c, §2.7",
    transports: GRPC,
    run: async (ctx) => {
      const id = await sessionId(ctx);
      ctx.rec(
        "max_output_tokens 2^53",
        await runExecute(grpc(ctx), execute(id, { max_output_tokens: 2 ** 53 })),
      );
      ctx.rec(
        "max_output_tokens 2^31",
        await runExecute(grpc(ctx), execute(id, { max_output_tokens: 2 ** 31 })),
      );
      const stream = grpc(ctx).stream(
        "Execute",
        execute(id, { source: FOREVER, yield_time_ms: 2 ** 53 + 2 }),
      );
      const started = await stream.next((m) => m.started);
      const early = await ctx.within(stream.status, 1000);
      ctx.rec("yield 2^53+2 answered within 1 s", typeof early !== "string");
      ctx.rec(
        "yield it",
        await rpc(grpc(ctx), "YieldObservation", {
          session_id: id,
          execution_id: started?.started?.execution_id ?? "",
        }),
      );
      await stream.status;
      ctx.rec("execute", stream.messages);
      ctx.rec(
        "terminate",
        await rpc(grpc(ctx), "Terminate", { session_id: id, cell_id: started?.started?.cell_id ?? "" }),
      );
    },
  },
  {
    name: "a CancelWait before its Wait; a YieldObservation before its Execute",
    source: "SPEC §12.3 29, 30",
    transports: GRPC,
    run: async (ctx) => {
      const id = await sessionId(ctx);
      const executionId = crypto.randomUUID();
      ctx.rec(
        "yield first",
        await rpc(grpc(ctx), "YieldObservation", { session_id: id, execution_id: executionId }),
      );
      ctx.rec(
        "execute",
        await runExecute(
          grpc(ctx),
          execute(id, { execution_id: executionId, source: FOREVER, yield_time_ms: 60_000 }),
        ),
      );
      ctx.rec("cancel first", await rpc(grpc(ctx), "CancelWait", { session_id: id, wait_id: "w" }));
      ctx.rec(
        "wait",
        await rpc(grpc(ctx), "Wait", { session_id: id, cell_id: "1", wait_id: "w", yield_time_ms: 60_000 }),
      );
      ctx.rec("terminate", await rpc(grpc(ctx), "Terminate", { session_id: id, cell_id: "1" }));
    },
  },
  {
    name: "cancelling the lease closes the session",
    source: "SPEC §12.2 15",
    transports: GRPC,
    run: async (ctx) => {
      const lease = grpc(ctx).stream("OpenSession", {});
      const opened = await lease.next();
      const id = opened?.opened?.session_id ?? "";
      lease.cancel();
      let last: Json;
      // The host notices the cancellation asynchronously, and a session being closed may answer
      // CANCELLED for a moment (SPEC §2.7): poll (each answer is an event) up to 5 s for the final answer.
      for (let i = 0; i < 50; i++) {
        last = await rpc(grpc(ctx), "Wait", {
          session_id: id,
          cell_id: "1",
          wait_id: `w${i}`,
          yield_time_ms: 1,
        });
        if (last.status.code !== "OK" && last.status.code !== "CANCELLED") break;
        await pause(100);
      }
      ctx.rec("wait after lease cancel", last.status);
    },
  },
  {
    name: "cancelling a subscription with a pending tool call retires the session",
    source: "SPEC §12.2 21",
    transports: GRPC,
    run: async (ctx) => {
      const idle = await ctx.open();
      grpcParts(idle).subscription!.cancel();
      ctx.rec("idle subscription dropped: next cell", await idle.exec("text(1)").outcome);
      const s = await ctx.open();
      const e = s.exec("try { await tools.echo({}) } catch (e) { text(String(e)) }", {
        yieldTimeMs: 60_000,
        tools: [{ name: "echo" }],
      });
      await s.toolCall();
      grpcParts(s).subscription!.cancel();
      ctx.rec("execute", await e.outcome);
      await grpcParts(s).ended();
      ctx.rec("lease", grpcParts(s).lease.messages.slice(1));
    },
  },
  {
    name: "subscription filters route tool calls",
    source: "SPEC §12.7 85, 86, 87",
    transports: GRPC,
    run: async (ctx) => {
      const s = await ctx.open({ subscribe: false });
      const sub = (filters: Json[]) =>
        grpc(ctx).stream("SubscribeToToolCalls", { session_id: s.id, tool_names: filters });
      const other = sub([{ name: "other" }]);
      await other.headers;
      const lonely = s.exec("try { await tools.echo() } catch (e) { text(String(e)) }", {
        tools: [{ name: "echo" }],
      });
      ctx.rec("no matching subscription", await lonely.outcome);
      const echo = sub([{ name: "echo" }]);
      await echo.headers;
      const twice = s.exec('await tools.echo({value: 1}); await tools.echo({value: 2}); text("done")', {
        tools: [{ name: "echo" }],
      });
      for (const n of [1, 2]) {
        const call = await echo.next(() => true, n - 1);
        await grpc(ctx).unary("CompleteToolCall", {
          session_id: s.id,
          invocation_id: call.invocation_id,
          succeeded: { output_json: "null" },
        });
      }
      ctx.rec("two calls", await (await twice.outcome));
      ctx.rec("echo subscription", echo.messages.map((m) => ({ seq: m.sequence, input: m.input_json })));
      ctx.rec("other subscription", other.messages.length);
      for (
        const [label, toolNs, filterNs] of [
          ["absent / functions", undefined, "functions"],
          ["functions / absent", "functions", undefined],
          ["empty / functions", "", "functions"],
          ["functions / empty", "functions", ""],
          ["absent / empty", undefined, ""],
        ] as [string, string | undefined, string | undefined][]
      ) {
        const filtered = sub([{
          name: "ns_tool",
          ...(filterNs === undefined ? {} : { namespace: filterNs }),
        }]);
        await filtered.headers;
        const e = s.exec('await tools.ns_tool(); text("routed")', {
          tools: [{ name: "ns_tool", ...(toolNs === undefined ? {} : { namespace: toolNs }) }],
          yieldTimeMs: 20_000,
        });
        const call = await filtered.next(() => true);
        if (call) {
          await grpc(ctx).unary("CompleteToolCall", {
            session_id: s.id,
            invocation_id: call.invocation_id,
            succeeded: { output_json: "null" },
          });
        }
        ctx.rec(`namespace ${label}`, { call: call?.tool_name, outcome: (await e.outcome).wire });
        filtered.cancel();
      }
      other.cancel();
      echo.cancel();
    },
  },
  {
    name: "traceparent of an Execute reaches its tool calls",
    source: "SPEC §2.5; deliberate: traceparent-tool-calls",
    transports: GRPC,
    deliberate: {
      id: "traceparent-tool-calls",
      check(kind, observation) {
        const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        const calls = step(observation, "session 1 log").tool_calls.calls;
        assert.equal(calls.length, 1);
        assert.equal(
          step(observation, "tool call traceparent"),
          kind === "reference" ? "<absent>" : traceparent,
        );
        assert.equal(calls[0].traceparent, kind === "reference" ? undefined : traceparent);
      },
      rest: (observation) =>
        mapStep(
          mapStep(observation, "tool call traceparent", () => undefined),
          "session 1 log",
          (log) => {
            for (const call of log.tool_calls.calls) delete call.traceparent;
            return log;
          },
        ),
    },
    run: async (ctx) => {
      const s = await ctx.open();
      const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
      const stream = grpc(ctx).stream(
        "Execute",
        execute(s.id, {
          source: "await tools.echo({}); text('ok')",
          enabled_tools: [{
            name: "echo",
            tool_name: { name: "echo" },
            description: "",
            kind: "TOOL_KIND_FUNCTION",
          }],
        }),
        { traceparent },
      );
      const call = await s.toolCall();
      ctx.rec("tool call traceparent", call.wire.traceparent ?? "<absent>");
      await call.succeed(null);
      await stream.status;
      ctx.rec("execute", stream.messages);
    },
  },
  {
    name: "the health service",
    source: "SPEC §9.2",
    transports: GRPC,
    deliberate: {
      id: "health-reflection",
      check(kind, observation) {
        const check = step(observation, "Health/Check");
        if (kind === "reference") assert.equal(check.status.code, "UNIMPLEMENTED");
        else assert.deepEqual(check.response, { status: "SERVING" });
      },
    },
    run: async (ctx) => {
      const r = await grpc(ctx).unaryPath(
        "/grpc.health.v1.Health/Check",
        encodeMessage("grpc.health.v1.HealthCheckRequest", { service: "" }),
        "grpc.health.v1.HealthCheckResponse",
      );
      ctx.rec("Health/Check", unaryWire(r));
    },
  },
];

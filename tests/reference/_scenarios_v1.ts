/**
 * JSON V1-only scenarios (SPEC §9.10): the handshake, capability negotiation, error frames, fatal
 * protocol errors and the end of the connection. Each runs on a host process of its own, since a
 * hello happens once per connection and a fatal error ends the host. The observation is every frame
 * the host wrote and its exit code. Folder-private.
 *
 * @module
 */
import { CODEX_CAPABILITIES } from "./_driver.ts";
import type { Transport } from "./_hosts.ts";
import type { Json } from "./_observe.ts";
import type { Ctx } from "./_runner.ts";
import { FOREVER, pause, type Scenario } from "./_scenario.ts";
import type { V1Connection } from "./_v1.ts";

const V1: readonly Transport[] = ["v1"];

const CODEX_HELLO = {
  type: "connection/hello",
  supportedVersions: [1],
  requiredCapabilities: [],
  optionalCapabilities: CODEX_CAPABILITIES,
};

/** What a V1 step sequence gets. */
interface V1Steps {
  conn: V1Connection;
  /** Sends `operation/request` and waits for its response (or the end of stdout). */
  request(request: Json, id?: number): Promise<Json>;
  /** Sends a message and waits until the host wrote a frame matching `until` or ended. */
  sendUntil(message: Json, until: (m: Json) => boolean): Promise<void>;
  /**
   * Sends `session/execute` and waits for its response and, when the cell started, for its initial
   * response (or the end of stdout).
   */
  execute(sessionId: string, inner: Json): Promise<void>;
}

/**
 * A scenario on a dedicated V1 host: the hello (Codex's unless given; `false` sends none), then the
 * steps, then stdin is closed; the observation is every frame and the exit code.
 */
function v1Case(
  name: string,
  source: string,
  steps: (s: V1Steps) => Promise<void>,
  options: { hello?: Json | false; recordHello?: boolean } = {},
): Scenario {
  return {
    name,
    source,
    transports: V1,
    run: async (ctx: Ctx) => {
      const host = await ctx.startHost();
      const conn = host.v1!;
      const request = async (r: Json, id = conn.nextId()) => {
        return await conn.request(r, id) ?? "<no answer>";
      };
      const sendUntil = async (message: Json, until: (m: Json) => boolean) => {
        const seen = conn.next(until, conn.received.length);
        await conn.send(message);
        await seen;
      };
      if (options.hello !== false) {
        await sendUntil(options.hello ?? CODEX_HELLO, (m) => m.type?.startsWith("connection/"));
      }
      // Codex's own hello is observed by the first scenario only; the others start after its answer.
      const from = options.hello === undefined && !options.recordHello ? 1 : 0;
      const execute = async (sessionId: string, inner: Json) => {
        const id = conn.nextId();
        const initial = conn.next((m) => m.type === "execute/initialResponse" && m.id === id);
        const started = await request({ method: "session/execute", sessionId, request: inner }, id);
        if (started?.result?.status !== "ok") return;
        const cellId = started.result.value?.cellId;
        const closed = conn.next(
          (m) => m.type === "cell/closed" && m.cellId === cellId,
          conn.received.length,
        );
        await initial;
        // A completed cell's cell/closed follows its result at once; ending the connection before it
        // arrives would make its presence a race on both hosts.
        await Promise.race([closed, pause(2_000)]);
      };
      await steps({ conn, request, sendUntil, execute });
      await conn.end();
      // How stdout ended is not compared: the reference can exit between a frame's length and its body.
      await ctx.within(conn.ended, 10_000);
      const status = await ctx.within(host.status, 10_000);
      ctx.rec("frames", conn.received.slice(from));
      ctx.rec("exit", typeof status === "string" ? status : { code: status.code, signal: status.signal });
    },
  };
}

const ended = () => true;

const NO_CAPABILITIES = {
  type: "connection/hello",
  supportedVersions: [1],
  requiredCapabilities: [],
  optionalCapabilities: [],
};

const EXECUTE_BASE: Json = {
  tool_call_id: "c",
  enabled_tools: [],
  source: "text(1)",
  yield_time_ms: null,
  max_output_tokens: null,
};

export const V1_SCENARIOS: Scenario[] = [
  v1Case(
    "the hello of Codex 0.171 is granted its capabilities",
    "SPEC §9.10 handshake; CODEX-0.171",
    async () => {},
    { recordHello: true },
  ),
  v1Case(
    "no capabilities: a session asking for an output mode",
    "SPEC §9.10 handshake",
    async ({ request }) => {
      await request({ method: "session/open", sessionId: "s1", outputTruncation: "server" });
      await request({ method: "session/open", sessionId: "s2" });
    },
    { hello: NO_CAPABILITIES },
  ),
  v1Case("no capabilities: a session with cell limits", "SPEC §9.10 handshake", async ({ request }) => {
    await request({ method: "session/open", sessionId: "s1", cellExecutionLimits: { maxYieldTimeMs: 10 } });
    await request({ method: "session/open", sessionId: "s2" });
  }, { hello: NO_CAPABILITIES }),
  v1Case("no capabilities: yielding an execute", "SPEC §9.10 handshake", async ({ request, conn }) => {
    await request({ method: "session/open", sessionId: "s1" });
    const id = conn.nextId();
    const started = conn.next((m) => m.type === "operation/response" && m.id === id);
    const initial = conn.next((m) => m.type === "execute/initialResponse" && m.id === id);
    await conn.send({
      type: "operation/request",
      id,
      request: {
        method: "session/execute",
        sessionId: "s1",
        request: { ...EXECUTE_BASE, source: FOREVER, yield_time_ms: 60_000 },
      },
    });
    await started;
    await conn.send({ type: "operation/yield", id });
    // A yield that is honoured answers at once; one that is not leaves the Execute pending.
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([initial, new Promise((resolve) => timer = setTimeout(resolve, 3000))]);
    clearTimeout(timer);
  }, { hello: NO_CAPABILITIES }),
  v1Case(
    "cell limits in snake_case",
    "SPEC §9.10 requests (the reference reads camelCase)",
    async ({ request }) => {
      await request({
        method: "session/open",
        sessionId: "s1",
        cellExecutionLimits: { max_yield_time_ms: 10 },
      });
      await request({ method: "session/open", sessionId: "s2" });
    },
  ),
  v1Case(
    "a hello with unknown optional and known required capabilities",
    "SPEC §9.10 handshake",
    async () => {},
    {
      hello: {
        type: "connection/hello",
        supportedVersions: [1, 2],
        requiredCapabilities: ["yield-observation"],
        optionalCapabilities: ["some-future-capability", "bounded-output-v1"],
      },
    },
  ),
  v1Case("a first message that is not a hello", "SPEC §9.10 handshake", async ({ request }) => {
    await request({ method: "session/open", sessionId: "s1" });
  }, { hello: false }),
  v1Case("a hello without version 1", "SPEC §9.10 handshake", async () => {}, {
    hello: {
      type: "connection/hello",
      supportedVersions: [2],
      requiredCapabilities: [],
      optionalCapabilities: [],
    },
  }),
  v1Case("a hello requiring an unknown capability", "SPEC §9.10 handshake", async () => {}, {
    hello: {
      type: "connection/hello",
      supportedVersions: [1],
      requiredCapabilities: ["x-unknown"],
      optionalCapabilities: [],
    },
  }),
  v1Case("a hello with invalid fields", "SPEC §9.10 handshake", async () => {}, {
    hello: {
      type: "connection/hello",
      supportedVersions: [],
      requiredCapabilities: [],
      optionalCapabilities: [],
    },
  }),
  v1Case("a hello with a capability both required and optional", "SPEC §9.10 handshake", async () => {}, {
    hello: {
      type: "connection/hello",
      supportedVersions: [1],
      requiredCapabilities: ["yield-observation"],
      optionalCapabilities: ["yield-observation"],
    },
  }),
  v1Case("a hello with an unknown field", "SPEC §9.10 envelope", async () => {}, {
    hello: { ...CODEX_HELLO, extra: true },
  }),
  v1Case("a second hello", "SPEC §9.10 handshake", async ({ sendUntil }) => {
    await sendUntil(CODEX_HELLO, ended);
  }),
  v1Case("undecodable JSON", "SPEC §9.10 framing", async ({ conn }) => {
    const bytes = new TextEncoder().encode("{not json");
    const frame = new Uint8Array(4 + bytes.length);
    new DataView(frame.buffer).setUint32(0, bytes.length, true);
    frame.set(bytes, 4);
    await conn.sendBytes(frame);
    await conn.ended;
  }),
  v1Case("an unknown message type", "SPEC §9.10 envelope", async ({ conn }) => {
    await conn.send({ type: "operation/unknown", id: 1 });
    await conn.ended;
  }),
  v1Case("a duplicate request ID", "SPEC §9.10 requests", async ({ request, conn }) => {
    await request({ method: "session/open", sessionId: "s1" }, 1);
    await conn.send({
      type: "operation/request",
      id: 1,
      request: { method: "session/open", sessionId: "s2" },
    });
    await conn.ended;
  }),
  v1Case("an unknown method and an unknown field in a request", "SPEC §9.10 envelope", async ({ conn }) => {
    await conn.send({
      type: "operation/request",
      id: 1,
      request: { method: "session/unknown", sessionId: "s1" },
    });
    await conn.ended;
  }),
  v1Case("an empty session ID", "SPEC §9.10 sessions", async ({ request }) => {
    await request({ method: "session/open", sessionId: "" });
    await request({ method: "session/open", sessionId: "s1" });
  }),
  v1Case("a 257-byte session ID", "SPEC §9.10 sessions", async ({ request }) => {
    await request({ method: "session/open", sessionId: "s".repeat(257) });
    await request({ method: "session/open", sessionId: "s1" });
  }),
  v1Case("session ID rules", "SPEC §9.10 sessions", async ({ request }) => {
    await request({ method: "session/open", sessionId: "s1" });
    await request({ method: "session/open", sessionId: "s1" });
    await request({ method: "session/shutdown", sessionId: "s1" });
    await request({ method: "session/open", sessionId: "s1" });
    await request({ method: "session/shutdown", sessionId: "nope" });
    await request({ method: "session/terminate", sessionId: "nope", cellId: "1" });
    await request({ method: "session/wait", sessionId: "nope", request: { cell_id: "1", yield_time_ms: 1 } });
  }),
  // Each bad execute request on a host of its own: the reference ends the connection on some of them.
  ...([
    ["an unknown field", { unknown_field: 1 }],
    ["max_output_tokens -1", { max_output_tokens: -1 }],
    ["max_output_tokens 2^31", { max_output_tokens: 2 ** 31 }],
    ["yield_time_ms -1", { yield_time_ms: -1 }],
    ["a tool of an unknown kind", {
      enabled_tools: [{
        name: "t",
        tool_name: { name: "t", namespace: null },
        description: "",
        kind: "weird",
        input_schema: null,
        output_schema: null,
      }],
    }],
    ["yield_time_ms and max_output_tokens left out", {
      yield_time_ms: undefined,
      max_output_tokens: undefined,
    }],
  ] as [string, Json][]).map(([label, change]) =>
    v1Case(`an execute request with ${label}`, "SPEC §9.10 requests", async ({ request, execute }) => {
      await request({ method: "session/open", sessionId: "s1" });
      const inner = { ...EXECUTE_BASE, ...change };
      for (const key of Object.keys(inner)) if (inner[key] === undefined) delete inner[key];
      await execute("s1", inner);
      await execute("s1", { ...EXECUTE_BASE, source: 'text("after")' });
    })
  ),
  v1Case("a wait and a terminate of a missing cell", "SPEC §9.10 requests", async ({ request }) => {
    await request({ method: "session/open", sessionId: "s1" });
    await request({ method: "session/wait", sessionId: "s1", request: { cell_id: "9", yield_time_ms: 1 } });
    await request({ method: "session/terminate", sessionId: "s1", cellId: "9" });
  }),
  v1Case(
    "cancel and yield of requests that are not in flight",
    "SPEC §9.10 envelope",
    async ({ conn, request }) => {
      await request({ method: "session/open", sessionId: "s1" });
      await conn.send({ type: "operation/cancel", id: 99 });
      await conn.send({ type: "operation/yield", id: 98 });
      await request({ method: "session/shutdown", sessionId: "s1" });
    },
  ),
  v1Case(
    "a delegate response for an unknown delegate request",
    "SPEC §9.10 envelope",
    async ({ conn, request }) => {
      await request({ method: "session/open", sessionId: "s1" });
      await conn.send({ type: "delegate/response", id: 77, result: { status: "error", message: "x" } });
      await request({ method: "session/shutdown", sessionId: "s1" });
    },
  ),
  v1Case("end of input with a running cell", "SPEC §9.10 ending", async ({ conn, request }) => {
    await request({ method: "session/open", sessionId: "s1" });
    const id = conn.nextId();
    const started = conn.next((m) => m.type === "operation/response" && m.id === id);
    await conn.send({
      type: "operation/request",
      id,
      request: {
        method: "session/execute",
        sessionId: "s1",
        request: {
          tool_call_id: "c",
          enabled_tools: [],
          source: FOREVER,
          yield_time_ms: 60_000,
          max_output_tokens: null,
        },
      },
    });
    await started;
  }),
  v1Case(
    "a tool result that is not JSON-shaped and a wrong delegate result",
    "SPEC §9.10 delegates",
    async ({ conn, request }) => {
      await request({ method: "session/open", sessionId: "s1" });
      const id = conn.nextId();
      const delegate = conn.next((m) => m.type === "delegate/request");
      const initial = conn.next((m) => m.type === "execute/initialResponse" && m.id === id);
      await conn.send({
        type: "operation/request",
        id,
        request: {
          method: "session/execute",
          sessionId: "s1",
          request: {
            tool_call_id: "c",
            enabled_tools: [{
              name: "t",
              tool_name: { name: "t", namespace: null },
              description: "",
              kind: "function",
              input_schema: null,
              output_schema: null,
            }],
            source: "try { await tools.t({}) } catch (e) { text(String(e)) }",
            yield_time_ms: 20_000,
            max_output_tokens: null,
          },
        },
      });
      const d = await delegate;
      await conn.send({
        type: "delegate/response",
        id: d?.id,
        result: { status: "ok", value: { type: "notification/delivered" } },
      });
      await initial;
      // As in `execute` above: the cell's cell/closed is awaited (bounded) before the end.
      await Promise.race([
        conn.next((m) => m.type === "cell/closed", conn.received.length - 1),
        pause(2_000),
      ]);
    },
  ),
  v1Case(
    "a cell's result waits until the client answered each of its notifications; a yield does not",
    "CODEX-0.171 (Codex drops a notification it handles after the cell's result)",
    async ({ conn, request }) => {
      await request({ method: "session/open", sessionId: "s1" });
      const inner = (source: string, yieldTimeMs: number) => ({
        ...EXECUTE_BASE,
        source,
        yield_time_ms: yieldTimeMs,
      });
      const cell = (id: number, source: string, yieldTimeMs: number) =>
        conn.send({
          type: "operation/request",
          id,
          request: { method: "session/execute", sessionId: "s1", request: inner(source, yieldTimeMs) },
        });
      const delivered = (d: Json) =>
        conn.send({
          type: "delegate/response",
          id: d?.id,
          result: { status: "ok", value: { type: "notification/delivered" } },
        });
      // A completed cell: its result only after both notifications are answered (the second with an error).
      const id = conn.nextId();
      const two = conn.next((m) => m.type === "delegate/request" && m.request?.text === "b");
      const initial = conn.next((m) => m.type === "execute/initialResponse" && m.id === id);
      await cell(id, `notify("a"); notify("b"); text("done")`, 20_000);
      const b = await two;
      await pause(300);
      conn.received.push({ observed: "300 ms later, neither notification answered" });
      await delivered(conn.received.find((m) => m.type === "delegate/request" && m.request?.text === "a"));
      await pause(300);
      conn.received.push({ observed: "300 ms after the first answer" });
      await conn.send({
        type: "delegate/response",
        id: b?.id,
        result: { status: "error", message: "not shown" },
      });
      await initial;
      await Promise.race([
        conn.next((m) => m.type === "cell/closed", conn.received.length - 1),
        pause(2_000),
      ]);
      // A yielding cell: its yield goes out with its notification unanswered.
      const id2 = conn.nextId();
      const yielded = conn.next((m) => m.type === "execute/initialResponse" && m.id === id2);
      await cell(id2, `notify("c"); text("before"); await new Promise((r) => setTimeout(r, 5_000))`, 200);
      await yielded;
      await request({ method: "session/terminate", sessionId: "s1", cellId: "2" });
      await Promise.race([conn.next((m) => m.type === "cell/closed" && m.cellId === "2"), pause(2_000)]);
    },
  ),
];

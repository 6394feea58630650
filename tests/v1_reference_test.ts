/**
 * End-to-end, side by side: the same JSON host V1 frames, from the same client code, to this host
 * (`bin/codex-code-mode-host`, no arguments, as Codex launches it) and to Codex's own
 * `codex-code-mode-host` 0.171 (the reference, installed pinned by `reference/_codex.ts`). Every
 * frame each host writes must be the same, byte for byte once timings are zeroed
 * (`code_mode_host_duration_ns`, `result_buffered_for_ns`), and so must the exit code and the
 * errors and warnings each host logs (the reference's `Error: …\n\nCaused by:\n    …` chain is our
 * one JSON line `…: …`).
 *
 * Scenarios are deterministic on both hosts: a cell yields through `yield_control()` or by waiting
 * forever, never on a race between its output and a short yield time.
 */
import assert from "node:assert/strict";
import { delivered, failure, type Json, LAUNCHER, toolResult, V1Client } from "./_v1_client.ts";
import { tool } from "./_v1_helpers.ts";
import { ensureCodex } from "./reference/_codex.ts";

type Scenario = (c: V1Client) => Promise<unknown>;

interface Transcript {
  frames: string[];
  code: number;
  logged: string[];
}

/** The reference's stderr: each `Error: A\n\nCaused by:\n    B` as `error: A: B`, each WARN line as `warn: …`. */
function referenceLog(stderr: string): string[] {
  const out: string[] = [];
  const lines = stderr.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const warn = /^\S+Z\s+WARN\s+\S+: (.*)$/.exec(lines[i]);
    if (warn) out.push(`warn: ${warn[1]}`);
    if (!lines[i].startsWith("Error: ")) continue;
    let message = lines[i].slice(7);
    for (
      i++;
      i < lines.length && (lines[i] === "" || lines[i] === "Caused by:" || lines[i].startsWith("    "));
      i++
    ) {
      if (lines[i].startsWith("    ")) message += `: ${lines[i].trim()}`;
    }
    out.push(`error: ${message}`);
  }
  return out;
}

/** Our stderr (JSON lines): the warnings and errors, minus start-up facts about this machine. */
function ourLog(stderr: string): string[] {
  return stderr.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l))
    .filter((l) =>
      (l.level === "warn" || l.level === "error") && !/^(OS sandbox|runtime memory bound)/.test(l.msg)
    )
    .map((l) => `${l.level}: ${l.msg}`);
}

const untimed = (frame: string) =>
  frame.replace(/"(code_mode_host_duration_ns|result_buffered_for_ns)":\d+/g, '"$1":0');

async function transcript(command: string, scenario: Scenario, reference: boolean): Promise<Transcript> {
  await using c = V1Client.spawn({ command });
  await scenario(c);
  const status = await c.finish();
  const stderr = await c.stderr;
  return {
    frames: c.raw.map(untimed),
    code: status.code,
    logged: reference ? referenceLog(stderr) : ourLog(stderr),
  };
}

/** Runs `scenario` on both hosts at once and asserts the transcripts are equal. */
async function same(scenario: Scenario): Promise<void> {
  await compared(scenario);
}

/** {@link same}, returning the reference's transcript. */
async function compared(scenario: Scenario): Promise<Transcript> {
  const { host } = await ensureCodex();
  const [expected, actual] = await Promise.all([
    transcript(host, scenario, true),
    transcript(LAUNCHER, scenario, false),
  ]);
  assert.deepEqual(actual.frames, expected.frames);
  assert.equal(actual.code, expected.code);
  assert.deepEqual(actual.logged, expected.logged);
  return expected;
}

/** Sends a request and waits for its answer (and, for a started execute, its initial response). */
async function step(c: V1Client, request: Json): Promise<Json> {
  const id = c.nextId();
  const answer = await c.request(request, id);
  if (request.method === "session/execute" && answer.status === "ok") {
    await c.waitFor((m) => m.type === "execute/initialResponse" && m.id === id);
  }
  return answer;
}

const execute = (sessionId: string, source: string, extra: Json = {}) => ({
  method: "session/execute",
  sessionId,
  request: {
    ...(extra.catalog_revision === undefined ? {} : { catalog_revision: extra.catalog_revision }),
    tool_call_id: extra.tool_call_id ?? "call-1",
    enabled_tools: extra.enabled_tools ?? [],
    source,
    yield_time_ms: extra.yield_time_ms ?? 30_000,
    max_output_tokens: extra.max_output_tokens ?? null,
  },
});

/** Waits for a cell's `cell/closed`. */
const cellClosed = (c: V1Client, sessionId: string, cellId: string) =>
  c.waitFor((m) => m.type === "cell/closed" && m.sessionId === sessionId && m.cellId === cellId);

Deno.test("V1 vs Codex's host: handshakes (grants, rejections) and EOF", async (t) => {
  await t.step("Codex's hello", () => same((c) => c.hello()));
  await t.step("a subset, an unknown optional one, a known required one", () =>
    same((c) =>
      c.hello({
        requiredCapabilities: ["yield-observation"],
        optionalCapabilities: ["teleportation", "tool-catalog-revision-v1", "bounded-output-v1"],
      })
    ));
  await t.step("no capabilities", () => same((c) => c.hello({ optionalCapabilities: [] })));
  await t.step("versions 2 and 1", () => same((c) => c.hello({ supportedVersions: [2, 1] })));
  await t.step("no version 1", () => same((c) => c.hello({ supportedVersions: [2] })));
  await t.step(
    "an unknown required capability",
    () => same((c) => c.hello({ requiredCapabilities: ["teleportation"], optionalCapabilities: [] })),
  );
  await t.step("a request before the hello", async () => {
    const t = await compared(async (c) => {
      await c.send({ type: "operation/request", id: 1, request: { method: "session/open", sessionId: "s" } });
      await c.closed;
    });
    assert.equal(t.code, 0);
  });
  await t.step("EOF at once", () => same(() => Promise.resolve()));
});

Deno.test("V1 vs Codex's host: fatal input ends the host with the same error and nothing more", async (t) => {
  const fatal: [string, Scenario][] = [
    [
      "an invalid hello",
      (c) =>
        c.send({
          type: "connection/hello",
          supportedVersions: [0],
          requiredCapabilities: [],
          optionalCapabilities: [],
        }),
    ],
    [
      "a duplicate capability",
      (c) => c.hello({ optionalCapabilities: ["yield-observation", "yield-observation"] }),
    ],
    ["a second hello", async (c) => {
      await c.hello();
      await c.send({
        type: "connection/hello",
        supportedVersions: [1],
        requiredCapabilities: [],
        optionalCapabilities: [],
      });
    }],
    ["a duplicate request ID", async (c) => {
      await c.hello();
      await c.open("session-1");
      await c.send({
        type: "operation/request",
        id: 1,
        request: { method: "session/open", sessionId: "s2" },
      });
    }],
    ["an unknown message type", async (c) => {
      await c.hello();
      await c.send({ type: "operation/what", id: 1 });
    }],
    ["an unknown field in an execute", async (c) => {
      await c.hello();
      await c.open("session-1");
      await c.send({
        type: "operation/request",
        id: 2,
        request: { ...execute("session-1", ""), request: { ...execute("session-1", "").request, bogus: 1 } },
      });
    }],
    ["snake_case execution limits", async (c) => {
      await c.hello();
      await c.open("session-1", { max_yield_time_ms: 1 });
    }],
    ["a negative yield time", async (c) => {
      await c.hello();
      await c.open("session-1");
      await c.send({
        type: "operation/request",
        id: 2,
        request: execute("session-1", "", { yield_time_ms: -1 }),
      });
    }],
    ["a max_output_tokens past i32", async (c) => {
      await c.hello();
      await c.open("session-1");
      await c.send({
        type: "operation/request",
        id: 2,
        request: execute("session-1", "", { max_output_tokens: 2 ** 31 }),
      });
    }],
    ["a catalog revision that is not an integer", async (c) => {
      await c.hello();
      await c.open("session-1");
      await c.send({
        type: "operation/request",
        id: 2,
        request: execute("session-1", "", { catalog_revision: "1" }),
      });
    }],
    ["an empty session ID", async (c) => {
      await c.hello();
      await c.open(" ");
    }],
    ["a tool result without its result", async (c) => {
      await c.hello();
      await c.send({
        type: "delegate/response",
        id: 1,
        result: { status: "ok", value: { type: "tool/result" } },
      });
    }],
    ["a frame length over 64 MiB", async (c) => {
      await c.hello();
      await c.sendRaw(new Uint8Array([1, 0, 0, 4]));
    }],
    ["EOF inside a frame", async (c) => {
      await c.hello();
      await c.sendRaw(new Uint8Array([9, 0, 0, 0, 0x7b]));
      await c.end();
    }],
  ];
  for (const [name, scenario] of fatal) {
    await t.step(name, async () => {
      const t = await compared(async (c) => {
        await scenario(c).catch(() => {});
        await c.closed.catch(() => {});
      });
      assert.equal(t.code, 1);
      assert.equal(t.logged.length, 1, JSON.stringify(t.logged));
    });
  }
});

Deno.test("V1 vs Codex's host: sessions, unknown sessions and missing cells", () =>
  same(async (c) => {
    await c.hello();
    await c.open("session-1");
    await c.open("session-1");
    await c.open("s".repeat(300), { maxYieldTimeMs: 60_000, maxHeapSizeBytes: 1 });
    await c.open("session-2", undefined, "server");
    await c.open("session-3", null, null as unknown as string);
    for (const sessionId of ["session-1", "session-2"]) {
      await c.wait(sessionId, "7");
      await c.terminate(sessionId, "8");
      await c.wait(sessionId, "");
    }
    await step(c, execute("nope", "text(1)"));
    await c.wait("nope", "1");
    await c.terminate("nope", "1");
    await c.shutdown("nope");
    await c.shutdown("session-1");
    await c.open("session-1");
    await step(c, execute("session-1", "text(1)"));
    await step(c, execute("session-3", "text(1)", { max_output_tokens: -1 }));
  }));

Deno.test("V1 vs Codex's host: cells, stored values, content items, errors", () =>
  same(async (c) => {
    await c.hello();
    await c.open("session-1");
    await c.open("session-2", undefined, "server");
    for (const sessionId of ["session-1", "session-2"]) {
      await step(c, execute(sessionId, `store("k", 41); text("hello")`));
      await step(c, execute(sessionId, `text(load("k") + 1); text(JSON.stringify({ a: [1, "é"] }))`));
      await step(
        c,
        execute(
          sessionId,
          `image("data:image/png;base64,AAAA"); image({ image_url: "data:image/png;base64,BBBB", detail: "low" });
           image({ image_url: "data:image/png;base64,CCCC", detail: "original" }); text("t")`,
        ),
      );
      await step(c, execute(sessionId, ""));
      // Thrown values without a stack (an Error's stack frames are helper A's, SPEC §5.6).
      await step(c, execute(sessionId, `text("a"); throw "boom"`));
      await step(c, execute(sessionId, `throw { message: "m" }`));
      await step(c, execute(sessionId, `text("x".repeat(2000))`, { max_output_tokens: 10 }));
      await step(c, execute(sessionId, `text(1)`, { tool_call_id: "" }));
      await cellClosed(c, sessionId, "8");
    }
  }));

Deno.test("V1 vs Codex's host: the tool catalog (tool-catalog-revision-v1)", () =>
  same(async (c) => {
    await c.hello();
    await c.open("session-1");
    await c.open("session-2");
    const keys = `text(Object.keys(tools).join(","))`;
    const a = tool("a");
    const b = tool("b");
    const cases: Json[] = [
      { catalog_revision: 1, enabled_tools: [a, b] },
      { catalog_revision: 1 },
      { catalog_revision: 1, enabled_tools: [a, b] },
      { catalog_revision: 1, enabled_tools: [b, a] },
      { catalog_revision: 1, enabled_tools: [a, { ...b, description: "other" }] },
      {
        catalog_revision: 1,
        enabled_tools: [a, { ...b, output_schema: undefined, input_schema: { type: "object" } }],
      },
      { catalog_revision: 2 },
      { catalog_revision: 0 },
      { catalog_revision: 0, enabled_tools: [a] },
      { enabled_tools: [tool("e")] },
      { catalog_revision: 1 },
      { catalog_revision: 3, enabled_tools: [tool("c")] },
      { catalog_revision: 1 },
      { catalog_revision: 2, enabled_tools: [tool("d")] },
      { catalog_revision: 2 },
      { catalog_revision: 3 },
      { catalog_revision: 3, enabled_tools: [tool("x")] },
      { catalog_revision: 9007199254740993, enabled_tools: [tool("z")] },
      { catalog_revision: 9007199254740993 },
    ];
    for (const extra of cases) await step(c, execute("session-1", keys, extra));
    // One catalog per session.
    await step(c, execute("session-2", keys, { catalog_revision: 3 }));
    await step(c, execute("session-2", keys, { catalog_revision: 3, enabled_tools: [a] }));
    await step(c, execute("session-2", keys, { catalog_revision: 3 }));
    await cellClosed(c, "session-2", "2");
  }));

Deno.test("V1 vs Codex's host: tool calls, their results, errors and wrong answers", () =>
  same(async (c) => {
    await c.hello();
    await c.open("session-1");
    c.onDelegate = (m) => {
      if (m.request.type === "notification/send") return delivered;
      const { tool_name, input } = m.request.invocation;
      if (tool_name.name === "fail") return failure("tool said no");
      if (tool_name.name === "wrong") return delivered;
      if (tool_name.name === "nothing") return toolResult(null);
      if (tool_name.name === "slow") return undefined; // never answered
      return toolResult({ echoed: input, big: 12345678901234567890n.toString() });
    };
    const tools = [
      tool("echo"),
      tool("fail"),
      tool("wrong"),
      tool("nothing"),
      { ...tool("ff"), kind: "freeform" },
      { ...tool("mcp__srv__b"), tool_name: { name: "b", namespace: "mcp__srv" } },
    ];
    await step(
      c,
      execute(
        "session-1",
        `text(JSON.stringify(await tools.echo({ n: 7 })));
         try { await tools.fail({}); } catch (e) { text("caught " + e + " " + (e instanceof Error)); }
         try { await tools.wrong({}); } catch (e) { text("caught " + e); }
         text(JSON.stringify(await tools.nothing()));
         text(JSON.stringify(await tools.ff("raw text")));
         text(JSON.stringify(await tools.mcp__srv__b(5)));`,
        { enabled_tools: tools },
      ),
    );
    await step(c, execute("session-1", `await tools.fail({})`, { enabled_tools: tools }));
    // Unanswered calls are cancelled when their cell completes, newest first, before its result.
    await step(
      c,
      execute(
        "session-1",
        `void tools.slow({ n: 1 }); void tools.slow({ n: 2 }); await tools.echo({}); text("x")`,
        {
          enabled_tools: [...tools, tool("slow")],
        },
      ),
    );
    // Answers to unknown or finished delegate requests are ignored.
    await c.send({ type: "delegate/response", id: 1, result: toolResult(1) });
    await c.send({ type: "delegate/response", id: 999, result: failure("x") });
    await step(c, execute("session-1", `text("after")`));
    await cellClosed(c, "session-1", "4");
  }));

Deno.test("V1 vs Codex's host: notifications come before their cell's outcome", () =>
  same(async (c) => {
    await c.hello();
    await c.open("session-1");
    let n = 0;
    c.onDelegate = () => n++ % 2 === 0 ? delivered : failure("not shown");
    await step(c, execute("session-1", `notify("one"); text("a"); notify("two")`));
    // Before a yield the order is a race in Codex's host too: the notification is answered first here.
    await step(
      c,
      execute("session-1", `notify("three"); await new Promise((r) => setTimeout(r, 100)); text("b")`),
    );
    await cellClosed(c, "session-1", "2");
  }));

Deno.test("V1 vs Codex's host: yield, wait, cancel, terminate, shutdown", () =>
  same(async (c) => {
    await c.hello();
    await c.open("session-1");
    // A cell that yields, then finishes: the wait takes the rest.
    await step(
      c,
      execute(
        "session-1",
        `text("a"); yield_control(); await new Promise((r) => setTimeout(r, 200)); text("b")`,
      ),
    );
    await c.wait("session-1", "1", 30_000);
    await cellClosed(c, "session-1", "1");
    await c.wait("session-1", "1", 30_000);
    // A cell that waits forever: a cancelled wait, a termination.
    await step(c, execute("session-1", `text("f"); yield_control(); await new Promise(() => {})`));
    const id = c.nextId();
    const long = c.wait("session-1", "2", 600_000, id);
    await c.send({ type: "operation/cancel", id });
    await long;
    await c.terminate("session-1", "2");
    await cellClosed(c, "session-1", "2");
    await c.terminate("session-1", "2");
    // operation/cancel does not stop an execute; operation/yield ends its observation.
    const e = c.execute(
      "session-1",
      `text("y"); notify("ready"); await new Promise((r) => setTimeout(r, 300)); text("z")`,
    );
    await e.started;
    await c.send({ type: "operation/cancel", id: e.id });
    // The notification says "y" was written: yield now.
    await c.waitFor((m) => m.type === "delegate/request" && m.request.text === "ready");
    await c.send({ type: "operation/yield", id: e.id });
    await e.initial;
    await c.wait("session-1", "3", 30_000);
    await cellClosed(c, "session-1", "3");
    // Shutdown closes a yielded cell first.
    await step(c, execute("session-1", `text("s"); yield_control(); await new Promise(() => {})`));
    await c.shutdown("session-1");
    await c.open("session-1");
  }));

Deno.test("V1 vs Codex's host: EOF with a running cell and a pending wait writes nothing more, exit 0", () =>
  same(async (c) => {
    await c.hello();
    await c.open("session-1");
    await step(c, execute("session-1", `text("a"); yield_control(); await new Promise(() => {})`));
    void c.wait("session-1", "1", 600_000).catch(() => {});
  }));

/**
 * Scenarios that run unchanged on all three transports (gRPC over stdio, JSON V1, gRPC over TCP):
 * SPEC §12.2, §12.3, §12.5–§12.8 as far as a client can drive them, and the differences listed in
 * `../shared/CODEX-0.171.md`. Folder-private.
 *
 * Timing: "completes before the yield" uses yields of 20 s; "yields" uses `yield_control()` or a
 * never-ending cell; a scenario waits for an event (a notification, a tool call, a started answer)
 * before acting on a running cell.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { Session } from "./_driver.ts";
import type { Json } from "./_observe.ts";
import { cells, FOREVER, mapStep, pause, runCells, type Scenario, SPIN, step } from "./_scenario.ts";

const ECHO = { name: "echo" };
const echoTools = { tools: [ECHO] };

/** Checks of the `typescript-cells` difference: the reference fails with a SyntaxError, ours runs. */
function typescriptCheck(labels: string[]) {
  return (kind: string, observation: Json[]) => {
    for (const label of labels) {
      const text = JSON.stringify(step(observation, label));
      if (kind === "reference") {
        assert.match(text, /SyntaxError/, `${label}: the reference rejects TypeScript`);
      } else assert.doesNotMatch(text, /SyntaxError/, `${label}: this host runs TypeScript`);
    }
  };
}

async function foreverCell(session: Session, source = FOREVER) {
  const exec = session.exec(source, { yieldTimeMs: 1 });
  const outcome = await exec.outcome;
  return { exec, outcome };
}

export const NEUTRAL_SCENARIOS: Scenario[] = [
  // §12.2 Sessions
  {
    name: "two sessions do not share stored values; closing one leaves the other working",
    source: "SPEC §12.2 17",
    run: async (ctx) => {
      const a = await ctx.open();
      const b = await ctx.open();
      ctx.rec("A store", await a.exec('store("key", "a-value")').outcome);
      ctx.rec("B load", await b.exec('text(typeof load("key"))').outcome);
      ctx.rec("A load", await a.exec('text(load("key"))').outcome);
      ctx.rec("A close", await a.close());
      ctx.rec("B after A closed", await b.exec("text(1)").outcome);
    },
  },
  {
    name: "closing a session ends its pending wait and its running execute",
    source: "SPEC §12.2 16, 21a",
    // Over JSON V1 Codex's host answers the two observations, and closes the two cells, in either
    // order from run to run (measured): each cell's own frames are compared, in their order.
    compared: (observation) =>
      mapStep(observation, "session 1 log", (log) => {
        const frames = (log as { frames?: Json[] }).frames;
        if (!Array.isArray(frames)) return log; // gRPC: the lease's events, in one order
        const byCell: Record<string, Json[]> = {};
        const cellOf = (frame: Json): string => {
          const text = JSON.stringify(frame);
          if (text.includes('"<request-3>"') || /"cell(?:_id|Id)":"1"/.test(text)) return "cell 1";
          if (
            text.includes('"<request-1>"') || text.includes('"<request-4>"') ||
            /"cell(?:_id|Id)":"2"/.test(text)
          ) {
            return "cell 2";
          }
          return "session";
        };
        for (const frame of frames) (byCell[cellOf(frame)] ??= []).push(frame);
        return { ...log, frames: byCell };
      }),
    run: async (ctx) => {
      const s = await ctx.open();
      const first = s.exec('text("drained"); notify("ready"); ' + FOREVER, { yieldTimeMs: 60_000 });
      await s.notifications.arrived("ready");
      const { outcome: second } = await foreverCell(s);
      ctx.rec("cell 2 yielded", second);
      const wait = s.wait("2", { yieldTimeMs: 60_000 });
      // No event tells that the host has taken the Wait; a pause lets it arrive first.
      await pause(500);
      ctx.rec("close", await s.close());
      ctx.rec("execute 1", await first.outcome);
      ctx.rec("wait 2", await wait.result);
      ctx.rec("execute after close", await s.exec("text(1)").outcome);
    },
  },
  // §12.3 Cells and observations
  cells("the first cell is 1 and the next 2", "SPEC §12.3 22", ['text("before")', 'text("next")']),
  {
    name: "yield_control yields what was printed; a wait gets the rest of a running cell",
    source: "SPEC §12.3 23",
    run: async (ctx) => {
      const s = await ctx.open();
      const e = s.exec(`text("before"); yield_control(); text("after"); notify("printed"); ${FOREVER}`, {
        yieldTimeMs: 60_000,
      });
      ctx.rec("execute", await e.outcome);
      // Output travels the same path as notifications, in order: once this arrived, "after" is at the host.
      await s.notifications.arrived("printed");
      ctx.rec("wait 100 ms", await s.wait("1", { yieldTimeMs: 100 }).result);
      ctx.rec("terminate", await s.terminate("1"));
    },
  },
  {
    name: "yield_control then completion: the wait completes",
    source: "SPEC §12.3 24",
    run: async (ctx) => {
      const s = await ctx.open();
      ctx.rec(
        "execute",
        await s.exec('text("before"); yield_control(); text("after");', { yieldTimeMs: 60_000 }).outcome,
      );
      ctx.rec("wait", await s.wait("1").result);
    },
  },
  {
    name: "yield, wait, terminate, then the cell is missing",
    source: "SPEC §12.3 25",
    run: async (ctx) => {
      const s = await ctx.open();
      ctx.rec("execute 1 ms", (await foreverCell(s)).outcome);
      ctx.rec("wait 1 ms", await s.wait("1", { yieldTimeMs: 1 }).result);
      ctx.rec("terminate", await s.terminate("1"));
      ctx.rec("wait after terminate", await s.wait("1", { yieldTimeMs: 1 }).result);
      ctx.rec("terminate after terminate", await s.terminate("1"));
    },
  },
  {
    name: "session yield limit clamps execute and wait; another session is unaffected",
    source: "SPEC §12.3 26",
    run: async (ctx) => {
      const limited = await ctx.open({ maxYieldTimeMs: 1, maxHeapSizeBytes: 16 * 1024 * 1024 });
      // The SPEC's 1,000 ms would make a slow first cell yield; 15 s keeps the point: no clamping here.
      const other = await ctx.open({ maxYieldTimeMs: 15_000 });
      ctx.rec("limited execute 60 s", await limited.exec(FOREVER, { yieldTimeMs: 60_000 }).outcome);
      ctx.rec("limited wait 60 s", await limited.wait("1", { yieldTimeMs: 60_000 }).result);
      ctx.rec(
        "other",
        await other.exec('await new Promise(r => setTimeout(r, 25)); text("isolated")', {
          yieldTimeMs: 20_000,
        })
          .outcome,
      );
      ctx.rec("limited terminate", await limited.terminate("1"));
      ctx.rec("limited next", await limited.exec(FOREVER, { yieldTimeMs: null }).outcome);
      ctx.rec("limited terminate next", await limited.terminate("2"));
    },
  },
  {
    name: "a wait on a cell that never existed",
    source: "SPEC §12.3 27",
    run: async (ctx) => {
      const s = await ctx.open();
      ctx.rec("wait", await s.wait("missing-cell", { yieldTimeMs: 1 }).result);
      ctx.rec("terminate", await s.terminate("missing-cell"));
    },
  },
  {
    name: "a second observer of a cell is refused; the first is unaffected",
    source: "SPEC §12.3 28",
    run: async (ctx) => {
      const s = await ctx.open();
      await foreverCell(s);
      const first = s.wait("1", { yieldTimeMs: 60_000 });
      // No event tells that the host has taken the first Wait.
      await pause(500);
      ctx.rec("second wait", await s.wait("1", { yieldTimeMs: 60_000 }).result);
      await first.yieldNow();
      ctx.rec("first wait", await first.result);
      ctx.rec("terminate", await s.terminate("1"));
    },
  },
  {
    name: "cancelling an active wait; the cell can be observed again",
    source: "SPEC §12.3 29",
    run: async (ctx) => {
      const s = await ctx.open();
      await foreverCell(s);
      const wait = s.wait("1", { yieldTimeMs: 60_000 });
      ctx.rec("cancel", await wait.cancel());
      ctx.rec("cancelled wait", await wait.result);
      ctx.rec("wait 1 ms", await s.wait("1", { yieldTimeMs: 1 }).result);
      ctx.rec("terminate", await s.terminate("1"));
    },
  },
  {
    name: "yielding an execute and a wait early; the cell keeps running",
    source: "SPEC §12.3 30",
    run: async (ctx) => {
      const s = await ctx.open();
      const e = s.exec(`text("one"); notify("ready"); ${FOREVER}`, { yieldTimeMs: 60_000 });
      await e.started;
      await s.notifications.arrived("ready");
      ctx.rec("yield execute", await e.yieldNow());
      ctx.rec("execute", await e.outcome);
      const w = s.wait("1", { yieldTimeMs: 60_000 });
      ctx.rec("yield wait", await w.yieldNow());
      ctx.rec("wait", await w.result);
      ctx.rec("terminate", await s.terminate("1"));
    },
  },
  {
    name: "terminating a spinning cell",
    source: "SPEC §12.3 31",
    run: async (ctx) => {
      const s = await ctx.open();
      ctx.rec("execute", (await foreverCell(s, SPIN)).outcome);
      ctx.rec("terminate", await s.terminate("1"));
      ctx.rec("next cell", await s.exec("text(1)").outcome);
    },
  },
  {
    name: "a cell that completed unobserved: terminate returns its completion and its values commit",
    source: "SPEC §12.3 32",
    run: async (ctx) => {
      const s = await ctx.open();
      const e = s.exec(
        'yield_control(); await tools.echo({}); store("k", 1); text("done"); notify("finished")',
        {
          yieldTimeMs: 60_000,
          ...echoTools,
        },
      );
      ctx.rec("execute", await e.outcome);
      const call = await s.toolCall();
      await call.succeed({});
      await s.notifications.arrived("finished");
      // The notification comes just before the cell ends; nothing tells when its completion is committed.
      await pause(1000);
      ctx.rec("terminate", await s.terminate("1"));
      ctx.rec("next cell", await s.exec('text(String(load("k")))').outcome);
    },
  },
  {
    name: "terminating a cell blocked in a tool call: its values do not commit, the call is cancelled",
    source: "SPEC §12.3 34",
    run: async (ctx) => {
      const s = await ctx.open();
      const e = s.exec('store("k", 1); await tools.echo({})', { yieldTimeMs: 60_000, ...echoTools });
      const call = await s.toolCall();
      ctx.rec("tool call", {
        name: call.name,
        input: call.input,
        cell: call.cell,
        runtimeId: call.runtimeId,
      });
      ctx.rec("terminate", await s.terminate("1"));
      ctx.rec("execute", await e.outcome);
      ctx.rec("late answer", await call.succeed({ late: true }));
      ctx.rec("next cell", await s.exec('text(String(load("k")))').outcome);
    },
  },
  {
    name: "terminate while the execute still observes: both get the same terminated outcome",
    source: "SPEC §12.3 35",
    run: async (ctx) => {
      const s = await ctx.open();
      const e = s.exec(`text("x"); notify("ready"); ${FOREVER}`, { yieldTimeMs: 60_000 });
      await s.notifications.arrived("ready");
      ctx.rec("terminate", await s.terminate("1"));
      ctx.rec("execute", await e.outcome);
    },
  },
  {
    name: "abandoning an execute after started closes its cell",
    source: "SPEC §12.3 36",
    run: async (ctx) => {
      const s = await ctx.open();
      const e = s.exec(FOREVER, { yieldTimeMs: 60_000 });
      ctx.rec("started", await e.started);
      await e.cancel();
      // A host answers a cancellation at once or not at all (the reference's V1 sends nothing).
      ctx.rec("execute", await ctx.within(e.outcome, 3000));
      ctx.rec("cell closed", await ctx.within(s.cellClosed("1").then(() => "closed"), 3000));
      ctx.rec("wait", await s.wait("1", { yieldTimeMs: 1 }).result);
      ctx.rec("next cell", await s.exec("text(2)").outcome);
    },
  },
  {
    name: "terminating a cell stuck in an image() getter; other sessions are unaffected",
    source: "SPEC §12.3 39",
    run: async (ctx) => {
      const other = await ctx.open();
      ctx.rec("other store", await other.exec('store("k", "kept")').outcome);
      const s = await ctx.open();
      const e = s.exec(
        'image({ get image_url() { notify("started"); while (true) {} } })',
        { yieldTimeMs: 60_000 },
      );
      await s.notifications.arrived("started");
      ctx.rec("terminate", await s.terminate("1"));
      ctx.rec("execute", await e.outcome);
      ctx.rec("other load", await other.exec('text(load("k"))').outcome);
      ctx.rec("next cell", await s.exec("text(1)").outcome);
    },
  },
  {
    name: "terminating a spinning cell while another cell of the session waits on a tool",
    source: "SPEC §12.3 39a; deliberate: spinning-cell-restart",
    deliberate: {
      id: "spinning-cell-restart",
      check(kind, observation) {
        const blocked = JSON.stringify(step(observation, "blocked cell"));
        const restarted = "exec runtime ended unexpectedly: the session runtime was restarted to stop cell 3";
        if (kind === "reference") {
          assert.match(blocked, /"text":\s*"unblocked"/, "the reference stops the spinning cell only");
          assert.ok(!blocked.includes(restarted));
        } else if (!/"text":\s*"unblocked"/.test(blocked)) {
          assert.ok(blocked.includes(`"Script error:\\n${restarted}"`), "this host restarts the runtime");
        }
        // Else this host stopped the cell without a restart, as the reference does. Seen twice in three
        // fresh-clone CI runs on 2026-12-03 (never in 41 runs of this scenario alone under load): the
        // first with the cell not yet begun, the second not explained. Everything else is still
        // compared (`rest`).
      },
      // The rest is the same: the terminated cell, the answer, the stored value the next cell reads. The
      // session's log differs only by the blocked cell's cancelled tool call.
      rest: (observation) =>
        mapStep(mapStep(observation, "blocked cell", () => undefined), "session 1 log", () => undefined),
    },
    run: async (ctx) => {
      const s = await ctx.open();
      ctx.rec("store", await s.exec('store("k", "kept")').outcome);
      const blocked = s.exec('await tools.echo({}); text("unblocked")', {
        yieldTimeMs: 60_000,
        ...echoTools,
      });
      const call = await s.toolCall();
      // Terminated once it spins: a stop that comes before its code begins (its Worker still
      // booting, on a loaded machine), or while its thread is still inside `notify` (the helper
      // then throws), ends it without a restart on this host too. Hence the notification, and a
      // pause after it.
      ctx.rec("spinning", (await foreverCell(s, `notify("spinning"); ${SPIN}`)).outcome);
      await s.notifications.arrived("spinning");
      await pause(200);
      ctx.rec("terminate spinning", await s.terminate("3"));
      ctx.rec("answer", await call.succeed({}));
      ctx.rec("blocked cell", await blocked.outcome);
      ctx.rec("next cell", await s.exec('text(load("k"))').outcome);
    },
  },
  {
    name: "a wait of 2^32 ms is not a zero yield",
    source: "SPEC §12.3 39c",
    run: async (ctx) => {
      const s = await ctx.open();
      await foreverCell(s);
      const w = s.wait("1", { yieldTimeMs: 2 ** 32 });
      const early = await ctx.within(w.result.then(() => "answered"), 1000);
      ctx.rec("within 1 s", early === "answered" ? "answered" : "pending");
      await w.yieldNow();
      ctx.rec("wait", await w.result);
      ctx.rec("terminate", await s.terminate("1"));
    },
  },
  // §12.5 JavaScript environment
  cells("console is not a global", "SPEC §12.5 54", ['text(Object.hasOwn(globalThis, "console"))']),
  cells("host globals are undefined", "SPEC §12.5 55", [
    'text(["Deno", "fetch", "WebSocket", "Worker", "Atomics", "SharedArrayBuffer", "WebAssembly", "postMessage", ' +
    '"self", "navigator"].map((n) => n + ":" + typeof globalThis[n]).join(","))',
  ]),
  cells("helpers return undefined", "SPEC §12.5 56", [
    'text([text("first"), image("data:image/png;base64,AAA"), notify("n")].map(v => v === undefined))',
  ]),
  cells("text() renders values", "SPEC §12.5 57", [
    "text()",
    "text(null)",
    "text(1e21)",
    "text({a: 1})",
    'text([1, "x"])',
  ]),
  cells("text() of a circular value throws a string", "SPEC §12.5 58", [
    "const o = {}; o.self = o; try { text(o) } catch (e) { text(typeof e); text(String(e)) }",
  ]),
  cells("image() details", "SPEC §12.5 59", [
    'image("data:image/png;base64,AAA")',
    'image("data:image/png;base64,AAA", "LOW")',
    'image({image_url: "data:image/png;base64,AAA", detail: "high"}, "original")',
  ]),
  cells("image() of an MCP image block", "SPEC §12.5 60", [
    'image({type: "image", data: "AAA", mimeType: "image/png", _meta: {"codex/imageDetail": "original"}})',
    'image({type: "image", data: "AAA", mimeType: "image/png", _meta: {"codex/imageDetail": "original"}}, "low")',
  ]),
  cells("remote image URLs are refused", "SPEC §12.5 61", [
    'image("https://example.com/a.png")',
    'generatedImage({image_url: "http://x/y.png"})',
  ]),
  cells("image() detail must be known", "SPEC §12.5 62", ['image("data:image/png;base64,AAA", "medium")']),
  cells("image() of a content list is refused", "SPEC §12.5 63", [
    'image({content: [{type: "image", data: "AAA", mimeType: "image/png"}]})',
  ]),
  cells("generatedImage() with an output hint", "SPEC §12.5 64", [
    'generatedImage({image_url: "data:image/png;base64,AAA", output_hint: "generated image save hint"})',
  ]),
  cells("store() and load() semantics", "SPEC §12.5 65", [
    'store(1, "a"); text(load("1"))',
    'store("k", undefined)',
    'store("o", {a: 1}); const v = load("o"); v.a = 2; text(String(load("o").a))',
  ]),
  cells("notify() needs text", "SPEC §12.5 66", ['notify("   ")']),
  cells("exit() ends the cell", "SPEC §12.5 67, 68", [
    'text("before"); exit(); text("after");',
    `setTimeout(() => exit(), 0); ${FOREVER}`,
  ]),
  cells("setTimeout() and clearTimeout() arguments", "SPEC §12.5 69", [
    'setTimeout("x")',
    "clearTimeout(Symbol())",
    'clearTimeout(); clearTimeout(-1); text("ok")',
  ]),
  cells("a timer after completion does not print", "SPEC §12.5 70", [
    'setTimeout(() => text("late"), 50); text("now")',
  ]),
  cells("an exception in a timer fails the cell", "SPEC §12.5 71", [
    `setTimeout(() => { throw new Error("tick") }, 0); ${FOREVER}`,
  ]),
  cells("imports are refused", "SPEC §12.5 72, 80c, 80e", [
    'import fs from "node:fs";',
    'try { await import("./x.js") } catch (e) { text(e) }',
    "try { await eval('import(\"node:fs\")') } catch (e) { text(e) }",
    "try { await Function('return import(\"node:fs\")')() } catch (e) { text(e) }",
    'import a from "x"; import b from "y";',
    'export { c } from "z";',
  ]),
  cells(
    "TypeScript cells",
    "SPEC §12.5 73, 80e, 80f",
    [
      'const n: number = 2; interface P { a: string }; const p = { a: "x" } as P; text(n + p.a)',
      'import type { T } from "npm:t"; const v: T = 1;',
      'text("once"); const n: number = 1; text(String(n))',
    ],
    { deliberate: { id: "typescript-cells", check: typescriptCheck(["cell 1", "cell 3"]) } },
  ),
  cells("syntax errors", "SPEC §12.5 74, 80d, 80f", [
    "text(1",
    "export const x = 1;",
    "text(typeof import.meta)",
    'text("once"); const x: = 1;',
  ]),
  cells("thrown values become the error text", "SPEC §12.5 75", [
    'throw "plain failure"',
    'throw new Error("boom")',
  ]),
  cells("an unhandled rejection does not fail the cell", "SPEC §12.5 76", [
    'Promise.reject("ignored"); text("ok")',
  ]),
  cells("Intl formats in French", "SPEC §12.5 77", [
    'text(new Intl.DateTimeFormat("fr-FR", { timeZone: "UTC", weekday: "long", day: "numeric", month: "long", ' +
    'hour: "2-digit", minute: "2-digit", second: "2-digit" }).format(new Date(Date.UTC(2025, 0, 2, 3, 4, 5))))',
  ]),
  cells("each cell has fresh globals", "SPEC §12.5 78", ["globalThis.leak = 1", "text(typeof leak)"]),
  cells("helpers do not use the cell's JSON", "SPEC §12.5 79", [
    'JSON.stringify = () => "x"; text({a: 1}); store("k", {a: 1})',
    'text(load("k").a)',
  ]),
  cells("ALL_TOOLS and the tools object", "SPEC §12.5 80", [{
    source: "text(JSON.stringify(ALL_TOOLS.map(t => t.name))); text(typeof tools.hidden_dynamic_tool); " +
      "text(JSON.stringify(ALL_TOOLS))",
    tools: [{ name: "hidden_dynamic_tool", toolName: "hidden-dynamic-tool", description: "Hidden." }, {
      name: "echo",
      description: "Echo.",
    }],
  }]),
  cells("no way out of the cell's realm", "SPEC §12.5 80a", [{
    source: 'text(text.constructor("return typeof process")()); ' +
      'text(globalThis.constructor.constructor("return typeof Deno")()); ' +
      "text(Object.getPrototypeOf(text) === Function.prototype); " +
      "text((await tools.echo({})).constructor === Object)",
    ...echoTools,
    answer: () => ({}),
  }]),
  cells("stack frames name exec_main.mjs", "SPEC §12.5 80b", [
    "try { null.x } catch (e) { text(e.stack) }",
    "text(new Error('x').stack)",
    "function f(){ throw new RangeError('deep') } function g(){ f() } g()",
  ]),
  cells("image() reads an MCP block's fields once, in order", "SPEC §12.5 80g", [
    'const seen = []; const o = { get image_url() { seen.push("image_url"); return undefined }, ' +
    'get type() { seen.push("type"); return "image" }, get data() { seen.push("data"); return "AAA" }, ' +
    'get mimeType() { seen.push("mimeType"); return "image/png" }, get mime_type() { seen.push("mime_type"); ' +
    'return undefined }, get _meta() { seen.push("_meta"); return undefined } }; image(o); text(seen.join(","))',
    'const o = { type: "image", get data() { throw new Error("nope") }, mimeType: "image/png" }; ' +
    "try { image(o) } catch (e) { text(e.message) }",
  ]),
  cells("one large array in a session with a 16 MiB cell heap", "SPEC §5.6", [
    "const a = new Array(1e7).fill(1.5); text(a.length)",
    "text(2)",
  ], {
    session: { maxHeapSizeBytes: 16 * 1024 * 1024 },
    // The reference does not apply max_heap_size_bytes (docs/codex-0.171-wire.md): its cell completes.
    deliberate: {
      id: "cell-heap-limit",
      check(kind, observation) {
        const first = JSON.stringify(step(observation, "cell 1"));
        if (kind === "reference") assert.match(first, /"10000000"/);
        else assert.match(first, /exec runtime ended unexpectedly: cell heap limit of 16 MiB reached/);
      },
      // The next cell of the same session runs on both.
      rest: (observation) =>
        mapStep(mapStep(observation, "cell 1", () => undefined), "session 1 log", () => undefined),
    },
  }),
  cells("removed globals are absent", "SPEC §12.5 80h", [
    'const names = ["Deno", "process", "Buffer", "require", "global", "setImmediate", "fetch", "WebSocket", ' +
    '"Worker", "console", "Atomics", "SharedArrayBuffer", "WebAssembly", "self", "postMessage", "onmessage", ' +
    '"close", "addEventListener", "removeEventListener", "dispatchEvent", "navigator", "location", "performance", ' +
    '"crypto", "setInterval", "clearInterval", "queueMicrotask", "structuredClone", "TextEncoder", "TextDecoder", ' +
    '"URL", "atob", "btoa", "Blob", "Request", "Response", "Headers", "EventTarget", "Event"]; ' +
    'text(names.filter((n) => Object.hasOwn(globalThis, n) || n in globalThis || typeof globalThis[n] !== "undefined")' +
    '.join(",")); Promise.reject("x"); text("after")',
  ]),
  // §12.6 Stored values
  cells("stored values persist across cells", "SPEC §12.6 81", [
    'store("key", "visible")',
    'text(load("key"))',
  ]),
  cells("a failed cell still commits its values", "SPEC §12.6 82", [
    'store("k", "v"); throw new Error("boom")',
    'text(load("k"))',
  ]),
  {
    name: "concurrent cells: the last committer wins",
    source: "SPEC §12.6 83",
    run: async (ctx) => {
      const s = await ctx.open();
      const a = s.exec('store("k", "a"); await tools.echo({}); text(load("k"))', {
        yieldTimeMs: 60_000,
        ...echoTools,
      });
      const call = await s.toolCall();
      ctx.rec("B", await s.exec('store("k", "b"); text(load("k"))').outcome);
      await call.succeed({});
      ctx.rec("A", await a.outcome);
      ctx.rec("after both", await s.exec('text(load("k"))').outcome);
    },
  },
  // §12.7 Tool calls and notifications
  {
    name: "a tool call and a notification",
    source: "SPEC §12.7 84",
    run: async (ctx) => {
      const s = await ctx.open();
      ctx.rec("cell 1", await s.exec('store("key", "persisted")').outcome);
      const e = s.exec(
        'const r = await tools.echo({value: String(load("key"))}); notify("notice"); text(r.value)',
        { toolCallId: "call-2", ...echoTools },
      );
      const call = await s.toolCall();
      ctx.rec("tool call", {
        cell: call.cell,
        runtimeId: call.runtimeId,
        name: call.name,
        namespace: call.namespace ?? null,
        kind: call.kind,
        input: call.input,
      });
      ctx.rec("answer", await call.succeed({ value: "output" }));
      ctx.rec("cell 2", await e.outcome);
      await s.cellClosed("2");
      ctx.rec("notifications", s.notifications.slice());
    },
  },
  {
    name: "a tool that fails",
    source: "SPEC §12.7 90",
    run: async (ctx) => {
      const s = await ctx.open();
      const e = s.exec(
        "try { await tools.echo({}) } catch (e) { text(String(e)); text(typeof e) }",
        echoTools,
      );
      const call = await s.toolCall();
      ctx.rec("answer", await call.fail("the tool broke"));
      ctx.rec("cell", await e.outcome);
      const e2 = s.exec("await tools.echo({})", echoTools);
      await (await s.toolCall()).fail("uncaught tool failure");
      ctx.rec("uncaught", await e2.outcome);
    },
  },
  {
    name: "tool calls without input, with a freeform tool, and with a namespace",
    source: "SPEC §7.1, §7.3",
    run: async (ctx) => {
      const s = await ctx.open();
      const e = s.exec(
        'text(JSON.stringify(await tools.echo())); text(JSON.stringify(await tools.patch("raw text"))); ' +
          "text(JSON.stringify(await tools.ns__fn({a: [1, 2]})))",
        {
          tools: [ECHO, { name: "patch", kind: "freeform" }, {
            name: "ns__fn",
            toolName: "fn",
            namespace: "ns",
          }],
        },
      );
      for (const label of ["no input", "freeform", "namespaced"]) {
        const call = await s.toolCall();
        ctx.rec(label, {
          name: call.name,
          namespace: call.namespace ?? null,
          kind: call.kind,
          input: call.input ?? null,
        });
        await call.succeed({ label });
      }
      ctx.rec("cell", await e.outcome);
    },
  },
  {
    name: "parallel tool calls; a call left pending is cancelled when the cell completes",
    source: "SPEC §12.7 91",
    run: async (ctx) => {
      const s = await ctx.open();
      const e = s.exec(
        'text("hello world"); yield_control(); await Promise.all([tools.a(), tools.b()]); text("hello"); ' +
          "tools.slow(); await tools.barrier()",
        { yieldTimeMs: 60_000, tools: [{ name: "a" }, { name: "b" }, { name: "slow" }, { name: "barrier" }] },
      );
      ctx.rec("execute", await e.outcome);
      const a = await s.toolCall();
      const b = await s.toolCall();
      ctx.rec("parallel", [a.name, b.name]);
      await a.succeed(null);
      await b.succeed(null);
      const slow = await s.toolCall();
      const barrier = await s.toolCall();
      ctx.rec("then", [slow.name, barrier.name]);
      await barrier.succeed(null);
      ctx.rec("wait", await s.wait("1").result);
      await s.cellClosed("1");
      ctx.rec("late answer to slow", await slow.succeed(null));
    },
  },
  {
    name: "a slow tool call does not hold back another cell",
    source: "SPEC §12.7 93",
    run: async (ctx) => {
      const s = await ctx.open();
      const slow = s.exec("const r = await tools.large(); text(String(r.length))", {
        yieldTimeMs: 60_000,
        tools: [{ name: "large" }],
      });
      const large = await s.toolCall();
      const fast = s.exec('await tools.fast(); text("isolated")', { tools: [{ name: "fast" }] });
      await (await s.toolCall()).succeed(null);
      ctx.rec("fast", await fast.outcome);
      await large.succeed("x".repeat(8 * 1024 * 1024));
      ctx.rec("slow", await slow.outcome);
    },
  },
  {
    name: "a notification comes before the cell closes",
    source: "SPEC §12.7 94",
    run: async (ctx) => {
      const s = await ctx.open();
      ctx.rec("execute", await s.exec('notify("notice"); text("done")').outcome);
      await s.cellClosed("1");
    },
  },
  cells("a long notification arrives whole", "SPEC §12.7 95", ['notify("🦀".repeat(512)); text("sent")']),
  cells("notify() of a non-string", "battery: notify-obj", ["notify({a: 1}); text('ok')", "notify('')"]),
  // §12.8 Output
  cells("Client mode returns text untruncated", "SPEC §12.8 98", [
    { source: "text('x'.repeat(2 * 1024 * 1024))", maxOutputTokens: 5 },
  ], { session: { truncation: "client" } }),
  cells("Server mode: one large text item stays one item", "SPEC §12.8 99", [
    { source: "text('y'.repeat(614400))", maxOutputTokens: 1_000_000 },
  ]),
  cells("Server mode: a second 10 MiB image is dropped with a notice", "SPEC §12.8 100", [
    {
      source: 'const img = "data:image/png;base64," + "A".repeat(10 * 1024 * 1024); image(img); image(img)',
      maxOutputTokens: 1_000_000,
    },
  ]),
  cells("Server mode: the middle of three large texts is dropped with a notice", "SPEC §12.8 101", [
    {
      source: 'text("a".repeat(600*1024)); text("b".repeat(600*1024)); text("c".repeat(600*1024))',
      maxOutputTokens: 1_000_000,
    },
  ]),
  cells("Server mode caps the error text; Client mode does not", "SPEC §12.8 102", [
    "throw 'e'.repeat(50000) + 'f'.repeat(50000)",
  ]),
  cells("Client mode: a 100,000-byte error text is whole", "SPEC §12.8 102", [
    "throw 'e'.repeat(50000) + 'f'.repeat(50000)",
  ], { session: { truncation: "client" } }),
  cells("Server mode: a 65 MiB error text is capped", "SPEC §12.8 97", [
    {
      source: "throw 'begin:' + 'X'.repeat(65 * 1024 * 1024) + ':end'",
      maxOutputTokens: 5,
      yieldTimeMs: 60_000,
    },
  ]),
  {
    name: "Client mode: an outcome over 64 MiB",
    source: "SPEC §12.8 104, 104a",
    run: async (ctx) => {
      const s = await ctx.open({ truncation: "client" });
      const e = s.exec('text("x".repeat(70 * 1024 * 1024)); text("after")', { yieldTimeMs: 60_000 });
      ctx.rec("execute", await e.outcome);
      ctx.rec("wait", await s.wait("1", { yieldTimeMs: 1000 }).result);
      ctx.rec("wait again", await s.wait("1", { yieldTimeMs: 1 }).result);
      ctx.rec("next cell", await s.exec("text(1)").outcome);
    },
  },
  cells("Server mode truncates to max_output_tokens", "CODEX-0.171: truncation grouping", [
    { source: "for (let i = 0; i < 50; i++) text('line ' + i)", maxOutputTokens: 30 },
    { source: "text('x'.repeat(100000))", maxOutputTokens: 100 },
    {
      source: "text('a'.repeat(400)); text('b'.repeat(400)); image('data:image/png;base64,AAAA'); text('c')",
      maxOutputTokens: 50,
    },
  ]),
  cells("Server mode without max_output_tokens", "CODEX-0.171: truncation grouping", [
    "text('z'.repeat(60000)); text('tail')",
  ]),
  {
    name: "wait max_tokens truncates the wait's output",
    source: "CODEX-0.171: wait max_tokens",
    run: async (ctx) => {
      const s = await ctx.open();
      ctx.rec(
        "execute",
        await s.exec(
          `text("first"); yield_control(); text("x".repeat(2000)); text("last"); notify("printed"); ${FOREVER}`,
          { yieldTimeMs: 60_000 },
        ).outcome,
      );
      await s.notifications.arrived("printed");
      ctx.rec("wait max_tokens 20", await s.wait("1", { yieldTimeMs: 100, maxTokens: 20 }).result);
      ctx.rec("terminate", await s.terminate("1"));
    },
  },
  {
    name: "catalog revision: tools sent once are callable in later cells",
    source: "CODEX-0.171: ExecuteRequest.catalog_revision",
    run: async (ctx) => {
      const s = await ctx.open();
      const first = s.exec("text(typeof tools.echo); text(ALL_TOOLS.length)", {
        catalogRevision: 1,
        ...echoTools,
      });
      ctx.rec("revision 1 with tools", await first.outcome);
      const second = s.exec("text(typeof tools.echo); text(JSON.stringify(await tools.echo({n: 1})))", {
        catalogRevision: 1,
        tools: [],
      });
      const next = await s.toolCallUntil(second.outcome);
      if (next) await next.succeed({ ok: 1 });
      ctx.rec("revision 1 without tools", await second.outcome);
      ctx.rec(
        "revision 2 without tools",
        await s.exec("text(typeof tools.echo)", { catalogRevision: 2 }).outcome,
      );
    },
  },
];

/** A scenario on a host of its own: the first cell of a fresh host shows its output within 1 s. */
export const FIRST_CELL: Scenario = {
  name: "the first cell of a new host prints before a 1 s yield",
  source: "CODEX-0.171: first-cell timing",
  run: async (ctx) => {
    const host = await ctx.startHost();
    const s = await ctx.open({}, host);
    ctx.rec("first cell", await s.exec(`text("first"); ${FOREVER}`, { yieldTimeMs: 1000 }).outcome);
    ctx.rec("terminate", await s.terminate("1"));
  },
};

const TOSTRING_THROWS = "throw { toString() { throw new Error('nope') } }";

/**
 * A thrown value whose `toString` throws: the reference's V8 prints `exec_main.mjs:N: Uncaught …` on
 * the host's stdout, which is the transport on stdio; over TCP the outcomes compare as usual.
 */
export const TOSTRING_THROWS_STDIO: Scenario = {
  name: "a thrown value whose toString throws, over stdio",
  source: "battery cells/errors: throw-object-tostring-throws",
  transports: ["grpc-stdio", "v1"],
  deliberate: {
    id: "stdout-clean",
    check(kind, observation) {
      const broken = step(observation, "connection lost");
      if (kind === "reference") {
        assert.equal(broken, true, "the reference's stdout stopped being the protocol");
      } else {
        assert.equal(broken, false, "this host's stdout carries only the protocol");
        assert.match(JSON.stringify(step(observation, "next cell")), /"text":\s*"1"/);
      }
    },
  },
  run: async (ctx) => {
    const host = await ctx.startHost();
    const s = await ctx.open({}, host);
    ctx.rec("cell", await ctx.within(s.exec(TOSTRING_THROWS).outcome, 5000));
    ctx.rec("next cell", await ctx.within(s.exec("text(1)").outcome, 5000));
    ctx.rec("connection lost", host.broken);
  },
};

export const TOSTRING_THROWS_TCP: Scenario = {
  name: "a thrown value whose toString throws",
  source: "battery cells/errors: throw-object-tostring-throws",
  transports: ["grpc-tcp"],
  run: async (ctx) => {
    const s = await ctx.open();
    ctx.rec("cell", await s.exec(TOSTRING_THROWS).outcome);
    ctx.rec("next cell", await s.exec("text(1)").outcome);
  },
};

/** A cell over its heap limit: the reference host dies, ours fails only that cell. */
export const HEAP_LIMIT: Scenario = {
  name: "a cell over its heap limit",
  source: "SPEC §12.2 19",
  // The reference takes seconds to die of it; once, on Codex's default transport, is enough.
  transports: ["grpc-stdio"],
  deliberate: {
    id: "cell-heap-limit",
    check(kind, observation) {
      const text = JSON.stringify(step(observation, "cell"));
      const after = JSON.stringify(step(observation, "other session"));
      if (kind === "reference") {
        assert.equal(step(observation, "host exited"), true, "the reference host died");
        assert.doesNotMatch(after, /"text":\s*"1"/, "the reference's other session died with it");
      } else {
        assert.match(text, /exec runtime ended unexpectedly: cell heap limit of 16 MiB reached/);
        assert.match(after, /"text":\s*"1"/);
        assert.equal(step(observation, "host exited"), false);
      }
    },
  },
  run: async (ctx) => {
    const host = await ctx.startHost();
    const other = await ctx.open({}, host);
    const s = await ctx.open({ maxHeapSizeBytes: 16 * 1024 * 1024 }, host);
    ctx.rec("cell", await s.exec("const a = []; while (true) a.push(new Array(1e5).fill(a.length))").outcome);
    ctx.rec("other session", await other.exec("text(1)").outcome);
    const exited = await ctx.within(host.status.then(() => true), 500);
    ctx.rec("host exited", exited === true);
  },
};

/** For runCells users elsewhere. */
export { runCells };

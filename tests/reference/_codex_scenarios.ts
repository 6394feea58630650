/**
 * The conversations of the real-Codex end-to-end test (`codex_e2e.ts`): what a model in Codex's code
 * mode writes, one scenario per behaviour, each with the patterns the reference's outputs must show
 * (so that a scenario tests what it claims). Folder-private.
 *
 * - Items are the model's answers in order; an array of items is one answer with parallel tool calls
 *   (Codex sends `parallel_tool_calls: true`).
 * - Timing: a cell that must yield does so with `yield_control()` or with a yield far shorter than its
 *   work; waits and sleeps leave the model's round trip (milliseconds) a wide margin. The first cell of
 *   this host's runtime takes up to 1.5 s to start, so no scenario depends on a short first yield.
 * - `features` adds lines to Codex's `[features]`: with `code_mode_host_output_truncation = false`
 *   Codex asks its host for Client-mode outcomes and truncates them itself.
 * - `deliberate` names a difference of `deliberate_differences.ts` the scenario shows: its check gets
 *   both sides and asserts that they differ exactly as the table says.
 *
 * @module
 */
import assert from "node:assert/strict";
import { execCall, type ModelStep, waitCall } from "./_fake_model.ts";
import type { SeenOutput } from "./_normalise.ts";

/** A 1×1 PNG. */
export const PNG =
  "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
const PNG_BASE64 = PNG.slice(PNG.indexOf(",") + 1);

/** 50 ms of silence as a WAV (8 kHz, 8-bit mono): Codex omits clips shorter than 25 ms. */
export const WAV = (() => {
  const samples = 400;
  const bytes = new Uint8Array(44 + samples).fill(0x80);
  const view = new DataView(bytes.buffer);
  const ascii = (at: number, text: string) => [...text].forEach((c, i) => bytes[at + i] = c.charCodeAt(0));
  ascii(0, "RIFF");
  view.setUint32(4, 36 + samples, true);
  ascii(8, "WAVEfmt ");
  view.setUint32(16, 16, true); // the fmt chunk's size
  view.setUint16(20, 1, true); // PCM
  view.setUint16(22, 1, true); // mono
  view.setUint32(24, 8000, true); // samples per second
  view.setUint32(28, 8000, true); // bytes per second
  view.setUint16(32, 1, true); // block align
  view.setUint16(34, 8, true); // bits per sample
  ascii(36, "data");
  view.setUint32(40, samples, true);
  return `data:audio/wav;base64,${btoa(String.fromCharCode(...bytes))}`;
})();

/** A deliberate difference a scenario shows; `check` throws unless the two sides differ as listed. */
export interface E2eDeliberate {
  readonly id: string;
  check(reference: readonly SeenOutput[], ours: readonly SeenOutput[]): void;
}

/** One conversation: the model's answers in order, and what the reference's result must show. */
export interface Scenario {
  readonly name: string;
  readonly items: readonly ModelStep[];
  /** Each must match the JSON of the reference's outputs: the scenario tests what it claims. */
  readonly expect: readonly RegExp[];
  readonly deliberate?: E2eDeliberate;
  /** Lines for Codex's `[features]` table (e.g. `code_mode_host_output_truncation = false`). */
  readonly features?: string;
}

const sleep = (ms: number) => `await new Promise((r) => setTimeout(r, ${ms}))`;
const J = JSON.stringify;

/** The scenarios: the first twenty of issue 25, then one per behaviour a model meets in code mode. */
export const SCENARIOS: readonly Scenario[] = [
  {
    name: "text",
    items: [execCall("call-1", `text("hello"); text(42); text({ a: [1, "two"] }); text(null); text(true)`)],
    expect: [/hello/, /\{\\"a\\":\[1,\\"two\\"\]\}/],
  },
  {
    name: "store-load",
    items: [
      execCall("call-1", `store("k", { n: 41, list: [1, 2] }); text("stored")`),
      execCall("call-2", `const v = load("k"); text(v.n + 1); text(v.list); text(String(load("missing")))`),
    ],
    expect: [/stored/, /"42"/, /\[1,2\]/],
  },
  {
    name: "throw",
    items: [execCall("call-1", `text("before"); throw new Error("boom")`)],
    expect: [/Script failed/, /boom/],
  },
  {
    name: "syntax-error",
    items: [execCall("call-1", `text("x"`)],
    expect: [/Script failed|SyntaxError/],
  },
  {
    name: "yield-wait",
    items: [
      execCall(
        "call-1",
        `// @exec: {"yield_time_ms": 500}\ntext("first"); await new Promise((r) => setTimeout(r, 1500)); text("second")`,
      ),
      waitCall("call-2", { cell_id: "1", yield_time_ms: 10000 }),
    ],
    expect: [/Script running with cell ID 1/, /first/, /second/, /Script completed/],
  },
  {
    name: "yield-control",
    items: [
      execCall(
        "call-1",
        `text("a"); yield_control(); await new Promise((r) => setTimeout(r, 800)); text("b")`,
      ),
      waitCall("call-2", { cell_id: "1", yield_time_ms: 10000 }),
    ],
    expect: [/Script running with cell ID 1/, /"a"/, /"b"/],
  },
  {
    name: "timers",
    items: [
      execCall(
        "call-1",
        `setTimeout(() => text("never"), 5000); const id = setTimeout(() => text("cleared"), 10); clearTimeout(id);
await new Promise((r) => setTimeout(() => { text("fired"); r(); }, 50)); text("end")`,
      ),
      execCall("call-2", `text("next cell")`),
    ],
    expect: [/fired/, /next cell/],
  },
  {
    name: "wait-terminate",
    items: [
      execCall("call-1", `// @exec: {"yield_time_ms": 1000}\ntext("pending"); await new Promise(() => {})`),
      waitCall("call-2", { cell_id: "1", terminate: true }),
      execCall("call-3", `// @exec: {"yield_time_ms": 300}\nwhile (true) {}`),
      waitCall("call-4", { cell_id: "2", terminate: true }),
      execCall("call-5", `text("alive")`),
    ],
    expect: [/pending/, /Script terminated/, /alive/],
  },
  {
    name: "image",
    items: [
      execCall("call-1", `image(${J(PNG)}); text("between"); image({ image_url: ${J(PNG)} })`),
    ],
    expect: [/input_image/],
  },
  {
    name: "truncation-pragma",
    items: [
      execCall(
        "call-1",
        `// @exec: {"max_output_tokens": 30}\nfor (let i = 0; i < 40; i++) text("line " + i)`,
      ),
      execCall("call-2", `// @exec: {"max_output_tokens": 20}\ntext("x".repeat(2000)); text("last")`),
    ],
    expect: [/truncated/],
  },
  {
    name: "truncation-wait",
    items: [
      execCall(
        "call-1",
        `// @exec: {"yield_time_ms": 300}\nawait new Promise((r) => setTimeout(r, 1000)); for (let i = 0; i < 40; i++) text("line " + i)`,
      ),
      waitCall("call-2", { cell_id: "1", yield_time_ms: 10000, max_tokens: 30 }),
    ],
    expect: [/truncated/],
  },
  {
    name: "notify",
    items: [execCall("call-1", `notify("note-1"); text("after"); notify({ k: 1 })`)],
    expect: [/note-1/, /after/],
  },
  {
    name: "exec-command",
    items: [
      execCall("call-1", `const r = await tools.exec_command({ cmd: "echo hi" }); text(typeof r); text(r)`),
    ],
    expect: [/hi\\\\n/],
  },
  {
    name: "all-tools",
    items: [execCall("call-1", `text(ALL_TOOLS.map((t) => t.name).join(","))`)],
    expect: [/exec_command/],
  },
  {
    name: "exit",
    items: [execCall("call-1", `text("a"); exit(); text("b")`)],
    expect: [/Script completed/],
  },
  {
    name: "audio",
    items: [execCall("call-1", `audio(${J(WAV)}); audio({ audio_url: ${J(WAV)} })`)],
    expect: [/input_audio|audio/],
  },
  {
    name: "generated-image",
    items: [execCall("call-1", `generatedImage({ image_url: ${J(PNG)}, output_hint: "a dot" })`)],
    expect: [/Script (completed|failed)/],
  },
  {
    name: "import",
    items: [
      execCall("call-1", `await import("node:fs")`),
      execCall("call-2", `import fs from "node:fs";\ntext("static")`),
    ],
    expect: [/import/],
  },
  {
    name: "store-function",
    items: [
      execCall("call-1", `store("f", () => 1)`),
      execCall("call-2", `store("s", Symbol("s"))`),
      execCall("call-3", `text(String(load("f")))`),
    ],
    expect: [/Script failed/],
  },
  {
    name: "text-symbol",
    items: [execCall("call-1", `text(Symbol("s")); text(() => 1); text(undefined); text("end")`)],
    expect: [/end/],
  },

  // ---- Values a model prints ----
  {
    name: "text-values",
    items: [
      execCall(
        "call-1",
        `text({ a: 1, b: [true, null], c: { d: "e" } });
text([1, "two", [3, [4]]]);
text(3.14); text(-0); text(NaN); text(Infinity); text(1e21); text(2 ** 53);
text(new Date(0)); text(new Map([[1, 2]])); text(new Set([1])); text(/re/g);
text({ toJSON() { return "custom"; } });
text("multi\\nline\\ttab"); text("");
text([undefined, () => 1]); text({ skip: undefined, keep: 1 });`,
      ),
    ],
    expect: [/\\"c\\":\{\\"d\\":\\"e\\"\}/, /1970-01-01/, /custom/, /multi\\nline/],
  },
  {
    name: "text-unserializable",
    items: [
      execCall("call-1", `text("before"); text(10n)`),
      execCall("call-2", `const o = { name: "loop" }; o.self = o; text(o)`),
      execCall("call-3", `text({ toJSON() { throw new Error("toJSON failed"); } })`),
    ],
    expect: [/before/, /"10"/, /circular structure/, /toJSON failed/],
  },

  // ---- Stored values across calls ----
  {
    name: "store-load-three-calls",
    items: [
      execCall(
        "call-1",
        `store("counter", 1); store("profile", { name: "Ada", tags: ["x"], nested: { deep: [1, { two: 2 }] } }); text("stored")`,
      ),
      execCall(
        "call-2",
        `const c = load("counter"); store("counter", c + 1); const p = load("profile"); p.tags.push("y"); text(load("profile").tags)`,
      ),
      execCall(
        "call-3",
        `text(load("counter")); text(load("profile")); text(String(load("nope"))); text(typeof load("nope"))`,
      ),
    ],
    expect: [/stored/, /Ada/, /"2"/, /undefined/],
  },
  {
    name: "store-special-values",
    items: [
      execCall("call-1", `store("u", undefined); text(String(load("u"))); text(typeof load("u"))`),
      execCall(
        "call-2",
        `store("d", new Date(0)); store("m", new Map([[1, 2]])); store("n", NaN); store("neg", -0);
text(load("d")); text(load("m")); text(String(load("n"))); text(Object.is(load("neg"), -0))`,
      ),
      execCall("call-3", `store("big", 1n)`),
      execCall("call-4", `store({ not: "a string" }, 1)`),
      execCall("call-5", `store("obj-with-fn", { f() {} })`),
      execCall("call-6", `store("big", "x".repeat(5000000)); text("stored big")`),
      execCall(
        "call-7",
        `text(load("big").length); store("many", Array.from({ length: 100000 }, (_, i) => ({ i }))); text(load("many").length)`,
      ),
    ],
    expect: [/Only plain serializable objects can be stored/, /1970/, /serialize a BigInt/, /5000000/],
  },

  // ---- Errors ----
  {
    name: "throw-values",
    items: [
      execCall("call-1", `throw "plain string"`),
      execCall("call-2", `throw { code: 42, message: "an object" }`),
      execCall("call-3", `throw null`),
      execCall("call-4", `text("before"); throw 42`),
      execCall("call-5", `throw new Error("x".repeat(100000))`),
      execCall("call-6", `text("ok"); throw "y".repeat(50000)`),
    ],
    expect: [
      /plain string/,
      /Script error:\\n\[object Object\]/,
      /Script error:\\nnull/,
      /original token count: 25012/,
    ],
  },
  {
    name: "type-errors",
    items: [
      execCall("call-1", `const o = null; text(o.field)`),
      execCall("call-2", `const f = 5; f()`),
      execCall("call-3", `undefinedFunction()`),
      execCall("call-4", `const c = 1; c = 2`),
    ],
    expect: [
      /reading 'field'/,
      /f is not a function/,
      /undefinedFunction is not defined/,
      /constant variable/,
    ],
  },
  {
    name: "rejected-promise",
    items: [
      execCall("call-1", `await Promise.reject(new Error("rejected on purpose"))`),
      execCall(
        "call-2",
        `text("waiting"); await new Promise((_, reject) => setTimeout(() => reject(new RangeError("later")), 20))`,
      ),
      execCall("call-3", `await Promise.reject("a bare string")`),
    ],
    expect: [/rejected on purpose/, /RangeError/],
  },
  {
    name: "unhandled-rejection",
    items: [
      execCall("call-1", `Promise.reject(new Error("nobody awaits")); text("after")`),
      execCall(
        "call-2",
        `(async () => { throw new Error("async function"); })(); ${sleep(50)}; text("still here")`,
      ),
      execCall(
        "call-3",
        `setTimeout(() => { throw new Error("thrown in a timer"); }, 10); ${sleep(50)}; text("timer done")`,
      ),
      execCall("call-4", `text("next")`),
    ],
    expect: [/after/, /still here/, /thrown in a timer/, /next/],
  },
  {
    name: "missing-globals",
    items: [
      execCall("call-1", `console.log("x")`),
      execCall("call-2", `const fs = require("fs")`),
      execCall("call-3", `text(typeof process); process.exit(1)`),
      execCall("call-4", `await fetch("https://example.com")`),
      execCall(
        "call-5",
        `text([typeof Deno, typeof window, typeof globalThis, typeof structuredClone].join(","))`,
      ),
    ],
    expect: [
      /console is not defined/,
      /require is not defined/,
      /process is not defined/,
      /fetch is not defined/,
    ],
  },
  {
    name: "syntax-errors",
    items: [
      execCall("call-1", `text("a");\nreturn 5`),
      execCall("call-2", `const x = ;`),
      execCall("call-3", `text("unterminated)`),
      execCall("call-4", `text(await 1)`),
    ],
    expect: [/Illegal return statement/, /Unexpected token/, /Invalid or unexpected token/],
  },
  {
    name: "error-after-output",
    items: [
      execCall(
        "call-1",
        `text("partial 1"); text({ partial: 2 }); ${sleep(50)}; image(${
          J(PNG)
        }); throw new TypeError("failed after output")`,
      ),
    ],
    expect: [/partial 1/, /input_image/, /failed after output/],
  },

  // ---- Yielding and waiting ----
  {
    name: "yield-waits",
    // A second apart: each wait is made after a model turn, which may take over 300 ms on a loaded
    // machine (then one wait would see two ticks, on either host).
    items: [
      execCall(
        "call-1",
        `text("start"); yield_control();
for (let i = 1; i <= 3; i++) { ${sleep(1000)}; text("tick " + i); yield_control(); }
${sleep(1000)}; text("end")`,
      ),
      waitCall("call-2", { cell_id: "1" }),
      waitCall("call-3", { cell_id: "1" }),
      waitCall("call-4", { cell_id: "1" }),
      waitCall("call-5", { cell_id: "1" }),
    ],
    expect: [/start/, /tick 1/, /tick 3/, /end/, /Script completed/],
  },
  {
    name: "yield-unobserved",
    items: [
      execCall(
        "call-1",
        `text("one"); yield_control(); ${sleep(200)}; text("two"); yield_control(); ${
          sleep(200)
        }; text("three")`,
      ),
      execCall("call-2", `${sleep(1000)}; text("between")`),
      waitCall("call-3", { cell_id: "1" }),
    ],
    expect: [/one/, /between/, /three/],
  },
  {
    name: "wait-after-completion",
    items: [
      execCall("call-1", `text("a"); yield_control(); ${sleep(100)}; text("b")`),
      execCall("call-2", `${sleep(800)}; text("between")`),
      waitCall("call-3", { cell_id: "1" }),
      waitCall("call-4", { cell_id: "1" }),
      // Terminating a cell that already completed unobserved.
      execCall("call-5", `text("quick"); yield_control(); ${sleep(100)}; text("finished")`),
      execCall("call-6", `${sleep(800)}; text("between again")`),
      waitCall("call-7", { cell_id: "3", terminate: true }),
    ],
    expect: [/"a"/, /"b"/, /between/, /exec cell 1 not found/, /quick/, /between again/],
  },
  {
    name: "wait-unknown-cell",
    items: [
      waitCall("call-1", { cell_id: "42" }),
      execCall("call-2", `text(1)`),
      waitCall("call-3", { cell_id: "1" }),
      waitCall("call-4", { cell_id: "not-a-cell" }),
      waitCall("call-5", { cell_id: "7", terminate: true }),
    ],
    expect: [/exec cell 42 not found/, /exec cell not-a-cell not found/],
  },
  {
    name: "wait-yield-time",
    items: [
      execCall("call-1", `text("started"); yield_control(); ${sleep(2500)}; text("late")`),
      waitCall("call-2", { cell_id: "1", yield_time_ms: 300 }),
      waitCall("call-3", { cell_id: "1", yield_time_ms: 15000 }),
    ],
    expect: [/started/, /Script running with cell ID 1/, /late/],
  },
  {
    name: "terminate-after-output",
    items: [
      execCall("call-1", `text("before the spin"); yield_control(); while (true) {}`),
      waitCall("call-2", { cell_id: "1", terminate: true }),
      execCall("call-3", `text("after"); text(load("x") ?? "nothing stored")`),
    ],
    expect: [/before the spin/, /Script terminated/, /nothing stored/],
  },
  {
    name: "long-running-default-yield",
    items: [execCall("call-1", `text("begin"); ${sleep(2000)}; text("after two seconds")`)],
    expect: [/Script completed/, /after two seconds/],
  },
  {
    name: "wait-max-tokens",
    items: [
      execCall(
        "call-1",
        // Each wait must reach the cell before its next phase: Codex's round trip to the fake model
        // took over 300 ms on a loaded 2-core CI machine once (the wait then saw two phases).
        `for (const [i, word] of ["alpha", "beta", "gamma", "delta"].entries()) {
  if (i > 0) { ${sleep(1000)}; }
  for (let j = 0; j < 40; j++) text(word + " " + j);
  if (i < 3) yield_control();
}`,
      ),
      waitCall("call-2", { cell_id: "1", max_tokens: 0 }),
      waitCall("call-3", { cell_id: "1", max_tokens: 15 }),
      waitCall("call-4", { cell_id: "1", max_tokens: 100000 }),
      // A pragma's budget and the wait after it.
      execCall(
        "call-5",
        `// @exec: {"max_output_tokens": 5}\ntext("first part is long enough to be cut"); yield_control(); ${
          sleep(300)
        }; for (let i = 0; i < 20; i++) text("rest " + i)`,
      ),
      waitCall("call-6", { cell_id: "2" }),
    ],
    expect: [/alpha 39/, /…78 tokens truncated…/, /gamma 39/, /delta 39/, /rest 19/],
  },

  // ---- Images, audio, output budget ----
  {
    name: "image-forms",
    items: [
      execCall(
        "call-1",
        `image({ image_url: ${J(PNG)}, detail: "high" }); image(${J(PNG)}, "low");
image({ type: "image", data: ${J(PNG_BASE64)}, mimeType: "image/png" }); text("three images")`,
      ),
      execCall("call-2", `image("https://example.com/cat.png")`),
      execCall("call-3", `image("not a url")`),
      execCall("call-4", `image({ image_url: ${J(PNG)}, detail: "huge" })`),
    ],
    expect: [
      /input_image/,
      /three images/,
      /remote image URLs are not supported/,
      /image detail must be one of/,
    ],
  },
  {
    name: "truncation-mixed",
    items: [
      execCall(
        "call-1",
        `// @exec: {"max_output_tokens": 30}\nfor (let i = 0; i < 30; i++) text("row " + i); image(${
          J(PNG)
        }); text("tail"); throw new Error("after the flood")`,
      ),
      execCall(
        "call-2",
        `// @exec: {"max_output_tokens": 10}\nimage(${J(PNG)}); text("y".repeat(500)); image(${
          J(PNG)
        }); text("end")`,
      ),
      execCall("call-3", `// @exec: {"max_output_tokens": 0}\ntext("nothing fits")`),
    ],
    expect: [/row 14/, /omitted \d+ text items/, /tokens truncated/],
  },
  {
    name: "large-output-default-budget",
    items: [
      execCall("call-1", `text("word ".repeat(60000))`),
      execCall("call-2", `for (let i = 0; i < 2000; i++) text("line " + i + " " + "x".repeat(40))`),
    ],
    expect: [/truncated/],
  },
  {
    name: "unicode",
    items: [
      execCall(
        "call-1",
        `text("héllo wörld ✓ 🎉 日本語 עברית"); text("👩‍👩‍👧‍👦"); text("tab\\tnul\\u0000end"); text("lone \\ud800 surrogate");
notify("📣 notified"); store("emoji", "🦀"); text(load("emoji").length)`,
      ),
    ],
    expect: [/🎉/, /日本語/],
  },

  // ---- Notifications ----
  {
    name: "notify-many",
    items: [
      execCall(
        "call-1",
        `notify("one"); notify(2); notify({ three: 3 }); text("text after"); notify(null); ${
          sleep(50)
        }; notify("late"); text("end")`,
      ),
      execCall("call-2", `for (let i = 0; i < 50; i++) notify("n" + i); text("burst done")`),
    ],
    expect: [/one/, /three/, /text after/, /n49/, /burst done/],
  },

  // ---- Nested tools ----
  {
    name: "exec-command-failures",
    items: [
      execCall(
        "call-1",
        `const r = await tools.exec_command({ cmd: "echo to-stderr >&2; exit 3" }); text(r.exit_code); text(r.output)`,
      ),
      execCall("call-2", `text(await tools.exec_command({ cmd: "nonexistent-command-xyz" }))`),
      execCall("call-3", `text(await tools.exec_command({ cmd: "printf 'no newline'" }))`),
    ],
    expect: [/"3"/, /to-stderr/, /command not found/, /no newline/],
  },
  {
    name: "promise-all-tools",
    items: [
      execCall(
        "call-1",
        `const rs = await Promise.all([1, 2, 3].map((i) => tools.exec_command({ cmd: "echo n" + i })));
text(rs.map((r) => r.output.trim()));
const settled = await Promise.allSettled([tools.exec_command({ cmd: "exit 1" }), tools.exec_command({})]);
text(settled.map((s) => s.status));`,
      ),
    ],
    expect: [/n1/, /n3/],
  },
  {
    name: "tool-bad-argument",
    items: [
      execCall("call-1", `await tools.exec_command({})`),
      execCall("call-2", `text(await tools.exec_command("echo from a string"))`),
      execCall("call-3", `await tools.no_such_tool({})`),
      execCall("call-4", `text(await tools.apply_patch({ patch: 1 }))`),
      execCall("call-5", `await tools.exec_command({ cmd: 42 })`),
    ],
    expect: [
      /missing field `cmd`/,
      /expects a JSON object/,
      /no_such_tool is not a function/,
      /expects a string input/,
    ],
  },
  {
    name: "apply-patch",
    items: [
      execCall(
        "call-1",
        `const r = await tools.apply_patch("*** Begin Patch\\n*** Add File: notes.txt\\n+first line\\n*** End Patch\\n");
text(r); text((await tools.exec_command({ cmd: "cat notes.txt" })).output)`,
      ),
      execCall("call-2", `text(await tools.apply_patch("not a patch"))`),
    ],
    expect: [/first line/, /\*\*\* Begin Patch/],
  },
  {
    name: "view-image",
    items: [
      execCall(
        "call-1",
        `await tools.exec_command({ cmd: "printf '%s' '${PNG_BASE64}' | base64 -d > dot.png" });
const r = await tools.view_image({ path: "dot.png" }); text(Object.keys(r)); image(r)`,
      ),
      execCall("call-2", `text(await tools.view_image({ path: "missing.png" }))`),
    ],
    expect: [/image_url/, /input_image/, /unable to locate image/],
  },
  {
    name: "goals",
    items: [
      // Reading only: a created goal makes Codex continue the turn on its own (an extra request).
      execCall("call-1", `text(await tools.get_goal({})); text(typeof tools.create_goal)`),
    ],
    // `codex exec --ephemeral` has no persistent thread; the app-server (gRPC over TCP) has one.
    expect: [/Goal tools require a persistent thread|\\"goal\\":null/],
  },
  {
    name: "all-tools-shape",
    items: [
      execCall(
        "call-1",
        `text(ALL_TOOLS.length > 3); const t = ALL_TOOLS.find((t) => t.name === "exec_command");
text(Object.keys(t)); text(t.description.split("\\n")[0]); text(typeof tools.exec_command); text(Object.keys(tools).includes("apply_patch"))`,
      ),
    ],
    expect: [/Runs a command/],
  },

  // ---- Exits, timers, helpers, modules ----
  {
    name: "exit-places",
    items: [
      execCall(
        "call-1",
        `setTimeout(() => { text("in timer"); exit(); text("never"); }, 10); ${
          sleep(100)
        }; text("after timer")`,
      ),
      execCall(
        "call-2",
        `async function f() { await null; text("in f"); exit(); } await f(); text("never 2")`,
      ),
      execCall("call-3", `try { exit(); } finally { text("finally runs?"); }`),
      execCall("call-4", `text("x"); exit(); throw new Error("not reached")`),
      execCall("call-5", `try { exit(); } catch (e) { text("caught: " + e); }`),
    ],
    expect: [/in timer/, /in f/],
  },
  {
    name: "timers-pending",
    items: [
      execCall("call-1", `setTimeout(() => text("too late"), 200); text("done without waiting")`),
      execCall("call-2", `${sleep(400)}; text("next")`),
      execCall(
        "call-3",
        `const id = setTimeout(() => {}, 10); clearTimeout(id); clearTimeout(12345); clearTimeout(); text(typeof id)`,
      ),
      execCall("call-4", `setTimeout((a, b) => text(a + b), 0, "x", "y"); ${sleep(20)}; text("args")`),
      execCall(
        "call-5",
        // 10 and 150 ms apart: a loop blocked past both due times (a loaded machine) may run them in
        // the order they were set, on Codex's host too.
        `const order = []; setTimeout(() => order.push(2), 150); setTimeout(() => order.push(1), 10); ${
          sleep(300)
        }; text(order)`,
      ),
    ],
    expect: [/done without waiting/, /next/, /\[1,2\]/],
  },
  {
    name: "settled-helpers",
    items: [
      execCall(
        "call-1",
        `const calls = [tools.exec_command({ cmd: "echo a" }), tools.exec_command({ cmd: "exit 2" }), Promise.reject(new Error("bad"))];
// The order tool calls settle in is Codex's: sort by index before printing.
const results = []; for await (const r of as_settled(calls)) results.push(r);
text(results.sort((a, b) => a.index - b.index).map((r) => r.index + " " + r.status));
await stream_settled([1, Promise.reject(new Error("e"))], (r) => text("stream " + r.index + " " + r.status));
text(content({ type: "text", text: "from content" }));`,
      ),
    ],
    expect: [/0 fulfilled/, /2 rejected/, /stream 1 rejected/, /from content/],
  },
  {
    name: "import-forms",
    items: [
      execCall("call-1", `const m = await import("data:text/javascript,export default 7"); text(m.default)`),
      execCall("call-2", `import x from "./local.js";\ntext(x)`),
      execCall("call-3", `await import("https://esm.sh/lodash")`),
      execCall("call-4", `text(typeof import.meta); text(import.meta.url)`),
      execCall("call-5", `export const value = 1; text("exported")`),
    ],
    expect: [/unsupported import in exec/, /Unsupported import in exec: .\/local.js/, /exported/],
  },
  {
    name: "json-round-trip",
    items: [
      execCall(
        "call-1",
        `const data = JSON.parse('{"a":[1,2,{"b":null}],"c":"\\\\u00e9","d":1.5e3}'); store("j", data);
text(JSON.stringify(load("j"))); text(load("j"));
const r = await tools.exec_command({ cmd: "echo '{\\"k\\": [1, 2]}'" }); text(JSON.parse(r.output).k)`,
      ),
      execCall("call-2", `text(load("j").c); text(JSON.stringify({ nested: load("j") }, null, 2))`),
    ],
    expect: [/1500/, /é/],
  },

  // ---- Two exec calls in one model answer ----
  {
    name: "parallel-exec",
    items: [
      [
        execCall("call-1", `${sleep(300)}; text("slow one")`),
        execCall("call-2", `text("fast one")`),
      ],
      execCall("call-3", `text("after both")`),
    ],
    expect: [/slow one/, /fast one/, /after both/],
  },
  {
    name: "parallel-exec-store",
    items: [
      [
        execCall("call-1", `store("left", 1); text("left stored")`),
        execCall("call-2", `store("right", 2); text("right stored")`),
      ],
      execCall("call-3", `text([load("left"), load("right")])`),
    ],
    expect: [/\[1,2\]/],
  },

  // ---- Cells with tool calls in flight, cells that end after yielding ----
  {
    name: "tool-unawaited",
    items: [
      execCall("call-1", `tools.exec_command({ cmd: "sleep 1; echo late" }); text("done without awaiting")`),
      execCall("call-2", `${sleep(1500)}; text("next")`),
    ],
    expect: [/done without awaiting/],
  },
  {
    name: "tools-while-yielded",
    items: [
      execCall(
        "call-1",
        `// @exec: {"yield_time_ms": 500}\ntext("asking"); const r = await tools.exec_command({ cmd: "sleep 2; echo finished" }); text(r.output)`,
      ),
      waitCall("call-2", { cell_id: "1" }),
      execCall(
        "call-3",
        `// @exec: {"yield_time_ms": 500}\ntext("calling"); await tools.exec_command({ cmd: "sleep 3; echo never" }); text("not reached")`,
      ),
      waitCall("call-4", { cell_id: "2", terminate: true }),
      execCall("call-5", `text("alive")`),
    ],
    expect: [/asking/, /finished/, /calling/, /Script terminated/, /alive/],
  },
  {
    name: "yield-endings",
    items: [
      execCall("call-1", `text("a"); yield_control(); text("b")`),
      waitCall("call-2", { cell_id: "1" }),
      execCall("call-3", `yield_control(); yield_control(); text("c")`),
      waitCall("call-4", { cell_id: "2" }),
      execCall(
        "call-5",
        `text("before"); yield_control(); ${
          sleep(1000)
        }; notify("during"); throw new Error("failed after yield")`,
      ),
      waitCall("call-6", { cell_id: "3" }),
      execCall("call-7", `text("x"); yield_control(); ${sleep(300)}; text("y"); exit(); text("z")`),
      waitCall("call-8", { cell_id: "4" }),
    ],
    expect: [/Script running with cell ID 2/, /failed after yield/, /during/, /"y"/],
  },
  {
    name: "concurrent-cells",
    items: [
      execCall("call-1", `text("first running"); yield_control(); ${sleep(1500)}; text("first done")`),
      execCall(
        "call-2",
        `// @exec: {"yield_time_ms": 300}\ntext("second running"); ${sleep(600)}; text("second done")`,
      ),
      waitCall("call-3", { cell_id: "2" }),
      waitCall("call-4", { cell_id: "1" }),
    ],
    expect: [/first done/, /second done/],
  },

  // ---- More errors, the environment, helper misuse ----
  {
    name: "error-stacks",
    items: [
      execCall(
        "call-1",
        `function inner() { throw new Error("deep"); }\nfunction outer() { inner(); }\nouter();`,
      ),
      execCall("call-2", `class Thing { run() { null.x; } }\nnew Thing().run();`),
      execCall(
        "call-3",
        `async function later() { ${sleep(5)}; throw new Error("async stack"); }\nawait later();`,
      ),
      execCall("call-4", `text(new Error("printed").stack)`),
      execCall(
        "call-5",
        `class MyError extends Error { constructor(m) { super(m); this.name = "MyError"; } }\nthrow new MyError("custom", { cause: 1 })`,
      ),
      execCall("call-6", `throw new AggregateError([new Error("a")], "many")`),
      execCall("call-7", `const e = new Error("with cause", { cause: new Error("root") }); throw e`),
    ],
    expect: [/deep/],
  },
  {
    name: "stack-overflow",
    items: [execCall("call-1", `function f(n) { return f(n + 1) + 1; }\nf(0)`)],
    expect: [/RangeError: Maximum call stack size exceeded\\n {4}at f \(exec_main\.mjs:1:\d+\)/],
    deliberate: {
      id: "v8-engine",
      check(reference, ours) {
        // The top frame's column is where V8's stack check tripped: the function's entry (1:11) or the
        // call (1:17). It varies from run to run on either host; everything else is the same.
        const top = (seen: readonly SeenOutput[]) =>
          JSON.stringify(seen).replace(
            /(Maximum call stack size exceeded\\n {4}at f \(exec_main\.mjs:1:)(11|17)\)/,
            "$1<col>)",
          );
        assert.match(top(reference), /<col>/);
        assert.equal(top(ours), top(reference));
      },
    },
  },
  {
    name: "builtins",
    items: [
      execCall("call-1", `text(Object.getOwnPropertyNames(globalThis).sort())`),
      execCall(
        "call-2",
        `text([typeof TextEncoder, typeof TextDecoder, typeof URL, typeof URLSearchParams, typeof atob, typeof btoa, typeof crypto, typeof structuredClone, typeof queueMicrotask, typeof performance, typeof Intl, typeof WebAssembly, typeof SharedArrayBuffer, typeof Atomics].join(","))`,
      ),
      execCall(
        "call-3",
        `text((1234567.891).toLocaleString()); text(new Intl.NumberFormat("de-DE").format(1234.5)); text(new Date(0).toLocaleDateString("en-US", { timeZone: "UTC" })); text("ß".localeCompare("ss")); text(Intl.DateTimeFormat().resolvedOptions().timeZone)`,
      ),
      execCall("call-4", `text(Object.keys(tools).sort())`),
      execCall(
        "call-5",
        `text([Array.prototype.findLast, Object.groupBy, Array.fromAsync, Promise.withResolvers, Set.prototype.union, Iterator?.prototype?.map].map((f) => typeof f))`,
      ),
    ],
    expect: [/Object/],
  },
  {
    name: "helpers-without-arguments",
    items: [
      execCall("call-1", `text(); text("after empty text")`),
      execCall("call-2", `image()`),
      execCall("call-3", `notify(); text("after empty notify")`),
      execCall("call-4", `store()`),
      execCall("call-5", `text(String(load()))`),
      execCall("call-6", `audio()`),
      execCall("call-7", `generatedImage()`),
    ],
    expect: [/after empty text/],
  },

  // ---- Client mode: Codex truncates outcomes itself ----
  {
    name: "client-mode-truncation",
    features: "code_mode_host_output_truncation = false",
    items: [
      execCall(
        "call-1",
        `// @exec: {"max_output_tokens": 30}\nfor (let i = 0; i < 40; i++) text("line " + i)`,
      ),
      execCall("call-2", `text("word ".repeat(60000))`),
      execCall(
        "call-3",
        `// @exec: {"max_output_tokens": 30}\nfor (let i = 0; i < 30; i++) text("row " + i); image(${
          J(PNG)
        }); throw new Error("after the flood")`,
      ),
      execCall(
        "call-4",
        `for (let i = 0; i < 40; i++) text("alpha " + i); yield_control(); ${
          sleep(300)
        }; for (let i = 0; i < 40; i++) text("beta " + i)`,
      ),
      waitCall("call-5", { cell_id: "4", max_tokens: 15 }),
    ],
    expect: [/line 0/, /truncated/, /alpha 39/],
  },
  {
    name: "client-mode-errors",
    features: "code_mode_host_output_truncation = false",
    items: [
      execCall("call-1", `throw new Error("x".repeat(100000))`),
      execCall("call-2", `text("a"); notify("n"); image(${J(PNG)}); text("b"); throw new TypeError("typed")`),
      execCall("call-3", `text("after"); store("k", 1); text(load("k"))`),
    ],
    expect: [/Script error/, /typed/, /after/],
  },

  // ---- A deliberate difference ----
  {
    name: "typescript",
    items: [
      execCall("call-1", `const n: number = 41;\ninterface P { x: number }\ntext(n + 1)`),
      execCall("call-2", `text("plain javascript")`),
    ],
    expect: [/SyntaxError/, /plain javascript/],
    deliberate: {
      id: "typescript-cells",
      check(reference, ours) {
        // Only the TypeScript cell differs: the reference fails it with a SyntaxError, this host runs it.
        assert.equal(reference.length, ours.length);
        const text = (seen: SeenOutput) => JSON.stringify(seen.output);
        assert.match(text(reference[0]), /Script failed/);
        assert.match(text(reference[0]), /SyntaxError/);
        assert.match(text(ours[0]), /Script completed/);
        assert.match(text(ours[0]), /"text":"42"/);
        assert.doesNotMatch(text(ours[0]), /SyntaxError/);
        assert.deepEqual(ours.slice(1), reference.slice(1));
      },
    },
  },
];

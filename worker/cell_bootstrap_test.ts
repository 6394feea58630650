import assert from "node:assert/strict";
import { MessageChannel, type MessagePort, Worker } from "node:worker_threads";
import {
  CELL_STOPPED,
  CELL_WORDS,
  type CellControl,
  type CellCredit,
  type CellImage,
  type CellOutput,
  type CellTool,
  CREDIT_ACKED,
  CREDIT_BYTES,
  CREDIT_EVENTS,
  CREDIT_GENERATION,
  CREDIT_STOP,
} from "./cell_protocol.ts";
import { CELL_EXIT_SENTINEL, CELL_GLOBAL_ALLOWLIST } from "./cell_realm.ts";
import {
  HELPER_FUNCTIONS,
  REFERENCE_EXTRA_HELPERS,
  REFERENCE_GLOBAL_NAMES,
  REMOVED_GLOBALS,
  SCENARIO_55_GLOBALS,
} from "../tests/_spec_lists.ts";
import { MAX_MEDIA_BYTES, MAX_MESSAGE_BYTES, MAX_TEXT_BYTES, MIB } from "../proto/bytes.ts";

const BOOTSTRAP = new URL("./cell_bootstrap.ts", import.meta.url);
const MAX_STORED_VALUE_BYTES = MAX_MESSAGE_BYTES;
/** Upper bound for any single wait, so a broken bootstrap fails a test instead of hanging it. */
const WAIT_LIMIT_MS = 15_000;

type ToolAnswer = { json: string } | { error: string };
type ToolCallOutput = Extract<CellOutput, { t: "toolCall" }>;
type ResultOutput = Extract<CellOutput, { t: "result" }>;

interface CellOptions {
  tools?: CellTool[];
  store?: [string, string][];
  maxStoredValueBytes?: number;
  maxMessageBytes?: number;
  /** Answers tool calls as they arrive; `undefined` leaves the call pending. */
  answer?: (call: ToolCallOutput) => ToolAnswer | undefined;
  /** Credit and reduced-form settings; default: the SPEC's Server-mode values. */
  credit?: Partial<Omit<CellCredit, "words">>;
  /** Leave credit to the test ({@link CellHarness.ack}); default: acknowledge each counted output at once. */
  manualCredit?: boolean;
}

/** How a cell's Worker ended: its `error` events (with the time of the first) and exit code. */
interface WorkerEnd {
  errors: (Error & { code?: unknown })[];
  firstErrorAt: number | undefined;
  exitCode: number;
}

/** One cell isolate: a bootstrap Worker plus the output port of its cell. */
class CellHarness implements AsyncDisposable {
  #worker: Worker;
  #port: MessagePort | undefined;
  #queue: CellOutput[] = [];
  #waiter: PromiseWithResolvers<CellOutput> | undefined;
  #failure: Error | undefined;
  #errors: (Error & { code?: unknown })[] = [];
  #firstErrorAt: number | undefined;
  #end = Promise.withResolvers<WorkerEnd>();

  private constructor(worker: Worker) {
    this.#worker = worker;
    worker.on("error", (e: Error) => {
      this.#firstErrorAt ??= performance.now();
      this.#errors.push(e);
      this.#fail(e);
    });
    worker.on("exit", (code: number) => {
      this.#end.resolve({ errors: this.#errors, firstErrorAt: this.#firstErrorAt, exitCode: code });
      this.#fail(new Error(`cell worker exited (${code})`));
    });
  }

  /** Creates the Worker (heap limit `heapMb` MiB) and waits for its `ready`. */
  static async open(bootstrap: URL = BOOTSTRAP, heapMb = 64): Promise<CellHarness> {
    const worker = new Worker(bootstrap, { resourceLimits: { maxOldGenerationSizeMb: heapMb } });
    const harness = new CellHarness(worker);
    const ready = Promise.withResolvers<unknown>();
    worker.once("message", ready.resolve);
    worker.once("error", ready.reject);
    try {
      assert.deepEqual(await withLimit(ready.promise, "ready"), { t: "ready" });
    } catch (e) {
      await harness[Symbol.asyncDispose]();
      throw e;
    } finally {
      worker.off("error", ready.reject);
    }
    return harness;
  }

  /** The cell's shared credit words (set by {@link start}). */
  words = new Int32Array(new SharedArrayBuffer(4 * CELL_WORDS));

  /** Acknowledges the oldest `events` counted outputs, like a host `Credit` relayed by the runtime. */
  ack(events: number): void {
    Atomics.add(this.words, CREDIT_ACKED, events);
    Atomics.add(this.words, CREDIT_GENERATION, 1);
    Atomics.notify(this.words, CREDIT_GENERATION);
  }

  /** Sends `start` with a fresh output port. */
  start(source: string, options: CellOptions = {}): void {
    const { port1, port2 } = new MessageChannel();
    this.#port = port1;
    // `started` travels together with the cell's first output (one message holding both).
    port1.on("message", (batch: CellOutput | CellOutput[]) => {
      for (const one of Array.isArray(batch) ? batch : [batch]) this.#receive(one, options);
    });
    this.#worker.postMessage({
      t: "start",
      cellId: "1",
      source,
      tools: options.tools ?? [],
      store: options.store ?? [],
      maxStoredValueBytes: options.maxStoredValueBytes ?? MAX_STORED_VALUE_BYTES,
      maxMessageBytes: options.maxMessageBytes ?? MAX_MESSAGE_BYTES,
      output: port2,
      credit: {
        words: this.words,
        maxEvents: 128,
        maxBytes: 2 * MIB,
        trimTextOver: 2 * MAX_TEXT_BYTES,
        keepTextBytes: MAX_TEXT_BYTES,
        dropMediaOver: MAX_MEDIA_BYTES,
        ...options.credit,
      },
    }, [port2]);
  }

  #receive(raw: CellOutput & { n?: number }, options: CellOptions): void {
    {
      if (raw.t === "pong") return;
      let message: CellOutput = raw;
      if (raw.n !== undefined) {
        // Counted output: the byte count is the cell's own bookkeeping; tests compare the item.
        const { n: _n, ...item } = raw;
        message = item as CellOutput;
        if (!options.manualCredit) this.ack(1);
      }
      if (message.t === "toolCall" && options.answer !== undefined) {
        const answer = options.answer(message);
        if (answer !== undefined) this.send({ t: "toolResult", id: message.id, ...answer });
      }
      this.#push(message);
    }
  }

  /** Outputs received and not yet read. */
  get queued(): number {
    return this.#queue.length;
  }

  /** Posts a control message on the Worker. */
  send(control: CellControl): void {
    this.#worker.postMessage(control);
  }

  /** The next output message. */
  next(): Promise<CellOutput> {
    const queued = this.#queue.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    this.#waiter = Promise.withResolvers<CellOutput>();
    return withLimit(this.#waiter.promise, "cell output");
  }

  /** Every output up to and including the first one matching `done`. */
  async until(done: (message: CellOutput) => boolean): Promise<CellOutput[]> {
    const seen: CellOutput[] = [];
    for (;;) {
      const message = await this.next();
      seen.push(message);
      if (done(message)) return seen;
    }
  }

  /** Resolves when the Worker exits, within `limitMs`. */
  ended(limitMs: number = WAIT_LIMIT_MS): Promise<WorkerEnd> {
    return withLimit(this.#end.promise, "the cell worker to exit", limitMs);
  }

  /** Proves the cell posts nothing more: a `stop` must be answered by `stopped` at once. */
  async assertQuiet(): Promise<void> {
    this.send({ t: "stop" });
    assert.deepEqual(await this.next(), { t: "stopped" });
  }

  #push(message: CellOutput): void {
    const waiter = this.#waiter;
    if (waiter !== undefined) {
      this.#waiter = undefined;
      waiter.resolve(message);
    } else {
      this.#queue.push(message);
    }
  }

  #fail(error: Error): void {
    this.#failure ??= error;
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.reject(error);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#port?.close();
    this.#worker.removeAllListeners("exit");
    this.#worker.removeAllListeners("error");
    await this.#worker.terminate();
  }
}

/** Rejects if `promise` does not settle within `limitMs` ({@link WAIT_LIMIT_MS} by default). */
async function withLimit<T>(
  promise: Promise<T>,
  what: string,
  limitMs: number = WAIT_LIMIT_MS,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), limitMs);
  });
  try {
    return await Promise.race([promise, limit]);
  } finally {
    clearTimeout(timer);
  }
}

interface CellRun {
  /** Outputs between `started` and `result`. */
  outputs: CellOutput[];
  result: ResultOutput;
}

/** Runs one cell in a fresh isolate to its `result`, then proves nothing follows it. */
async function runCell(source: string, options: CellOptions = {}): Promise<CellRun> {
  await using cell = await CellHarness.open();
  cell.start(source, options);
  const all = await cell.until((m) => m.t === "result");
  assert.deepEqual(all[0], { t: "started" });
  await cell.assertQuiet();
  return { outputs: all.slice(1, -1), result: all.at(-1) as ResultOutput };
}

/** The content items (text and image) of a run, in order. */
function items(run: CellRun): (string | CellImage | { audio: string })[] {
  return run.outputs.flatMap((m): (string | CellImage | { audio: string })[] =>
    m.t === "text" ? [m.text] : m.t === "image" ? [m.image] : m.t === "audio" ? [{ audio: m.url }] : []
  );
}

/** Runs a cell that must succeed and returns its text items. */
async function texts(source: string, options: CellOptions = {}): Promise<string[]> {
  const run = await runCell(source, options);
  assert.equal(run.result.error, undefined, `cell failed: ${run.result.error}`);
  return run.outputs.flatMap((m) => m.t === "text" ? [m.text] : []);
}

/** Runs a cell that must fail and returns its error text. */
async function failure(source: string, options: CellOptions = {}): Promise<string> {
  const run = await runCell(source, options);
  assert.equal(typeof run.result.error, "string", "the cell should have failed");
  return run.result.error as string;
}

/** Applies a result's writes to a stored-value snapshot, as the host's commit would. */
function commit(store: [string, string][], result: ResultOutput): [string, string][] {
  const map = new Map(store);
  for (const [key, json] of result.writes) map.set(key, json);
  return [...map];
}

const PNG = "data:image/png;base64,AAA";
const image = (url: string, detail: CellImage["detail"]): CellImage => ({ url, detail });

// --- lifecycle and protocol -----------------------------------------------------------------

Deno.test("the bootstrap posts ready, then started, outputs in call order and one final result", async () => {
  await using cell = await CellHarness.open();
  cell.start(
    'text("a"); image("data:image/png;base64,AAA"); yield_control(); notify("n"); text("b")',
  );
  const all = await cell.until((m) => m.t === "result");
  assert.deepEqual(all, [
    { t: "started" },
    { t: "text", text: "a" },
    { t: "image", image: image(PNG, "high") },
    { t: "yield" },
    { t: "notify", text: "n" },
    { t: "text", text: "b" },
    { t: "result", writes: [] },
  ]);
  await cell.assertQuiet();
});

Deno.test("a cell's source runs exactly once", async () => {
  assert.deepEqual(await texts('text("once")'), ["once"]);
});

Deno.test("a cell is an ES module: return is a SyntaxError, export and import.meta work, strict mode", async () => {
  const run = await runCell('text("a"); return 5; text("b")');
  assert.equal(run.result.error, "SyntaxError: Illegal return statement");
  assert.deepEqual(run.outputs, []);
  assert.deepEqual(
    await texts(
      "export const a = 1; export default 2; text(a); text(typeof import.meta); " +
        "text(String(import.meta.url)); text(typeof this); var v = 1; text(typeof globalThis.v)",
    ),
    ["1", "object", "undefined", "undefined", "undefined"],
  );
  assert.match(await failure("x = 5"), /^ReferenceError: x is not defined\n {4}at exec_main\.mjs:1:3$/);
  assert.equal(
    await failure("with ({}) {}"),
    "SyntaxError: Strict mode code may not include a with statement",
  );
  assert.equal(await failure("text(010)"), "SyntaxError: Octal literals are not allowed in strict mode.");
});

Deno.test("stop while the cell awaits forever answers stopped and never posts a result", async () => {
  await using cell = await CellHarness.open();
  cell.start(
    'text("before"); setTimeout(() => text("timer"), 0); await tools.echo({}); text("after")',
    { tools: [{ name: "echo", description: "" }] },
  );
  const [started, before, call] = await cell.until((m) => m.t === "toolCall");
  assert.deepEqual([started, before], [{ t: "started" }, { t: "text", text: "before" }]);
  // The 0 ms timer may or may not have fired before the tool call was answered; drain it.
  assert.equal(call.t, "toolCall");
  cell.send({ t: "stop" });
  const rest = await cell.until((m) => m.t === "stopped");
  assert.ok(rest.every((m) => m.t === "stopped" || (m.t === "text" && m.text === "timer")));
  // A tool result after stop is not dispatched: no consumed, no text, no result.
  cell.send({ t: "toolResult", id: (call as ToolCallOutput).id, json: "{}" });
  await cell.assertQuiet();
});

Deno.test("a stop that overtook the start (its stop word set) stops the cell before any of its code runs", async () => {
  await using cell = await CellHarness.open();
  Atomics.store(cell.words, CREDIT_STOP, 1);
  cell.start('text("ran")');
  assert.deepEqual(await cell.next(), { t: "stopped" });
  // The cell posts `stopped`, then sets its word: this thread may read the message first.
  const until = performance.now() + WAIT_LIMIT_MS;
  while (Atomics.load(cell.words, CELL_STOPPED) !== 1 && performance.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  assert.equal(Atomics.load(cell.words, CELL_STOPPED), 1);
  await cell.assertQuiet();
});

Deno.test("stop while awaiting a never-settling promise gets stopped and then nothing", async () => {
  await using cell = await CellHarness.open();
  cell.start('text("x"); await new Promise(() => {})');
  assert.deepEqual(await cell.until((m) => m.t === "text"), [
    { t: "started" },
    { t: "text", text: "x" },
  ]);
  cell.send({ t: "stop" });
  assert.deepEqual(await cell.next(), { t: "stopped" });
  await cell.assertQuiet();
});

Deno.test("stop discards pending timers", async () => {
  await using cell = await CellHarness.open();
  cell.start('setTimeout(() => text("late"), 30); text("armed"); await new Promise(() => {})');
  await cell.until((m) => m.t === "text");
  cell.send({ t: "stop" });
  assert.deepEqual(await cell.next(), { t: "stopped" });
  // Outlive the timer's delay on a timer of our own; the cell must stay silent.
  await new Promise((resolve) => setTimeout(resolve, 60));
  await cell.assertQuiet();
});

Deno.test("microtasks queued before completion still run; later timers and results are ignored", async () => {
  await using cell = await CellHarness.open();
  cell.start(
    'Promise.resolve().then(() => text("microtask")); setTimeout(() => text("timer"), 0); ' +
      'tools.echo(1).then(() => text("tool")); text("sync")',
    { tools: [{ name: "echo", description: "" }] },
  );
  const all = await cell.until((m) => m.t === "result");
  assert.deepEqual(all.slice(1), [
    { t: "toolCall", id: "tool-1", name: "echo", input: "1" },
    { t: "text", text: "sync" },
    { t: "text", text: "microtask" },
    { t: "result", writes: [] },
  ]);
  cell.send({ t: "toolResult", id: "tool-1", json: "1" });
  await cell.assertQuiet();
});

// --- heap limit (SPEC §5.1 item 5) ---------------------------------------------------------------

/** Allocates reachable objects until the heap limit is hit. */
const EXHAUST_HEAP = "const a = []; while (true) a.push({ x: new Array(1000).fill(a.length) });";

/**
 * The probe behind {@link assertHeapLimitReached}: runs one cell in a Worker with a 16 MiB heap and
 * prints `oom`, `parked` (silent for 2 s, not answering `ping`) or `running` (15 s guard).
 */
const HEAP_PROBE = `
import { MessageChannel, Worker } from "node:worker_threads";
const [bootstrap, source, toolsJson] = Deno.args;
const worker = new Worker(new URL(bootstrap), { resourceLimits: { maxOldGenerationSizeMb: 16 } });
await new Promise((resolve) => worker.once("message", resolve));
const channel = new MessageChannel();
let last = performance.now();
channel.port1.on("message", (batch) => {
  last = performance.now();
  const m = Array.isArray(batch) ? batch[batch.length - 1] : batch;
  if (m.t === "toolCall") worker.postMessage({ t: "toolResult", id: m.id, json: "1" });
});
const report = (word) => { console.log(word); Deno.exit(0); };
worker.on("error", (e) => report(e.code === "ERR_WORKER_OUT_OF_MEMORY" ? "oom" : "error " + e.code));
worker.postMessage({ t: "start", cellId: "1", source, tools: JSON.parse(toolsJson), store: [],
  maxStoredValueBytes: 1048576, maxMessageBytes: 1048576, output: channel.port2 }, [channel.port2]);
setInterval(() => {
  if (performance.now() - last >= 2000) report("parked");
  else worker.postMessage({ t: "ping" });
}, 500);
setTimeout(() => report("running"), 15000);
`;

/**
 * Runs `source` in a Worker with a 16 MiB heap limit, in a process of its own, and asserts that the
 * Worker reaches its limit: it ends with ERR_WORKER_OUT_OF_MEMORY, or (a Deno 2.9.6 race seen on a
 * few per cent of limit hits under load) it parks there and stops answering `ping`. The session
 * runtime turns a parked cell into the same heap-limit exit (its watchdog, `worker/runtime_watchdog.ts`;
 * end-to-end in `tests/crash_test.ts`). An allocation loop that keeps what it allocates cannot run
 * for seconds under 16 MiB, so silence means parked. The probe runs out of process because a Worker
 * whose limit Deno lifted allocates gigabytes, and tearing such a Worker down must not take the
 * test runner with it.
 */
async function assertHeapLimitReached(source: string, tools: CellTool[] = []): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "cmh-heap-" });
  try {
    await Deno.writeTextFile(`${dir}/probe.js`, HEAP_PROBE);
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-config", `${dir}/probe.js`, BOOTSTRAP.href, source, JSON.stringify(tools)],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const word = new TextDecoder().decode(out.stdout).trim();
    assert.equal(
      out.code,
      0,
      `probe ended with ${out.code} ${out.signal}: ${new TextDecoder().decode(out.stderr)}`,
    );
    assert.ok(
      word === "oom" || word === "parked",
      `the cell neither reached its heap limit nor parked: ${word}`,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("heap limit: exhausting the heap at the top of the cell ends the worker", async () => {
  await assertHeapLimitReached(EXHAUST_HEAP);
});

Deno.test("heap limit: exhausting the heap after await null ends the worker", async () => {
  await assertHeapLimitReached(`await null; ${EXHAUST_HEAP}`);
});

Deno.test("heap limit: exhausting the heap in a setTimeout callback ends the worker", async () => {
  await assertHeapLimitReached(`setTimeout(() => { ${EXHAUST_HEAP} }, 0); await new Promise(() => {})`);
});

Deno.test("heap limit: exhausting the heap in .then of a resolved promise ends the worker", async () => {
  await assertHeapLimitReached(
    `Promise.resolve().then(() => { ${EXHAUST_HEAP} }); await new Promise(() => {})`,
  );
});

Deno.test("heap limit: exhausting the heap after a tool result ends the worker", async () => {
  await assertHeapLimitReached(`await tools.x(); ${EXHAUST_HEAP}`, [{ name: "x", description: "" }]);
});

Deno.test("heap limit: exhausting the heap after a refused import() ends the worker", async () => {
  await assertHeapLimitReached(`try { await import("x") } catch {} ${EXHAUST_HEAP}`);
});

// --- SPEC §12.5 scenarios -----------------------------------------------------------------------

Deno.test("scenario 54: console is not a global", async () => {
  assert.deepEqual(await texts('text(Object.hasOwn(globalThis, "console"))'), ["false"]);
});

Deno.test("scenario 55: runtime globals are undefined", async () => {
  const names = SCENARIO_55_GLOBALS;
  const source = `text(JSON.stringify([${names.map((n) => `typeof ${n}`).join(", ")}]))`;
  assert.deepEqual(await texts(source), [JSON.stringify(names.map(() => "undefined"))]);
});

Deno.test("scenario 56: text, image and notify return undefined", async () => {
  const run = await runCell(
    'text([text("first"), image("data:image/png;base64,AAA"), notify("n")].map(v => v === undefined))',
  );
  assert.equal(run.result.error, undefined);
  assert.deepEqual(run.outputs, [
    { t: "text", text: "first" },
    { t: "image", image: image(PNG, "high") },
    { t: "notify", text: "n" },
    { t: "text", text: "[true,true,true]" },
  ]);
});

Deno.test("scenario 57: text converts values", async () => {
  assert.deepEqual(
    await texts('text(); text(null); text(1e21); text({a: 1}); text([1, "x"])'),
    ["undefined", "null", "1e+21", '{"a":1}', '[1,"x"]'],
  );
  assert.deepEqual(
    await texts('text(true); text(10n); text(Symbol("s")); text(() => 1); text("s", "ignored")'),
    ["true", "10", "undefined", "undefined", "s"],
  );
  assert.deepEqual(await texts("text({toJSON() { return [1]; }})"), ["[1]"]);
});

Deno.test("scenario 58: a cyclic value makes text throw a string", async () => {
  assert.deepEqual(
    await texts("const o = {}; o.self = o; try { text(o) } catch (e) { text(typeof e) }"),
    ["string"],
  );
  const [stack] = await texts("const o = {}; o.self = o; try { text(o) } catch (e) { text(e) }");
  assert.match(stack, /^TypeError: Converting circular structure to JSON/);
  assert.deepEqual(
    await texts("try { text({ toJSON() { throw 42 } }) } catch (e) { text(typeof e + e) }"),
    ["string42"],
  );
});

Deno.test("scenario 59: image details from the second argument and the item", async () => {
  const run = await runCell(
    'image("data:image/png;base64,AAA"); image("data:image/png;base64,AAA", "LOW"); ' +
      'image({image_url: "data:image/png;base64,AAA", detail: "high"}, "original"); ' +
      'image({image_url: "data:image/png;base64,AAA", detail: "Auto"}); ' +
      'image({image_url: "data:image/png;base64,AAA", detail: null}, null)',
  );
  assert.equal(run.result.error, undefined);
  assert.deepEqual(items(run), [
    image(PNG, "high"),
    image(PNG, "low"),
    image(PNG, "original"),
    image(PNG, "auto"),
    image(PNG, "high"),
  ]);
});

Deno.test("scenario 60: MCP image blocks", async () => {
  const block = '{type: "image", data: "AAA", mimeType: "image/png", ' +
    '_meta: {"codex/imageDetail": "original"}}';
  const run = await runCell(
    `image(${block}); image(${block}, "low"); ` +
      'image({type: "image", data: "AAA", mime_type: "image/jpeg"}); ' +
      'image({type: "image", data: "AAA", mimeType: "", _meta: {"codex/imageDetail": "LOW"}}); ' +
      'image({type: "image", data: "DATA:image/gif;base64,BBB", mimeType: "image/png"})',
  );
  assert.equal(run.result.error, undefined);
  assert.deepEqual(items(run), [
    image(PNG, "original"),
    image(PNG, "low"),
    image("data:image/jpeg;base64,AAA", "high"),
    image("data:application/octet-stream;base64,AAA", "high"),
    image("DATA:image/gif;base64,BBB", "high"),
  ]);
});

Deno.test("scenario 61: remote image URLs fail the cell with no items", async (t) => {
  const remote =
    "Tool call failed: remote image URLs are not supported in tool outputs. Pass a base64 data URI instead";
  for (
    const source of [
      'image("https://example.com/a.png")',
      'generatedImage({image_url: "http://x/y.png"})',
      'image("HTTPS://example.com/a.png")',
    ]
  ) {
    await t.step(source, async () => {
      const run = await runCell(source);
      assert.equal(run.result.error, remote);
      assert.deepEqual(items(run), []);
    });
  }
  await t.step("other non-data URLs", async () => {
    assert.equal(
      await failure('image("file:///etc/passwd")'),
      "Tool call failed: invalid image output. Pass a base64 data URI instead",
    );
  });
});

Deno.test("scenario 62: an unknown detail fails the cell", async () => {
  assert.equal(
    await failure('image("data:image/png;base64,AAA", "medium")'),
    "image detail must be one of: auto, low, high, original",
  );
});

Deno.test("scenario 63: image rejects what is not an image", async (t) => {
  const generic =
    "image expects a non-empty image URL string, an object with image_url and optional detail, or a raw MCP image block";
  const cases: [string, string][] = [
    ['image({content: [{type: "image", data: "AAA", mimeType: "image/png"}]})', generic],
    ['image("")', generic],
    ["image(1)", generic],
    ["image([])", generic],
    ["image()", generic],
    ["image(null)", generic],
    ["image({image_url: 5})", generic],
    ['image({type: "audio", data: "AAA"})', 'image only accepts MCP image blocks, got "audio"'],
    ['image({type: "image", data: ""})', "image expected MCP image data"],
    [
      'image({image_url: "data:image/png;base64,AAA", detail: 1})',
      "image detail must be a string when provided",
    ],
    ['image("data:image/png;base64,AAA", 1)', "image detail must be a string when provided"],
    ["generatedImage(1)", "generatedImage expects an image generation result object"],
    [
      'generatedImage({image_url: "data:image/png;base64,AAA", output_hint: 1})',
      "generatedImage output_hint must be a string when provided",
    ],
  ];
  for (const [source, expected] of cases) {
    await t.step(source, async () => {
      assert.deepEqual(
        await texts(`try { ${source}; text("no throw") } catch (e) { text(typeof e); text(e) }`),
        ["string", expected],
      );
    });
  }
});

Deno.test("scenario 64: generatedImage appends the image, then its hint", async () => {
  const run = await runCell(
    'generatedImage({image_url: "data:image/png;base64,AAA", output_hint: "generated image save hint"})',
  );
  assert.equal(run.result.error, undefined);
  assert.deepEqual(items(run), [image(PNG, "high"), "generated image save hint"]);
});

Deno.test("scenario 65: store and load", async () => {
  assert.deepEqual(await texts('store(1, "a"); text(load("1"))'), ["a"]);
  assert.equal(
    await failure('store("k", undefined)'),
    'Unable to store "k". Only plain serializable objects can be stored.',
  );
  assert.deepEqual(
    await texts('store("o", {a: 1}); const v = load("o"); v.a = 2; text(load("o").a)'),
    ["1"],
  );
  assert.deepEqual(
    await texts(
      "try { store(Symbol()) } catch (e) { text(e) } try { load(Symbol()) } catch (e) { text(e) } " +
        'text(typeof load("absent"))',
    ),
    ["store key must be a string", "load key must be a string", "undefined"],
  );
});

Deno.test("scenario 66: notify rejects blank text", async () => {
  assert.equal(await failure('notify("   ")'), "notify expects non-empty text");
});

Deno.test("scenario 67: exit ends the cell successfully", async () => {
  const run = await runCell('text("before"); exit(); text("after");');
  assert.equal(run.result.error, undefined);
  assert.deepEqual(items(run), ["before"]);
  // exit() ends the cell at once, as the reference's termination does: catching it, a finally
  // block or code after it produce nothing.
  assert.deepEqual(await texts(`text("a"); try { exit() } catch (e) { text(e) } text("continued")`), ["a"]);
  assert.deepEqual(await texts(`try { exit() } finally { text("finally") }`), []);
  assert.deepEqual(await texts('await null; text("x"); exit()'), ["x"]);
});

Deno.test("scenario 68: exit in a timer ends the cell successfully", async () => {
  assert.deepEqual(await texts("setTimeout(() => exit(), 0); await new Promise(() => {})"), []);
});

Deno.test("scenario 69: setTimeout and clearTimeout argument rules", async () => {
  assert.equal(await failure('setTimeout("x")'), "setTimeout expects a function callback");
  assert.equal(
    await failure("clearTimeout(Symbol())"),
    "clearTimeout expects a numeric timeout id",
  );
  assert.deepEqual(
    await texts(
      'clearTimeout(); clearTimeout(-1); clearTimeout(null); clearTimeout(NaN); clearTimeout("x"); ' +
        "text(typeof setTimeout(() => {}, 1)); text(setTimeout(() => {}))",
    ),
    ["number", "2"],
  );
});

Deno.test("setTimeout callbacks run in order, with no this and no arguments, and can be cleared", async () => {
  assert.deepEqual(
    await texts(
      "const done = new Promise((resolve) => {" +
        ' setTimeout(function (...a) { text(String(this) + a.length); resolve() }, 20, "extra");' +
        ' const id = setTimeout(() => text("cleared"), 5);' +
        ' setTimeout(() => text("first"), 1);' +
        " clearTimeout(id + 0.5);" +
        "}); await done",
    ),
    ["first", "undefined0"],
  );
});

Deno.test("scenario 70: pending timers are discarded when the cell completes", async () => {
  const run = await runCell('setTimeout(() => text("late"), 50); text("now")');
  assert.equal(run.result.error, undefined);
  assert.deepEqual(items(run), ["now"]);
});

Deno.test("scenario 71: an exception escaping a timer fails the cell", async () => {
  const error = await failure(
    'setTimeout(() => { throw new Error("tick") }, 0); await new Promise(() => {})',
  );
  assert.match(error, /^Error: tick\n\s+at exec_main\.mjs:1:/);
  assert.equal(
    await failure('setTimeout(() => { throw "str" }, 0); await new Promise(() => {})'),
    "str",
  );
});

Deno.test("scenario 72 (dynamic half): import() rejects with a string", async () => {
  assert.deepEqual(await texts('try { await import("./x.js") } catch (e) { text(typeof e); text(e) }'), [
    "string",
    "unsupported import in exec",
  ]);
  assert.equal(await failure('await import("node:fs")'), "unsupported import in exec");
  // The rejection settles before the cell completes, as in the reference.
  assert.deepEqual(await texts('import("x").catch((e) => text("rejected: " + e)); text("sync")'), [
    "sync",
    "rejected: unsupported import in exec",
  ]);
});

Deno.test("scenario 74 and 80d: syntax errors fail the cell with SyntaxError text", async (t) => {
  for (const source of ["text(1", "export const x = 1; export const x = 2;", "<!-- html comment"]) {
    await t.step(source, async () => {
      const run = await runCell(source);
      assert.match(run.result.error ?? "", /^SyntaxError: /);
      assert.deepEqual(run.outputs, []);
    });
  }
});

Deno.test("scenario 75: thrown values become error text", async (t) => {
  const cases: [string, (error: string) => void][] = [
    ['throw "plain failure"', (e) => assert.equal(e, "plain failure")],
    ['throw new Error("boom")', (e) => assert.match(e, /^Error: boom\n\s+at exec_main\.mjs:1:7/)],
    ['await Promise.reject("rejected")', (e) => assert.equal(e, "rejected")],
    ["throw 42", (e) => assert.equal(e, "42")],
    ["throw {stack: 'custom stack'}", (e) => assert.equal(e, "custom stack")],
    ["throw {toString() { return 'custom' }}", (e) => assert.equal(e, "custom")],
    // A value whose conversion to a string throws (a symbol too) describes as "".
    ["throw {toString() { throw 1 }}", (e) => assert.equal(e, "")],
    ["throw Object.create(null)", (e) => assert.equal(e, "")],
    ['throw Symbol("s")', (e) => assert.equal(e, "")],
    ["throw {stack: 5}", (e) => assert.equal(e, "[object Object]")],
    ['throw "__codex_code_mode_exit__"', (e) => assert.equal(e, CELL_EXIT_SENTINEL)],
  ];
  for (const [source, check] of cases) {
    await t.step(source, async () => check(await failure(source)));
  }
});

Deno.test("scenario 76: unawaited rejections are ignored", async () => {
  assert.deepEqual(await texts('Promise.reject("ignored"); text("ok")'), ["ok"]);
  assert.deepEqual(
    await texts('Promise.reject(new Error("x")); import("y"); await null; await null; text("ok")'),
    ["ok"],
  );
});

Deno.test("scenario 77: Intl has full ICU data", async () => {
  assert.deepEqual(
    await texts(
      'text(new Date(Date.UTC(2025, 0, 2, 3, 4, 5)).toLocaleString("fr-FR", {timeZone: "UTC", ' +
        'weekday: "long", day: "numeric", month: "long", hour: "2-digit", minute: "2-digit", ' +
        'second: "2-digit"}))',
    ),
    ["jeudi 2 janvier à 03:04:05"],
  );
});

Deno.test("scenario 78: globals do not leak into the next cell", async () => {
  assert.deepEqual(await texts("globalThis.leak = 1; var v = 2; text(typeof leak)"), ["number"]);
  assert.deepEqual(await texts("text(typeof leak); text(typeof v)"), ["undefined", "undefined"]);
});

Deno.test("scenario 79: helpers use the original built-ins", async () => {
  const run = await runCell(
    'JSON.stringify = () => "x"; JSON.parse = () => "y"; String.prototype.trim = () => ""; ' +
      'Array.isArray = () => true; Promise.prototype.then = () => { throw "then" }; ' +
      "Object.defineProperty = () => { throw 'dp' }; Reflect.apply = () => { throw 'ra' }; " +
      'String = () => "z"; Number = () => 0; ' +
      'text({a: 1}); store("k", {a: 1}); text(load("k").a); notify(" n "); ' +
      'image({image_url: "data:image/png;base64,AAA"}); setTimeout(() => text("timer"), 0)',
  );
  assert.equal(run.result.error, undefined);
  assert.deepEqual(run.outputs, [
    { t: "text", text: '{"a":1}' },
    { t: "text", text: "1" },
    { t: "notify", text: " n " },
    { t: "image", image: image(PNG, "high") },
  ]);
  assert.deepEqual(run.result.writes, [["k", '{"a":1}']]);
  assert.deepEqual(
    await texts('text(load("k").a)', { store: commit([], run.result) }),
    ["1"],
  );
});

Deno.test("replacing Promise.prototype.then or species does not stop completion", async () => {
  assert.deepEqual(
    await texts(
      'Promise.prototype.then = function () { throw "hijacked" }; ' +
        "Object.defineProperty(Promise, Symbol.species, { get() { throw 'species' } }); " +
        'Promise.prototype.constructor = 5; text("ok")',
    ),
    ["ok"],
  );
  assert.equal(
    await failure('Promise.prototype.then = () => {}; throw "still fails"'),
    "still fails",
  );
});

Deno.test("scenario 80: tools and ALL_TOOLS", async () => {
  const tools = [
    { name: "hidden_dynamic_tool", description: "hidden" },
    { name: "echo", description: "echoes" },
  ];
  assert.deepEqual(
    await texts(
      "text(JSON.stringify(ALL_TOOLS.map(t => t.name))); text(typeof tools.hidden_dynamic_tool); " +
        "text(JSON.stringify(ALL_TOOLS)); text(Object.keys(tools))",
      { tools },
    ),
    [
      '["hidden_dynamic_tool","echo"]',
      "function",
      JSON.stringify(tools),
      '["hidden_dynamic_tool","echo"]',
    ],
  );
});

Deno.test("later duplicate tools overwrite earlier ones in tools", async () => {
  assert.deepEqual(
    await texts("text(Object.keys(tools)); text(ALL_TOOLS.length); await tools.a(); text('ok')", {
      tools: [{ name: "a", description: "1" }, { name: "a", description: "2" }],
      answer: () => ({ json: "null" }),
    }),
    ['["a"]', "2", "ok"],
  );
});

Deno.test("scenario 80a: helpers belong to the context's realm", async () => {
  assert.deepEqual(
    await texts(
      'text(text.constructor("return typeof process")()); ' +
        'text(globalThis.constructor.constructor("return typeof Deno")()); ' +
        "text(Object.getPrototypeOf(text) === Function.prototype); " +
        "text((await tools.echo({})).constructor === Object)",
      {
        tools: [{ name: "echo", description: "" }],
        answer: () => ({ json: '{"value":"output"}' }),
      },
    ),
    ["undefined", "undefined", "true", "true"],
  );
});

Deno.test("scenario 80b: stack frames name exec_main.mjs with user line numbers", async () => {
  const [stack] = await texts("try { null.x } catch (e) { text(e.stack) }");
  assert.match(stack, /exec_main\.mjs:1:/);
  assert.ok(!stack.includes("data:") && !stack.includes("base64") && !stack.includes("blob:"));
  const [multi] = await texts(
    '\n\nfunction f() {\n  return new Error("deep").stack;\n}\ntext(f())',
  );
  assert.match(multi, /^Error: deep\n\s+at f \(exec_main\.mjs:4:10\)\n\s+at exec_main\.mjs:6:6/);
  assert.ok(!multi.includes("file:"), "no frame of the bootstrap below the user's frames");
});

Deno.test("stacks of timer callbacks and tool continuations hold only user frames", async () => {
  const run = await runCell(
    'await new Promise((resolve) => setTimeout(() => { text(new Error("t").stack); resolve() }, 0)); ' +
      'await tools.echo(); text(new Error("c").stack)',
    { tools: [{ name: "echo", description: "" }], answer: () => ({ json: "1" }) },
  );
  const stacks = items(run) as string[];
  assert.equal(stacks.length, 2);
  for (const stack of stacks) {
    assert.match(stack, /exec_main\.mjs:1:/);
    assert.ok(!stack.includes("file:") && !stack.includes("ext:"), stack);
  }
});

Deno.test("stacks after await keep their async frames and hold no outer frame", async () => {
  const [stack] = await texts(
    "async function inner() { await null; return new Error('a').stack }\n" +
      "async function outer() { return await inner() }\n" +
      "text(await outer())",
  );
  assert.match(
    stack,
    /^Error: a\n\s+at inner \(exec_main\.mjs:1:\d+\)\n\s+at async outer \(exec_main\.mjs:2:\d+\)\n\s+at async exec_main\.mjs:3:6$/,
  );
});

Deno.test("scenario 80c: imports built by eval or Function are refused", async () => {
  assert.deepEqual(
    await texts(
      "try { await eval('import(\"node:fs\")') } catch (e) { text(e) } " +
        "try { await Function('return import(\"node:fs\")')() } catch (e) { text(e) } " +
        "try { await (0, eval)('import(\"node:fs\")') } catch (e) { text(e) }",
    ),
    ["unsupported import in exec", "unsupported import in exec", "unsupported import in exec"],
  );
});

Deno.test("scenario 80g: image reads image_url, then a raw MCP block as its JSON (enumerable properties, in order)", async () => {
  const getters = (data: string) =>
    "const log = []; " +
    "const meta = { get 'codex/imageDetail'() { log.push('detail'); return 'low' } }; " +
    "const o = { get image_url() { log.push('image_url') }, get type() { log.push('type'); return 'image' }, " +
    `get data() { ${data} }, get mimeType() { log.push('mimeType'); return 'image/png' }, ` +
    "get mime_type() { log.push('mime_type'); return 1 }, get _meta() { log.push('_meta'); return meta } };";
  const ok = await runCell(getters("log.push('data'); return 'AAA'") + "image(o); text(JSON.stringify(log))");
  assert.equal(ok.result.error, undefined);
  assert.deepEqual(items(ok), [
    image(PNG, "low"),
    // image_url once by itself, then again with every enumerable property, as the reference does.
    '["image_url","image_url","type","data","mimeType","mime_type","_meta","detail"]',
  ]);
  // What a getter throws comes back as its description, a string (its stack: the cell's frames).
  const [kind, thrown] = await texts(
    getters("throw new Error('nope')") + "try { image(o) } catch (e) { text(typeof e); text(e) }",
  );
  assert.equal(kind, "string");
  assert.match(
    thrown,
    /^Error: nope\n {4}at get data \(exec_main\.mjs:1:\d+\)\n {4}at exec_main\.mjs:1:\d+$/,
  );
  // Non-enumerable properties are not part of the block.
  assert.equal(
    await failure("image(Object.defineProperty({}, 'type', { get() { return 'image' } }))"),
    "image expects a non-empty image URL string, an object with image_url and optional detail, " +
      "or a raw MCP image block",
  );
  const form2 = await runCell(
    "const log = []; image({ get image_url() { log.push('image_url'); return " +
      "'data:image/png;base64,AAA' }, get detail() { log.push('detail'); return 'auto' }, " +
      "get type() { log.push('type') } }); text(log.join())",
  );
  assert.deepEqual(items(form2), [image(PNG, "auto"), "image_url,detail"]);
  // A detail getter that throws: the item is out first, then its exception (the reference reads
  // the detail as absent and leaves the exception pending).
  const pending = await runCell(
    "try { image({ image_url: 'data:image/png;base64,AAA', get detail() { throw new Error('gd') } }) }" +
      " catch (e) { text(typeof e); text(e.message) }",
  );
  assert.deepEqual(items(pending), [image(PNG, "high"), "object", "gd"]);
});

// --- the reference host's helpers and texts (tests/reference/cells/) ----------------------------

const WAV = "data:audio/wav;base64,AAA";
const IMAGE_GENERIC = "image expects a non-empty image URL string, an object with image_url and optional " +
  "detail, or a raw MCP image block";
const AUDIO_GENERIC =
  "audio expects a non-empty audio URL string, an object with audio_url, or a raw MCP audio block";

Deno.test("audio() emits an audio item from a URL, {audio_url} or a raw MCP audio block", async () => {
  const run = await runCell(
    `audio("${WAV}"); audio({ audio_url: "${WAV}" }, "ignored"); ` +
      'audio({ type: "audio", data: "AAA", mimeType: "audio/wav" }); audio({ type: "audio", data: "AAA" })',
  );
  assert.equal(run.result.error, undefined);
  assert.deepEqual(items(run), [
    { audio: WAV },
    { audio: WAV },
    { audio: WAV },
    { audio: "data:application/octet-stream;base64,AAA" },
  ]);
  for (
    const [source, error] of [
      ["audio(42)", AUDIO_GENERIC],
      ['audio("")', AUDIO_GENERIC],
      ["audio({ audio_url: 5 })", AUDIO_GENERIC],
      ['audio("https://x/y.wav")', "Tool call failed: invalid audio output. Pass a base64 data URI instead"],
      ['audio({ type: "image", data: "AAA" })', 'audio only accepts MCP audio blocks, got "image"'],
      ['audio({ type: "audio" })', "audio expected MCP audio data"],
    ]
  ) assert.equal(await failure(source), error, source);
});

Deno.test("generatedImage() takes an object: its output_hint, then image()'s rules", async () => {
  const run = await runCell(
    `generatedImage({ image_url: "${PNG}", output_hint: "hint" }); generatedImage({ image_url: "${PNG}", ` +
      `output_hint: "" }); generatedImage({ type: "image", data: "AAA", mimeType: "image/png" })`,
  );
  assert.deepEqual(items(run), [image(PNG, "high"), "hint", image(PNG, "high"), image(PNG, "high")]);
  for (
    const [source, error] of [
      ["generatedImage(42)", "generatedImage expects an image generation result object"],
      [`generatedImage("${PNG}")`, "generatedImage expects an image generation result object"],
      ['generatedImage({ result: "AAA" })', IMAGE_GENERIC],
      [
        `generatedImage({ image_url: "${PNG}", output_hint: null })`,
        "generatedImage output_hint must be a string when provided",
      ],
      [
        "generatedImage({ get output_hint() { throw new Error('x') } })",
        "failed to read generatedImage output_hint",
      ],
    ]
  ) assert.equal(await failure(source), error, source);
});

Deno.test("content() emits MCP content blocks, one or an iterable of them", async () => {
  const run = await runCell(
    'content({ type: "text", text: "t" }); ' +
      'content([{ type: "image", data: "AAA", mimeType: "image/png", _meta: { "codex/imageDetail": "low" } }, ' +
      '{ type: "audio", data: "AAA", mimeType: "audio/wav" }]); ' +
      'content(new Set([{ type: "resource", resource: { uri: "u", text: "r" } }])); ' +
      'content((function* () { yield { type: "resource_link", uri: "u", name: "n", size: 5 } })()); ' +
      "text(String(content({ type: 'text', text: 'r' })))",
  );
  assert.equal(run.result.error, undefined);
  assert.deepEqual(items(run), [
    "t",
    image(PNG, "low"),
    { audio: WAV },
    '{"type":"resource","resource":{"uri":"u","text":"r"}}',
    '{"type":"resource_link","uri":"u","name":"n","size":5}',
    "r",
    "undefined",
  ]);
  const generic = "content expects one MCP ContentBlock";
  for (
    const [source, error] of [
      ['content("text")', generic],
      ["content()", generic],
      ["content(42)", generic],
      ['content({ type: "video" })', generic],
      ['content({ type: "image", data: "AAA", mimeType: "a", mime_type: "b" })', generic],
      ['content({ type: "text", text: "x", n: 2 ** 64 })', generic],
      [
        'content({ type: "text", text: "x", _meta: { "codex/encryptedContent": true } })',
        "content cannot emit encrypted MCP text",
      ],
      ["content(function () {})", "failed to serialize JavaScript value: expected value at line 1 column 1"],
    ]
  ) assert.equal(await failure(source), error, source);
  // An iterable stops at the first bad block, after the good ones before it.
  const partial = await runCell('content([{ type: "text", text: "a" }, 5, { type: "text", text: "c" }])');
  assert.deepEqual(items(partial), ["a"]);
  assert.equal(partial.result.error, generic);
  // Frames inside content() read as the reference's unnamed script.
  assert.deepEqual(
    await texts(
      "try { content({ get type() { throw new Error('gt') } }) } catch (e) { text(typeof e); text(e) }",
    ),
    [
      "string",
      "Error: gt\n    at get type (exec_main.mjs:1:36)\n    at content (<anonymous>:78:14)\n    at exec_main.mjs:1:7",
    ],
  );
});

Deno.test("as_settled and stream_settled hand out settlements in settlement order", async () => {
  assert.deepEqual(
    await texts(
      "const d = (v, ms) => new Promise((r) => setTimeout(() => r(v), ms)); " +
        "for await (const r of as_settled([d('slow', 30), d('fast', 1), Promise.reject('no'), 3])) " +
        "text(JSON.stringify(r)); " +
        "for await (const r of as_settled(new Map([['k', 1]]))) text(JSON.stringify(r)); " +
        "await stream_settled([1, 2], async (r) => { await 0; text(r.index + ':' + r.status) }); " +
        "for await (const r of as_settled([1, 2, 3])) { text('first ' + r.index); break } " +
        "text([as_settled.name, as_settled.length, stream_settled.name, stream_settled.length].join())",
    ),
    [
      '{"index":2,"status":"rejected","reason":"no"}',
      '{"index":3,"status":"fulfilled","value":3}',
      '{"index":1,"status":"fulfilled","value":"fast"}',
      '{"index":0,"status":"fulfilled","value":"slow"}',
      '{"index":"k","status":"fulfilled","value":1}',
      "0:fulfilled",
      "1:fulfilled",
      "first 0",
      "as_settled,1,stream_settled,2",
    ],
  );
  assert.equal(
    await failure("as_settled(5)"),
    "TypeError: promises is not iterable\n    at as_settled (<anonymous>:25:27)\n    at exec_main.mjs:1:1",
  );
  assert.equal(
    await failure("await stream_settled([1])"),
    "TypeError: stream_settled requires a callback\n    at stream_settled (<anonymous>:59:13)\n    at exec_main.mjs:1:7",
  );
});

Deno.test("helpers look like the reference's native functions, as enumerable globals", async () => {
  assert.deepEqual(
    await texts(
      "text(String(text)); text(JSON.stringify([text.name, text.length, image.name, setTimeout.length])); " +
        "text(Object.getOwnPropertyNames(store).join()); text(store.prototype.constructor === store); " +
        "text(Object.keys(globalThis).sort().join()); new text('constructed'); text(text.bind(null).name)",
    ),
    [
      "function () { [native code] }",
      '["",0,"",0]',
      "length,name,prototype",
      "true",
      "ALL_TOOLS,as_settled,audio,clearTimeout,content,exit,generatedImage,image,load,notify,setTimeout,store," +
      "stream_settled,text,tools,yield_control",
      "constructed",
      "bound ",
    ],
  );
});

Deno.test("text, store, load and the timers follow the reference's conversions and texts", async () => {
  assert.deepEqual(
    await texts(
      "text(NaN); text(-0); text(new Map([[1, 2]])); text({ toJSON() { return undefined } }); " +
        "store('k', { a: undefined, b: [undefined, 1], c: NaN }); text(JSON.stringify(load('k'))); " +
        "store(1, 2); text(load('1')); text(typeof load('missing'))",
    ),
    ["NaN", "0", "{}", "undefined", '{"b":[null,1],"c":null}', "2", "undefined"],
  );
  for (
    const [source, error] of [
      ['store("u", undefined)', 'Unable to store "u". Only plain serializable objects can be stored.'],
      [
        'store("a\\u0001\\n", undefined)',
        'Unable to store "a\\u{1}\\n". Only plain serializable objects can be stored.',
      ],
      [
        'store("f", function () {})',
        "failed to serialize JavaScript value: expected value at line 1 column 1",
      ],
      [
        'store("s", "\\ud800")',
        "failed to serialize JavaScript value: unexpected end of hex escape at line 1 column 8",
      ],
      [
        'store("s", "\\udc00")',
        "failed to serialize JavaScript value: lone leading surrogate in hex escape at line 1 column 7",
      ],
      [
        'let o = 1; for (let i = 0; i < 200; i++) o = [o]; store("d", o)',
        "failed to serialize JavaScript value: recursion limit exceeded at line 1 column 128",
      ],
      [
        'store("r", { "$serde_json::private::RawValue": 1 })',
        "failed to serialize JavaScript value: reserved JSON object key",
      ],
      ["store(Symbol(), 1)", "store key must be a string"],
      ["load(Symbol())", "load key must be a string"],
      ["clearTimeout(1n)", "clearTimeout expects a numeric timeout id"],
      ["clearTimeout({ valueOf() { throw 1 } })", "clearTimeout expects a numeric timeout id"],
    ]
  ) assert.equal(await failure(source), error, source);
  // store() still takes 127 levels of nesting.
  assert.deepEqual(
    await texts('let o = 1; for (let i = 0; i < 127; i++) o = [o]; store("d", o); text("ok")'),
    ["ok"],
  );
  // setTimeout's delay is converted with ToNumber: its TypeError is thrown as is.
  assert.equal(
    await failure("setTimeout(() => {}, 1n)"),
    "TypeError: Cannot convert a BigInt value to a number\n    at exec_main.mjs:1:1",
  );
});

Deno.test("a cell completes once its queued microtasks have run", async () => {
  assert.deepEqual(
    await texts(
      "Promise.resolve().then(() => text('m1')).then(() => text('m2')).then(() => text('m3')); text('sync')",
    ),
    ["sync", "m1", "m2", "m3"],
  );
  // A cell that replaced the promise machinery still completes (Deno settles the module's promise
  // through it).
  assert.deepEqual(await texts("Promise.prototype.then = function () {}; text('ok')"), ["ok"]);
  assert.deepEqual(
    await texts(
      "Object.defineProperty(Promise, Symbol.species, { get() { throw 'species' } }); " +
        "Promise.prototype.constructor = 5; text('ok')",
    ),
    ["ok"],
  );
  // A thrown string that happens to equal exit()'s sentinel is a failure like any other.
  assert.equal(await failure('throw "__codex_code_mode_exit__"'), "__codex_code_mode_exit__");
});

Deno.test("scenario 80h: every removed name is absent, and a later rejection is harmless", async () => {
  const [report] = await texts(
    `const bad = []; for (const n of ${JSON.stringify(REMOVED_GLOBALS)}) {` +
      " if (Object.hasOwn(globalThis, n) || n in globalThis || typeof globalThis[n] !== 'undefined')" +
      " bad.push(n); }" +
      " Promise.reject('x'); await null; text(JSON.stringify(bad))",
  );
  assert.equal(report, "[]");
});

Deno.test("the global holds exactly the allowlist plus the helpers, the reference host's names", async () => {
  const [names] = await texts("text(JSON.stringify(Object.getOwnPropertyNames(globalThis)))");
  const helpers = [...HELPER_FUNCTIONS, ...REFERENCE_EXTRA_HELPERS, "tools", "ALL_TOOLS"];
  assert.deepEqual([...JSON.parse(names)].sort(), [...REFERENCE_GLOBAL_NAMES]);
  const allowed = new Set([...CELL_GLOBAL_ALLOWLIST, ...helpers]);
  const present: string[] = JSON.parse(names);
  assert.deepEqual(present.filter((n) => !allowed.has(n)), []);
  for (const helper of helpers) assert.ok(present.includes(helper), helper);
  assert.deepEqual(
    await texts("text(Object.getOwnPropertySymbols(globalThis).length)"),
    ["0"],
  );
});

// --- SPEC §12.6 stored values at cell level ----------------------------------------------------

Deno.test("scenario 81: a stored value is visible to the next cell", async () => {
  const first = await runCell('store("key", "visible")');
  assert.deepEqual(first.result, { t: "result", writes: [["key", '"visible"']] });
  assert.deepEqual(await texts('text(load("key"))', { store: commit([], first.result) }), [
    "visible",
  ]);
});

Deno.test("scenario 82: writes made before a failure are reported", async () => {
  const first = await runCell('store("k", "v"); throw new Error("boom")');
  assert.match(first.result.error ?? "", /boom/);
  assert.deepEqual(first.result.writes, [["k", '"v"']]);
  assert.deepEqual(await texts('text(load("k"))', { store: commit([], first.result) }), ["v"]);
});

Deno.test("scenario 83a: store enforces maxStoredValueBytes over the cell's view", async () => {
  const limits = { maxStoredValueBytes: MIB };
  const first = await runCell(
    'store("a", "x".repeat(600000)); try { store("b", "y".repeat(600000)) } catch (e) { text(e) }',
    limits,
  );
  assert.equal(first.result.error, undefined);
  assert.deepEqual(items(first), ["stored values exceed the 1048576-byte session limit"]);
  assert.deepEqual(first.result.writes.map(([k]) => k), ["a"]);
  const store = commit([], first.result);
  assert.deepEqual(
    await texts('text(load("a").length); text(typeof load("b"))', { ...limits, store }),
    ["600000", "undefined"],
  );
  // The snapshot counts too, and overwriting a key replaces its bytes instead of adding them.
  assert.deepEqual(
    await texts(
      'try { store("b", "y".repeat(600000)) } catch (e) { text(e) } ' +
        'store("a", "z".repeat(600000)); store("a", 1); store("b", "y".repeat(600000)); text("ok")',
      { ...limits, store },
    ),
    ["stored values exceed the 1048576-byte session limit", "ok"],
  );
});

Deno.test("the size of stored values counts key bytes plus JSON text bytes in UTF-8", async () => {
  // "é" is 2 bytes; key "é" (2) + JSON '"é"' (4) = 6 bytes.
  assert.deepEqual(
    await texts('store("é", "é"); try { store("k", 1) } catch (e) { text(e) }', {
      maxStoredValueBytes: 7,
    }),
    ["stored values exceed the 7-byte session limit"],
  );
  assert.deepEqual(
    await texts('store("é", "é"); store("k", 1); text("fits")', { maxStoredValueBytes: 8 }),
    ["fits"],
  );
});

Deno.test("writes list each key once with its last JSON text, in first-write order", async () => {
  const run = await runCell(
    'store("b", 1); store("a", {x: [1, 2]}); store("b", null); store("c", new Date(0))',
  );
  assert.deepEqual(run.result.writes, [
    ["b", "null"],
    ["a", '{"x":[1,2]}'],
    ["c", '"1970-01-01T00:00:00.000Z"'],
  ]);
});

Deno.test("a write set of more than one batch is posted ahead of the result, one storedWrites message per batch", async () => {
  const run = await runCell(
    'for (let i = 0; i < 20_000; i++) store("key-" + i, "v".repeat(i % 7)); text("done")',
  );
  assert.equal(run.result.error, undefined);
  assert.deepEqual(run.result.writes, []);
  const batches = run.outputs.filter((m) => m.t === "storedWrites") as { writes: [string, string][] }[];
  assert.ok(batches.length > 1, `${batches.length} batches`);
  const all = batches.flatMap((b) => b.writes);
  assert.equal(all.length, 20_000);
  assert.deepEqual(all[19_999], ["key-19999", JSON.stringify("v".repeat(19_999 % 7))]);
  assert.deepEqual(run.outputs.map((m) => m.t).filter((t) => t !== "storedWrites"), ["text"]);
});

Deno.test("load reads the snapshot and reports corrupt values", async () => {
  assert.deepEqual(
    await texts(
      'text(load("n").list[1]); try { load("bad") } catch (e) { text(e) }',
      { store: [["n", '{"list":[1,2]}'], ["bad", "{"]] },
    ),
    ["2", "failed to load stored value"],
  );
});

// --- tool calls and notifications (SPEC §7.1, §5.3) ---------------------------------------------

Deno.test("tool calls get per-cell ids, post their input, and settle from toolResult", async () => {
  await using cell = await CellHarness.open();
  cell.start(
    "const a = tools.echo({value: 1}); const b = tools.echo(); const c = tools.other(undefined);" +
      " const d = tools.echo(null); text(JSON.stringify(await b)); text((await a).v);" +
      " try { await c } catch (e) { text(typeof e + ':' + e) } text(String(await d))",
    { tools: [{ name: "echo", description: "" }, { name: "other", description: "" }] },
  );
  const calls = await cell.until((m) => m.t === "toolCall" && m.id === "tool-4");
  assert.deepEqual(calls.slice(1), [
    { t: "toolCall", id: "tool-1", name: "echo", input: '{"value":1}' },
    { t: "toolCall", id: "tool-2", name: "echo" },
    { t: "toolCall", id: "tool-3", name: "other" },
    { t: "toolCall", id: "tool-4", name: "echo", input: "null" },
  ]);
  // Results arrive in any order.
  cell.send({ t: "toolResult", id: "tool-2", json: '[1,"x"]' });
  assert.deepEqual(await cell.until((m) => m.t === "text"), [
    { t: "toolResultConsumed", id: "tool-2" },
    { t: "text", text: '[1,"x"]' },
  ]);
  cell.send({ t: "toolResult", id: "tool-3", error: "no code-mode tool subscription matches" });
  cell.send({ t: "toolResult", id: "tool-1", json: '{"v":"one"}' });
  cell.send({ t: "toolResult", id: "tool-4", json: "null" });
  cell.send({ t: "toolResult", id: "tool-4", json: "2" }); // a duplicate is ignored
  assert.deepEqual(await cell.until((m) => m.t === "result"), [
    { t: "toolResultConsumed", id: "tool-3" },
    { t: "toolResultConsumed", id: "tool-1" },
    { t: "text", text: "one" },
    { t: "text", text: "string:no code-mode tool subscription matches" },
    { t: "toolResultConsumed", id: "tool-4" },
    { t: "text", text: "null" },
    { t: "result", writes: [] },
  ]);
  await cell.assertQuiet();
});

Deno.test("an awaited tool rejection fails the cell with that string", async () => {
  assert.equal(
    await failure("await tools.echo(1)", {
      tools: [{ name: "echo", description: "" }],
      answer: () => ({ error: "tool said no" }),
    }),
    "tool said no",
  );
});

Deno.test("tool input conversion is the reference's and throws its errors synchronously", async () => {
  const calls: ToolCallOutput[] = [];
  const run = await runCell(
    "await tools.echo({n: NaN, d: new Date(0), m: new Map([[1, 2]]), s: new Set([1]), " +
      "j: {toJSON() { return 'J' }}, u: undefined}); await tools.echo(); " +
      "try { tools.echo(Symbol()) } catch (e) { text(e) } " +
      "try { tools.echo({ s: '\\ud800' }) } catch (e) { text(e) } " +
      "const o = {}; o.o = o; try { tools.echo(o) } catch (e) { text(typeof e) } " +
      "try { tools.echo(1n) } catch (e) { text(e) }",
    {
      tools: [{ name: "echo", description: "" }],
      answer: (call) => {
        calls.push(call);
        return { json: "0" };
      },
    },
  );
  assert.equal(run.result.error, undefined);
  assert.deepEqual(calls.map((c) => c.input), [
    '{"n":null,"d":"1970-01-01T00:00:00.000Z","m":{},"s":{},"j":"J"}',
    undefined,
  ]);
  const [symbol, surrogate, kind, bigint] = items(run) as string[];
  assert.equal(symbol, "failed to serialize JavaScript value: expected value at line 1 column 1");
  assert.equal(
    surrogate,
    "failed to serialize JavaScript value: unexpected end of hex escape at line 1 column 13",
  );
  assert.equal(kind, "string");
  assert.match(bigint, /^TypeError: Do not know how to serialize a BigInt/);
});

Deno.test("an oversized tool input rejects without posting and without using an id", async () => {
  const run = await runCell(
    'try { await tools.echo("x".repeat(100)) } catch (e) { text(typeof e); text(e) } ' +
      'await tools.echo("é".repeat(4)); try { await tools.echo("é".repeat(5)) } catch (e) { text("big") }',
    {
      tools: [{ name: "echo", description: "" }],
      maxMessageBytes: 10,
      answer: () => ({ json: "1" }),
    },
  );
  assert.equal(run.result.error, undefined);
  assert.deepEqual(run.outputs, [
    { t: "text", text: "string" },
    { t: "text", text: "code-mode tool invocation exceeds the 10-byte gRPC message limit" },
    { t: "toolCall", id: "tool-1", name: "echo", input: '"éééé"' },
    { t: "toolResultConsumed", id: "tool-1" },
    { t: "text", text: "big" },
  ]);
});

Deno.test("notify enforces maxMessageBytes in UTF-8 bytes", async () => {
  const run = await runCell(
    'notify("🦀".repeat(2)); try { notify("🦀".repeat(3)) } catch (e) { text(e) } notify({a: 1})',
    { maxMessageBytes: 8 },
  );
  assert.deepEqual(run.outputs, [
    { t: "notify", text: "🦀🦀" },
    { t: "text", text: "code-mode notification exceeds the 8-byte gRPC message limit" },
    { t: "notify", text: '{"a":1}' },
  ]);
});

// --- sandbox --------------------------------------------------------------------------------

Deno.test("sandbox: runtime APIs are unreachable from a cell", async (t) => {
  const names = [
    "Deno",
    "process",
    "require",
    "Buffer",
    "fetch",
    "WebSocket",
    "Worker",
    "SharedArrayBuffer",
    "Atomics",
    "WebAssembly",
    "module",
    "exports",
    "__dirname",
    "console",
    "queueMicrotask",
    "setInterval",
  ];
  for (const name of names) {
    await t.step(`typeof ${name}`, async () => {
      assert.deepEqual(
        await texts(`text(typeof ${name}); text(${JSON.stringify(name)} in globalThis)`),
        ["undefined", "false"],
      );
    });
  }
});

Deno.test("sandbox: import() of any specifier is refused with a string", async (t) => {
  for (
    const specifier of [
      "node:fs",
      "npm:x",
      "https://example.com/mod.js",
      "file:///etc/passwd",
      "data:text/javascript,export default 1",
      "./cell_bootstrap.ts",
    ]
  ) {
    await t.step(specifier, async () => {
      assert.deepEqual(
        await texts(
          `const p = import(${JSON.stringify(specifier)}); text(p instanceof Promise); ` +
            "try { await p; text('loaded') } catch (e) { text(typeof e); text(e) }",
        ),
        ["true", "string", "unsupported import in exec"],
      );
    });
  }
});

Deno.test("sandbox: Function, eval and AsyncFunction reach only the context", async (t) => {
  const probes: [string, string][] = [
    ['Function("return this")() === globalThis', "true"],
    ['Function("return typeof process")()', "undefined"],
    ['(0, eval)("this") === globalThis', "true"],
    ['(0, eval)("typeof Deno")', "undefined"],
    ['eval("typeof require")', "undefined"],
    ["(async () => {}).constructor.constructor === Function", "true"],
    ['await (async () => {}).constructor("return typeof process")()', "undefined"],
    ['(function* () {}).constructor("return typeof Deno")().next().value', "undefined"],
    [
      '(async function* () {}).constructor("return typeof Deno")().constructor !== undefined',
      "true",
    ],
    ["globalThis instanceof Object && globalThis.constructor.constructor === Function", "true"],
    ["Object.getPrototypeOf(Object.getPrototypeOf(globalThis)) === Object.prototype", "true"],
    ['globalThis.constructor.constructor("return typeof Deno")()', "undefined"],
    ["Object.getPrototypeOf(Object.prototype) === null", "true"],
  ];
  for (const [expression, expected] of probes) {
    await t.step(expression, async () => {
      assert.deepEqual(await texts(`text(${expression})`), [expected]);
    });
  }
});

Deno.test("sandbox: every helper and every value a helper hands out belongs to the context", async (t) => {
  const tools = [{ name: "echo", description: "echo tool" }];
  const answer = (call: ToolCallOutput): ToolAnswer =>
    call.input === '"fail"' ? { error: "tool failed" } : { json: '{"list":[{"a":1}]}' };
  // `own(v)`: v is a primitive, or its constructor chain ends in the context's Function.
  const prelude = "const own = (v) => v === null || (typeof v !== 'object' && typeof v !== 'function') ||" +
    " (v instanceof Object && v.constructor.constructor === Function &&" +
    " v.constructor.constructor('return typeof process')() === 'undefined' &&" +
    " Object.getPrototypeOf(v.constructor) !== null); ";
  const probes: [string, string][] = [
    ...[...HELPER_FUNCTIONS, "tools.echo"].map((h): [string, string] => [
      h,
      `text(own(${h}) && ${h}.constructor === Function && ` +
      `Object.getPrototypeOf(${h}) === Function.prototype && ` +
      `${h}.constructor("return typeof Deno")() === "undefined")`,
    ]),
    ["tools", "text(own(tools) && tools.constructor === Object)"],
    [
      "ALL_TOOLS",
      "text(own(ALL_TOOLS) && ALL_TOOLS.constructor === Array && own(ALL_TOOLS[0]) && " +
      "ALL_TOOLS[0].constructor === Object)",
    ],
    [
      "load values",
      'store("o", {a: [1]}); const v = load("o"); const s = load("snap"); ' +
      "text(own(v) && v.constructor === Object && v.a.constructor === Array && own(s) && " +
      "s.constructor === Array)",
    ],
    [
      "tool results",
      "const r = await tools.echo(1); text(own(r) && r.constructor === Object && " +
      "r.list.constructor === Array && r.list[0].constructor === Object)",
    ],
    [
      "tool promises",
      "const p = tools.echo(1); text(own(p) && p instanceof Promise && " +
      "p.constructor === Promise); await p",
    ],
    [
      "rejection reasons",
      'const reasons = []; try { await tools.echo("fail") } catch (e) { reasons.push(e) } ' +
      'try { await tools.echo("x".repeat(2000)) } catch (e) { reasons.push(e) } ' +
      'try { await import("x") } catch (e) { reasons.push(e) } ' +
      'text(reasons.every((r) => typeof r === "string"))',
    ],
    [
      "errors thrown by helpers",
      "const thrown = []; const o = {}; o.o = o; " +
      "for (const f of [() => text(o), () => image(1), () => image('x', 1), " +
      "() => generatedImage(1), () => store(Symbol(), 1), () => store('k'), () => load(Symbol()), " +
      "() => notify(' '), () => notify('x'.repeat(2000)), () => setTimeout(1), " +
      "() => clearTimeout(Symbol()), () => tools.echo(o), () => audio(1), () => content(1)]) " +
      "{ try { f(); thrown.push('no throw') } catch (e) { thrown.push(typeof e) } } " +
      "text(thrown.join())",
    ],
  ];
  const expected: Record<string, string> = {
    "errors thrown by helpers": Array(14).fill("string").join(),
  };
  for (const [name, body] of probes) {
    await t.step(name, async () => {
      assert.deepEqual(
        await texts(prelude + body, {
          tools,
          answer,
          maxMessageBytes: 1000,
          store: [["snap", "[1]"]],
        }),
        [expected[name] ?? "true"],
      );
    });
  }
});

Deno.test("sandbox: a stack overflow at a helper call never yields an outer-realm error", async () => {
  // Probe the helpers at every depth while a deep recursion unwinds, so that some call overflows
  // exactly where a helper enters its bridge to the outer realm.
  const [report] = await texts(
    "let internal = 0; let strings = 0; const foreign = [];" +
      " const calls = [() => load('k'), () => store('k', 1), () => clearTimeout(1), () => notify(' ')];" +
      " function probe() { for (const f of calls) { try { f() } catch (e) {" +
      " if (e === 'code-mode internal error') internal++;" +
      " else if (typeof e === 'string') strings++;" +
      " else if (e !== null && (typeof e === 'object' || typeof e === 'function') && !(e instanceof Object))" +
      " foreign.push(e); } } }" +
      " function dive() { try { dive() } catch {} try { probe() } catch {} }" +
      " dive();" +
      " text(JSON.stringify({ internal: internal > 0, strings: strings > 0, foreign: foreign.length }))",
  );
  assert.deepEqual(JSON.parse(report), { internal: true, strings: true, foreign: 0 });
});

Deno.test("sandbox: call sites seen by Error.prepareStackTrace expose no outer function", async () => {
  const [report] = await texts(
    "const found = []; Error.prepareStackTrace = (e, sites) => sites;" +
      " const scan = () => { for (const s of new Error().stack) {" +
      " for (const v of [s.getFunction(), s.getThis()]) {" +
      " if (v !== undefined && v !== null && (typeof v === 'object' || typeof v === 'function') &&" +
      " !(v instanceof Object)) found.push(String(s.getFileName())); } } };" +
      " scan(); await new Promise((resolve) => setTimeout(() => { scan(); resolve() }, 0));" +
      " await tools.echo(); scan(); Promise.resolve().then(scan); await null;" +
      " text(JSON.stringify(found))",
    { tools: [{ name: "echo", description: "" }], answer: () => ({ json: "1" }) },
  );
  assert.equal(report, "[]");
});

Deno.test("sandbox: a global set in one cell is not visible in the next", async () => {
  assert.deepEqual(
    await texts('globalThis.shared = 1; Object.prototype.polluted = 1; text("set")'),
    ["set"],
  );
  assert.deepEqual(await texts("text(typeof shared); text(typeof ({}).polluted)"), [
    "undefined",
    "undefined",
  ]);
});

Deno.test("stack traces hold only the cell's frames, as the reference host's do", async () => {
  // An error raised inside a helper: neither the helper's frames nor the built-in it called.
  assert.deepEqual(await texts("const o = {}; o.o = o; try { text(o) } catch (e) { text(e) }"), [
    "TypeError: Converting circular structure to JSON\n    --> starting at object with constructor 'Object'\n" +
    "    --- property 'o' closes the circle\n    at exec_main.mjs:1:30",
  ]);
  // A built-in the cell called stays; the host's frames below the cell never show.
  assert.deepEqual(
    await texts("try { [1].map(() => { throw new Error('m') }) } catch (e) { text(e.stack) }"),
    [
      "Error: m\n    at exec_main.mjs:1:29\n    at Array.map (<anonymous>)\n    at exec_main.mjs:1:11",
    ],
  );
  // A user callback a helper calls (toJSON): its frame, then the cell's call of the helper.
  assert.equal(
    await failure("text({ toJSON() { throw new Error('tj') } })"),
    "Error: tj\n    at Object.toJSON (exec_main.mjs:1:25)\n    at exec_main.mjs:1:1",
  );
  // A timer callback: only its own frame.
  assert.equal(
    await failure("setTimeout(() => { throw new Error('t') }, 0); await new Promise(() => {})"),
    "Error: t\n    at exec_main.mjs:1:26",
  );
  // The combinators are an unnamed script: their frames read <anonymous>:LINE:COL.
  assert.equal(
    await failure("await stream_settled([1], () => { throw new Error('e') })"),
    "Error: e\n    at exec_main.mjs:1:41\n    at stream_settled (<anonymous>:62:13)\n    at async exec_main.mjs:1:1",
  );
  // The header is V8's: the error's original message, even behind a getter.
  assert.deepEqual(
    await texts(
      "const e = new Error('m'); Object.defineProperty(e, 'message', { get() { return 'G' } }); text(e.stack)",
    ),
    ["Error: m\n    at exec_main.mjs:1:11"],
  );
  // Error.prepareStackTrace reads as the cell set it; a cell's own gets the visible call sites.
  assert.deepEqual(
    await texts(
      "text(typeof Error.prepareStackTrace); text(Object.getOwnPropertyNames(Error).includes('prepareStackTrace')); " +
        "const f = (e, s) => s.map(String).join('|'); Error.prepareStackTrace = f; " +
        "text(Error.prepareStackTrace === f); text(new Error('x').stack); Error.prepareStackTrace = undefined; " +
        "text(new Error('y').stack)",
    ),
    ["undefined", "false", "true", "exec_main.mjs:1:226", "Error: y\n    at exec_main.mjs:1:291"],
  );
  // At most the reference's 10 frames, async frames included; a limit the cell sets applies.
  const [deep] = await texts("function f(n) { return n ? f(n - 1) : new Error('d').stack } text(f(30))");
  assert.equal(deep.split("\n").length, 11);
  const [two] = await texts(
    "Error.stackTraceLimit = 2; function f(n) { return n ? f(n - 1) : new Error('d').stack } text(f(30))",
  );
  assert.equal(two.split("\n").length, 3);
});

// --- bundling ---------------------------------------------------------------------------------

Deno.test("the bundled bootstrap runs a cell under --no-npm --no-remote --allow-read=<dir>", async (t) => {
  const dir = await Deno.makeTempDir({ prefix: "cell_bootstrap_bundle_" });
  try {
    for (const minify of [false, true]) {
      await t.step(minify ? "minified" : "plain", async () => {
        const bundle = `${dir}/cell_bootstrap${minify ? ".min" : ""}.js`;
        const bundled = await new Deno.Command(Deno.execPath(), {
          args: [
            "bundle",
            ...(minify ? ["--minify"] : []),
            "-o",
            bundle,
            new URL("./cell_bootstrap.ts", import.meta.url).pathname,
          ],
          env: { NO_COLOR: "1" },
          stdout: "piped",
          stderr: "piped",
        }).output();
        assert.ok(bundled.success, new TextDecoder().decode(bundled.stderr));
        const driver = `${dir}/driver${minify ? "_min" : ""}.mjs`;
        await Deno.writeTextFile(driver, driverSource(bundle));
        const run = await new Deno.Command(Deno.execPath(), {
          args: ["run", "--no-config", "--no-npm", "--no-remote", `--allow-read=${dir}`, driver],
          cwd: dir,
          env: { NO_COLOR: "1" },
          stdout: "piped",
          stderr: "piped",
        }).output();
        const stderr = new TextDecoder().decode(run.stderr);
        assert.ok(run.success, stderr);
        const outputs = JSON.parse(new TextDecoder().decode(run.stdout));
        assert.deepEqual(outputs, [
          { t: "started" },
          { t: "text", text: '{"a":1}' },
          { t: "toolCall", id: "tool-1", name: "echo", input: "2" },
          { t: "toolResultConsumed", id: "tool-1" },
          { t: "text", text: "true" },
          { t: "text", text: "undefined|undefined|unsupported import in exec" },
          { t: "result", writes: [["k", "[1]"]] },
        ]);
      });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** A standalone driver that runs one cell in the bundled bootstrap and prints its outputs. */
function driverSource(bundle: string): string {
  const source = "JSON.stringify = () => 'x'; text({a: 1}); store('k', [1]);" +
    " text((await tools.echo(2)).constructor === Object);" +
    " let e; try { await import('node:fs') } catch (x) { e = x }" +
    " text([typeof Deno, typeof process, e].join('|'))";
  return `
import { MessageChannel, Worker } from "node:worker_threads";
const worker = new Worker(${JSON.stringify(bundle)});
await new Promise((resolve) => worker.once("message", resolve));
const { port1, port2 } = new MessageChannel();
const outputs = [];
await new Promise((resolve) => {
  port1.on("message", (batch) => {
    for (const { n: _n, ...item } of Array.isArray(batch) ? batch : [batch]) outputs.push(item);
    const m = outputs[outputs.length - 1];
    if (m.t === "toolCall") worker.postMessage({ t: "toolResult", id: m.id, json: "{}" });
    if (m.t === "result") resolve();
  });
  worker.postMessage({
    t: "start", cellId: "1", source: ${JSON.stringify(source)},
    tools: [{ name: "echo", description: "" }], store: [], maxStoredValueBytes: 1000,
    maxMessageBytes: 1000, output: port2,
  }, [port2]);
});
port1.close();
await worker.terminate();
console.log(JSON.stringify(outputs));
`;
}

// ---- output credit and reduced forms (SPEC §8.10) ----------------------------------------------

Deno.test("credit: a helper call that leaves the cell over its event credit waits until an acknowledgement", async () => {
  await using cell = await CellHarness.open();
  cell.start('for (let i = 0; i < 5; i++) text(String(i)); text("done")', {
    manualCredit: true,
    credit: { maxEvents: 2 },
  });
  const first = await cell.until((m) => m.t === "text" && m.text === "2");
  assert.deepEqual(first.map((m) => m.t === "text" ? m.text : m.t), ["started", "0", "1", "2"]);
  // The third item is posted, then its call waits: the cell holds 3 unacknowledged events, and
  // (a bounded negative check) posts nothing more while unacknowledged.
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(Atomics.load(cell.words, CREDIT_EVENTS), 3);
  assert.equal(cell.queued, 0);
  cell.ack(1);
  assert.deepEqual(await cell.next(), { t: "text", text: "3" });
  cell.ack(1);
  assert.deepEqual(await cell.next(), { t: "text", text: "4" });
  cell.ack(3);
  const rest = await cell.until((m) => m.t === "result");
  assert.deepEqual(rest, [{ t: "text", text: "done" }, { t: "result", writes: [] }]);
});

Deno.test("credit: the byte credit counts the UTF-8 payload of texts, notifications and tool inputs", async () => {
  await using cell = await CellHarness.open();
  cell.start('text("🦀🦀🦀"); notify("n"); text("after")', { manualCredit: true, credit: { maxBytes: 10 } });
  await cell.until((m) => m.t === "text");
  assert.equal(Atomics.load(cell.words, CREDIT_BYTES), 12);
  cell.ack(1);
  assert.deepEqual(await cell.next(), { t: "notify", text: "n" });
  cell.ack(1);
  assert.deepEqual(await cell.until((m) => m.t === "result"), [
    { t: "text", text: "after" },
    { t: "result", writes: [] },
  ]);
});

Deno.test("credit: the stop word wakes a waiting helper call, which throws; later calls post nothing", async () => {
  await using cell = await CellHarness.open();
  cell.start(
    'try { text("a"); text("b") } catch (e) { try { text("caught " + e) } catch (e2) { globalThis.e2 = e2 } }',
    { manualCredit: true, credit: { maxEvents: 0 } },
  );
  await cell.until((m) => m.t === "text" && m.text === "a");
  Atomics.store(cell.words, CREDIT_STOP, 1);
  Atomics.add(cell.words, CREDIT_GENERATION, 1);
  Atomics.notify(cell.words, CREDIT_GENERATION);
  cell.send({ t: "stop" });
  // Nothing after "a": not "b", not "caught …", and no result (the cell was stopped).
  assert.deepEqual(await cell.next(), { t: "stopped" });
});

Deno.test("reduced forms: long texts, long error texts and oversized image URLs cross the thread reduced", async () => {
  await using cell = await CellHarness.open(BOOTSTRAP, 256);
  cell.start(
    'text("é" + "a".repeat(40) + "🦀"); image("data:" + "x".repeat(30)); image("data:x"); ' +
      'throw "<" + "z".repeat(100) + ">"',
    { credit: { trimTextOver: 20, keepTextBytes: 4, dropMediaOver: 20 } },
  );
  const out = await cell.until((m) => m.t === "result");
  assert.deepEqual(out.slice(1), [
    // jsonExtra: what JSON escaping adds (0 here: nothing to escape); a dropped image keeps its detail.
    { t: "trimmedText", text: { head: "éaa", tail: "🦀", total: 46, jsonExtra: 0 } },
    { t: "droppedImage", bytes: 35, detail: "high", jsonExtra: 0 },
    { t: "image", image: { url: "data:x", detail: "high" } },
    { t: "result", writes: [], trimmedError: { head: "<zzz", tail: "zzz>", total: 102, jsonExtra: 0 } },
  ]);
});

/**
 * SPEC §8 end to end: output modes against the real host, a real session runtime and a real gRPC
 * client (scenarios 97–104a, the §8.8 worked example, credits under a flood).
 */
import assert from "node:assert/strict";
import { Status } from "nice-grpc";
import {
  eventually,
  execute,
  FOREVER,
  grpcError,
  notified,
  openSession,
  run,
  startHost,
  texts,
} from "./_harness.ts";
import { collectGarbage } from "../worker/collect_garbage.ts";

const SERVER = { outputTruncation: 2 };
const notice = (bytes: number, segments: number, images: number) =>
  `[Code Mode session output limit reached: omitted ${bytes} text bytes; discarded ${segments} text segments, ${images} images, 0 audio items]`;

function utf8(s: string): number {
  return new TextEncoder().encode(s).length;
}

/** VmRSS of a process, in bytes. */
function rss(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

/**
 * This process's RSS (it holds the host) after a full collection: what the host keeps, not the
 * garbage of a flood that V8 has not collected yet. Measured without it, the heap (~350 MiB used
 * in the flood's steady state) grew by one step of ~200 MiB inside the span on loaded CI machines
 * (`host grew 213504000`, the same figure twice) and shrank by 30-45 MiB in other runs.
 */
function hostRss(): number {
  collectGarbage();
  return Deno.memoryUsage().rss;
}

/** Bytes a process has written so far (`wchar` of /proc/PID/io): for a runtime, its frames to the host. */
function written(pid: number): number {
  return Number(/^wchar: (\d+)$/m.exec(Deno.readTextFileSync(`/proc/${pid}/io`))![1]);
}

/**
 * Waits until a runtime has sent `bytes` more to the host than when called: how far a flood has
 * gone. Nothing reports a flood's progress, so this polls the counter (bounded by `ms`).
 */
async function flooded(pid: number, bytes: number, ms = 60_000): Promise<void> {
  const from = written(pid);
  await eventually(() => written(pid) - from >= bytes, ms);
}

Deno.test("97: a Server-mode 65 MiB thrown string with max_output_tokens 5 gives the three §8.8 items and an error_text capped as Codex's host caps it", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client, SERVER);
  const { started, outcome } = await execute(
    h.client,
    s.id,
    "throw 'begin:' + 'X'.repeat(65 * 1024 * 1024) + ':end'",
    { yieldTimeMs: 60_000, maxOutputTokens: 5 },
  );
  assert.equal(started.cellId, "1");
  assert.equal(outcome.cellId, "1");
  const errorText: string = outcome.completed.errorText;
  assert.equal(utf8(errorText), 65_536);
  assert.equal(errorText, "begin:" + "X".repeat(32_760) + "…" + "X".repeat(32_763) + ":end");
  assert.deepEqual(texts(outcome), [
    "Warning: truncated output (original token count: 262144)\nTotal output lines: 2\n\nScript err…262139 tokens truncated…",
    notice(67_108_888, 0, 0),
    "XXXXXX:end",
  ]);
});

Deno.test("The limit defaultMaxOutputTokens is the budget of a Server-mode Execute without max_output_tokens", async () => {
  await using h = await startHost({ limits: { defaultMaxOutputTokens: 5 } });
  await using s = await openSession(h.client, SERVER);
  const { outcome } = await execute(h.client, s.id, "text('x'.repeat(4000))");
  assert.deepEqual(texts(outcome), [
    "Warning: truncated output (original token count: 1000)\nTotal output lines: 1\n\nxxxxxxxxxx…995 tokens truncated…xxxxxxxxxx",
  ]);
  const wide = await execute(h.client, s.id, "text('x'.repeat(4000))", { maxOutputTokens: 10_000 });
  assert.deepEqual(texts(wide.outcome), ["x".repeat(4000)]);
});

Deno.test("98: in Client mode a 2 MiB text survives max_output_tokens 5 untruncated", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const { outcome } = await execute(h.client, s.id, "text('x'.repeat(2 * 1024 * 1024))", {
    yieldTimeMs: 60_000,
    maxOutputTokens: 5,
  });
  assert.ok(outcome.completed);
  assert.equal(outcome.completed.errorText, undefined);
  assert.equal(outcome.contentItems.length, 1);
  assert.equal(outcome.contentItems[0].text.text, "x".repeat(2 * 1024 * 1024));
});

Deno.test("99: a Server-mode 614,400-byte text comes back as that one item (head and tail merged, no notice)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client, SERVER);
  const { outcome } = await execute(h.client, s.id, "text('é'.repeat(307200))", {
    maxOutputTokens: 1_000_000,
  });
  assert.deepEqual(texts(outcome), ["é".repeat(307_200)]);
});

Deno.test("100: two 5 MiB images in Server mode keep the first, then the notice counting 1 image (8 MiB of images, as the reference)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client, SERVER);
  const { outcome } = await execute(
    h.client,
    s.id,
    "const url = 'data:image/png;base64,' + 'A'.repeat(5 * 1024 * 1024); image(url); image(url)",
    { maxOutputTokens: 1_000_000 },
  );
  assert.equal(outcome.contentItems.length, 2);
  assert.equal(utf8(outcome.contentItems[0].image.imageUrl), 22 + 5 * 1024 * 1024);
  assert.equal(outcome.contentItems[1].text.text, notice(0, 0, 1));
});

Deno.test("101: three 600 KiB texts in Server mode keep the head of a, the notice (the tail part of a and b gone whole), and the tail of c", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client, SERVER);
  const { outcome } = await execute(
    h.client,
    s.id,
    'text("a".repeat(600*1024)); text("b".repeat(600*1024)); text("c".repeat(600*1024))',
    { maxOutputTokens: 1_000_000 },
  );
  assert.deepEqual(texts(outcome), ["a".repeat(524_288), notice(794_624, 2, 0), "c".repeat(524_288)]);
});

Deno.test("102: a 100,000-byte thrown string is capped to 32,766 bytes + '…' + 32,767 bytes in Server mode and whole in Client mode", async () => {
  await using h = await startHost();
  const source = "throw 'h'.repeat(50000) + 't'.repeat(50000)";
  await using server = await openSession(h.client, SERVER);
  const capped = await execute(h.client, server.id, source, { maxOutputTokens: 1_000_000 });
  assert.equal(capped.outcome.completed.errorText, "h".repeat(32_766) + "…" + "t".repeat(32_767));
  // §8.4 step 2: the Script error item carries the full text (within the collector's bounds).
  assert.deepEqual(texts(capped.outcome), ["Script error:\n" + "h".repeat(50_000) + "t".repeat(50_000)]);
  await using client = await openSession(h.client);
  const whole = await execute(h.client, client.id, source);
  assert.equal(whole.outcome.completed.errorText, "h".repeat(50_000) + "t".repeat(50_000));
  assert.deepEqual(texts(whole.outcome), []);
});

Deno.test("103: an unobserved Server-mode flood keeps host and runtime memory bounded; Terminate returns bounded content with the notice", async () => {
  // Terminate has the default budget: wide enough to show the whole bounded window.
  await using h = await startHost({ limits: { defaultMaxOutputTokens: 1_000_000 } });
  await using s = await openSession(h.client, SERVER);
  const pid = h.host.state.session(s.id)!.runtimePid!;
  const first = await execute(h.client, s.id, 'for (;;) text("x".repeat(1024))', {
    yieldTimeMs: 200,
    maxOutputTokens: 1_000_000,
  });
  assert.ok(first.outcome.yielded);
  // The flood in its steady state: 256 MiB sent since the yield (the windows are full, and this
  // process's heap, which holds the host, has grown to its size under the flood's garbage).
  await flooded(pid, 256 * 1024 * 1024);
  const before = { host: hostRss(), runtime: rss(pid) };
  // The span measured: 192 MiB more (half as much again as the bound below) pass through the host.
  await flooded(pid, 192 * 1024 * 1024);
  const after = { host: hostRss(), runtime: rss(pid) };
  // Without credit the runtime and host would buffer the flood (hundreds of MiB per second).
  assert.ok(
    after.runtime - before.runtime < 128 * 1024 * 1024,
    `runtime grew ${after.runtime - before.runtime}`,
  );
  assert.ok(after.host - before.host < 128 * 1024 * 1024, `host grew ${after.host - before.host}`);
  const terminated = await h.client.terminate({ sessionId: s.id, cellId: first.started.cellId });
  assert.ok(terminated.liveCell.terminated);
  // Every text() is its own item: 512 whole ones in the head, the notice, 512 in the tail.
  const items = texts(terminated.liveCell);
  assert.equal(items.length, 1_025);
  assert.ok(items.slice(0, 512).every((t) => t === "x".repeat(1024)));
  assert.match(
    items[512],
    /^\[Code Mode session output limit reached: omitted \d+ text bytes; discarded \d+ text/,
  );
  assert.equal(items.slice(513).join(""), "x".repeat(524_288));
  assert.deepEqual((await run(h.client, s.id, 'text("next")')).texts, ["next"]);
});

/** The size in Codex's host's `OUT_OF_RANGE` text for an outcome over 64 MiB (`N` in "found N bytes"). */
function tooLarge(error: { code: Status; details: string }): number {
  assert.equal(error.code, Status.OUT_OF_RANGE);
  const match = /^Error, encoded message length too large: found (\d+) bytes, the limit is: 67108864 bytes$/
    .exec(
      error.details,
    );
  assert.ok(match, error.details);
  return Number(match[1]);
}

Deno.test("104: a Client-mode window of 70 MiB fails OUT_OF_RANGE as Codex's host answers it, and the next cell works", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const error = await grpcError(
    execute(h.client, s.id, 'for (let i = 0; i < 70; i++) text("x".repeat(1024 * 1024))', {
      yieldTimeMs: 60_000,
    }),
  );
  // The ExecuteEvent that could not be sent: 70 items of 1 MiB, each with its 12 bytes of framing.
  const n = tooLarge(error);
  assert.ok(n > 70 * (1024 * 1024 + 12) && n < 70 * (1024 * 1024 + 12) + 40, String(n));
  assert.deepEqual((await run(h.client, s.id, 'text("next")')).texts, ["next"]);
});

Deno.test("104a: an undeliverable completion is consumed: OUT_OF_RANGE, then the cell is missing and its values committed", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const error = await grpcError(
    execute(h.client, s.id, 'store("k", 1); text("x".repeat(70 * 1024 * 1024)); text("after")', {
      yieldTimeMs: 60_000,
    }),
  );
  // The encoded size of the ExecuteEvent that could not be sent: just over 70 MiB + "after".
  const n = tooLarge(error);
  assert.ok(n > 70 * 1024 * 1024 + 5 && n < 70 * 1024 * 1024 + 100, String(n));
  const wait = await h.client.wait({ sessionId: s.id, cellId: "1", waitId: "w1", yieldTimeMs: 1_000 });
  assert.equal(wait.missingCell.completed.errorText, "exec cell 1 not found");
  assert.deepEqual((await run(h.client, s.id, 'text(load("k"))')).texts, ["1"]);
});

Deno.test("Client mode: an oversized yield is consumed (OUT_OF_RANGE) and the cell keeps running", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const error = await grpcError(
    execute(
      h.client,
      s.id,
      'text("x".repeat(65 * 1024 * 1024)); text("y"); yield_control(); await new Promise((r) => setTimeout(r, 200)); text("later")',
      { yieldTimeMs: 60_000 },
    ),
  );
  const n = tooLarge(error);
  assert.ok(n > 65 * 1024 * 1024 && n < 65 * 1024 * 1024 + 100, String(n));
  const wait = await h.client.wait({ sessionId: s.id, cellId: "1", waitId: "w1", yieldTimeMs: 10_000 });
  assert.ok(wait.liveCell.completed);
  assert.deepEqual(texts(wait.liveCell), ["later"]);
});

Deno.test("Client mode: a Wait whose outcome is over 64 MiB fails OUT_OF_RANGE and consumes it; a Terminate too", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const big = 'text("x".repeat(70 * 1024 * 1024));';
  const first = await execute(
    h.client,
    s.id,
    `yield_control(); await new Promise((r) => setTimeout(r, 50)); ${big} text("tail")`,
    {
      yieldTimeMs: 60_000,
    },
  );
  assert.ok(first.outcome.yielded);
  const waited = await grpcError(
    h.client.wait({ sessionId: s.id, cellId: "1", waitId: "w1", yieldTimeMs: 30_000 }),
  );
  tooLarge(waited);
  const missing = await h.client.wait({ sessionId: s.id, cellId: "1", waitId: "w2", yieldTimeMs: 1 });
  assert.equal(missing.missingCell.completed.errorText, "exec cell 1 not found");
  // A completion nobody observed: the Terminate that returns it fails, and the cell is gone.
  const second = await execute(h.client, s.id, `yield_control(); ${big} notify("done")`, {
    yieldTimeMs: 60_000,
  });
  assert.ok(second.outcome.yielded);
  s.pump();
  assert.ok(await notified(s, "done"));
  tooLarge(await grpcError(h.client.terminate({ sessionId: s.id, cellId: "2" })));
  const gone = await h.client.wait({ sessionId: s.id, cellId: "2", waitId: "w3", yieldTimeMs: 1 });
  assert.equal(gone.missingCell.completed.errorText, "exec cell 2 not found");
});

Deno.test("Client mode: a completion whose error text alone is over 64 MiB fails OUT_OF_RANGE and is consumed", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const error = await grpcError(
    execute(h.client, s.id, "throw 'b' + 'E'.repeat(65 * 1024 * 1024) + 'e'", { yieldTimeMs: 60_000 }),
  );
  const n = tooLarge(error);
  assert.ok(n > 65 * 1024 * 1024 + 2 && n < 65 * 1024 * 1024 + 40, String(n));
  const gone = await h.client.terminate({ sessionId: s.id, cellId: "1" });
  assert.equal(gone.missingCell.completed.errorText, "exec cell 1 not found");
});

Deno.test("a Server-mode missing cell carries the Script error item", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client, SERVER);
  const wait = await h.client.wait({ sessionId: s.id, cellId: "9", waitId: "w", yieldTimeMs: 0 });
  assert.equal(wait.missingCell.completed.errorText, "exec cell 9 not found");
  assert.deepEqual(texts(wait.missingCell), ["Script error:\nexec cell 9 not found"]);
  await using c = await openSession(h.client);
  const clientWait = await h.client.wait({ sessionId: c.id, cellId: "9", waitId: "w", yieldTimeMs: 0 });
  assert.deepEqual(texts(clientWait.missingCell), []);
});

Deno.test("flood: a Server-mode cell printing 256 MiB in 64 KiB pieces completes with the notice and its last text", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client, SERVER);
  const { outcome } = await execute(
    h.client,
    s.id,
    'const piece = "y".repeat(65536); for (let i = 0; i < 4096; i++) text(piece); text("last")',
    { yieldTimeMs: 120_000, maxOutputTokens: 1_000_000 },
  );
  assert.ok(outcome.completed, JSON.stringify(outcome).slice(0, 200));
  // 4,097 items of 268,435,460 bytes: 8 whole in the head; the notice; in the tail the last
  // 65,532 bytes of one piece, 7 whole pieces and "last".
  const items = texts(outcome);
  const piece = "y".repeat(65_536);
  assert.equal(items.length, 18);
  assert.ok(items.slice(0, 8).every((t) => t === piece));
  assert.equal(items[8], notice(268_435_460 - 1_048_576, 4_097 - 17, 0));
  assert.equal(items[9], "y".repeat(65_532));
  assert.ok(items.slice(10, 17).every((t) => t === piece));
  assert.equal(items[17], "last");
});

const warned = (tokens: number, lines: number, kept: string) =>
  `Warning: truncated output (original token count: ${tokens})\nTotal output lines: ${lines}\n\n${kept}`;

Deno.test("Server mode: a truncated window of text() calls is one joined item; with an image, item by item (as the reference)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client, SERVER);
  const lines = await execute(h.client, s.id, "for (let i = 0; i < 50; i++) text('line ' + i)", {
    maxOutputTokens: 30,
  });
  assert.deepEqual(texts(lines.outcome), [
    warned(98, 50, "line 0\nline 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline") +
    "…68 tokens truncated…e 42\nline 43\nline 44\nline 45\nline 46\nline 47\nline 48\nline 49",
  ]);
  const fits = await execute(h.client, s.id, "text('a'); throw new Error('boom')", { maxOutputTokens: 30 });
  assert.equal(texts(fits.outcome).length, 2);
  assert.equal(texts(fits.outcome)[0], "a");
  const mixed = await execute(
    h.client,
    s.id,
    "for (let i = 0; i < 50; i++) text('line ' + i); image('data:image/png;base64,AAAA'); text('z'.repeat(100))",
    { maxOutputTokens: 30 },
  );
  assert.deepEqual(texts(mixed.outcome), [
    ...Array.from({ length: 15 }, (_, i) => `line ${i}`),
    "[image data:image/png;base64,AAAA]",
    "[omitted 36 text items ...]",
  ]);
});

Deno.test("Server mode: a Wait's max_tokens is its budget; without it the host's default applies, not the Execute's (as the reference)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client, SERVER);
  const yielding = (x: string, y: string) =>
    `text(${JSON.stringify(x.repeat(100))}); yield_control(); text(${JSON.stringify(y.repeat(100))})`;
  const cut = (x: string, tokens: number) =>
    warned(25, 1, x.repeat(2 * tokens) + `…${25 - tokens} tokens truncated…` + x.repeat(2 * tokens));
  let waits = 0;
  const wait = (cellId: string, maxTokens?: number) =>
    h.client.wait({
      sessionId: s.id,
      cellId,
      waitId: `w${++waits}`,
      yieldTimeMs: 5_000,
      ...(maxTokens === undefined ? {} : { maxTokens }),
    });

  const first = await execute(h.client, s.id, yielding("a", "b"), { maxOutputTokens: 5 });
  assert.deepEqual(texts(first.outcome), [cut("a", 5)]);
  assert.deepEqual(texts((await wait(first.started.cellId)).liveCell), ["b".repeat(100)]);

  const second = await execute(h.client, s.id, yielding("c", "d"), { maxOutputTokens: 1_000 });
  assert.deepEqual(texts(second.outcome), ["c".repeat(100)]);
  assert.deepEqual(texts((await wait(second.started.cellId, 5)).liveCell), [cut("d", 5)]);

  // uint64: a budget over 2^32 is not cut to 32 bits (5 here).
  const third = await execute(h.client, s.id, yielding("e", "f"), { maxOutputTokens: 5 });
  assert.deepEqual(texts((await wait(third.started.cellId, 2 ** 32 + 5)).liveCell), ["f".repeat(100)]);

  // 0 is a budget (the field has presence): the header and the marker alone.
  const fourth = await execute(h.client, s.id, yielding("g", "h"), { maxOutputTokens: 1_000 });
  assert.deepEqual(texts((await wait(fourth.started.cellId, 0)).liveCell), [
    warned(25, 1, "…25 tokens truncated…"),
  ]);

  // A missing cell's Script error item gets the Wait's budget too.
  const missing = await wait("99", 3);
  assert.deepEqual(texts(missing.missingCell), [warned(9, 2, "Script…6 tokens truncated… found")]);
});

Deno.test("Server mode: any uint64 budget is accepted; one over 2^53 never truncates (as the reference)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client, SERVER);
  for (const maxOutputTokens of ["18446744073709551615", "4611686018427387904", String(2 ** 32 + 5)]) {
    const { outcome } = await execute(h.client, s.id, 'text("b".repeat(500))', { maxOutputTokens });
    assert.deepEqual(texts(outcome), ["b".repeat(500)]);
  }
});

Deno.test("Server mode: Terminate's outcome has the host's default budget, not the Execute's (as the reference)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client, SERVER);
  const { started, outcome } = await execute(
    h.client,
    s.id,
    'yield_control(); text("e".repeat(100)); notify("ready"); await new Promise(() => {})',
    { maxOutputTokens: 5 },
  );
  assert.ok(outcome.yielded);
  s.pump();
  assert.ok(await notified(s, "ready"));
  const terminated = await h.client.terminate({ sessionId: s.id, cellId: started.cellId });
  assert.ok(terminated.liveCell.terminated);
  assert.deepEqual(texts(terminated.liveCell), ["e".repeat(100)]);
});

Deno.test("Client mode: an oversized terminated outcome is consumed: OUT_OF_RANGE, then the cell is missing", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const first = await execute(
    h.client,
    s.id,
    'await new Promise((r) => setTimeout(r, 300)); text("x".repeat(70 * 1024 * 1024)); notify("big"); ' +
      "for (;;) await new Promise((r) => setTimeout(r, 10))",
    { yieldTimeMs: 100 },
  );
  assert.ok(first.outcome.yielded);
  s.pump();
  assert.ok(await notified(s, "big"));
  tooLarge(await grpcError(h.client.terminate({ sessionId: s.id, cellId: "1" })));
  const missing = await h.client.terminate({ sessionId: s.id, cellId: "1" });
  assert.equal(missing.missingCell.completed.errorText, "exec cell 1 not found");
});

Deno.test("two cells of one session writing 250 KB frames at the same moment: every item arrives whole and in order (the stream lock)", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  // Cells write their own frames to the runtime's stdout; a frame over PIPE_BUF written by two
  // threads at once would interleave and break the stream without the lock (3 runs in 4 caught
  // it with one round). Both cells wait for the same wall-clock moment (the second needs a fresh
  // Worker first), then write 80 items each. Two rounds.
  const expected = (tag: string) => Array.from({ length: 80 }, (_, i) => `${tag}${i}:${tag.repeat(250_000)}`);
  for (const [x, y] of [["a", "b"], ["c", "d"]]) {
    const at = Date.now() + 700;
    const source = (tag: string) =>
      `while (Date.now() < ${at}) {} for (let i = 0; i < 80; i++) text("${tag}" + i + ":" + "${tag}".repeat(250_000))`;
    const [a, b] = await Promise.all([
      execute(h.client, s.id, source(x), { yieldTimeMs: 60_000 }),
      execute(h.client, s.id, source(y), { yieldTimeMs: 60_000 }),
    ]);
    assert.ok(
      a.outcome.completed && b.outcome.completed,
      JSON.stringify([a.outcome, b.outcome]).slice(0, 300),
    );
    assert.ok(texts(a.outcome).join() === expected(x).join(), `cell ${x}'s items differ`);
    assert.ok(texts(b.outcome).join() === expected(y).join(), `cell ${y}'s items differ`);
  }
  assert.deepEqual((await run(h.client, s.id, "text('still alive')")).texts, ["still alive"]);
});

Deno.test("core: a Terminate may bring its own budget (JSON V1's maxOutputTokens); without one the default applies", async () => {
  const { assembleHost } = await import("../host/assemble.ts");
  const engine = await assembleHost({ log: "error", warmSessions: 0 });
  try {
    const { core } = engine;
    const lease = await core.openSession({ outputMode: "server" });
    const events = lease.events();
    const notified = async (text: string) => {
      // next(), not for-await: leaving a for-await loop would end the lease.
      for (;;) {
        const { value, done } = await events.next();
        if (done) throw new Error("the lease ended");
        if (value.type === "notification" && value.text === text) return;
      }
    };
    const sessionId = lease.sessionId;
    const cell = async (n: number, x: string) => {
      for await (
        const event of core.execute({
          sessionId,
          executionId: `e${n}`,
          toolCallId: "call-1",
          source: `yield_control(); text(${JSON.stringify(x.repeat(100))}); notify("ready${n}"); ${FOREVER}`,
          maxOutputTokens: 5n,
        })
      ) if (event.type === "started") return event.cellId;
      throw new Error("not started");
    };
    const first = await cell(1, "e");
    await notified("ready1");
    const cut = await core.terminate({ sessionId, cellId: first, maxTokens: 3n });
    assert.deepEqual(cut.outcome.contentItems.map((i) => "text" in i && i.text.text), [
      "Warning: truncated output (original token count: 25)\nTotal output lines: 1\n\neeeeee…22 tokens truncated…eeeeee",
    ]);
    const second = await cell(2, "f");
    await notified("ready2");
    const whole = await core.terminate({ sessionId, cellId: second });
    assert.deepEqual(whole.outcome.contentItems.map((i) => "text" in i && i.text.text), ["f".repeat(100)]);
    await core.closeSession(sessionId);
  } finally {
    await engine.shutdown();
  }
});

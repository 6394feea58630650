/**
 * End-to-end: Codex's launch of its code-mode host. A V1 client (tests/_v1_client.ts) spawns
 * `bin/codex-code-mode-host` with no arguments, a nearly empty environment and cwd `/`, and speaks
 * JSON host V1 over the child's real stdin/stdout. (tests/v1_reference_test.ts runs the same frames
 * against Codex's own host.)
 */
import assert from "node:assert/strict";
import { failure, type Json, parseFrames, texts, toolResult, untimed, V1Client } from "./_v1_client.ts";
import { alive, descendants, rssBytes, sleep, tool, writtenBytes } from "./_v1_helpers.ts";

const GRANTED = ["session-cell-execution-resource-limits", "yield-observation"];

/** Closes stdin, expects exit 0, stdout made of whole frames, and no runtime left. */
async function finishCleanly(c: V1Client, runtimes: number[], kept = true): Promise<void> {
  const status = await c.finish();
  assert.equal(status.code, 0, await c.stderr);
  if (kept) assert.deepEqual(parseFrames(c.stdoutBytes()), c.received);
  for (const pid of runtimes) assert.ok(!alive(pid), `runtime ${pid} outlived the host`);
}

Deno.test("V1: handshake, two isolated sessions, stored values, tools, notifications, yield/wait/terminate, cancel, shutdown and ID reuse", async () => {
  await using c = V1Client.spawn();
  const ready = await c.hello({
    requiredCapabilities: ["session-cell-execution-resource-limits"],
    optionalCapabilities: ["yield-observation", "some-future-capability"],
  });
  assert.deepEqual(ready, { type: "connection/ready", selectedVersion: 1, capabilities: GRANTED });

  assert.deepEqual(await c.open("session-1"), {
    status: "ok",
    value: { type: "session/ready", sessionId: "session-1" },
  });
  assert.deepEqual(await c.open("session-2"), {
    status: "ok",
    value: { type: "session/ready", sessionId: "session-2" },
  });
  assert.deepEqual(await c.open("session-1"), failure("code-mode session ID `session-1` is already open"));
  const pid = c.child!.pid;
  const runtimes = descendants(pid);
  assert.ok(runtimes.length >= 2, "two session runtimes");

  // Stored values survive across the cells of one session and are not seen by another.
  let r = await c.run("session-1", `store("k", 41); text("stored")`);
  assert.deepEqual(untimed(r), {
    status: "ok",
    value: {
      Result: {
        cell_id: "1",
        content_items: [{ type: "input_text", text: "stored" }],
        error_text: null,
        result_buffered_for_ns: 0,
        code_mode_host_duration_ns: 0,
      },
    },
  });
  assert.ok(r.value.Result.code_mode_host_duration_ns > 0);
  r = await c.run("session-2", `text(String(load("k")))`);
  assert.deepEqual(texts(r.value), ["undefined"]);
  r = await c.run("session-1", `text(String(load("k") + 1))`);
  assert.deepEqual(texts(r.value), ["42"]);
  assert.equal(r.value.Result.cell_id, "2");

  // A tool call answered through delegate/response, ok and error; a notification delivered.
  const invocations: Json[] = [];
  const notifications: Json[] = [];
  c.onDelegate = (m) => {
    if (m.request.type === "notification/send") {
      notifications.push(m);
      return { status: "ok", value: { type: "notification/delivered" } };
    }
    invocations.push(m);
    const input = m.request.invocation.input;
    return input.fail ? failure("tool said no") : toolResult({ echoed: input.n });
  };
  r = await c.run(
    "session-1",
    `notify("ping"); const a = await tools.echo({ n: 7 }); text(JSON.stringify(a));
     try { await tools.echo({ fail: true }); } catch (e) { text("caught " + e); }`,
    { enabled_tools: [tool("echo")], tool_call_id: "exec-call-3" },
  );
  assert.deepEqual(texts(r.value), ['{"echoed":7}', "caught tool said no"]);
  assert.equal(invocations.length, 2);
  assert.deepEqual(invocations[0].request.invocation, {
    cell_id: "3",
    runtime_tool_call_id: "tool-1",
    tool_name: { name: "echo", namespace: null },
    tool_kind: "function",
    input: { n: 7 },
  });
  assert.equal(invocations[0].sessionId, "session-1");
  assert.deepEqual(notifications.map((n) => [n.sessionId, n.request]), [
    ["session-1", { type: "notification/send", callId: "exec-call-3", cellId: "3", text: "ping" }],
  ]);
  assert.equal(typeof notifications[0].id, "number");

  // The cell yields, a wait gets the rest.
  const slow = c.execute(
    "session-1",
    `text("a"); yield_control(); await new Promise((r) => setTimeout(r, 300)); text("b")`,
    {
      yield_time_ms: 30_000,
    },
  );
  const slowStarted = await slow.started;
  assert.equal(slowStarted.value.type, "execution/started");
  const slowCell = slowStarted.value.cellId;
  assert.deepEqual(untimed(await slow.initial), {
    status: "ok",
    value: {
      Yielded: {
        cell_id: slowCell,
        content_items: [{ type: "input_text", text: "a" }],
        code_mode_host_duration_ns: 0,
      },
    },
  });
  const waited = await c.wait("session-1", slowCell, 30_000);
  assert.deepEqual(untimed(waited), {
    status: "ok",
    value: {
      type: "wait/completed",
      outcome: {
        LiveCell: {
          Result: {
            cell_id: slowCell,
            content_items: [{ type: "input_text", text: "b" }],
            error_text: null,
            result_buffered_for_ns: 0,
            code_mode_host_duration_ns: 0,
          },
        },
      },
    },
  });
  assert.deepEqual(untimed((await c.wait("session-1", "99")).value.outcome), {
    MissingCell: {
      Result: {
        cell_id: "99",
        content_items: [],
        error_text: "exec cell 99 not found",
        result_buffered_for_ns: 0,
        code_mode_host_duration_ns: 0,
      },
    },
  });

  // operation/cancel of a wait; then terminate.
  const forever = c.execute("session-1", `text("f"); yield_control(); await new Promise(() => {})`, {
    yield_time_ms: 30_000,
  });
  const foreverCell = (await forever.started).value.cellId;
  assert.ok("Yielded" in (await forever.initial).value);
  const waitId = c.nextId();
  const cancelled = c.wait("session-1", foreverCell, 600_000, waitId);
  // No wait needed: the host reads its stdin in order and starts a wait (the core observing the
  // cell) as it reads it, so the cancel written after it always finds it observing.
  await c.send({ type: "operation/cancel", id: waitId });
  assert.deepEqual(await cancelled, failure("code-mode request cancelled"));
  assert.deepEqual(untimed((await c.terminate("session-1", foreverCell)).value.outcome), {
    LiveCell: { Terminated: { cell_id: foreverCell, content_items: [], code_mode_host_duration_ns: 0 } },
  });

  // operation/yield of an execute: the cell keeps running.
  const y = c.execute(
    "session-2",
    `text("y"); notify("y written"); await new Promise((r) => setTimeout(r, 200)); text("z")`,
    { yield_time_ms: 600_000 },
  );
  const yCell = (await y.started).value.cellId;
  await c.waitFor((m) => m.type === "delegate/request" && m.request.text === "y written");
  await c.send({ type: "operation/yield", id: y.id });
  assert.deepEqual(untimed(await y.initial), {
    status: "ok",
    value: {
      Yielded: {
        cell_id: yCell,
        content_items: [{ type: "input_text", text: "y" }],
        code_mode_host_duration_ns: 0,
      },
    },
  });
  assert.deepEqual(texts((await c.wait("session-2", yCell, 30_000)).value.outcome.LiveCell), ["z"]);

  // session/shutdown answers session/closed after the session's cell/closed (the yielded and
  // cancelled-wait cells included).
  const closed = await c.shutdown("session-1");
  assert.deepEqual(closed, { status: "ok", value: { type: "session/closed", sessionId: "session-1" } });
  const at = c.received.findIndex((m) =>
    m.type === "operation/response" && m.result?.value?.type === "session/closed"
  );
  const cellClosed = c.received.filter((m, i) =>
    m.type === "cell/closed" && m.sessionId === "session-1" && i < at
  );
  assert.deepEqual(cellClosed.map((m) => m.cellId).sort(), ["1", "2", "3", slowCell, foreverCell].sort());
  // Each cell's cell/closed comes after its initial response.
  for (const m of c.received.filter((m) => m.type === "cell/closed")) {
    const closedAt = c.received.indexOf(m);
    const initialAt = c.received.findIndex((x) =>
      x.type === "execute/initialResponse" && Object.values(x.result.value ?? {}).some((v: Json) =>
        v.cell_id === m.cellId
      ) &&
      c.received.some((s) =>
        s.type === "operation/response" && s.id === x.id && s.result.value?.cellId === m.cellId
      )
    );
    assert.ok(
      initialAt >= 0 && initialAt < closedAt,
      `cell ${m.sessionId}/${m.cellId} closed before its initial response`,
    );
  }

  // Session IDs are not reused; unknown sessions are named.
  assert.deepEqual(await c.open("session-1"), failure("code-mode session ID `session-1` was reused"));
  assert.deepEqual(await c.wait("session-7", "1"), failure("unknown code-mode session session-7"));
  // A refused execute gets its operation/response only (no execute/initialResponse).
  const refused = c.execute("session-7", `text(1)`);
  assert.deepEqual(await refused.started, failure("unknown code-mode session session-7"));
  assert.deepEqual(texts((await c.run("session-2", `text("still here")`)).value), ["still here"]);
  assert.ok(!c.received.some((m) => m.type === "execute/initialResponse" && m.id === refused.id));

  await finishCleanly(c, runtimes);
});

Deno.test("V1: the three handshake rejections and an invalid hello end the host", async (t) => {
  const cases: [string, (c: V1Client) => Promise<Json>, Json][] = [
    [
      "first message is not a hello",
      async (c) => {
        await c.send({ type: "operation/cancel", id: 1 });
        return await c.waitFor((m) => m.type === "connection/rejected");
      },
      { type: "invalidHello", message: "first message must be connection/hello" },
    ],
    [
      "no version 1",
      (c) => c.hello({ supportedVersions: [2, 3] }),
      { type: "noCompatibleVersion", supportedVersions: [1] },
    ],
    [
      "an unknown required capability",
      (c) =>
        c.hello({ requiredCapabilities: ["yield-observation", "teleportation"], optionalCapabilities: [] }),
      { type: "missingRequiredCapability", capability: "teleportation" },
    ],
  ];
  for (const [name, act, reason] of cases) {
    await t.step(name, async () => {
      await using c = V1Client.spawn();
      assert.deepEqual(await act(c), { type: "connection/rejected", reason });
      await c.closed;
      // As Codex's own host: a rejection is an orderly end (exit 0).
      assert.equal((await c.child!.status).code, 0, await c.stderr);
      assert.deepEqual(parseFrames(c.stdoutBytes()), c.received);
      assert.deepEqual(c.received, [{ type: "connection/rejected", reason }]);
    });
  }
  await t.step("an undecodable hello is fatal (exit 1), not rejected", async () => {
    await using c = V1Client.spawn();
    await c.send({
      type: "connection/hello",
      supportedVersions: [1],
      requiredCapabilities: [],
      optionalCapabilities: [],
      extra: true,
    });
    await c.closed;
    assert.equal((await c.child!.status).code, 1);
    assert.deepEqual(c.received, []);
    assert.match(
      await c.stderr,
      /failed to read code-mode client hello: failed to decode code-mode IPC frame: unknown field `extra`, expected one of `supportedVersions`, `requiredCapabilities`, `optionalCapabilities`/,
    );
  });
});

Deno.test("V1: a second hello, a duplicate request ID, unknown fields and oversized frames are fatal (exit 1)", async (t) => {
  for (
    const [name, act, message] of [
      ["second hello", (c: V1Client) => c.hello(), "received a second code-mode client hello"],
      ["duplicate request ID", async (c: V1Client) => {
        await c.open("session-1");
        await c.request({ method: "session/open", sessionId: "session-2" }, 1);
      }, "duplicate code-mode request ID RequestId(1)"],
      [
        "unknown request field",
        (c: V1Client) => c.request({ method: "session/shutdown", sessionId: "session-1", force: true }),
        "failed to read code-mode client message: failed to decode code-mode IPC frame: unknown field `force`, expected `sessionId`",
      ],
      [
        "unknown execute field",
        async (c: V1Client) => {
          await c.open("session-1");
          await c.request({
            method: "session/execute",
            sessionId: "session-1",
            request: { tool_call_id: "c", enabled_tools: [], source: "", surprise: 1 },
          });
        },
        "unknown field `surprise`, expected one of `catalog_revision`, `tool_call_id`, `enabled_tools`, `source`, `yield_time_ms`, `max_output_tokens`",
      ],
      [
        // Codex's own host refuses a frame over 64 MiB by its length alone (its clients never send one).
        "a frame over 64 MiB",
        async (c: V1Client) => {
          await c.open("session-1");
          c.execute("session-1", `text("big")//` + "x".repeat(67_108_864));
        },
        "failed to read code-mode client message: code-mode IPC frame length \\d+ exceeds 67108864 bytes",
      ],
    ] as const
  ) {
    await t.step(name, async () => {
      await using c = V1Client.spawn();
      await c.hello();
      void (act(c) as Promise<unknown>).catch(() => {});
      await c.closed;
      assert.equal((await c.child!.status).code, 1);
      assert.match(await c.stderr, new RegExp(message.replace(/[`()]/g, ".")));
      assert.deepEqual(parseFrames(c.stdoutBytes()), c.received);
    });
  }
});

Deno.test("V1: a reader that stops reading while a cell floods output: host memory stays bounded, then it completes", async () => {
  await using c = V1Client.spawn({ keepStdout: false });
  await c.hello();
  await c.open("session-1");
  let notes = 0;
  c.onDelegate = () => {
    notes++;
    return { status: "ok", value: { type: "notification/delivered" } };
  };
  const N = 640; // 640 MiB of text and 640 notifications
  const pid = c.child!.pid;
  const before = rssBytes(pid);
  c.pause();
  const e = c.execute(
    "session-1",
    `const mib = "x".repeat(1 << 20);
     for (let i = 0; i < ${N}; i++) { text(mib); notify("n" + i); await new Promise((r) => setTimeout(r, 0)); }
     text("done")`,
    { yield_time_ms: 100 },
  );
  // The host's memory, sampled every 100 ms while the client reads nothing, until the runtimes
  // (the host's descendants) have written the whole flood to the host. Nothing reports that, so
  // this polls their write counters, bounded.
  let peak = 0;
  const flooded = () => descendants(pid).reduce((sum, p) => sum + writtenBytes(p), 0) >= N * 1_048_576;
  for (const deadline = performance.now() + 20_000; !flooded() && performance.now() < deadline;) {
    peak = Math.max(peak, rssBytes(pid));
    await sleep(100);
  }
  peak = Math.max(peak, rssBytes(pid));
  c.resume();
  const cell = (await e.started).value.cellId;
  let result = await e.initial;
  let missing = false;
  while (!missing && (result.status === "error" || !("Result" in result.value))) {
    peak = Math.max(peak, rssBytes(pid));
    // A window over the frame limit is consumed and answered with Codex's host's frame-limit error.
    if (result.status === "error") {
      assert.match(
        result.message,
        /^code-mode (initial|host) response exceeds the IPC frame limit: code-mode IPC frame length \d+ exceeds 67108864 bytes$/,
      );
    }
    const waited = await c.wait("session-1", cell, 30_000);
    missing = waited.status === "ok" && "MissingCell" in waited.value.outcome;
    result = waited.status === "ok" ? { status: "ok", value: waited.value.outcome.LiveCell } : waited;
  }
  // Every byte was produced while the client did not read; the window that holds "done" is
  // delivered whole, or (over the frame limit) consumed, and the cell is then missing.
  if (!missing) {
    assert.equal(result.value.Result.error_text, null);
    assert.equal(texts(result.value).at(-1), "done");
  }
  console.log(`V1 flood: host RSS grew by ${(peak - before) >> 20} MiB for ${N} MiB of output`);
  await c.waitFor(() => notes === N);
  assert.ok(peak - before < 600 * 1_048_576, `host grew by ${(peak - before) >> 20} MiB`);
  await finishCleanly(c, [], false);
});

Deno.test("V1: stdin EOF with running cells and a pending wait: exit 0, every runtime reaped", async () => {
  await using c = V1Client.spawn();
  await c.hello();
  await c.open("session-1");
  await c.open("session-2");
  const a = c.execute("session-1", `text("a"); yield_control(); await new Promise(() => {})`);
  const cell = (await a.started).value.cellId;
  await a.initial;
  const spinning = c.execute("session-2", `while (true) {}`, { yield_time_ms: 600_000 });
  spinning.initial.catch(() => {});
  const pending = c.wait("session-1", cell, 600_000);
  pending.catch(() => {});
  // Session 2's cell has started; the wait, sent before the EOF, is registered as the host reads it.
  await spinning.started;
  const runtimes = descendants(c.child!.pid);
  assert.ok(runtimes.length >= 2);
  await finishCleanly(c, runtimes);
});

Deno.test("V1: the launcher works through a symlink from another directory, and passes an explicit --listen through", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${dir}/elsewhere`);
    await Deno.symlink(new URL("../bin/codex-code-mode-host", import.meta.url).pathname, `${dir}/host-link`);
    await Deno.symlink(`${dir}/host-link`, `${dir}/elsewhere/host`);
    for (const args of [[], ["--listen", "stdio://"], ["--listen=stdio", "--warm-sessions", "0"]]) {
      await using c = V1Client.spawn({ command: `${dir}/elsewhere/host`, cwd: `${dir}/elsewhere`, args });
      assert.equal((await c.hello()).type, "connection/ready", args.join(" "));
      await c.open("session-1");
      assert.deepEqual(texts((await c.run("session-1", `text("ok")`)).value), ["ok"]);
      await finishCleanly(c, []);
    }
    const refused = await new Deno.Command(`${dir}/elsewhere/host`, {
      args: ["--listen", "tcp://nowhere"],
      clearEnv: true,
      env: {
        PATH: `${Deno.execPath().replace(/\/[^/]+$/, "")}:/usr/bin:/bin`,
        HOME: Deno.env.get("HOME") ?? "/tmp",
      },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(refused.code, 2);
    assert.equal(refused.stdout.length, 0);
    assert.match(new TextDecoder().decode(refused.stderr), /unsupported --listen URL `tcp:\/\/nowhere`/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("V1: a Client-mode outcome over 64 MiB is consumed and refused as Codex's host does, with the length of its JSON frame", async () => {
  await using c = V1Client.spawn();
  await c.hello();
  await c.open("session-1");
  const frameError = (what: string, result: Json): number => {
    assert.equal(result.status, "error");
    const match = new RegExp(
      `^code-mode ${what} response exceeds the IPC frame limit: code-mode IPC frame length (\\d+) exceeds 67108864 bytes$`,
    ).exec(result.message);
    assert.ok(match, result.message);
    return Number(match[1]);
  };
  /** The JSON frame a result would have been, its durations written as 0 (each adds its digits after the first). */
  const frameOf = (id: number, type: string, value: Json) =>
    new TextEncoder().encode(JSON.stringify({ type, id, result: { status: "ok", value } })).length;
  // 18 Mi repeats of `a"b\n` and `\u0001`: 90 MiB of text, sent by the cell in reduced form; JSON
  // escaping adds 2 bytes for each `a"b\n` and 5 for each `\u0001` (sized by the runtime).
  const unit = 'a"b\n\u0001';
  const text = unit.repeat(18 * 1024 * 1024);
  const e = c.execute("session-1", `text(${JSON.stringify(unit)}.repeat(18 * 1024 * 1024)); text("é")`, {
    yield_time_ms: 60_000,
  });
  const n = frameError("initial", await e.initial);
  const base = frameOf(e.id, "execute/initialResponse", {
    Result: {
      cell_id: "1",
      content_items: [{ type: "input_text", text }, { type: "input_text", text: "é" }],
      error_text: null,
      result_buffered_for_ns: 0,
      code_mode_host_duration_ns: 0,
    },
  });
  assert.ok(n >= base && n <= base + 19, `${n} vs ${base}`);
  // The cell was consumed.
  const gone = await c.wait("session-1", "1");
  assert.equal(gone.value.outcome.MissingCell.Result.error_text, "exec cell 1 not found");
  // An error text alone (a Wait's response this time).
  const second = await c.run(
    "session-1",
    `yield_control(); await new Promise((r) => setTimeout(r, 50)); throw ${
      JSON.stringify(unit)
    }.repeat(14 * 1024 * 1024)`,
    { yield_time_ms: 60_000 },
  );
  assert.ok("Yielded" in second.value);
  const waitId = 1_000_000;
  const m = frameError("host", await c.wait("session-1", "2", 30_000, waitId));
  const waitBase = frameOf(waitId, "operation/response", {
    type: "wait/completed",
    outcome: {
      LiveCell: {
        Result: {
          cell_id: "2",
          content_items: [],
          error_text: unit.repeat(14 * 1024 * 1024),
          result_buffered_for_ns: 0,
          code_mode_host_duration_ns: 0,
        },
      },
    },
  });
  assert.ok(m >= waitBase && m <= waitBase + 38, `${m} vs ${waitBase}`);
  await finishCleanly(c, [], false);
});

Deno.test("V1: a yield is written before the cell's later notifications and tool calls, as Codex's host writes them", async () => {
  await using c = V1Client.spawn();
  await c.hello();
  await c.open("session-1");
  c.onDelegate = (m) =>
    m.request.type === "notification/send"
      ? { status: "ok", value: { type: "notification/delivered" } }
      : toolResult({ ok: true });
  // Several rounds: the cell runs on after its yield while the host is still writing it.
  for (let round = 1; round <= 5; round++) {
    const e = c.execute(
      "session-1",
      `notify("early"); text("before"); yield_control(); notify("after"); await tools.echo({}); text("done")`,
      { enabled_tools: [tool("echo")], yield_time_ms: 30_000 },
    );
    const initial = await e.initial;
    assert.ok("Yielded" in initial.value);
    const cell = initial.value.Yielded.cell_id;
    const done = await c.wait("session-1", cell, 30_000);
    assert.deepEqual(texts(done.value.outcome.LiveCell), ["done"]);
    const mine = c.received.filter((m) =>
      (m.type === "execute/initialResponse" && m.id === e.id) ||
      (m.type === "delegate/request" && (m.request.cellId ?? m.request.invocation?.cell_id) === cell)
    ).map((m) => m.type === "execute/initialResponse" ? "yielded" : m.request.text ?? m.request.type);
    assert.deepEqual(mine, ["early", "yielded", "after", "tool/invoke"], `round ${round}`);
  }
  await finishCleanly(c, [], false);
});

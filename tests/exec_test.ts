/**
 * `deno task exec` (client/exec.ts): one cell from the shell, on a private host or a running one;
 * each exit code (0 completed, 1 failed, 2 usage error), SOURCE on stdin, `--json`, and
 * `--session-file` (a kept session shared by consecutive commands, and what happens when it is lost).
 */
import assert from "node:assert/strict";
import { createHost, RESET_MESSAGE } from "../mod.ts";
import { alive, descendants } from "./_v1_helpers.ts";

const ROOT = new URL("..", import.meta.url).pathname;

/** Runs `deno task exec ARGS` (with `stdin` as its input, if given). */
async function exec(
  args: string[],
  stdin?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["task", "-q", "exec", ...args],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(stdin));
    await writer.close();
  }
  const out = await child.output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { code: out.code, stdout: decode(out.stdout), stderr: decode(out.stderr) };
}

/** The header of SPEC §11.5 step 4 with any wall time. */
function header(status: string): string {
  return `${status}\\nWall time \\d+\\.\\d seconds\\nOutput:\\n`;
}

Deno.test("deno task exec runs a cell on a private host it starts and stops, prints it as a model sees it, exits 0", async () => {
  const result = await exec(['text("hello"); text({ n: 42 })']);
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, new RegExp(`^${header("Script completed")}hello\\n\\{"n":42\\}\\n$`));
});

Deno.test("deno task exec exits 1 when the cell fails, with the Script error item; 0 for SOURCE on stdin; --json prints the raw outcome; a pragma line sets the budget", async () => {
  await using host = await createHost({ listen: "127.0.0.1:0", log: "warn" });
  const failed = await exec(["--endpoint", host.url, 'text("before"); throw new Error("boom")']);
  assert.equal(failed.code, 1, failed.stderr);
  assert.match(
    failed.stdout,
    new RegExp(`^${header("Script failed")}before\\nScript error:\\nError: boom\\n`),
  );

  const json = await exec(["--endpoint", host.url, "--json"], "text(1 + 1)");
  assert.equal(json.code, 0, json.stderr);
  const response = JSON.parse(json.stdout);
  assert.deepEqual({ ...response, codeModeHostDurationNs: 0 }, {
    type: "result",
    cellId: "1",
    contentItems: [{ type: "input_text", text: "2" }],
    codeModeHostDurationNs: 0,
  });

  // The model's `exec` input as it is: a pragma line sets the token budget, which the host applies.
  const pragma = await exec([
    "--endpoint",
    host.url,
    '// @exec: {"max_output_tokens": 5}\ntext("0123456789".repeat(20))',
  ]);
  assert.equal(pragma.code, 0, pragma.stderr);
  assert.match(
    pragma.stdout,
    new RegExp(`^${header("Script completed")}Warning: truncated output \\(original token count: 50\\)\n`),
  );
  assert.match(pragma.stdout, /\n0123456789…45 tokens truncated…0123456789\n$/);

  const unreachable = await exec(["--endpoint", "http://127.0.0.1:1", "text(1)"]);
  assert.equal(unreachable.code, 1);
  assert.match(
    unreachable.stderr,
    /^exec: gRPC code-mode session opening failed: code: 'The service is currently unavailable'/,
  );
});

Deno.test("deno task exec exits 2 on usage errors without running anything", async () => {
  for (
    const [args, message] of [
      [["--no-such-flag", "text(1)"], "Unknown option '--no-such-flag'"],
      [["--endpoint", "ftp://127.0.0.1:1", "text(1)"], "gRPC code-mode host URL must use http or https"],
      [["--yield-time-ms", "soon", "text(1)"], "--yield-time-ms must be a non-negative integer, got `soon`"],
      [["text(1)", "text(2)"], "expected one SOURCE argument, got 2 (quote the source)"],
      [["   "], "exec expects raw JavaScript source text (non-empty)."],
      [
        ['// @exec: {"bogus": 1}\ntext(1)'],
        "exec pragma only supports `yield_time_ms` and `max_output_tokens`; got `bogus`",
      ],
      [["--close"], "--close needs --session-file"],
    ] as const
  ) {
    const result = await exec([...args]);
    assert.equal(result.code, 2, `${args}: ${result.stderr}`);
    assert.equal(result.stdout, "");
    assert.ok(result.stderr.startsWith(`exec: ${message}`), result.stderr);
    assert.match(result.stderr, /\nusage: deno task exec /);
  }
});

Deno.test("deno task exec --session-file: consecutive commands share one session; a lost keeper fails once with the reset message", async () => {
  await using host = await createHost({ listen: "127.0.0.1:0", log: "warn" });
  const dir = await Deno.makeTempDir();
  const file = `${dir}/session.json`;
  const base = ["--endpoint", host.url, "--session-file", file];
  try {
    const first = await exec([...base, 'store("n", 41); text("stored")']);
    assert.equal(first.code, 0, first.stderr);
    const { pid: keeper, socket } = JSON.parse(await Deno.readTextFile(file));
    const second = await exec([...base, 'text(load("n") + 1)']);
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stdout, new RegExp(`^${header("Script completed")}42\\n$`));

    // The keeper (and with it the session and its stored values) is gone: the next command says
    // so and runs nothing; the one after runs on a fresh session.
    Deno.kill(keeper, "SIGKILL");
    while (alive(keeper)) await new Promise((r) => setTimeout(r, 10));
    await Deno.remove(socket.slice(0, socket.lastIndexOf("/")), { recursive: true }); // a killed keeper's
    const lost = await exec([...base, 'store("n", 1); text("ran")']);
    assert.equal(lost.code, 1);
    assert.equal(lost.stdout, "");
    assert.equal(lost.stderr, `exec: ${RESET_MESSAGE}\n`);
    const fresh = await exec([...base, "text(String(load('n')))"]);
    assert.equal(fresh.code, 0, fresh.stderr);
    assert.match(fresh.stdout, /\nundefined\n$/);

    // The session lives on that host: another endpoint with the same file is a usage error.
    const elsewhere = await exec(["--endpoint", "http://127.0.0.1:1", "--session-file", file, "text(1)"]);
    assert.equal(elsewhere.code, 2);
    assert.match(
      elsewhere.stderr,
      new RegExp(`^exec: --session-file ${file} holds a session on ${host.url};`),
    );

    const next = JSON.parse(await Deno.readTextFile(file)).pid as number;
    const closed = await exec([...base, "--close"]);
    assert.equal(closed.code, 0, closed.stderr);
    while (alive(next)) await new Promise((r) => setTimeout(r, 10));
    await assert.rejects(Deno.stat(file), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("deno task exec terminates the cell on SIGINT, prints the terminated outcome and exits 1", async () => {
  await using host = await createHost({ listen: "127.0.0.1:0", log: "warn" });
  for (const extra of [[], ["--session-file", `${await Deno.makeTempDir()}/session.json`]]) {
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "task",
        "-q",
        "exec",
        "--endpoint",
        host.url,
        ...extra,
        'text("going"); yield_control(); await new Promise(() => {})',
      ],
      cwd: ROOT,
      env: { NO_COLOR: "1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const stderr = new Response(child.stderr).text();
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let stdout = "";
    // The yielded observation is printed: the cell is running.
    while (!stdout.includes("going\n")) {
      const { done, value } = await reader.read();
      if (done) assert.fail(`exec ended early: ${stdout} ${await stderr}`);
      stdout += value;
    }
    // Ctrl-C signals the terminal's whole foreground group; `deno task` itself does not pass it on.
    Deno.kill(descendants(child.pid)[0], "SIGINT");
    for (let r = await reader.read(); !r.done; r = await reader.read()) stdout += r.value;
    const status = await child.status;
    assert.equal(status.code, 1, await stderr);
    assert.match(
      stdout,
      new RegExp(`^${header("Script running with cell ID \\d+")}going\\n${header("Script terminated")}$`),
    );
    if (extra.length > 0) {
      assert.equal((await exec([...extra, "--close"])).code, 0);
      await Deno.remove(extra[1].slice(0, extra[1].lastIndexOf("/")), { recursive: true });
    }
  }
});

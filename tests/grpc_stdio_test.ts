/**
 * gRPC over stdio (`--listen grpc+stdio://`, SPEC §9.1) and the process-owned provider: real host
 * processes spawned by the provider, real pipes.
 */
import assert from "node:assert/strict";
import { CodeModeError, ProcessOwnedGrpcCodeModeSessionProvider, RESET_MESSAGE } from "../mod.ts";
import { eventually, processExists, settledWithin } from "./_harness.ts";
import { RecordingDelegate, rejection, run, textResponse } from "./_client_harness.ts";
import { descendants } from "./_v1_helpers.ts";
import { defaultHostArgs } from "../client/process_provider.ts";

function hostArgs(...extra: string[]): string[] {
  return defaultHostArgs("--warm-sessions", "0", "--log-level", "warn", ...extra);
}

const echo = { name: "echo", toolName: { name: "echo" }, description: "", kind: "function" as const };

Deno.test("process-owned provider: cells, stored values, tools through the delegate and terminate over the child's pipes; the child is reaped after the last session", async () => {
  await using provider = new ProcessOwnedGrpcCodeModeSessionProvider({ args: hostArgs() });
  const session = await provider.createSession();
  const pid = provider.pid!;
  assert.ok(processExists(pid));

  const stored = await run(session, 'store("k", 41); text("stored")');
  assert.deepEqual(stored, textResponse("1", "stored", stored.codeModeHostDurationNs));
  const loaded = await run(session, 'text(String(load("k") + 1))');
  assert.deepEqual(loaded, textResponse("2", "42", loaded.codeModeHostDurationNs));

  const delegate = new RecordingDelegate((input) => (input as number) + 1);
  const toolCell = await session.execute(
    {
      toolCallId: "call-2",
      enabledTools: [echo],
      source: 'notify("note"); text(String(await tools.echo(1)))',
    },
    delegate,
  );
  const toolResult = await toolCell.initialResponse();
  assert.deepEqual(toolResult, textResponse("3", "2", toolResult.codeModeHostDurationNs));
  assert.deepEqual(delegate.calls, [{ cellId: "3", name: "echo", input: 1 }]);
  assert.deepEqual(delegate.notifications, [{ callId: "call-2", cellId: "3", text: "note" }]);

  const slow = await session.execute(
    { toolCallId: "call-3", enabledTools: [], source: "await new Promise(() => {})", yieldTimeMs: 0 },
    delegate,
  );
  assert.equal((await slow.initialResponse()).type, "yielded");
  assert.equal((await session.terminate(slow.cellId)).response.type, "terminated");

  await session.shutdown();
  assert.ok(await eventually(() => !processExists(pid), 10_000), "the child exits after the last session");
  assert.ok(await eventually(() => provider.pid === undefined, 2_000), "and is reaped");
  assert.equal(provider.spawned, 1);
});

Deno.test("process-owned provider: two sessions share one child and are isolated; a later session spawns a fresh child", async () => {
  await using provider = new ProcessOwnedGrpcCodeModeSessionProvider({ args: hostArgs() });
  const a = await provider.createSession();
  const b = await provider.createSession();
  assert.equal(provider.spawned, 1);
  const pid = provider.pid!;
  await run(a, 'store("k", "a"); text("a")');
  const fromB = await run(b, 'text(String(load("k")))');
  assert.deepEqual(fromB, textResponse("g2:1", "undefined", fromB.codeModeHostDurationNs));
  await a.shutdown();
  // b still holds the connection: the same child serves it.
  const again = await run(b, 'text("still here")');
  assert.deepEqual(again, textResponse("g2:2", "still here", again.codeModeHostDurationNs));
  assert.equal(provider.pid, pid);
  await b.shutdown();
  assert.ok(await eventually(() => provider.pid === undefined, 10_000));
  const c = await provider.createSession();
  assert.equal(provider.spawned, 2);
  assert.notEqual(provider.pid, pid);
  const fromC = await run(c, 'text("fresh")');
  assert.deepEqual(fromC, textResponse("g3:1", "fresh", fromC.codeModeHostDurationNs));
  await c.shutdown();
});

Deno.test("process-owned provider: a SIGSTOPped child is detected by keep-alive and killed; the next calls get the reset message, then run on a new child as g2", async () => {
  await using provider = new ProcessOwnedGrpcCodeModeSessionProvider({
    args: hostArgs(),
    keepaliveIntervalMs: 300,
    keepaliveTimeoutMs: 300,
    exitGraceMs: 300,
  });
  const session = await provider.createSession();
  const first = await run(session, 'text("before")');
  assert.equal(first.cellId, "1");
  const pid = provider.pid!;
  Deno.kill(pid, "SIGSTOP");
  try {
    assert.ok(await eventually(() => !processExists(pid), 20_000), "the hung child is killed");
  } finally {
    try {
      Deno.kill(pid, "SIGCONT");
    } catch { /* gone */ }
  }
  const reset = await rejection(run(session, 'text("lost")'));
  assert.ok(reset instanceof CodeModeError);
  assert.equal(reset.message, RESET_MESSAGE);
  const after = await run(session, 'text("recovered")');
  assert.deepEqual(after, textResponse("g2:1", "recovered", after.codeModeHostDurationNs));
  assert.equal(provider.spawned, 2);
  assert.notEqual(provider.pid, pid);
  await session.shutdown();
});

Deno.test("process-owned provider: a killed child fails its pending wait; the session recovers on a new child as g2", async () => {
  await using provider = new ProcessOwnedGrpcCodeModeSessionProvider({ args: hostArgs() });
  const session = await provider.createSession();
  const cell = await session.execute(
    { toolCallId: "c", enabledTools: [], source: "await new Promise(() => {})", yieldTimeMs: 0 },
    new RecordingDelegate(),
  );
  assert.equal((await cell.initialResponse()).type, "yielded");
  const pending = rejection(session.wait({ cellId: cell.cellId, yieldTimeMs: 60_000 }));
  const pid = provider.pid!;
  await new Promise((r) => setTimeout(r, 200));
  Deno.kill(pid, "SIGKILL");
  const failure = await pending;
  assert.ok(failure instanceof CodeModeError);
  assert.notEqual(failure.message, RESET_MESSAGE);
  assert.equal((await rejection(run(session, 'text("lost")'))).message, RESET_MESSAGE);
  const after = await run(session, 'text("g2")');
  assert.deepEqual(after, textResponse("g2:1", "g2", after.codeModeHostDurationNs));
  await session.shutdown();
});

Deno.test("process-owned provider: dispose kills and reaps the child and refuses new sessions", async () => {
  const provider = new ProcessOwnedGrpcCodeModeSessionProvider({ args: hostArgs(), exitGraceMs: 1_000 });
  const session = await provider.createSession();
  await run(session, 'text("x")');
  const pid = provider.pid!;
  await provider[Symbol.asyncDispose]();
  assert.ok(!processExists(pid));
  assert.equal(provider.pid, undefined);
  assert.equal(
    (await rejection(provider.createSession())).message,
    "code-mode host process provider is disposed",
  );
  await rejection(run(session, 'text("gone")'));
});

const PREFACE = new TextEncoder().encode("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const EMPTY_SETTINGS = new Uint8Array([0, 0, 0, 4, 0, 0, 0, 0, 0]);
/** GOAWAY (type 7) on stream 0: last stream 0, NO_ERROR. */
const GOAWAY = new Uint8Array([0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);

Deno.test("grpc+stdio://: stdout is HTTP/2 frames only (SETTINGS first, no endpoint line); the GOAWAY guard filters stdin; stdin EOF → exit 0 with no runtime left", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: hostArgs("--warm-sessions", "1", "--log-level", "debug"), // the last value of a flag wins
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // The log as it comes: the GOAWAY guard's line is the event the test waits for below.
  const guarded = Promise.withResolvers<void>();
  const stderr = (async () => {
    let text = "";
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) {
      text += decoder.decode(chunk, { stream: true });
      if (text.includes("a client's GOAWAY was not passed to nghttp2")) guarded.resolve();
    }
    return text + decoder.decode();
  })();
  const chunks: Uint8Array[] = [];
  let received = 0;
  const stdout = (async () => {
    for await (const chunk of child.stdout) {
      chunks.push(chunk);
      received += chunk.length;
    }
    const all = new Uint8Array(received);
    let offset = 0;
    for (const chunk of chunks) {
      all.set(chunk, offset);
      offset += chunk.length;
    }
    return all;
  })();
  const writer = child.stdin.getWriter();
  await writer.write(PREFACE);
  await writer.write(EMPTY_SETTINGS);
  const runtimes = () =>
    descendants(child.pid).filter((pid) => {
      try {
        return Deno.readTextFileSync(`/proc/${pid}/cmdline`).includes("runtime.js");
      } catch {
        return false;
      }
    });
  assert.ok(await eventually(() => runtimes().length > 0, 20_000), "the warm runtime started");
  // The server's SETTINGS and its ACK of ours.
  assert.ok(await eventually(() => received >= 18, 20_000), "the server answered the preface");
  const before = runtimes();
  await writer.write(GOAWAY);
  await settledWithin(guarded.promise, 10_000);
  await writer.close();
  const status = await child.status;
  const bytes = await stdout;
  const log = await stderr;
  assert.equal(status.code, 0, log);
  for (const pid of before) assert.ok(!processExists(pid), `runtime ${pid} is gone`);

  // Parse stdout to EOF as a sequence of HTTP/2 frames.
  assert.ok(bytes.length >= 9, "the server wrote its SETTINGS");
  const types: number[] = [];
  let at = 0;
  while (at < bytes.length) {
    assert.ok(bytes.length - at >= 9, `a whole frame header at ${at}`);
    const length = (bytes[at] << 16) | (bytes[at + 1] << 8) | bytes[at + 2];
    const type = bytes[at + 3];
    assert.ok(type <= 9, `frame type ${type} at ${at}`);
    types.push(type);
    at += 9 + length;
  }
  assert.equal(at, bytes.length, "stdout ends on a frame boundary");
  assert.equal(types[0], 4, "the first frame is SETTINGS");
  assert.ok(types.includes(4));
  const lines = log.split("\n").filter(Boolean).map((l) => JSON.parse(l));
  assert.ok(lines.some((l) => l.msg === "code-mode-host listening on grpc+stdio://"), log);
  assert.ok(lines.some((l) => l.msg === "code-mode host shut down"), log);
  assert.ok(
    lines.some((l) => l.msg === "a client's GOAWAY was not passed to nghttp2 (see http2_guard.ts)"),
    "the GOAWAY guard sees the bytes from stdin",
  );
});

Deno.test("process-owned provider: a host command that cannot be spawned fails the opening UNAVAILABLE after the admission retries", async () => {
  await using provider = new ProcessOwnedGrpcCodeModeSessionProvider({
    command: "/nonexistent/code-mode-host",
  });
  const error = await rejection(provider.createSession());
  assert.ok(error instanceof CodeModeError);
  assert.equal(error.code, "UNAVAILABLE");
  assert.match(error.message, /^gRPC code-mode session opening failed: /);
  assert.equal(provider.spawned, 0);
});

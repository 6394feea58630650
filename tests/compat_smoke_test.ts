/**
 * The smoke subset that `deno task test:compat` (tests/compat.ts) runs on the oldest supported Deno,
 * and that `deno task test` runs on the current one: through the public API only (mod.ts), a gRPC
 * host and the embedded provider in both isolations open a session, run cells with text, store and
 * load, call a tool through the delegate, terminate a spinning cell, and report a runtime crash.
 * Session runtimes are spawned with `Deno.execPath()`, so an older Deno runs them too.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  type CodeModeSession,
  type CodeModeSessionDelegate,
  type CodeModeToolCall,
  createHost,
  GrpcCodeModeSessionProvider,
  InProcessCodeModeSessionProvider,
  type RuntimeResponse,
} from "../mod.ts";

/** Records what reaches the delegate; `echo` answers its input plus one. */
class Delegate implements CodeModeSessionDelegate {
  calls: unknown[] = [];
  notes: string[] = [];
  closed: string[] = [];
  invokeTool(call: CodeModeToolCall): Promise<unknown> {
    this.calls.push(call.input);
    return Promise.resolve((call.input as number) + 1);
  }
  #noted: [string, () => void][] = [];
  notify(_callId: string, _cellId: string, text: string): Promise<void> {
    this.notes.push(text);
    for (const [want, resolve] of this.#noted) if (want === text) resolve();
    return Promise.resolve();
  }
  /** Resolves once a notification with `text` was delivered, or after `ms` (the caller's assertions tell). */
  async noted(text: string, ms = 10_000): Promise<void> {
    if (this.notes.includes(text)) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await new Promise<void>((resolve) => {
      this.#noted.push([text, resolve]);
      timer = setTimeout(resolve, ms);
    });
    clearTimeout(timer);
  }
  cellClosed(cellId: string): void {
    this.closed.push(cellId);
  }
}

interface Subject extends AsyncDisposable {
  provider: { createSession(): Promise<CodeModeSession> };
}

const subjects: Record<string, () => Promise<Subject>> = {
  "gRPC host": async () => {
    const host = await createHost({ listen: "127.0.0.1:0", warmSessions: 0, log: "error" });
    return {
      provider: new GrpcCodeModeSessionProvider(host.url),
      [Symbol.asyncDispose]: () => host.shutdown(),
    };
  },
  "embedded subprocess": () => {
    const provider = new InProcessCodeModeSessionProvider({
      isolation: "subprocess",
      warmSessions: 0,
      log: "error",
    });
    return Promise.resolve({ provider, [Symbol.asyncDispose]: () => provider.shutdown() });
  },
  "embedded in-process": () => {
    const provider = new InProcessCodeModeSessionProvider({
      isolation: "in-process",
      warmSessions: 0,
      log: "error",
    });
    return Promise.resolve({ provider, [Symbol.asyncDispose]: () => provider.shutdown() });
  },
};

const echo = { name: "echo", toolName: { name: "echo" }, description: "", kind: "function" as const };

async function run(session: CodeModeSession, source: string, delegate = new Delegate()) {
  const cell = await session.execute({ toolCallId: "call-1", enabledTools: [echo], source }, delegate);
  return await cell.initialResponse();
}

function texts(response: RuntimeResponse): string[] {
  return response.contentItems.map((item) => (item as { text?: string }).text ?? "");
}

/** The processes whose parent is this one (Linux /proc). */
function children(): Set<number> {
  const found = new Set<number>();
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === Deno.pid) found.add(Number(entry.name));
    } catch { /* gone */ }
  }
  return found;
}

/**
 * A smoke test. Deno before 2.8 runs its op and resource sanitizers by default, and the host's
 * timers (its RSS watchdog, drain timers) outlive a test by design; the subset checks behaviour,
 * so they are off here, on every version alike.
 */
function smoke(name: string, fn: () => Promise<void>): void {
  Deno.test({ name, fn, sanitizeOps: false, sanitizeResources: false });
}

for (const [label, open] of Object.entries(subjects)) {
  smoke(
    `compat smoke, ${label}: cells with text, store and load, and a tool call through the delegate`,
    async () => {
      await using subject = await open();
      const session = await subject.provider.createSession();
      const delegate = new Delegate();
      const first = await run(
        session,
        'notify("early"); store("k", await tools.echo(1)); text(String(load("k")))',
        delegate,
      );
      assert.equal(first.type, "result");
      assert.deepEqual(texts(first), ["2"]);
      assert.deepEqual(delegate.calls, [1]);
      assert.deepEqual(delegate.notes, ["early"]);
      const second = await run(session, 'text(String(load("k") + 1))');
      assert.equal(second.cellId, "2");
      assert.deepEqual(texts(second), ["3"]);
      await session.shutdown();
    },
  );

  smoke(
    `compat smoke, ${label}: a spinning cell's terminate answers terminated; the next cell runs`,
    async () => {
      await using subject = await open();
      const session = await subject.provider.createSession();
      const cell = await session.execute(
        { toolCallId: "c", enabledTools: [], source: 'text("before"); for (;;) {}', yieldTimeMs: 500 },
        new Delegate(),
      );
      const first = await cell.initialResponse();
      assert.equal(first.type, "yielded");
      assert.deepEqual(texts(first), ["before"]);
      const outcome = await session.terminate(cell.cellId);
      assert.equal(outcome.type, "liveCell");
      assert.equal(outcome.type === "liveCell" && outcome.response.type, "terminated");
      assert.deepEqual(texts(await run(session, 'text("after")')), ["after"]);
      await session.shutdown();
    },
  );

  if (!label.includes("in-process")) { // in-process isolation has no runtime process to kill
    smoke(`compat smoke, ${label}: a killed runtime is reported to the cell waiting on it`, async () => {
      await using subject = await open();
      const before = children();
      const session = await subject.provider.createSession();
      const spawned = [...children()].filter((pid) => !before.has(pid));
      assert.equal(spawned.length, 1, `one runtime process spawned (${spawned})`);
      const delegate = new Delegate();
      const cell = await session.execute(
        {
          toolCallId: "c",
          enabledTools: [],
          source: 'notify("up"); await new Promise(() => {})',
          yieldTimeMs: 60_000,
        },
        delegate,
      );
      const outcome = cell.initialResponse();
      await delegate.noted("up"); // the cell is running
      Deno.kill(spawned[0], "SIGKILL");
      // The session ends with the crash: the cell's outcome rejects with the session's end status.
      const error = await outcome.then(() => undefined, (error: Error) => error);
      assert.ok(error instanceof Error, "the outcome rejects");
      assert.match(
        error.message,
        /code-mode V8 runtime thread ended unexpectedly: worker process killed by signal SIGKILL/,
      );
      await session.shutdown().catch(() => {});
    });
  }
}

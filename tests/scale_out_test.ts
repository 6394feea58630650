/**
 * Scale-out behind nginx (issue 19): the repository's nginx configuration (deploy/nginx/) in front
 * of three real hosts, each started with its own `--route-token`, and the client library talking to
 * nginx only.
 *
 * nginx runs on loopback as this test's child (`daemon off`, its own prefix, pid and log files in a
 * temporary folder, a free port). The routing and location files are the repository's, unchanged;
 * only the top-level file and the list of hosts (code-mode-hosts.conf) are written here, with the
 * hosts' real ports. `.ci/run` installs nginx (Debian's nginx-light) when it is missing; without it
 * this test fails and says so.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Metadata, Status } from "nice-grpc";
import {
  CodeModeError,
  GrpcCodeModeSessionProvider,
  NoopCodeModeSessionDelegate,
  RESET_MESSAGE,
} from "../mod.ts";
import type { CodeModeSession } from "../mod.ts";
import { rawClient, serve } from "./_harness.ts";
import { alive, descendants } from "./_v1_helpers.ts";
import { findNginx, startNginx } from "./_nginx.ts";

/** A host (`deno task serve`) with its route token; `host` is the host process itself. */
interface HostProcess extends AsyncDisposable {
  host: number;
  token: string;
  port: number;
  /** How many sessions the host opened (its `session opened` debug lines). */
  opened(): number;
}

async function startHost(token: string): Promise<HostProcess> {
  const p = await serve([
    "--listen",
    "grpc://127.0.0.1:0",
    "--route-token",
    token,
    "--warm-sessions",
    "1",
    "--log-level",
    "debug",
  ]);
  return {
    // `deno task` runs the host as its child; killing the task would let the host drain instead.
    host: descendants(p.child.pid)[0],
    token,
    port: Number(new URL(p.url).port),
    opened: () => p.stderr().split("\n").filter((line) => line.includes('"msg":"session opened"')).length,
    [Symbol.asyncDispose]: () => p[Symbol.asyncDispose](),
  };
}

const delegate = new NoopCodeModeSessionDelegate();

/** The generation part of a public cell ID (`g7:3` → `g7`; generation 1 has none). */
function generationOf(cellId: string): string {
  return cellId.includes(":") ? cellId.slice(0, cellId.indexOf(":")) : "g1";
}

/** Runs `source` on `session`; returns the text of its result (or throws the call's error). */
async function run(session: CodeModeSession, source: string): Promise<{ cellId: string; text: string }> {
  const cell = await session.execute({ toolCallId: "call-1", enabledTools: [], source }, delegate);
  const response = await cell.initialResponse();
  assert.equal(response.type, "result", JSON.stringify(response));
  assert.equal((response as { errorText?: string }).errorText, undefined);
  return {
    cellId: response.cellId,
    text: response.contentItems.map((item) => item.type === "input_text" ? item.text : "").join(""),
  };
}

Deno.test("nginx with the repository's config spreads 30 sessions over three hosts, pins each to its host, and a killed host resets only its own sessions", async () => {
  findNginx();
  const hosts = await Promise.all(
    ["code-mode-host-1", "code-mode-host-2", "code-mode-host-3"].map(startHost),
  );
  try {
    await using nginx = await startNginx(hosts);
    const endpoint = `http://127.0.0.1:${nginx.port}`;
    const provider = new GrpcCodeModeSessionProvider(endpoint);
    const sessions: CodeModeSession[] = [];
    try {
      sessions.push(...await Promise.all(Array.from({ length: 30 }, () => provider.createSession())));
      // Every cell of a session reaches the host that holds its stored values (another host would
      // answer NOT_FOUND and the client would reset the session).
      await Promise.all(sessions.map((s, i) => run(s, `store("me", ${i}); text("stored")`)));
      const loaded = await Promise.all(sessions.map((s) => run(s, `text(String(load("me")))`)));
      assert.deepEqual(loaded.map((r) => r.text), sessions.map((_, i) => String(i)));
      const generations = loaded.map((r) => generationOf(r.cellId));
      const opened = hosts.map((h) => h.opened());
      assert.equal(opened.reduce((a, b) => a + b), 30, `sessions per host: ${opened}`);
      assert.ok(opened.every((n) => n > 0), `sessions per host: ${opened}`);

      // Kill one host. Its sessions fail over (the reset message, then a fresh session on another
      // host); the others keep their values and see no error at all.
      const killed = hosts[1];
      Deno.kill(killed.host, "SIGKILL");
      while (alive(killed.host)) await new Promise((r) => setTimeout(r, 10));

      // nginx answers a call routed to the dead host itself: UNAVAILABLE with x-code-mode-route-lost.
      using raw = rawClient(endpoint);
      for (const token of [killed.token, "no-such-host"]) {
        let trailer: Metadata | undefined;
        const call = raw.client.execute(
          { sessionId: crypto.randomUUID(), executionId: crypto.randomUUID(), toolCallId: "c", source: "1" },
          { metadata: Metadata({ "x-code-mode-route": token }), onTrailer: (t: Metadata) => (trailer = t) },
        );
        const error = await (async () => {
          for await (const _ of call) { /* no event is expected */ }
        })().then(() => undefined, (e) => e);
        assert.equal(error?.code, Status.UNAVAILABLE, `${token}: ${error}`);
        assert.equal(trailer?.get("x-code-mode-route-lost"), "true");
      }

      const outcomes = await Promise.all(sessions.map(async (s, i) => {
        const failures: string[] = [];
        for (;;) {
          try {
            const result = await run(s, `text(String(load("me"))); store("me", ${i})`);
            return { failures, result };
          } catch (error) {
            assert.ok(error instanceof CodeModeError, String(error));
            failures.push(error.message);
            if (failures.length === 3) return { failures, result: undefined };
          }
        }
      }));
      const reset = outcomes.filter((o) => o.failures.length > 0);
      const untouched = outcomes.filter((o) => o.failures.length === 0);
      assert.equal(reset.length, opened[1], `the killed host had ${opened[1]} sessions`);
      outcomes.forEach((o, i) => {
        // A session that kept its host keeps its generation; a reset one has a new one.
        const same = generationOf(o.result!.cellId) === generations[i];
        assert.equal(same, o.failures.length === 0, `${o.result!.cellId} after ${generations[i]}`);
      });
      assert.deepEqual(
        untouched.map((o) => o.result!.text),
        outcomes.flatMap((o, i) => o.failures.length === 0 ? [String(i)] : []),
      );
      for (const o of reset) {
        // The call that met the loss fails with its own status (when the lease had not yet ended),
        // then the next one with the reset message; the one after runs on a new host session.
        assert.equal(o.failures.at(-1), RESET_MESSAGE, o.failures.join(" | "));
        assert.ok(o.failures.length <= 2, o.failures.join(" | "));
        assert.equal(o.result?.text, "undefined");
        assert.match(o.result!.cellId, /^g\d+:1$/);
      }
      // Afterwards every session works, on the two hosts that are left.
      const after = await Promise.all(sessions.map((s) => run(s, `text(String(load("me")))`)));
      assert.deepEqual(after.map((r) => r.text), sessions.map((_, i) => String(i)));
      // Each reset session cost exactly one more OpenSession, on a host that is left.
      assert.equal(hosts[0].opened() + hosts[2].opened(), opened[0] + opened[2] + reset.length);
    } finally {
      await Promise.all(sessions.map((s) => s.shutdown()));
    }
  } finally {
    await Promise.all(hosts.map((h) => h[Symbol.asyncDispose]()));
  }
});

/**
 * Scale-out behind nginx (issue 19): the repository's nginx configuration (deploy/nginx/) in front
 * of three real hosts, each started with its own `--route-token`, and the client library talking to
 * nginx only. Which host runs a cell is told by the cell itself: each host has its own stored-value
 * cap, which a `store()` over it names.
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
}

/**
 * Each host has its own stored-value cap, `PROBE_BASE + n`, so that a cell can tell which host runs it:
 * a `store()` over the cap throws `stored values exceed the {N}-byte session limit` (SPEC §6) and
 * stores nothing.
 */
const PROBE_BASE = 4_000_000;
const PROBE = `try { store("probe", "x".repeat(${PROBE_BASE + 100})); } catch (e) { text(String(e)); }`;

function hostOf(text: string): number {
  const match = text.match(/stored values exceed the (\d+)-byte session limit/);
  assert.ok(match, text);
  return Number(match[1]) - PROBE_BASE;
}

async function startHost(n: number): Promise<HostProcess> {
  const token = `code-mode-host-${n}`;
  const p = await serve([
    "--listen",
    "grpc://127.0.0.1:0",
    "--route-token",
    token,
    "--limit",
    `maxStoredValueBytes=${PROBE_BASE + n}`,
    "--warm-sessions",
    "1",
    "--log-level",
    "warn",
  ]);
  return {
    // `deno task` runs the host as its child; killing the task would let the host drain instead.
    host: descendants(p.child.pid)[0],
    token,
    port: Number(new URL(p.url).port),
    [Symbol.asyncDispose]: () => p[Symbol.asyncDispose](),
  };
}

const delegate = new NoopCodeModeSessionDelegate();

/** Runs `source` on `session`; returns the text of its result (or throws the call's error). */
async function run(session: CodeModeSession, source: string): Promise<{ cellId: string; text: string }> {
  const cell = await session.execute({ toolCallId: "call-1", enabledTools: [], source }, delegate);
  const response = await cell.initialResponse();
  assert.equal(response.type, "result", JSON.stringify(response));
  assert.equal((response as { errorText?: string }).errorText, undefined);
  return {
    cellId: response.cellId,
    text: response.contentItems.map((item) => item.type === "input_text" ? item.text : "").join("|"),
  };
}

Deno.test("nginx with the repository's config spreads 30 sessions over three hosts, pins each to its host, and a killed host resets only its own sessions", async () => {
  findNginx();
  const hosts = await Promise.all([1, 2, 3].map(startHost));
  try {
    await using nginx = await startNginx(hosts);
    const endpoint = `http://127.0.0.1:${nginx.port}`;
    const provider = new GrpcCodeModeSessionProvider(endpoint);
    const sessions: CodeModeSession[] = [];
    try {
      sessions.push(...await Promise.all(Array.from({ length: 30 }, () => provider.createSession())));
      // Each session stores a value and says which host runs it.
      const first = await Promise.all(sessions.map((s, i) => run(s, `store("me", ${i}); ${PROBE}`)));
      const placed = first.map((r) => hostOf(r.text));
      for (const n of [1, 2, 3]) assert.ok(placed.includes(n), `no session on host ${n}: ${placed}`);
      // Every later cell of a session runs on that same host and sees its value.
      const again = await Promise.all(sessions.map((s) => run(s, `text(String(load("me"))); ${PROBE}`)));
      assert.deepEqual(again.map((r) => r.text.split("|")[0]), sessions.map((_, i) => String(i)));
      assert.deepEqual(again.map((r) => hostOf(r.text.split("|")[1])), placed);

      // Kill host 2. Its sessions, and only they, fail over: the reset message, then a fresh session
      // on another host; the others keep their values and see no error at all.
      const killed = hosts[1];
      Deno.kill(killed.host, "SIGKILL");
      while (alive(killed.host)) await new Promise((r) => setTimeout(r, 10));

      // nginx answers a call routed to the dead host itself: UNAVAILABLE with x-code-mode-route-lost;
      // so it does for a token that names no host.
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
            return {
              failures,
              result: await run(s, `text(String(load("me"))); store("me", ${i}); ${PROBE}`),
            };
          } catch (error) {
            assert.ok(error instanceof CodeModeError, String(error));
            failures.push(error.message);
            if (failures.length === 3) return { failures, result: undefined };
          }
        }
      }));
      outcomes.forEach((o, i) => {
        const [value, probe] = o.result!.text.split("|");
        if (placed[i] !== 2) {
          assert.deepEqual(o.failures, [], `session ${i} on host ${placed[i]}`);
          assert.equal(value, String(i));
          assert.equal(hostOf(probe), placed[i]);
          assert.equal(generationOf(o.result!.cellId), generationOf(again[i].cellId));
          return;
        }
        // The call that met the loss fails with its own status (when the lease had not yet ended),
        // then the next one with the reset message; the one after runs on a new session elsewhere.
        assert.equal(o.failures.at(-1), RESET_MESSAGE, o.failures.join(" | "));
        assert.ok(o.failures.length <= 2, o.failures.join(" | "));
        assert.equal(value, "undefined");
        assert.notEqual(hostOf(probe), 2);
        assert.match(o.result!.cellId, /^g\d+:1$/);
      });
      // Afterwards every session works, on the two hosts that are left.
      const after = await Promise.all(sessions.map((s) => run(s, `text(String(load("me")))`)));
      assert.deepEqual(after.map((r) => r.text), sessions.map((_, i) => String(i)));
    } finally {
      await Promise.all(sessions.map((s) => s.shutdown()));
    }
  } finally {
    await Promise.all(hosts.map((h) => h[Symbol.asyncDispose]()));
  }
});

/** The generation part of a public cell ID (`g7:3` → `g7`; generation 1 has none). */
function generationOf(cellId: string): string {
  return cellId.includes(":") ? cellId.slice(0, cellId.indexOf(":")) : "g1";
}

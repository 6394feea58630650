/**
 * Child process of the "a client's GOAWAY" test (host_process_test.ts): what a harness does
 * before it closes its channel. It opens leases and Health watches, runs cells and health checks
 * for a while, cancels the leases and watches, then closes the channel (which sends GOAWAY) and
 * exits. On Deno 2.9.6 this pattern crashed the host in most rounds before http2_guard.ts.
 * Folder-private.
 *
 * @module
 */
import { createClient } from "nice-grpc";
import { HealthDefinition } from "nice-grpc-server-health";
import { openSession, rawClient, run } from "./_harness.ts";

const { client, channel } = rawClient(Deno.args[0]);
const health = createClient(HealthDefinition, channel);
const watches: AbortController[] = [];
for (let i = 0; i < 8; i++) {
  const abort = new AbortController();
  watches.push(abort);
  const iterator = health.watch({ service: "" }, { signal: abort.signal })[Symbol.asyncIterator]();
  await iterator.next();
  void (async () => {
    try {
      while (!(await iterator.next()).done) { /* statuses */ }
    } catch { /* cancelled */ }
  })();
}
const sessions = [await openSession(client), await openSession(client)];
const until = performance.now() + 1_000;
await Promise.all([
  ...sessions.map(async (s) => {
    while (performance.now() < until) await run(client, s.id, 'text("x")');
  }),
  ...watches.map(async () => {
    while (performance.now() < until) await health.check({ service: "" });
  }),
]);
for (const s of sessions) s.cancel();
for (const w of watches) w.abort();
channel.close();
await new Promise((resolve) => setTimeout(resolve, 200));
console.log("closed");
Deno.exit(0);

/**
 * Test helpers of the operations tests: scrape `/metrics` and parse the Prometheus text; answer a
 * session's tool calls.
 * Folder-private: never re-exported.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { Msg, RawClient } from "./_harness.ts";

/** Parses Prometheus text into `name{labels}` → value. */
export function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/** Scrapes `/metrics`. */
export async function scrape(url: string): Promise<Map<string, number>> {
  const response = await fetch(`${url}/metrics`);
  assert.equal(response.status, 200);
  assert.match(response.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  return parseMetrics(await response.text());
}

/**
 * Answers every tool call of a session with `output` (as JSON), recording the calls in `calls`;
 * `ready` resolves once the subscription is registered, `stop` ends it.
 */
export function answerTools(client: RawClient, sessionId: string, output: unknown, calls: Msg[] = []) {
  const abort = new AbortController();
  const ready = Promise.withResolvers<void>();
  const stream = client.subscribeToToolCalls({ sessionId, toolNames: [] }, {
    signal: abort.signal,
    onHeader: () => ready.resolve(),
  }) as AsyncIterable<Msg>;
  const outputJson = new TextEncoder().encode(JSON.stringify(output));
  const pump = (async () => {
    try {
      for await (const call of stream) {
        calls.push(call);
        await client.completeToolCall({
          sessionId,
          invocationId: call.invocationId,
          succeeded: { outputJson },
        });
      }
    } catch { /* cancelled */ }
  })();
  return {
    ready: ready.promise,
    stop: async () => {
      abort.abort();
      await pump;
    },
  };
}

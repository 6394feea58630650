/**
 * The same raw gRPC requests sent to Codex's own host (`codex-code-mode-host` 0.171, the oracle)
 * and to this host: every status, message, response field and response header must be the same
 * (UUIDs and durations aside). Requests are hand-encoded bytes, so that field presence, unknown
 * numbers and malformed messages reach both hosts exactly as written. Part of `deno task
 * test:reference` (it needs the reference installed).
 */
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { Buffer } from "node:buffer";
import { ensureCodex } from "./_codex.ts";

type Field = [number, "v", number | bigint] | [number, "s", string] | [number, "b", Uint8Array] | [
  number,
  "m",
  Field[],
];

function varint(n: bigint, out: number[]): void {
  while (n > 0x7fn) {
    out.push(Number(n & 0x7fn) | 0x80);
    n >>= 7n;
  }
  out.push(Number(n));
}

/** Encodes fields in the order given (wire types: varint, or length-delimited). */
function encode(fields: Field[]): Uint8Array {
  const out: number[] = [];
  for (const [no, type, value] of fields) {
    if (type === "v") {
      varint(BigInt(no << 3), out);
      varint(BigInt(value as number), out);
      continue;
    }
    const bytes = type === "s"
      ? new TextEncoder().encode(value as string)
      : type === "b"
      ? value as Uint8Array
      : encode(value as Field[]);
    varint(BigInt((no << 3) | 2), out);
    varint(BigInt(bytes.length), out);
    out.push(...bytes);
  }
  return new Uint8Array(out);
}

/** A readable rendering of any message: `field:value`, nested in braces, strings quoted. */
function render(bytes: Uint8Array): string {
  const out: string[] = [];
  let at = 0;
  const read = (): bigint => {
    let value = 0n;
    for (let shift = 0n;; shift += 7n) {
      const b = bytes[at++];
      value |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return value;
    }
  };
  while (at < bytes.length) {
    const key = read();
    const [no, type] = [Number(key >> 3n), Number(key & 7n)];
    if (type === 0) out.push(`${no}:${read()}`);
    else if (type === 2) {
      const length = Number(read());
      const sub = bytes.subarray(at, at + length);
      at += length;
      let nested: string | undefined;
      try {
        nested = render(sub);
      } catch { /* not a message */ }
      const text = new TextDecoder().decode(sub);
      out.push(
        // deno-lint-ignore no-control-regex
        nested !== undefined && /[\x00-\x09\x0b-\x1f]/.test(text)
          ? `${no}:{${nested}}`
          : `${no}:${JSON.stringify(text)}`,
      );
    } else throw new Error(`wire type ${type}`);
  }
  return out.join(" ");
}

const normalize = (s: string) =>
  s.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<uuid>")
    .replace(/\b6:\d+/g, "6:<ns>")
    .replace(/("codex-code-mode-result-buffered-for-ns":")\d+"/, '$1<ns>"');

/** One call's result: response headers we compare, messages, status. */
async function call(
  client: grpc.Client,
  method: string,
  request: Uint8Array,
  stream: boolean,
): Promise<string> {
  const path = `/codex.code_mode.v1.CodeModeHost/${method}`;
  const serialize = (b: Uint8Array) => Buffer.from(b);
  const deserialize = (b: Buffer) => new Uint8Array(b);
  const parts: string[] = [];
  const headers = (m: grpc.Metadata) => {
    const h = m.get("codex-code-mode-result-buffered-for-ns");
    if (h.length) {
      parts.push(`H${JSON.stringify({ "codex-code-mode-result-buffered-for-ns": String(h[0]) })}`);
    }
  };
  await new Promise<void>((resolve) => {
    if (!stream) {
      const c = client.makeUnaryRequest(path, serialize, deserialize, request, (error, response) => {
        if (response) parts.push(`{${render(response)}}`);
        parts.push(error ? `${error.code} ${JSON.stringify(error.details)}` : "0");
        resolve();
      });
      c.on("metadata", headers);
      return;
    }
    const c = client.makeServerStreamRequest(path, serialize, deserialize, request);
    c.on("metadata", headers);
    c.on("data", (m: Uint8Array) => {
      parts.push(`{${render(m)}}`);
      // A lease or subscription stays open: one message is its answer.
      if (method === "OpenSession" || method === "SubscribeToToolCalls") c.cancel();
    });
    c.on("error", () => {});
    c.on("status", (s) => {
      parts.push(
        s.code === grpc.status.CANCELLED && s.details === "Cancelled on client"
          ? "(open)"
          : `${s.code} ${JSON.stringify(s.details)}`,
      );
      resolve();
    });
  });
  return normalize(parts.join(" | "));
}

const U = "abcdef12-2222-4333-8444-555555555555";
const tool = (over: Partial<Record<"name" | "tn" | "kind" | "input", Field>> = {}): Field => {
  const t: Record<string, Field | undefined> = {
    name: [1, "s", "a"],
    tn: [2, "m", [[1, "s", "a"]]],
    desc: [3, "s", "d"],
    kind: [4, "v", 1],
    ...over,
  };
  return [5, "m", Object.values(t).filter((f): f is Field => f !== undefined)];
};

/** Cases: method, whether it streams, and the request (given the session ID, canonical). */
const CASES: [string, string, boolean, (sid: string) => Uint8Array][] = [
  ["open: empty", "OpenSession", true, () => encode([])],
  ["open: CLIENT", "OpenSession", true, () => encode([[2, "v", 1]])],
  ["open: SERVER, 4096", "OpenSession", true, () => encode([[2, "v", 2], [3, "v", 4096]])],
  ["open: mode 3", "OpenSession", true, () => encode([[2, "v", 3]])],
  ["open: capacity 0 and mode 3", "OpenSession", true, () => encode([[2, "v", 3], [3, "v", 0]])],
  ["open: capacity 2^32", "OpenSession", true, () => encode([[3, "v", 2n ** 32n]])],
  ["open: heap 1 MiB", "OpenSession", true, () => encode([[1, "m", [[2, "v", 1048576]]]])],
  ["open: heap 2^64-1", "OpenSession", true, () => encode([[1, "m", [[2, "v", 2n ** 64n - 1n]]]])],
  ["close: empty ID", "CloseSession", false, () => encode([[1, "s", ""]])],
  ["close: 257 bytes", "CloseSession", false, () => encode([[1, "s", "x".repeat(257)]])],
  ["close: not a UUID", "CloseSession", false, () => encode([[1, "s", "abc"]])],
  ["close: unknown, braced upper", "CloseSession", false, () => encode([[1, "s", `{${U.toUpperCase()}}`]])],
  ["close: not UTF-8", "CloseSession", false, () => encode([[1, "b", new Uint8Array([0xff])]])],
  [
    "execute: upper-case session",
    "Execute",
    true,
    (sid) => encode([[1, "s", sid.toUpperCase()], [2, "s", "e"], [3, "s", "c"], [4, "s", "text(1)"]]),
  ],
  [
    "execute: empty execution ID",
    "Execute",
    true,
    (sid) => encode([[1, "s", sid], [2, "s", ""], [3, "s", "c"]]),
  ],
  [
    "execute: kind 0",
    "Execute",
    true,
    (sid) => encode([[1, "s", sid], [2, "s", "e"], [3, "s", "c"], tool({ kind: [4, "v", 0] })]),
  ],
  [
    "execute: no tool name",
    "Execute",
    true,
    (sid) => encode([[1, "s", sid], [2, "s", "e"], [3, "s", "c"], tool({ tn: undefined })]),
  ],
  [
    "execute: schema {",
    "Execute",
    true,
    (sid) => encode([[1, "s", sid], [2, "s", "e"], [3, "s", "c"], tool({ input: [5, "s", "{"] })]),
  ],
  [
    "execute: schema nope",
    "Execute",
    true,
    (sid) => encode([[1, "s", sid], [2, "s", "e"], [3, "s", "c"], tool({ input: [5, "s", "nope"] })]),
  ],
  [
    "execute: max tokens 2^64-1",
    "Execute",
    true,
    (sid) =>
      encode([[1, "s", sid], [2, "s", "e"], [3, "s", "c"], [4, "s", "text(1)"], [7, "v", 2n ** 64n - 1n]]),
  ],
  [
    "execute: revision 0",
    "Execute",
    true,
    (sid) => encode([[1, "s", sid], [2, "s", "e"], [3, "s", "c"], [4, "s", "text(1)"], [8, "v", 0]]),
  ],
  [
    "execute: wrong wire type in a tool",
    "Execute",
    true,
    () => encode([[5, "m", [[2, "m", []]]]]).map((b, i) => (i === 2 ? 0x10 : b)),
  ],
  ["wait: missing cell", "Wait", false, (sid) => encode([[1, "s", sid], [2, "s", "9"], [3, "s", "w"]])],
  ["wait: empty cell ID", "Wait", false, (sid) => encode([[1, "s", sid], [2, "s", ""], [3, "s", "w"]])],
  ["wait: yield time as bytes", "Wait", false, (sid) => encode([[1, "s", sid], [4, "s", "1"]])],
  ["terminate: missing cell", "Terminate", false, (sid) => encode([[1, "s", sid], [2, "s", "9"]])],
  ["yield: no ID", "YieldObservation", false, (sid) => encode([[1, "s", sid]])],
  ["yield: empty wait ID", "YieldObservation", false, (sid) => encode([[1, "s", sid], [3, "s", ""]])],
  ["cancel wait: unknown", "CancelWait", false, (sid) => encode([[1, "s", sid], [2, "s", "w"]])],
  ["ack: not a UUID", "AcknowledgeNotification", false, (sid) => encode([[1, "s", sid], [2, "s", "n"]])],
  ["ack: unknown UUID", "AcknowledgeNotification", false, (sid) => encode([[1, "s", sid], [2, "s", U]])],
  ["complete: unknown, no outcome", "CompleteToolCall", false, (sid) => encode([[1, "s", sid], [2, "s", U]])],
  [
    "complete: unknown, bad JSON",
    "CompleteToolCall",
    false,
    (sid) => encode([[1, "s", sid], [2, "s", U], [3, "m", [[1, "s", "[1,]"]]]]),
  ],
  [
    "complete: unknown urn, failed",
    "CompleteToolCall",
    false,
    (sid) => encode([[1, "s", sid], [2, "s", `urn:uuid:${U}`], [4, "m", []]]),
  ],
  [
    "subscribe: 65 filters",
    "SubscribeToToolCalls",
    true,
    (sid) =>
      encode([[1, "s", sid], ...Array.from({ length: 65 }, (_, i): Field => [2, "m", [[1, "s", `t${i}`]]])]),
  ],
  ["subscribe: empty filter", "SubscribeToToolCalls", true, (sid) => encode([[1, "s", sid], [2, "m", []]])],
  ["process metrics", "GetProcessMetrics", false, () => encode([])],
  ["process metrics: garbage", "GetProcessMetrics", false, () => new Uint8Array([0xff])],
];

Deno.test("This host answers Codex 0.171's gRPC requests exactly as Codex's own host does", async (t) => {
  const { host } = await ensureCodex();
  const main = new URL("../../cli/main.ts", import.meta.url).pathname;
  const servers = await Promise.all([
    [host, "--listen", "grpc://127.0.0.1:0"],
    [Deno.execPath(), "run", "-A", main, "--listen", "grpc://127.0.0.1:0"],
  ].map(async ([command, ...args]) => {
    const child = new Deno.Command(command, { args, stdin: "null", stdout: "piped", stderr: "null" }).spawn();
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let line = "";
    while (!line.includes("\n")) line += (await reader.read()).value ?? "";
    reader.releaseLock();
    return {
      child,
      client: new grpc.Client(line.trim().replace(/^http:\/\//, ""), grpc.credentials.createInsecure()),
    };
  }));
  try {
    for (const [name, method, stream, request] of CASES) {
      await t.step({
        name,
        fn: async () => {
          const answers: string[] = [];
          for (const { client } of servers) {
            // A fresh session per case and host (its lease stays open during the case).
            const lease = client.makeServerStreamRequest(
              "/codex.code_mode.v1.CodeModeHost/OpenSession",
              (b: Uint8Array) => Buffer.from(b),
              (b: Buffer) => new Uint8Array(b),
              new Uint8Array(),
            );
            lease.on("error", () => {});
            const opened: Uint8Array = await new Promise((resolve) => lease.once("data", resolve));
            const sid = new TextDecoder().decode(opened.subarray(4, 40));
            answers.push(await call(client, method, request(sid), stream));
            lease.cancel();
          }
          assert.equal(answers[1], answers[0], `reference: ${answers[0]}\nthis host: ${answers[1]}`);
        },
      });
    }
  } finally {
    for (const { child, client } of servers) {
      client.close();
      child.kill();
      await child.status;
    }
  }
});

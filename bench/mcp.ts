/**
 * `deno task bench:mcp`: an `exec` round trip through the MCP front door next to the same cell
 * through gRPC, in one run, each host in its own process as a client meets it. Prints a Markdown
 * table (p50/p95 and the ratio to the gRPC client library's row).
 *
 * - gRPC: a host on `grpc://127.0.0.1:0`; `Health/Check` (the floor) and `execute` +
 *   `initialResponse` of `text("x")` through the client library (Server output mode, as the MCP
 *   door uses).
 * - MCP stdio: a host on `--listen mcp+stdio` driven by the SDK's stdio client; `tools/list` (the
 *   MCP floor: a round trip with no cell) and `tools/call exec {"code": "text(\"x\")"}`, which adds
 *   the §11 formatting.
 * - MCP Streamable HTTP: the same `exec` on `--listen mcp+http://127.0.0.1:0`.
 * - Every sample follows the same 60 ms idle gap (a model thinks between cells), and the rows are
 *   measured interleaved, so that a drift of the machine's speed moves them alike.
 *
 * @module
 */
import { createChannel, createClient } from "nice-grpc";
import { HealthDefinition } from "nice-grpc-server-health";
import { GrpcCodeModeSessionProvider, NoopCodeModeSessionDelegate } from "../mod.ts";
import { Client, StdioClientTransport, StreamableHTTPClientTransport } from "../mcp/sdk.ts";
import { hostArgs, startHost } from "../tests/_mcp_helpers.ts";

const ROUNDS = Number(Deno.env.get("BENCH_ROUNDS") ?? 100);
const GAP_MS = 60;
const QUIET = ["--log-level", "error"];

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const grpcHost = await startHost("grpc://127.0.0.1:0", QUIET);
const httpHost = await startHost("mcp+http://127.0.0.1:0", QUIET);
const channel = createChannel(new URL(grpcHost.url).host);
const health = createClient(HealthDefinition, channel);
const session = await new GrpcCodeModeSessionProvider(grpcHost.url).createSession({
  outputTruncation: "server",
});
const delegate = new NoopCodeModeSessionDelegate();

const stdioClient = new Client({ name: "bench", version: "1" });
await stdioClient.connect(
  new StdioClientTransport({
    command: Deno.execPath(),
    args: hostArgs("mcp+stdio", QUIET),
  }),
);
const httpTransport = new StreamableHTTPClientTransport(new URL(httpHost.url));
const httpClient = new Client({ name: "bench", version: "1" });
await httpClient.connect(httpTransport);

const rows: [string, () => Promise<unknown>][] = [
  ["gRPC Health/Check (floor)", () => health.check({ service: "" })],
  [
    'gRPC client library: execute + initialResponse of text("x")',
    async () => {
      const cell = await session.execute(
        { toolCallId: "call-1", enabledTools: [], source: 'text("x")' },
        delegate,
      );
      await cell.initialResponse();
    },
  ],
  ["MCP stdio: tools/list (MCP floor, no cell)", () => stdioClient.listTools()],
  [
    'MCP stdio: tools/call exec text("x")',
    () => stdioClient.callTool({ name: "exec", arguments: { code: 'text("x")' } }),
  ],
  [
    'MCP Streamable HTTP: tools/call exec text("x")',
    () => httpClient.callTool({ name: "exec", arguments: { code: 'text("x")' } }),
  ],
];

// Warm-up: every path opens its session and compiles its code.
for (let i = 0; i < 5; i++) for (const [, run] of rows) await run();
const samples = rows.map(() => [] as number[]);
for (let round = 0; round < ROUNDS; round++) {
  for (const [index, [, run]] of rows.entries()) {
    await new Promise((r) => setTimeout(r, GAP_MS));
    const start = performance.now();
    await run();
    samples[index].push(performance.now() - start);
  }
}

const libraryP50 = percentile(samples[1], 50);
const floorP50 = percentile(samples[0], 50);
console.log(`rounds: ${ROUNDS}, each sample after a ${GAP_MS} ms idle gap\n`);
console.log("| measurement | p50 ms | p95 ms | ratio to floor | ratio to the gRPC library row |");
console.log("| --- | ---: | ---: | ---: | ---: |");
for (const [index, [name]] of rows.entries()) {
  const p50 = percentile(samples[index], 50);
  const p95 = percentile(samples[index], 95);
  console.log(
    `| ${name} | ${p50.toFixed(2)} | ${p95.toFixed(2)} | ${(p50 / floorP50).toFixed(1)}× | ${
      index === 0 ? "" : `${(p50 / libraryP50).toFixed(2)}×`
    } |`,
  );
}

await session.shutdown();
channel.close();
await stdioClient.close();
await httpTransport.terminateSession().catch(() => {});
await httpClient.close();
await Promise.all([grpcHost[Symbol.asyncDispose](), httpHost[Symbol.asyncDispose]()]);

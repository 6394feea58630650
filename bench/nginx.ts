/**
 * `deno task bench:nginx`: what the nginx hop of "Scale out" costs. One host (`cli/main.ts` in its
 * own process, with a route token) and nginx with the repository's routing and locations in front of
 * it; two client-library providers, one direct and one through nginx, measured alternately in one
 * run: a warm Execute `text("x")` (execute + initialResponse) after a 60 ms gap, and OpenSession
 * (createSession, warm pool). Prints a Markdown table of p50/p95 and the ratio nginx/direct.
 *
 * @module
 */
import { GrpcCodeModeSessionProvider, NoopCodeModeSessionDelegate } from "../mod.ts";
import type { CodeModeSession } from "../mod.ts";
import { serve } from "../tests/_harness.ts";
import { startNginx } from "../tests/_nginx.ts";

const ROUNDS = Number(Deno.env.get("BENCH_ROUNDS") ?? 200);
const OPENS = Number(Deno.env.get("BENCH_OPENS") ?? 20);

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

// The host as `deno task serve` runs it, in its own process.
const host = await serve([
  "--listen",
  "grpc://127.0.0.1:0",
  "--route-token",
  "bench-host",
  "--log-level",
  "warn",
]);
const direct = host.url;
const nginx = await startNginx([{ token: "bench-host", port: Number(new URL(direct).port) }]);
const via = `http://127.0.0.1:${nginx.port}`;

const delegate = new NoopCodeModeSessionDelegate();
const gap = () => new Promise((r) => setTimeout(r, 60));
async function cell(session: CodeModeSession): Promise<number> {
  const start = performance.now();
  const started = await session.execute({ toolCallId: "b", enabledTools: [], source: 'text("x")' }, delegate);
  await started.initialResponse();
  return performance.now() - start;
}

const providers = {
  direct: new GrpcCodeModeSessionProvider(direct),
  nginx: new GrpcCodeModeSessionProvider(via),
};
const sessions = {
  direct: await providers.direct.createSession(),
  nginx: await providers.nginx.createSession(),
};
const execute = { direct: [] as number[], nginx: [] as number[] };
const open = { direct: [] as number[], nginx: [] as number[] };
for (let i = 0; i < 20; i++) for (const name of ["direct", "nginx"] as const) await cell(sessions[name]);
for (let i = 0; i < ROUNDS; i++) {
  // Alternate the order, so that neither side is always measured second.
  for (const name of i % 2 ? ["direct", "nginx"] as const : ["nginx", "direct"] as const) {
    await gap();
    execute[name].push(await cell(sessions[name]));
  }
}
for (let i = 0; i < OPENS; i++) {
  for (const name of i % 2 ? ["direct", "nginx"] as const : ["nginx", "direct"] as const) {
    await new Promise((r) => setTimeout(r, 300)); // the warm pool refills
    const start = performance.now();
    const session = await providers[name].createSession();
    open[name].push(performance.now() - start);
    await session.shutdown();
  }
}
await Promise.all(Object.values(sessions).map((s) => s.shutdown()));

const row = (what: string, samples: { direct: number[]; nginx: number[] }) => {
  const cells = (name: "direct" | "nginx") =>
    `${percentile(samples[name], 0.5).toFixed(2)} | ${percentile(samples[name], 0.95).toFixed(2)}`;
  const ratio = percentile(samples.nginx, 0.5) / percentile(samples.direct, 0.5);
  return `| ${what} | ${cells("direct")} | ${cells("nginx")} | ${ratio.toFixed(2)}× |`;
};
console.log(
  "| measurement | direct p50 ms | direct p95 ms | via nginx p50 ms | via nginx p95 ms | nginx / direct (p50) |",
);
console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
console.log(row(`Execute \`text("x")\`, warm, after a 60 ms gap (${ROUNDS} each)`, execute));
console.log(row(`OpenSession (createSession), warm pool (${OPENS} each)`, open));

await nginx[Symbol.asyncDispose]();
await host[Symbol.asyncDispose]();

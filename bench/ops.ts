/**
 * What metrics and tracing cost a warm Execute (`deno task bench:ops`): two hosts started as
 * `deno task serve` runs them, one plain and one with `--metrics-listen` and
 * `--otel-trace-exporter` (to an OTLP/HTTP receiver in this process that answers every export),
 * measured alternately in one run: `text("x")` after a 60 ms idle gap, and the gapped
 * `Health/Check` floor of each. Ratios within the run are what count.
 *
 * @module
 */
import { executeText, measureHost, openSession, pause, percentile, time } from "./_host.ts";

const ROUNDS = Number(Deno.env.get("BENCH_ROUNDS") ?? 200);

let exports = 0;
const sink = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (request) => {
  await request.arrayBuffer();
  exports++;
  return new Response("{}", { headers: { "content-type": "application/json" } });
});
const hosts = [
  await measureHost(2),
  await measureHost(2, [
    "--metrics-listen",
    "127.0.0.1:0",
    "--otel-trace-exporter",
    `http://127.0.0.1:${sink.addr.port}/v1/traces`,
  ]),
];
const sessions = await Promise.all(hosts.map((h) => openSession(h.client)));
for (let i = 0; i < 5; i++) {
  for (const [m, h] of hosts.entries()) await executeText(h.client, sessions[m].id);
}
const exec: number[][] = [[], []];
const floor: number[][] = [[], []];
for (let i = 0; i < ROUNDS; i++) {
  for (const [m, h] of hosts.entries()) {
    await pause(60);
    floor[m].push(await time(() => h.health.check({ service: "" })));
    await pause(60);
    exec[m].push(await time(() => executeText(h.client, sessions[m].id)));
  }
}
for (const s of sessions) s.close();
for (const h of hosts) await h.shutdown();
await sink.shutdown();

const fmt = (ms: number) => ms.toFixed(2);
console.log(
  `Machine: ${Deno.build.target}, ${navigator.hardwareConcurrency} cores, Deno ${Deno.version.deno}; ` +
    `${ROUNDS} rounds; ${exports} trace exports received\n`,
);
console.log("| measurement | p50 ms | p95 ms | ratio |");
console.log("| --- | ---: | ---: | ---: |");
const labels = ["metrics and tracing off", "--metrics-listen and --otel-trace-exporter on"];
for (const m of [0, 1]) {
  console.log(
    `| Health/Check after a 60 ms gap, ${labels[m]} | ${fmt(percentile(floor[m], 50))} | ${
      fmt(percentile(floor[m], 95))
    } | ${(percentile(floor[m], 50) / percentile(floor[0], 50)).toFixed(2)}× off |`,
  );
}
for (const m of [0, 1]) {
  console.log(
    `| Execute \`text("x")\`, warm, after a 60 ms gap, ${labels[m]} | ${fmt(percentile(exec[m], 50))} | ${
      fmt(percentile(exec[m], 95))
    } | ${(percentile(exec[m], 50) / percentile(exec[0], 50)).toFixed(2)}× off |`,
  );
}

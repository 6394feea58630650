/**
 * Side-by-side latency figures measured in one run against a real host on 127.0.0.1:0 with real
 * runtimes (`deno task bench:compare`). Prints a Markdown table. The host runs as `deno task serve`
 * runs it, in its own process; the client is this script.
 *
 * - Floor: `grpc.health.v1.Health/Check` p50/p95 on the same server, back to back. It, the gapped
 *   Health/Check, both refused Executes and the warm Execute are measured in one interleaved loop,
 *   so that a drift of the machine's speed moves them alike.
 * - Execute of an unknown session (refused with NOT_FOUND before any host work): what a
 *   server-streaming call costs the gRPC stack itself, back to back and after the same idle gap as
 *   the warm Execute.
 * - Warm Execute: `text("x")` in an open session after a short idle gap, so the session's spare
 *   cell isolate is ready (the common case: a model thinks between cells).
 * - The same through the client library (`execute` + `initialResponse`), which waits for the cell's
 *   `CellClosed` too: what a harness sees.
 * - Back-to-back Execute: the same with no gap, so the next cell runs in the previous cell's
 *   Worker, in a fresh realm (SPEC 1.2 §5.1); its ratio is to the back-to-back Health/Check.
 * - OpenSession with the warm pool, and cold (pool disabled; 300 ms apart, and back to back), against
 *   a bare `deno run` of an empty file (the cold floor).
 * - The first Execute of a session sent right after its OpenSession (a warm runtime's spare was
 *   created while it waited in the pool).
 * - Health/Check after the same idle gap as the warm Execute: an idle process pays for waking up
 *   (~0.3 ms a round trip here), so this is the floor that matches the warm Execute.
 * - Memory per idle session (20 sessions): the mean RSS and PSS (from `smaps_rollup`) of the host's
 *   runtime process trees (the sessions' and the refilled warm pool's; with the OS sandbox a tree
 *   is the runtime and its bubblewrap process) plus the host's growth / 20.
 * - Cells per second, back-to-back `text("x")` cells, with 1 and with 8 concurrent sessions.
 * - A 60 MiB Client-mode outcome (`text` of 60 MiB) through the client library, against raw
 *   `node:http2` moving 60 MiB from another process of the same Deno, alternately in one run.
 * - The OS sandbox's cost (issue 22): warm and cold OpenSession (300 ms apart) and the warm
 *   Execute, each with `--os-sandbox off` and `bwrap`, the two hosts' samples interleaved; the
 *   ratio is bwrap / off. The rows above run with the default (`auto`: bubblewrap when it works).
 *
 * @module
 */
import {
  GrpcCodeModeSessionProvider,
  NoopCodeModeSessionDelegate,
  ProcessOwnedGrpcCodeModeSessionProvider,
} from "../mod.ts";
import { InProcessCodeModeSessionProvider } from "../embedded/provider.ts";
import { V1Client } from "../tests/_v1_client.ts";
import {
  childPids,
  executeText,
  measureHost,
  nextExecution,
  openSession,
  pause,
  percentile,
  spawnDeno,
  time,
} from "./_host.ts";

const ROUNDS = Number(Deno.env.get("BENCH_ROUNDS") ?? 200);
/** `BENCH_ONLY=latency,memory,open,sandbox,large` runs only those sections (default: all). */
const ONLY = Deno.env.get("BENCH_ONLY")?.split(",");
const section = (name: string) => ONLY === undefined || ONLY.includes(name);

const rows: [string, string, string, string][] = [];
const fmt = (ms: number) => ms.toFixed(2);

if (section("latency")) {
  const host = await measureHost(2);
  const { client, health } = host;
  const session = await openSession(client);
  for (let i = 0; i < 20; i++) await health.check({ service: "" });
  await executeText(client, session.id);
  // One interleaved loop, so that a drift of the machine's speed during the run (this is a shared
  // 2-core VM) moves every row alike: each round measures, after a 60 ms idle gap each, Health,
  // the refused Execute and the warm Execute; then, back to back, Health twice and the refused
  // Execute twice (the hot floors).
  const floor: number[] = [];
  const gapped: number[] = [];
  const refusedHot: number[] = [];
  const refusedGapped: number[] = [];
  const warm: number[] = [];
  const refused = () => executeText(client, "no-such-session").catch(() => {});
  for (let i = 0; i < ROUNDS; i++) {
    await pause(60);
    gapped.push(await time(() => health.check({ service: "" })));
    await pause(60);
    refusedGapped.push(await time(refused));
    await pause(60);
    warm.push(await time(() => executeText(client, session.id)));
    for (let j = 0; j < 2; j++) floor.push(await time(() => health.check({ service: "" })));
    for (let j = 0; j < 2; j++) refusedHot.push(await time(refused));
  }
  const floorP50 = percentile(floor, 50);
  const gappedP50 = percentile(gapped, 50);
  const ratio = (samples: number[]) => `${(percentile(samples, 50) / floorP50).toFixed(1)}×`;
  rows.push(["Health/Check (floor), back to back", fmt(floorP50), fmt(percentile(floor, 95)), "1.0×"]);
  rows.push([
    "Health/Check after a 60 ms idle gap (floor of the warm Execute)",
    fmt(gappedP50),
    fmt(percentile(gapped, 95)),
    ratio(gapped),
  ]);
  // What the gRPC stack alone costs a server-streaming call: refused before any host work.
  rows.push([
    "Execute of an unknown session, back to back (NOT_FOUND: a server stream's own cost)",
    fmt(percentile(refusedHot, 50)),
    fmt(percentile(refusedHot, 95)),
    ratio(refusedHot),
  ]);
  rows.push([
    "Execute of an unknown session after the same gap (NOT_FOUND: the stream's own cost)",
    fmt(percentile(refusedGapped, 50)),
    fmt(percentile(refusedGapped, 95)),
    ratio(refusedGapped),
  ]);
  rows.push([
    'Execute text("x"), warm (spare isolate ready), after the same gap',
    fmt(percentile(warm, 50)),
    fmt(percentile(warm, 95)),
    `${ratio(warm)} (${(percentile(warm, 50) / gappedP50).toFixed(1)}× gapped)`,
  ]);
  // The harness's view: the client library returns a result only once the cell's CellClosed has
  // arrived on the lease (SPEC §10.11).
  {
    const provider = await new GrpcCodeModeSessionProvider(`http://${host.address}`).createSession();
    const delegate = new NoopCodeModeSessionDelegate();
    const viaLibrary: number[] = [];
    for (let i = 0; i < Math.min(ROUNDS, 100) + 1; i++) {
      await pause(60);
      const took = await time(async () => {
        const cell = await provider.execute(
          { toolCallId: "c", enabledTools: [], source: 'text("x")' },
          delegate,
        );
        await cell.initialResponse();
      });
      if (i > 0) viaLibrary.push(took); // the first one meets the session's first spare
    }
    rows.push([
      'Execute text("x") through the client library (execute + initialResponse), same gap',
      fmt(percentile(viaLibrary, 50)),
      fmt(percentile(viaLibrary, 95)),
      `${(percentile(viaLibrary, 50) / floorP50).toFixed(1)}× (${
        (percentile(viaLibrary, 50) / gappedP50).toFixed(1)
      }× gapped)`,
    ]);
    await provider.shutdown();
    // The same through the process-owned provider: its own host child, gRPC over the child's pipes
    // (`--listen grpc+stdio://`), next to the TCP row above.
    await using owner = new ProcessOwnedGrpcCodeModeSessionProvider({
      args: [
        "run",
        "--allow-all",
        new URL("../cli/main.ts", import.meta.url).pathname,
        "--listen",
        "grpc+stdio://",
        "--log-level",
        "warn",
      ],
    });
    const overStdio = await owner.createSession();
    const viaStdio: number[] = [];
    for (let i = 0; i < Math.min(ROUNDS, 100) + 1; i++) {
      await pause(60);
      const took = await time(async () => {
        const cell = await overStdio.execute(
          { toolCallId: "c", enabledTools: [], source: 'text("x")' },
          delegate,
        );
        await cell.initialResponse();
      });
      if (i > 0) viaStdio.push(took);
    }
    rows.push([
      'Execute text("x") through the process-owned provider (grpc+stdio://), same gap',
      fmt(percentile(viaStdio, 50)),
      fmt(percentile(viaStdio, 95)),
      `${(percentile(viaStdio, 50) / floorP50).toFixed(1)}× (${
        (percentile(viaStdio, 50) / percentile(viaLibrary, 50)).toFixed(2)
      }× the TCP library row)`,
    ]);
    await overStdio.shutdown();
    // The same over Codex's JSON host V1 (SPEC §9.10): the launcher with no arguments, as Codex
    // starts it, and the V1 client of the tests (it waits for the initial response).
    {
      const v1 = V1Client.spawn({ args: ["--log-level", "warn"], keepStdout: false });
      await v1.hello({ requiredCapabilities: [], optionalCapabilities: [] });
      await v1.open("session-1");
      const viaV1: number[] = [];
      for (let i = 0; i < Math.min(ROUNDS, 100) + 1; i++) {
        await pause(60);
        const took = await time(() => v1.run("session-1", 'text("x")'));
        if (i > 0) viaV1.push(took);
      }
      rows.push([
        'Execute text("x") over JSON host V1 on stdio (the Codex launcher), same gap',
        fmt(percentile(viaV1, 50)),
        fmt(percentile(viaV1, 95)),
        `${(percentile(viaV1, 50) / floorP50).toFixed(1)}× (${
          (percentile(viaV1, 50) / percentile(viaLibrary, 50)).toFixed(2)
        }× the TCP library row)`,
      ]);
      await v1.finish();
    }
    // The same through the embedded provider (no gRPC at all), in both isolations (SPEC §9.8).
    for (const isolation of ["subprocess", "in-process"] as const) {
      await using embedded = new InProcessCodeModeSessionProvider({
        isolation,
        warmSessions: 1,
        log: "error",
      });
      const session = await embedded.createSession();
      const samples: number[] = [];
      for (let i = 0; i < Math.min(ROUNDS, 100) + 1; i++) {
        await pause(60);
        const took = await time(async () => {
          const cell = await session.execute(
            { toolCallId: "c", enabledTools: [], source: 'text("x")' },
            delegate,
          );
          await cell.initialResponse();
        });
        if (i > 0) samples.push(took);
      }
      rows.push([
        `Execute text("x") through the embedded provider, ${isolation} isolation, same gap`,
        fmt(percentile(samples, 50)),
        fmt(percentile(samples, 95)),
        `${(percentile(samples, 50) / floorP50).toFixed(1)}× (${
          (percentile(samples, 50) / percentile(viaLibrary, 50)).toFixed(2)
        }× the gRPC client library)`,
      ]);
      await session.shutdown();
    }
  }
  const b2b: number[] = [];
  for (let i = 0; i < Math.min(ROUNDS, 100); i++) b2b.push(await time(() => executeText(client, session.id)));
  rows.push([
    'Execute text("x"), back-to-back (the previous cell\'s Worker, a fresh realm)',
    fmt(percentile(b2b, 50)),
    fmt(percentile(b2b, 95)),
    `${(percentile(b2b, 50) / floorP50).toFixed(1)}× back-to-back Health/Check`,
  ]);

  // Tool-call round trip: JS → subscription → CompleteToolCall → JS, measured as the interval
  // between consecutive ToolCalls of a cell that calls a tool in a loop (one full round trip each).
  {
    const tools = await openSession(client);
    const arrivals: number[] = [];
    const subscription = client.subscribeToToolCalls({ sessionId: tools.id, toolNames: [] }, {
      signal: AbortSignal.timeout(120_000),
    });
    const answering = (async () => {
      try {
        for await (const call of subscription) {
          arrivals.push(performance.now());
          await client.completeToolCall({
            sessionId: tools.id,
            invocationId: call.invocationId,
            succeeded: { outputJson: new TextEncoder().encode("1") },
          });
        }
      } catch { /* closed at the end */ }
    })();
    await pause(100);
    const echo = { name: "echo", toolName: { name: "echo" }, description: "", kind: 1 };
    for await (
      const _ of client.execute({
        sessionId: tools.id,
        executionId: `tools-${nextExecution()}`,
        toolCallId: "c",
        source: `for (let i = 0; i < ${Math.min(ROUNDS, 200) + 1}; i++) await tools.echo(i)`,
        enabledTools: [echo],
        yieldTimeMs: 120_000,
      })
    ) { /* drain */ }
    const intervals = arrivals.slice(1).map((t, i) => t - arrivals[i]);
    rows.push([
      "tool-call round trip (JS → subscription → CompleteToolCall → JS)",
      fmt(percentile(intervals, 50)),
      fmt(percentile(intervals, 95)),
      `${(percentile(intervals, 50) / floorP50).toFixed(1)}×`,
    ]);
    tools.close();
    await answering;
  }

  const terminateRow = async (label: string, source: string) => {
    const samples: number[] = [];
    for (let i = 0; i < 10; i++) {
      await pause(300); // spare isolate and warm pool refilled
      let cellId = "";
      for await (
        const event of client.execute({
          sessionId: session.id,
          executionId: `t${nextExecution()}`,
          toolCallId: "c",
          source,
          yieldTimeMs: 60_000,
        })
      ) {
        if (event.started) cellId = event.started.cellId;
      }
      samples.push(await time(() => client.terminate({ sessionId: session.id, cellId })));
    }
    rows.push([label, fmt(percentile(samples, 50)), fmt(percentile(samples, 95)), ""]);
  };
  await terminateRow(
    "Terminate, awaiting cell (cooperative stop)",
    "yield_control(); await new Promise(() => {})",
  );
  // The `try` keeps the loop spinning when the stop lands between the yield's write and its stop
  // check, so every sample is a runtime restart.
  await terminateRow(
    "Terminate, spinning cell (runtime restart)",
    "try { yield_control(); } catch {} while (true) {}",
  );

  const opens: number[] = [];
  for (let i = 0; i < 30; i++) {
    await pause(250); // let the pool refill
    let s: { close(): void } | undefined;
    opens.push(await time(async () => s = await openSession(client)));
    s!.close();
  }
  rows.push(["OpenSession, warm pool (2)", fmt(percentile(opens, 50)), fmt(percentile(opens, 95)), ""]);
  // What a harness meets most: a cell sent as soon as its session is open.
  const firsts: number[] = [];
  for (let i = 0; i < 20; i++) {
    await pause(400); // the pool refilled and its runtimes' spares created
    const fresh = await openSession(client);
    firsts.push(await time(() => executeText(client, fresh.id)));
    fresh.close();
  }
  rows.push([
    'first Execute text("x") of a session, right after OpenSession (warm pool)',
    fmt(percentile(firsts, 50)),
    fmt(percentile(firsts, 95)),
    `${(percentile(firsts, 50) / floorP50).toFixed(1)}×`,
  ]);
  session.close();
  await host.shutdown();
}

// Resident memory per idle session, and cells per second with 1 and 8 sessions.
const extra: string[] = [];
if (section("memory")) {
  const host = await measureHost(2);
  const { client } = host;
  const rollup = (pid: number, field: string) =>
    Number(
      new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(Deno.readTextFileSync(`/proc/${pid}/smaps_rollup`))![1],
    ) /
    1024;
  await pause(1_000);
  const hostBefore = rollup(host.pid, "Rss");
  const sessions = [];
  for (let i = 0; i < 20; i++) sessions.push(await openSession(client));
  await pause(3_000); // spares booted, pool refilled, nothing running
  // Every runtime of the host: the 20 sessions' and the refilled warm pool's, all idle.
  // With the OS sandbox a runtime is a tree (bwrap → deno): each tree counts as one.
  const pids = childPids(host.pid);
  const tree = (pid: number): number[] => [pid, ...childPids(pid).flatMap(tree)];
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
  const rss = mean(pids.map((pid) => sum(tree(pid).map((p) => rollup(p, "Rss")))));
  const pss = mean(pids.map((pid) => sum(tree(pid).map((p) => rollup(p, "Pss")))));
  const hostShare = (rollup(host.pid, "Rss") - hostBefore) / 20;
  extra.push(
    `memory per idle session (20 sessions, a runtime process with its spare cell Worker, plus the host's growth / 20): ` +
      `RSS ${(rss + hostShare).toFixed(1)} MiB, PSS ${(pss + hostShare).toFixed(1)} MiB ` +
      `(PSS divides the pages of the Deno binary that all runtimes share; host ${hostShare.toFixed(2)} MiB)`,
  );
  for (const s of sessions) s.close();

  const cellsPerSecond = async (n: number) => {
    const open = [];
    for (let i = 0; i < n; i++) open.push(await openSession(client));
    await pause(500);
    let cells = 0;
    const until = performance.now() + 5_000;
    await Promise.all(open.map(async (s) => {
      while (performance.now() < until) {
        await executeText(client, s.id);
        cells++;
      }
    }));
    const rate = cells / 5;
    for (const s of open) s.close();
    await pause(1_000);
    return rate;
  };
  const one = await cellsPerSecond(1);
  const eight = await cellsPerSecond(8);
  extra.push(
    `cells per second, back-to-back text("x"): 1 session ${one.toFixed(1)}, 8 sessions ${eight.toFixed(1)} (${
      (eight / one).toFixed(2)
    }×)`,
  );
  await host.shutdown();
}

if (section("open")) {
  const host = await measureHost(0);
  const { client } = host;
  // 300 ms apart, as the floor: back to back, each OpenSession would share the two cores with the
  // teardown of the previous session's runtime and that runtime's first Worker (a row of its own).
  const opens: number[] = [];
  const crowded: number[] = [];
  for (const [samples, gap] of [[opens, 300], [crowded, 0]] as const) {
    for (let i = 0; i < 20; i++) {
      await pause(gap);
      let s: { close(): void } | undefined;
      samples.push(await time(async () => s = await openSession(client)));
      s!.close();
    }
  }
  const dir = await Deno.makeTempDir();
  await Deno.writeTextFile(`${dir}/empty.js`, "");
  const bare: number[] = [];
  for (let i = 0; i < 20; i++) {
    await pause(300);
    bare.push(
      await time(() =>
        new Deno.Command(Deno.execPath(), {
          args: ["run", "--no-config", "--no-lock", `--allow-read=${dir}`, `${dir}/empty.js`],
          stdout: "null",
          stderr: "null",
        }).output()
      ),
    );
  }
  await Deno.remove(dir, { recursive: true });
  rows.push([
    "OpenSession, cold (no pool), 300 ms apart",
    fmt(percentile(opens, 50)),
    fmt(percentile(opens, 95)),
    `${(percentile(opens, 50) / percentile(bare, 50)).toFixed(2)}× bare deno run`,
  ]);
  rows.push([
    "OpenSession, cold (no pool), back to back",
    fmt(percentile(crowded, 50)),
    fmt(percentile(crowded, 95)),
    `${(percentile(crowded, 50) / percentile(bare, 50)).toFixed(2)}× bare deno run`,
  ]);
  rows.push([
    "bare `deno run` of an empty file, 300 ms apart (cold floor)",
    fmt(percentile(bare, 50)),
    fmt(percentile(bare, 95)),
    "",
  ]);
  await host.shutdown();
}

if (section("sandbox")) {
  // The OS sandbox: each sample is taken on the off host and then the bwrap host, alternately.
  const modes = ["off", "bwrap"] as const;
  const warmHosts: Awaited<ReturnType<typeof measureHost>>[] = [];
  const coldHosts: Awaited<ReturnType<typeof measureHost>>[] = [];
  for (const mode of modes) {
    warmHosts.push(await measureHost(2, ["--os-sandbox", mode]));
    coldHosts.push(await measureHost(0, ["--os-sandbox", mode]));
  }
  const samples = modes.map(() => ({
    warmOpen: [] as number[],
    coldOpen: [] as number[],
    exec: [] as number[],
  }));
  for (let i = 0; i < 20; i++) {
    for (const m of [0, 1]) {
      await pause(300); // the warm pool refilled, the previous runtime gone
      let s: { close(): void } | undefined;
      samples[m].warmOpen.push(await time(async () => s = await openSession(warmHosts[m].client)));
      s!.close();
      await pause(300);
      samples[m].coldOpen.push(await time(async () => s = await openSession(coldHosts[m].client)));
      s!.close();
    }
  }
  const sessions = await Promise.all(warmHosts.map((h) => openSession(h.client)));
  for (let i = 0; i < Math.max(20, ROUNDS / 4); i++) {
    for (const m of [0, 1]) {
      await pause(60);
      samples[m].exec.push(await time(() => executeText(warmHosts[m].client, sessions[m].id)));
    }
  }
  for (const s of sessions) s.close();
  const labels = {
    warmOpen: "OpenSession, warm pool (2), 300 ms apart",
    coldOpen: "OpenSession, cold (no pool), 300 ms apart",
    exec: 'Execute text("x"), warm, after a 60 ms gap',
  };
  for (const key of ["warmOpen", "coldOpen", "exec"] as const) {
    const off = percentile(samples[0][key], 50);
    for (const m of [0, 1]) {
      const p50 = percentile(samples[m][key], 50);
      rows.push([
        `${labels[key]}, --os-sandbox ${modes[m]}`,
        fmt(p50),
        fmt(percentile(samples[m][key], 95)),
        m === 0 ? "1.0× (off)" : `${(p50 / off).toFixed(2)}× off`,
      ]);
    }
  }
  for (const h of [...warmHosts, ...coldHosts]) await h.shutdown();
}

// A 60 MiB Client-mode outcome through the client library against raw node:http2 moving 60 MiB
// (a server in another process of the same Deno writes it in 1 MiB chunks), alternately.
if (section("large")) {
  const SIZE = 60 * 1024 * 1024;
  const host = await measureHost(2);
  const session = await new GrpcCodeModeSessionProvider(`http://${host.address}`).createSession({
    outputTruncation: "client",
  });
  const delegate = new NoopCodeModeSessionDelegate();
  const raw = await startRawHttp2(SIZE);
  const viaHost: number[] = [];
  const viaRaw: number[] = [];
  for (let i = 0; i < 7; i++) {
    const took = await time(async () => {
      const cell = await session.execute(
        { toolCallId: "c", enabledTools: [], source: `text("x".repeat(${SIZE}))` },
        delegate,
      );
      const response = await cell.initialResponse();
      const item = response.contentItems[0] as { text?: string } | undefined;
      if (item?.text?.length !== SIZE) {
        throw new Error(`60 MiB outcome: ${JSON.stringify(response).slice(0, 200)}`);
      }
    });
    const moved = await time(() => raw.fetch());
    if (i > 0) { // the first of each warms up
      viaHost.push(took);
      viaRaw.push(moved);
    }
    await pause(200);
  }
  rows.push([
    "raw `node:http2`, 60 MiB from another Deno process (floor of the row below)",
    fmt(percentile(viaRaw, 50)),
    fmt(percentile(viaRaw, 95)),
    "",
  ]);
  rows.push([
    "60 MiB Client-mode outcome through the client library (execute + initialResponse)",
    fmt(percentile(viaHost, 50)),
    fmt(percentile(viaHost, 95)),
    `${(percentile(viaHost, 50) / percentile(viaRaw, 50)).toFixed(2)}× raw node:http2`,
  ]);
  await session.shutdown();
  await raw.close();
  await host.shutdown();
}

/** A `node:http2` server in a Deno process of its own that answers every request with `size` bytes. */
async function startRawHttp2(size: number) {
  const server = `
    import http2 from "node:http2";
    const chunk = new Uint8Array(1024 * 1024).fill(120);
    const s = http2.createServer();
    s.on("stream", (stream) => {
      stream.respond({ ":status": 200 });
      let left = ${size};
      const write = () => {
        while (left > 0) {
          const n = Math.min(left, chunk.length);
          left -= n;
          if (!stream.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return stream.once("drain", write);
        }
        stream.end();
      };
      write();
    });
    s.listen(0, "127.0.0.1", () => console.log(s.address().port));`;
  const { child, line, lines } = await spawnDeno(["eval", server], "the raw node:http2 server");
  const http2 = await import("node:http2");
  const session = http2.connect(`http://127.0.0.1:${line}`);
  return {
    fetch: () =>
      new Promise<void>((resolve, reject) => {
        let received = 0;
        const stream = session.request({ ":path": "/" });
        stream.on("data", (chunk: Uint8Array) => received += chunk.length);
        stream.on("end", () => received === size ? resolve() : reject(new Error(`raw: ${received} bytes`)));
        stream.on("error", reject);
      }),
    async close() {
      session.close();
      child.kill("SIGTERM");
      await child.status;
      await lines.cancel().catch(() => {});
    },
  };
}

console.log(
  `Machine: ${Deno.build.target}, ${navigator.hardwareConcurrency} cores, Deno ${Deno.version.deno}\n`,
);
console.log("| measurement | p50 ms | p95 ms | ratio to floor |");
console.log("| --- | ---: | ---: | ---: |");
for (const row of rows) console.log(`| ${row.join(" | ")} |`);
console.log("");
for (const line of extra) console.log(`- ${line}`);

/**
 * The host beside peers that run code with fresh isolation per execution, measured in one run on
 * this machine (`deno task bench:peers`). Installs isolated-vm and workerd from npm into a temporary
 * folder (exact versions below; removed at the end) and measures, back to back:
 *
 * - isolated-vm (a native addon built for Node, so run under the machine's `node`): a new isolate,
 *   a context in it, `eval('"x"')`, dispose; and a new context in one reused isolate;
 * - workerd (its npm package ships the binary): an HTTP request to a parent Worker that loads a new
 *   dynamic Worker through the Worker Loader binding (a unique ID per request, so a new isolate) and
 *   returns its response; the floor is a request that the parent answers itself;
 * - the host (`cli/main.ts` in its own process, as `deno task serve` runs it): a back-to-back
 *   `text("x")` Execute, and the Health/Check of the same server as its floor.
 *
 * `BENCH_PEERS_DIR=DIR` uses the packages already installed in `DIR` (an earlier run's folder, made
 * with the same `npm install`) instead of installing them again (isolated-vm compiles for minutes).
 *
 * Prints a Markdown table (p50, p95, executions per second back to back). A peer that cannot be
 * installed or started is reported as such, with the reason. No assertions: figures only.
 *
 * @module
 */
import { executeText, measureHost, openSession, percentile, time } from "./_host.ts";

const ROUNDS = Number(Deno.env.get("BENCH_ROUNDS") ?? 200);
const VERSIONS = { "isolated-vm": "5.0.4", workerd: "1.20261117.1" };

type Row = [string, number[] | string];
const rows: Row[] = [];

const reused = Deno.env.get("BENCH_PEERS_DIR");
const dir = reused ?? await Deno.makeTempDir({ prefix: "code-mode-peers-" });
try {
  const install = reused ? { success: true, stderr: new Uint8Array() } : await new Deno.Command("npm", {
    args: [
      "install",
      "--no-audit",
      "--no-fund",
      "--prefix",
      dir,
      ...Object.entries(VERSIONS).map(([name, version]) => `${name}@${version}`),
    ],
    stdout: "null",
    stderr: "piped",
  }).output();
  const installError = install.success ? "" : new TextDecoder().decode(install.stderr).slice(-400);

  // ---- isolated-vm, under node ------------------------------------------------------------------
  if (installError) rows.push(["isolated-vm", `not installed: ${installError}`]);
  else {
    await Deno.writeTextFile(
      `${dir}/ivm.cjs`,
      `const ivm = require("isolated-vm");
      const rounds = Number(process.argv[2]);
      (async () => {
        const fresh = [], context = [];
        for (let i = 0; i <= rounds; i++) {
          const start = performance.now();
          const isolate = new ivm.Isolate({ memoryLimit: 128 });
          const ctx = await isolate.createContext();
          if ((await ctx.eval('"x"')) !== "x") throw new Error("wrong result");
          isolate.dispose();
          if (i > 0) fresh.push(performance.now() - start);
        }
        const isolate = new ivm.Isolate({ memoryLimit: 128 });
        for (let i = 0; i <= rounds; i++) {
          const start = performance.now();
          const ctx = await isolate.createContext();
          if ((await ctx.eval('"x"')) !== "x") throw new Error("wrong result");
          ctx.release();
          if (i > 0) context.push(performance.now() - start);
        }
        console.log(JSON.stringify({ fresh, context }));
      })();`,
    );
    const out = await new Deno.Command("node", { args: [`${dir}/ivm.cjs`, String(ROUNDS)], cwd: dir })
      .output();
    if (!out.success) {
      rows.push(["isolated-vm", `failed: ${new TextDecoder().decode(out.stderr).slice(-300)}`]);
    } else {
      const { fresh, context } = JSON.parse(new TextDecoder().decode(out.stdout));
      rows.push([
        `isolated-vm ${VERSIONS["isolated-vm"]} (node ${await nodeVersion()}): new isolate + context + eval`,
        fresh,
      ]);
      rows.push([`isolated-vm ${VERSIONS["isolated-vm"]}: new context in a reused isolate + eval`, context]);
    }
  }

  // ---- workerd's Worker Loader --------------------------------------------------------------------
  if (!installError) {
    const port = freePort();
    await Deno.writeTextFile(
      `${dir}/parent.mjs`,
      `export default {
        async fetch(request, env) {
          if (new URL(request.url).pathname === "/floor") return new Response("x");
          const worker = env.LOADER.get(crypto.randomUUID(), () => ({
            compatibilityDate: "2025-06-01",
            mainModule: "cell.js",
            modules: { "cell.js": 'export default { fetch() { return new Response("x"); } }' },
          }));
          return worker.getEntrypoint().fetch("http://cell/");
        },
      };`,
    );
    await Deno.writeTextFile(
      `${dir}/config.capnp`,
      `using Workerd = import "/workerd/workerd.capnp";
      const config :Workerd.Config = (
        services = [(name = "parent", worker = (
          compatibilityDate = "2025-06-01",
          compatibilityFlags = ["experimental"],
          modules = [(name = "parent.mjs", esModule = embed "parent.mjs")],
          bindings = [(name = "LOADER", workerLoader = (id = "peers"))],
        ))],
        sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "parent")],
      );`,
    );
    const workerd = new Deno.Command(`${dir}/node_modules/.bin/workerd`, {
      args: ["serve", `${dir}/config.capnp`, "--experimental"],
      cwd: dir,
      stdout: "null",
      stderr: "piped",
    }).spawn();
    try {
      const get = async (path: string) => {
        const response = await fetch(`http://127.0.0.1:${port}${path}`);
        const body = await response.text();
        if (body !== "x") throw new Error(`workerd answered ${response.status}: ${body.slice(0, 300)}`);
      };
      let ready = false;
      for (let i = 0; i < 100 && !ready; i++) {
        ready = await get("/floor").then(
          () => true,
          () => new Promise((r) => setTimeout(() => r(false), 100)),
        );
      }
      if (!ready) throw new Error("workerd did not answer within 10 s");
      const floor: number[] = [];
      const loaded: number[] = [];
      for (let i = 0; i <= ROUNDS; i++) {
        const a = await time(() => get("/floor"));
        const b = await time(() => get("/load"));
        if (i > 0) floor.push(a), loaded.push(b);
      }
      rows.push([`workerd ${VERSIONS.workerd}: HTTP request answered by the parent Worker (floor)`, floor]);
      rows.push([`workerd ${VERSIONS.workerd}: Worker Loader, a new dynamic Worker per request`, loaded]);
    } catch (error) {
      rows.push(["workerd", `failed: ${String(error).slice(0, 300)}`]);
    } finally {
      workerd.kill("SIGTERM");
      const { stderr } = await workerd.output();
      if (rows.at(-1)?.[0] === "workerd") console.error(new TextDecoder().decode(stderr).slice(-600));
    }
  }

  // ---- the host -----------------------------------------------------------------------------------
  {
    const host = await measureHost(2);
    const session = await openSession(host.client);
    await executeText(host.client, session.id);
    const floor: number[] = [];
    const cells: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      floor.push(await time(() => host.health.check({ service: "" })));
      cells.push(await time(() => executeText(host.client, session.id)));
    }
    session.close();
    await host.shutdown();
    rows.push(["code-mode-host: Health/Check back to back (floor)", floor]);
    rows.push(['code-mode-host: Execute text("x") back to back (a reused Worker, a fresh realm)', cells]);
  }
} finally {
  if (!reused) await Deno.remove(dir, { recursive: true }).catch(() => {});
}

console.log(
  `Machine: ${Deno.build.target}, ${navigator.hardwareConcurrency} cores, Deno ${Deno.version.deno}\n`,
);
console.log("| fresh isolation per execution | p50 ms | p95 ms | per second, back to back |");
console.log("| --- | ---: | ---: | ---: |");
for (const [label, samples] of rows) {
  if (typeof samples === "string") console.log(`| ${label} | ${samples.replaceAll("\n", " ")} | | |`);
  else {
    const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
    console.log(
      `| ${label} | ${percentile(samples, 50).toFixed(2)} | ${percentile(samples, 95).toFixed(2)} | ${
        (1000 / mean).toFixed(0)
      } |`,
    );
  }
}

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

async function nodeVersion(): Promise<string> {
  const out = await new Deno.Command("node", { args: ["--version"] }).output();
  return new TextDecoder().decode(out.stdout).trim();
}

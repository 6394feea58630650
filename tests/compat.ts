/**
 * `deno task test:compat [--deno-version X.Y.Z]`: runs the smoke subset (tests/compat_smoke_test.ts:
 * a gRPC host and the embedded provider in both isolations open a session, run cells with text,
 * store and load, call a tool, terminate a spinning cell, report a killed runtime) on another Deno,
 * by default the oldest supported one, installed with `npx -y deno@VERSION`. The session runtimes
 * are spawned with that Deno's `Deno.execPath()`, so the host, the runtime and the cells all run on
 * it. Not part of `deno task test`; needs npm (npx) and network access to the npm registry.
 *
 * @module
 */

/** The oldest Deno on which the smoke subset passes (README, "Deno versions"). */
export const MINIMUM_DENO = "2.7.14";

const SMOKE_FILE = new URL("./compat_smoke_test.ts", import.meta.url).pathname;

function versionArgument(args: string[]): string {
  const at = args.indexOf("--deno-version");
  if (at === -1) return MINIMUM_DENO;
  const version = args[at + 1];
  if (!version || !/^\d+\.\d+\.\d+$/.test(version)) {
    console.error("usage: deno task test:compat [--deno-version X.Y.Z]");
    Deno.exit(2);
  }
  return version;
}

const version = versionArgument(Deno.args);
/** Whether `a` is older than `b` (both X.Y.Z). */
function older(a: string, b: string): boolean {
  const [x, y] = [a, b].map((v) => v.split(".").map(Number));
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i] < y[i];
  return false;
}
// deno.lock is version 5, which Deno 2.0 refuses to read: a run below the minimum ignores it
// (`--no-lock`; the imports in deno.json are exact versions) so that it reaches the real failure.
const lockArgs = older(version, MINIMUM_DENO) ? ["--no-lock"] : [];
// Deno's own TLS stack does not read SSL_CERT_FILE; a machine behind a proxy with its own CA
// passes it as DENO_CERT, as the current Deno's run would find it.
const env: Record<string, string> = {};
const certFile = Deno.env.get("SSL_CERT_FILE");
if (certFile && !Deno.env.get("DENO_CERT")) env.DENO_CERT = certFile;

const args = ["-y", `deno@${version}`, "test", "--allow-all", ...lockArgs, SMOKE_FILE];
console.log(`compat: npx ${args.join(" ")}`);
const started = performance.now();
const child = new Deno.Command("npx", {
  args,
  cwd: new URL("..", import.meta.url).pathname,
  env,
  stdout: "piped",
  stderr: "piped",
}).spawn();
const decoder = new TextDecoder();
const seen: string[] = [];
async function pump(from: ReadableStream<Uint8Array>, to: typeof Deno.stdout): Promise<void> {
  for await (const chunk of from) {
    seen.push(decoder.decode(chunk, { stream: true }));
    let offset = 0;
    while (offset < chunk.length) offset += await to.write(chunk.subarray(offset));
  }
}
await Promise.all([pump(child.stdout, Deno.stdout), pump(child.stderr, Deno.stderr)]);
const status = await child.status;
// deno-lint-ignore no-control-regex
const output = seen.join("").replace(/\x1b\[[0-9;]*m/g, "");
const summary = output.match(/^(ok|FAILED) \| \d+ passed.*$/m)?.[0] ??
  `no test summary (exit ${status.code})`;
const seconds = ((performance.now() - started) / 1000).toFixed(0);
console.log(
  `\ncompat: Deno ${version}: ${status.success ? "PASS" : "FAIL"} (${summary.trim()}, ${seconds} s). ` +
    `Minimum supported Deno: ${MINIMUM_DENO} (the current one is ${Deno.version.deno}).`,
);
Deno.exit(status.code);

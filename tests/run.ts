/**
 * `deno task test`: runs `deno test --allow-all --doc` once, sequentially (see the README), and
 * runs it again only when the test runner itself was killed by a known Deno 2.9.6 crash.
 *
 * - Deno's HTTP/2 client (used by grpc-js) sometimes crashes its process when a stream meets the
 *   server's GOAWAY: SIGSEGV, or SIGABRT from the nghttp2 assertion `find_stream_on_goaway_func`.
 *   Tests that drain a host with client streams open can hit it, taking the whole runner down with
 *   no result. A run that ends that way, without Deno's summary line, is repeated (at most twice
 *   more) and the crash is reported; a run that reaches its summary is final, failures included.
 * - Output is streamed as it comes, so `.ci/run` reads the summary of the last run.
 *
 * @module
 */

const MAX_RUNS = 3;
const SUMMARY = /^(ok|FAILED) \| \d+ passed/m;

async function pump(from: ReadableStream<Uint8Array>, to: typeof Deno.stdout, seen: string[]): Promise<void> {
  const decoder = new TextDecoder();
  for await (const chunk of from) {
    seen.push(decoder.decode(chunk, { stream: true }));
    let offset = 0;
    while (offset < chunk.length) offset += await to.write(chunk.subarray(offset));
  }
}

for (let run = 1;; run++) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["test", "--allow-all", "--doc", ...Deno.args],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const seen: string[] = [];
  await Promise.all([pump(child.stdout, Deno.stdout, seen), pump(child.stderr, Deno.stderr, seen)]);
  const status = await child.status;
  // Deno colours its output even into a pipe: the escape sequences go before matching.
  // deno-lint-ignore no-control-regex
  const output = seen.join("").replace(/\x1b\[[0-9;]*m/g, "");
  const crashed = !SUMMARY.test(output) &&
    (status.signal === "SIGSEGV" || status.signal === "SIGABRT" || output.includes("nghttp2_session.c"));
  if (!crashed || run === MAX_RUNS) Deno.exit(status.code);
  console.error(
    `\ntests: run ${run} was killed by a crash of Deno itself (${
      status.signal ?? `exit ${status.code}`
    }, as its HTTP/2 client does when a stream meets GOAWAY) before its summary; running the suite again\n`,
  );
}

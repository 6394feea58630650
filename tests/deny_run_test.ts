/**
 * The host in a process that may not spawn (SPEC §9.8): runs tests/_deny_run_suite.ts under
 * `deno test --allow-all --deny-run`, where Deno itself refuses every subprocess.
 */
import assert from "node:assert/strict";

Deno.test("under --deny-run, the embedded provider and an in-process host pass the shared scenarios", async () => {
  const suite = new URL("./_deny_run_suite.ts", import.meta.url).pathname;
  const result = await new Deno.Command(Deno.execPath(), {
    args: ["test", "--allow-all", "--deny-run", "--no-check", suite],
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const out = new TextDecoder().decode(result.stdout) + new TextDecoder().decode(result.stderr);
  // The measured terminate times of the spinning cells, for the record.
  for (const line of out.split("\n")) {
    if (line.includes("terminate of a spinning cell took")) console.log(line);
  }
  assert.ok(result.success, out);
  assert.match(out, /ok \| \d+ passed/);
  assert.doesNotMatch(out, /[1-9]\d* failed/);
});

/**
 * The committed runtime bundles (`worker/dist/`) must match what `deno task bundle` produces from
 * the sources, so the subprocess never runs stale code.
 */
import assert from "node:assert/strict";

Deno.test("worker/dist is up to date with the worker sources (run `deno task bundle`)", async () => {
  const out = await Deno.makeTempDir({ prefix: "cmh-bundle-" });
  try {
    for (
      const [entry, name] of [["worker/runtime.ts", "runtime.js"], ["worker/cell_bootstrap.ts", "cell.js"]]
    ) {
      const result = await new Deno.Command(Deno.execPath(), {
        args: ["bundle", "--quiet", "--platform", "deno", "-o", `${out}/${name}`, entry],
        cwd: new URL("..", import.meta.url).pathname,
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.equal(result.code, 0, new TextDecoder().decode(result.stderr));
      const fresh = await Deno.readTextFile(`${out}/${name}`);
      const committed = await Deno.readTextFile(new URL(`./dist/${name}`, import.meta.url));
      assert.ok(fresh === committed, `worker/dist/${name} is stale: run \`deno task bundle\``);
    }
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});

/**
 * The committed runtime bundles (`worker/dist/`) must match what `deno task bundle` produces from
 * the sources, so the subprocess never runs stale code.
 */
import assert from "node:assert/strict";
import { buildBundles, BUNDLES, normaliseBundle } from "./build.ts";

Deno.test("worker/dist is up to date with the worker sources (run `deno task bundle`)", async () => {
  const out = await Deno.makeTempDir({ prefix: "cmh-bundle-" });
  try {
    await buildBundles(out);
    for (const [, name] of BUNDLES) {
      const fresh = await Deno.readTextFile(`${out}/${name}`);
      const committed = await Deno.readTextFile(new URL(`./dist/${name}`, import.meta.url));
      assert.ok(fresh === committed, `worker/dist/${name} is stale: run \`deno task bundle\``);
    }
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});

Deno.test("bundle module paths do not name the machine's npm cache", () => {
  const raw = [
    "// ../../root/.cache/deno/npm/registry.npmjs.org/long/5.3.2/umd/index.js",
    "// ../../../check/home/.cache/deno/npm/registry.npmjs.org/long/5.3.2/umd/index.js",
    '  "../../root/.cache/deno/npm/registry.npmjs.org/long/5.3.2/umd/index.js"(exports, module) {',
    "// worker/runtime.ts",
  ].join("\n");
  assert.equal(
    normaliseBundle(raw),
    [
      "// npm:long/5.3.2/umd/index.js",
      "// npm:long/5.3.2/umd/index.js",
      '  "npm:long/5.3.2/umd/index.js"(exports, module) {',
      "// worker/runtime.ts",
    ].join("\n"),
  );
});

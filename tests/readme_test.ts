/**
 * The README's examples print exactly what the README says they print: every `ts` code block that
 * is followed by a `text` block (before the next code block) is run from the repository's root,
 * and its stdout is compared with that text. (`deno test --doc` only checks that the blocks run.)
 */
import assert from "node:assert/strict";

const root = new URL("..", import.meta.url);

/** Each runnable `ts` block and the `text` block after it. */
function examples(markdown: string): { code: string; printed: string }[] {
  const blocks = [...markdown.matchAll(/^```(\S*)([^\n]*)\n([\s\S]*?)^```$/gm)]
    .map((m) => ({ lang: m[1], info: m[2].trim(), body: m[3] }));
  const pairs = [];
  for (let i = 0; i + 1 < blocks.length; i++) {
    const [code, next] = [blocks[i], blocks[i + 1]];
    if (code.lang === "ts" && code.info === "" && next.lang === "text") {
      pairs.push({ code: code.body, printed: next.body });
    }
  }
  return pairs;
}

Deno.test("the README's client examples print exactly the output shown under them", async (t) => {
  const pairs = examples(await Deno.readTextFile(new URL("README.md", root)));
  assert.equal(pairs.length, 2, "the README shows the output of two examples (client library, raw gRPC)");
  for (const [index, { code, printed }] of pairs.entries()) {
    await t.step(`example ${index + 1}`, async () => {
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["eval", "--ext=ts", code],
        cwd: root.pathname,
        env: { NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.ok(out.success, new TextDecoder().decode(out.stderr));
      assert.equal(new TextDecoder().decode(out.stdout), printed);
    });
  }
});

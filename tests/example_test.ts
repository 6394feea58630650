/** `deno task example` (the client library's runnable example) prints what a model would see. */
import assert from "node:assert/strict";

Deno.test("deno task example runs a cell that calls the example's own tool and prints the result", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["task", "-q", "example"],
    cwd: new URL("..", import.meta.url).pathname,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  assert.equal(stdout, "[notification from cell 1] adding…\ncell 1: result\n2 + 40 = 42\n");
});

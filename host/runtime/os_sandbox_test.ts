/** Unit tests of the OS sandbox's start-up checks (`os_sandbox.ts`) that need no bubblewrap. */
import assert from "node:assert/strict";
import { glibcLoader, libraryFiles } from "./os_sandbox.ts";

const DENO = Deno.realPathSync(Deno.execPath());

/** What `ldd` lists for a binary: its libraries and loader. */
function lddFiles(binary: string): string[] | undefined {
  try {
    const out = new Deno.Command("ldd", { args: [binary], stdout: "piped", stderr: "null" }).outputSync();
    if (!out.success) return undefined;
    const text = new TextDecoder().decode(out.stdout);
    return [...new Set([...text.matchAll(/(?:^|=>)\s*(\/\S+)\s+\(0x/gm)].map((m) => m[1]))];
  } catch {
    return undefined;
  }
}

Deno.test("libraryFiles lists the files ldd lists for deno, without running ldd when glibc's loader can list them", async () => {
  const expected = lddFiles(DENO);
  if (expected === undefined) return; // no ldd here: nothing to compare with
  const listed = await libraryFiles(DENO);
  assert.deepEqual(listed, { paths: expected });
  const loader = glibcLoader(DENO);
  if (loader !== undefined) {
    assert.match(loader, /\/ld-linux[\w.-]*\.so\.\d+$/);
    assert.ok(expected.includes(loader), "the loader itself");
  }
});

Deno.test("glibcLoader reads no interpreter from a file that is not an ELF executable, or is missing", () => {
  assert.equal(glibcLoader(new URL(import.meta.url).pathname), undefined);
  assert.equal(glibcLoader("/nonexistent/deno"), undefined);
  assert.equal(glibcLoader("/"), undefined);
});

/** Unit tests of the OS sandbox's start-up checks (`os_sandbox.ts`) that need no bubblewrap. */
import assert from "node:assert/strict";
import { glibcLoader, libraryDirectories } from "./os_sandbox.ts";

const DENO = Deno.realPathSync(Deno.execPath());

/** What `ldd` lists for a binary: the directories of its libraries and loader. */
function lddDirectories(binary: string): string[] | undefined {
  try {
    const out = new Deno.Command("ldd", { args: [binary], stdout: "piped", stderr: "null" }).outputSync();
    if (!out.success) return undefined;
    const paths = [...new TextDecoder().decode(out.stdout).matchAll(/(\/\S+)/g)].map((m) => m[1]);
    return [...new Set(paths.map((p) => p.slice(0, p.lastIndexOf("/")) || "/"))];
  } catch {
    return undefined;
  }
}

Deno.test("libraryDirectories lists the directories ldd lists for deno, without running ldd when glibc's loader can list them", () => {
  const expected = lddDirectories(DENO);
  if (expected === undefined) return; // no ldd here: nothing to compare with
  assert.deepEqual(libraryDirectories(DENO), expected);
  const loader = glibcLoader(DENO);
  if (loader !== undefined) {
    assert.match(loader, /\/ld-linux[\w.-]*\.so\.\d+$/);
    assert.ok(expected.includes(loader.slice(0, loader.lastIndexOf("/"))), "the loader's own directory");
  }
});

Deno.test("glibcLoader reads no interpreter from a file that is not an ELF executable, or is missing", () => {
  assert.equal(glibcLoader(new URL(import.meta.url).pathname), undefined);
  assert.equal(glibcLoader("/nonexistent/deno"), undefined);
  assert.equal(glibcLoader("/"), undefined);
});

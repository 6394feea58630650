/**
 * `deno task codex:install` end to end (issue 25, item 6), on a copy of the cached Codex 0.171
 * laid out as `npm i -g @openai/codex@0.171.0` lays it out (`<prefix>/bin/codex` → npm's JS shim,
 * the platform package nested under it). The cache itself is never changed: the copy's
 * directories are new, its files hard links (copies across filesystems), and the installer only
 * adds, renames and removes entries of the copy's `codex-resources/`.
 *
 * The proof that Codex runs this host: a TypeScript cell (`const n: number = 41`) completes with
 * this host and fails with a SyntaxError on Codex's own. Not part of `deno task test` (it needs the
 * reference install).
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { type CodexInstall, ensureCodex } from "./_codex.ts";
import { execCall, FakeModel } from "./_fake_model.ts";
import { LoopbackNet } from "./_netns.ts";
import { LAUNCHER, REPO_ROOT } from "./_shadow.ts";
import { codexExec, makeRunDir } from "./_codex_run.ts";
import { normalise } from "./_normalise.ts";
import { V1Client } from "../_v1_client.ts";

const BACKUP_SUFFIX = ".codex-backup";
const MARKER = "# Installed by code-mode-host: deno task codex:install";
const TS_CELL = "const n: number = 41; text(n + 1)";

/** Copies a tree: new directories, hard-linked files (copied across filesystems), same symlinks. */
async function copyTree(from: string, to: string): Promise<void> {
  await Deno.mkdir(to, { recursive: true });
  for await (const entry of Deno.readDir(from)) {
    const a = join(from, entry.name);
    const b = join(to, entry.name);
    if (entry.isSymlink) await Deno.symlink(await Deno.readLink(a), b);
    else if (entry.isDirectory) await copyTree(a, b);
    else {
      try {
        await Deno.link(a, b);
      } catch (error) {
        if ((error as { code?: string }).code !== "EXDEV") throw error;
        await Deno.copyFile(a, b);
      }
    }
  }
}

/** A global-npm-like copy of the install: returns the prefix's `bin/codex` and the vendor dir. */
async function npmGlobalCopy(
  install: CodexInstall,
  prefix: string,
): Promise<{ shim: string; vendor: string }> {
  const shimPackage = join(install.dir, "node_modules", "@openai", "codex");
  const platformPackage = join(install.vendor, "..", "..");
  const root = join(prefix, "lib", "node_modules", "@openai", "codex");
  await copyTree(shimPackage, root);
  const nested = join(root, "node_modules", "@openai", platformPackage.split("/").at(-1)!);
  await copyTree(platformPackage, nested);
  await Deno.mkdir(join(prefix, "bin"), { recursive: true });
  await Deno.symlink("../lib/node_modules/@openai/codex/bin/codex.js", join(prefix, "bin", "codex"));
  const vendor = join(nested, "vendor", install.vendor.split("/").at(-1)!);
  return { shim: join(prefix, "bin", "codex"), vendor };
}

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** `deno task codex:install ARGS` from `cwd`, with `path` first on PATH. */
async function task(args: string[], path: string, cwd = REPO_ROOT): Promise<Ran> {
  const denoBin = Deno.execPath().replace(/\/[^/]+$/, "");
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["task", "--quiet", "--config", join(REPO_ROOT, "deno.json"), "codex:install", ...args],
    cwd,
    clearEnv: true,
    env: { PATH: `${path}:${denoBin}:/usr/bin:/bin`, HOME: Deno.env.get("HOME") ?? "/tmp", NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: decoder.decode(out.stderr) };
}

function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

function listing(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((e) => e.name).sort();
}

const PREFACE = new TextEncoder().encode("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const EMPTY_SETTINGS = new Uint8Array([0, 0, 0, 4, 0, 0, 0, 0, 0]);

Deno.test("codex:install: install into an npm-installed Codex 0.171, real codex exec runs this host, uninstall restores Codex's own; backups, refusals, idempotence", async (t) => {
  const install = await ensureCodex();
  const cacheResources = listing(join(install.vendor, "codex-resources"));
  const tmp = await Deno.makeTempDir({ prefix: "codex-install-e2e-" });
  try {
    const prefix = join(tmp, "prefix");
    const { shim, vendor } = await npmGlobalCopy(install, prefix);
    const target = join(vendor, "codex-resources", "codex-code-mode-host");
    const backup = target + BACKUP_SUFFIX;
    await using model = await FakeModel.start(join(tmp, "model.sock"));
    await using net = await LoopbackNet.start(model);
    let runs = 0;
    /** Runs `cell` through the real Codex (npm's shim) and returns what the model saw. */
    const cell = async (source: string): Promise<string> => {
      const name = `run-${++runs}`;
      model.script(name, [execCall("call-1", source)]);
      const run = await makeRunDir(join(tmp, "runs"), name, net.modelPort);
      const done = await codexExec(net, run, { codex: shim, prompt: name });
      assert.equal(done.code, 0, done.stderr);
      return JSON.stringify(normalise(model.record(name)!.input).map((seen) => seen.output));
    };

    await t.step("before: Codex runs its own host (a TypeScript cell is a SyntaxError)", async () => {
      assert.match(await cell(TS_CELL), /SyntaxError/);
    });

    await t.step("usage errors exit 2; a Codex that is not there exits 1", async () => {
      const usage = await task(["--bogus"], join(prefix, "bin"));
      assert.equal(usage.code, 2, usage.stderr);
      assert.match(usage.stderr, /Unknown option '--bogus'/);
      assert.match(usage.stderr, /usage: deno task codex:install/);
      const missing = await task(["--codex", join(tmp, "nowhere")], join(prefix, "bin"));
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /nowhere: no such file or directory/);
      const notCodex = await task(["--codex", tmp], join(prefix, "bin"));
      assert.equal(notCodex.code, 1);
      assert.match(notCodex.stderr, /is not a Codex install this knows/);
      const none = await task([], join(tmp, "empty-path"));
      assert.equal(none.code, 1);
      assert.match(none.stderr, /no 'codex' on PATH/);
    });

    await t.step("install finds `codex` on PATH through npm's shim; Codex then runs this host", async () => {
      const done = await task([], join(prefix, "bin"), tmp);
      assert.equal(done.code, 0, done.stderr);
      assert.match(done.stdout, new RegExp(`Codex 0\\.171\\.0 at ${vendor.replaceAll(".", "\\.")}`));
      assert.match(done.stdout, /installed: .*codex-resources\/codex-code-mode-host runs /);
      const script = await Deno.readTextFile(target);
      assert.ok(script.includes(MARKER));
      assert.ok(script.includes(`exec '${LAUNCHER}' "$@"`), script);
      assert.equal(exists(backup), false, "nothing was there to keep");
      assert.equal(
        await cell(TS_CELL),
        JSON.stringify([[
          { type: "input_text", text: "Script completed\nWall time <T> seconds\nOutput:\n" },
          { type: "input_text", text: "42" },
        ]]),
      );
    });

    await t.step(
      "the installed launcher starts quietly in both launch forms, from any directory",
      async () => {
        const denoBin = Deno.execPath().replace(/\/[^/]+$/, "");
        // JSON host V1 (no arguments): the first bytes on stdout are the answer to the hello.
        await using v1 = V1Client.spawn({ command: target, cwd: "/" });
        assert.equal((await v1.hello()).type, "connection/ready");
        assert.equal((await v1.finish()).code, 0);
        // gRPC over the pipes: stdout is HTTP/2 frames from the first byte, SETTINGS first.
        const grpc = new Deno.Command(target, {
          args: ["--listen", "grpc+stdio://"],
          cwd: "/",
          clearEnv: true,
          env: { PATH: `${denoBin}:/usr/bin:/bin`, HOME: Deno.env.get("HOME") ?? "/tmp" },
          stdin: "piped",
          stdout: "piped",
          stderr: "piped",
        }).spawn();
        const stderr = new Response(grpc.stderr).text();
        const reader = grpc.stdout.getReader();
        const chunks: Uint8Array[] = [];
        let received = 0;
        const writer = grpc.stdin.getWriter();
        await writer.write(PREFACE);
        await writer.write(EMPTY_SETTINGS);
        while (received < 9) {
          const { value, done } = await reader.read();
          if (done) break;
          chunks.push(value);
          received += value.length;
        }
        await writer.close();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          chunks.push(value);
          received += value.length;
        }
        const status = await grpc.status;
        assert.equal(status.code, 0, await stderr);
        const bytes = new Uint8Array(received);
        chunks.reduce((at, chunk) => (bytes.set(chunk, at), at + chunk.length), 0);
        const types: number[] = [];
        let at = 0;
        while (at + 9 <= bytes.length) {
          types.push(bytes[at + 3]);
          at += 9 + ((bytes[at] << 16) | (bytes[at + 1] << 8) | bytes[at + 2]);
        }
        assert.equal(at, bytes.length, "stdout is whole HTTP/2 frames");
        assert.equal(types[0], 4, "the first frame is SETTINGS");
      },
    );

    await t.step("installing again is idempotent", async () => {
      const before = await Deno.readTextFile(target);
      const again = await task(["--codex", shim], "");
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stdout, /already installed/);
      assert.equal(await Deno.readTextFile(target), before);
      assert.equal(exists(backup), false);
    });

    await t.step(
      "uninstall: Codex runs its own host again; a second uninstall has nothing to do",
      async () => {
        const done = await task(["--uninstall"], join(prefix, "bin"));
        assert.equal(done.code, 0, done.stderr);
        assert.match(done.stdout, /removed: .*codex-code-mode-host/);
        assert.equal(exists(target), false);
        assert.match(await cell(TS_CELL), /SyntaxError/);
        const again = await task(["--uninstall"], join(prefix, "bin"));
        assert.equal(again.code, 0, again.stderr);
        assert.match(again.stdout, /not installed: nothing at /);
      },
    );

    await t.step("a host Codex ships in codex-resources/ is kept as the backup and restored", async () => {
      await Deno.link(install.host, target); // Codex's own host where 0.171 looks first
      const size = (await Deno.stat(target)).size;
      assert.match(await cell(TS_CELL), /SyntaxError/);
      const done = await task(["--codex", join(vendor, "bin", "codex")], "");
      assert.equal(done.code, 0, done.stderr);
      assert.match(done.stdout, /kept Codex's own host: .* -> .*\.codex-backup/);
      assert.equal((await Deno.stat(backup)).size, size);
      assert.match(await cell(TS_CELL), /"42"/);
      const undo = await task(["--uninstall", "--codex", vendor], "");
      assert.equal(undo.code, 0, undo.stderr);
      assert.match(undo.stdout, /restored Codex's own host/);
      assert.equal(exists(backup), false);
      assert.equal((await Deno.stat(target)).size, size);
      assert.match(await cell(TS_CELL), /SyntaxError/);
    });

    await t.step(
      "an existing backup is never overwritten: the install refuses and changes nothing",
      async () => {
        // Codex's own host is at the target (previous step); a stale backup is there too.
        await Deno.writeTextFile(backup, "an older backup\n");
        const refused = await task(["--codex", shim], "");
        assert.equal(refused.code, 1);
        assert.match(refused.stderr, /a backup already exists at .*: refusing to overwrite it/);
        assert.equal(await Deno.readTextFile(backup), "an older backup\n");
        assert.equal((await Deno.stat(target)).size, (await Deno.stat(install.host)).size);
        const uninstall = await task(["--uninstall", "--codex", shim], "");
        assert.equal(uninstall.code, 1);
        assert.match(uninstall.stderr, /is not this host's launcher: left alone/);
      },
    );

    assert.deepEqual(
      listing(join(install.vendor, "codex-resources")),
      cacheResources,
      "the cache is unchanged",
    );
    assert.deepEqual(model.unknownPrompts, []);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

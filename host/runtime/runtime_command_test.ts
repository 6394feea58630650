import assert from "node:assert/strict";
import { buildRuntimeCommand } from "./runtime_command.ts";

const base = {
  deno: "/opt/deno",
  runtimeDir: "/rt",
  workDir: "/tmp/code-mode-host/w-1-1",
  workerMainHeapMb: 512,
};

Deno.test("buildRuntimeCommand() gives exactly the SPEC §9.3 argv with a main-isolate heap limit (scenario 109)", () => {
  const command = buildRuntimeCommand(base);
  assert.deepEqual([command.command, ...command.args], [
    "/opt/deno",
    "run",
    "--no-prompt",
    "--no-config",
    "--no-lock",
    "--no-remote",
    "--no-npm",
    "--no-code-cache",
    "--allow-read=/rt",
    "--v8-flags=--max-old-space-size=512",
    "/rt/runtime.js",
  ]);
  assert.ok(!command.args.includes("--unstable-worker-options"));
  assert.ok(!command.args.some((a) => /^--allow-(net|env|write|run|ffi|sys|all)/.test(a)));
  assert.equal(command.cwd, base.workDir);
});

Deno.test("buildRuntimeCommand() passes no V8 heap flag by default, so cell Workers keep their own limits", () => {
  const command = buildRuntimeCommand({ ...base, workerMainHeapMb: 0 });
  assert.ok(!command.args.some((a) => a.startsWith("--v8-flags")));
  assert.equal(command.args.at(-1), "/rt/runtime.js");
  assert.equal(command.args.at(-2), "--allow-read=/rt");
});

Deno.test("buildRuntimeCommand() passes the six environment variables of §9.3 (DENO_DIR in the work dir), MALLOC_ARENA_MAX and TZ=UTC", () => {
  const { env } = buildRuntimeCommand(base);
  assert.deepEqual(env, {
    NO_COLOR: "1",
    DENO_NO_UPDATE_CHECK: "1",
    DENO_NO_PROMPT: "1",
    DENO_UNSTABLE_ALLOW_ALL_BY_DEFAULT: "0",
    DENO_UNSTABLE_RELAXED_PERMISSIONS: "0",
    DENO_DIR: "/tmp/code-mode-host/w-1-1/deno_dir",
    MALLOC_ARENA_MAX: "2",
    TZ: "UTC",
  });
});

Deno.test("buildRuntimeCommand() puts the --worker-prefix before deno (scenario 114h)", () => {
  const prefix = ["systemd-run", "--scope", "-p", "MemoryMax=2G", "--"];
  const plain = buildRuntimeCommand(base);
  const wrapped = buildRuntimeCommand({ ...base, prefix });
  assert.deepEqual([wrapped.command, ...wrapped.args], [...prefix, plain.command, ...plain.args]);
});

Deno.test("buildRuntimeCommand() uses the configured main-isolate heap", () => {
  const command = buildRuntimeCommand({ ...base, workerMainHeapMb: 32 });
  assert.ok(command.args.includes("--v8-flags=--max-old-space-size=32"));
});

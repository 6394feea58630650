/**
 * The host's command line (`deno task serve`, the compiled executable, `bin/codex-code-mode-host`):
 * the only place for arguments, signals, stdout and the process's exit (SPEC §9.1, §9.7).
 *
 * 1. A compiled executable started as its own session runtime (SPEC §9.9) is handed to the runtime
 *    before anything of the host loads.
 * 2. The flags are parsed ({@link parseHostFlags}); a usage error is logged, exit 2.
 * 3. The `--listen` form's door starts ({@link DOORS}), loading only what it needs; its endpoint is
 *    printed and logged.
 * 4. {@link drain} waits for its end or a stop request; the process exits with its code.
 *
 * @module
 */
import { isAbsolute } from "node:path";
import { Logger } from "../host/ops/log.ts";
import { runSelfSpawnedRuntime, SELF_RUNTIME_ARG } from "../host/runtime/self_runtime.ts";
import { type FlagFiles, parseHostFlags } from "./flags.ts";
import { DOORS, StartFailure } from "./doors.ts";
import { drain } from "./drain.ts";

/**
 * The directory the user ran the command from: `deno task` runs the host in the directory of
 * deno.json and passes the caller's directory as `INIT_CWD`.
 */
function userDirectory(): string {
  const cwd = Deno.cwd();
  const init = Deno.env.get("INIT_CWD");
  if (init === undefined || !isAbsolute(init)) return cwd;
  try {
    return Deno.statSync(init).isDirectory ? init : cwd;
  } catch {
    return cwd;
  }
}

/** The files of this process's file system, as the flags read them. */
function processFiles(): FlagFiles {
  return {
    base: userDirectory(),
    cwd: Deno.cwd(),
    readTextFile(path) {
      try {
        return Deno.readTextFileSync(path);
      } catch {
        return undefined;
      }
    },
  };
}

/** A door's failure as its log line and exit code; anything else is a bug and propagates. */
function failed(error: unknown, log: Logger): number {
  if (!(error instanceof StartFailure)) throw error;
  log.error(error.message);
  return error.exitCode;
}

/**
 * Runs the host.
 *
 * @param args the arguments
 * @returns the exit code
 */
async function main(args: string[]): Promise<number> {
  const config = await parseHostFlags(args, processFiles());
  if (config.kind === "usage") {
    new Logger().error(config.message);
    return 2;
  }
  if (config.kind === "print") {
    await Deno.stdout.write(new TextEncoder().encode(config.text));
    return 0;
  }
  const log = new Logger(config.logLevel);
  let door;
  try {
    door = await DOORS[config.listen.kind](config, log);
  } catch (error) {
    return failed(error, log);
  }
  if (door.url !== undefined) {
    if (door.printsUrl) await Deno.stdout.write(new TextEncoder().encode(door.url + "\n"));
    log.info(`code-mode-host listening on ${door.url}`);
  }
  try {
    return await drain(door, { exitWithParent: config.exitWithParent, log });
  } catch (error) {
    return failed(error, log);
  }
}

if (import.meta.main) {
  // Only the host passes this argument, to a compiled executable it spawns as a session runtime.
  if (Deno.args[0] === SELF_RUNTIME_ARG) await runSelfSpawnedRuntime(Deno.args.slice(1));
  else Deno.exit(await main(Deno.args));
}

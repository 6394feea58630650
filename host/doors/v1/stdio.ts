/**
 * `--listen stdio` / `--listen stdio://` (SPEC §9.1, §9.10): one JSON "host V1" connection on
 * the process's stdin and stdout, on a freshly assembled host with client-chosen session IDs. stdout
 * carries only frames; logs go to stderr.
 *
 * @module
 */
import { type AssembledHost, assembleHost, type EngineOptions } from "../../assemble.ts";
import { V1Connection } from "./connection.ts";

/** The byte streams of the connection (default the process's stdin and stdout). */
export interface V1Io {
  readable: ReadableStream<Uint8Array>;
  writable: WritableStream<Uint8Array>;
}

/**
 * Serves one V1 connection until the client's EOF (or a fatal protocol error), then stops every
 * session, reaps every runtime and removes the runtime directory.
 *
 * @param options the host's options (`clientSessionIds` is forced on)
 * @param io the streams (default `Deno.stdin.readable` and `Deno.stdout.writable`)
 * @param assembled a host already assembled from `options` with `clientSessionIds` (the command
 *   line assembles it before this door's modules load); default: assembled here
 * @returns the exit code, as Codex's own host exits: 0 after EOF or a rejected hello, 1 after a
 *   fatal error or a shutdown that timed out
 */
export async function serveV1Stdio(
  options: EngineOptions,
  io?: V1Io,
  assembled?: AssembledHost,
): Promise<number> {
  const host = assembled ?? await assembleHost({ ...options, clientSessionIds: true });
  const connection = new V1Connection({
    core: host.core,
    log: host.log,
    readable: io?.readable ?? Deno.stdin.readable,
    writable: io?.writable ?? Deno.stdout.writable,
  });
  host.markServing();
  const end = await connection.run();
  if (end.timedOut) await host.kill();
  else {
    let timer: ReturnType<typeof setTimeout> | undefined;
    // One budget of 5 s from the client's EOF: what the sessions' shutdown left of it.
    const late = new Promise<"late">((r) => timer = setTimeout(() => r("late"), end.remainingMs));
    const result = await Promise.race([host.shutdown(), late]);
    clearTimeout(timer);
    if (result === "late") {
      host.log.error("timed out shutting down code-mode host state");
      await host.kill();
      return 1;
    }
  }
  return end.type !== "fatal" && !end.timedOut ? 0 : 1;
}

/**
 * CLI entry of the host (`deno task serve`, or the compiled executable): the only place for
 * argument parsing, signals, stdout and process exit (SPEC §9.1, §9.7).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { ListenError, parseListenUrl } from "./listen_url.ts";
import { Logger, type LogLevel } from "./ops/log.ts";
import { createHost } from "./doors/grpc/server.ts";

const LEVELS = ["debug", "info", "warn", "error"];

function fail(log: Logger, message: string, code: number): never {
  log.error(message);
  Deno.exit(code);
}

/** Whether this process is a `deno compile` executable (its modules live in a virtual dir). */
function isCompiled(): boolean {
  return import.meta.url.includes("/deno-compile-");
}

async function main(args: string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      strict: true,
      options: {
        "listen": { type: "string", default: "grpc://127.0.0.1:50051" },
        "allow-non-loopback": { type: "boolean", default: false },
        "tls-cert": { type: "string" },
        "tls-key": { type: "string" },
        "auth-token-file": { type: "string" },
        "isolation": { type: "string", default: "subprocess" },
        "deno": { type: "string" },
        "worker-prefix": { type: "string" },
        "warm-sessions": { type: "string" },
        "route-token": { type: "string" },
        "limit": { type: "string", multiple: true, default: [] },
        "log-level": { type: "string", default: "info" },
        "exit-with-parent": { type: "boolean", default: true },
      },
      allowNegative: true,
    });
  } catch (error) {
    fail(new Logger(), (error as Error).message, 2);
  }
  const v = parsed.values;
  const level = v["log-level"] as string;
  if (!LEVELS.includes(level)) fail(new Logger(), `invalid --log-level \`${level}\``, 2);
  const log = new Logger(level as LogLevel);

  let listen;
  try {
    listen = parseListenUrl(v.listen as string, v["allow-non-loopback"] as boolean);
  } catch (error) {
    if (error instanceof ListenError) fail(log, error.message, 2);
    throw error;
  }
  if ((v["tls-cert"] === undefined) !== (v["tls-key"] === undefined)) {
    fail(log, "--tls-cert and --tls-key must be given together", 2);
  }
  const read = (flag: string, path: string) => {
    try {
      return Deno.readTextFileSync(path);
    } catch {
      return fail(log, `failed to read ${flag} ${path}`, 2);
    }
  };
  let tls: { cert: string; key: string } | undefined;
  if (v["tls-cert"] !== undefined) {
    tls = {
      cert: read("--tls-cert", v["tls-cert"] as string),
      key: read("--tls-key", v["tls-key"] as string),
    };
  }
  let authToken: string | undefined;
  if (v["auth-token-file"] !== undefined) {
    const path = v["auth-token-file"] as string;
    authToken = read("--auth-token-file", path).trim();
    if (authToken === "") fail(log, `failed to read --auth-token-file ${path}`, 2);
  }
  if (v.isolation !== "subprocess") {
    fail(log, `--isolation \`${v.isolation}\` is not supported by this build`, 2);
  }
  if (isCompiled() && v.deno === undefined) {
    fail(
      log,
      "code-mode host needs a Deno executable for session workers; pass --deno PATH or use --isolation in-process",
      2,
    );
  }
  let prefix: string[] | undefined;
  if (v["worker-prefix"] !== undefined) {
    try {
      prefix = JSON.parse(v["worker-prefix"] as string);
      if (!Array.isArray(prefix) || !prefix.every((p) => typeof p === "string")) throw new Error();
    } catch {
      fail(log, "--worker-prefix must be a JSON array of strings", 2);
    }
  }
  let warmSessions: number | undefined;
  if (v["warm-sessions"] !== undefined) {
    warmSessions = Number(v["warm-sessions"]);
    if (!Number.isSafeInteger(warmSessions) || warmSessions < 0) {
      fail(log, "--warm-sessions must be a non-negative integer", 2);
    }
  }
  const limitArgs = v.limit as string[];
  const limits: Record<string, number> = {};
  for (const text of limitArgs) {
    const at = text.indexOf("=");
    const value = Number(text.slice(at + 1));
    if (at <= 0 || !Number.isSafeInteger(value) || value < 0) fail(log, `invalid --limit \`${text}\``, 2);
    limits[text.slice(0, at)] = value;
  }

  let host;
  try {
    host = await createHost({
      listen: listen.bind,
      limits,
      deno: v.deno as string | undefined,
      workerPrefix: prefix,
      warmSessions,
      routeToken: v["route-token"] as string | undefined,
      authToken,
      tls,
      log,
    });
  } catch (error) {
    if (error instanceof RangeError) fail(log, error.message, 2);
    fail(log, (error as Error).message, 1);
  }
  await Deno.stdout.write(new TextEncoder().encode(host.url + "\n"));
  log.info(`code-mode-host listening on ${host.url}`);

  let signals = 0;
  const onSignal = () => {
    signals++;
    if (signals === 1) {
      void host.shutdown().then(() => Deno.exit(0), () => Deno.exit(0));
    } else {
      void host.kill().finally(() => Deno.exit(1));
    }
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  if (v["exit-with-parent"]) {
    watchParent(() => {
      log.warn("code-mode-host parent process ended; shutting down");
      onSignal();
    });
  }
}

/** How often the host looks whether the process that started it is still there. */
const PARENT_POLL_MS = 250;

/**
 * Calls `onGone` once when this process's parent ends (it is then re-parented: `Deno.ppid`
 * changes). A supervisor that kills `deno task serve`, which runs the host as its child, would
 * otherwise leave the host and its runtimes running. `--no-exit-with-parent` turns it off (a host
 * started in the background by a script that then exits).
 */
function watchParent(onGone: () => void): void {
  const parent = Deno.ppid;
  const timer = setInterval(() => {
    if (Deno.ppid === parent) return;
    clearInterval(timer);
    onGone();
  }, PARENT_POLL_MS);
  Deno.unrefTimer(timer);
}

if (import.meta.main) await main(Deno.args);

/**
 * `deno task exec`: runs one cell from the shell through the client library and prints what a model
 * would see.
 *
 * ```text
 * deno task exec [--endpoint URL] [--session-file F] [--json] [FLAGS] 'SOURCE'   (or SOURCE on stdin)
 * ```
 *
 * - Without `--endpoint` the cell runs on a private host that this command spawns over its pipes
 *   (`ProcessOwnedGrpcCodeModeSessionProvider`) and reaps before it exits.
 * - SOURCE is what a model sends to its `exec` tool: an optional `// @exec:` pragma line, then the code
 *   (`parseExecSource`, SPEC §11.2); a malformed pragma is a usage error. Flags override the pragma.
 * - The session is opened in Server output mode, so the host adds the `Script error:` item and applies
 *   the token budget (`--max-output-tokens`, default 10,000) as it does for a model (SPEC §8.4); the
 *   command prints `formatRuntimeResponse`'s items (SPEC §11.5: the `Script completed` / `Wall time …` /
 *   `Output:` header, then the host's items). A cell that yields is waited on until it ends; each observation is printed (an empty
 *   yielded one only the first time). `--json` prints each observation as the client library returns
 *   it (`RuntimeResponse`), one JSON line each.
 * - Notifications go to stderr as `[notification from cell ID] text`; tool calls are refused (no
 *   tools are enabled). Ctrl-C terminates the cell and prints its `terminated` outcome; a second
 *   Ctrl-C exits at once (130).
 * - Exit code: 0 when the cell completed without an error, 1 when it failed or was terminated or the
 *   host could not run it, 2 on a usage error.
 * - `--session-file F`: consecutive commands with the same F share one session, so stored values
 *   survive from one to the next. The first command starts a _session keeper_ in the background
 *   that holds the session (and its private host, if any) and serves later commands on a Unix socket
 *   named in F; it ends after `--idle-minutes` (default 30; 0: never) without a command, with
 *   `--close`, or on SIGTERM. A later command must name the same `--endpoint` (or none).
 *   When F names a keeper that has gone, the session is gone with it: the command fails with the
 *   client library's reset message (nothing runs) and the next command starts afresh.
 *
 * @module
 */
import { CodeModeError } from "../proto/errors.ts";
import { readLines } from "../proto/line_reader.ts";
import { RESET_MESSAGE } from "./status_text.ts";
import type { CodeModeSession } from "./types.ts";
import {
  dispose,
  exitCodeOf,
  interrupted,
  type Options,
  parseOptions,
  printer,
  providerFor,
  runCell,
  type RunEvent,
  runOnce,
  USAGE,
  UsageError,
} from "./exec_run.ts";

// ---------------------------------------------------------------------------------------------------
// The session keeper behind --session-file.

/** The content of a session file: which keeper holds the session, and where it listens. */
interface SessionFile {
  pid: number;
  socket: string;
  endpoint: string | null;
}

function readSessionFile(path: string): SessionFile | undefined {
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw new UsageError(`cannot read --session-file ${path}: ${(error as Error).message}`);
  }
  try {
    const file = JSON.parse(text);
    if (typeof file.socket === "string" && typeof file.pid === "number") return file;
  } catch { /* reported below */ }
  throw new UsageError(`--session-file ${path} is not a code-mode session file`);
}

async function connect(file: SessionFile): Promise<Deno.UnixConn | undefined> {
  try {
    return await Deno.connect({ transport: "unix", path: file.socket });
  } catch {
    return undefined;
  }
}

/** Writes `value` as one JSON line. */
async function writeLine(conn: Deno.Conn, value: unknown): Promise<void> {
  const bytes = new TextEncoder().encode(JSON.stringify(value) + "\n");
  for (let sent = 0; sent < bytes.length;) sent += await conn.write(bytes.subarray(sent));
}

/**
 * The longest line on a keeper's socket, either way: 65 MiB, a gRPC message's worth (the largest
 * cell source the host accepts, or one observation) plus 1 MiB for the JSON around it.
 */
export const KEEPER_LINE_MAX_BYTES: number = 65 * 1024 * 1024;

/** The error of a line on a keeper's socket over {@link KEEPER_LINE_MAX_BYTES}. */
export const KEEPER_LINE_TOO_LONG = `code-mode exec line exceeds ${KEEPER_LINE_MAX_BYTES} bytes`;

/**
 * The JSON lines of a connection, until it ends.
 *
 * @throws {RangeError} {@link KEEPER_LINE_TOO_LONG} as soon as a line passes the limit (it is never
 *   buffered whole, nor read to its end)
 */
async function* readJsonLines(conn: Deno.Conn): AsyncGenerator<unknown> {
  const decoder = new TextDecoder();
  try {
    for await (const part of readLines(conn.readable, KEEPER_LINE_MAX_BYTES)) {
      if (!("line" in part)) throw new RangeError(KEEPER_LINE_TOO_LONG);
      yield JSON.parse(decoder.decode(part.line));
    }
  } catch (error) {
    // A peer that closed with our bytes unread resets the connection after what it wrote: an end.
    if (!(error instanceof Deno.errors.ConnectionReset)) throw error;
  }
}

/** Starts a keeper for `options.sessionFile` and waits until it is serving; returns its file. */
async function startKeeper(options: Options): Promise<SessionFile> {
  const args = ["run", "--allow-all", decodeURIComponent(new URL(import.meta.url).pathname), "--keep"];
  args.push("--session-file", options.sessionFile!, "--idle-minutes", String(options.idleMinutes));
  if (options.endpoint !== undefined) args.push("--endpoint", options.endpoint);
  const child = new Deno.Command(Deno.execPath(), {
    args,
    env: options.authToken === undefined ? {} : { CODE_MODE_EXEC_AUTH_TOKEN: options.authToken },
    stdin: "null",
    stdout: "piped",
    stderr: "null",
    detached: true,
  }).spawn();
  // The keeper prints one line, `ready` or why it could not start, and nothing after it.
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let first = "";
  while (!first.includes("\n")) {
    const { done, value } = await lines.read();
    if (done) break;
    first += value;
  }
  await lines.cancel();
  first = first.split("\n")[0];
  if (first !== "ready") {
    const status = await child.status;
    throw new CodeModeError(undefined, first || `session keeper exited with code ${status.code}`);
  }
  child.unref();
  return readSessionFile(options.sessionFile!)!;
}

/** One command with a session file: run on the keeper, starting one when there is none. */
async function runOnKeeper(options: Options): Promise<number> {
  const emit = printer(options.json);
  const path = options.sessionFile!;
  let file = readSessionFile(path);
  if (file && !options.close && file.endpoint !== (options.endpoint ?? null)) {
    const where = file.endpoint ?? "a private host";
    throw new UsageError(
      `--session-file ${path} holds a session on ${where}; pass the same --endpoint or another file`,
    );
  }
  let conn = file && await connect(file);
  if (options.close) {
    if (conn) {
      await writeLine(conn, { close: true });
      for await (const _ of readJsonLines(conn)) { /* the keeper closes the connection when it is done */ }
    }
    return 0;
  }
  try {
    if (!conn) {
      const lost = file !== undefined;
      if (lost) await removeIfPossible(path);
      file = await startKeeper(options);
      // A session file whose keeper has gone lost its session and stored values: say so, run nothing.
      if (lost) throw new CodeModeError(undefined, RESET_MESSAGE);
      conn = await connect(file);
      if (!conn) throw new CodeModeError(undefined, `session keeper of ${path} does not answer`);
    }
  } catch (error) {
    emit({ error: (error as Error).message });
    return 1;
  }
  using stop = interrupted();
  // A failed write means a broken connection, which the read loop below reports.
  let stopping: Promise<unknown> = Promise.resolve();
  const onStop = () => {
    stopping = writeLine(conn, { terminate: true }).then(() => undefined, (error: unknown) => error);
  };
  stop.signal.addEventListener("abort", onStop);
  const request = {
    source: options.source,
    yieldTimeMs: options.yieldTimeMs,
    maxOutputTokens: options.maxOutputTokens,
  };
  // A keeper that refused the line closes the connection before it is all written: its answer
  // still comes on the read side.
  await writeLine(conn, request).catch(() => {});
  let code: number | undefined;
  try {
    for await (const line of readJsonLines(conn)) {
      const event = line as RunEvent & { exitCode?: number };
      if (event.exitCode !== undefined) code = event.exitCode;
      else emit(event);
    }
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    emit({ error: `session keeper of ${path}: ${error.message}` });
    return 1;
  }
  await stopping;
  if (code === undefined) emit({ error: `session keeper of ${path} ended before the cell did` });
  return code ?? 1;
}

/**
 * The keeper: opens the session, writes the session file, prints `ready`, then serves one cell at a
 * time per connection (concurrent connections run concurrent cells on the same session).
 */
async function keep(options: Options): Promise<void> {
  const path = options.sessionFile!;
  const dir = await Deno.makeTempDir({ prefix: "code-mode-exec-" });
  const socket = `${dir}/keeper.sock`;
  options.authToken = Deno.env.get("CODE_MODE_EXEC_AUTH_TOKEN");
  const provider = providerFor(options, true);
  let session: CodeModeSession;
  let listener: Deno.UnixListener;
  try {
    session = await provider.createSession({ outputTruncation: "server" });
    listener = Deno.listen({ transport: "unix", path: socket });
    const file: SessionFile = { pid: Deno.pid, socket, endpoint: options.endpoint ?? null };
    await Deno.writeTextFile(`${path}.tmp-${Deno.pid}`, JSON.stringify(file) + "\n");
    await Deno.rename(`${path}.tmp-${Deno.pid}`, path);
  } catch (error) {
    console.log((error as Error).message.replaceAll("\n", " "));
    await dispose(provider);
    await removeIfPossible(dir);
    Deno.exit(1);
  }
  // The one line the starting command waits for; nothing is written to stdout or stderr after it.
  console.log("ready");

  const idleMs = options.idleMinutes * 60_000;
  let active = 0;
  let idle: ReturnType<typeof setTimeout> | undefined;
  const done = Promise.withResolvers<void>();
  const armIdle = () => {
    clearTimeout(idle);
    if (active === 0 && idleMs > 0) idle = setTimeout(() => done.resolve(), idleMs);
  };
  armIdle();
  Deno.addSignalListener("SIGTERM", () => done.resolve());
  const serve = async (conn: Deno.UnixConn) => {
    active++;
    clearTimeout(idle);
    try {
      if (await serveCommand(conn, session) === "close") done.resolve();
    } finally {
      active--;
      armIdle();
    }
  };
  const accepting = (async () => {
    try {
      // `serve` never rejects (a broken connection ends only its own command); the commands still
      // running when the keeper stops end with its exit.
      for await (const conn of listener) serve(conn);
    } catch { /* the listener was closed */ }
  })();
  await done.promise;
  clearTimeout(idle);
  listener.close();
  await accepting;
  // Remove the file only if it is still ours (a later keeper may have replaced it).
  if (readSessionFileQuietly(path)?.pid === Deno.pid) await removeIfPossible(path);
  await session.shutdown(); // never throws
  await dispose(provider);
  await removeIfPossible(dir);
  Deno.exit(0);
}

/**
 * Serves one command's connection on the keeper's session: its cell (stopped by a later line or the
 * connection's end), the cell's events, then its exit code. Never rejects: a broken connection ends
 * only its own command.
 *
 * @returns `"close"` when the command asked the keeper to close
 */
async function serveCommand(conn: Deno.UnixConn, session: CodeModeSession): Promise<"close" | undefined> {
  const stop = new AbortController();
  // Lines go out one after the other; `sending` settles once the last one queued is written. A
  // broken connection stops the cell.
  let sending: Promise<void> = Promise.resolve();
  const send = (value: unknown): void => {
    sending = sending.then(() => writeLine(conn, value)).catch(() => stop.abort());
  };
  try {
    const lines = readJsonLines(conn);
    let first: { source?: string; close?: boolean } | undefined;
    try {
      first = (await lines.next()).value as typeof first;
    } catch (error) {
      // A line over the limit is answered (and the connection closed); a broken one is not.
      if (!(error instanceof RangeError)) throw error;
      send({ error: error.message });
      send({ exitCode: 1 });
      await sending;
      return;
    }
    if (first?.close) return "close";
    if (typeof first?.source !== "string") return;
    // A later line (terminate) or the connection's end (the command was killed) stops the cell.
    // (Read without `break`: leaving a `for await` cancels the readable, which closes the connection.)
    lines.next().then(() => stop.abort(), () => stop.abort());
    const request = first as { source: string; yieldTimeMs?: number; maxOutputTokens?: number };
    try {
      const response = await runCell(session, request, send, stop.signal);
      send({ exitCode: exitCodeOf(response) });
    } catch (error) {
      send({ error: (error as Error).message });
      send({ exitCode: 1 });
    }
    await sending;
  } catch {
    /* a broken connection ends only its own command */
  } finally {
    try {
      conn.close();
    } catch { /* already closed */ }
  }
}

/** Removes a file or directory of this command's own; one that is gone or cannot go is left. */
async function removeIfPossible(path: string): Promise<void> {
  try {
    await Deno.remove(path, { recursive: true });
  } catch {
    // Gone already (another keeper's cleanup), or not ours to remove: nothing depends on it.
  }
}

function readSessionFileQuietly(path: string): SessionFile | undefined {
  try {
    return readSessionFile(path);
  } catch {
    return undefined;
  }
}

async function main(args: string[]): Promise<number> {
  const keeper = args[0] === "--keep";
  let options: Options;
  try {
    options = await parseOptions(keeper ? args.slice(1) : args, keeper);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`exec: ${error.message}\n${USAGE}`);
    return 2;
  }
  if (keeper) {
    await keep(options);
    return 0;
  }
  try {
    if (options.sessionFile !== undefined) return await runOnKeeper(options);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`exec: ${error.message}\n${USAGE}`);
    return 2;
  }
  return await runOnce(options as Options & { source: string });
}

if (import.meta.main) Deno.exit(await main(Deno.args));

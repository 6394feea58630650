/**
 * Test harness: a real host (in this process via `startGrpcHost`, or as a `deno task serve`
 * subprocess), a real gRPC client on 127.0.0.1, and helpers to open sessions and run cells.
 * Folder-private: never re-exported.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  type Channel,
  ClientError,
  createChannel,
  createClient,
  type Metadata,
  type Status,
} from "nice-grpc";
import { codeModeHostDefinition } from "../proto/loader.ts";
import {
  type GrpcHost,
  type GrpcHostExtensions,
  type HostOptions,
  startGrpcHost,
} from "../host/doors/grpc/server.ts";
import { Logger } from "../host/ops/log.ts";
import { hostTempParent } from "../host/runtime/runtime_files.ts";
import { FAULT_SIGNAL } from "./_faults.ts";

export { type Faults, faultSource } from "./_faults.ts";

// deno-lint-ignore no-explicit-any
export type Msg = any;
/** A loosely typed client: requests and responses are plain protobufjs objects. */
// deno-lint-ignore no-explicit-any
export type RawClient = Record<string, (request: Msg, options?: Msg) => any>;

export const CHANNEL_OPTIONS = {
  "grpc.max_receive_message_length": 67_108_864,
  "grpc.max_send_message_length": 67_108_864,
  "grpc.use_local_subchannel_pool": 1,
};

/** A raw gRPC client of the code-mode service bound to one channel. */
export function rawClient(address: string): { client: RawClient; channel: Channel } & Disposable {
  const channel = createChannel(address.replace(/^http:\/\//, ""), undefined, CHANNEL_OPTIONS);
  // deno-lint-ignore no-explicit-any
  const client = createClient(codeModeHostDefinition() as any, channel) as unknown as RawClient;
  return { client, channel, [Symbol.dispose]: () => channel.close() };
}

/** Log lines captured from an in-process host. */
export class CapturedLog extends Logger {
  readonly lines: Record<string, unknown>[] = [];
  /**
   * @param level the threshold
   * @param now the clock of the logger's repeat intervals (default `performance.now`)
   */
  constructor(level: "debug" | "info" = "info", now?: () => number) {
    super(level, (line) => this.lines.push(JSON.parse(line)), now);
  }
}

/** What a test host takes: the host's options and the gRPC door's extensions (middleware, runtime factory). */
export type TestHostOptions = HostOptions & GrpcHostExtensions;

/** An in-process host on 127.0.0.1:0 plus a client. */
export interface TestHost extends AsyncDisposable {
  host: GrpcHost;
  client: RawClient;
  log: CapturedLog;
  address: string;
}

/** Starts a real host in this process (real gRPC server, real runtime subprocesses). */
export async function startHost(options: TestHostOptions = {}): Promise<TestHost> {
  const { middleware, runtimeFactory, ...hostOptions } = options;
  const log = options.log instanceof CapturedLog ? options.log : new CapturedLog();
  const host = await startGrpcHost(
    { listen: "127.0.0.1:0", warmSessions: 1, ...hostOptions, log },
    { middleware, runtimeFactory },
  );
  const address = `127.0.0.1:${host.port}`;
  const raw = rawClient(address);
  return {
    host,
    client: raw.client,
    log,
    address,
    async [Symbol.asyncDispose]() {
      raw.channel.close();
      await host.shutdown();
    },
  };
}

let faultRuntime: Promise<string> | undefined;

/**
 * A runtime directory (for `HostOptions.runtimeFiles`) whose `runtime.js` is the fault runtime of
 * `_fault_runtime.ts`, bundled on first use (~0.1 s), next to the production `runtime_main.js`
 * (unused) and `cell.js`; removed when the test process ends.
 */
export function faultRuntimeFiles(): Promise<string> {
  faultRuntime ??= (async () => {
    // Under the hosts' own parent, named like a host's runtime directory: a host started after
    // this process has gone removes it if the unload below did not run.
    const parent = hostTempParent();
    await Deno.mkdir(parent, { recursive: true, mode: 0o700 });
    const dir = await Deno.makeTempDir({ dir: parent, prefix: `r-${Deno.pid}-fault-` });
    globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
    const dist = new URL("../worker/dist/", import.meta.url);
    for (const name of ["runtime_main.js", "cell.js"]) {
      await Deno.copyFile(new URL(name, dist), `${dir}/${name}`);
    }
    const entry = new URL("./_fault_runtime.ts", import.meta.url).pathname;
    const result = await new Deno.Command(Deno.execPath(), {
      args: ["bundle", "--quiet", "--platform", "deno", "-o", `${dir}/runtime.js`, entry],
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!result.success) {
      throw new Error(`bundling the fault runtime failed:\n${new TextDecoder().decode(result.stderr)}`);
    }
    return dir;
  })();
  return faultRuntime;
}

/** Fires the fault armed in a session's fault runtime (`Faults.onSignal`). */
export function fireFault(h: TestHost, sessionId: string): void {
  Deno.kill(h.host.state.session(sessionId)!.runtimePid!, FAULT_SIGNAL);
}

/** An open session: its ID, its lease iterator and the events read so far. */
export interface OpenSession extends AsyncDisposable {
  id: string;
  opened: Msg;
  /** Reads the next lease event (rejects with the lease's final status). */
  next(): Promise<IteratorResult<Msg>>;
  /** Events already read. */
  events: Msg[];
  /**
   * Resolves `true` once an event read (by `next` or `pump`) matches `predicate`, at once if one
   * already did; `false` if none has after `ms` (default 5 s).
   */
  received(predicate: (event: Msg) => boolean, ms?: number): Promise<boolean>;
  /** Resolves with the lease's end: `undefined` for OK, else the ClientError. */
  end: Promise<ClientError | undefined>;
  /** Cancels the lease stream. */
  cancel(): void;
  /** Starts reading all events in the background (for `end`). */
  pump(): void;
}

/** Opens a session and reads `opened`. */
export async function openSession(
  client: RawClient,
  request: Msg = {},
  metadata?: Metadata,
): Promise<OpenSession> {
  const abort = new AbortController();
  const stream = client.openSession(request, { signal: abort.signal, metadata }) as AsyncIterable<Msg>;
  const iterator = stream[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done || !first.value.opened) throw new Error("lease did not start with opened");
  const events: Msg[] = [];
  const watchers = new Set<{ predicate: (event: Msg) => boolean; resolve: () => void }>();
  const record = (event: Msg) => {
    events.push(event);
    for (const w of watchers) if (w.predicate(event)) watchers.delete(w), w.resolve();
  };
  const end = Promise.withResolvers<ClientError | undefined>();
  let pumping = false;
  const session: OpenSession = {
    id: first.value.opened.sessionId,
    opened: first.value.opened,
    events,
    received: (predicate, ms = 5_000) => {
      if (events.some(predicate)) return Promise.resolve(true);
      const seen = new Promise<void>((resolve) => watchers.add({ predicate, resolve }));
      return settledWithin(seen, ms);
    },
    end: end.promise,
    next: async () => {
      const r = await iterator.next();
      if (!r.done) record(r.value);
      return r;
    },
    cancel: () => abort.abort(),
    pump: () => {
      if (pumping) return;
      pumping = true;
      (async () => {
        try {
          for (;;) {
            const r = await iterator.next();
            if (r.done) return end.resolve(undefined);
            record(r.value);
          }
        } catch (error) {
          end.resolve(error as ClientError);
        }
      })();
    },
    [Symbol.asyncDispose]() {
      abort.abort();
      return Promise.resolve();
    },
  };
  return session;
}

let executionCounter = 0;

/** Result of {@link execute}. */
export interface ExecuteResult {
  started: Msg;
  outcome: Msg;
}

/** Runs one Execute to its outcome. */
export async function execute(
  client: RawClient,
  sessionId: string,
  source: string,
  extra: Msg = {},
  options: { signal?: AbortSignal; metadata?: Metadata } = {},
): Promise<ExecuteResult> {
  const events: Msg[] = [];
  const request = {
    sessionId,
    executionId: `exec-${++executionCounter}-${crypto.randomUUID()}`,
    toolCallId: "call-1",
    source,
    yieldTimeMs: 10_000,
    ...extra,
  };
  for await (const event of client.execute(request, options) as AsyncIterable<Msg>) events.push(event);
  const started = events.find((e) => e.started)?.started;
  const outcome = events.find((e) => e.outcome)?.outcome;
  return { started, outcome };
}

/** The texts of an outcome's content items. */
export function texts(outcome: Msg): string[] {
  return (outcome.contentItems ?? []).map((i: Msg) =>
    i.text?.text ?? (i.image ? `[image ${i.image.imageUrl}]` : "?")
  );
}

/** Runs a cell and returns its texts, asserting it completed. */
export async function run(
  client: RawClient,
  sessionId: string,
  source: string,
): Promise<{ texts: string[]; error?: string; outcome: Msg }> {
  const { outcome } = await execute(client, sessionId, source);
  if (!outcome?.completed) throw new Error(`cell did not complete: ${JSON.stringify(outcome)}`);
  return { texts: texts(outcome), error: outcome.completed.errorText, outcome };
}

/** Catches a gRPC failure and returns its code and details. */
export async function grpcError(promise: Promise<unknown>): Promise<{ code: Status; details: string }> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ClientError) return { code: error.code, details: error.details };
    throw error;
  }
  throw new Error("expected a gRPC error");
}

/** Drains an async iterable into an array (for streaming calls expected to fail). */
export async function collect(stream: AsyncIterable<Msg>): Promise<Msg[]> {
  const out: Msg[] = [];
  for await (const item of stream) out.push(item);
  return out;
}

/** A cell that never settles but leaves its isolate idle: a stop confirms at once. */
export const FOREVER = "await new Promise(() => {})";

/**
 * A cell that yields its Execute, then spins in synchronous code until its runtime is restarted.
 * `yield_control()` checks the stop word after it writes the yield, so a Terminate that lands
 * in between (the cell's thread preempted after its write) would stop the cell there,
 * cooperatively; the `try` keeps such a cell spinning, so only a hard stop ends it.
 */
export const SPIN = "try { yield_control(); } catch {} while (true) {}";

/** Whether a process with this pid exists. */
export function processExists(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return !/^\d+ \(.*\) Z /.test(stat);
  } catch {
    return false;
  }
}

/** Resolves once the host has at least `n` observations in flight for the session. */
export function inFlight(h: TestHost, sessionId: string, n: number): Promise<boolean> {
  return eventually(() => (h.host.state.session(sessionId)?.inFlight ?? 0) >= n, 5_000);
}

/** Resolves once the lease has carried a notification with `text` (a barrier a cell can set). */
export function notified(s: OpenSession, text: string): Promise<boolean> {
  return eventually(() => s.events.some((e) => e.notification?.text === text), 5_000);
}

/**
 * Waits for an event with a bound: resolves `true` once `promise` settles, `false` if `ms` pass
 * first (never rejects). The test's own assertions then tell whether what it waited for came.
 */
export async function settledWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((resolve) => timer = setTimeout(() => resolve(false), ms));
  const settled = promise.then(() => true as const, () => true as const);
  try {
    return await Promise.race([settled, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `predicate` every 10 ms until it holds or `ms` pass. */
export async function eventually(predicate: () => boolean | Promise<boolean>, ms = 2_000): Promise<boolean> {
  const deadline = performance.now() + ms;
  while (performance.now() < deadline) {
    if (await predicate()) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return await predicate();
}

/** A `deno task serve` subprocess. */
export interface ServeProcess extends AsyncDisposable {
  child: Deno.ChildProcess;
  url: string;
  stdoutLines: string[];
  stderr(): string;
  /** Resolves once the process exited and both output streams were read to the end. */
  exited(): Promise<Deno.CommandStatus>;
}

const repoRoot = new URL("..", import.meta.url).pathname;

/** Starts `deno run cli/main.ts …` (what `deno task serve` runs) and reads its endpoint line. */
export async function serve(
  args: string[],
  options: { expectFailure?: boolean } = {},
): Promise<ServeProcess> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["task", "-q", "serve", ...args],
    cwd: repoRoot,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let stderrText = "";
  const stderrDone = (async () => {
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) stderrText += chunk;
  })();
  const stdoutLines: string[] = [];
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let url = "";
  const stdoutDone = (async () => {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += value;
      let at;
      while ((at = buffer.indexOf("\n")) >= 0) {
        stdoutLines.push(buffer.slice(0, at));
        buffer = buffer.slice(at + 1);
      }
    }
  })();
  if (!options.expectFailure) {
    const ok = await eventually(() => stdoutLines.length > 0, 20_000);
    if (!ok) throw new Error(`host did not print its endpoint: ${stderrText}`);
    url = stdoutLines[0];
  }
  return {
    child,
    url,
    stdoutLines,
    stderr: () => stderrText,
    exited: async () => {
      const status = await child.status;
      await stdoutDone;
      await stderrDone;
      return status;
    },
    async [Symbol.asyncDispose]() {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      await child.status;
      await stdoutDone;
      await stderrDone;
    },
  };
}

/** A self-signed certificate for localhost and 127.0.0.1, made with openssl. */
export async function selfSigned(dir: string): Promise<{ cert: string; key: string }> {
  const out = await new Deno.Command("openssl", {
    args: [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      `${dir}/key.pem`,
      "-out",
      `${dir}/cert.pem`,
      "-days",
      "1",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=DNS:localhost,IP:127.0.0.1",
    ],
    stdout: "null",
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return { cert: `${dir}/cert.pem`, key: `${dir}/key.pem` };
}

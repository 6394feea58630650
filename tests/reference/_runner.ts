/**
 * Runs one scenario on one host and transport and returns its normalised observation; keeps one
 * shared host process per kind and transport. Folder-private.
 *
 * - Shared hosts start on first use and are replaced when they exited or a scenario timed out on
 *   them; a scenario that needs its own process (a dying host, start-up flags, the V1 handshake)
 *   starts it through {@link Ctx.startHost}, which closes it afterwards.
 * - Every session a scenario opened is closed at its end (if the scenario did not), and the
 *   session's event logs are appended to the observation, complete and in arrival order.
 * - A scenario has {@link SCENARIO_TIMEOUT_MS}; at the deadline the observation records the
 *   timeout and the host is replaced.
 *
 * @module
 */
import {
  grpcParts,
  OpenFailure,
  openSession,
  type Outcome,
  type Session,
  type SessionOptions,
  V1Host,
} from "./_driver.ts";
import { HostProcess, type Kind, type Transport } from "./_hosts.ts";
import { type Json, normalise } from "./_observe.ts";

/** The time one side of one scenario may take. */
export const SCENARIO_TIMEOUT_MS = 45_000;

/** What a scenario gets. */
export interface Ctx {
  readonly kind: Kind;
  readonly transport: Transport;
  /** The shared host of this kind and transport (a new one after {@link replaceHost}). */
  readonly host: HostProcess;
  /** Replaces a shared host that a scenario broke (batteries go on with the next entry). */
  replaceHost(): Promise<HostProcess>;
  /** Opens a session on {@link host} (or on `on`), closed at the scenario's end. */
  open(options?: SessionOptions, on?: HostProcess): Promise<Session>;
  /** Records one step of the observation; an {@link Outcome} is recorded in its wire form. */
  rec(label: string, value: unknown): void;
  /** Resolves with the promise's value, or `"<no answer within N ms>"` (and records nothing). */
  within<T>(promise: Promise<T>, ms: number): Promise<T | string>;
  /** Starts a dedicated host (closed at the scenario's end). */
  startHost(extraArgs?: string[], transport?: Transport): Promise<HostProcess>;
  /** The V1 state of a host (hello done once per connection). */
  v1Of(host: HostProcess): V1Host;
}

/** A scenario: what it does with a context. */
export type ScenarioBody = (ctx: Ctx) => Promise<void>;

/** Records an outcome, a failure or any value in its wire form. */
export function wireOf(value: unknown): Json {
  if (value === undefined) return "<undefined>";
  if (value && typeof value === "object" && "wire" in value && "kind" in value) {
    return (value as Outcome).wire;
  }
  return value;
}

/** How {@link observe} runs a scenario. */
export interface ObserveOptions {
  /** Observe the raw wire (see `_observe.ts`). */
  raw?: boolean;
  /** Normalise each top-level step on its own (UUIDs numbered per step): battery entries. */
  perStep?: boolean;
  /** Close sessions at the end without recording their logs (default: record them). */
  noLogs?: boolean;
  /** The time this side may take (default {@link SCENARIO_TIMEOUT_MS}). */
  timeoutMs?: number;
}

/** Shared host processes. */
export class HostPool {
  #hosts = new Map<string, HostProcess>();
  #v1 = new WeakMap<HostProcess, V1Host>();
  #starting = new Map<string, Promise<HostProcess>>();

  async get(kind: Kind, transport: Transport): Promise<HostProcess> {
    const key = `${kind}/${transport}`;
    const current = this.#hosts.get(key);
    if (current && !current.broken) return current;
    if (current) await current.close(1000).catch(() => {});
    let starting = this.#starting.get(key);
    if (!starting) {
      starting = HostProcess.start(kind, transport);
      this.#starting.set(key, starting);
    }
    try {
      const host = await starting;
      this.#hosts.set(key, host);
      return host;
    } finally {
      this.#starting.delete(key);
    }
  }

  /** Stops and forgets a shared host (after a timeout). */
  async discard(host: HostProcess): Promise<void> {
    for (const [key, h] of this.#hosts) if (h === host) this.#hosts.delete(key);
    host.kill();
    await host.close(1000).catch(() => {});
  }

  v1Of(host: HostProcess): V1Host {
    let v1 = this.#v1.get(host);
    if (!v1) {
      v1 = new V1Host(host.v1!);
      this.#v1.set(host, v1);
    }
    return v1;
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.#hosts.values()].map((h) => h.close()));
    this.#hosts.clear();
  }
}

/**
 * Runs a scenario body on one side and returns the normalised observation.
 *
 * @param pool the shared hosts
 * @param kind which host
 * @param transport which transport
 * @param body the scenario
 * @returns the observation and the hosts' stderr tails (for failure messages)
 */
export async function observe(
  pool: HostPool,
  kind: Kind,
  transport: Transport,
  body: ScenarioBody,
  options: ObserveOptions = {},
): Promise<{ observation: Json; stderr: string }> {
  let host = await pool.get(kind, transport);
  const shared: HostProcess[] = [host];
  const steps: Json[] = [];
  const sessions: { session: Session; host: HostProcess }[] = [];
  const dedicated: HostProcess[] = [];
  const ctx: Ctx = {
    kind,
    transport,
    get host() {
      return host;
    },
    async replaceHost() {
      await pool.discard(host);
      host = await pool.get(kind, transport);
      shared.push(host);
      return host;
    },
    async open(options, on) {
      const target = on ?? host;
      const session = await openSession(
        target,
        target.transport === "v1" ? pool.v1Of(target) : undefined,
        options,
      );
      sessions.push({ session, host: target });
      return session;
    },
    rec(label, value) {
      steps.push({ [label]: wireOf(value) });
    },
    within(promise, ms) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve(`<no answer within ${ms} ms>`), ms);
      });
      return Promise.race([promise, late]).finally(() => clearTimeout(timer));
    },
    async startHost(extraArgs = [], t = transport) {
      const started = await HostProcess.start(kind, t, extraArgs);
      dedicated.push(started);
      return started;
    },
    v1Of: (h) => pool.v1Of(h),
  };
  let timedOut = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      timedOut = true;
      resolve();
    }, options.timeoutMs ?? SCENARIO_TIMEOUT_MS);
  });
  const run = (async () => {
    try {
      await body(ctx);
    } catch (error) {
      if (error instanceof OpenFailure) steps.push({ "open failed": error.wire ?? "<no answer>" });
      else steps.push({ "scenario threw": String((error as Error)?.stack ?? error).split("\n")[0] });
    }
    // Close what the scenario left open, then read the complete logs.
    for (const [index, { session, host: on }] of sessions.entries()) {
      if (on.broken) {
        // Nothing to close: what a client library says about the dead connection is not the host's.
        if (options.noLogs) continue;
        steps.push({ [`session ${index + 1} close`]: on.exited ? "<host exited>" : "<connection lost>" });
        if (session.transport === "v1") steps.push({ [`session ${index + 1} log`]: session.log() });
        continue;
      }
      const closed = await session.close().catch((e) => `close threw: ${(e as Error).message}`);
      if (session.transport !== "v1") await grpcParts(session).ended();
      if (options.noLogs) continue;
      steps.push({ [`session ${index + 1} close`]: closed });
      steps.push({ [`session ${index + 1} log`]: session.log() });
    }
  })();
  await Promise.race([run, deadline]);
  clearTimeout(timer);
  let stderr = shared.map((h) => h.stderr).join("\n--- replaced host ---\n");
  if (timedOut) {
    steps.push({
      timeout: `the scenario did not finish within ${options.timeoutMs ?? SCENARIO_TIMEOUT_MS} ms`,
    });
    for (const { session } of sessions) steps.push({ "log at timeout": session.log() });
    stderr = host.stderr;
    await pool.discard(host);
  }
  for (const h of dedicated) {
    stderr += `\n--- dedicated host ---\n${h.stderr}`;
    await h.close(2000).catch(() => {});
  }
  const observation = options.perStep
    ? steps.map((step) => normalise(step, options))
    : normalise(steps, options);
  return { observation, stderr: stderr.slice(-4000) };
}

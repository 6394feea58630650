/**
 * A guard against a Deno 2.9.6 crash in `node:http2` (denoland/deno#36788): a server session that
 * has served many streams, some of them cancelled by the client, can abort the whole process
 * inside nghttp2 (`find_stream_on_goaway_func: Assertion 'stream->closed_next == NULL'`, or a bare
 * SIGSEGV) when the client's GOAWAY arrives. A gRPC client sends GOAWAY whenever it closes its
 * channel, so without this guard any client closing its connection could take every session of the
 * host down with it.
 *
 * Measured here (a bare nice-grpc Health server; 8 cancelled `Watch` streams, a second of `Check`
 * calls, then `channel.close()`): the server died in 7 of 8 rounds; with the guard in 0 of 8.
 * Closing the socket without a GOAWAY (a killed or exiting client) never crashed it, and neither
 * did the server's own GOAWAY at shutdown.
 *
 * The guard sits between a server session's socket and nghttp2: Deno's `node:http2` feeds the
 * socket's `data` chunks to nghttp2 from JavaScript, so the guard re-registers that listener behind
 * a frame scanner that removes GOAWAY frames and passes every other byte through unchanged (the
 * same chunk objects when nothing is removed). A client's GOAWAY only says that it will open no
 * new streams and accepts no pushed ones; its streams in flight continue, and the connection's end
 * (which the client follows with) closes the session as before. Where the listener is not found
 * (another runtime or Deno version), sessions are left as they are.
 *
 * The same scanner caps a client's stream resets (HTTP/2 rapid reset, CVE-2023-44487): each
 * RST_STREAM a client sends for a stream it opened less than a second before takes a token from a
 * per-connection bucket ({@link ResetBudget}: a burst, refilled at a steady rate); resets of older
 * streams (a subscription or lease ended) are free. A client that finds the bucket empty gets GOAWAY
 * `ENHANCE_YOUR_CALM` and its connection is closed; the bytes after that RST_STREAM never reach
 * nghttp2, so the work one abusive connection causes is bounded by the burst. (nghttp2 has a cap
 * of its own, 1,000 resets then GOAWAY `INTERNAL_ERROR`; measured here, each reset stream costs the
 * host ~0.1 ms of CPU and ~12 KiB of garbage, so 20 connections at that cap took the host from 106
 * to 351 MiB until the next GC.)
 *
 * @module
 */
import http2 from "node:http2";
import { Buffer } from "node:buffer";
import process from "node:process";

const PREFACE_BYTES = 24; // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
const HEADER_BYTES = 9;
const GOAWAY = 0x7;
const RST_STREAM = 0x3;
/** RFC 9113 §7: the peer might be generating excessive load. */
const ENHANCE_YOUR_CALM = 0xb;
const HEADERS = 0x1;
/** Streams a {@link ResetBudget} remembers at most (an opener that never resets). */
const MAX_RECENT_STREAMS = 10_000;

/**
 * The rapid-reset account of one connection: a reset counts when its stream was opened less than
 * `prematureMs` before (Envoy's "premature reset"; a rapid reset resets every stream at once, a
 * client that cancels a subscription or a lease it has held for a while is not counted), and
 * counted resets take tokens from a bucket of `burst`, refilled at `perSecond`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ResetBudget } from "./http2_guard.ts";
 * let now = 0;
 * const budget = new ResetBudget(2, 1, { now: () => now });
 * for (const stream of [1, 3, 5]) budget.opened(stream);
 * assert.deepEqual([budget.reset(1), budget.reset(3), budget.reset(5)], [true, true, false]);
 * now = 1_000;
 * budget.opened(7);
 * assert.equal(budget.reset(7), true);
 * ```
 */
export class ResetBudget {
  #tokens: number;
  #burst: number;
  #perMs: number;
  #now: () => number;
  #at: number;
  #prematureMs: number;
  /** Streams opened within the last `prematureMs`, oldest first, with when. */
  #recent = new Map<number, number>();
  /**
   * The highest stream ID dropped from `#recent` for room while still young: a later reset of a stream
   * at or below it may be premature, and counts (stream IDs only grow on a connection), so that a
   * client cannot open {@link MAX_RECENT_STREAMS} streams ahead and reset each as it drops out.
   */
  #youngEvicted = 0;

  /**
   * @param burst counted resets allowed at once (the bucket's size)
   * @param perSecond counted resets regained per second
   * @param options `now`: a clock in ms (default `performance.now`); `prematureMs`: how young a
   *   stream's reset counts (default 1,000)
   */
  constructor(burst: number, perSecond: number, options: { now?: () => number; prematureMs?: number } = {}) {
    this.#tokens = this.#burst = burst;
    this.#perMs = perSecond / 1_000;
    this.#now = options.now ?? (() => performance.now());
    this.#prematureMs = options.prematureMs ?? 1_000;
    this.#at = this.#now();
  }

  /**
   * The client sent HEADERS on a stream (a new stream, or trailers: only the first is kept).
   *
   * @param stream the stream ID
   */
  opened(stream: number): void {
    const now = this.#now();
    for (const [id, at] of this.#recent) {
      const young = now - at < this.#prematureMs;
      if (young && this.#recent.size < MAX_RECENT_STREAMS) break;
      if (young) this.#youngEvicted = Math.max(this.#youngEvicted, id);
      this.#recent.delete(id);
    }
    if (!this.#recent.has(stream)) this.#recent.set(stream, now);
  }

  /**
   * The client reset a stream.
   *
   * @param stream the stream ID
   * @returns false when the reset was premature and the bucket is empty (a rapid reset)
   */
  reset(stream: number): boolean {
    const openedAt = this.#recent.get(stream);
    this.#recent.delete(stream);
    const now = this.#now();
    if (openedAt === undefined ? stream > this.#youngEvicted : now - openedAt >= this.#prematureMs) {
      return true;
    }
    this.#tokens = Math.min(this.#burst, this.#tokens + (now - this.#at) * this.#perMs);
    this.#at = now;
    if (this.#tokens < 1) return false;
    this.#tokens--;
    return true;
  }
}

/** What {@link goawayFilter} reports, and the reset budget it enforces. */
export interface GuardOptions {
  /** A client's GOAWAY was removed. */
  onGoaway?: () => void;
  /**
   * The client's HEADERS and RST_STREAM frames are reported to it (default: no cap). The first
   * refused reset ends the filter: nothing from that frame on is delivered, and `onResetFlood` is
   * called.
   */
  resets?: ResetBudget;
  /** The client exceeded `resets`; the owner ends the connection. */
  onResetFlood?: () => void;
}

/**
 * Scans the client-to-server byte stream of one HTTP/2 connection and forwards it without its
 * GOAWAY frames, and up to its first stream reset over budget. `deliver` receives what remains,
 * in order; chunks pass through as they came unless a GOAWAY is removed, a frame header straddles
 * two chunks, or the reset budget ran out.
 *
 * @param deliver receives the bytes to pass on
 * @param options callbacks and the reset budget (default: GOAWAY removal only)
 * @returns the function to feed each incoming chunk to
 */
export function goawayFilter(
  deliver: (chunk: Buffer) => void,
  options: GuardOptions = {},
): (chunk: Buffer) => void {
  const { onGoaway, resets, onResetFlood } = options;
  /** The reset budget ran out: everything from then on is dropped. */
  let flooded = false;
  /** Bytes still to pass through: the connection preface, then each frame's payload. */
  let pass = PREFACE_BYTES;
  /** Bytes of a GOAWAY frame still to drop. */
  let drop = 0;
  /** The start of a frame header that the previous chunk ended in. */
  let partial: Buffer | undefined;
  return (incoming) => {
    if (flooded) return;
    let chunk = incoming;
    if (partial) {
      chunk = Buffer.concat([partial, incoming]);
      partial = undefined;
    }
    let i = 0;
    /** Where the bytes not yet delivered begin. */
    let from = 0;
    while (i < chunk.length) {
      if (pass > 0) {
        const n = Math.min(pass, chunk.length - i);
        pass -= n;
        i += n;
        continue;
      }
      if (drop > 0) {
        const n = Math.min(drop, chunk.length - i);
        drop -= n;
        i += n;
        from = i;
        continue;
      }
      if (chunk.length - i < HEADER_BYTES) {
        // Hold the header back until its type is known.
        if (i > from) deliver(chunk.subarray(from, i));
        partial = Buffer.from(chunk.subarray(i));
        return;
      }
      const length = (chunk[i] << 16) | (chunk[i + 1] << 8) | chunk[i + 2];
      if (chunk[i + 3] === GOAWAY) {
        if (i > from) deliver(chunk.subarray(from, i));
        onGoaway?.();
        drop = HEADER_BYTES + length;
        continue;
      }
      if (resets !== undefined && (chunk[i + 3] === HEADERS || chunk[i + 3] === RST_STREAM)) {
        const stream = chunk.readUInt32BE(i + 5) & 0x7fff_ffff;
        if (chunk[i + 3] === HEADERS) resets.opened(stream);
        else if (!resets.reset(stream)) {
          if (i > from) deliver(chunk.subarray(from, i));
          flooded = true;
          onResetFlood?.();
          return;
        }
      }
      pass = length;
      i += HEADER_BYTES;
    }
    if (from === 0) deliver(chunk);
    else if (from < chunk.length) deliver(chunk.subarray(from));
  };
}

function ownSymbol(target: object, description: string): symbol | undefined {
  return Object.getOwnPropertySymbols(target).find((s) => s.description === description);
}

/** Options of {@link guardSession} and {@link withGoawayGuard}. */
export interface SessionGuardOptions {
  /** A client's GOAWAY was removed. */
  onGoaway?: () => void;
  /**
   * Premature stream resets (of streams under a second old) a client may send at once, per
   * connection; 0 = no cap of the guard's own
   * (default 0; the host passes `http2ResetBurst`).
   */
  resetBurst?: number;
  /** Resets regained per second after the burst (default 0; the host passes `http2ResetsPerSecond`). */
  resetsPerSecond?: number;
  /** A client ran out of resets and its connection was ended with GOAWAY `ENHANCE_YOUR_CALM`. */
  onResetFlood?: (remote: string) => void;
}

/**
 * Puts the guard's filter in front of one server session: client GOAWAYs removed, stream resets
 * capped (the session then ends with GOAWAY `ENHANCE_YOUR_CALM`).
 *
 * @param session a `node:http2` server session
 * @param options callbacks and the reset cap
 * @returns false where Deno's listener is not found (the session is left as it is)
 */
export function guardSession(session: http2.Http2Session, options: SessionGuardOptions = {}): boolean {
  const record = session as unknown as Record<symbol, unknown>;
  const listenerKey = ownSymbol(session, "socket-data-listener");
  const socketKey = ownSymbol(session, "socket");
  if (!listenerKey || !socketKey) return false;
  const listener = record[listenerKey];
  const socket = record[socketKey] as
    | {
      listeners(event: string): unknown[];
      off(e: string, l: unknown): void;
      on(e: string, l: unknown): void;
    }
    | undefined;
  if (typeof listener !== "function" || !socket?.listeners("data").includes(listener)) return false;
  const { resetBurst = 0, resetsPerSecond = 0 } = options;
  const filtered = goawayFilter(listener as (chunk: Buffer) => void, {
    onGoaway: options.onGoaway,
    resets: resetBurst > 0 ? new ResetBudget(resetBurst, resetsPerSecond) : undefined,
    onResetFlood: () => {
      const remote = `${session.socket?.remoteAddress ?? "?"}:${session.socket?.remotePort ?? "?"}`;
      try {
        session.goaway(ENHANCE_YOUR_CALM, 0, Buffer.from("too_many_resets"));
        session.destroy();
      } catch {
        // Already closed.
      }
      options.onResetFlood?.(remote);
    },
  });
  socket.off("data", listener);
  socket.on("data", filtered);
  const stopCoalescing = coalesceWrites(record[socketKey] as CorkableSocket);
  // A GOAWAY leaves on its own, after everything before it: Deno's HTTP/2 client (nghttp2) aborts
  // (`find_stream_on_goaway_func`) when the server's GOAWAY reaches it in one read with the frames
  // that close its streams (a drain's trailers and resets), which one writev per turn did.
  for (const method of ["close", "goaway", "destroy"] as const) {
    const real = (session as unknown as Record<string, (...args: unknown[]) => unknown>)[method];
    if (typeof real !== "function") continue;
    (session as unknown as Record<string, unknown>)[method] = function (this: unknown, ...args: unknown[]) {
      stopCoalescing();
      return real.apply(this, args);
    };
  }
  // Deno removes the listener it knows of when the session ends: let that be the filter.
  record[listenerKey] = filtered;
  return true;
}

/** The part of a `node:net` socket that {@link coalesceWrites} uses. */
export interface CorkableSocket {
  write(...args: unknown[]): boolean;
  cork(): void;
  uncork(): void;
}

/**
 * Gathers the frames that Deno's `node:http2` writes to a session's socket in one turn into one
 * `writev`: it writes each frame on its own (a 16 MiB message is 1,024 DATA frames of 16 KiB, one
 * `sendto` and one trip through the stream machinery each; a small unary response is three: its
 * headers, its message and its trailers). The first write of a turn corks the socket and the end
 * of the turn uncorks it (`process.nextTick`, twice: Deno writes a stream's DATA a tick after its
 * headers): one `writev` of everything written meanwhile (an Execute's headers and `started`).
 *
 * @param socket a server session's socket (left as it is when it cannot cork)
 * @returns stops coalescing (what is corked leaves now; every later write leaves on its own)
 */
export function coalesceWrites(socket: CorkableSocket): () => void {
  if (typeof socket?.cork !== "function" || typeof socket.uncork !== "function") return () => {};
  const write = socket.write;
  let corked = false;
  let stopped = false;
  const uncork = () => {
    if (!corked) return;
    corked = false;
    socket.uncork();
  };
  // One tick later than the first write's: a stream's DATA leaves in a tick of its own (Deno
  // defers it with `process.nextTick`), queued after the headers' write began the turn.
  const uncorkSoon = () => process.nextTick(uncork);
  socket.write = function (this: CorkableSocket, ...args: unknown[]) {
    if (!corked && !stopped) {
      corked = true;
      this.cork();
      process.nextTick(uncorkSoon);
    }
    return write.apply(this, args);
  };
  return () => {
    stopped = true;
    uncork();
  };
}

/** The options of every {@link withGoawayGuard} in progress (hosts may listen concurrently). */
const listening = new Set<SessionGuardOptions>();
let realCreateServer: ((...args: unknown[]) => http2.Http2Server) | undefined;

/**
 * Runs `listen` with every `node:http2` server created meanwhile guarded (grpc-js creates them
 * inside `listen`, out of reach otherwise). `http2.createServer` is wrapped while at least one
 * `listen` is in progress and restored after the last one settles. A server created while several
 * hosts listen at once reports to all of them and takes the first one's reset cap.
 *
 * @param listen starts the server
 * @param options callbacks and the reset cap of the sessions of the servers it creates
 * @returns what `listen` returns
 */
export async function withGoawayGuard<T>(
  listen: () => Promise<T>,
  options: SessionGuardOptions = {},
): Promise<T> {
  const module = http2 as unknown as { createServer: (...args: unknown[]) => http2.Http2Server };
  const entry = { ...options };
  listening.add(entry);
  if (realCreateServer === undefined) {
    const real = module.createServer;
    realCreateServer = real;
    module.createServer = (...args: unknown[]) => {
      const server = real(...args);
      const entries = [...listening];
      const guard: SessionGuardOptions = {
        resetBurst: entries[0]?.resetBurst,
        resetsPerSecond: entries[0]?.resetsPerSecond,
        onGoaway: () => {
          for (const e of entries) e.onGoaway?.();
        },
        onResetFlood: (remote) => {
          for (const e of entries) e.onResetFlood?.(remote);
        },
      };
      server.on("session", (session: http2.ServerHttp2Session) => guardSession(session, guard));
      return server;
    };
  }
  try {
    return await listen();
  } finally {
    listening.delete(entry);
    if (listening.size === 0 && realCreateServer !== undefined) {
      module.createServer = realCreateServer;
      realCreateServer = undefined;
    }
  }
}

/**
 * Every configurable limit of the host (SPEC §2.8), with the SPEC's defaults.
 *
 * @module
 */
import { getHeapStatistics } from "node:v8";
import { MAX_MEDIA_BYTES, MAX_MESSAGE_BYTES, MAX_TEXT_BYTES, MIB } from "../../proto/bytes.ts";

/**
 * The default of `hostBufferedBytes`: a quarter of this process's V8 heap limit (1,098,907,648 —
 * 1,048 MiB — for Deno 2.9.6's default 4,192 MiB on a 24 GiB machine; a quarter of
 * `--max-old-space-size` when the host is started with one), in whole MiB, at least 64 MiB. The
 * rest covers what delivery copies for a moment (an outcome rendered as strings, then encoded),
 * the host's own state, and the counted bytes held off the V8 heap (UTF-8 buffers).
 *
 * @returns bytes
 */
export function defaultHostBufferedBytes(): number {
  const quarter = Math.floor(getHeapStatistics().heap_size_limit / 4 / MIB) * MIB;
  return Math.max(64 * MIB, quarter);
}

/** All limits; see SPEC §2.8 for each meaning. Byte and count values are plain numbers. */
export interface Limits {
  /** gRPC max encoded message, both directions (67,108,864). */
  maxMessageBytes: number;
  /** Identifiers, namespaces and the route token, in UTF-8 bytes (256). */
  maxIdentifierBytes: number;
  /** Sessions open or opening on the host (256). */
  maxSessions: number;
  /** Host-wide request permits: OpenSession, Execute, Wait, Terminate (256). */
  maxInFlightRequests: number;
  /** Host-wide control permits: CloseSession, CompleteToolCall, … (256). */
  maxInFlightControlRequests: number;
  /** Host-wide cells from admission until their CellClosed (128). */
  maxActiveCells: number;
  /** Active cells per session (64). */
  maxActiveCellsPerSession: number;
  /** Host-wide outstanding tool invocations and notifications (1,024). */
  maxPendingDelegateCalls: number;
  /** The same, per session (256). */
  maxPendingDelegateCallsPerSession: number;
  /** Live SubscribeToToolCalls streams per session (128). */
  maxSubscriptionsPerSession: number;
  /** Filters per subscription (64). */
  maxToolFilters: number;
  /** Remembered execution/wait/invocation IDs per session and kind (4,096). */
  maxRecentIds: number;
  /** Buffered ToolCalls per subscription (128). */
  subscriptionQueueCapacity: number;
  /** Buffered SessionEvents per session (2,304). */
  leaseEventQueueCapacity: number;
  /** Cell closures remembered before their admission (128). */
  maxClosuresBeforeAdmission: number;
  /** Buffered events per Execute stream (2). */
  executeStreamBuffer: number;
  /** Close a session idle this long; 0 turns it off (0). */
  idleSessionTimeoutMs: number;
  /** Interval of the server's HTTP/2 keep-alive PINGs (30,000). */
  serverKeepaliveTimeMs: number;
  /** Wait for a PING acknowledgement before closing the connection (10,000). */
  serverKeepaliveTimeoutMs: number;
  /** Execute yield time when `yield_time_ms` is absent (10,000). */
  defaultExecYieldTimeMs: number;
  /** Server-mode token budget when `max_output_tokens` is absent (10,000). */
  defaultMaxOutputTokens: number;
  /** Server mode: retained text per observation (1,048,576). */
  boundedOutputMaxTextBytes: number;
  /** Server mode: retained image/audio URL bytes per observation (16,777,216). */
  boundedOutputMaxImageBytes: number;
  /** Server mode: cap on `error_text` (65,536). */
  maxDiagnosticBytes: number;
  /** Per-cell output credit in events (128). */
  outputEventQueueCapacity: number;
  /** Per-cell output credit in bytes (2,097,152). */
  outputEventQueueBytes: number;
  /** Stored values per session: key bytes plus JSON text bytes (67,108,864). */
  maxStoredValueBytes: number;
  /**
   * The host-wide memory budget: output buffered until a harness reads it and stored values, of
   * every session, in bytes; each session holds at most its share (`memory_budget.ts`). Output
   * past it is refused with a notice, a commit past it fails. 0 turns it off (a quarter of the
   * host's V8 heap limit: {@link defaultHostBufferedBytes}).
   */
  hostBufferedBytes: number;
  /** Internal frame limit: 64 MiB + 1 MiB headroom (68,157,440). */
  maxWorkerFrameBytes: number;
  /** Decoded, undispatched frames the host holds per session (128). */
  workerInboundFrameCapacity: number;
  /** Per-cell V8 heap limit when the session did not ask (1 GiB). */
  defaultMaxHeapSizeBytes: number;
  /** Smallest accepted `max_heap_size_bytes` (16 MiB). */
  minHeapSizeBytes: number;
  /**
   * V8 old-space limit, MiB, of each runtime, as a V8 flag; 0 = no flag (default 0, SPEC: 512).
   * On Deno 2.9.6 the flag also replaces every cell's own heap limit, so it is off by default.
   */
  workerMainHeapMb: number;
  /** How long a stopping cell may take to confirm before a runtime restart (100). */
  cooperativeStopMs: number;
  /**
   * Resident memory bound of each runtime's process tree, MiB; a runtime above it is killed and its
   * session crashes (SPEC §3.5). Bounds what the V8 heap limit does not: typed arrays, Wasm
   * memories, native buffers. 0 turns it off (2,048).
   */
  runtimeMemoryMb: number;
  /**
   * CPU bound of an idle runtime, % of one core: a session runtime whose process tree uses at least
   * this much in each of four 200 ms samples in a row (and 300 ms of CPU over them) while none of its session's cells runs (a
   * Worker thread a completed cell left spinning, which Deno cannot stop) is replaced from the warm
   * pool; the session and its stored values stay. 0 turns it off (10).
   */
  runtimeIdleCpuPercent: number;
  /**
   * A session with no live cell this long gives its runtime back (stopped; the host keeps its
   * stored values, cells and lease), and its next cell takes a ready runtime from the warm pool,
   * with the session's settings and stored values replayed. 0 keeps every session's runtime for
   * its whole life (60,000).
   */
  idleRuntimeReleaseMs: number;
  /**
   * A session that needs a runtime takes the runtime of the session idle the longest (no live
   * cell) before a warm one, and that session's next cell takes one in turn: a runtime serves
   * sessions one after another, never two at once. 1: among the sessions of one client (one
   * connection of the gRPC door; every session behind a stdio door or in an embedding program);
   * 2: among all sessions of the host; 0: every session's runtime serves that session alone (0;
   * `deno task serve` makes it 1 unless set, 0 with `--route-token` or `mcp+http`).
   */
  runtimeHandover: number;
  /** Pre-spawned idle session runtimes (2): the warm pool's floor (`--warm-sessions`). */
  warmSessionWorkers: number;
  /**
   * The most warm runtimes a burst of acquisitions (OpenSession, turns after an idle release) grows
   * the pool to, from the recent rate (`warm_pool.ts`); back to the floor once the burst has passed
   * for 2 s. At or below the floor: no growth (16).
   */
  warmRuntimesMax: number;
  /** Runtime spawns a growing warm pool has starting at once; 0 = the number of cores (0). */
  runtimeSpawnConcurrency: number;
  /** Runtime stderr kept for diagnostics (65,536). */
  stderrTailBytes: number;
  /** Graceful-shutdown deadline, including stopping the runtimes (10,000). */
  shutdownGraceMs: number;
  /** Wait between stdin close, SIGTERM and SIGKILL (2,000). */
  workerKillGraceMs: number;
  /**
   * A session runtime with cells running that leaves a liveness ping unanswered this long is
   * killed and its session reported crashed, `session runtime stopped responding` (5,000; 0 = no
   * pings). Its main thread answers at once even while a cell spins (cells run in threads of
   * their own), so this only has to outlast a host or runtime stalled by load.
   */
  runtimeUnresponsiveMs: number;
  /**
   * Premature HTTP/2 stream resets (RST_STREAM of a stream opened under a second before) a client
   * may send at once on one connection; past it, the connection ends with GOAWAY
   * `ENHANCE_YOUR_CALM` (rapid reset, CVE-2023-44487). 0 = no cap of the host's own (200).
   */
  http2ResetBurst: number;
  /** Premature resets a connection regains per second after its burst (33, nghttp2's own rate). */
  http2ResetsPerSecond: number;
}

/** The SPEC §2.8 defaults. */
export const DEFAULT_LIMITS: Readonly<Limits> = Object.freeze({
  maxMessageBytes: MAX_MESSAGE_BYTES,
  maxIdentifierBytes: 256,
  maxSessions: 256,
  maxInFlightRequests: 256,
  maxInFlightControlRequests: 256,
  maxActiveCells: 128,
  maxActiveCellsPerSession: 64,
  maxPendingDelegateCalls: 1_024,
  maxPendingDelegateCallsPerSession: 256,
  maxSubscriptionsPerSession: 128,
  maxToolFilters: 64,
  maxRecentIds: 4_096,
  subscriptionQueueCapacity: 128,
  leaseEventQueueCapacity: 2_304,
  maxClosuresBeforeAdmission: 128,
  executeStreamBuffer: 2,
  idleSessionTimeoutMs: 0,
  serverKeepaliveTimeMs: 30_000,
  serverKeepaliveTimeoutMs: 10_000,
  defaultExecYieldTimeMs: 10_000,
  defaultMaxOutputTokens: 10_000,
  boundedOutputMaxTextBytes: MAX_TEXT_BYTES,
  boundedOutputMaxImageBytes: MAX_MEDIA_BYTES,
  maxDiagnosticBytes: 65_536,
  outputEventQueueCapacity: 128,
  outputEventQueueBytes: 2_097_152,
  maxStoredValueBytes: MAX_MESSAGE_BYTES,
  hostBufferedBytes: defaultHostBufferedBytes(),
  // A largest message plus a mebibyte of envelope (68,157,440).
  maxWorkerFrameBytes: MAX_MESSAGE_BYTES + MIB,
  workerInboundFrameCapacity: 128,
  defaultMaxHeapSizeBytes: 1_073_741_824,
  minHeapSizeBytes: 16_777_216,
  workerMainHeapMb: 0,
  cooperativeStopMs: 100,
  runtimeMemoryMb: 2_048,
  runtimeIdleCpuPercent: 10,
  idleRuntimeReleaseMs: 60_000,
  runtimeHandover: 0,
  warmSessionWorkers: 2,
  warmRuntimesMax: 16,
  runtimeSpawnConcurrency: 0,
  stderrTailBytes: 65_536,
  shutdownGraceMs: 10_000,
  workerKillGraceMs: 2_000,
  runtimeUnresponsiveMs: 5_000,
  http2ResetBurst: 200,
  http2ResetsPerSecond: 33,
});

/**
 * Applies `NAME=VALUE` overrides (CLI `--limit`) to the defaults and checks the start-up rules.
 *
 * @param overrides partial limits or `NAME=VALUE` strings
 * @returns the complete limits
 * @throws {RangeError} for an unknown name, a value that is not a non-negative integer, or a
 *   combination SPEC §2.8 forbids at start-up
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(resolveLimits(["maxSessions=2"]).maxSessions, 2);
 * assert.throws(() => resolveLimits(["nope=1"]), RangeError);
 * ```
 */
export function resolveLimits(overrides: Partial<Limits> | string[] = {}): Limits {
  const limits: Limits = { ...DEFAULT_LIMITS };
  const entries: [string, unknown][] = Array.isArray(overrides)
    ? overrides.map((text) => {
      const at = text.indexOf("=");
      if (at <= 0) throw new RangeError(`invalid --limit \`${text}\`; expected NAME=VALUE`);
      return [text.slice(0, at), Number(text.slice(at + 1))];
    })
    : Object.entries(overrides);
  for (const [name, value] of entries) {
    if (!Object.hasOwn(DEFAULT_LIMITS, name)) throw new RangeError(`unknown limit \`${name}\``);
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`limit ${name} must be a non-negative integer`);
    }
    limits[name as keyof Limits] = value;
  }
  if (limits.maxWorkerFrameBytes < limits.maxMessageBytes + MIB) {
    throw new RangeError(
      `limit maxWorkerFrameBytes ${limits.maxWorkerFrameBytes} is smaller than maxMessageBytes + 1048576`,
    );
  }
  if (limits.maxStoredValueBytes > limits.maxMessageBytes) {
    throw new RangeError(
      `limit maxStoredValueBytes ${limits.maxStoredValueBytes} exceeds maxMessageBytes ${limits.maxMessageBytes}`,
    );
  }
  if (limits.runtimeHandover > 2) {
    throw new RangeError(`limit runtimeHandover must be 0, 1 or 2, not ${limits.runtimeHandover}`);
  }
  return limits;
}

/**
 * Every configurable limit of the host (SPEC §2.8), with the SPEC's defaults.
 *
 * @module
 */

/** All limits; see SPEC §2.8 for each meaning. Byte and count values are plain numbers. */
export interface Limits {
  maxMessageBytes: number;
  maxIdentifierBytes: number;
  maxSessions: number;
  maxInFlightRequests: number;
  maxInFlightControlRequests: number;
  maxActiveCells: number;
  maxActiveCellsPerSession: number;
  maxPendingDelegateCalls: number;
  maxPendingDelegateCallsPerSession: number;
  maxSubscriptionsPerSession: number;
  maxToolFilters: number;
  maxRecentIds: number;
  subscriptionQueueCapacity: number;
  leaseEventQueueCapacity: number;
  maxClosuresBeforeAdmission: number;
  executeStreamBuffer: number;
  idleSessionTimeoutMs: number;
  serverKeepaliveTimeMs: number;
  serverKeepaliveTimeoutMs: number;
  defaultExecYieldTimeMs: number;
  defaultMaxOutputTokens: number;
  boundedOutputMaxTextBytes: number;
  boundedOutputMaxImageBytes: number;
  maxDiagnosticBytes: number;
  outputEventQueueCapacity: number;
  outputEventQueueBytes: number;
  maxStoredValueBytes: number;
  maxWorkerFrameBytes: number;
  workerInboundFrameCapacity: number;
  defaultMaxHeapSizeBytes: number;
  minHeapSizeBytes: number;
  workerMainHeapMb: number;
  cooperativeStopMs: number;
  warmSessionWorkers: number;
  stderrTailBytes: number;
  shutdownGraceMs: number;
  workerKillGraceMs: number;
}

/** The SPEC §2.8 defaults. */
export const DEFAULT_LIMITS: Readonly<Limits> = Object.freeze({
  maxMessageBytes: 67_108_864,
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
  boundedOutputMaxTextBytes: 1_048_576,
  boundedOutputMaxImageBytes: 16_777_216,
  maxDiagnosticBytes: 65_536,
  outputEventQueueCapacity: 128,
  outputEventQueueBytes: 2_097_152,
  maxStoredValueBytes: 67_108_864,
  maxWorkerFrameBytes: 68_157_440,
  workerInboundFrameCapacity: 128,
  defaultMaxHeapSizeBytes: 1_073_741_824,
  minHeapSizeBytes: 16_777_216,
  workerMainHeapMb: 512,
  cooperativeStopMs: 100,
  warmSessionWorkers: 2,
  stderrTailBytes: 65_536,
  shutdownGraceMs: 10_000,
  workerKillGraceMs: 2_000,
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
  if (limits.maxWorkerFrameBytes < limits.maxMessageBytes + 1_048_576) {
    throw new RangeError(
      `limit maxWorkerFrameBytes ${limits.maxWorkerFrameBytes} is smaller than maxMessageBytes + 1048576`,
    );
  }
  if (limits.maxStoredValueBytes > limits.maxMessageBytes) {
    throw new RangeError(
      `limit maxStoredValueBytes ${limits.maxStoredValueBytes} exceeds maxMessageBytes ${limits.maxMessageBytes}`,
    );
  }
  return limits;
}

/**
 * What a public session needs from its provider: the opening of bindings (SPEC §10.4), the clock
 * of its deadlines and the transport deadline. The provider implements it, and the session knows
 * only this interface, so the two files do not import each other.
 *
 * @module
 */
import type { Binding } from "./binding.ts";
import type { Clock, CodeModeOutputTruncation, CodeModeSessionOptions } from "./types.ts";

/** What opening a binding needs from the public session. */
export interface OpeningRequest {
  /** The mode to ask for: the requested one first, the pinned one later. */
  mode: CodeModeOutputTruncation;
  /** Set once the first binding selected a mode: `mode` is then the one it must keep. */
  pinned: boolean;
  /** The cell limits sent with OpenSession. */
  limits: CodeModeSessionOptions["cellExecutionLimits"];
  /** OpenSession's `max_pending_delegate_calls` (default 4096). */
  maxPendingDelegateCalls?: number;
  /** Aborts the opening (the session's shutdown). */
  signal?: AbortSignal;
}

/** Opens bindings for a public session; implemented by `GrpcCodeModeSessionProvider`. */
export interface BindingOpener {
  /** The time source of the session's deadlines. */
  readonly clock: Clock;
  /** The deadline of transport-level operations, in milliseconds. */
  readonly transportTimeoutMs: number;
  /**
   * Opens a binding: a new generation, admission retry, mode pinning, subscription.
   *
   * @param request the mode to ask for, and whether it is pinned
   * @returns the live binding and the mode its host selected
   * @throws {CodeModeError} the opening failure
   */
  openBinding(request: OpeningRequest): Promise<{ binding: Binding; mode: CodeModeOutputTruncation }>;
}

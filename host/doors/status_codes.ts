/**
 * The gRPC status code of each domain error code (SPEC §2.7), shared by every front door: the gRPC
 * door sends it as the status, the embedded provider (`embedded.ts`) puts it in the client
 * library's `CodeModeError.grpcCode`, so a harness sees the same code through either. Plain numbers
 * (the gRPC code numbers), so no transport library is needed to read them.
 *
 * @module
 */
import type { HostErrorCode } from "../core/errors.ts";

/** The gRPC status number of each domain code. */
export const GRPC_CODE_OF: Readonly<Record<HostErrorCode, number>> = {
  invalid_request: 3, // INVALID_ARGUMENT
  unknown_session: 5, // NOT_FOUND
  unknown_invocation: 5, // NOT_FOUND
  id_reused: 6, // ALREADY_EXISTS
  session_exists: 6, // ALREADY_EXISTS
  overloaded: 8, // RESOURCE_EXHAUSTED
  too_large: 8, // RESOURCE_EXHAUSTED
  lease_overflow: 8, // RESOURCE_EXHAUSTED
  shutting_down: 14, // UNAVAILABLE
  session_closed: 1, // CANCELLED
  cancelled: 1, // CANCELLED
  cell_busy: 9, // FAILED_PRECONDITION
  unsupported: 9, // FAILED_PRECONDITION
  catalog: 9, // FAILED_PRECONDITION (as Codex's own host answers)
  session_crashed: 13, // INTERNAL
  runtime_failed: 13, // INTERNAL
  internal: 13, // INTERNAL
};

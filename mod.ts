/**
 * code-mode-host: a Deno-native sandbox host for code-mode cells, wire-compatible with Codex's
 * `codex.code_mode.v1.CodeModeHost` gRPC protocol.
 *
 * ```ts
 * import { createHost } from "./mod.ts";
 * await using host = await createHost({ listen: "127.0.0.1:0" });
 * console.log(host.url); // http://127.0.0.1:<port>
 * ```
 *
 * The TypeScript client library (`GrpcCodeModeSessionProvider`) will be exported from here too.
 *
 * @module
 */
export {
  createHost,
  type Host,
  type HostOptions,
  type HostState,
  type RuntimeTestHook,
} from "./host/server.ts";
export { DEFAULT_LIMITS, type Limits, resolveLimits } from "./host/limits.ts";
export { CodeModeError, type CodeModeErrorCode } from "./host/errors.ts";
export { normalizeCodeModeIdentifier } from "./host/identifiers.ts";
export { type LogFields, Logger, type LogLevel } from "./host/log.ts";
export { type Clock, realClock } from "./host/clock.ts";

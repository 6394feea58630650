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
 * The TypeScript client library (SPEC §10) opens sessions on a host with Codex's recovery rules:
 *
 * ```ts
 * import { createHost, GrpcCodeModeSessionProvider, NoopCodeModeSessionDelegate } from "./mod.ts";
 * await using host = await createHost({ listen: "127.0.0.1:0" });
 * await using session = await new GrpcCodeModeSessionProvider(host.url).createSession();
 * const cell = await session.execute(
 *   { toolCallId: "call-1", enabledTools: [], source: 'text("hi")' },
 *   new NoopCodeModeSessionDelegate(),
 * );
 * console.log(await cell.initialResponse()); // { type: "result", cellId: "1", contentItems: [...] }
 * ```
 *
 * @module
 */
export { createHost, type Host, type HostOptions } from "./host/doors/grpc/server.ts";
export type { EngineOptions, Isolation } from "./host/assemble.ts";
export type { TraceExportOptions } from "./host/ops/telemetry.ts";
export { InProcessCodeModeSessionProvider, type InProcessProviderOptions } from "./embedded/provider.ts";
// The MCP front door's listeners and its upstream tool bridge (a delegate that forwards cells' calls to MCP
// servers).
export {
  McpConfigError,
  type McpHttpHost,
  type McpHttpOptions,
  type McpHttpServerConfig,
  type McpIo,
  type McpNamespace,
  type McpServeOptions,
  type McpServerConfig,
  type McpServersConfig,
  type McpStdioServerConfig,
  McpToolBridge,
  type McpToolBridgeOptions,
  parseMcpConfig,
  readMcpConfig,
  serveMcpHttp,
  serveMcpStdio,
} from "./mcp/mod.ts";
export { DEFAULT_LIMITS, type Limits, resolveLimits } from "./host/core/limits.ts";
export { CodeModeError, type CodeModeErrorCode } from "./proto/errors.ts";
export { type LogFields, Logger, type LogLevel } from "./host/ops/log.ts";
export { GrpcCodeModeSessionProvider, type ProviderOptions } from "./client/provider.ts";
export {
  ProcessOwnedGrpcCodeModeSessionProvider,
  type ProcessOwnedProviderOptions,
} from "./client/process_provider.ts";
export { GrpcCodeModeSession, NoopCodeModeSessionDelegate } from "./client/session.ts";
export { realClock } from "./proto/clock.ts";
export { RESET_MESSAGE } from "./client/status_text.ts";
// The harness kit of SPEC §11 (client/harness/mod.ts holds an index of what each export is).
export * from "./client/harness/mod.ts";
export type {
  Clock,
  CodeModeOutputTruncation,
  CodeModeSession,
  CodeModeSessionDelegate,
  CodeModeSessionOptions,
  CodeModeSessionProvider,
  CodeModeToolCall,
  ExecuteRequest,
  FunctionCallOutputContentItem,
  RuntimeResponse,
  StartedCell,
  ToolDefinition,
  WaitOutcome,
  WaitRequest,
} from "./client/types.ts";

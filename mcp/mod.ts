/**
 * The MCP front door (`--listen mcp+stdio`, `--listen mcp+http://IP:PORT`) and the upstream MCP
 * tool bridge (`--mcp-config`).
 *
 * @module
 */
export {
  McpConfigError,
  type McpHttpServerConfig,
  type McpServerConfig,
  type McpServersConfig,
  type McpStdioServerConfig,
  parseMcpConfig,
  readMcpConfig,
} from "./config.ts";
export { type McpConnection, McpFrontDoor, type McpFrontDoorOptions } from "./door.ts";
export { type McpNamespace, McpToolBridge, type McpToolBridgeOptions } from "./upstream.ts";
export {
  type McpHttpHost,
  type McpHttpOptions,
  type McpIo,
  type McpServeOptions,
  serveMcpHttp,
  serveMcpStdio,
} from "./serve.ts";
export { BoundedStdioServerTransport, MCP_MAX_MESSAGE_BYTES } from "./stdio_transport.ts";

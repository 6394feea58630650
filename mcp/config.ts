/**
 * `--mcp-config FILE`: the upstream MCP servers, in the format desktop MCP clients share,
 * `{"mcpServers": {name: {command, args?, env?, cwd?} | {url, headers?}}}`.
 *
 * - A server with `command` is a child process spoken to over its stdin/stdout; one with `url`
 *   is reached over Streamable HTTP. An optional `type` (`stdio`, `http` or `streamable-http`,
 *   as some clients write it) must agree with the fields; `sse` is not supported.
 * - A stdio server's `cwd` defaults to the directory of the config file, so that relative paths
 *   in `args` work wherever the host is started; a relative `cwd` is relative to that directory.
 * - Every problem is a {@link McpConfigError} naming the file, the server and the field.
 *
 * @module
 */
import { dirname, isAbsolute, resolve } from "node:path";

/** An upstream server started as a child process (stdio transport). */
export interface McpStdioServerConfig {
  /** The executable. */
  command: string;
  /** Its arguments (default none). */
  args: string[];
  /** Environment added to the SDK's safe default environment (default none). */
  env: Record<string, string>;
  /** The working directory (default the config file's directory). */
  cwd?: string;
}

/** An upstream server reached over Streamable HTTP. */
export interface McpHttpServerConfig {
  /** The endpoint, e.g. `http://127.0.0.1:3000/mcp`. */
  url: string;
  /** Headers sent with every request, e.g. `Authorization` (default none). */
  headers: Record<string, string>;
}

/** One upstream server. */
export type McpServerConfig = McpStdioServerConfig | McpHttpServerConfig;

/** The upstream servers by name, in the file's order. */
export type McpServersConfig = Record<string, McpServerConfig>;

/** A config file that cannot be used, with a message naming the file, server and field. */
export class McpConfigError extends Error {
  /** Always `McpConfigError`. */
  override name = "McpConfigError";
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function stringMap(value: unknown, where: string): Record<string, string> {
  if (value === undefined) return {};
  if (!isRecord(value) || !Object.values(value).every((v) => typeof v === "string")) {
    throw new McpConfigError(`${where} must be an object of strings`);
  }
  return value as Record<string, string>;
}

/**
 * Validates the parsed content of a config file.
 *
 * @param json the parsed JSON
 * @param options `source` names the file in messages (default `MCP config`); `baseDir` is where
 *   relative working directories start (default the current directory)
 * @returns the servers by name
 * @throws {McpConfigError} for anything but the format above
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const servers = parseMcpConfig(
 *   { mcpServers: { notes: { command: "notes-mcp", args: ["--ro"] }, web: { url: "http://127.0.0.1:9/mcp" } } },
 *   { baseDir: "/srv" },
 * );
 * assert.deepEqual(servers.notes, { command: "notes-mcp", args: ["--ro"], env: {}, cwd: "/srv" });
 * assert.deepEqual(servers.web, { url: "http://127.0.0.1:9/mcp", headers: {} });
 * assert.throws(() => parseMcpConfig({ mcpServers: { x: {} } }), /needs exactly one of `command` and `url`/);
 * ```
 */
export function parseMcpConfig(
  json: unknown,
  options: { source?: string; baseDir?: string } = {},
): McpServersConfig {
  const source = options.source ?? "MCP config";
  const baseDir = options.baseDir ?? Deno.cwd();
  if (!isRecord(json) || !isRecord(json.mcpServers)) {
    throw new McpConfigError(`${source} must be a JSON object with an object \`mcpServers\``);
  }
  const servers: McpServersConfig = {};
  for (const [name, entry] of Object.entries(json.mcpServers)) {
    const where = `${source}: server \`${name}\``;
    if (name.trim() === "") throw new McpConfigError(`${source}: a server name is empty`);
    if (!isRecord(entry)) throw new McpConfigError(`${where} must be an object`);
    const type = entry.type;
    if (type !== undefined && !["stdio", "http", "streamable-http"].includes(type as string)) {
      throw new McpConfigError(
        `${where}: \`type\` ${JSON.stringify(type)} is not supported (stdio, http or streamable-http)`,
      );
    }
    const hasCommand = entry.command !== undefined;
    const hasUrl = entry.url !== undefined;
    if (hasCommand === hasUrl) {
      throw new McpConfigError(`${where} needs exactly one of \`command\` and \`url\``);
    }
    if (hasCommand) {
      if (type !== undefined && type !== "stdio") {
        throw new McpConfigError(`${where}: \`type\` ${JSON.stringify(type)} does not go with \`command\``);
      }
      if (typeof entry.command !== "string" || entry.command === "") {
        throw new McpConfigError(`${where}: \`command\` must be a non-empty string`);
      }
      const args = entry.args ?? [];
      if (!Array.isArray(args) || !args.every((a) => typeof a === "string")) {
        throw new McpConfigError(`${where}: \`args\` must be an array of strings`);
      }
      if (entry.cwd !== undefined && typeof entry.cwd !== "string") {
        throw new McpConfigError(`${where}: \`cwd\` must be a string`);
      }
      const cwd = entry.cwd === undefined
        ? baseDir
        : isAbsolute(entry.cwd as string)
        ? entry.cwd as string
        : resolve(baseDir, entry.cwd as string);
      servers[name] = { command: entry.command, args, env: stringMap(entry.env, `${where}: \`env\``), cwd };
    } else {
      if (type === "stdio") throw new McpConfigError(`${where}: \`type\` "stdio" does not go with \`url\``);
      let url: URL;
      try {
        url = new URL(entry.url as string);
      } catch {
        throw new McpConfigError(`${where}: \`url\` must be an http or https URL`);
      }
      if (url.protocol !== "http:" && url.protocol !== "https:") {
        throw new McpConfigError(`${where}: \`url\` must be an http or https URL`);
      }
      servers[name] = {
        url: entry.url as string,
        headers: stringMap(entry.headers, `${where}: \`headers\``),
      };
    }
  }
  return servers;
}

/**
 * Reads and validates a config file; relative working directories start at the file's directory.
 *
 * @param path the file
 * @returns the servers by name
 * @throws {McpConfigError} when the file cannot be read, is not JSON, or is not the format above
 */
export async function readMcpConfig(path: string): Promise<McpServersConfig> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    throw new McpConfigError(`failed to read --mcp-config ${path}: ${(error as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new McpConfigError(`--mcp-config ${path} is not valid JSON: ${(error as Error).message}`);
  }
  return parseMcpConfig(json, { source: `--mcp-config ${path}`, baseDir: dirname(resolve(path)) });
}

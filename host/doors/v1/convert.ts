/**
 * The wire forms of JSON "host V1" (SPEC §9.10) and their conversion to and from the core's
 * types: strict parsers (unknown fields are rejected everywhere) for what the client sends, and
 * builders for what the host sends. Nothing here does I/O.
 *
 * @module
 */
import type {
  ContentItem,
  ExecuteRequest,
  ExecutionOutcome,
  ObservationResult,
  ToolCall,
  ToolDefinition,
} from "../../core/code_mode_core.ts";
import { TOOL_KIND_FREEFORM, TOOL_KIND_FUNCTION } from "../../core/code_mode_core.ts";

/** The capabilities this host knows. */
export const KNOWN_CAPABILITIES = ["session-cell-execution-resource-limits", "yield-observation"] as const;
/** `session-cell-execution-resource-limits`. */
export const CAP_LIMITS = KNOWN_CAPABILITIES[0];
/** `yield-observation`. */
export const CAP_YIELD = KNOWN_CAPABILITIES[1];

/** A message that breaks the wire rules; its message says which. */
export class WireError extends Error {
  override name = "WireError";
}

type Json = Record<string, unknown>;

function object(value: unknown, what: string): Json {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new WireError(`${what} must be an object`);
  }
  return value as Json;
}

/** Checks that `value` has only `allowed` fields and every `required` one. */
function fields(value: Json, what: string, required: readonly string[], optional: readonly string[] = []) {
  for (const key of Object.keys(value)) {
    if (!required.includes(key) && !optional.includes(key)) {
      throw new WireError(`unknown field \`${key}\` in ${what}`);
    }
  }
  for (const key of required) {
    if (!(key in value)) throw new WireError(`missing field \`${key}\` in ${what}`);
  }
}

function string(value: unknown, what: string): string {
  if (typeof value !== "string") throw new WireError(`${what} must be a string`);
  return value;
}

function integer(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value)) {
    throw new WireError(`${what} must be an integer`);
  }
  return value;
}

function unsigned(value: unknown, what: string): bigint {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
    throw new WireError(`${what} must be a non-negative integer`);
  }
  return BigInt(value);
}

/** `connection/hello`, validated. */
export interface Hello {
  supportedVersions: number[];
  requiredCapabilities: string[];
  optionalCapabilities: string[];
}

function distinctStrings(value: unknown, what: string): string[] {
  if (!Array.isArray(value)) throw new WireError(`${what} must be an array`);
  const seen = new Set<string>();
  for (const item of value) {
    if (typeof item !== "string" || item.trim() === "") {
      throw new WireError(`${what} must hold non-blank strings`);
    }
    if (seen.has(item)) throw new WireError(`${what} lists \`${item}\` twice`);
    seen.add(item);
  }
  return value as string[];
}

/**
 * Validates a hello's fields (its `type` already read).
 *
 * @param message the decoded frame
 * @returns the hello
 * @throws {WireError} the `invalidHello` message
 */
export function parseHello(message: Json): Hello {
  fields(message, "connection/hello", [
    "type",
    "supportedVersions",
    "requiredCapabilities",
    "optionalCapabilities",
  ]);
  const versions = message.supportedVersions;
  if (!Array.isArray(versions) || versions.length === 0) {
    throw new WireError("supportedVersions must be a non-empty array");
  }
  if (
    !versions.every((v) => Number.isSafeInteger(v) && v > 0) || new Set(versions).size !== versions.length
  ) {
    throw new WireError("supportedVersions must hold distinct positive integers");
  }
  const required = distinctStrings(message.requiredCapabilities, "requiredCapabilities");
  const optional = distinctStrings(message.optionalCapabilities, "optionalCapabilities");
  const both = required.find((c) => optional.includes(c));
  if (both !== undefined) throw new WireError(`capability \`${both}\` is both required and optional`);
  return { supportedVersions: versions, requiredCapabilities: required, optionalCapabilities: optional };
}

/** The client's messages after the hello. */
export type ClientMessage =
  | { type: "connection/hello" }
  | { type: "operation/request"; id: number; request: Json }
  | { type: "operation/cancel"; id: number }
  | { type: "operation/yield"; id: number }
  | { type: "delegate/response"; id: number; result: DelegateResult };

/** A delegate response's result. */
export type DelegateResult =
  | { status: "ok"; value: { type: "tool/result"; result: unknown } | { type: "notification/delivered" } }
  | { status: "error"; message: string };

/**
 * Reads the envelope of a message (the request's own fields are read by {@link parseRequest}).
 *
 * @param value the decoded frame
 * @returns the message
 * @throws {WireError} an invalid message (fatal)
 */
export function parseClientMessage(value: unknown): ClientMessage {
  const message = object(value, "message");
  const type = message.type;
  switch (type) {
    case "connection/hello":
      return { type };
    case "operation/request":
      fields(message, type, ["type", "id", "request"]);
      return { type, id: integer(message.id, "id"), request: object(message.request, "request") };
    case "operation/cancel":
    case "operation/yield":
      fields(message, type, ["type", "id"]);
      return { type, id: integer(message.id, "id") };
    case "delegate/response": {
      fields(message, type, ["type", "id", "result"]);
      return { type, id: integer(message.id, "id"), result: parseDelegateResult(message.result) };
    }
    default:
      throw new WireError(`unknown message type ${JSON.stringify(type)}`);
  }
}

function parseDelegateResult(value: unknown): DelegateResult {
  const result = object(value, "result");
  if (result.status === "error") {
    fields(result, "error result", ["status", "message"]);
    return { status: "error", message: string(result.message, "message") };
  }
  if (result.status !== "ok") throw new WireError("result status must be `ok` or `error`");
  fields(result, "ok result", ["status", "value"]);
  const inner = object(result.value, "value");
  if (inner.type === "tool/result") {
    fields(inner, "tool/result", ["type", "result"]);
    return { status: "ok", value: { type: "tool/result", result: inner.result } };
  }
  if (inner.type === "notification/delivered") {
    fields(inner, "notification/delivered", ["type"]);
    return { status: "ok", value: { type: "notification/delivered" } };
  }
  throw new WireError(`unknown delegate result type ${JSON.stringify(inner.type)}`);
}

/** A request's method and its parsed fields. */
export type Request =
  | {
    method: "session/open";
    sessionId: string;
    limits?: { maxYieldTimeMs?: bigint; maxHeapSizeBytes?: bigint };
  }
  | { method: "session/execute"; sessionId: string; request: Json }
  | { method: "session/wait"; sessionId: string; cellId: string; yieldTimeMs: bigint }
  | { method: "session/terminate"; sessionId: string; cellId: string }
  | { method: "session/shutdown"; sessionId: string };

/** Invalid session execution limits (a response error, not fatal). */
export class LimitsError extends Error {
  override name = "LimitsError";
}

/**
 * Reads an `operation/request`'s `request`. The execute's inner request is parsed later by
 * {@link parseExecute}, because its faults fail only that request.
 *
 * @param request the `request` object
 * @param limitsGranted whether `session-cell-execution-resource-limits` was granted
 * @returns the request
 * @throws {WireError} an invalid message (fatal); {@link LimitsError} invalid limits
 */
export function parseRequest(request: Json, limitsGranted: boolean): Request {
  const method = request.method;
  switch (method) {
    case "session/open": {
      fields(request, method, ["method", "sessionId"], limitsGranted ? ["cellExecutionLimits"] : []);
      const sessionId = string(request.sessionId, "sessionId");
      const raw = request.cellExecutionLimits;
      if (raw === undefined || raw === null) return { method, sessionId };
      try {
        const limits = object(raw, "cellExecutionLimits");
        fields(limits, "cellExecutionLimits", [], ["max_yield_time_ms", "max_heap_size_bytes"]);
        const read = (key: string) =>
          limits[key] === undefined || limits[key] === null ? undefined : unsigned(limits[key], key);
        return {
          method,
          sessionId,
          limits: {
            maxYieldTimeMs: read("max_yield_time_ms"),
            maxHeapSizeBytes: read("max_heap_size_bytes"),
          },
        };
      } catch (error) {
        throw new LimitsError((error as Error).message);
      }
    }
    case "session/execute":
      fields(request, method, ["method", "sessionId", "request"]);
      return {
        method,
        sessionId: string(request.sessionId, "sessionId"),
        request: object(request.request, "request"),
      };
    case "session/wait": {
      fields(request, method, ["method", "sessionId", "request"]);
      const inner = object(request.request, "request");
      fields(inner, "wait request", ["cell_id"], ["yield_time_ms"]);
      const ms = inner.yield_time_ms;
      return {
        method,
        sessionId: string(request.sessionId, "sessionId"),
        cellId: string(inner.cell_id, "cell_id"),
        yieldTimeMs: ms === undefined || ms === null ? 0n : unsigned(ms, "yield_time_ms"),
      };
    }
    case "session/terminate":
      fields(request, method, ["method", "sessionId", "cellId"]);
      return {
        method,
        sessionId: string(request.sessionId, "sessionId"),
        cellId: string(request.cellId, "cellId"),
      };
    case "session/shutdown":
      fields(request, method, ["method", "sessionId"]);
      return { method, sessionId: string(request.sessionId, "sessionId") };
    default:
      throw new WireError(`unknown request method ${JSON.stringify(method)}`);
  }
}

function jsonBytes(value: unknown): Uint8Array | undefined {
  return value === undefined || value === null ? undefined : new TextEncoder().encode(JSON.stringify(value));
}

function toolDefinition(value: unknown, index: number): ToolDefinition {
  const what = `enabled_tools[${index}]`;
  const def = object(value, what);
  fields(def, what, ["name", "tool_name", "kind"], ["description", "input_schema", "output_schema"]);
  const name = object(def.tool_name, `${what}.tool_name`);
  fields(name, `${what}.tool_name`, ["name"], ["namespace"]);
  const namespace = name.namespace === undefined || name.namespace === null
    ? undefined
    : string(name.namespace, `${what}.tool_name.namespace`);
  const kind = def.kind === "function"
    ? TOOL_KIND_FUNCTION
    : def.kind === "freeform"
    ? TOOL_KIND_FREEFORM
    : (() => {
      throw new WireError(`${what}.kind must be \`function\` or \`freeform\``);
    })();
  return {
    name: string(def.name, `${what}.name`),
    toolName: namespace === undefined
      ? { name: string(name.name, `${what}.tool_name.name`) }
      : { name: string(name.name, `${what}.tool_name.name`), namespace },
    description: def.description === undefined || def.description === null
      ? undefined
      : string(def.description, `${what}.description`),
    kind,
    inputSchemaJson: jsonBytes(def.input_schema),
    outputSchemaJson: jsonBytes(def.output_schema),
  };
}

/**
 * Reads a `session/execute`'s inner request into a core Execute.
 *
 * @param sessionId the session
 * @param executionId the door's execution ID for this request
 * @param request the inner `request`
 * @returns the core request
 * @throws {WireError} the detail of `invalid code-mode execute request: {error}`
 */
export function parseExecute(sessionId: string, executionId: string, request: Json): ExecuteRequest {
  fields(request, "execute request", ["tool_call_id", "source"], [
    "enabled_tools",
    "yield_time_ms",
    "max_output_tokens",
  ]);
  const tools = request.enabled_tools ?? [];
  if (!Array.isArray(tools)) throw new WireError("enabled_tools must be an array");
  const yieldMs = request.yield_time_ms;
  const tokens = request.max_output_tokens;
  let maxOutputTokens: bigint | undefined;
  if (tokens !== undefined && tokens !== null) {
    if (typeof tokens !== "number" || !Number.isInteger(tokens) || tokens < 0 || tokens > 2 ** 31 - 1) {
      throw new WireError("max_output_tokens must be an integer from 0 to 2147483647");
    }
    maxOutputTokens = BigInt(tokens);
  }
  return {
    sessionId,
    executionId,
    toolCallId: string(request.tool_call_id, "tool_call_id"),
    source: string(request.source, "source"),
    enabledTools: tools.map(toolDefinition),
    yieldTimeMs: yieldMs === undefined || yieldMs === null ? undefined : unsigned(yieldMs, "yield_time_ms"),
    maxOutputTokens,
  };
}

/** A content item on the wire. */
export type WireContentItem =
  | { type: "input_text"; text: string }
  | { type: "input_image"; image_url: string; detail?: string };

const DETAILS: Record<number, string> = { 1: "auto", 2: "low", 3: "high", 4: "original" };

/**
 * Converts content items (text and images; V1 has no audio item, so audio is dropped).
 *
 * @param items the core's items
 * @returns the wire items
 */
export function wireContentItems(items: readonly ContentItem[]): WireContentItem[] {
  const out: WireContentItem[] = [];
  for (const item of items) {
    if ("text" in item) out.push({ type: "input_text", text: item.text.text });
    else if ("image" in item) {
      const detail = DETAILS[item.image.detail];
      out.push(
        detail === undefined
          ? { type: "input_image", image_url: item.image.imageUrl }
          : { type: "input_image", image_url: item.image.imageUrl, detail },
      );
    }
  }
  return out;
}

/**
 * A runtime response (externally tagged).
 *
 * @param outcome the core's outcome
 * @returns `Yielded`, `Terminated` or `Result`
 */
export function runtimeResponse(outcome: ExecutionOutcome): Json {
  const base = { cell_id: outcome.cellId, content_items: wireContentItems(outcome.contentItems) };
  switch (outcome.kind) {
    case "yielded":
      return { Yielded: base };
    case "terminated":
      return { Terminated: base };
    case "completed":
      return { Result: { ...base, error_text: outcome.errorText ?? null } };
  }
}

/**
 * A wait outcome (`LiveCell` or `MissingCell` around a runtime response).
 *
 * @param result what Wait or Terminate gave
 * @returns the wire outcome
 */
export function waitOutcome(result: ObservationResult): Json {
  return result.state === "liveCell"
    ? { LiveCell: runtimeResponse(result.outcome) }
    : { MissingCell: runtimeResponse(result.outcome) };
}

/**
 * A `tool/invoke` delegate request's `request`.
 *
 * @param call the core's tool call
 * @returns the wire request
 */
export function toolInvoke(call: ToolCall): Json {
  const input = call.inputJson === undefined ? null : JSON.parse(new TextDecoder().decode(call.inputJson));
  return {
    type: "tool/invoke",
    invocation: {
      cell_id: call.cellId,
      runtime_tool_call_id: call.runtimeToolCallId,
      tool_name: { name: call.toolName.name, namespace: call.toolName.namespace ?? null },
      tool_kind: call.toolKind === TOOL_KIND_FREEFORM ? "freeform" : "function",
      input,
    },
  };
}

/** An ok result. */
export function ok(value: Json): Json {
  return { status: "ok", value };
}

/** An error result. */
export function error(message: string): Json {
  return { status: "error", message };
}

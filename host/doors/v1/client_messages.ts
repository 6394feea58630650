/**
 * What a JSON "host V1" client sends, decoded to the core's types as Codex's own host (0.171)
 * decodes it: strict decoders (`serde.ts`: unknown fields, missing fields and wrong types are
 * fatal, with serde's texts). What the host sends is `host_messages.ts`. Nothing here does I/O.
 *
 * - Capabilities do not gate fields: `outputTruncation`, `cellExecutionLimits`, `catalog_revision`
 *   and `operation/yield` are taken whether or not their capability was granted (as the reference
 *   does); only `delegate-capacity-4096` changes behaviour (the connection's delegate capacity).
 * - Request and delegate IDs are exact signed 64-bit integers (`bigint`), echoed as written.
 *
 * @module
 */
import type { ToolDefinition } from "../../core/code_mode_core.ts";
import { TOOL_KIND_FREEFORM, TOOL_KIND_FUNCTION } from "../../core/code_mode_core.ts";
import {
  DecodeError,
  identifier,
  int,
  optInt,
  optStr,
  seq,
  str,
  struct,
  tagOf,
  tagPosition,
  variant,
  withoutTag,
} from "./serde.ts";

/** Every capability this host knows and grants when offered (in the reference's order). */
export const KNOWN_CAPABILITIES = [
  "bounded-output-v1",
  "delegate-capacity-4096",
  "session-cell-execution-resource-limits",
  "tool-catalog-revision-v1",
  "yield-observation",
] as const;
/** `delegate-capacity-4096`: the connection may hold 4,096 pending delegate calls (else 1,024). */
export const CAP_DELEGATE_4096 = "delegate-capacity-4096";

type Json = Record<string, unknown>;

/** `connection/hello`, validated. */
export interface Hello {
  supportedVersions: number[];
  requiredCapabilities: string[];
  optionalCapabilities: string[];
}

/** A delegate response's result. */
export type DelegateResult =
  | { status: "ok"; value: { type: "tool/result"; result: unknown } | { type: "notification/delivered" } }
  | { status: "error"; message: string };

/** The tool definitions and fields of a `session/execute`'s inner request. */
export interface ExecuteFields {
  catalogRevision?: bigint;
  toolCallId: string;
  enabledTools: ToolDefinition[];
  source: string;
  yieldTimeMs?: bigint;
  /** An `i32`: a negative value fails only this request (`number too small to fit in target type`). */
  maxOutputTokens?: number;
}

/** A request's method and its parsed fields. */
export type Request =
  | {
    method: "session/open";
    sessionId: string;
    limits?: { maxYieldTimeMs?: bigint; maxHeapSizeBytes?: bigint };
    outputTruncation?: "client" | "server";
  }
  | { method: "session/execute"; sessionId: string; request: ExecuteFields }
  | {
    method: "session/wait";
    sessionId: string;
    cellId: string;
    yieldTimeMs: bigint;
    maxOutputTokens?: bigint;
  }
  | { method: "session/terminate"; sessionId: string; cellId: string; maxOutputTokens?: bigint }
  | { method: "session/shutdown"; sessionId: string };

/** Every message a client sends. */
export type ClientMessage =
  | { type: "connection/hello"; hello: Hello }
  | { type: "operation/request"; id: bigint; request: Request }
  | { type: "operation/cancel"; id: bigint }
  | { type: "operation/yield"; id: bigint }
  | { type: "delegate/response"; id: bigint; result: DelegateResult };

const MESSAGE_TYPES = [
  "connection/hello",
  "operation/request",
  "operation/cancel",
  "operation/yield",
  "delegate/response",
] as const;
const METHODS = [
  "session/open",
  "session/execute",
  "session/wait",
  "session/terminate",
  "session/shutdown",
] as const;

function capabilities(value: unknown, seen: Set<string>): string[] {
  const out: string[] = [];
  for (const item of seq(value)) {
    const name = identifier(item);
    if (seen.has(name)) throw new DecodeError(`duplicate capability \`${name}\``);
    seen.add(name);
    out.push(name);
  }
  return out;
}

function hello(fields: Json): Hello {
  const out: Partial<Hello> = {};
  const versions = new Set<bigint>();
  const required = new Set<string>();
  const optional = new Set<string>();
  struct(
    fields,
    "struct ClientHello",
    ["supportedVersions", "requiredCapabilities", "optionalCapabilities"],
    ["supportedVersions", "requiredCapabilities", "optionalCapabilities"],
    (key, value) => {
      if (key === "supportedVersions") {
        out.supportedVersions = seq(value).map((v) => {
          const n = int(v, "u32");
          if (n === 0n) throw new DecodeError("invalid value: integer `0`, expected a nonzero u32");
          if (versions.has(n)) throw new DecodeError(`duplicate protocol version ${n}`);
          versions.add(n);
          return Number(n);
        });
        if (out.supportedVersions.length === 0) {
          throw new DecodeError("at least one protocol version is required");
        }
      } else if (key === "requiredCapabilities") out.requiredCapabilities = capabilities(value, required);
      else out.optionalCapabilities = capabilities(value, optional);
    },
  );
  const both = out.requiredCapabilities!.find((c) => optional.has(c));
  if (both !== undefined) {
    throw new DecodeError(`capability \`${both}\` cannot be both required and optional`);
  }
  return out as Hello;
}

/**
 * Decodes one client message (its JSON already parsed by `parseJson`).
 *
 * @param value the frame's JSON
 * @param text the frame's JSON text, for the position serde names in a top-level tag error
 * @returns the message
 * @throws {DecodeError} serde's text; fatal to the connection
 */
export function decodeClientMessage(value: unknown, text?: string): ClientMessage {
  let type: (typeof MESSAGE_TYPES)[number];
  try {
    type = tagOf(value, "type", MESSAGE_TYPES, "internally tagged enum ClientMessage");
  } catch (error) {
    // The top-level tag is read by serde_json's streaming decoder, which names a position.
    if (error instanceof DecodeError && text !== undefined) {
      throw new DecodeError(error.message + tagPosition(text, "type"));
    }
    throw error;
  }
  const fields = withoutTag(value, "type");
  switch (type) {
    case "connection/hello":
      return { type, hello: hello(fields) };
    case "operation/request": {
      let id: bigint | undefined;
      let request: Request | undefined;
      struct(fields, "struct OperationRequest", ["id", "request"], ["id", "request"], (key, v) => {
        if (key === "id") id = int(v, "i64");
        else request = decodeRequest(v);
      });
      return { type, id: id!, request: request! };
    }
    case "operation/cancel":
    case "operation/yield": {
      let id: bigint | undefined;
      struct(fields, "struct OperationId", ["id"], ["id"], (_key, v) => id = int(v, "i64"));
      return { type, id: id! };
    }
    case "delegate/response": {
      let id: bigint | undefined;
      let result: DelegateResult | undefined;
      struct(fields, "struct DelegateResponse", ["id", "result"], ["id", "result"], (key, v) => {
        if (key === "id") id = int(v, "i64");
        else result = delegateResult(v);
      });
      return { type, id: id!, result: result! };
    }
  }
}

function delegateResult(value: unknown): DelegateResult {
  const status = tagOf(value, "status", ["ok", "error"] as const, "internally tagged enum DelegateResult");
  const fields = withoutTag(value, "status");
  if (status === "error") {
    let message = "";
    struct(fields, "struct DelegateError", ["message"], ["message"], (_key, v) => message = str(v));
    return { status, message };
  }
  let inner: DelegateResult & { status: "ok" } | undefined;
  struct(fields, "struct DelegateOk", ["value"], ["value"], (_key, v) => {
    const type = tagOf(
      v,
      "type",
      ["tool/result", "notification/delivered"] as const,
      "internally tagged enum DelegateValue",
    );
    if (type === "notification/delivered") {
      // A unit variant: serde ignores its other fields.
      inner = { status, value: { type } };
      return;
    }
    let result: unknown;
    struct(withoutTag(v, "type"), "struct ToolResult", ["result"], ["result"], (_key, r) => result = r);
    inner = { status, value: { type, result } };
  });
  return inner!;
}

function decodeRequest(value: unknown): Request {
  const method = tagOf(value, "method", METHODS, "internally tagged enum HostRequest");
  const fields = withoutTag(value, "method");
  switch (method) {
    case "session/open":
      return openRequest(fields);
    case "session/execute": {
      let sessionId = "";
      let request: ExecuteFields | undefined;
      struct(
        fields,
        "struct SessionExecuteRequest",
        ["sessionId", "request"],
        ["sessionId", "request"],
        (key, v) => {
          if (key === "sessionId") sessionId = identifier(v);
          else request = executeFields(v);
        },
      );
      return { method, sessionId, request: request! };
    }
    case "session/wait":
      return waitRequest(fields);
    case "session/terminate": {
      const out: Extract<Request, { method: "session/terminate" }> = { method, sessionId: "", cellId: "" };
      struct(
        fields,
        "struct SessionTerminateRequest",
        ["sessionId", "cellId", "maxOutputTokens"],
        ["sessionId", "cellId"],
        (key, v) => {
          if (key === "sessionId") out.sessionId = identifier(v);
          else if (key === "cellId") out.cellId = str(v);
          else out.maxOutputTokens = optInt(v, "usize");
        },
      );
      return out;
    }
    case "session/shutdown": {
      let sessionId = "";
      struct(fields, "struct SessionShutdownRequest", ["sessionId"], ["sessionId"], (_key, v) => {
        sessionId = identifier(v);
      });
      return { method, sessionId };
    }
  }
}

function openRequest(fields: Json): Extract<Request, { method: "session/open" }> {
  const out: Extract<Request, { method: "session/open" }> = { method: "session/open", sessionId: "" };
  struct(
    fields,
    "struct SessionOpenRequest",
    ["sessionId", "cellExecutionLimits", "outputTruncation"],
    ["sessionId"],
    (key, v) => {
      if (key === "sessionId") out.sessionId = identifier(v);
      else if (key === "outputTruncation") {
        if (v !== null) out.outputTruncation = variant(v, ["client", "server"] as const);
      } else if (v !== null) {
        const limits: { maxYieldTimeMs?: bigint; maxHeapSizeBytes?: bigint } = {};
        struct(
          v,
          "struct SessionCellExecutionLimits",
          ["maxYieldTimeMs", "maxHeapSizeBytes"],
          [],
          (k, n) => {
            if (k === "maxYieldTimeMs") limits.maxYieldTimeMs = optInt(n, "u64");
            else limits.maxHeapSizeBytes = optInt(n, "u64");
          },
        );
        out.limits = limits;
      }
    },
  );
  return out;
}

function waitRequest(fields: Json): Extract<Request, { method: "session/wait" }> {
  const out: Extract<Request, { method: "session/wait" }> = {
    method: "session/wait",
    sessionId: "",
    cellId: "",
    yieldTimeMs: 0n,
  };
  struct(
    fields,
    "struct SessionWaitRequest",
    ["sessionId", "request", "maxOutputTokens"],
    ["sessionId", "request"],
    (key, v) => {
      if (key === "sessionId") out.sessionId = identifier(v);
      else if (key === "maxOutputTokens") out.maxOutputTokens = optInt(v, "usize");
      else {
        struct(
          v,
          "struct WaitRequest",
          ["cell_id", "yield_time_ms"],
          ["cell_id", "yield_time_ms"],
          (k, n) => {
            if (k === "cell_id") out.cellId = str(n);
            else out.yieldTimeMs = int(n, "u64");
          },
        );
      }
    },
  );
  return out;
}

const EXECUTE_FIELDS = [
  "catalog_revision",
  "tool_call_id",
  "enabled_tools",
  "source",
  "yield_time_ms",
  "max_output_tokens",
];

function executeFields(value: unknown): ExecuteFields {
  const out: ExecuteFields = { toolCallId: "", enabledTools: [], source: "" };
  struct(
    value,
    "struct ExecuteRequest",
    EXECUTE_FIELDS,
    ["tool_call_id", "enabled_tools", "source"],
    (key, v) => {
      switch (key) {
        case "catalog_revision":
          out.catalogRevision = optInt(v, "u64");
          break;
        case "tool_call_id":
          out.toolCallId = str(v);
          break;
        case "enabled_tools":
          out.enabledTools = seq(v).map(toolDefinition);
          break;
        case "source":
          out.source = str(v);
          break;
        case "yield_time_ms":
          out.yieldTimeMs = optInt(v, "u64");
          break;
        case "max_output_tokens": {
          const n = optInt(v, "i32");
          out.maxOutputTokens = n === undefined ? undefined : Number(n);
          break;
        }
      }
    },
  );
  return out;
}

const TOOL_FIELDS = ["name", "tool_name", "description", "kind", "input_schema", "output_schema"];

function jsonBytes(value: unknown): Uint8Array | undefined {
  return value === undefined || value === null ? undefined : new TextEncoder().encode(JSON.stringify(value));
}

function toolDefinition(value: unknown): ToolDefinition {
  const def: ToolDefinition = { name: "" };
  struct(
    value,
    "struct ToolDefinition",
    TOOL_FIELDS,
    ["name", "tool_name", "description", "kind"],
    (key, v) => {
      switch (key) {
        case "name":
          def.name = str(v);
          break;
        case "tool_name": {
          let name = "";
          let namespace: string | undefined;
          struct(v, "struct ToolName", ["name", "namespace"], ["name"], (k, n) => {
            if (k === "name") name = str(n);
            else namespace = optStr(n);
          });
          def.toolName = namespace === undefined ? { name } : { name, namespace };
          break;
        }
        case "description":
          def.description = str(v);
          break;
        case "kind":
          def.kind = variant(v, ["function", "freeform"] as const) === "function"
            ? TOOL_KIND_FUNCTION
            : TOOL_KIND_FREEFORM;
          break;
        case "input_schema":
          def.inputSchemaJson = jsonBytes(v);
          break;
        case "output_schema":
          def.outputSchemaJson = jsonBytes(v);
          break;
      }
    },
  );
  return def;
}

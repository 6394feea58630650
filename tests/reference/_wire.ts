/**
 * The gRPC wire as the conformance suite sees it: messages encoded from and decoded to plain JSON with
 * the proto's snake_case names, independent of the host's own decoding. Folder-private.
 *
 * - The schema is this repository's `codex.code_mode.v1` proto plus the fields that Codex 0.171 and its
 *   host put on the wire and the proto may lack (`../shared/CODEX-0.171.md`, read off taps): they are
 *   added only where the proto has no field of that number.
 * - Decoding walks the raw bytes: a field is in the result exactly when it was on the wire (field
 *   presence is observable), a field number the schema does not know comes out as `"#N"`, enums as
 *   their names, `bytes` as UTF-8 text, 64-bit integers as numbers.
 * - {@link WireClient} makes raw grpc-js calls with these codecs and reports status code names,
 *   details, response headers and trailers.
 *
 * @module
 */
import * as grpc from "@grpc/grpc-js";
import { Buffer } from "node:buffer";
import protobuf from "../../proto/protobuf_runtime.ts";
import { PROTO_FILES, readProtoText } from "../../proto/loader.ts";

// deno-lint-ignore no-explicit-any
export type Json = any;

const PACKAGE = "codex.code_mode.v1";

/** Fields seen on the wire between Codex 0.171 and its host (number → name and type), by message. */
const OBSERVED_FIELDS: Record<string, [number, string, string][]> = {
  OpenSessionRequest: [[3, "max_pending_delegate_calls", "uint64"]],
  SessionOpened: [[3, "supports_catalog_revision", "bool"]],
  ExecuteRequest: [[8, "catalog_revision", "uint64"]],
  WaitRequest: [[5, "max_tokens", "uint64"]],
};

let rootCache: protobuf.Root | undefined;

function schema(): protobuf.Root {
  if (rootCache) return rootCache;
  const root = new protobuf.Root();
  protobuf.parse(readProtoText(PROTO_FILES.codeModeHost), root, { keepCase: true });
  protobuf.parse(readProtoText(PROTO_FILES.health), root, { keepCase: true });
  for (const [message, fields] of Object.entries(OBSERVED_FIELDS)) {
    const type = root.lookupType(`${PACKAGE}.${message}`);
    for (const [no, name, kind] of fields) {
      if (type.fieldsById[no] || type.fields[name]) continue;
      type.add(new protobuf.Field(name, no, kind, "optional"));
    }
  }
  root.resolveAll();
  rootCache = root;
  return root;
}

function lookup(typeName: string): protobuf.Type {
  return schema().lookupType(typeName.includes(".") ? typeName : `${PACKAGE}.${typeName}`);
}

/**
 * Encodes a plain object (snake_case names; enums by name or number; `bytes` as a string, which is
 * sent as UTF-8, or as a `Uint8Array`) as a message of `typeName`.
 */
export function encodeMessage(typeName: string, value: Json): Uint8Array {
  const type = lookup(typeName);
  return type.encode(type.fromObject(toBytesFields(type, value))).finish();
}

function toBytesFields(type: protobuf.Type, value: Json): Json {
  if (value === null || typeof value !== "object" || value instanceof Uint8Array) return value;
  const out: Json = {};
  for (const [key, v] of Object.entries(value)) {
    const field = type.fields[key];
    if (!field) throw new Error(`${type.name} has no field ${key}`);
    field.resolve();
    const one = (x: Json): Json =>
      field.type === "bytes" && typeof x === "string"
        ? new TextEncoder().encode(x)
        : field.resolvedType instanceof protobuf.Type
        ? toBytesFields(field.resolvedType, x)
        : x;
    out[key] = Array.isArray(v) ? v.map(one) : one(v);
  }
  return out;
}

function longToJson(value: Json): number | string {
  const text = typeof value === "object" && value !== null ? value.toString() : String(value);
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : text;
}

function readScalar(field: protobuf.Field, reader: protobuf.Reader): Json {
  switch (field.type) {
    case "string":
      return reader.string();
    case "bytes":
      return new TextDecoder().decode(reader.bytes());
    case "bool":
      return reader.bool();
    case "uint64":
      return longToJson(reader.uint64());
    case "int64":
      return longToJson(reader.int64());
    case "sint64":
      return longToJson(reader.sint64());
    case "fixed64":
      return longToJson(reader.fixed64());
    case "uint32":
      return reader.uint32();
    case "int32":
      return reader.int32();
    case "sint32":
      return reader.sint32();
    case "fixed32":
      return reader.fixed32();
    case "double":
      return reader.double();
    case "float":
      return reader.float();
    default:
      return reader.int32();
  }
}

function readUnknown(reader: protobuf.Reader, wireType: number): Json {
  switch (wireType) {
    case 0:
      return longToJson(reader.uint64());
    case 1:
      return `fixed64:${longToJson(reader.fixed64())}`;
    case 5:
      return `fixed32:${reader.fixed32()}`;
    case 2: {
      const bytes = reader.bytes();
      try {
        return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
      } catch {
        return `hex:${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
      }
    }
    default:
      throw new Error(`wire type ${wireType} cannot be read`);
  }
}

/**
 * Fields without explicit presence (proto3 scalars that are neither `optional` nor in a oneof) that
 * were on the wire with their default value: a proto3 decoder cannot tell them from absent ones.
 */
const implicitDefaults = new WeakMap<object, Set<string>>();

function markImplicitDefault(message: object, field: string): void {
  let set = implicitDefaults.get(message);
  if (!set) implicitDefaults.set(message, set = new Set());
  set.add(field);
}

function isDefault(value: Json): boolean {
  return value === 0 || value === "" || value === false || value === "0";
}

/**
 * Whether `message[field]` was decoded from a field without explicit presence that carried its
 * default value (observations leave such fields out unless a scenario asks for the raw wire).
 */
export function isImplicitDefault(message: object, field: string): boolean {
  return implicitDefaults.get(message)?.has(field) ?? false;
}

function decodeWith(type: protobuf.Type, bytes: Uint8Array): Json {
  const reader = protobuf.Reader.create(bytes);
  const out: Json = {};
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    const no = tag >>> 3;
    const wireType = tag & 7;
    const field = type.fieldsById[no];
    if (!field) {
      const key = `#${no}`;
      const value = readUnknown(reader, wireType);
      out[key] = key in out ? [...[out[key]].flat(), value] : value;
      continue;
    }
    field.resolve();
    const values: Json[] = [];
    if (field.resolvedType instanceof protobuf.Type) {
      values.push(decodeWith(field.resolvedType, reader.bytes()));
    } else if (field.repeated && wireType === 2 && field.type !== "string" && field.type !== "bytes") {
      const end = reader.uint32() + reader.pos;
      while (reader.pos < end) values.push(readScalar(field, reader));
    } else {
      values.push(readScalar(field, reader));
    }
    const mapped = field.resolvedType instanceof protobuf.Enum
      ? values.map((v) => (field.resolvedType as protobuf.Enum).valuesById[v] ?? v)
      : values;
    if (field.repeated) out[field.name] = [...(out[field.name] ?? []), ...mapped];
    else {
      out[field.name] = mapped[0];
      if (!field.partOf && !(field.resolvedType instanceof protobuf.Type) && isDefault(values[0])) {
        markImplicitDefault(out, field.name);
      }
    }
  }
  return out;
}

/**
 * Decodes bytes of a message of `typeName`: only the fields on the wire, unknown ones as `"#N"`.
 *
 * @param typeName e.g. `ExecuteEvent`
 * @param bytes the encoded message
 * @returns the plain object
 */
export function decodeMessage(typeName: string, bytes: Uint8Array): Json {
  return decodeWith(lookup(typeName), bytes);
}

/** Request and response types of each RPC. */
export const METHODS = {
  OpenSession: ["OpenSessionRequest", "SessionEvent", true],
  CloseSession: ["CloseSessionRequest", "CloseSessionResponse", false],
  SubscribeToToolCalls: ["SubscribeToToolCallsRequest", "ToolCall", true],
  CompleteToolCall: ["CompleteToolCallRequest", "CompleteToolCallResponse", false],
  AcknowledgeNotification: ["AcknowledgeNotificationRequest", "AcknowledgeNotificationResponse", false],
  Execute: ["ExecuteRequest", "ExecuteEvent", true],
  Wait: ["WaitRequest", "WaitResponse", false],
  YieldObservation: ["YieldObservationRequest", "YieldObservationResponse", false],
  CancelWait: ["CancelWaitRequest", "CancelWaitResponse", false],
  Terminate: ["TerminateRequest", "WaitResponse", false],
} as const;

/** An RPC method of `CodeModeHost`. */
export type Method = keyof typeof METHODS;

/** How a call ended: the status code's name (`OK`, `NOT_FOUND`, …) and its details. */
export interface WireStatus {
  code: string;
  details: string;
}

/** Headers that belong to the transport, not to the contract: left out of observations. */
const TRANSPORT_HEADERS = new Set([
  "content-type",
  "date",
  "grpc-accept-encoding",
  "grpc-encoding",
  "accept-encoding",
  "content-length",
  "server",
]);

function metadataToJson(metadata: grpc.Metadata | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!metadata) return out;
  for (const [key, value] of Object.entries(metadata.getMap())) {
    if (TRANSPORT_HEADERS.has(key)) continue;
    out[key] = typeof value === "string" ? value : `bin:${Buffer.from(value).toString("base64")}`;
  }
  return out;
}

function codeName(code: number): string {
  return grpc.status[code] ?? String(code);
}

/** The result of a unary call. */
export interface UnaryResult {
  status: WireStatus;
  headers: Record<string, string>;
  trailers: Record<string, string>;
  /** The decoded response; absent on failure. */
  response?: Json;
}

/** A server-streaming call in progress. */
export class WireStream {
  readonly method: Method;
  /** Decoded messages in arrival order. */
  readonly messages: Json[] = [];
  /** Resolves with the response headers (empty when the call ended without them). */
  readonly headers: Promise<Record<string, string>>;
  /** Resolves with the final status once the call ended. */
  readonly status: Promise<WireStatus & { trailers: Record<string, string> }>;
  #call: grpc.ClientReadableStream<Uint8Array>;
  #watchers: { predicate: (m: Json) => boolean; resolve: (m: Json) => void }[] = [];
  #ended = false;

  constructor(method: Method, call: grpc.ClientReadableStream<Uint8Array>) {
    this.method = method;
    this.#call = call;
    const headers = Promise.withResolvers<Record<string, string>>();
    this.headers = headers.promise;
    const [, responseType] = METHODS[method];
    call.on("metadata", (m: grpc.Metadata) => headers.resolve(metadataToJson(m)));
    call.on("data", (bytes: Uint8Array) => {
      const message = decodeMessage(responseType, bytes);
      this.messages.push(message);
      for (const w of this.#watchers.slice()) {
        if (w.predicate(message)) {
          this.#watchers.splice(this.#watchers.indexOf(w), 1);
          w.resolve(message);
        }
      }
    });
    call.on("error", () => {});
    this.status = new Promise((resolve) => {
      call.on("status", (s: grpc.StatusObject) => {
        this.#ended = true;
        headers.resolve({});
        for (const w of this.#watchers.splice(0)) w.resolve(undefined);
        resolve({ code: codeName(s.code), details: s.details, trailers: metadataToJson(s.metadata) });
      });
    });
  }

  /**
   * Resolves with the first message (received already or later) that matches, or undefined when the
   * call ends without one.
   */
  next(predicate: (m: Json) => boolean = () => true, after = 0): Promise<Json | undefined> {
    const seen = this.messages.slice(after).find(predicate);
    if (seen !== undefined) return Promise.resolve(seen);
    if (this.#ended) return Promise.resolve(undefined);
    return new Promise((resolve) => this.#watchers.push({ predicate, resolve }));
  }

  /** Cancels the call (the client's RST_STREAM CANCEL). */
  cancel(): void {
    this.#call.cancel();
  }
}

/** Channel options of every wire client: 64 MiB messages, a connection of its own. */
const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.max_receive_message_length": 67108864,
  "grpc.max_send_message_length": 67108864,
  "grpc.use_local_subchannel_pool": 1,
  "grpc.initial_reconnect_backoff_ms": 50,
};

/** Raw gRPC calls to one host (one HTTP/2 connection). */
export class WireClient {
  readonly #client: grpc.Client;

  /**
   * @param target a grpc-js target: `127.0.0.1:PORT` or `unix:///path`
   */
  constructor(target: string) {
    this.#client = new grpc.Client(target, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
  }

  /**
   * A unary RPC of `CodeModeHost`.
   *
   * @param method the RPC
   * @param request the request as a plain object (or encoded bytes)
   * @param metadata request metadata
   * @returns status, headers, trailers and the decoded response
   */
  unary(method: Method, request: Json | Uint8Array, metadata?: Record<string, string>): Promise<UnaryResult> {
    const [requestType, responseType] = METHODS[method];
    const bytes = request instanceof Uint8Array ? request : encodeMessage(requestType, request);
    return this.#unary(`/${PACKAGE}.CodeModeHost/${method}`, bytes, responseType, metadata);
  }

  /** A unary call of any path (for other services, e.g. health). */
  unaryPath(
    path: string,
    request: Uint8Array,
    responseType: string,
    metadata?: Record<string, string>,
  ): Promise<UnaryResult> {
    return this.#unary(path, request, responseType, metadata);
  }

  #unary(
    path: string,
    request: Uint8Array,
    responseType: string,
    metadata?: Record<string, string>,
  ): Promise<UnaryResult> {
    return new Promise<UnaryResult>((resolve) => {
      let headers: Record<string, string> = {};
      let response: Uint8Array | undefined;
      let status: grpc.StatusObject | undefined;
      let callbackDone = false;
      const finish = () => {
        if (!status || !callbackDone) return;
        resolve({
          status: { code: codeName(status.code), details: status.details },
          headers,
          trailers: metadataToJson(status.metadata),
          ...(status.code === 0 && response !== undefined
            ? { response: decodeMessage(responseType, response) }
            : {}),
        });
      };
      const md = new grpc.Metadata();
      for (const [k, v] of Object.entries(metadata ?? {})) md.set(k, v);
      const call = this.#client.makeUnaryRequest(
        path,
        (b: Uint8Array) => Buffer.from(b),
        (b: Uint8Array) => b,
        request,
        md,
        (_error: grpc.ServiceError | null, value?: Uint8Array) => {
          response = value;
          callbackDone = true;
          finish();
        },
      );
      call.on("metadata", (m: grpc.Metadata) => headers = metadataToJson(m));
      call.on("status", (s: grpc.StatusObject) => {
        status = s;
        finish();
      });
    });
  }

  /**
   * A server-streaming RPC of `CodeModeHost`.
   *
   * @param method the RPC
   * @param request the request as a plain object (or encoded bytes)
   * @param metadata request metadata
   * @returns the call
   */
  stream(method: Method, request: Json | Uint8Array, metadata?: Record<string, string>): WireStream {
    const [requestType] = METHODS[method];
    const bytes = request instanceof Uint8Array ? request : encodeMessage(requestType, request);
    const md = new grpc.Metadata();
    for (const [k, v] of Object.entries(metadata ?? {})) md.set(k, v);
    const call = this.#client.makeServerStreamRequest(
      `/${PACKAGE}.CodeModeHost/${method}`,
      (b: Uint8Array) => Buffer.from(b),
      (b: Uint8Array) => b,
      bytes,
      md,
    );
    return new WireStream(method, call);
  }

  /** Closes the channel. */
  close(): void {
    this.#client.close();
  }
}

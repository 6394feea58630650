/**
 * The schema of the internal host ↔ runtime protocol (`codemode.worker.v1`, SPEC §9.4) as tables
 * for the schema codec (`schema_codec.ts`): `proto/codemode/worker/v1/worker.proto` stays the
 * contract, and `worker_codec_test.ts` checks these tables against it.
 *
 * @module
 */

/** Scalar field types used by worker.proto. */
export type ScalarType = "string" | "bool" | "int32" | "uint32" | "uint64";

/** One field: number, camelCase name, and a scalar type or a message schema. */
export interface FieldSchema {
  no: number;
  name: string;
  type: ScalarType | MessageSchema;
  repeated?: boolean;
  /** The oneof this field belongs to (`_name` for a proto3 `optional`, which is not reported). */
  oneof?: string;
}

/** One message: its fully qualified name (for the schema test) and its fields. */
export interface MessageSchema {
  name: string;
  fields: FieldSchema[];
  /** Filled in by {@link message}: field number → field. */
  byNo: Map<number, FieldSchema>;
}

function message(name: string, fields: FieldSchema[]): MessageSchema {
  return { name, fields, byNo: new Map(fields.map((f) => [f.no, f])) };
}

const f = (no: number, name: string, type: FieldSchema["type"], oneof?: string): FieldSchema => ({
  no,
  name,
  type,
  ...(oneof === undefined ? {} : { oneof }),
});

const P = "codemode.worker.v1.";
const EMPTY = (name: string) => message(P + name, []);
const TRIMMED_TEXT = message(P + "TrimmedText", [
  f(1, "head", "string"),
  f(2, "tail", "string"),
  f(3, "totalBytes", "uint64"),
  f(4, "jsonExtraBytes", "uint64"),
]);
const STORE_ENTRY = message(P + "StoreEntry", [f(1, "key", "string"), f(2, "valueJson", "string")]);
const STORED_WRITES = message(P + "StoredWrites", [{
  no: 1,
  name: "entries",
  type: STORE_ENTRY,
  repeated: true,
}]);
const CELL_TOOL = message(P + "CellTool", [f(1, "globalName", "string"), f(2, "description", "string")]);

/** `HostToWorker`, with every message it contains. */
export const HOST_TO_WORKER: MessageSchema = message(P + "HostToWorker", [
  f(
    1,
    "configure",
    message(P + "Configure", [
      f(1, "sessionId", "string"),
      f(2, "outputTruncation", "int32"),
      f(3, "cellHeapLimitMb", "uint32"),
      f(4, "maxMessageBytes", "uint64"),
      f(5, "maxStoredValueBytes", "uint64"),
      f(7, "outputEventCredit", "uint32"),
      f(8, "outputByteCredit", "uint64"),
      f(9, "maxFrameBytes", "uint64"),
      f(10, "jsonSizes", "bool"),
    ]),
    "message",
  ),
  f(
    2,
    "storeUpdate",
    message(P + "StoreUpdate", [
      f(1, "version", "uint64"),
      f(2, "reset", "bool"),
      { no: 3, name: "entries", type: STORE_ENTRY, repeated: true },
    ]),
    "message",
  ),
  f(
    3,
    "startCell",
    message(P + "StartCell", [
      f(1, "cellId", "string"),
      f(2, "source", "string"),
      { no: 3, name: "tools", type: CELL_TOOL, repeated: true },
      f(4, "storeVersion", "uint64"),
    ]),
    "message",
  ),
  f(
    4,
    "toolResult",
    message(P + "ToolResult", [
      f(1, "cellId", "string"),
      f(2, "runtimeToolCallId", "string"),
      f(3, "outputJson", "string", "result"),
      f(4, "errorMessage", "string", "result"),
    ]),
    "message",
  ),
  f(
    5,
    "credit",
    message(P + "Credit", [f(1, "cellId", "string"), f(2, "events", "uint32"), f(3, "bytes", "uint64")]),
    "message",
  ),
  f(6, "stopCell", message(P + "StopCell", [f(1, "cellId", "string")]), "message"),
  f(8, "shutdown", EMPTY("Shutdown"), "message"),
  f(10, "ping", message(P + "Ping", [f(1, "seq", "uint32")]), "message"),
]);

/** `WorkerToHost`, with every message it contains. */
export const WORKER_TO_HOST: MessageSchema = message(P + "WorkerToHost", [
  f(
    1,
    "ready",
    message(P + "Ready", [f(1, "denoVersion", "string"), f(2, "protocolVersion", "uint32")]),
    "message",
  ),
  f(
    2,
    "cellEvent",
    message(P + "CellEvent", [
      f(1, "cellId", "string"),
      f(2, "started", EMPTY("Empty"), "event"),
      f(
        3,
        "contentItem",
        message(P + "ContentItem", [
          f(1, "text", "string", "item"),
          f(
            2,
            "image",
            message(P + "ImageItem", [f(1, "imageUrl", "string"), f(2, "detail", "string")]),
            "item",
          ),
          f(3, "audioUrl", "string", "item"),
          f(4, "trimmedText", TRIMMED_TEXT, "item"),
          f(
            5,
            "droppedMedia",
            message(P + "DroppedMedia", [
              f(1, "kind", "string"),
              f(2, "bytes", "uint64"),
              f(3, "detail", "string"),
              f(4, "jsonExtraBytes", "uint64"),
            ]),
            "item",
          ),
        ]),
        "event",
      ),
      f(4, "yieldRequested", EMPTY("Empty"), "event"),
      f(
        5,
        "toolCall",
        message(P + "ToolCallEvent", [
          f(1, "runtimeToolCallId", "string"),
          f(2, "globalName", "string"),
          f(3, "inputJson", "string", "_inputJson"),
        ]),
        "event",
      ),
      f(6, "toolResultConsumed", "string", "event"),
      f(7, "notify", "string", "event"),
      f(8, "pending", EMPTY("Empty"), "event"),
      f(
        9,
        "storedWrite",
        message(P + "StoredWrite", [f(1, "key", "string"), f(2, "valueJson", "string")]),
        "event",
      ),
      f(
        10,
        "result",
        message(P + "CellResult", [
          f(1, "errorText", "string", "error"),
          f(2, "trimmedError", TRIMMED_TEXT, "error"),
        ]),
        "event",
      ),
      f(
        11,
        "exited",
        message(P + "Exited", [f(1, "reason", "string"), f(2, "detail", "string", "_detail")]),
        "event",
      ),
      { no: 12, name: "storedWrites", type: STORED_WRITES, oneof: "event" },
      f(13, "busy", "uint32", "event"),
      f(14, "idle", "uint32", "event"),
    ]),
    "message",
  ),
  f(3, "runtimeFault", message(P + "RuntimeFault", [f(1, "detail", "string")]), "message"),
  f(4, "pong", message(P + "Pong", [f(1, "seq", "uint32")]), "message"),
  f(15, "lineEnd", "uint32"),
]);

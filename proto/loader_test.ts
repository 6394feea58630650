import assert from "node:assert/strict";
import { parseProtos, plainEncoder, PROTO_FILES, readProtoText } from "./loader.ts";

const root = parseProtos([readProtoText(PROTO_FILES.codeModeHost)]);
const encoder = (name: string) => plainEncoder(root.lookupType(`codex.code_mode.v1.${name}`));
const bytes = (name: string, value: unknown) => [...encoder(name)(value)];

Deno.test("plainEncoder leaves out what prost leaves out: implicit-presence fields at their default, at any depth", () => {
  assert.deepEqual(bytes("TextContent", { text: "" }), []);
  // A string's default is "" only: the text "0" (a cell's `text(0)`) is sent.
  assert.deepEqual(bytes("TextContent", { text: "0" }), [0x0a, 1, 0x30]);
  assert.deepEqual(bytes("CellClosed", { cellId: "0" }), [0x12, 1, 0x30]);
  assert.deepEqual(bytes("CellClosed", { executionId: "", cellId: "1", finalToolCallSequence: 0 }), [
    0x12,
    1,
    0x31,
  ]);
  // uint64 as a decimal string or a number, bool false, enum 0.
  assert.deepEqual(bytes("CellClosed", { cellId: "", finalToolCallSequence: "0" }), []);
  assert.deepEqual(bytes("SessionOpened", { sessionId: "", supportsCatalogRevision: false }), []);
  // Nested: the outcome's empty text item keeps its ContentItem and TextContent, empty.
  assert.deepEqual(
    bytes("ExecutionOutcome", {
      cellId: "1",
      contentItems: [{ text: { text: "" } }, { text: { text: "x" } }],
      completed: {},
      codeModeHostDurationNs: 0,
    }),
    [0x0a, 1, 0x31, 0x12, 2, 0x0a, 0, 0x12, 5, 0x0a, 3, 0x0a, 1, 0x78, 0x2a, 0],
  );
});

Deno.test("plainEncoder keeps what has explicit presence: optional fields and oneof members, also at their default", () => {
  assert.deepEqual(bytes("ExecutionCompleted", { errorText: "" }), [0x0a, 0]);
  assert.deepEqual(bytes("SessionOpened", { outputTruncation: 0 }), [0x10, 0]);
  assert.deepEqual(bytes("YieldObservationRequest", { waitId: "" }), [0x1a, 0]);
});

Deno.test("plainEncoder does not change the object it encodes", () => {
  const value = { cellId: "", contentItems: [{ text: { text: "" } }], codeModeHostDurationNs: 0 };
  const copy = structuredClone(value);
  encoder("ExecutionOutcome")(value);
  assert.deepEqual(value, copy);
});

import assert from "node:assert/strict";
import {
  FRAMED_FROM_BYTES,
  framedEncoder,
  parseProtos,
  plainEncoder,
  PROTO_FILES,
  publicProtoRoot,
  readProtoText,
} from "./loader.ts";
import { rememberedUtf8 } from "./bytes.ts";
import { decodeMessage, encodeMessage } from "./schema_codec.ts";
import { HOST_TO_WORKER } from "./worker_schema.ts";

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

Deno.test("the public root encodes a long text the worker frame decoder just decoded as the bytes it came from; same bytes as encoding it", () => {
  const root = publicProtoRoot();
  const event = root.lookupType("codex.code_mode.v1.ExecuteEvent");
  const encode = plainEncoder(event);
  const outcome = (text: string) => ({
    outcome: { completed: {}, contentItems: [{ text: { text: "short" } }, { text: { text } }] },
  });
  const text = "é🦀x".repeat(3_000);
  const plain = encode(outcome(text));
  // A frame whose StartCell source is the text: decoding it remembers the text with its bytes.
  const schema = HOST_TO_WORKER;
  const frame = encodeMessage(
    { startCell: { cellId: "c", source: text, tools: [], storeVersion: 0 } },
    schema,
  );
  const decoded = (decodeMessage(frame, schema) as { startCell: { source: string } }).startCell.source;
  assert.equal(decoded, text);
  const utf8 = rememberedUtf8(decoded);
  assert.ok(utf8 !== undefined, "remembered");
  assert.deepEqual(encode(outcome(decoded)), plain);
  // The copy is what is written: the remembered bytes, not a second encoding.
  utf8.fill(0x61);
  assert.equal(new TextDecoder().decode(encode(outcome(decoded))).includes("a".repeat(utf8.length)), true);
  // Malformed bytes are not remembered (they decode with replacement characters).
  const bad = encodeMessage({
    startCell: { cellId: "c", source: "x".repeat(5_000), tools: [], storeVersion: 0 },
  }, schema);
  bad[Math.floor(bad.length / 2)] = 0xff; // inside the text
  const replaced = (decodeMessage(bad, schema) as { startCell: { source: string } }).startCell.source;
  assert.equal(rememberedUtf8(replaced), undefined);
});

Deno.test("framedEncoder: a large response in one buffer behind the gRPC message prefix, the same bytes as plainEncoder; a small one as plainEncoder gives it", () => {
  const type = publicProtoRoot().lookupType("codex.code_mode.v1.ExecuteEvent");
  const plain = plainEncoder(type);
  const frame = framedEncoder(type);
  const event = (texts: string[]) => ({
    outcome: { cellId: "c1", contentItems: texts.map((text) => ({ text: { text } })), completed: {} },
  });
  for (
    const texts of [["x".repeat(FRAMED_FROM_BYTES)], ["é".repeat(50_000), "", "ok"], ["x".repeat(16 << 20)]]
  ) {
    const expected = plain(event(texts));
    const { bytes, framed } = frame(event(texts));
    assert.equal(framed, true);
    assert.equal(bytes.byteOffset, 0);
    assert.equal(bytes.byteLength, bytes.buffer.byteLength, "the buffer is the message's own");
    assert.equal(bytes[0], 0, "not compressed");
    assert.equal(new DataView(bytes.buffer).getUint32(1), expected.length);
    assert.ok(bytes.subarray(5).every((byte, i) => byte === expected[i]), "same bytes as plainEncoder");
  }
  const small = event(["x".repeat(FRAMED_FROM_BYTES - 100)]);
  assert.deepEqual(frame(small), { bytes: plain(small), framed: false });
  assert.deepEqual(frame({}), { bytes: plain({}), framed: false });
});

import assert from "node:assert/strict";
import fc from "fast-check";
import { PROTO_FILES, readProtoText } from "./loader.ts";
import protobuf, { asBuffer } from "./protobuf_runtime.ts";
import { createWorkerCodec, WORKER_PROTOCOL_VERSION } from "./worker_codec.ts";
import { decodeMessage, encodeMessage } from "./schema_codec.ts";
import { HOST_TO_WORKER, type MessageSchema, WORKER_TO_HOST } from "./worker_schema.ts";
import { encodeReadyFrame } from "./worker_ready.ts";
import { encodeFrame } from "./frame_codec.ts";

// The reference: protobufjs reading worker.proto itself.
const root = protobuf.parse(readProtoText(PROTO_FILES.worker), { keepCase: false }).root;
root.resolveAll();
const OPTIONS: protobuf.IConversionOptions = { longs: Number, enums: Number, oneofs: true, defaults: false };

/** Every message schema reachable from the two envelopes, by full name. */
function allSchemas(): Map<string, MessageSchema> {
  const seen = new Map<string, MessageSchema>();
  const visit = (schema: MessageSchema) => {
    if (seen.has(schema.name)) return;
    seen.set(schema.name, schema);
    for (const field of schema.fields) if (typeof field.type === "object") visit(field.type);
  };
  visit(HOST_TO_WORKER);
  visit(WORKER_TO_HOST);
  return seen;
}

/** protobufjs's plain object without the virtual fields of proto3 `optional` (`_name`). */
function withoutSyntheticOneofs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutSyntheticOneofs);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.entries(value).filter(([key]) => !key.startsWith("_")).map((
      [k, v],
    ) => [k, withoutSyntheticOneofs(v)]),
  );
}

Deno.test("the codec's table is worker.proto: every message, field number, name, type and oneof", () => {
  const schemas = allSchemas();
  for (const [name, schema] of schemas) {
    const type = root.lookupType(name);
    const reference = type.fieldsArray.map((field) => ({
      no: field.id,
      name: field.name,
      type: field.resolvedType ? field.resolvedType.fullName.replace(/^\./, "") : field.type,
      repeated: field.repeated,
      oneof: field.partOf?.name,
    }));
    const ours = schema.fields.map((field) => ({
      no: field.no,
      name: field.name,
      type: typeof field.type === "object" ? field.type.name : field.type,
      repeated: field.repeated === true,
      oneof: field.oneof,
    }));
    assert.deepEqual(ours, reference, name);
  }
  // Every message of worker.proto is reachable from the envelopes (nothing left out).
  const declared = root.lookup("codemode.worker.v1") as protobuf.Namespace;
  const names = declared.nestedArray.filter((n) => n instanceof protobuf.Type).map((t) =>
    t.fullName.slice(1)
  );
  assert.deepEqual([...schemas.keys()].sort(), names.sort());
});

/** Arbitrary plain objects of `schema`: any subset of fields, at most one member per oneof. */
function arbitrary(schema: MessageSchema, depth = 0): fc.Arbitrary<Record<string, unknown>> {
  const scalar = (type: string): fc.Arbitrary<unknown> => {
    switch (type) {
      case "string":
        return fc.oneof(
          fc.string({ unit: "binary", maxLength: 40 }),
          fc.string({ unit: "binary", minLength: 60, maxLength: 90 }),
          fc.constant(""),
          fc.constant("é€😀"),
        );
      case "bool":
        return fc.boolean();
      case "int32":
        return fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
      case "uint32":
        return fc.nat({ max: 2 ** 32 - 1 });
      default:
        return fc.oneof(fc.nat({ max: 300 }), fc.maxSafeNat());
    }
  };
  const value = (field: MessageSchema["fields"][number]): fc.Arbitrary<unknown> => {
    const one = typeof field.type === "object" ? arbitrary(field.type, depth + 1) : scalar(field.type);
    return field.repeated ? fc.array(one, { maxLength: 3 }) : one;
  };
  const plain = schema.fields.filter((f) => f.oneof === undefined);
  const groups = new Map<string, MessageSchema["fields"]>();
  for (const field of schema.fields) {
    if (field.oneof !== undefined) groups.set(field.oneof, [...(groups.get(field.oneof) ?? []), field]);
  }
  const parts: fc.Arbitrary<Record<string, unknown>>[] = [
    fc.record(Object.fromEntries(plain.map((f) => [f.name, value(f)])), { requiredKeys: [] }),
    ...[...groups.values()].map((members) =>
      fc.oneof(
        fc.constant({}),
        ...members.map((m) => value(m).map((v) => ({ [m.name]: v }))),
      )
    ),
  ];
  return fc.tuple(...parts).map((objects) => Object.assign({}, ...objects));
}

for (const schema of [HOST_TO_WORKER, WORKER_TO_HOST]) {
  Deno.test(`${schema.name}: bytes equal protobufjs's, and decoding equals protobufjs's toObject`, () => {
    const type = root.lookupType(schema.name);
    fc.assert(
      fc.property(arbitrary(schema), (value) => {
        const ours = encodeMessage(value, schema);
        const reference = type.encode(type.fromObject(value)).finish();
        assert.deepEqual([...ours], [...reference]);
        const decoded = decodeMessage(ours, schema);
        const expected = withoutSyntheticOneofs(type.toObject(type.decode(asBuffer(ours)), OPTIONS));
        assert.deepEqual(decoded, expected);
      }),
      { numRuns: 400 },
    );
  });
}

Deno.test("decoding skips unknown fields of every wire type and keeps the last member of a oneof", () => {
  const codec = createWorkerCodec();
  const stop = codec.encodeHostToWorker({ stopCell: { cellId: "7" } });
  const unknown = [
    0x78,
    0x96,
    0x01, // field 15, varint 150
    0x81,
    0x01,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8, // field 16, fixed64
    0x8a,
    0x01,
    2,
    0x41,
    0x42, // field 17, 2 bytes
    0x95,
    0x01,
    1,
    2,
    3,
    4, // field 18, fixed32
  ];
  const configure = encodeMessage({ configure: { sessionId: "s" } }, HOST_TO_WORKER);
  const bytes = new Uint8Array([...configure, ...unknown, ...stop]);
  assert.deepEqual(codec.decodeHostToWorker(bytes), { message: "stopCell", stopCell: { cellId: "7" } });
});

Deno.test("malformed bytes are refused, not misread", () => {
  const codec = createWorkerCodec();
  const good = codec.encodeWorkerToHost({ cellEvent: { cellId: "1", contentItem: { text: "hello" } } });
  for (let cut = 1; cut < good.length; cut++) {
    assert.throws(() => codec.decodeWorkerToHost(good.subarray(0, cut)), RangeError, `cut at ${cut}`);
  }
  assert.throws(() => codec.decodeWorkerToHost(new Uint8Array([0x0b])), RangeError); // wire type 3
  assert.throws(
    () => codec.decodeWorkerToHost(new Uint8Array([0x08, ...new Array(10).fill(0xff), 1])),
    RangeError,
  );
  assert.throws(() => codec.decodeWorkerToHost(new Uint8Array([0x00, 0x00])), RangeError); // field 0
});

Deno.test("a large text round-trips byte for byte", () => {
  const codec = createWorkerCodec();
  const text = "x€".repeat(3 << 20);
  const bytes = codec.encodeWorkerToHost({ cellEvent: { cellId: "9", contentItem: { text } } });
  const decoded = codec.decodeWorkerToHost(bytes);
  assert.equal(
    decoded.cellEvent?.contentItem && "text" in decoded.cellEvent.contentItem
      ? decoded.cellEvent.contentItem.text.length
      : -1,
    text.length,
  );
  const reference = root.lookupType("codemode.worker.v1.WorkerToHost");
  assert.equal(
    bytes.length,
    reference.encode({ cellEvent: { cellId: "9", contentItem: { text } } }).finish().length,
  );
});

Deno.test("lone surrogates are written as U+FFFD, short and long strings alike (as TextEncoder does)", () => {
  const codec = createWorkerCodec();
  // protobufjs writes them as raw surrogate bytes (not UTF-8); this codec follows the web standard.
  for (const text of ["a\ud800b\udc00c\ud83d", "x".repeat(100) + "\ud800" + "y".repeat(100) + "\udfff"]) {
    const bytes = codec.encodeWorkerToHost({ cellEvent: { cellId: "1", notify: text } });
    const expected = new TextEncoder().encode(text);
    assert.deepEqual([...bytes.subarray(bytes.length - expected.length)], [...expected]);
    const decoded = codec.decodeWorkerToHost(bytes);
    assert.equal(decoded.cellEvent?.notify, new TextDecoder().decode(expected));
  }
});

Deno.test("the hand-written Ready frame equals the codec's, for any version string", () => {
  const codec = createWorkerCodec();
  for (const version of ["2.9.6", "", "é".repeat(70), "x".repeat(200)]) {
    for (const protocolVersion of [WORKER_PROTOCOL_VERSION, 0, 127, 128, 300_000]) {
      const expected = encodeFrame(
        codec.encodeWorkerToHost({ ready: { denoVersion: version, protocolVersion } }),
        1 << 20,
      );
      assert.deepEqual(encodeReadyFrame(version, protocolVersion), expected, `${version} ${protocolVersion}`);
    }
  }
});

/**
 * Request bytes that are no message of the request type (issue 20, item 7; issue 25), sent raw to a
 * real host: as Codex's own host (prost under tonic) answers them, `INTERNAL` with
 * `failed to decode Protobuf message: ` and prost's description, after the path of the field
 * (innermost first): a known field with another wire type (e.g. `WaitRequest.yield_time_ms`
 * length-delimited), truncated bytes, strings that are not UTF-8, bad keys. Well-formed raw bytes,
 * unknown fields of any wire type included (groups too), still work. Every text below was
 * recorded from `codex-code-mode-host` 0.171.
 */
import assert from "node:assert/strict";
import { createChannel, createClient, Status } from "nice-grpc";
import { codeModeHostDefinition } from "../proto/loader.ts";
import {
  CHANNEL_OPTIONS,
  collect,
  grpcError,
  type Msg,
  openSession,
  rawClient,
  startHost,
} from "./_harness.ts";

/** A client whose requests are the bytes given (responses decoded as usual). */
function bytesClient(address: string) {
  const definition: Msg = {};
  for (const [name, method] of Object.entries(codeModeHostDefinition())) {
    definition[name] = { ...method, requestSerialize: (bytes: Uint8Array) => bytes };
  }
  const channel = createChannel(address, undefined, CHANNEL_OPTIONS);
  return { client: createClient(definition, channel) as Msg, channel };
}

const utf8 = new TextEncoder();

/** A length-delimited field. */
function ld(no: number, payload: Uint8Array | string): number[] {
  const bytes = typeof payload === "string" ? utf8.encode(payload) : payload;
  return [(no << 3) | 2, bytes.length, ...bytes];
}

Deno.test("Undecodable request bytes are INTERNAL with prost's text and the field's path, as on the reference", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const { client, channel } = bytesClient(h.address);
  try {
    const waitHead = [...ld(1, s.id), ...ld(2, "1"), ...ld(3, "w1")];
    // yield_time_ms (4, uint64) sent length-delimited.
    const refused = (details: string) => ({
      code: Status.INTERNAL,
      details: `failed to decode Protobuf message: ${details}`,
    });
    assert.deepEqual(
      await grpcError(client.wait(new Uint8Array([...waitHead, ...ld(4, "10")]))),
      refused("WaitRequest.yield_time_ms: invalid wire type: LengthDelimited (expected Varint)"),
    );
    // session_id (1, string) sent as a varint.
    assert.deepEqual(
      await grpcError(client.wait(new Uint8Array([0x08, 0x01]))),
      refused("WaitRequest.session_id: invalid wire type: Varint (expected LengthDelimited)"),
    );
    // Inside a nested message: ExecuteRequest.enabled_tools[0].kind (4, enum) as a fixed32.
    const tool = [...ld(1, "t"), (4 << 3) | 5, 1, 0, 0, 0];
    const execute = [...ld(1, s.id), ...ld(2, "e1"), ...ld(4, "text(1)"), ...ld(5, new Uint8Array(tool))];
    assert.deepEqual(
      await grpcError(collect(client.execute(new Uint8Array(execute)))),
      refused(
        "ToolDefinition.kind: ExecuteRequest.enabled_tools: invalid wire type: ThirtyTwoBit (expected Varint)",
      ),
    );
    // Two levels down, and a oneof member (named by its oneof).
    assert.deepEqual(
      await grpcError(collect(client.execute(new Uint8Array([0x2a, 0x04, 0x12, 0x02, 0x08, 0x01])))),
      refused(
        "ToolName.name: ToolDefinition.tool_name: ExecuteRequest.enabled_tools: invalid wire type: Varint (expected LengthDelimited)",
      ),
    );
    assert.deepEqual(
      await grpcError(client.completeToolCall(new Uint8Array([0x22, 0x04, 0x0a, 0x02, 0xc3, 0x28]))),
      refused(
        "ToolCallFailed.message: CompleteToolCallRequest.outcome: invalid string value: data is not UTF-8 encoded",
      ),
    );
    assert.deepEqual(
      await grpcError(client.yieldObservation(new Uint8Array([0x18, 0x01]))),
      refused("YieldObservationRequest.observation: invalid wire type: Varint (expected LengthDelimited)"),
    );
    // Truncated: a length beyond the end; an unfinished varint; bad keys; stray end-group tags.
    assert.deepEqual(
      await grpcError(client.wait(new Uint8Array([0x0a, 0x10, 0x61]))),
      refused("WaitRequest.session_id: buffer underflow"),
    );
    assert.deepEqual(
      await grpcError(client.wait(new Uint8Array([0xff, 0xff, 0xff]))),
      refused("invalid varint"),
    );
    assert.deepEqual(
      await grpcError(client.wait(new Uint8Array([0x00, 0x01]))),
      refused("invalid tag value: 0"),
    );
    assert.deepEqual(
      await grpcError(client.wait(new Uint8Array([0x0e, 0x01]))),
      refused("invalid wire type value: 6"),
    );
    assert.deepEqual(
      await grpcError(client.wait(new Uint8Array([0x80, 0x80, 0x80, 0x80, 0x10]))),
      refused("invalid key value: 4294967296"),
    );
    assert.deepEqual(
      await grpcError(client.wait(new Uint8Array([0x4c]))),
      refused("unexpected end group tag"),
    );
    assert.deepEqual(await grpcError(client.wait(new Uint8Array([0x49, 1, 2]))), refused("buffer underflow"));
    // Even GetProcessMetrics decodes its request first.
    assert.deepEqual(
      await grpcError(client.getProcessMetrics(new Uint8Array([0xff]))),
      refused("invalid varint"),
    );
    // Well-formed bytes with unknown fields of every wire type are accepted: a missing cell.
    const group = [0x83, 0x01, 0x08, 0x01, 0x84, 0x01]; // field 16: a group holding a varint
    const unknown = [
      0x78,
      0x01,
      0x79,
      1,
      2,
      3,
      4,
      5,
      6,
      7,
      8,
      ...ld(14, "x"),
      0x85,
      0x01,
      1,
      2,
      3,
      4,
      ...group,
    ];
    const ok = await client.wait(new Uint8Array([...waitHead, 4 << 3, 1, ...unknown]));
    assert.ok(ok.missingCell, JSON.stringify(ok));
  } finally {
    channel.close();
  }
  // The session and host are unaffected.
  const { client: plain, channel: plainChannel } = rawClient(h.address);
  try {
    assert.ok((await plain.wait({ sessionId: s.id, cellId: "9", waitId: "w9", yieldTimeMs: 1 })).missingCell);
  } finally {
    plainChannel.close();
  }
});

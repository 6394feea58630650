/**
 * Request bytes that are no message of the request type (issue 20, item 7), sent raw to a real
 * host: a known field with another wire type (e.g. `WaitRequest.yield_time_ms` length-delimited)
 * is refused with `INVALID_ARGUMENT` and a message naming the field, not `INTERNAL Error
 * deserializing request`; so are truncated and otherwise undecodable bytes. Well-formed raw bytes,
 * unknown fields of any wire type included, still work.
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

Deno.test("A known field with the wrong wire type is INVALID_ARGUMENT naming the field; undecodable bytes too", async () => {
  await using h = await startHost();
  await using s = await openSession(h.client);
  const { client, channel } = bytesClient(h.address);
  try {
    const waitHead = [...ld(1, s.id), ...ld(2, "1"), ...ld(3, "w1")];
    // yield_time_ms (4, uint64) sent length-delimited.
    assert.deepEqual(await grpcError(client.wait(new Uint8Array([...waitHead, ...ld(4, "10")]))), {
      code: Status.INVALID_ARGUMENT,
      details: "code-mode request is malformed: field yieldTimeMs (4) of codex.code_mode.v1.WaitRequest " +
        "has wire type 2, expected 0",
    });
    // session_id (1, string) sent as a varint.
    assert.deepEqual(await grpcError(client.wait(new Uint8Array([0x08, 0x01]))), {
      code: Status.INVALID_ARGUMENT,
      details: "code-mode request is malformed: field sessionId (1) of codex.code_mode.v1.WaitRequest " +
        "has wire type 0, expected 2",
    });
    // Inside a nested message: ExecuteRequest.enabled_tools[0].kind (4, enum) as a fixed32.
    const tool = [...ld(1, "t"), (4 << 3) | 5, 1, 0, 0, 0];
    const execute = [...ld(1, s.id), ...ld(2, "e1"), ...ld(4, "text(1)"), ...ld(5, new Uint8Array(tool))];
    const refused = await grpcError(collect(client.execute(new Uint8Array(execute))));
    assert.equal(refused.code, Status.INVALID_ARGUMENT);
    assert.match(
      refused.details,
      /^code-mode request is malformed: field kind \(4\) of codex\.code_mode\.v1\.\w+ has wire type 5, expected 0$/,
    );
    // Truncated: a length beyond the end.
    const truncated = await grpcError(client.wait(new Uint8Array([0x0a, 0x10, 0x61])));
    assert.equal(truncated.code, Status.INVALID_ARGUMENT);
    assert.match(truncated.details, /^code-mode request is malformed: /);
    // Well-formed bytes with unknown fields of every wire type are accepted: a missing cell.
    const unknown = [0x78, 0x01, 0x79, 1, 2, 3, 4, 5, 6, 7, 8, ...ld(14, "x"), 0x85, 0x01, 1, 2, 3, 4];
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

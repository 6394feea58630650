/**
 * Unit tests of the reference suite's wire decoding and normalisation (no host needed): what the
 * suite compares must keep field presence and unknown fields, and take out only what varies.
 */
import assert from "node:assert/strict";
import { differences, normalise } from "./_observe.ts";
import { decodeMessage, encodeMessage, isImplicitDefault } from "./_wire.ts";
import { relabelCells } from "./_battery.ts";

function bytes(...parts: number[][]): Uint8Array {
  return new Uint8Array(parts.flat());
}

Deno.test("a field the schema does not know is reported as #N, with its value", () => {
  // SessionOpened: field 1 "a", then an unknown field 9 = varint 5.
  const decoded = decodeMessage("SessionOpened", bytes([0x0a, 1, 0x61], [0x48, 5]));
  assert.deepEqual(decoded, { session_id: "a", "#9": 5 });
});

Deno.test("fields Codex 0.171 puts on the wire are known by name, whatever the repository's proto has", () => {
  const wire = encodeMessage("SessionOpened", { session_id: "s", supports_catalog_revision: true });
  assert.deepEqual(decodeMessage("SessionOpened", wire), {
    session_id: "s",
    supports_catalog_revision: true,
  });
  const wait = encodeMessage("WaitRequest", { session_id: "s", cell_id: "1", wait_id: "w", max_tokens: 20 });
  assert.equal(decodeMessage("WaitRequest", wait).max_tokens, 20);
});

Deno.test("a field absent from the wire is absent from the decoded message (presence is observable)", () => {
  const decoded = decodeMessage(
    "ExecutionOutcome",
    encodeMessage("ExecutionOutcome", { cell_id: "1", yielded: {} }),
  );
  assert.deepEqual(decoded, { cell_id: "1", yielded: {} });
  assert.equal("code_mode_host_duration_ns" in decoded, false);
});

Deno.test("a zero without explicit presence is left out unless the scenario observes the raw wire", () => {
  // CellClosed with final_tool_call_sequence = 0 written explicitly (field 3, varint 0).
  const decoded = decodeMessage("CellClosed", bytes([0x12, 1, 0x31], [0x18, 0]));
  assert.equal(isImplicitDefault(decoded, "final_tool_call_sequence"), true);
  assert.deepEqual(normalise(decoded), { cell_id: "1" });
  assert.deepEqual(normalise(decoded, { raw: true }), { cell_id: "1", final_tool_call_sequence: 0 });
  // An explicit-presence field keeps its zero: output_truncation UNSPECIFIED (field 2, varint 0).
  const opened = decodeMessage("SessionOpened", bytes([0x10, 0]));
  assert.deepEqual(normalise(opened), { output_truncation: "OUTPUT_TRUNCATION_MODE_UNSPECIFIED" });
});

Deno.test("normalising numbers UUIDs by first appearance and keeps durations' presence only", () => {
  const a = "0f0e0d0c-0b0a-4908-8706-050403020100";
  const b = "11111111-2222-4333-8444-555555555555";
  const observation = [
    { opened: a, message: `unknown code-mode session ${b}` },
    { again: a, code_mode_host_duration_ns: 123456, result_buffered_for_ns: 0 },
  ];
  assert.deepEqual(normalise(observation), [
    { opened: "<uuid-1>", message: "unknown code-mode session <uuid-2>" },
    { again: "<uuid-1>", code_mode_host_duration_ns: "<ns>", result_buffered_for_ns: "<ns>" },
  ]);
});

Deno.test("long strings compare by length and hash; equal texts stay equal, different ones differ", () => {
  const x = normalise({ t: "x".repeat(1000) });
  assert.match(x.t, /^<1000 chars #[0-9a-f]{8} "x+"…"x+">$/);
  assert.deepEqual(normalise({ t: "x".repeat(1000) }), x);
  assert.notDeepEqual(normalise({ t: "x".repeat(999) + "y" }), x);
});

Deno.test("an OK status's message and headers are left out unless raw; other statuses keep theirs", () => {
  const wire = {
    status: { code: "OK", details: "OK" },
    headers: { "x-code-mode-subscription": "registered" },
    failed: { code: "NOT_FOUND", details: "unknown code-mode session s" },
  };
  assert.deepEqual(normalise(wire), {
    status: { code: "OK" },
    failed: { code: "NOT_FOUND", details: "unknown code-mode session s" },
  });
  assert.deepEqual(normalise(wire, { raw: true }), wire);
});

Deno.test("differences name each differing path with both values", () => {
  assert.deepEqual(differences([{ a: { b: 1, c: 2 } }], [{ a: { b: 1, c: 3 } }]), [
    "/0/a/c: reference 2 | ours 3",
  ]);
  assert.deepEqual(differences({ x: 1 }, { x: 1 }), []);
});

Deno.test("V1 frame ids are numbered per kind by first appearance; other ids stay", () => {
  const frames = [
    { type: "operation/response", id: 41 },
    { type: "delegate/request", id: 41 },
    { type: "execute/initialResponse", id: 41 },
    { type: "operation/response", id: 42 },
    { type: "delegate/cancel", id: 41 },
    { other: { id: 7 } },
  ];
  assert.deepEqual(normalise(frames), [
    { type: "operation/response", id: "<request-1>" },
    { type: "delegate/request", id: "<delegate-1>" },
    { type: "execute/initialResponse", id: "<request-1>" },
    { type: "operation/response", id: "<request-2>" },
    { type: "delegate/cancel", id: "<delegate-1>" },
    { other: { id: 7 } },
  ]);
});

Deno.test("a battery entry's cell IDs are renamed in order of appearance, texts included", () => {
  const records = [
    { cell: { events: [{ started: { cell_id: "7" } }, { outcome: { cell_id: "7" } }] } },
    {
      wait: {
        response: { missing_cell: { cell_id: "9", completed: { error_text: "exec cell 9 not found" } } },
      },
    },
    { frames: [{ type: "cell/closed", cellId: "7" }] },
  ];
  assert.deepEqual(relabelCells(records), [
    { cell: { events: [{ started: { cell_id: "c1" } }, { outcome: { cell_id: "c1" } }] } },
    {
      wait: {
        response: { missing_cell: { cell_id: "c2", completed: { error_text: "exec cell c2 not found" } } },
      },
    },
    { frames: [{ type: "cell/closed", cellId: "c1" }] },
  ]);
});

Deno.test("a V1 frame length keeps all but its last three digits (durations vary in length)", () => {
  const at = (n: number) => `code-mode IPC frame length ${n} exceeds 67108864 bytes`;
  assert.equal(normalise(at(73400593)), normalise(at(73400594)));
  assert.notEqual(normalise(at(73400593)), normalise(at(73500593)));
  assert.equal(normalise(at(73400593)), "code-mode IPC frame length 73400<ddd> exceeds 67108864 bytes");
  const found = (n: number) =>
    `Error, encoded message length too large: found ${n} bytes, the limit is: 67108864 bytes`;
  assert.equal(normalise(found(73400362)), normalise(found(73400361)));
  assert.notEqual(normalise(found(73400362)), normalise(found(74400362)));
});

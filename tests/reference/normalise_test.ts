import assert from "node:assert/strict";
import { normalise, normaliseText } from "./_normalise.ts";

Deno.test("normaliseText replaces wall times, UUIDs and exec_command's chunk_id and wall_time_seconds only", () => {
  assert.equal(
    normaliseText("Script completed\nWall time 12.3 seconds\nOutput:\n"),
    "Script completed\nWall time <T> seconds\nOutput:\n",
  );
  assert.equal(normaliseText("id 01a234f0-22f5-7f10-81f4-9884baf03cf3."), "id <uuid>.");
  assert.equal(
    normaliseText('{"chunk_id":"07f96b","wall_time_seconds":0.060469034,"exit_code":0,"output":"hi\\n"}'),
    '{"chunk_id":"<chunk>","wall_time_seconds":<seconds>,"exit_code":0,"output":"hi\\n"}',
  );
  assert.equal(
    normaliseText('"{\\"chunk_id\\":\\"ab12\\",\\"wall_time_seconds\\":1e-3}"'),
    '"{\\"chunk_id\\":\\"<chunk>\\",\\"wall_time_seconds\\":<seconds>}"',
  );
  assert.equal(
    normaliseText("Chunk ID: 07f96b\nWall time: 0.0605 seconds\nProcess exited with code 0"),
    "Chunk ID: <chunk>\nWall time: <seconds> seconds\nProcess exited with code 0",
  );
  assert.equal(normaliseText("Wall time is 3 seconds; line 7"), "Wall time is 3 seconds; line 7");
  assert.equal(
    normaliseText('{\\"createdAt\\":1796193636,\\"updatedAt\\":17,"createdAt": 5}'),
    '{\\"createdAt\\":<time>,\\"updatedAt\\":<time>,"createdAt": <time>}',
  );
  assert.equal(normaliseText("A /tmp/run-1/work/x.txt", [["/tmp/run-1/work", "<work>"]]), "A <work>/x.txt");
});

Deno.test("normalise keeps the tool outputs in order without Codex's item ids, and sorts only adjacent notify() items", () => {
  const text = (t: string) => ({ type: "input_text", text: t });
  const seen = normalise([
    { type: "message", role: "user", content: [text("go")] },
    { type: "custom_tool_call", call_id: "c1", name: "exec", input: "…" },
    {
      type: "custom_tool_call_output",
      id: "ctco_1",
      call_id: "c1",
      output: [text("Wall time 0.1 seconds"), text("a")],
    },
    { type: "custom_tool_call_output", id: "ctco_2", call_id: "c1", name: "exec", output: "z-note" },
    { type: "custom_tool_call_output", id: "ctco_3", call_id: "c1", name: "exec", output: "a-note" },
    { type: "function_call_output", id: "fco_4", call_id: "c2", output: "Wall time 2 seconds" },
    { type: "custom_tool_call_output", id: "ctco_5", call_id: "c2", name: "exec", output: "only" },
  ]);
  assert.deepEqual(seen, [
    { type: "custom_tool_call_output", call_id: "c1", output: [text("Wall time <T> seconds"), text("a")] },
    { type: "custom_tool_call_output", call_id: "c1", name: "exec", output: "a-note" },
    { type: "custom_tool_call_output", call_id: "c1", name: "exec", output: "z-note" },
    { type: "function_call_output", call_id: "c2", output: "Wall time <T> seconds" },
    { type: "custom_tool_call_output", call_id: "c2", name: "exec", output: "only" },
  ]);
});

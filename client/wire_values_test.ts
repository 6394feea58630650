import assert from "node:assert/strict";
import { catalogKey, toRuntimeResponse, wireTool } from "./wire_values.ts";
import type { ToolDefinition } from "./types.ts";

Deno.test("toRuntimeResponse maps each outcome kind, content item and image detail, with the public cell ID", () => {
  assert.deepEqual(
    toRuntimeResponse({
      cellId: "3",
      contentItems: [
        { item: "text", text: { text: "a" } },
        { item: "text", text: {} },
        { item: "image", image: { imageUrl: "data:x", detail: 0 } },
        { item: "image", image: { imageUrl: "data:y", detail: 4 } },
        { item: "audio", audio: { audioUrl: "data:z" } },
      ],
      codeModeHostDurationNs: "9007199254740993",
      outcome: "completed",
      completed: {},
    }, "g2:3"),
    {
      type: "result",
      cellId: "g2:3",
      contentItems: [
        { type: "input_text", text: "a" },
        { type: "input_text", text: "" },
        { type: "input_image", image_url: "data:x" },
        { type: "input_image", image_url: "data:y", detail: "original" },
        { type: "input_audio", audio_url: "data:z" },
      ],
      codeModeHostDurationNs: 9007199254740992,
    },
  );
  assert.equal(
    toRuntimeResponse({ cellId: "1", outcome: "terminated", terminated: {} }, "1").type,
    "terminated",
  );
  assert.equal(toRuntimeResponse({ cellId: "1", outcome: "yielded", yielded: {} }, "1").type, "yielded");
  assert.equal(toRuntimeResponse({ cellId: "1" }, "1").type, "yielded", "no outcome set reads as yielded");
});

Deno.test("toRuntimeResponse refuses an image detail out of range and an empty content item", () => {
  assert.throws(
    () => toRuntimeResponse({ contentItems: [{ item: "image", image: { detail: 5 } }] }, "1"),
    { message: "code-mode image has invalid detail value 5" },
  );
  assert.throws(() => toRuntimeResponse({ contentItems: [{}] }, "1"), {
    message: "code-mode execution returned an empty content item",
  });
});

Deno.test("wireTool sends schemas as JSON bytes and the kind as its number; catalogKey is equal exactly for equal tool sets", () => {
  const tool: ToolDefinition = {
    name: "lookup",
    toolName: { name: "lookup", namespace: "mcp__kb" },
    description: "d",
    kind: "freeform",
    outputSchema: { type: "string" },
  };
  assert.deepEqual(wireTool(tool), {
    name: "lookup",
    toolName: { name: "lookup", namespace: "mcp__kb" },
    description: "d",
    kind: 2,
    outputSchemaJson: new TextEncoder().encode('{"type":"string"}'),
  });
  const key = catalogKey([wireTool(tool)]);
  assert.equal(catalogKey([wireTool({ ...tool })]), key);
  assert.notEqual(catalogKey([wireTool({ ...tool, description: "e" })]), key);
  assert.notEqual(catalogKey([wireTool({ ...tool, toolName: { name: "lookup" } })]), key);
  assert.notEqual(catalogKey([wireTool(tool), wireTool(tool)]), key);
  assert.equal(catalogKey([]), "[]", "Binding.catalogFor reads an empty set by this key");
});

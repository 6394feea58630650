import assert from "node:assert/strict";
import type {
  CompleteToolCallRequest,
  ExecuteEventInit,
  ExecuteRequest,
  OpenSessionRequest,
  SessionEvent,
  WaitResponse,
  WaitResponseInit,
} from "./code_mode_types.ts";
import { generateCodeModeTypes, GENERATED_TYPES_URL } from "./gen_types.ts";
import { CODE_MODE_SERVICE, plainDecoder, plainEncoder, publicProtoRoot } from "./loader.ts";

Deno.test("proto/code_mode_types.ts is what proto/gen_types.ts generates from the .proto file", () => {
  assert.equal(
    Deno.readTextFileSync(GENERATED_TYPES_URL),
    generateCodeModeTypes(),
    "stale: run deno run --allow-read --allow-write proto/gen_types.ts",
  );
});

function roundTrip<T>(name: string, value: unknown): T {
  const type = publicProtoRoot().lookupType(`codex.code_mode.v1.${name}`);
  return plainDecoder(type)(plainEncoder(type)(value)) as T;
}

Deno.test("decoded messages have the generated shape: 64-bit as strings, enums as numbers, oneof names", () => {
  const open = roundTrip<OpenSessionRequest>("OpenSessionRequest", {
    cellExecutionLimits: { maxYieldTimeMs: 5, maxHeapSizeBytes: 2 ** 40 },
    outputTruncation: 2,
  });
  assert.deepEqual(open, {
    cellExecutionLimits: {
      maxYieldTimeMs: "5",
      _maxYieldTimeMs: "maxYieldTimeMs",
      maxHeapSizeBytes: "1099511627776",
      _maxHeapSizeBytes: "maxHeapSizeBytes",
    },
    _cellExecutionLimits: "cellExecutionLimits",
    outputTruncation: 2,
    _outputTruncation: "outputTruncation",
  });

  const complete = roundTrip<CompleteToolCallRequest>("CompleteToolCallRequest", {
    sessionId: "s",
    succeeded: { outputJson: new TextEncoder().encode("1") },
  });
  assert.equal(complete.outcome, "succeeded");
  if (complete.outcome === "succeeded") {
    assert.ok(complete.succeeded.outputJson instanceof Uint8Array);
    assert.deepEqual([...complete.succeeded.outputJson], [0x31]);
  }

  // Unset fields are left out, also inside repeated messages.
  const execute = roundTrip<ExecuteRequest>("ExecuteRequest", {
    executionId: "e",
    enabledTools: [{ name: "t", kind: 7 }],
  });
  assert.deepEqual(execute, { executionId: "e", enabledTools: [{ name: "t", kind: 7 }] });

  const event = roundTrip<SessionEvent>("SessionEvent", {
    cellClosed: { cellId: "1", finalToolCallSequence: 3 },
  });
  assert.equal(event.event, "cellClosed");
  assert.equal(event.cellClosed?.finalToolCallSequence, "3");
});

Deno.test("the Init types are what the encoder takes", () => {
  const started: ExecuteEventInit = { started: { executionId: "e", cellId: "1" } };
  const outcome: WaitResponseInit = {
    liveCell: {
      cellId: "1",
      contentItems: [{ text: { text: "hi" } }, { image: { imageUrl: "data:", detail: 1 } }],
      completed: { errorText: "x" },
      codeModeHostDurationNs: 12,
    },
  };
  const root = publicProtoRoot();
  assert.ok(plainEncoder(root.lookupType("codex.code_mode.v1.ExecuteEvent"))(started).length > 0);
  const bytes = plainEncoder(root.lookupType("codex.code_mode.v1.WaitResponse"))(outcome);
  const back = plainDecoder(root.lookupType("codex.code_mode.v1.WaitResponse"))(bytes) as WaitResponse;
  assert.equal(back.liveCell?.completed?.errorText, "x");
  assert.equal(back.liveCell?.codeModeHostDurationNs, "12");
});

Deno.test("the generated service lists every method of the loader's service", () => {
  const methods = publicProtoRoot().lookupService(CODE_MODE_SERVICE).methodsArray.map((m) =>
    m.name[0].toLowerCase() + m.name.slice(1)
  );
  const text = generateCodeModeTypes();
  for (const method of methods) assert.match(text, new RegExp(`\\n  ${method}\\(\\n`));
});

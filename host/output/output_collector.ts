/**
 * Output collectors shared by host code (SPEC §8.3, §8.6): the Client collector keeps every item in
 * order (`client_output.ts`); the Server collector bounds one window as the reference host does
 * (`server_output.ts`); their vocabulary is `output_items.ts`, re-exported here.
 *
 * Token truncation is `token_truncation.ts`, over {@link OutputCollector.entries}.
 *
 * @module
 */
import { ClientOutputCollector } from "./client_output.ts";
import type { OutputCollector, OutputItem, OutputLimits, OutputMode } from "./output_items.ts";
import { ServerOutputCollector } from "./server_output.ts";

export * from "./output_items.ts";
export { SERVER_IMAGE_BYTES, SERVER_MAX_ITEMS } from "./server_output.ts";

/**
 * Creates an empty collector for a mode.
 *
 * @param mode `"client"` (plain ordered list) or `"server"` (bounded, SPEC §8.6)
 * @param limits Server limits; ignored in Client mode
 * @returns the collector
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { createOutputCollector } from "./output_collector.ts";
 *
 * const out = createOutputCollector("server", { maxTextBytes: 8 });
 * out.push({ type: "text", text: "abcdef" });
 * out.push({ type: "text", text: "ghij" });
 * assert.deepEqual(out.render().map((i) => i.type === "text" && i.text), [
 *   "abcd",
 *   "[Code Mode session output limit reached: omitted 2 text bytes; discarded 1 text segments, 0 images, 0 audio items]",
 *   "ghij",
 * ]);
 * ```
 */
export function createOutputCollector(mode: OutputMode, limits: OutputLimits = {}): OutputCollector {
  return mode === "server" ? new ServerOutputCollector(limits) : new ClientOutputCollector(limits);
}

/**
 * Whether two collectors render to the same items (SPEC §4.12: internal state is not compared).
 *
 * @param a one collector
 * @param b the other
 * @returns true when the renderings are structurally equal
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { createOutputCollector, sameRendering } from "./output_collector.ts";
 *
 * const a = createOutputCollector("client");
 * const b = createOutputCollector("server");
 * a.push({ type: "text", text: "x" });
 * b.push({ type: "text", text: "x" });
 * assert.ok(sameRendering(a, b));
 * ```
 */
export function sameRendering(a: OutputCollector, b: OutputCollector): boolean {
  const x = a.render();
  const y = b.render();
  return x.length === y.length && x.every((item, i) => sameItem(item, y[i]));
}

function sameItem(a: OutputItem, b: OutputItem): boolean {
  switch (a.type) {
    case "text":
      return b.type === "text" && a.text === b.text;
    case "image":
      return b.type === "image" && a.imageUrl === b.imageUrl && a.detail === b.detail;
    case "audio":
      return b.type === "audio" && a.audioUrl === b.audioUrl;
  }
}

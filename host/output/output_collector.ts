/**
 * Output collectors shared by host code (SPEC §8.3, §8.6): the Client collector keeps every item in
 * order (`client_output.ts`); the Server collector bounds one window as the reference host does
 * (`server_output.ts`); their vocabulary is `output_items.ts`, re-exported here.
 *
 * Token truncation is `token_truncation.ts`, over {@link OutputCollector.entries}.
 *
 * @module
 */
import { BudgetedCollector, ITEM_OVERHEAD_BYTES } from "./budgeted_output.ts";
import { ClientOutputCollector } from "./client_output.ts";
import type { ByteBudget, OutputCollector, OutputItem, OutputLimits, OutputMode } from "./output_items.ts";
import { SERVER_IMAGE_BYTES, SERVER_MAX_ITEMS, ServerOutputCollector } from "./server_output.ts";
import { MAX_MESSAGE_BYTES, MAX_TEXT_BYTES } from "../../proto/bytes.ts";

export * from "./output_items.ts";
export { BudgetedCollector, ITEM_OVERHEAD_BYTES } from "./budgeted_output.ts";
export { SERVER_IMAGE_BYTES, SERVER_MAX_ITEMS } from "./server_output.ts";

/**
 * Creates an empty collector for a mode.
 *
 * @param mode `"client"` (plain ordered list) or `"server"` (bounded, SPEC §8.6)
 * @param limits Server limits; in Client mode only `maxMessageBytes`
 * @param budget the session's share of the host's memory budget; absent: not charged
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
export function createOutputCollector(
  mode: OutputMode,
  limits: OutputLimits = {},
  budget?: ByteBudget,
): OutputCollector {
  const inner = mode === "server" ? new ServerOutputCollector(limits) : new ClientOutputCollector(limits);
  if (budget === undefined) return inner;
  return mode === "server"
    ? new BudgetedCollector(inner, { budget, cap: serverWindowCharge(limits) })
    : new BudgetedCollector(inner, { budget, maxMessageBytes: limits.maxMessageBytes ?? MAX_MESSAGE_BYTES });
}

/**
 * The most a Server window can hold, as charged: its retained text (as UTF-16, twice its UTF-8
 * bound at most), images, audio, and an overhead per item.
 */
function serverWindowCharge(limits: OutputLimits): number {
  return 2 * (limits.maxTextBytes ?? MAX_TEXT_BYTES) + (limits.maxImageBytes ?? SERVER_IMAGE_BYTES) +
    (limits.maxAudioBytes ?? MAX_MESSAGE_BYTES) + (limits.maxItems ?? SERVER_MAX_ITEMS) * ITEM_OVERHEAD_BYTES;
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

/**
 * A collector whose held bytes count against the host's memory budget (`hostBufferedBytes`,
 * issue 27): it wraps a Client or Server collector and charges a {@link ByteBudget} for what it
 * holds.
 *
 * Contract:
 * - Each pushed item is charged its payload (UTF-8 bytes of its text or URL) plus
 *   {@link ITEM_OVERHEAD_BYTES}, up to `cap` per window (the most the wrapped window can retain:
 *   a Server window's bounds); a Client window that outgrew `maxMessageBytes` retains nothing and
 *   holds no charge.
 * - An item the budget refuses is not kept, nor is any later item of the window: the window renders
 *   what it kept, then one {@link budgetNoticeText} with the count and bytes refused. Output
 *   already kept stays deliverable.
 * - `take()` moves the charge and the refusal with the taken window; `release()` (the window was
 *   handed to an observer) gives its charge back.
 *
 * @module
 */
import {
  budgetNoticeText,
  type ByteBudget,
  contentItemEncodedBytes,
  contentItemJson,
  type ContentJsonSize,
  type OutputCollector,
  type OutputItem,
  type PushedItem,
  type RenderedEntry,
} from "./output_items.ts";
import { utf8ByteLength } from "../../proto/bytes.ts";

/** What an item costs beyond its payload: the objects that hold it. */
export const ITEM_OVERHEAD_BYTES = 64;

/**
 * The bytes an item is charged.
 *
 * @param item the item
 * @returns its payload's UTF-8 bytes plus {@link ITEM_OVERHEAD_BYTES}
 */
export function itemCharge(item: PushedItem): number {
  switch (item.type) {
    case "text":
      return utf8ByteLength(item.text) + ITEM_OVERHEAD_BYTES;
    case "trimmedText":
      return utf8ByteLength(item.head) + utf8ByteLength(item.tail) + ITEM_OVERHEAD_BYTES;
    case "image":
      return item.imageUrl.length + ITEM_OVERHEAD_BYTES;
    case "audio":
      return item.audioUrl.length + ITEM_OVERHEAD_BYTES;
    case "droppedMedia":
      return ITEM_OVERHEAD_BYTES;
  }
}

/** Options of a {@link BudgetedCollector}. */
export interface BudgetedOptions {
  /** The session's share of the host budget. */
  budget: ByteBudget;
  /** The most one window of the wrapped collector can hold, in charged bytes. Default: no cap. */
  cap?: number;
  /** Client mode: the window's `maxMessageBytes` (past it, it retains nothing). */
  maxMessageBytes?: number;
}

/** A collector charged against the host's memory budget (see the module's contract). */
export class BudgetedCollector implements OutputCollector {
  readonly #inner: OutputCollector;
  readonly #options: BudgetedOptions;
  /** Charged for this window's pushes (before the cap). */
  #pushed = 0;
  /** Charged to the budget now. */
  #charged = 0;
  #refusedItems = 0;
  #refusedBytes = 0;

  /**
   * @param inner the wrapped (empty) collector
   * @param options the budget, the window cap, the Client limit
   */
  constructor(inner: OutputCollector, options: BudgetedOptions) {
    this.#inner = inner;
    this.#options = options;
  }

  get mode(): OutputCollector["mode"] {
    return this.#inner.mode;
  }

  get isEmpty(): boolean {
    return this.#inner.isEmpty && this.#refusedItems === 0;
  }

  get encodedBytes(): number {
    return this.#inner.encodedBytes + (this.#refusedItems > 0 ? contentItemEncodedBytes(this.#notice()!) : 0);
  }

  get omittedTextBytes(): number {
    return this.#inner.omittedTextBytes;
  }

  get contentJson(): ContentJsonSize | undefined {
    const json = this.#inner.contentJson;
    const notice = this.#notice();
    if (json === undefined || notice === undefined) return json;
    const { shape, bytes } = contentItemJson(notice);
    const shapes = new Map(json.shapes);
    shapes.set(shape, (shapes.get(shape) ?? 0) + 1);
    return { payloadBytes: json.payloadBytes + bytes, shapes };
  }

  /** Bytes this window holds against the budget. */
  get chargedBytes(): number {
    return this.#charged;
  }

  #notice(): OutputItem | undefined {
    if (this.#refusedItems === 0) return undefined;
    return {
      type: "text",
      text: budgetNoticeText(this.#refusedItems, this.#refusedBytes, this.#options.budget.total),
    };
  }

  push(item: PushedItem): void {
    this.#push(item, false);
  }

  /**
   * Pushes an item the window must keep whatever the budget (a Server completion's `Script error:`).
   *
   * @param item the item
   */
  pushForced(item: PushedItem): void {
    this.#push(item, true);
  }

  /** A Client window past `maxMessageBytes`: it only counts (its outcome is the oversize error). */
  #retainsNothing(): boolean {
    const limit = this.#options.maxMessageBytes;
    return limit !== undefined && this.#inner.encodedBytes > limit;
  }

  #push(item: PushedItem, forced: boolean): void {
    if (this.#retainsNothing()) return this.#inner.push(item);
    const cost = itemCharge(item);
    if (!forced && this.#refusedItems > 0) {
      this.#refusedItems++;
      this.#refusedBytes += cost - ITEM_OVERHEAD_BYTES;
      return;
    }
    const cap = this.#options.cap ?? Infinity;
    const want = Math.min(cap, this.#pushed + cost) - Math.min(cap, this.#pushed);
    const budget = this.#options.budget;
    if (want > 0) {
      if (forced) budget.charge(want);
      else if (!budget.tryCharge(want)) {
        this.#refusedItems = 1;
        this.#refusedBytes = cost - ITEM_OVERHEAD_BYTES;
        return;
      }
    }
    this.#pushed += cost;
    this.#charged += want;
    this.#inner.push(item);
    if (this.#retainsNothing()) this.release();
  }

  render(): OutputItem[] {
    const items = this.#inner.render();
    const notice = this.#notice();
    if (notice) items.push(notice);
    return items;
  }

  entries(): RenderedEntry[] {
    const entries = this.#inner.entries();
    const notice = this.#notice();
    if (notice?.type === "text") entries.push({ kind: "text", text: notice.text, owner: -1 });
    return entries;
  }

  take(): OutputCollector {
    const taken = new BudgetedCollector(this.#inner.take(), this.#options);
    taken.#pushed = this.#pushed;
    taken.#charged = this.#charged;
    taken.#refusedItems = this.#refusedItems;
    taken.#refusedBytes = this.#refusedBytes;
    this.#pushed = 0;
    this.#charged = 0;
    this.#refusedItems = 0;
    this.#refusedBytes = 0;
    return taken;
  }

  restore(taken: OutputCollector): void {
    if (!(taken instanceof BudgetedCollector)) throw new TypeError("restore needs a budgeted collector");
    this.#inner.restore(taken.#inner);
    this.#pushed += taken.#pushed;
    this.#charged += taken.#charged;
    this.#refusedItems += taken.#refusedItems;
    this.#refusedBytes += taken.#refusedBytes;
    taken.#pushed = 0;
    taken.#charged = 0;
    taken.#refusedItems = 0;
    taken.#refusedBytes = 0;
    if (this.#retainsNothing()) this.release();
  }

  /** Gives the window's charge back (it was handed to an observer, or it retains nothing). */
  release(): void {
    this.#options.budget.release(this.#charged);
    this.#charged = 0;
  }
}

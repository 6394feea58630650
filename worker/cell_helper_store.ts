/**
 * `store` and `load`, made inside a cell's context (`cell_helpers.ts` explains how helpers are
 * made): a stored value crosses as its checked JSON text; the cell worker keeps the cell's view of
 * the session's stored values and its writes (`cell_run.ts`).
 *
 * @module
 */
import type { CellBridges, HelperLimits } from "./cell_helpers.ts";
import type { HelperKit } from "./cell_helper_kit.ts";
import type { JsonHelpers } from "./cell_helper_json.ts";

/** What {@link createStoreHelpers} makes: functions of the cell's context. */
export interface StoreHelpers {
  store: (key?: unknown, value?: unknown) => undefined;
  load: (key?: unknown) => unknown;
}

/**
 * Makes the {@link StoreHelpers} inside a cell's context; like every helper factory it refers to
 * nothing outside its own body but the context's built-ins.
 */
export function createStoreHelpers(
  kit: HelperKit,
  json: JsonHelpers,
  bridgeStore: CellBridges["store"],
  bridgeLoad: CellBridges["load"],
  limits: HelperLimits,
): StoreHelpers {
  const { INTERNAL, live } = kit;
  const { debugQuoted, serializeJson } = json;
  // Originals, captured before user code can replace them.
  const parse = JSON.parse;

  function keyText(key: unknown, message: string): string {
    try {
      return `${key as string}`;
    } catch {
      throw message;
    }
  }

  function store(key?: unknown, value?: unknown): undefined {
    live();
    const name = keyText(key, "store key must be a string");
    if (value === undefined) {
      throw "Unable to store " + debugQuoted(name) + ". Only plain serializable objects can be stored.";
    }
    const json = serializeJson(value);
    let stored: number;
    try {
      stored = bridgeStore(name, json);
    } catch {
      throw INTERNAL;
    }
    if (stored === 1) {
      throw "stored values exceed the " + limits.maxStoredValueBytes + "-byte session limit";
    }
    if (stored !== 0) live();
    return undefined;
  }

  function load(key?: unknown): unknown {
    live();
    const name = keyText(key, "load key must be a string");
    let json: string | undefined;
    try {
      json = bridgeLoad(name);
    } catch {
      throw INTERNAL;
    }
    if (json === undefined) return undefined;
    try {
      return parse(json);
    } catch {
      throw "failed to load stored value";
    }
  }

  return { store, load };
}

/**
 * The globals of a cell's context, composed from the helper factories (`cell_helpers.ts` explains
 * how helpers are made), and the source text of all of them that the cell worker evaluates in each
 * context (`cell_realm.ts`).
 *
 * In the order the reference's globals appear: every global that is not allowed is removed, then
 * `text`, `image`, `audio`, `generatedImage`, `content`, `store`, `load`, `notify`,
 * `yield_control`, `exit`, `setTimeout`, `clearTimeout`, `as_settled` and `stream_settled` are
 * installed; `tools` and `ALL_TOOLS` follow when the cell starts (`configure`).
 *
 * @module
 */
import type { CellBridges, CellCombinators, CellController, HelperLimits } from "./cell_helpers.ts";
import { createContentHelpers } from "./cell_helper_content.ts";
import { createControlHelpers } from "./cell_helper_control.ts";
import { createJsonHelpers } from "./cell_helper_json.ts";
import { createHelperKit } from "./cell_helper_kit.ts";
import { installStackTraces } from "./cell_helper_stacks.ts";
import { createStoreHelpers } from "./cell_helper_store.ts";
import { createToolHelpers } from "./cell_helper_tools.ts";

/** The helper factories {@link createCellHelpers} composes, as functions of the cell's context. */
export interface CellHelperParts {
  createHelperKit: typeof createHelperKit;
  createJsonHelpers: typeof createJsonHelpers;
  createContentHelpers: typeof createContentHelpers;
  createStoreHelpers: typeof createStoreHelpers;
  createControlHelpers: typeof createControlHelpers;
  createToolHelpers: typeof createToolHelpers;
  installStackTraces: typeof installStackTraces;
  guardFinalizationRegistry: typeof guardFinalizationRegistry;
}

/** What the script of {@link cellHelpersSource} evaluates to in a context. */
export interface CellHelperFactories extends CellHelperParts {
  createCellHelpers: typeof createCellHelpers;
}

/**
 * The source text of a script that evaluates to the {@link CellHelperFactories}, each a function
 * of the context it runs in. Never call the factories in this realm.
 */
export function cellHelpersSource(): string {
  const factories: CellHelperFactories = {
    createCellHelpers,
    createHelperKit,
    createJsonHelpers,
    createContentHelpers,
    createStoreHelpers,
    createControlHelpers,
    createToolHelpers,
    installStackTraces,
    guardFinalizationRegistry,
  };
  const members = Object.entries(factories).map(([name, factory]) => `${name}: ${factory.toString()}`);
  return `"use strict";({\n${members.join(",\n")}\n})`;
}

/**
 * Makes the helpers inside a cell's context and installs them as its globals. Its source text is
 * evaluated there (see {@link cellHelpersSource}), so it refers to nothing outside its own body
 * but the context's built-ins, and reaches the other factories through `parts`.
 *
 * @returns the controller the outer realm drives the cell with
 */
export function createCellHelpers(
  parts: CellHelperParts,
  bridgePhase: CellBridges["phase"],
  bridgeEmit: CellBridges["emit"],
  bridgeCallTool: CellBridges["callTool"],
  bridgeByteLength: CellBridges["byteLength"],
  bridgeLoad: CellBridges["load"],
  bridgeStore: CellBridges["store"],
  bridgeTimer: CellBridges["timer"],
  bridgeFinish: CellBridges["finish"],
  combinators: CellCombinators,
  allowlistJson: string,
  cellFileName: string,
  _helpersFileName: string,
): CellController {
  // Originals, captured before user code can replace them.
  const global = globalThis;
  const getOwnPropertyNames = Object.getOwnPropertyNames;
  const objectCreate = Object.create;
  const parse = JSON.parse;

  // Set by `configure` when the cell starts (the context is built ahead, in the spare worker).
  const limits: HelperLimits = { __proto__: null, maxMessageBytes: 0, maxStoredValueBytes: 0 };
  const kit = parts.createHelperKit(bridgePhase, bridgeEmit, bridgeByteLength, bridgeFinish);
  const json = parts.createJsonHelpers(kit);
  const content = parts.createContentHelpers(kit, json);
  const stored = parts.createStoreHelpers(kit, json, bridgeStore, bridgeLoad, limits);
  const control = parts.createControlHelpers(kit, json, bridgeTimer, limits);
  const tools = parts.createToolHelpers(kit, json, bridgeCallTool, limits);
  parts.installStackTraces(kit, cellFileName);

  // Remove every global that is not allowed, then install the helpers.
  const allowed: Record<string, boolean> = objectCreate(null);
  const allowlist: string[] = parse(allowlistJson);
  for (let i = 0; i < allowlist.length; i++) allowed[allowlist[i]] = true;
  const names = getOwnPropertyNames(global);
  for (let i = 0; i < names.length; i++) {
    if (allowed[names[i]] !== true) delete (global as Record<string, unknown>)[names[i]];
  }

  const { installGlobal, nativeLike } = kit;
  const made = combinators(nativeLike(content.emitBlock) as (block: unknown) => undefined);
  const helpers: [string, unknown][] = [
    ["text", nativeLike(content.text)],
    ["image", nativeLike(content.image)],
    ["audio", nativeLike(content.audio)],
    ["generatedImage", nativeLike(content.generatedImage)],
    ["content", made.content],
    ["store", nativeLike(stored.store)],
    ["load", nativeLike(stored.load)],
    ["notify", nativeLike(control.notify)],
    ["yield_control", nativeLike(control.yield_control)],
    ["exit", nativeLike(control.exit)],
    ["setTimeout", nativeLike(control.setTimeout)],
    ["clearTimeout", nativeLike(control.clearTimeout)],
    ["as_settled", made.as_settled],
    ["stream_settled", made.stream_settled],
  ];
  for (let i = 0; i < helpers.length; i++) installGlobal(helpers[i][0], helpers[i][1]);
  parts.guardFinalizationRegistry(bridgePhase);

  function configure(toolsJson: string, messageLimit: number, storedLimit: number): void {
    limits.maxMessageBytes = messageLimit;
    limits.maxStoredValueBytes = storedLimit;
    tools.install(toolsJson);
  }

  return {
    watch: kit.watch,
    fail: kit.fail,
    complete: kit.complete,
    promiseIntact: kit.promiseIntact,
    fireTimer: control.fireTimer,
    deliver: tools.deliver,
    configure,
    describe: kit.describe,
  };
}

/** A FinalizationRegistry's cleanup callback is run by V8 whenever a collection finds its target
 * gone, even after the cell ended and while its cell worker runs the next cell of the session (SPEC
 * §5.1 reuse). The constructor the cell sees wraps each callback so that it runs only while the
 * cell runs; everything else (name, length, prototype, subclassing, errors) is the original's. */
export function guardFinalizationRegistry(bridgePhase: CellBridges["phase"]): void {
  // Originals, captured before user code can replace them.
  const global = globalThis;
  const ReflectApply = Reflect.apply;
  const defineProperty = Object.defineProperty;

  const Registry = (global as Record<string, unknown>).FinalizationRegistry as
    | (new (cleanup: unknown) => object)
    | undefined;
  if (typeof Registry === "function") {
    const construct = Reflect.construct;
    const guarded = new Proxy(Registry, {
      __proto__: null,
      construct(target: typeof Registry, args: unknown[], newTarget: unknown) {
        const cleanup = args[0];
        if (typeof cleanup === "function") {
          args[0] = function (held: unknown) {
            let running = false;
            try {
              running = bridgePhase() === 0;
            } catch {
              // Unknown: not run.
            }
            if (running) return ReflectApply(cleanup as () => unknown, undefined, [held]);
          };
        }
        return ReflectApply(construct, undefined, [target, args, newTarget]) as object;
      },
    } as ProxyHandler<typeof Registry>);
    defineProperty(Registry.prototype, "constructor", {
      __proto__: null,
      value: guarded,
      writable: true,
      enumerable: false,
      configurable: true,
    } as never);
    defineProperty(global, "FinalizationRegistry", {
      __proto__: null,
      value: guarded,
      writable: true,
      enumerable: false,
      configurable: true,
    } as never);
  }
}

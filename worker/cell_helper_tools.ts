/**
 * `tools` and `ALL_TOOLS`, made inside a cell's context (`cell_helpers.ts` explains how helpers are
 * made) for the cell that is starting: a tool call posts its checked JSON input through the bridge
 * and returns a promise, which the delivery of the tool's result settles.
 *
 * @module
 */
import type { CellBridges, HelperLimits } from "./cell_helpers.ts";
import type { HelperKit } from "./cell_helper_kit.ts";
import type { JsonHelpers } from "./cell_helper_json.ts";

/** What {@link createToolHelpers} makes: functions of the cell's context. */
export interface ToolHelpers {
  /** Installs `tools` and `ALL_TOOLS` from the JSON list of the cell's tools. */
  install: (toolsJson: string) => void;
  /** The controller's `deliver` (`CellController`). */
  deliver: (id: string, isError: boolean, payload: string) => void;
}

/** The settlers of a tool call's promise, in a dictionary without a prototype. */
interface Settlers {
  __proto__?: null;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
}

/**
 * Makes the {@link ToolHelpers} inside a cell's context; like every helper factory it refers to
 * nothing outside its own body but the context's built-ins (the reason it is one function).
 */
export function createToolHelpers(
  kit: HelperKit,
  json: JsonHelpers,
  bridgeCallTool: CellBridges["callTool"],
  limits: HelperLimits,
): ToolHelpers {
  const { INTERNAL, byteLength, emit, installGlobal, live, nativeLike, phase, queueJob } = kit;
  const { serializeJson } = json;
  // Originals, captured before user code can replace them.
  const defineProperty = Object.defineProperty;
  const parse = JSON.parse;
  const PromiseCtor = Promise;
  const objectCreate = Object.create;

  // Pending calls by ID, in a dictionary without a prototype: no user-replaceable accessor is
  // ever consulted.
  const pendingTools: Record<string, Settlers> = objectCreate(null);

  function callTool(name: string, arg: unknown): Promise<unknown> {
    live();
    const input = arg === undefined ? undefined : serializeJson(arg);
    if (input !== undefined && byteLength(input) > limits.maxMessageBytes) {
      const message = "code-mode tool invocation exceeds the " + limits.maxMessageBytes +
        "-byte gRPC message limit";
      return new PromiseCtor((_resolve, reject) => reject(message));
    }
    let settlers!: Settlers;
    const promise = new PromiseCtor((resolve, reject) => {
      settlers = { __proto__: null, resolve, reject };
    });
    let id: string;
    try {
      id = bridgeCallTool(name, input);
    } catch {
      throw INTERNAL;
    }
    if (id === "") live();
    pendingTools[id] = settlers;
    return promise;
  }

  // `tools` (one native-like function per tool, in `enabled_tools` order) and `ALL_TOOLS`.
  function install(toolsJson: string): void {
    const toolList: { name: string; description: string }[] = parse(toolsJson);
    const tools: Record<string, unknown> = {};
    for (let i = 0; i < toolList.length; i++) {
      const toolName = toolList[i].name;
      const tool = function (arg?: unknown): Promise<unknown> {
        return callTool(toolName, arg);
      };
      defineProperty(tools, toolName, {
        __proto__: null,
        value: nativeLike(tool),
        writable: true,
        enumerable: true,
        configurable: true,
      } as never);
    }
    installGlobal("tools", tools);
    installGlobal("ALL_TOOLS", toolList);
  }

  function deliver(id: string, isError: boolean, payload: string): void {
    const settlers = pendingTools[id];
    if (settlers === undefined) return;
    delete pendingTools[id];
    queueJob(() => {
      if (phase() !== 0) return;
      emit(4, id, "");
      if (isError) {
        settlers.reject(payload);
        return;
      }
      let value: unknown;
      try {
        value = parse(payload);
      } catch {
        settlers.reject("code-mode tool result is not valid JSON");
        return;
      }
      settlers.resolve(value);
    });
  }

  return { install, deliver };
}

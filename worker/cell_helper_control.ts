/**
 * `notify`, `yield_control`, `exit`, `setTimeout` and `clearTimeout`, made inside a cell's context
 * (`cell_helpers.ts` explains how helpers are made), and the firing of a timer the cell worker's
 * host timer reports.
 *
 * @module
 */
import type { CellBridges, HelperLimits } from "./cell_helpers.ts";
import type { HelperKit } from "./cell_helper_kit.ts";
import type { JsonHelpers } from "./cell_helper_json.ts";

/** What {@link createControlHelpers} makes: functions of the cell's context. */
export interface ControlHelpers {
  notify: (value?: unknown) => undefined;
  yield_control: () => undefined;
  exit: () => never;
  setTimeout: (callback?: unknown, delayMs?: unknown) => number;
  clearTimeout: (id?: unknown) => undefined;
  /** The controller's `fireTimer` (`CellController`). */
  fireTimer: (id: number) => void;
}

/**
 * Makes the {@link ControlHelpers} inside a cell's context; like every helper factory it refers to
 * nothing outside its own body but the context's built-ins (the reason it is one function).
 */
export function createControlHelpers(
  kit: HelperKit,
  json: JsonHelpers,
  bridgeTimer: CellBridges["timer"],
  limits: HelperLimits,
): ControlHelpers {
  const { INTERNAL, byteLength, emit, finish, live, phase, queueJob, settle } = kit;
  const { toOutputText } = json;
  // Originals, captured before user code can replace them.
  const ReflectApply = Reflect.apply;
  const numberIsFinite = Number.isFinite;
  const mathTrunc = Math.trunc;
  const stringTrim = String.prototype.trim;
  const objectCreate = Object.create;

  const EXIT_SENTINEL = "__codex_code_mode_exit__";

  // Timer callbacks by ID, in a dictionary without a prototype: no user-replaceable accessor is
  // ever consulted.
  const timers: Record<number, unknown> = objectCreate(null);
  let nextTimerId = 0;

  function notify(value?: unknown): undefined {
    live();
    const message = toOutputText(value);
    if (ReflectApply(stringTrim, message, []) === "") throw "notify expects non-empty text";
    if (byteLength(message) > limits.maxMessageBytes) {
      throw "code-mode notification exceeds the " + limits.maxMessageBytes + "-byte gRPC message limit";
    }
    emit(3, message, "");
    return undefined;
  }

  function yield_control(): undefined {
    live();
    emit(2, "", "");
    return undefined;
  }

  // exit() ends the cell at once as completed (the reference terminates the isolate's execution):
  // from here every helper throws, so whatever catches the sentinel can no longer produce output.
  function exit(): never {
    live();
    finish(2, "");
    throw EXIT_SENTINEL;
  }

  function setTimeout(callback?: unknown, delayMs?: unknown): number {
    live();
    if (typeof callback !== "function") throw "setTimeout expects a function callback";
    // ToNumber: a BigInt or a symbol throws its TypeError, as in the reference.
    let delay = +(delayMs as number);
    delay = numberIsFinite(delay) && delay > 0 ? mathTrunc(delay) : 0;
    const id = ++nextTimerId;
    timers[id] = callback;
    try {
      bridgeTimer(0, id, delay);
    } catch {
      throw INTERNAL;
    }
    return id;
  }

  function clearTimeout(id?: unknown): undefined {
    live();
    if (id === undefined || id === null) return undefined;
    let n: number;
    try {
      n = +(id as number);
    } catch {
      throw "clearTimeout expects a numeric timeout id";
    }
    if (!numberIsFinite(n) || n <= 0) return undefined;
    n = mathTrunc(n);
    if (timers[n] !== undefined) {
      delete timers[n];
      try {
        bridgeTimer(1, n, 0);
      } catch {
        throw INTERNAL;
      }
    }
    return undefined;
  }

  function fireTimer(id: number): void {
    const callback = timers[id];
    if (callback === undefined) return;
    delete timers[id];
    queueJob(() => {
      if (phase() !== 0) return;
      try {
        ReflectApply(callback as () => unknown, undefined, []);
      } catch (e) {
        settle(true, e);
      }
    });
  }

  return { notify, yield_control, exit, setTimeout, clearTimeout, fireTimer };
}

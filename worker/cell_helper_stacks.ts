/**
 * Stack traces in a cell's context (`cell_helpers.ts` explains how helpers are made): they show
 * only what the reference host's do.
 *
 * The context is entered from macrotasks of the outer realm, whose frames (the drain, timers,
 * the module evaluation) sit below user frames, and the helpers are functions of their own file.
 * A stack trace shows only what the reference's does: the cell's frames (`exec_main.mjs`, code
 * it evals), the combinators' frames (an unnamed script), and the built-ins those call. Frames
 * of the helpers and of the outer realm are dropped, and so is a built-in whose caller (the
 * next frame below that is not a built-in) is one of them. The header is V8's own (which reads
 * the error's original message). Call site methods are the originals, captured first.
 *
 * Deno asks `Error.prepareStackTrace` of the error's realm for a formatter; the accessor serving
 * it lives on Function.prototype, so that `Error` keeps exactly its own properties and
 * `Error.prepareStackTrace` reads as the cell set it (undefined at first). A read by the platform
 * is told from a read by the cell by a probe: while V8 formats a stack trace it formats any
 * nested one itself, without asking the platform.
 *
 * V8 counts every frame against `Error.stackTraceLimit`, the host's below the cell's too, so
 * with the reference's 10 the async frames (`at async …`), which come last, were cut off. The
 * context's limit is therefore INTERNAL_LIMIT, and a stack formatted under it shows at most the
 * reference's 10 frames of the cell; a limit the cell sets itself applies as it is.
 *
 * @module
 */
import type { HelperKit } from "./cell_helper_kit.ts";

/**
 * Installs the stack-trace formatter in a cell's context: sets `Error.stackTraceLimit` and defines
 * the `prepareStackTrace` accessor on `Function.prototype`. Like every helper factory it refers to
 * nothing outside its own body but the context's built-ins (the reason it is one function).
 *
 * @param kit the helpers' kit
 * @param cellFileName the file name of the cell's own frames (`exec_main.mjs`)
 */
export function installStackTraces(kit: HelperKit, cellFileName: string): void {
  const { isObjectLike } = kit;
  // Originals, captured before user code can replace them.
  const ReflectApply = Reflect.apply;
  const defineProperty = Object.defineProperty;
  const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const getPrototypeOf = Object.getPrototypeOf;
  const objectCreate = Object.create;
  const isArray = Array.isArray;
  const stringIndexOf = String.prototype.indexOf;
  const stringSlice = String.prototype.slice;
  const FunctionProto = Function.prototype;
  const ErrorCtor = Error;
  const errorToString = Error.prototype.toString;
  const Bytes = Uint8Array;

  // V8's limit in the context, and the frames of the cell a stack shows under it (module doc).
  const INTERNAL_LIMIT = 64;
  const VISIBLE_LIMIT = 10;
  (ErrorCtor as { stackTraceLimit?: number }).stackTraceLimit = INTERNAL_LIMIT;
  let callSiteProto: Record<string, unknown> | undefined;
  defineProperty(ErrorCtor, "prepareStackTrace", {
    __proto__: null,
    value: (_error: unknown, sites: unknown[]) => {
      callSiteProto = getPrototypeOf(sites[0]) as Record<string, unknown>;
      return "";
    },
    writable: true,
    configurable: true,
  } as never);
  void new ErrorCtor().stack;
  delete (ErrorCtor as { prepareStackTrace?: unknown }).prepareStackTrace;
  const siteFileName = callSiteProto!.getFileName as () => unknown;
  const siteIsEval = callSiteProto!.isEval as () => unknown;
  const siteToString = callSiteProto!.toString as () => string;

  const USER = 0;
  const HIDDEN = 1;
  const BUILTIN = 2;
  function frameKind(site: unknown): number {
    try {
      const file = ReflectApply(siteFileName, site, []);
      // `""`: the combinators' unnamed script.
      if (file === cellFileName || file === "") return USER;
      if (typeof file === "string") return HIDDEN;
      return ReflectApply(siteIsEval, site, []) === true ? USER : BUILTIN;
    } catch {
      return HIDDEN;
    }
  }

  function visibleSites(sites: unknown): unknown[] {
    const visible: unknown[] = [];
    if (!isArray(sites)) return visible;
    const keep = new Bytes(sites.length);
    let below = USER;
    for (let i = sites.length - 1; i >= 0; i--) {
      const kind = frameKind(sites[i]);
      if (kind === BUILTIN) {
        keep[i] = below === USER ? 1 : 0;
      } else {
        keep[i] = kind === USER ? 1 : 0;
        below = kind;
      }
    }
    for (let i = 0; i < sites.length; i++) {
      if (keep[i] === 0) continue;
      defineProperty(visible, visible.length, {
        __proto__: null,
        value: sites[i],
        writable: true,
        enumerable: true,
        configurable: true,
      } as never);
    }
    return visible;
  }

  function siteText(site: unknown): string {
    try {
      return "\n    at " + ReflectApply(siteToString, site, []);
    } catch {
      return "";
    }
  }

  function formatStack(error: unknown, sites: unknown): string {
    // V8's own text of this stack (V8 formats it itself, as this runs inside a formatting) gives
    // the header: the error's name and its original message, as the reference shows it.
    let header: string | undefined;
    if (isArray(sites) && sites.length > 0) {
      try {
        const own = (error as { stack?: unknown }).stack;
        const first = siteText(sites[0]);
        if (typeof own === "string" && first !== "") {
          const at = ReflectApply(stringIndexOf, own, [first]) as number;
          if (at >= 0) header = ReflectApply(stringSlice, own, [0, at]) as string;
        }
      } catch {
        header = undefined;
      }
    }
    if (header === undefined) header = describeHeader(error);
    let out = header;
    const visible = visibleSites(sites);
    // The default limit is the host's (see below): show the reference's 10 frames of the cell.
    let count = visible.length;
    if (count > VISIBLE_LIMIT && limitProperty()?.value === INTERNAL_LIMIT) count = VISIBLE_LIMIT;
    for (let i = 0; i < count; i++) out += siteText(visible[i]);
    return out;
  }

  function describeHeader(error: unknown): string {
    try {
      return ReflectApply(errorToString, error, []) as string;
    } catch {
      return "Error";
    }
  }

  // The cell's own `Error.prepareStackTrace` gets the visible call sites only.
  let userPrepare: unknown;
  function prepareWithUser(error: unknown, sites: unknown): unknown {
    return ReflectApply(userPrepare as () => unknown, ErrorCtor, [error, visibleSites(sites)]);
  }
  let probing = false;
  const PROBE = objectCreate(null);
  const probe = () => PROBE;
  // Error.stackTraceLimit when it is a writable data property (never runs a getter of the cell).
  function limitProperty(): { value: unknown } | undefined {
    const own = getOwnPropertyDescriptor(ErrorCtor, "stackTraceLimit");
    return own !== undefined && "value" in own && own.writable === true ? { value: own.value } : undefined;
  }
  function formattingNow(): boolean {
    probing = true;
    // The probe needs no frames: with a limit of 0 V8 still formats (or asks the platform).
    const limit = limitProperty();
    if (limit !== undefined) (ErrorCtor as { stackTraceLimit?: unknown }).stackTraceLimit = 0;
    let stack: unknown;
    try {
      stack = new ErrorCtor().stack;
    } catch {
      stack = undefined;
    } finally {
      probing = false;
      if (limit !== undefined) (ErrorCtor as { stackTraceLimit?: unknown }).stackTraceLimit = limit.value;
    }
    return typeof stack === "string";
  }
  defineProperty(FunctionProto, "prepareStackTrace", {
    __proto__: null,
    get(this: unknown) {
      if (probing) return probe;
      if (formattingNow()) return typeof userPrepare === "function" ? prepareWithUser : formatStack;
      return this === ErrorCtor ? userPrepare : undefined;
    },
    set(this: unknown, value: unknown) {
      if (this === ErrorCtor) {
        userPrepare = value;
        return;
      }
      if (isObjectLike(this)) {
        defineProperty(this, "prepareStackTrace", {
          __proto__: null,
          value,
          writable: true,
          enumerable: true,
          configurable: true,
        } as never);
      }
    },
    enumerable: false,
    configurable: false,
  } as never);
}

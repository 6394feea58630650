/**
 * The helpers of a cell (SPEC §5.3: `text`, `image`, `store`, `load`, `notify`, `yield_control`,
 * `exit`, `tools`, `ALL_TOOLS`, the timers) as one factory whose *source text* the cell bootstrap
 * (`cell_bootstrap.ts`) evaluates inside each cell's `node:vm` context, so that every function and
 * object it creates belongs to that context. The factory reaches the bootstrap's realm only
 * through the bridge functions it is given ({@link CellBridges}: primitives in, primitives out)
 * and is driven through the {@link CellController} it returns.
 *
 * @module
 */

// Bridge opcodes, shared by the outer realm and the helper source (which cannot import them, so
// it repeats the numbers; keep both in sync).
export const PHASE_RUNNING = 0;
export const PHASE_STOPPED = 1;
export const PHASE_FINISHED = 2;
export const EMIT_TEXT = 0;
export const EMIT_IMAGE = 1;
export const EMIT_YIELD = 2;
export const EMIT_NOTIFY = 3;
export const EMIT_CONSUMED = 4;
export const STORE_OK = 0;
export const STORE_OVER_LIMIT = 1;
export const TIMER_SET = 0;
export const TIMER_CLEAR = 1;

/** The outer-realm functions the helpers are created with; primitives in, primitives out. */
export interface CellBridges {
  phase: () => number;
  emit: (kind: number, a: string, b: string) => number;
  callTool: (name: string, input: string | undefined) => string;
  byteLength: (text: string) => number;
  load: (key: string) => string | undefined;
  store: (key: string, json: string) => number;
  timer: (op: number, id: number, delayMs: number) => void;
  finish: (failed: number, errorText: string) => void;
}

/** The context-realm functions the outer realm drives the cell with. */
export interface CellController {
  /** Queues the call of the compiled cell function (a context microtask) and watches its promise. */
  run: (fn: unknown) => void;
  /** Ends the cell with the value thrown while the compiled script itself was evaluated. */
  fail: (thrown: unknown) => void;
  /** Queues timer `id`'s callback (a context microtask) unless it was cleared. */
  fireTimer: (id: number) => void;
  /** Settles tool call `id`: parse `payload` as JSON, or reject with it when `isError`. */
  deliver: (id: string, isError: boolean, payload: string) => void;
  /** Installs `tools` and `ALL_TOOLS` and the size limits of the cell that is starting. */
  configure: (toolsJson: string, maxMessageBytes: number, maxStoredValueBytes: number) => void;
}

/**
 * The helper factory. It is never called in this realm: its source text is evaluated inside the
 * cell's context, so every function and object it creates belongs to that context. It must not
 * refer to anything outside its own body except the context's built-ins.
 */
export function createCellHelpers(
  bridgePhase: CellBridges["phase"],
  bridgeEmit: CellBridges["emit"],
  bridgeCallTool: CellBridges["callTool"],
  bridgeByteLength: CellBridges["byteLength"],
  bridgeLoad: CellBridges["load"],
  bridgeStore: CellBridges["store"],
  bridgeTimer: CellBridges["timer"],
  bridgeFinish: CellBridges["finish"],
  allowlistJson: string,
  cellFileName: string,
  helpersFileName: string,
): CellController {
  // Set by `configure` when the cell starts (the context is built ahead, in the spare Worker).
  let maxMessageBytes = 0;
  let maxStoredValueBytes = 0;

  // Originals, captured before user code can replace them.
  const global = globalThis;
  const ReflectApply = Reflect.apply;
  const defineProperty = Object.defineProperty;
  const getOwnPropertyNames = Object.getOwnPropertyNames;
  const getPrototypeOf = Object.getPrototypeOf;
  const isArray = Array.isArray;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const StringCtor = String;
  const NumberCtor = Number;
  const numberIsFinite = Number.isFinite;
  const mathTrunc = Math.trunc;
  const PromiseCtor = Promise;
  const promiseThen = Promise.prototype.then;
  const stringTrim = String.prototype.trim;
  const stringToLowerCase = String.prototype.toLowerCase;
  const stringSlice = String.prototype.slice;
  const ErrorCtor = Error;
  const errorToString = Error.prototype.toString;

  const EXIT_SENTINEL = "__codex_code_mode_exit__";
  const STOPPED = "code-mode cell was stopped";
  const FINISHED = "code-mode cell has finished";
  const INTERNAL = "code-mode internal error";
  const UNKNOWN = "unknown code mode exception";
  const IMAGE_GENERIC = "image expects a non-empty image URL string, an object with image_url " +
    "and optional detail, or a raw MCP image block";
  const IMAGE_DETAIL_TYPE = "image detail must be a string when provided";

  // Dictionaries without prototypes: no user-replaceable accessor is ever consulted.
  const timers: Record<number, unknown> = { __proto__: null } as unknown as Record<
    number,
    unknown
  >;
  const pendingTools: Record<
    string,
    { resolve: (value: unknown) => void; reject: (reason: unknown) => void }
  > = { __proto__: null } as unknown as Record<
    string,
    { resolve: (value: unknown) => void; reject: (reason: unknown) => void }
  >;
  let nextTimerId = 0;
  let exitRequested = false;

  // A settled promise whose `then` never consults user-replaceable species/constructor hooks:
  // its own `constructor` is undefined, so derived promises use the intrinsic %Promise%.
  const settledPromise = PromiseCtor.resolve();
  defineProperty(settledPromise, "constructor", { __proto__: null, value: undefined } as never);

  function queueJob(job: () => void): void {
    ReflectApply(promiseThen, settledPromise, [job]);
  }

  // Bridge calls: a failure (even a stack overflow on entry) becomes a context string.
  function phase(): number {
    try {
      return bridgePhase();
    } catch {
      throw INTERNAL;
    }
  }
  function live(): void {
    const p = phase();
    if (p === 1) throw STOPPED;
    if (p !== 0) throw FINISHED;
  }
  function emit(kind: number, a: string, b: string): void {
    let posted: number;
    try {
      posted = bridgeEmit(kind, a, b);
    } catch {
      throw INTERNAL;
    }
    if (posted !== 0) live();
  }
  function byteLength(text: string): number {
    try {
      return bridgeByteLength(text);
    } catch {
      throw INTERNAL;
    }
  }
  function finish(failed: number, errorText: string): void {
    try {
      bridgeFinish(failed, errorText);
    } catch {
      // Nothing sensible is left to do in the context.
    }
  }

  // SPEC §5.6: a string as-is, a string `stack`, else String(value), else the unknown text.
  function describeThrown(value: unknown): string {
    if (typeof value === "string") return value;
    if (value !== null && (typeof value === "object" || typeof value === "function")) {
      let stack: unknown;
      try {
        stack = (value as { stack?: unknown }).stack;
      } catch {
        stack = undefined;
      }
      if (typeof stack === "string") return stack;
    }
    try {
      return StringCtor(value);
    } catch {
      return UNKNOWN;
    }
  }

  // Stringify with the original JSON.stringify; its exceptions become strings (SPEC §5.3 text).
  function toJsonText(value: unknown): string | undefined {
    try {
      return stringify(value);
    } catch (e) {
      throw describeThrown(e);
    }
  }

  function toOutputText(value: unknown): string {
    const type = typeof value;
    if (
      value === undefined || value === null || type === "boolean" || type === "number" ||
      type === "bigint" || type === "string"
    ) {
      return StringCtor(value);
    }
    const json = toJsonText(value);
    return json === undefined ? StringCtor(value) : json;
  }

  function settle(failed: boolean, value: unknown): void {
    if (phase() !== 0) return;
    if (!failed || (value === EXIT_SENTINEL && exitRequested)) {
      finish(0, "");
    } else {
      finish(1, describeThrown(value));
    }
  }

  function startsWithIgnoreCase(text: string, prefix: string): boolean {
    return ReflectApply(
      stringToLowerCase,
      ReflectApply(stringSlice, text, [0, prefix.length]),
      [],
    ) === prefix;
  }

  // Returns [url, detail] for image()/generatedImage() (SPEC §5.3 property reads and rules).
  function resolveImage(input: unknown, override: unknown): [string, string] {
    if (override !== undefined && override !== null && typeof override !== "string") {
      throw IMAGE_DETAIL_TYPE;
    }
    let url: string;
    let detail: string | undefined;
    if (typeof input === "string") {
      if (input === "") throw IMAGE_GENERIC;
      url = input;
    } else if (
      input !== null && (typeof input === "object" || typeof input === "function") &&
      !isArray(input)
    ) {
      const item = input as Record<string, unknown>;
      const imageUrl = item.image_url;
      if (typeof imageUrl === "string") {
        url = imageUrl;
        const ownDetail = item.detail;
        if (ownDetail !== undefined && ownDetail !== null && typeof ownDetail !== "string") {
          throw IMAGE_DETAIL_TYPE;
        }
        detail = ownDetail ?? undefined;
      } else if (imageUrl !== undefined) {
        throw IMAGE_GENERIC;
      } else {
        const type = item.type;
        if (typeof type !== "string") throw IMAGE_GENERIC;
        const data = item.data;
        const mimeType = item.mimeType;
        const mimeTypeSnake = item.mime_type;
        const meta = item._meta;
        let metaDetail: unknown;
        if (meta !== null && (typeof meta === "object" || typeof meta === "function")) {
          metaDetail = (meta as Record<string, unknown>)["codex/imageDetail"];
        }
        if (type !== "image") throw 'image only accepts MCP image blocks, got "' + type + '"';
        if (typeof data !== "string" || data === "") throw "image expected MCP image data";
        const mime = typeof mimeType === "string" && mimeType !== ""
          ? mimeType
          : typeof mimeTypeSnake === "string" && mimeTypeSnake !== ""
          ? mimeTypeSnake
          : "application/octet-stream";
        url = startsWithIgnoreCase(data, "data:") ? data : "data:" + mime + ";base64," + data;
        if (
          metaDetail === "auto" || metaDetail === "low" || metaDetail === "high" ||
          metaDetail === "original"
        ) {
          detail = metaDetail;
        }
      }
    } else {
      throw IMAGE_GENERIC;
    }
    if (typeof override === "string") detail = override;
    if (startsWithIgnoreCase(url, "http://") || startsWithIgnoreCase(url, "https://")) {
      throw "Tool call failed: remote image URLs are not supported in tool outputs. " +
        "Pass a base64 data URI instead";
    }
    if (!startsWithIgnoreCase(url, "data:")) {
      throw "Tool call failed: invalid image output. Pass a base64 data URI instead";
    }
    let resolved = "high";
    if (detail !== undefined) {
      resolved = ReflectApply(stringToLowerCase, detail, []);
      if (
        resolved !== "auto" && resolved !== "low" && resolved !== "high" &&
        resolved !== "original"
      ) {
        throw "image detail must be one of: auto, low, high, original";
      }
    }
    return [url, resolved];
  }

  function text(value?: unknown): undefined {
    live();
    emit(0, toOutputText(value), "");
    return undefined;
  }

  function image(imageUrlOrItem?: unknown, detail?: unknown): undefined {
    live();
    const resolved = resolveImage(imageUrlOrItem, detail);
    emit(1, resolved[0], resolved[1]);
    return undefined;
  }

  function generatedImage(result?: unknown): undefined {
    live();
    if (result === null || (typeof result !== "object" && typeof result !== "function")) {
      throw "generatedImage expects an image generation result object";
    }
    const hint = (result as Record<string, unknown>).output_hint;
    if (hint !== undefined && typeof hint !== "string") {
      throw "generatedImage output_hint must be a string when provided";
    }
    const resolved = resolveImage(result, undefined);
    emit(1, resolved[0], resolved[1]);
    if (typeof hint === "string") emit(0, hint, "");
    return undefined;
  }

  function store(key?: unknown, value?: unknown): undefined {
    live();
    let name: string;
    try {
      // ToString, which (unlike String()) throws for a symbol.
      name = `${key}`;
    } catch {
      throw "store key must be a string";
    }
    const json = toJsonText(value);
    if (json === undefined) {
      throw "Unable to store " + stringify(name) +
        ". Only plain serializable objects can be stored.";
    }
    let stored: number;
    try {
      stored = bridgeStore(name, json);
    } catch {
      throw INTERNAL;
    }
    if (stored === 1) {
      throw "stored values exceed the " + maxStoredValueBytes + "-byte session limit";
    }
    if (stored !== 0) live();
    return undefined;
  }

  function load(key?: unknown): unknown {
    live();
    let name: string;
    try {
      name = `${key}`;
    } catch {
      throw "load key must be a string";
    }
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

  function notify(value?: unknown): undefined {
    live();
    const message = toOutputText(value);
    if (ReflectApply(stringTrim, message, []) === "") throw "notify expects non-empty text";
    if (byteLength(message) > maxMessageBytes) {
      throw "code-mode notification exceeds the " + maxMessageBytes + "-byte gRPC message limit";
    }
    emit(3, message, "");
    return undefined;
  }

  function yield_control(): undefined {
    live();
    emit(2, "", "");
    return undefined;
  }

  function exit(): never {
    live();
    exitRequested = true;
    throw EXIT_SENTINEL;
  }

  function setTimeout(callback?: unknown, delayMs?: unknown): number {
    live();
    if (typeof callback !== "function") throw "setTimeout expects a function callback";
    let delay = NumberCtor(delayMs);
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
      n = NumberCtor(id);
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

  function callTool(name: string, arg: unknown): Promise<unknown> {
    live();
    const input = toJsonText(arg);
    if (input !== undefined && byteLength(input) > maxMessageBytes) {
      const message = "code-mode tool invocation exceeds the " + maxMessageBytes +
        "-byte gRPC message limit";
      return new PromiseCtor((_resolve, reject) => reject(message));
    }
    let settlers!: { resolve: (value: unknown) => void; reject: (reason: unknown) => void };
    const promise = new PromiseCtor((resolve, reject) => {
      settlers = { __proto__: null, resolve, reject } as unknown as typeof settlers;
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

  // The context is entered from macrotasks of the outer realm, whose frames (the drain, timers)
  // sit below user frames. They are exactly the frames that belong to neither the cell, the
  // helpers, eval code nor a built-in, and no stack trace shows them: their file names are the
  // runtime's path (with the host's PID) and their function names the bootstrap's. The call site
  // methods are the originals, captured before user code can replace them.
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
  const siteFileName = callSiteProto!.getFileName as () => unknown;
  const siteIsEval = callSiteProto!.isEval as () => unknown;
  const siteToString = callSiteProto!.toString as () => string;

  function isVisible(site: unknown): boolean {
    try {
      const file = ReflectApply(siteFileName, site, []);
      return typeof file !== "string" || file === cellFileName || file === helpersFileName ||
        ReflectApply(siteIsEval, site, []) === true;
    } catch {
      return false;
    }
  }

  // Async frames (`at async f (…)`) come after the outer ones and are kept.
  function formatStack(error: unknown, sites: unknown): string {
    let out: string;
    try {
      out = ReflectApply(errorToString, error, []);
    } catch {
      out = "<error>";
    }
    if (!isArray(sites)) return out;
    for (let i = 0; i < sites.length; i++) {
      const site = sites[i];
      if (!isVisible(site)) continue;
      try {
        out += "\n    at " + ReflectApply(siteToString, site, []);
      } catch {
        // Nothing to show for it.
      }
    }
    return out;
  }

  // A `prepareStackTrace` of user code gets the visible call sites only. The property is an
  // accessor that cannot be redefined: reading it gives the function the platform calls (which
  // filters, then calls the user's), so a user function is never handed the outer frames.
  let userPrepare: unknown;
  function prepareWithUser(error: unknown, sites: unknown): unknown {
    const visible: unknown[] = [];
    if (isArray(sites)) {
      for (let i = 0; i < sites.length; i++) {
        if (!isVisible(sites[i])) continue;
        defineProperty(visible, visible.length, {
          __proto__: null,
          value: sites[i],
          writable: true,
          enumerable: true,
          configurable: true,
        } as never);
      }
    }
    return ReflectApply(userPrepare as () => unknown, ErrorCtor, [error, visible]);
  }
  defineProperty(ErrorCtor, "prepareStackTrace", {
    __proto__: null,
    get: () => typeof userPrepare === "function" ? prepareWithUser : formatStack,
    set: (value: unknown) => {
      userPrepare = value;
    },
    enumerable: false,
    configurable: false,
  } as never);

  // No clock finer than Date.now()'s milliseconds (`performance` is gone): Temporal.Now reads the
  // time through Date.now().
  const temporal = (global as Record<string, unknown>).Temporal as
    | Record<string, Record<string, (...args: unknown[]) => unknown>>
    | undefined;
  if (temporal !== undefined && temporal.Now !== undefined) {
    const now = temporal.Now;
    const Instant = temporal.Instant as unknown as {
      fromEpochMilliseconds(ms: number): Record<string, (tz: unknown) => Record<string, () => unknown>>;
    };
    const dateNow = Date.now;
    const timeZoneId = now.timeZoneId;
    const fromMs = Instant.fromEpochMilliseconds;
    const zoned = (tz: unknown) => {
      const instant = ReflectApply(fromMs, Instant, [dateNow()]) as {
        toZonedDateTimeISO(tz: unknown): Record<string, () => unknown>;
      };
      return instant.toZonedDateTimeISO(tz === undefined ? ReflectApply(timeZoneId, now, []) : tz);
    };
    const coarse: Record<string, unknown> = {
      instant: () => ReflectApply(fromMs, Instant, [dateNow()]),
      timeZoneId: () => ReflectApply(timeZoneId, now, []),
      zonedDateTimeISO: (tz?: unknown) => zoned(tz),
      plainDateTimeISO: (tz?: unknown) => zoned(tz).toPlainDateTime(),
      plainDateISO: (tz?: unknown) => zoned(tz).toPlainDate(),
      plainTimeISO: (tz?: unknown) => zoned(tz).toPlainTime(),
    };
    const names = getOwnPropertyNames(coarse);
    for (let i = 0; i < names.length; i++) {
      if (typeof now[names[i]] !== "function") continue;
      defineProperty(now, names[i], {
        __proto__: null,
        value: coarse[names[i]],
        writable: true,
        enumerable: false,
        configurable: true,
      } as never);
    }
  }

  // Remove every global that is not allowed, then install the helpers.
  const allowed: Record<string, boolean> = { __proto__: null } as unknown as Record<
    string,
    boolean
  >;
  const allowlist: string[] = parse(allowlistJson);
  for (let i = 0; i < allowlist.length; i++) allowed[allowlist[i]] = true;
  const names = getOwnPropertyNames(global);
  for (let i = 0; i < names.length; i++) {
    if (allowed[names[i]] !== true) delete (global as Record<string, unknown>)[names[i]];
  }

  const helpers: [string, unknown][] = [
    ["text", text],
    ["image", image],
    ["generatedImage", generatedImage],
    ["store", store],
    ["load", load],
    ["notify", notify],
    ["yield_control", yield_control],
    ["exit", exit],
    ["setTimeout", setTimeout],
    ["clearTimeout", clearTimeout],
  ];
  function installGlobal(name: string, value: unknown): void {
    defineProperty(global, name, {
      __proto__: null,
      value,
      writable: true,
      enumerable: false,
      configurable: true,
    } as never);
  }
  for (let i = 0; i < helpers.length; i++) installGlobal(helpers[i][0], helpers[i][1]);

  // A FinalizationRegistry's cleanup callback is run by V8 whenever a collection finds its target
  // gone, even after the cell ended and while its Worker runs the next cell of the session (SPEC
  // §5.1 reuse). The constructor the cell sees wraps each callback so that it runs only while the
  // cell runs; everything else (name, length, prototype, subclassing, errors) is the original's.
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
    installGlobal("FinalizationRegistry", guarded);
  }

  function configure(toolsJson: string, messageLimit: number, storedLimit: number): void {
    maxMessageBytes = messageLimit;
    maxStoredValueBytes = storedLimit;
    const toolList: { name: string; description: string }[] = parse(toolsJson);
    const tools: Record<string, unknown> = {};
    for (let i = 0; i < toolList.length; i++) {
      const toolName = toolList[i].name;
      const tool = function (arg?: unknown): Promise<unknown> {
        return callTool(toolName, arg);
      };
      defineProperty(tool, "name", { __proto__: null, value: toolName } as never);
      defineProperty(tools, toolName, {
        __proto__: null,
        value: tool,
        writable: true,
        enumerable: true,
        configurable: true,
      } as never);
    }
    installGlobal("tools", tools);
    installGlobal("ALL_TOOLS", toolList);
  }

  function run(fn: unknown): void {
    queueJob(() => {
      let evaluation: unknown;
      try {
        evaluation = ReflectApply(fn as () => unknown, undefined, []);
      } catch (e) {
        settle(true, e);
        return;
      }
      // The async function's own promise is unreachable from user code; pin its constructor so
      // that `then` consults no user-replaceable species hook.
      try {
        defineProperty(evaluation, "constructor", { __proto__: null, value: undefined } as never);
        ReflectApply(promiseThen, evaluation, [
          () => settle(false, undefined),
          (reason: unknown) => settle(true, reason),
        ]);
      } catch {
        // Not a promise (the source closed the wrapper early): evaluation is over.
        settle(false, undefined);
      }
    });
  }

  function fail(thrown: unknown): void {
    settle(true, thrown);
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

  return { run, fail, fireTimer, deliver, configure };
}

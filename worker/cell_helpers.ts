/**
 * The helpers of a cell (`text`, `image`, `audio`, `generatedImage`, `content`, `store`, `load`,
 * `notify`, `yield_control`, `exit`, `tools`, `ALL_TOOLS`, the timers, and through
 * `./cell_combinators.ts` `as_settled` and `stream_settled`) as one factory whose *source text*
 * the cell bootstrap (`cell_bootstrap.ts`) evaluates inside each cell's `node:vm` context, so that
 * every function and object it creates belongs to that context. The factory reaches the
 * bootstrap's realm only through the bridge functions it is given ({@link CellBridges}: primitives
 * in, primitives out) and is driven through the {@link CellController} it returns.
 *
 * What a cell sees is Codex's own host, byte for byte, as measured by running the same cells on
 * both (tests/reference/cells/): the helpers look native (`function () { [native code] }`, name
 * `""`, length 0, a `prototype`, enumerable globals), every argument error is the reference's
 * string, user exceptions caught by a helper come back as their description (a string), and stack
 * traces show only the cell's frames.
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
export const EMIT_AUDIO = 5;
export const STORE_OK = 0;
export const STORE_OVER_LIMIT = 1;
export const TIMER_SET = 0;
export const TIMER_CLEAR = 1;
/** `finish` kinds: the cell completed, failed, or called `exit()` (which ends it at once). */
export const FINISH_COMPLETED = 0;
export const FINISH_FAILED = 1;
export const FINISH_EXIT = 2;

/** The outer-realm functions the helpers are created with; primitives in, primitives out. */
export interface CellBridges {
  phase: () => number;
  emit: (kind: number, a: string, b: string) => number;
  callTool: (name: string, input: string | undefined) => string;
  byteLength: (text: string) => number;
  load: (key: string) => string | undefined;
  store: (key: string, json: string) => number;
  timer: (op: number, id: number, delayMs: number) => void;
  /**
   * Reports the cell's end: `FINISH_EXIT` ends it at once; a completion or failure is taken once
   * the context's microtask queue has drained (microtasks queued before it still run and output).
   */
  finish: (kind: number, errorText: string) => void;
}

/** The three helpers of `./cell_combinators.ts`, made for one context around its block emitter. */
export type CellCombinators = (emitBlock: (block: unknown) => undefined) => {
  as_settled: unknown;
  stream_settled: unknown;
  content: unknown;
};

/** The context-realm functions the outer realm drives the cell with. */
export interface CellController {
  /** Watches the module's evaluation promise: its settlement ends the cell. */
  watch: (evaluation: unknown) => void;
  /** Ends the cell with a value thrown while the cell was being started. */
  fail: (thrown: unknown) => void;
  /** Reports the cell completed (its evaluation promise cannot be watched). */
  complete: () => void;
  /**
   * Whether `Promise.prototype.then`, `Promise.prototype.constructor` and `Promise[Symbol.species]`
   * are still the originals: Deno settles the module's evaluation promise through them.
   */
  promiseIntact: () => boolean;
  /** Queues timer `id`'s callback (a context microtask) unless it was cleared. */
  fireTimer: (id: number) => void;
  /** Settles tool call `id`: parse `payload` as JSON, or reject with it when `isError`. */
  deliver: (id: string, isError: boolean, payload: string) => void;
  /** Installs `tools` and `ALL_TOOLS` and the size limits of the cell that is starting. */
  configure: (toolsJson: string, maxMessageBytes: number, maxStoredValueBytes: number) => void;
  /** `error.stack` as the cell would read it (stack frames filtered): for the bootstrap's tests. */
  describe: (value: unknown) => string;
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
  combinators: CellCombinators,
  allowlistJson: string,
  cellFileName: string,
  _helpersFileName: string,
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
  const numberIsFinite = Number.isFinite;
  const mathTrunc = Math.trunc;
  const PromiseCtor = Promise;
  const promiseThen = Promise.prototype.then;
  const stringTrim = String.prototype.trim;
  const stringToLowerCase = String.prototype.toLowerCase;
  const stringSlice = String.prototype.slice;
  const stringIndexOf = String.prototype.indexOf;
  const stringCharCodeAt = String.prototype.charCodeAt;
  const stringCodePointAt = String.prototype.codePointAt;
  const numberToString = Number.prototype.toString;
  const regexpTest = RegExp.prototype.test;
  const functionBind = Function.prototype.bind;
  const FunctionProto = Function.prototype;
  const ErrorCtor = Error;
  const errorToString = Error.prototype.toString;
  const objectCreate = Object.create;
  const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const PromiseProto = Promise.prototype;
  const speciesKey = Symbol.species;
  const speciesGetter = getOwnPropertyDescriptor(Promise, speciesKey)?.get;
  const ObjectProto = Object.prototype;
  const parseInteger = parseInt;
  const fromCodePoint = String.fromCodePoint;
  const Bytes = Uint8Array;

  const EXIT_SENTINEL = "__codex_code_mode_exit__";
  const STOPPED = "code-mode cell was stopped";
  const FINISHED = "code-mode cell has finished";
  const INTERNAL = "code-mode internal error";
  const SERIALIZE = "failed to serialize JavaScript value: ";
  const IMAGE_GENERIC = "image expects a non-empty image URL string, an object with image_url " +
    "and optional detail, or a raw MCP image block";
  const IMAGE_DETAIL_TYPE = "image detail must be a string when provided";
  const AUDIO_GENERIC = "audio expects a non-empty audio URL string, an object with audio_url, " +
    "or a raw MCP audio block";
  const CONTENT_GENERIC = "content expects one MCP ContentBlock";

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
  function finish(kind: number, errorText: string): void {
    try {
      bridgeFinish(kind, errorText);
    } catch {
      // Nothing sensible is left to do in the context.
    }
  }

  // The text a thrown value ends a cell with, and what a helper throws when user code it ran threw:
  // a string as-is, else a string `stack`, else ToString(value) (so a symbol, or an object whose
  // conversion throws, describes as "").
  function describe(value: unknown): string {
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
      return `${value as string}`;
    } catch {
      return "";
    }
  }

  // JSON.stringify with the original function; what it throws comes back as its description.
  function toJson(value: unknown): string | undefined {
    try {
      return stringify(value);
    } catch (e) {
      throw describe(e);
    }
  }

  // text() and notify(): a string as-is, a primitive as String(), anything else as JSON
  // ("undefined" when JSON has no text for it: a function, a symbol).
  function toOutputText(value: unknown): string {
    const type = typeof value;
    if (type === "string") return value as string;
    if (
      value === undefined || value === null || type === "boolean" || type === "number" ||
      type === "bigint"
    ) {
      return StringCtor(value);
    }
    const json = toJson(value);
    return json === undefined ? "undefined" : json;
  }

  function hex(code: number): string {
    return ReflectApply(numberToString, code, [16]) as string;
  }

  // The JSON text of a value that crosses to the harness (a stored value, a tool's input, a
  // content block), checked the way the reference host's JSON parser reads it back: a value with
  // no JSON text, a lone surrogate, nesting deeper than 128 and its reserved keys are refused with
  // that parser's messages (columns count UTF-8 bytes).
  function serializeJson(value: unknown): string {
    const json = toJson(value);
    if (json === undefined) throw SERIALIZE + "expected value at line 1 column 1";
    const problem = jsonProblem(json);
    if (problem !== undefined) throw SERIALIZE + problem;
    return json;
  }

  function jsonProblem(json: string): string | undefined {
    const n = json.length;
    // JSON.stringify escapes only lone surrogates as \udXXX; 128 nested containers need 256
    // characters at least.
    if (
      n < 256 && ReflectApply(stringIndexOf, json, ["\\ud"]) === -1 &&
      ReflectApply(stringIndexOf, json, ["$serde_json::private::"]) === -1
    ) return undefined;
    const at = (i: number) => ReflectApply(stringCharCodeAt, json, [i]) as number;
    const hexAt = (i: number) => parseInteger(ReflectApply(stringSlice, json, [i, i + 4]) as string, 16);
    // Whether each open container is an object (its next string after `{` or `,` is a key).
    const objects = new Bytes(128);
    let depth = 0;
    let bytes = 0; // UTF-8 bytes consumed
    let i = 0;
    let previous = 0; // the last structural character
    while (i < n) {
      const c = at(i);
      if (c === 0x22) {
        const isKey = depth > 0 && objects[depth - 1] === 1 && (previous === 0x7b || previous === 0x2c);
        const start = i + 1;
        i++;
        bytes++;
        for (;;) {
          const d = at(i);
          if (d === 0x22) break;
          if (d === 0x5c) {
            if (at(i + 1) !== 0x75) {
              i += 2;
              bytes += 2;
              continue;
            }
            const unit = hexAt(i + 2);
            i += 6;
            bytes += 6;
            if (unit >= 0xdc00 && unit <= 0xdfff) {
              return "lone leading surrogate in hex escape at line 1 column " + bytes;
            }
            if (unit >= 0xd800 && unit <= 0xdbff) {
              if (at(i) !== 0x5c) return "unexpected end of hex escape at line 1 column " + (bytes + 1);
              i++;
              bytes++;
              if (at(i) !== 0x75) return "unexpected end of hex escape at line 1 column " + (bytes + 1);
              const low = hexAt(i + 1);
              i += 5;
              bytes += 5;
              if (low < 0xdc00 || low > 0xdfff) {
                return "lone leading surrogate in hex escape at line 1 column " + bytes;
              }
            }
            continue;
          }
          if (d < 0x80) bytes += 1;
          else if (d < 0x800) bytes += 2;
          else if (d >= 0xd800 && d <= 0xdbff) {
            bytes += 4;
            i++;
          } else bytes += 3;
          i++;
        }
        if (isKey) {
          const key = ReflectApply(stringSlice, json, [start, i]);
          if (key === "$serde_json::private::RawValue" || key === "$serde_json::private::Number") {
            return "reserved JSON object key";
          }
        }
        i++;
        bytes++;
        previous = 0x22;
        continue;
      }
      if (c === 0x5b || c === 0x7b) {
        if (depth === 127) return "recursion limit exceeded at line 1 column " + (bytes + 1);
        objects[depth++] = c === 0x7b ? 1 : 0;
      } else if (c === 0x5d || c === 0x7d) {
        depth--;
      }
      if (c === 0x5b || c === 0x7b || c === 0x5d || c === 0x7d || c === 0x2c || c === 0x3a) previous = c;
      i++;
      bytes++;
    }
    return undefined;
  }

  // A key as Rust's `{:?}` prints it (the reference's "Unable to store" message).
  const DEBUG_ESCAPED =
    /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Mn}\p{Me}\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]/u;
  function debugQuoted(text: string): string {
    let out = '"';
    for (let i = 0; i < text.length; i++) {
      let code = ReflectApply(stringCodePointAt, text, [i]) as number;
      if (code > 0xffff) i++;
      else if (code >= 0xd800 && code <= 0xdfff) code = 0xfffd;
      const ch = ReflectApply(fromCodePoint, StringCtor, [code]) as string;
      if (ch === '"') out += '\\"';
      else if (ch === "\\") out += "\\\\";
      else if (ch === "\n") out += "\\n";
      else if (ch === "\r") out += "\\r";
      else if (ch === "\t") out += "\\t";
      else if (ch === "\0") out += "\\0";
      else if (ReflectApply(regexpTest, DEBUG_ESCAPED, [ch])) out += "\\u{" + hex(code) + "}";
      else out += ch;
    }
    return out + '"';
  }

  function settle(failed: boolean, value: unknown): void {
    if (phase() !== 0) return;
    if (!failed) finish(0, "");
    else finish(1, describe(value));
  }

  function startsWithIgnoreCase(text: string, prefix: string): boolean {
    return ReflectApply(
      stringToLowerCase,
      ReflectApply(stringSlice, text, [0, prefix.length]),
      [],
    ) === prefix;
  }

  function isObjectLike(value: unknown): value is Record<string, unknown> {
    return value !== null && (typeof value === "object" || typeof value === "function");
  }

  // An MCP content block as the reference reads it: the JSON of the value's enumerable properties.
  function readBlock(value: unknown): Record<string, unknown> | undefined {
    const json = serializeJson(value);
    const block = parse(json);
    return isObjectLike(block) && !isArray(block) ? block as Record<string, unknown> : undefined;
  }

  // The data URL of an image or audio block; `kind` is "image" or "audio".
  function blockUrl(block: Record<string, unknown>, kind: string, prefix: string): string {
    const data = block.data;
    if (typeof data !== "string" || data === "") throw prefix + " expected MCP " + kind + " data";
    const mimeType = block.mimeType;
    const snake = block.mime_type;
    let mime = typeof mimeType === "string" ? mimeType : typeof snake === "string" ? snake : "";
    if (mime === "") mime = "application/octet-stream";
    return startsWithIgnoreCase(data, "data:") ? data : "data:" + mime + ";base64," + data;
  }

  function metaDetail(block: Record<string, unknown>): string | undefined {
    const meta = block._meta;
    if (!isObjectLike(meta)) return undefined;
    const detail = meta["codex/imageDetail"];
    return detail === "auto" || detail === "low" || detail === "high" || detail === "original"
      ? detail
      : undefined;
  }

  function checkImageUrl(url: string): void {
    if (startsWithIgnoreCase(url, "http://") || startsWithIgnoreCase(url, "https://")) {
      throw "Tool call failed: remote image URLs are not supported in tool outputs. " +
        "Pass a base64 data URI instead";
    }
    if (!startsWithIgnoreCase(url, "data:")) {
      throw "Tool call failed: invalid image output. Pass a base64 data URI instead";
    }
  }

  function normalizeDetail(detail: string | undefined): string {
    if (detail === undefined) return "high";
    const lower = ReflectApply(stringToLowerCase, detail, []) as string;
    if (lower !== "auto" && lower !== "low" && lower !== "high" && lower !== "original") {
      throw "image detail must be one of: auto, low, high, original";
    }
    return lower;
  }

  // image() (and generatedImage()): emits the item. A `detail` getter that throws does not stop the
  // item (the reference reads it as absent), but its exception is thrown once the item is out.
  function emitImage(input: unknown, override: unknown): void {
    if (override !== undefined && override !== null && typeof override !== "string") {
      throw IMAGE_DETAIL_TYPE;
    }
    let url: string;
    let detail: string | undefined;
    let pending: { error: unknown } | undefined;
    if (typeof input === "string") {
      if (input === "") throw IMAGE_GENERIC;
      url = input;
    } else if (isObjectLike(input)) {
      let imageUrl: unknown;
      try {
        imageUrl = input.image_url;
      } catch (e) {
        throw describe(e);
      }
      if (typeof imageUrl === "string") {
        if (imageUrl === "") throw IMAGE_GENERIC;
        url = imageUrl;
        let own: unknown;
        try {
          own = input.detail;
        } catch (e) {
          pending = { error: e };
        }
        if (own !== undefined && own !== null && typeof own !== "string") throw IMAGE_DETAIL_TYPE;
        if (typeof own === "string") detail = own;
      } else if (imageUrl !== undefined) {
        throw IMAGE_GENERIC;
      } else {
        const block = readBlock(input);
        const type = block?.type;
        if (block === undefined || typeof type !== "string") throw IMAGE_GENERIC;
        if (type !== "image") throw 'image only accepts MCP image blocks, got "' + type + '"';
        url = blockUrl(block, "image", "image");
        detail = metaDetail(block);
      }
    } else {
      throw IMAGE_GENERIC;
    }
    if (typeof override === "string") detail = override;
    checkImageUrl(url);
    emit(1, url, normalizeDetail(detail));
    if (pending !== undefined) throw pending.error;
  }

  function emitAudio(input: unknown): void {
    let url: string;
    if (typeof input === "string") {
      if (input === "") throw AUDIO_GENERIC;
      url = input;
    } else if (isObjectLike(input)) {
      let audioUrl: unknown;
      try {
        audioUrl = input.audio_url;
      } catch (e) {
        throw describe(e);
      }
      if (typeof audioUrl === "string") {
        if (audioUrl === "") throw AUDIO_GENERIC;
        url = audioUrl;
      } else if (audioUrl !== undefined) {
        throw AUDIO_GENERIC;
      } else {
        const block = readBlock(input);
        const type = block?.type;
        if (block === undefined || typeof type !== "string") throw AUDIO_GENERIC;
        if (type !== "audio") throw 'audio only accepts MCP audio blocks, got "' + type + '"';
        url = blockUrl(block, "audio", "audio");
      }
    } else {
      throw AUDIO_GENERIC;
    }
    if (!startsWithIgnoreCase(url, "data:")) {
      throw "Tool call failed: invalid audio output. Pass a base64 data URI instead";
    }
    emit(5, url, "");
  }

  // The fields of each MCP content block type that must hold a string, and those that may.
  function isString(value: unknown): boolean {
    return typeof value === "string";
  }
  function optionalString(block: Record<string, unknown>, key: string): boolean {
    const value = block[key];
    return value === undefined || value === null || typeof value === "string";
  }

  // content()'s emitter for one block (the reference's native one): the block's JSON is read as
  // an MCP ContentBlock (text, image, audio, resource, resource_link); a text becomes a text item,
  // an image or audio an inline data URL, a resource or resource link the block's JSON text.
  // An integer the reference's block reader cannot hold (beyond 64 bits) fails any block.
  function hasHugeInteger(value: unknown): boolean {
    if (typeof value === "number") {
      return numberIsFinite(value) && mathTrunc(value) === value && value < 1e21 && value > -1e21 &&
        (value >= 18446744073709551616 || value < -9223372036854775808);
    }
    if (!isObjectLike(value)) return false;
    const keys = getOwnPropertyNames(value);
    for (let i = 0; i < keys.length; i++) {
      if (hasHugeInteger((value as Record<string, unknown>)[keys[i]])) return true;
    }
    return false;
  }

  function emitBlock(value: unknown): undefined {
    live();
    if (value === undefined) throw CONTENT_GENERIC;
    const block = readBlock(value);
    if (block === undefined || hasHugeInteger(block)) throw CONTENT_GENERIC;
    const type = block.type;
    if (type === "text") {
      if (!isString(block.text)) throw CONTENT_GENERIC;
      const meta = block._meta;
      if (isObjectLike(meta) && meta["codex/encryptedContent"] === true) {
        throw "content cannot emit encrypted MCP text";
      }
      emit(0, block.text as string, "");
      return undefined;
    }
    if (type === "image" || type === "audio") {
      if (!isString(block.data)) throw CONTENT_GENERIC;
      if (block.mimeType !== undefined && block.mime_type !== undefined) throw CONTENT_GENERIC;
      if (!optionalString(block, "mimeType") || !optionalString(block, "mime_type")) throw CONTENT_GENERIC;
      const data = block.data as string;
      const mime = typeof block.mimeType === "string"
        ? block.mimeType
        : typeof block.mime_type === "string"
        ? block.mime_type
        : "application/octet-stream";
      const url = startsWithIgnoreCase(data, "data:") ? data : "data:" + mime + ";base64," + data;
      if (type === "image") emit(1, url, metaDetail(block) ?? "high");
      else emit(5, url, "");
      return undefined;
    }
    if (type === "resource") {
      const resource = block.resource;
      if (!isObjectLike(resource) || !isString(resource.uri)) throw CONTENT_GENERIC;
      if (!isString(resource.text) && !isString(resource.blob)) throw CONTENT_GENERIC;
      emit(0, stringify(block) as string, "");
      return undefined;
    }
    if (type === "resource_link") {
      if (!isString(block.uri) || !isString(block.name)) throw CONTENT_GENERIC;
      if (
        !optionalString(block, "title") || !optionalString(block, "description") ||
        !optionalString(block, "mimeType")
      ) throw CONTENT_GENERIC;
      // `size` is a 64-bit signed integer written as one (JSON writes 1e21 and up as a float).
      const size = block.size;
      if (
        size !== undefined && size !== null &&
        (typeof size !== "number" || mathTrunc(size) !== size || size >= 9223372036854775808 ||
          size < -9223372036854775808)
      ) throw CONTENT_GENERIC;
      emit(0, stringify(block) as string, "");
      return undefined;
    }
    throw CONTENT_GENERIC;
  }

  function text(value?: unknown): undefined {
    live();
    emit(0, toOutputText(value), "");
    return undefined;
  }

  function image(imageUrlOrItem?: unknown, detail?: unknown): undefined {
    live();
    emitImage(imageUrlOrItem, detail);
    return undefined;
  }

  function audio(audioUrlOrItem?: unknown): undefined {
    live();
    emitAudio(audioUrlOrItem);
    return undefined;
  }

  function generatedImage(result?: unknown): undefined {
    live();
    if (!isObjectLike(result)) throw "generatedImage expects an image generation result object";
    let hint: unknown;
    try {
      hint = result.output_hint;
    } catch {
      throw "failed to read generatedImage output_hint";
    }
    if (hint !== undefined && typeof hint !== "string") {
      throw "generatedImage output_hint must be a string when provided";
    }
    emitImage(result, undefined);
    if (typeof hint === "string" && hint !== "") emit(0, hint, "");
    return undefined;
  }

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
      throw "stored values exceed the " + maxStoredValueBytes + "-byte session limit";
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

  function callTool(name: string, arg: unknown): Promise<unknown> {
    live();
    const input = arg === undefined ? undefined : serializeJson(arg);
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

  // ---- Stack traces -------------------------------------------------------------------------
  //
  // The context is entered from macrotasks of the outer realm, whose frames (the drain, timers,
  // the module evaluation) sit below user frames, and the helpers are functions of their own file.
  // A stack trace shows only what the reference's does: the cell's frames (`exec_main.mjs`, code
  // it evals), the combinators' frames (an unnamed script), and the built-ins those call. Frames
  // of the helpers and of the outer realm are dropped, and so is a built-in whose caller (the
  // next frame below that is not a built-in) is one of them. The header is V8's own (which reads
  // the error's original message). Call site methods are the originals, captured first.
  //
  // Deno asks `Error.prepareStackTrace` of the error's realm for a formatter; the accessor serving
  // it lives on Function.prototype, so that `Error` keeps exactly its own properties and
  // `Error.prepareStackTrace` reads as the cell set it (undefined at first). A read by the platform
  // is told from a read by the cell by a probe: while V8 formats a stack trace it formats any
  // nested one itself, without asking the platform.
  //
  // V8 counts every frame against `Error.stackTraceLimit`, the host's below the cell's too, so
  // with the reference's 10 the async frames (`at async …`), which come last, were cut off. The
  // context's limit is therefore INTERNAL_LIMIT, and a stack formatted under it shows at most the
  // reference's 10 frames of the cell; a limit the cell sets itself applies as it is.
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

  // ---- Globals ------------------------------------------------------------------------------

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

  function installGlobal(name: string, value: unknown): void {
    defineProperty(global, name, {
      __proto__: null,
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    } as never);
  }

  // A helper as the reference's native functions look: `function () { [native code] }`, name "",
  // length 0, and a prototype object (they are constructors: `new text(x)` works too).
  function nativeLike(fn: (...args: never[]) => unknown): unknown {
    const bound = ReflectApply(functionBind, fn, [undefined]) as object;
    defineProperty(bound, "length", { __proto__: null, value: 0 } as never);
    defineProperty(bound, "name", { __proto__: null, value: "" } as never);
    const prototype = {};
    defineProperty(prototype, "constructor", {
      __proto__: null,
      value: bound,
      writable: true,
      enumerable: false,
      configurable: true,
    } as never);
    defineProperty(bound, "prototype", {
      __proto__: null,
      value: prototype,
      writable: true,
      enumerable: false,
      configurable: false,
    } as never);
    return bound;
  }

  const made = combinators(nativeLike(emitBlock) as (block: unknown) => undefined);
  const helpers: [string, unknown][] = [
    ["text", nativeLike(text)],
    ["image", nativeLike(image)],
    ["audio", nativeLike(audio)],
    ["generatedImage", nativeLike(generatedImage)],
    ["content", made.content],
    ["store", nativeLike(store)],
    ["load", nativeLike(load)],
    ["notify", nativeLike(notify)],
    ["yield_control", nativeLike(yield_control)],
    ["exit", nativeLike(exit)],
    ["setTimeout", nativeLike(setTimeout)],
    ["clearTimeout", nativeLike(clearTimeout)],
    ["as_settled", made.as_settled],
    ["stream_settled", made.stream_settled],
  ];
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
    defineProperty(global, "FinalizationRegistry", {
      __proto__: null,
      value: guarded,
      writable: true,
      enumerable: false,
      configurable: true,
    } as never);
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

  // The module's evaluation promise belongs to the outer realm; `then` of this realm's Promise
  // works on it, and its reactions are jobs of this context's queue.
  function watch(evaluation: unknown): void {
    try {
      ReflectApply(promiseThen, evaluation, [
        () => settle(false, undefined),
        // After exit() the cell is over already, and its sentinel is ignored (settle checks).
        (reason: unknown) => settle(true, reason),
      ]);
    } catch (e) {
      settle(true, e);
    }
  }

  function fail(thrown: unknown): void {
    settle(true, thrown);
  }

  function complete(): void {
    settle(false, undefined);
  }

  function promiseIntact(): boolean {
    try {
      const then = getOwnPropertyDescriptor(PromiseProto, "then");
      const ctor = getOwnPropertyDescriptor(PromiseProto, "constructor");
      const species = getOwnPropertyDescriptor(PromiseCtor, speciesKey);
      return then?.value === promiseThen && ctor?.value === PromiseCtor && species?.get === speciesGetter &&
        getPrototypeOf(PromiseProto) === ObjectProto;
    } catch {
      return false;
    }
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

  return { watch, fail, complete, promiseIntact, fireTimer, deliver, configure, describe };
}

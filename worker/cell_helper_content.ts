/**
 * The output helpers of a cell, made inside its context (`cell_helpers.ts` explains how helpers are
 * made): `text`, `image`, `audio`, `generatedImage`, and the emitter of one MCP content block that
 * `content()` (`cell_combinators.ts`) calls for each block. Each reads its argument the way the
 * reference host does and throws the reference's text for what it refuses.
 *
 * @module
 */
import type { HelperKit } from "./cell_helper_kit.ts";
import type { JsonHelpers } from "./cell_helper_json.ts";

/** What {@link createContentHelpers} makes: functions of the cell's context. */
export interface ContentHelpers {
  text: (value?: unknown) => undefined;
  image: (imageUrlOrItem?: unknown, detail?: unknown) => undefined;
  audio: (audioUrlOrItem?: unknown) => undefined;
  generatedImage: (result?: unknown) => undefined;
  /** `content()`'s emitter of one block. */
  emitBlock: (value: unknown) => undefined;
}

/**
 * Makes the {@link ContentHelpers} inside a cell's context; like every helper factory it refers to
 * nothing outside its own body but the context's built-ins (the reason it is one function).
 */
export function createContentHelpers(kit: HelperKit, json: JsonHelpers): ContentHelpers {
  const { describe, emit, isObjectLike, live, startsWithIgnoreCase } = kit;
  const { readBlock, toOutputText } = json;
  // Originals, captured before user code can replace them.
  const ReflectApply = Reflect.apply;
  const getOwnPropertyNames = Object.getOwnPropertyNames;
  const stringify = JSON.stringify;
  const numberIsFinite = Number.isFinite;
  const mathTrunc = Math.trunc;
  const stringToLowerCase = String.prototype.toLowerCase;

  const IMAGE_GENERIC = "image expects a non-empty image URL string, an object with image_url " +
    "and optional detail, or a raw MCP image block";
  const IMAGE_DETAIL_TYPE = "image detail must be a string when provided";
  const AUDIO_GENERIC = "audio expects a non-empty audio URL string, an object with audio_url, " +
    "or a raw MCP audio block";
  const CONTENT_GENERIC = "content expects one MCP ContentBlock";

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

  return { text, image, audio, generatedImage, emitBlock };
}

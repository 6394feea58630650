/**
 * Normalised observations: what a scenario saw, with what legitimately varies between runs taken
 * out, so that the reference's and ours compare with `deepEqual`. Folder-private.
 *
 * - UUIDs become `<uuid-N>`, numbered by first appearance in the observation (so equal IDs stay
 *   equal and distinct ones distinct).
 * - Durations (`code_mode_host_duration_ns`, `result_buffered_for_ns`, the
 *   `codex-code-mode-result-buffered-for-ns` header) become `"<ns>"`: their presence is kept.
 * - Strings longer than 240 characters become `<N chars #HASH "head…tail">`.
 * - The integer `id` of a V1 frame becomes `<request-N>` (operation responses and initial responses)
 *   or `<delegate-N>` (delegate requests and cancels), numbered by first appearance: scenarios share
 *   one V1 connection, so its counters depend on what ran before.
 * - Unless a scenario asks for the raw wire (`raw`), three details that no gRPC client can act on
 *   are left out, so that each shows up once, in the scenarios that observe them raw, and not in
 *   every gRPC scenario: fields without explicit presence that carried their default value (a proto3
 *   decoder cannot tell them from absent ones), the message of an `OK` status, and response headers
 *   and trailers.
 *
 * @module
 */

import { isImplicitDefault } from "./_wire.ts";

// deno-lint-ignore no-explicit-any
export type Json = any;

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
const DURATION_KEYS = new Set([
  "code_mode_host_duration_ns",
  "result_buffered_for_ns",
  "codex-code-mode-result-buffered-for-ns",
]);
const LONG = 240;
const REQUEST_FRAMES = new Set([
  "operation/request",
  "operation/response",
  "execute/initialResponse",
  "operation/cancel",
  "operation/yield",
]);
const DELEGATE_FRAMES = new Set(["delegate/request", "delegate/response", "delegate/cancel"]);

function hash(text: string): string {
  // FNV-1a, 32 bits, over UTF-16 code units: enough to tell two long texts apart.
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, "0");
}

/** Normalises one observation (see the module doc). */
export function normalise(value: Json, options: { raw?: boolean } = {}): Json {
  const raw = options.raw ?? false;
  const uuids = new Map<string, string>();
  const text = (s: string): string => {
    const replaced = s.replace(UUID, (u) => {
      const key = u.toLowerCase();
      if (!uuids.has(key)) uuids.set(key, `<uuid-${uuids.size + 1}>`);
      return uuids.get(key)!;
    })
      // A JSON V1 frame's length counts the digits of its durations, which vary from run to run.
      .replace(/(IPC frame length \d+?)\d{3} exceeds/g, "$1<ddd> exceeds")
      // So does a gRPC message's.
      .replace(/(encoded message length too large: found \d+?)\d{3} bytes/g, "$1<ddd> bytes");
    if (replaced.length <= LONG) return replaced;
    return `<${replaced.length} chars #${hash(replaced)} ${JSON.stringify(replaced.slice(0, 60))}…${
      JSON.stringify(replaced.slice(-60))
    }>`;
  };
  const ids = new Map<string, string>();
  const frameId = (type: string, id: number): string | number => {
    const kind = REQUEST_FRAMES.has(type) ? "request" : DELEGATE_FRAMES.has(type) ? "delegate" : undefined;
    if (!kind) return id;
    const key = `${kind}:${id}`;
    if (!ids.has(key)) {
      ids.set(
        key,
        `<${kind}-${[...ids.keys()].filter((k) => k.startsWith(kind)).length + 1}>`,
      );
    }
    return ids.get(key)!;
  };
  const walk = (v: Json, key?: string): Json => {
    if (key !== undefined && DURATION_KEYS.has(key) && v !== undefined && v !== null) return "<ns>";
    if (typeof v === "string") return text(v);
    if (Array.isArray(v)) return v.map((x) => walk(x));
    if (v && typeof v === "object") {
      const out: Json = {};
      const okStatus = !raw && v.code === "OK" && typeof v.details === "string";
      for (const [k, x] of Object.entries(v)) {
        if (x === undefined) continue;
        if (!raw && (isImplicitDefault(v, k) || (okStatus && k === "details"))) continue;
        if (!raw && (k === "headers" || k === "trailers")) continue;
        if (k === "id" && typeof x === "number" && typeof v.type === "string") {
          out.id = frameId(v.type, x);
          continue;
        }
        out[text(k)] = walk(x, k);
      }
      return out;
    }
    return v;
  };
  return walk(value);
}

/** Pretty JSON for printing an observation. */
export function show(value: Json): string {
  return JSON.stringify(value, null, 1);
}

/**
 * A compact line-by-line difference of two observations (the first differing paths), for failure
 * messages that also print both sides.
 */
export function differences(a: Json, b: Json, path = "", out: string[] = [], limit = 12): string[] {
  if (out.length >= limit) return out;
  if (JSON.stringify(a) === JSON.stringify(b)) return out;
  if (a && b && typeof a === "object" && typeof b === "object" && Array.isArray(a) === Array.isArray(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) differences(a[k], b[k], `${path}/${k}`, out, limit);
    return out;
  }
  out.push(`${path || "/"}: reference ${JSON.stringify(a)} | ours ${JSON.stringify(b)}`);
  return out;
}

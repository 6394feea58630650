/**
 * Cell batteries: `battery1.json` (the first probe battery) and every `cells/*.json`. Each file runs
 * as one test per transport, in one session per output mode, with one test step per entry.
 * Folder-private.
 *
 * Two entry forms are read:
 * - `{name, cells, mode?, deliberate?}` (battery1): `cells` are sources or `{source, yield?, max?,
 *   wait?: {yield?, maxTokens?, terminate?}}` (`yield` and `max` are the Execute's `yield_time_ms` and
 *   `max_output_tokens`; `wait` observes the cell again);
 * - `{name, source, options?, deliberate?}` (`cells/*.json`): `options` may hold `setup` (sources run
 *   first, in the same session), `enabledTools` (`[{name, ...}]`; each call is answered with its own
 *   input), `wait` (as above), `yieldTimeMs` and `maxOutputTokens`.
 *
 * `mode` is `server` (default, as Codex 0.171) or `client`. `deliberate` names a deliberate difference
 * the entry shows; each side is then checked (for `typescript-cells`: the reference's outcomes say
 * `SyntaxError`, ours do not). Fields the suite does not know fail the file's test with their names.
 *
 * Sharing a session keeps a battery fast; both hosts run the same entries in the same order, so
 * their observations stay comparable. After each entry, a cell still running is terminated (the
 * observation shows it) and the entry's cells are awaited closed, so the session events recorded
 * for the entry (gRPC lease events, V1 frames) are complete. A session the host lost, or a host an
 * entry broke, is replaced for the next entry (the observation says so). Each entry's observation is normalised on its own,
 * and its cell IDs are renamed by {@link relabelCells} before the comparison.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { Session } from "./_driver.ts";
import type { Json } from "./_observe.ts";
import { type Ctx, type ScenarioBody, wireOf } from "./_runner.ts";
import { type CellSpec, pause } from "./_scenario.ts";

/** One entry, read from either form. */
export interface BatteryEntry {
  name: string;
  mode: "server" | "client";
  /** Setup cells, then the entry's cell (the last one). */
  cells: CellSpec[];
  /** The id of a deliberate difference the entry shows. */
  deliberate?: string;
  /** How that difference is checked, when the entry has a check of its own ({@link DELIBERATE_ENTRIES}). */
  difference?: BatteryDifference;
}

/** A deliberate difference a battery entry shows, and how to check it. */
export interface BatteryDifference {
  /** The id in `deliberate_differences.ts`. */
  readonly id: string;
  /**
   * Throws unless this side's records show what the table says; returns false where the difference
   * does not apply on this transport (the entry is then compared as usual).
   */
  check(kind: string, records: Json[], transport: string): boolean;
  /**
   * The records with the difference taken out; both sides' are then compared as usual. Absent: the
   * whole entry is the difference.
   */
  rest?(records: Json[]): Json[];
}

/** One battery file. */
export interface Battery {
  /** `battery1` or `cells/NAME`. */
  label: string;
  entries: BatteryEntry[];
  /** Fields the suite does not know, if any. */
  problems: string[];
}

const ENTRY_FIELDS = new Set(["name", "cells", "source", "options", "mode", "deliberate"]);
const CELL_FIELDS = new Set(["source", "yield", "max", "wait"]);
const OPTION_FIELDS = new Set(["setup", "enabledTools", "wait", "yieldTimeMs", "maxOutputTokens"]);
const WAIT_FIELDS = new Set(["yield", "maxTokens", "terminate", "afterMs"]);

/** Default yield of a battery cell (as the probe that made battery1). */
const BATTERY_YIELD_MS = 5_000;

function unknown(object: Json, known: Set<string>, where: string): string[] {
  if (!object || typeof object !== "object") return [];
  return Object.keys(object).filter((k) => !known.has(k)).map((k) => `${where}.${k}`);
}

function waitOf(wait: Json): CellSpec["wait"] {
  return {
    ...(wait.yield === undefined ? {} : { yieldTimeMs: wait.yield }),
    ...(wait.maxTokens === undefined ? {} : { maxTokens: wait.maxTokens }),
    ...(wait.terminate ? { terminate: true } : {}),
    ...(wait.afterMs === undefined ? {} : { afterMs: wait.afterMs }),
  };
}

/** Reads one entry of either form; problems are appended to `problems`. */
function readEntry(raw: Json, problems: string[]): BatteryEntry {
  const name = String(raw.name);
  problems.push(...unknown(raw, ENTRY_FIELDS, name));
  const base = {
    name,
    mode: raw.mode === "client" ? "client" as const : "server" as const,
    ...(raw.deliberate ? { deliberate: String(raw.deliberate) } : {}),
  };
  if (Array.isArray(raw.cells)) {
    const cells = raw.cells.map((cell: Json, i: number): CellSpec => {
      if (typeof cell === "string") return { source: cell };
      problems.push(...unknown(cell, CELL_FIELDS, `${name}.cells[${i}]`));
      if (cell.wait) problems.push(...unknown(cell.wait, WAIT_FIELDS, `${name}.cells[${i}].wait`));
      return {
        source: cell.source,
        ...(cell.yield === undefined ? {} : { yieldTimeMs: cell.yield }),
        ...(cell.max === undefined ? {} : { maxOutputTokens: cell.max }),
        ...(cell.wait ? { wait: waitOf(cell.wait) } : {}),
      };
    });
    return { ...base, cells };
  }
  const options = raw.options ?? {};
  problems.push(...unknown(options, OPTION_FIELDS, `${name}.options`));
  if (options.wait) problems.push(...unknown(options.wait, WAIT_FIELDS, `${name}.options.wait`));
  const tools = (options.enabledTools ?? []).map((t: Json) => ({
    name: t.name,
    ...(t.toolName === undefined ? {} : { toolName: t.toolName }),
    ...(t.namespace === undefined ? {} : { namespace: t.namespace }),
    ...(t.kind === undefined ? {} : { kind: t.kind }),
    ...(t.description === undefined ? {} : { description: t.description }),
  }));
  const setup = (options.setup ?? []).map((source: string): CellSpec => ({ source }));
  const main: CellSpec = {
    source: raw.source,
    ...(tools.length ? { tools, answer: (call) => call.input ?? null } : {}),
    ...(options.yieldTimeMs === undefined ? {} : { yieldTimeMs: options.yieldTimeMs }),
    ...(options.maxOutputTokens === undefined ? {} : { maxOutputTokens: options.maxOutputTokens }),
    ...(options.wait ? { wait: waitOf(options.wait) } : {}),
  };
  return { ...base, cells: [...setup, main] };
}

function batteryFiles(): URL[] {
  const files = [new URL("./battery1.json", import.meta.url)];
  const dir = new URL("./cells/", import.meta.url);
  try {
    const names = [...Deno.readDirSync(dir)].filter((e) => e.isFile && e.name.endsWith(".json")).map((e) =>
      e.name
    );
    for (const name of names.sort()) files.push(new URL(name, dir));
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return files;
}

/** Every battery file. */
export function batteries(): Battery[] {
  return batteryFiles().map((file) => {
    const label = file.pathname.replace(/^.*\/tests\/reference\//, "").replace(/\.json$/, "");
    const problems: string[] = [];
    const seen = new Map<string, number>();
    const entries = (JSON.parse(Deno.readTextFileSync(file)) as Json[]).map((raw) => {
      const entry = readEntry(raw, problems);
      const listed = DELIBERATE_ENTRIES[label]?.[entry.name];
      if (typeof listed === "string" && !entry.deliberate) entry.deliberate = listed;
      else if (listed && typeof listed !== "string" && !entry.deliberate) {
        entry.deliberate = listed.id;
        entry.difference = listed;
      }
      const n = (seen.get(entry.name) ?? 0) + 1;
      seen.set(entry.name, n);
      return n === 1 ? entry : { ...entry, name: `${entry.name} #${n}` };
    });
    return { label, entries, problems };
  });
}

/**
 * A difference confined to texts: the reference's records match `reference`, ours match `ours`
 * (both applied to the records' JSON); every match of either is then replaced by `placeholder` and the
 * rest compared.
 */
function textSwap(id: string, reference: RegExp, ours: RegExp, placeholder: string): BatteryDifference {
  const global = (re: RegExp) => new RegExp(re.source, re.flags.includes("g") ? re.flags : re.flags + "g");
  return {
    id,
    check(kind, records) {
      const text = JSON.stringify(records);
      if (kind === "reference") assert.match(text, reference, "the reference's text");
      else assert.match(text, ours, "this host's text");
      return true;
    },
    rest(records) {
      const text = JSON.stringify(records).replace(global(reference), placeholder).replace(
        global(ours),
        placeholder,
      );
      return JSON.parse(text);
    },
  };
}

/** A difference that is the whole entry: each side's records must match its pattern and not the other's. */
function whole(id: string, reference: RegExp, ours: RegExp): BatteryDifference {
  return {
    id,
    check(kind, records) {
      const text = JSON.stringify(records);
      const [mine, theirs] = kind === "reference" ? [reference, ours] : [ours, reference];
      assert.match(text, mine, `${kind} shows its side of the difference`);
      assert.doesNotMatch(text, theirs, `${kind} does not show the other side`);
      return true;
    },
  };
}

/** The source text of a helper, whole or as `_observe.ts` abbreviates a long text, in records' JSON. */
const HELPER_SOURCE =
  /"(?:<\d+ chars #[0-9a-f]{8} \\")?function (?:content|as_settled|stream_settled)\((?:[^"\\]|\\.)*"/;

/** `helper-source-text`: both sides print a helper's source; the sources differ, the rest must not. */
const HELPER_SOURCES: BatteryDifference = textSwap(
  "helper-source-text",
  HELPER_SOURCE,
  HELPER_SOURCE,
  '"<helper source>"',
);

/**
 * Battery entries that show a deliberate difference but whose file does not say so (the files are
 * written elsewhere): file label → entry name → difference id (checked by {@link BATTERY_CHECKS}) or a
 * check of the entry's own. Listed here, never inferred.
 */
export const DELIBERATE_ENTRIES: Record<string, Record<string, string | BatteryDifference>> = {
  "cells/errors": {
    // The reference's V8 prints these uncaught values on its stdout.
    "throw-object-tostring-throws": "stdout-clean",
    "throw-stack-getter-throws": "stdout-clean",
    // The top frame's column varies from run to run on either host; the abbreviated text keeps its
    // length, head and tail, and only its hash may differ.
    "stack-overflow": {
      id: "v8-engine",
      check(_kind, records) {
        assert.match(JSON.stringify(records), /RangeError: Maximum call stack size exceeded/);
        return true;
      },
      rest(records) {
        return JSON.parse(
          JSON.stringify(records).replace(
            /(<\d+ chars )#[0-9a-f]{8}( \\"(?:Script error:\\\\n)?RangeError: Maximum call stack size exceeded)/g,
            "$1#<hash>$2",
          ),
        );
      },
    },
    "error-prepare-stack-trace-typeof": textSwap(
      "stack-trace-limit",
      /"text":"10"/,
      /"text":"64"/,
      '"text":"<Error.stackTraceLimit>"',
    ),
  },
  "cells/globals": {
    "globals-finalization-registry": textSwap(
      "finalization-registry",
      /"function FinalizationRegistry\(\) \{ \[native code\] \}"/,
      /"function \(\) \{ \[native code\] \}"/,
      '"<String(FinalizationRegistry)>"',
    ),
  },
  "cells/helpers": {
    "content-tostring": HELPER_SOURCES,
    "as-settled-tostring": HELPER_SOURCES,
  },
  "cells/module": {
    "module-deep-nesting": whole(
      "v8-engine",
      /Script error:\\nRangeError: Maximum call stack size exceeded/,
      /"text":"1"/,
    ),
    "typescript-annotation": "typescript-cells",
    "typescript-interface": "typescript-cells",
    "typescript-enum": "typescript-cells",
    "typescript-generic-call": "typescript-cells",
    "typescript-as": "typescript-cells",
    "typescript-nonnull": "typescript-cells",
    "typescript-import-type": "typescript-cells",
    "typescript-stack-line": "typescript-cells",
  },
  "cells/probes": {
    "probe-fn-tostring": HELPER_SOURCES,
    "probe-obj-stack-getter-throws": "stdout-clean",
    "probe-array-with-tostring-throws": "stdout-clean",
    "probe-imp-source-phase": whole(
      "v8-engine",
      /SyntaxError: Unexpected identifier 'x'/,
      /Unsupported import in exec: y/,
    ),
    "probe-fn-proto-names": textSwap(
      "prepare-stack-trace-accessor",
      /"length,name,constructor,apply,bind,call,toString,arguments,caller"/,
      /"length,name,constructor,apply,bind,call,toString,arguments,caller,prepareStackTrace"/,
      '"<Function.prototype names>"',
    ),
  },
};

/**
 * Per-id checks of the deliberate differences that battery entries name by id. A check returns false
 * where the difference does not apply (that transport is compared as usual).
 */
export const BATTERY_CHECKS: Record<string, (kind: string, records: Json[], transport: string) => boolean> = {
  "typescript-cells": (kind, records) => {
    const cells = records.filter((r) => /^(cell|setup \d+)$/.test(Object.keys(r)[0] ?? ""));
    assert.ok(cells.length > 0, "the entry ran cells");
    const text = JSON.stringify(cells);
    if (kind === "reference") assert.match(text, /SyntaxError/, "the reference rejects TypeScript");
    else assert.doesNotMatch(text, /SyntaxError/, "this host runs TypeScript");
    return true;
  },
  "stdout-clean": (kind, records, transport) => {
    if (transport === "grpc-tcp") return false;
    const replaced = records.some((r) => "host replaced" in r);
    if (kind === "reference") assert.ok(replaced, "the reference's stdout stopped being the protocol");
    else assert.ok(!replaced, "this host's stdout carries only the protocol");
    return true;
  },
};

/** The session's events so far: gRPC lease events, or every V1 frame of the session. */
function events(session: Session): Json[] {
  const log = session.log();
  return log.lease?.events ?? log.frames ?? [];
}

const LOST_SESSION = /unknown code-mode session|code-mode session is closed/;

/**
 * Renames the entry's cell IDs `c1`, `c2`, … in order of appearance (in `cell_id`/`cellId` fields and
 * in `exec cell N` texts), so that an entry's observation does not depend on how many cells the
 * entries before it made on either host.
 */
export function relabelCells(records: Json): Json {
  const names = new Map<string, string>();
  const name = (id: string) => {
    if (!names.has(id)) names.set(id, `c${names.size + 1}`);
    return names.get(id)!;
  };
  const walk = (v: Json): Json => {
    if (typeof v === "string") return v.replace(/\bexec cell (\d+)\b/g, (_, id) => `exec cell ${name(id)}`);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === "object") {
      const out: Json = {};
      for (const [k, x] of Object.entries(v)) {
        out[k] = (k === "cell_id" || k === "cellId") && typeof x === "string" && /^\d+$/.test(x)
          ? name(x)
          : walk(x);
      }
      return out;
    }
    return v;
  };
  return walk(records);
}

async function runEntry(
  ctx: Ctx,
  session: Session,
  entry: BatteryEntry,
): Promise<{ records: Json[]; lost: boolean }> {
  const records: Json[] = [];
  const rec = (label: string, value: unknown) => records.push({ [label]: wireOf(value) });
  const before = events(session).length;
  const last = new Map<string, string>();
  let lost = false;
  for (const [index, spec] of entry.cells.entries()) {
    const label = index === entry.cells.length - 1 ? "cell" : `setup ${index + 1}`;
    const exec = session.exec(spec.source, { yieldTimeMs: BATTERY_YIELD_MS, ...spec });
    const answering = (async () => {
      if (!spec.answer) return;
      for (;;) {
        const call = await session.toolCallUntil(exec.outcome);
        if (!call) return;
        rec("tool call", { name: call.name, input: call.input ?? null });
        await call.succeed(spec.answer(call));
      }
    })();
    const outcome = await exec.outcome;
    await answering;
    rec(label, outcome);
    if (outcome.kind === "error" && LOST_SESSION.test(outcome.message ?? "")) {
      lost = true;
      break;
    }
    if (!outcome.cell) continue;
    last.set(outcome.cell, outcome.kind);
    if (spec.wait) {
      if (spec.wait.afterMs) await pause(spec.wait.afterMs);
      const result = spec.wait.terminate
        ? await session.terminate(outcome.cell)
        : await session.wait(outcome.cell, {
          yieldTimeMs: spec.wait.yieldTimeMs ?? BATTERY_YIELD_MS,
          ...(spec.wait.maxTokens === undefined ? {} : { maxTokens: spec.wait.maxTokens }),
        }).result;
      rec(spec.wait.terminate ? "terminate" : "wait", result);
      last.set(outcome.cell, result.missing ? "missing" : result.kind);
    }
  }
  if (!lost && !ctx.host.broken) {
    // Labels name a cell by its place in the entry, never by its ID (which depends on the entries before).
    const place = (cell: string) => [...last.keys()].indexOf(cell) + 1;
    for (const [cell, kind] of last) {
      if (kind === "yielded") rec(`cleanup: terminate cell #${place(cell)}`, await session.terminate(cell));
    }
    for (const cell of last.keys()) {
      const closed = await ctx.within(session.cellClosed(cell).then(() => "closed"), 5_000);
      if (closed !== "closed") rec(`cell #${place(cell)} closed`, closed);
    }
  }
  records.push({ events: events(session).slice(before) });
  return { records, lost };
}

/**
 * The body that runs a battery's entries in order, one session per output mode, and records one
 * step per entry: `{[entry name]: records}`.
 */
export function batteryBody(entries: BatteryEntry[]): ScenarioBody {
  return async (ctx) => {
    const sessions = new Map<string, Session>();
    for (const entry of entries) {
      let session = sessions.get(entry.mode);
      if (!session) {
        session = await ctx.open({ truncation: entry.mode });
        sessions.set(entry.mode, session);
      }
      const { records, lost } = await runEntry(ctx, session, entry);
      if (entry.deliberate === "stdout-clean" && ctx.transport !== "grpc-tcp" && !ctx.host.broken) {
        // Such an entry may write to the host's stdout after its outcome: make sure the damage is seen
        // now, by this entry, and not by the next one. A host whose transport still works answers a cell.
        const probe = await ctx.within(
          (async () => {
            const fresh = await ctx.open({});
            const outcome = await fresh.exec("text(1)").outcome;
            await fresh.close().catch(() => {});
            return outcome.kind;
          })().catch(() => "failed"),
          5_000,
        );
        if (probe !== "completed" && !ctx.host.broken) ctx.host.kill();
      }
      if (ctx.host.broken) {
        // The entry broke the host (it exited, or wrote something else to its stdout transport). Whether
        // the exit or the broken connection is noticed first is a race: give an exit time to be seen.
        await ctx.within(ctx.host.status, 3_000);
        records.push({ "host replaced": ctx.host.exited ? "exited" : "connection lost" });
        sessions.clear();
        await ctx.replaceHost();
      } else if (lost) {
        records.push({ "session replaced": true });
        sessions.delete(entry.mode);
      }
      ctx.rec(entry.name, records);
    }
  };
}

/**
 * Cell batteries as scenarios: `battery1.json` (the first probe battery) and every
 * `cells/*.json`. Folder-private.
 *
 * A battery is a JSON array of entries `{name, cells, mode?, deliberate?}`:
 * - `cells`: sources, or `{source, yield?, max?, wait?: {yield?, maxTokens?, terminate?}}` (yield and
 *   max are the Execute's `yield_time_ms` and `max_output_tokens`; `wait` observes the cell again);
 * - `mode`: `server` (default, as Codex 0.171) or `client` output truncation;
 * - `deliberate`: the id of a deliberate difference the entry shows (each side is then checked: for
 *   `typescript-cells`, the reference's outcomes say `SyntaxError` and ours do not).
 *
 * Each entry runs in a session of its own on all three transports. An entry with other fields fails
 * its test with a message naming them.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { Json } from "./_observe.ts";
import { type CellSpec, runCells, type Scenario } from "./_scenario.ts";

const KNOWN_ENTRY = new Set(["name", "cells", "mode", "deliberate"]);
const KNOWN_CELL = new Set(["source", "yield", "max", "wait"]);
const KNOWN_WAIT = new Set(["yield", "maxTokens", "terminate"]);

function unknownFields(object: Json, known: Set<string>): string[] {
  return Object.keys(object).filter((k) => !known.has(k));
}

function cellProblems(cell: Json): string[] {
  if (typeof cell === "string") return [];
  return unknownFields(cell, KNOWN_CELL).concat(cell.wait ? unknownFields(cell.wait, KNOWN_WAIT) : []);
}

function toSpec(cell: Json): CellSpec {
  if (typeof cell === "string") return { source: cell };
  return {
    source: cell.source,
    ...(cell.yield === undefined ? {} : { yieldTimeMs: cell.yield }),
    ...(cell.max === undefined ? {} : { maxOutputTokens: cell.max }),
    ...(cell.wait
      ? {
        wait: {
          ...(cell.wait.yield === undefined ? {} : { yieldTimeMs: cell.wait.yield }),
          ...(cell.wait.maxTokens === undefined ? {} : { maxTokens: cell.wait.maxTokens }),
          ...(cell.wait.terminate ? { terminate: true } : {}),
        },
      }
      : {}),
  };
}

/** The per-id checks of deliberate differences that battery entries may name. */
const BATTERY_CHECKS: Record<string, (kind: string, observation: Json[]) => void> = {
  "typescript-cells": (kind, observation) => {
    const cells = observation.filter((s) => Object.keys(s)[0]?.match(/^cell \d+$/));
    assert.ok(cells.length > 0, "the entry ran cells");
    for (const cell of cells) {
      const text = JSON.stringify(cell);
      if (kind === "reference") assert.match(text, /SyntaxError/, "the reference rejects TypeScript");
      else assert.doesNotMatch(text, /SyntaxError/, "this host runs TypeScript");
    }
  },
};

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

/** Every battery entry as a scenario named `cells <file>: <entry>`. */
export function batteryScenarios(): Scenario[] {
  const out: Scenario[] = [];
  for (const file of batteryFiles()) {
    const label = file.pathname.replace(/^.*\/tests\/reference\//, "").replace(/\.json$/, "");
    const entries: Json[] = JSON.parse(Deno.readTextFileSync(file));
    for (const entry of entries) {
      const extra = unknownFields(entry, KNOWN_ENTRY).concat((entry.cells ?? []).flatMap(cellProblems));
      const deliberate = entry.deliberate as string | undefined;
      out.push({
        name: `cells ${label}: ${entry.name}`,
        source: `battery ${label}`,
        ...(extra.length
          ? { invalid: `battery entry has fields the suite does not know: ${extra.join(", ")}` }
          : {}),
        ...(deliberate
          ? {
            deliberate: {
              id: deliberate,
              check: BATTERY_CHECKS[deliberate] ?? (() => {
                throw new Error(`no battery check for deliberate difference '${deliberate}'`);
              }),
            },
          }
          : {}),
        run: async (ctx) => {
          const session = await ctx.open({ truncation: entry.mode === "client" ? "client" : "server" });
          await runCells(ctx, session, (entry.cells as Json[]).map(toSpec));
        },
      });
    }
  }
  return out;
}

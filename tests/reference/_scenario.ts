/**
 * What a conformance scenario is, and helpers to write them. Folder-private.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { ExecOptions, Session, SessionOptions, ToolCall } from "./_driver.ts";
import type { Kind, Transport } from "./_hosts.ts";
import type { Json } from "./_observe.ts";
import type { Ctx, ScenarioBody } from "./_runner.ts";

/** One scenario. */
export interface Scenario {
  /** Unique; also the test's name. */
  name: string;
  /** Where it comes from: a SPEC §12 scenario, `CODEX-0.171.md`, a battery. */
  source: string;
  /** Transports it runs on (default all three). */
  transports?: readonly Transport[];
  /** Observe the raw wire (see `_observe.ts`). */
  raw?: boolean;
  /**
   * A deliberate difference (an id of `deliberate_differences.ts`) that this scenario shows: both
   * sides are then checked against what the table says; with `rest`, what remains once the difference
   * is taken out is compared as usual (without it, the whole scenario is the difference).
   */
  deliberate?: { id: string; check(kind: Kind, observation: Json): void; rest?(observation: Json): Json };
  /**
   * Where Codex's host itself orders some frames differently from run to run: the part of each
   * side's observation that is compared (both sides alike); each use says what races.
   */
  compared?(observation: Json): Json;
  /** Set when the scenario cannot run as written (e.g. a battery entry with unknown fields). */
  invalid?: string;
  run: ScenarioBody;
}

/** A cell that never ends by itself. */
export const FOREVER = "await new Promise(() => {})";
/** A cell that spins. */
export const SPIN = "while (true) {}";

/** The value of the first step with this label in an observation. */
export function step(observation: Json[], label: string): Json {
  const found = observation.find((s) => label in s);
  assert.ok(found, `the observation has no step '${label}'`);
  return found[label];
}

/**
 * A copy of an observation (steps `{label: value}`) with the value of each step labelled `label`
 * replaced by `fn(value)`, or the step left out when `fn` returns undefined.
 */
export function mapStep(observation: Json[], label: string, fn: (value: Json) => Json): Json[] {
  const out: Json[] = [];
  for (const s of structuredClone(observation)) {
    if (!(label in s)) {
      out.push(s);
      continue;
    }
    const value = fn(s[label]);
    if (value !== undefined) out.push({ [label]: value });
  }
  return out;
}

/** A cell of {@link cells}: its source and how to run it. */
export interface CellSpec extends ExecOptions {
  source: string;
  /** Answers each tool call the cell makes (default: no tool calls expected). */
  answer?: (call: ToolCall) => Json;
  /** Then observe the cell with a Wait (yield time, max tokens) or a Terminate. */
  /**
   * `afterMs`: a pause before the Wait, where a cell's synchronous tail must reach the host first
   * (this host's runtime is another process; Codex's host runs the cell inside itself).
   */
  wait?: { yieldTimeMs?: number; maxTokens?: number; terminate?: boolean; afterMs?: number };
}

/**
 * Runs cells one after another in one session and records each outcome (and each tool call's input
 * when the cell makes calls).
 */
export async function runCells(
  ctx: Ctx,
  session: Session,
  specs: (string | CellSpec)[],
): Promise<void> {
  for (const [index, raw] of specs.entries()) {
    const spec = typeof raw === "string" ? { source: raw } : raw;
    const exec = session.exec(spec.source, spec);
    let answering = true;
    const calls = (async () => {
      if (!spec.answer) return;
      while (answering) {
        const call = await session.toolCallUntil(exec.outcome);
        if (!call) return;
        ctx.rec(`cell ${index + 1} tool call`, { name: call.name, input: call.input });
        await call.succeed(spec.answer(call));
      }
    })();
    const outcome = await exec.outcome;
    answering = false;
    await calls;
    ctx.rec(`cell ${index + 1}`, outcome);
    if (spec.wait && outcome.cell) {
      if (spec.wait.afterMs) await pause(spec.wait.afterMs);
      const result = spec.wait.terminate
        ? await session.terminate(outcome.cell)
        : await session.wait(outcome.cell, {
          yieldTimeMs: spec.wait.yieldTimeMs ?? 5_000,
          ...(spec.wait.maxTokens === undefined ? {} : { maxTokens: spec.wait.maxTokens }),
        }).result;
      ctx.rec(`cell ${index + 1} ${spec.wait.terminate ? "terminate" : "wait"}`, result);
    }
  }
}

/** A scenario that runs cells one after another in one session. */
export function cells(
  name: string,
  source: string,
  specs: (string | CellSpec)[],
  options: {
    session?: SessionOptions;
    transports?: readonly Transport[];
    deliberate?: Scenario["deliberate"];
  } = {},
): Scenario {
  return {
    name,
    source,
    ...(options.transports ? { transports: options.transports } : {}),
    ...(options.deliberate ? { deliberate: options.deliberate } : {}),
    run: async (ctx) => {
      const session = await ctx.open(options.session);
      await runCells(ctx, session, specs);
    },
  };
}

/** Sleeps; only where no event can tell that the host has taken a request (each use says why). */
export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

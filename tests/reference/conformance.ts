/**
 * The differential conformance suite (`deno task test:reference`): every scenario runs against Codex's
 * own `codex-code-mode-host` 0.171.0 (the reference, installed once by `ensureCodex()`) and against
 * this checkout's `bin/codex-code-mode-host`, started the same way, over gRPC on stdio, JSON V1 and
 * gRPC over TCP; the two normalised observations must be equal.
 *
 * - One Deno test per scenario and transport, named `<transport>: <scenario>`; on a difference it
 *   prints both observations and the differing paths.
 * - A scenario or battery entry that names a deliberate difference (`deliberate_differences.ts`) has
 *   each side checked against what the table says; what remains once the difference is taken out
 *   (its `rest`) is then compared as usual.
 * - One host process per kind and transport serves every scenario that needs no host of its own;
 *   each scenario uses its own sessions. The reference side of a scenario runs once, before ours.
 * - `REFERENCE_FILTER=text` runs only the scenarios whose test name contains `text`.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  DELIBERATE_DIFFERENCES,
  deliberateDifference,
  DIFFERENCES_TABLES,
} from "./deliberate_differences.ts";
import { TRANSPORTS } from "./_hosts.ts";
import { differences, show } from "./_observe.ts";
import { HostPool, observe } from "./_runner.ts";
import type { Scenario } from "./_scenario.ts";
import {
  FIRST_CELL,
  HEAP_LIMIT,
  NEUTRAL_SCENARIOS,
  TOSTRING_THROWS_STDIO,
  TOSTRING_THROWS_TCP,
} from "./_scenarios_neutral.ts";
import { GRPC_SCENARIOS } from "./_scenarios_grpc.ts";
import { V1_SCENARIOS } from "./_scenarios_v1.ts";
import { PROCESS_SCENARIOS } from "./_scenarios_process.ts";
import { batteries, BATTERY_CHECKS, batteryBody, relabelCells } from "./_battery.ts";

const pool = new HostPool();

/** One line of JSON, at most 3,000 characters: batteries have hundreds of entries. */
function compact(value: unknown): string {
  const text = JSON.stringify(value) ?? "undefined";
  return text.length > 3000 ? `${text.slice(0, 3000)}…` : text;
}
const filter = Deno.env.get("REFERENCE_FILTER");

const SCENARIOS: Scenario[] = [
  ...NEUTRAL_SCENARIOS,
  FIRST_CELL,
  HEAP_LIMIT,
  TOSTRING_THROWS_STDIO,
  TOSTRING_THROWS_TCP,
  ...GRPC_SCENARIOS,
  ...V1_SCENARIOS,
  ...PROCESS_SCENARIOS,
];

const names = new Set<string>();
for (const scenario of SCENARIOS) {
  if (names.has(scenario.name)) throw new Error(`two scenarios are named '${scenario.name}'`);
  names.add(scenario.name);
  if (scenario.deliberate) deliberateDifference(scenario.deliberate.id);
}

const options = { sanitizeOps: false, sanitizeResources: false, sanitizeExit: false };

for (const scenario of SCENARIOS) {
  for (const transport of scenario.transports ?? TRANSPORTS) {
    const name = `${transport}: ${scenario.name}`;
    if (filter && !name.includes(filter)) continue;
    Deno.test({
      name,
      ...options,
      fn: async () => {
        if (scenario.invalid) throw new Error(`${scenario.name}: ${scenario.invalid}`);
        const reference = await observe(pool, "reference", transport, scenario.run, { raw: scenario.raw });
        const ours = await observe(pool, "ours", transport, scenario.run, { raw: scenario.raw });
        const context = () =>
          `scenario: ${scenario.name} (${scenario.source}), transport ${transport}\n` +
          `--- reference ---\n${show(reference.observation)}\n--- ours ---\n${show(ours.observation)}\n` +
          `--- ours: stderr tail ---\n${ours.stderr}`;
        const broken = reference.observation.find((s: Record<string, unknown>) =>
          "scenario threw" in s || "timeout" in s
        );
        if (broken) {
          throw new Error(
            `the scenario itself failed on the reference: ${JSON.stringify(broken)}\n${context()}`,
          );
        }
        let [a, b] = [reference.observation, ours.observation];
        if (scenario.compared) [a, b] = [scenario.compared(a), scenario.compared(b)];
        if (scenario.deliberate) {
          const { id, check, rest } = scenario.deliberate;
          for (const [kind, side] of [["reference", reference], ["ours", ours]] as const) {
            try {
              check(kind, side.observation);
            } catch (error) {
              throw new Error(
                `deliberate difference '${id}': ${kind} does not show what the table says: ${
                  (error as Error).message
                }\n${context()}`,
              );
            }
          }
          if (!rest) return;
          [a, b] = [rest(a), rest(b)];
        }
        const diff = differences(a, b);
        if (diff.length) {
          throw new Error(`ours differs from the reference:\n  ${diff.join("\n  ")}\n${context()}`);
        }
      },
    });
  }
}

// Batteries: one test per file and transport, one step per entry (see _battery.ts).
for (const battery of batteries()) {
  for (const entry of battery.entries) if (entry.deliberate) deliberateDifference(entry.deliberate);
  for (const transport of TRANSPORTS) {
    const name = `${transport}: cells ${battery.label}`;
    if (filter && !name.includes(filter)) continue;
    Deno.test({
      name,
      ...options,
      fn: async (t) => {
        if (battery.problems.length) {
          throw new Error(`${battery.label}: fields the suite does not know: ${battery.problems.join(", ")}`);
        }
        const body = batteryBody(battery.entries);
        const timeoutMs = Math.max(45_000, battery.entries.length * 3_000);
        const reference = await observe(pool, "reference", transport, body, {
          perStep: true,
          noLogs: true,
          timeoutMs,
        });
        const ours = await observe(pool, "ours", transport, body, { perStep: true, noLogs: true, timeoutMs });
        const byName = (observation: Record<string, unknown>[]) =>
          new Map(observation.map((step) => [Object.keys(step)[0], Object.values(step)[0]]));
        const [refSteps, ourSteps] = [byName(reference.observation), byName(ours.observation)];
        for (const broken of ["timeout", "scenario threw", "open failed"]) {
          if (refSteps.has(broken)) {
            throw new Error(
              `the battery itself failed on the reference: ${JSON.stringify(refSteps.get(broken))}`,
            );
          }
        }
        for (const entry of battery.entries) {
          await t.step({
            name: entry.name,
            ...options,
            fn: () => {
              const [a, b] = [refSteps.get(entry.name), ourSteps.get(entry.name)].map((x) =>
                x && relabelCells(x)
              );
              const context = () =>
                `entry: ${entry.name} of ${battery.label}, transport ${transport}\n--- reference ---\n${
                  compact(a)
                }\n--- ours ---\n${compact(b)}` +
                (ourSteps.has("timeout") || ourSteps.has("scenario threw")
                  ? `\n--- ours ended early ---\n${show([...ourSteps].slice(-2))}\n${ours.stderr}`
                  : "");
              let [left, right] = [a, b];
              if (entry.deliberate) {
                const difference = entry.difference ??
                  { id: entry.deliberate, check: BATTERY_CHECKS[entry.deliberate] };
                if (!difference.check) {
                  throw new Error(`no battery check for deliberate difference '${entry.deliberate}'`);
                }
                let applies = false;
                for (const [kind, side] of [["reference", a], ["ours", b]] as const) {
                  try {
                    applies = difference.check(kind, (side ?? []) as Record<string, unknown>[], transport);
                  } catch (error) {
                    throw new Error(
                      `deliberate difference '${entry.deliberate}': ${kind} does not show what the table says: ${
                        (error as Error).message
                      }\n${context()}`,
                    );
                  }
                }
                if (applies) {
                  if (!difference.rest) return;
                  [left, right] = [difference.rest(a ?? []), difference.rest(b ?? [])];
                }
              }
              const diff = differences(left, right);
              if (diff.length) {
                throw new Error(`ours differs from the reference:\n  ${diff.join("\n  ")}\n${context()}`);
              }
            },
          });
        }
      },
    });
  }
}

Deno.test({
  name:
    "the README's table of deliberate differences and docs/deliberate-differences.md's full table equal tests/reference/deliberate_differences.ts",
  fn: async (t) => {
    for (const { file, heading, header, row } of Object.values(DIFFERENCES_TABLES)) {
      await t.step(file, async () => {
        const text = await Deno.readTextFile(new URL(`../../${file}`, import.meta.url));
        const at = text.indexOf(heading);
        assert.ok(at >= 0, `${file} has a section '${heading}'`);
        const section = text.slice(at + heading.length).split(/\n## /)[0];
        const rows = section.split("\n").filter((line) => line.startsWith("|")).map((line) =>
          line.slice(1, -1).split(/(?<!\\)\|/).map((cell) => cell.trim().replaceAll("\\|", "|"))
        );
        assert.deepEqual(rows[0], header);
        assert.deepEqual(rows.slice(2), DELIBERATE_DIFFERENCES.map(row));
      });
    }
  },
});

Deno.test({
  name: "stop the shared hosts",
  ...options,
  fn: async () => {
    await pool.closeAll();
  },
});

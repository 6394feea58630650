/**
 * What the model saw of a Codex run, with what differs from run to run replaced (issue 25, item
 * 8). Folder-private.
 *
 * - `Wall time X.Y seconds` → `Wall time <T> seconds`;
 * - UUIDs → `<uuid>`;
 * - `exec_command`'s random parts: `chunk_id` → `<chunk>`, `wall_time_seconds` → `<seconds>` (in
 *   its JSON form, escaped or not, and its text form `Chunk ID: …` / `Wall time: … seconds`);
 * - the goal tools' `createdAt` / `updatedAt` (Unix seconds) → `<time>`;
 * - the run's own paths (its working directory, given by the caller) → `<work>` and the like;
 * - the order of adjacent `notify()` items (a `custom_tool_call_output` with a `name`): Codex
 *   injects them concurrently, and their order varies from run to run with Codex's own host too
 *   (`notify("note-1"); …; notify({ k: 1 })` came as note-1, {"k":1} in two runs of three). Such
 *   a run of items is sorted; where it stands among the other outputs is kept.
 *
 * @module
 */
import type { InputItem } from "./_fake_model.ts";

/** What the model saw of one tool result, normalised. */
export interface SeenOutput {
  readonly type: string;
  readonly call_id: string;
  readonly name?: string;
  readonly output: unknown;
}

/**
 * Replaces what differs from run to run: the given paths, `Wall time X.Y seconds` lines, UUIDs,
 * and the random parts of `exec_command`'s result (`chunk_id`, `wall_time_seconds`, in its JSON and
 * its text forms).
 */
export function normaliseText(text: string, paths: readonly (readonly [string, string])[] = []): string {
  for (const [path, name] of paths) text = text.replaceAll(path, name);
  return text
    .replace(/Wall time \d+(?:\.\d+)? seconds/g, "Wall time <T> seconds")
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, "<uuid>")
    .replace(/("chunk_id\\*":\s*\\*")[^"\\]*/g, "$1<chunk>")
    .replace(/("wall_time_seconds\\*":\s*)[-+0-9.eE]+/g, "$1<seconds>")
    .replace(/("(?:createdAt|updatedAt)\\*":\s*)\d+/g, "$1<time>")
    .replace(/Chunk ID: \w+/g, "Chunk ID: <chunk>")
    .replace(/Wall time: [\d.]+ seconds/g, "Wall time: <seconds> seconds");
}

/**
 * The tool results of a conversation, as the model saw them, normalised (the items' own `id`s
 * are Codex's and left out).
 *
 * @param input the `input` of Codex's last request
 * @param paths the run's own paths and their placeholders (`[dir, "<work>"]`), replaced first
 * @returns the outputs in order
 */
export function normalise(
  input: readonly InputItem[],
  paths: readonly (readonly [string, string])[] = [],
): SeenOutput[] {
  const out: SeenOutput[] = [];
  for (const item of input) {
    if (item.type !== "custom_tool_call_output" && item.type !== "function_call_output") continue;
    const output = typeof item.output === "string"
      ? normaliseText(item.output, paths)
      : Array.isArray(item.output)
      ? item.output.map((part: InputItem) =>
        typeof part.text === "string" ? { ...part, text: normaliseText(part.text, paths) } : part
      )
      : item.output;
    out.push({ type: item.type, call_id: item.call_id, ...(item.name ? { name: item.name } : {}), output });
  }
  return sortNotificationRuns(out);
}

function sortNotificationRuns(outputs: SeenOutput[]): SeenOutput[] {
  const out: SeenOutput[] = [];
  let run: SeenOutput[] = [];
  const flush = () => {
    out.push(...run.sort((a, b) => JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));
    run = [];
  };
  for (const item of outputs) {
    if (item.name !== undefined) run.push(item);
    else {
      flush();
      out.push(item);
    }
  }
  flush();
  return out;
}

/**
 * Helpers of the V1 end-to-end tests: the host's descendants (its session runtimes) from /proc,
 * a process's resident memory and the bytes it wrote, and common tool definitions.
 *
 * @module
 */
import type { Json } from "./_v1_client.ts";

/** PIDs of every descendant of `pid`, from /proc. */
export function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(entry.name));
      children.set(ppid, list);
    } catch { /* exited meanwhile */ }
  }
  const out: number[] = [];
  const todo = [pid];
  while (todo.length) {
    for (const child of children.get(todo.pop()!) ?? []) {
      out.push(child);
      todo.push(child);
    }
  }
  return out;
}

/** Whether a process exists (and is not a zombie). */
export function alive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

/** Resident memory of a process in bytes (0 once it is gone). */
export function rssBytes(pid: number): number {
  try {
    const status = Deno.readTextFileSync(`/proc/${pid}/status`);
    const kb = /VmRSS:\s+(\d+) kB/.exec(status);
    return kb ? Number(kb[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Bytes a process has written so far (`wchar` of /proc/PID/io; 0 once it is gone). */
export function writtenBytes(pid: number): number {
  try {
    return Number(/^wchar: (\d+)$/m.exec(Deno.readTextFileSync(`/proc/${pid}/io`))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** A function tool definition as Codex sends it. */
export function tool(name: string): Json {
  return {
    name,
    tool_name: { name, namespace: null },
    description: `the ${name} tool`,
    kind: "function",
    input_schema: { type: "object" },
    output_schema: null,
  };
}

/** Resolves after `ms`. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Processes as the tests see them from `/proc`: parents, children, a session's runtime tree, bubblewrap. */
import type { TestHost } from "./_harness.ts";

/** The parent of `pid`, or undefined once it is gone. */
export function parentOf(pid: number): number | undefined {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return undefined;
  }
}

/** The pids whose parent is `pid`. */
export function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    if (parentOf(Number(entry.name)) === pid) out.push(Number(entry.name));
  }
  return out;
}

/** A session's runtime as this process spawned it: bubblewrap's process when sandboxed. */
export function runtimeRoot(h: TestHost, sessionId: string): number {
  let pid = h.host.state.session(sessionId)!.runtimePid!;
  for (let parent = parentOf(pid); parent !== undefined && parent !== Deno.pid; parent = parentOf(pid)) {
    pid = parent;
  }
  return pid;
}

/** Whether bubblewrap is installed and runs. */
export const HAVE_BWRAP = (() => {
  try {
    return new Deno.Command("bwrap", { args: ["--version"], stdout: "null", stderr: "null" }).outputSync()
      .success;
  } catch {
    return false;
  }
})();

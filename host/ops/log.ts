/**
 * JSON log lines on stderr (SPEC §9.1). A session ID appears only in `debug` lines.
 *
 * @module
 */

/** Log levels, lowest first. */
export type LogLevel = "debug" | "info" | "warn" | "error";

const ORDER: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

/** Optional structured fields of a log line. */
export interface LogFields {
  /** Host-local session number (logged at every level). */
  session_ref?: number;
  /** The session's UUID: a bearer capability, so written only at `debug`. */
  session_id?: string;
  /** A cell ID. */
  cell_id?: string;
  /** An execution ID. */
  execution_id?: string;
  /** W3C trace parent of the request. */
  traceparent?: string;
  /** An error description. */
  error?: string;
  /** A runtime's exit code. */
  exit_code?: number | null;
  /** The signal that ended a runtime. */
  signal?: string | null;
  /** The last bytes a runtime wrote to stderr. */
  stderr_tail?: string;
  /** Any other field. */
  [key: string]: unknown;
}

/** How often a repeated line ({@link Logger.repeated}) is written at most, per key. */
export const REPEAT_INTERVAL_MS = 1_000;

/** Keys of {@link Logger.repeated} kept before the quiet ones are forgotten. */
const MAX_REPEAT_KEYS = 1_024;

/** A leveled JSON-lines logger. */
export class Logger {
  #threshold: number;
  #write: (line: string) => void;
  #now: () => number;
  /** Per key of `repeated`: when its last line was written, and how many were left out since. */
  #repeats = new Map<string, { at: number; suppressed: number }>();

  /**
   * Creates a logger.
   *
   * @param level the threshold (default `info`)
   * @param write where lines go (default: stderr)
   * @param now the clock of {@link Logger.repeated}, in ms (default `performance.now`)
   */
  constructor(
    level: LogLevel = "info",
    write?: (line: string) => void,
    now: () => number = () => performance.now(),
  ) {
    this.#threshold = ORDER[level];
    this.#now = now;
    const encoder = new TextEncoder();
    this.#write = write ?? ((line) => {
      try {
        Deno.stderr.writeSync(encoder.encode(line + "\n"));
      } catch {
        // stderr closed: nothing sensible to do.
      }
    });
  }

  /** Whether a level is enabled. */
  enabled(level: LogLevel): boolean {
    return ORDER[level] >= this.#threshold;
  }

  /**
   * Writes one line if `level` is enabled. `session_id` is dropped above `debug`.
   *
   * @param level the line's level
   * @param msg the message
   * @param fields structured fields
   */
  log(level: LogLevel, msg: string, fields: LogFields = {}): void {
    if (!this.enabled(level)) return;
    const line: Record<string, unknown> = { ts: new Date().toISOString(), level, msg };
    for (const [key, value] of Object.entries(fields)) {
      if (value === undefined) continue;
      if (key === "session_id" && level !== "debug") continue;
      line[key] = value;
    }
    this.#write(JSON.stringify(line));
  }

  /** `log("debug", …)`. */
  debug(msg: string, fields?: LogFields): void {
    this.log("debug", msg, fields);
  }
  /** `log("info", …)`. */
  info(msg: string, fields?: LogFields): void {
    this.log("info", msg, fields);
  }
  /** `log("warn", …)`. */
  warn(msg: string, fields?: LogFields): void {
    this.log("warn", msg, fields);
  }
  /** `log("error", …)`. */
  error(msg: string, fields?: LogFields): void {
    this.log("error", msg, fields);
  }

  /**
   * Writes a line that may repeat very often (one per dropped notification, say) at most once per
   * {@link REPEAT_INTERVAL_MS} per `key`: the first at once, the rest of the interval left out, and
   * the next line written for the key carries `suppressed`, how many were left out before it.
   *
   * @param level the line's level
   * @param key what makes lines the same (e.g. the message and the session)
   * @param msg the message
   * @param fields structured fields
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { Logger } from "./log.ts";
   * const lines: string[] = [];
   * let now = 0;
   * const log = new Logger("info", (line) => lines.push(line), () => now);
   * for (let i = 0; i < 5; i++) log.repeated("warn", "k", "dropped");
   * now = 1_000;
   * log.repeated("warn", "k", "dropped");
   * assert.equal(lines.length, 2);
   * assert.equal(JSON.parse(lines[1]).suppressed, 4);
   * ```
   */
  repeated(level: LogLevel, key: string, msg: string, fields: LogFields = {}): void {
    if (!this.enabled(level)) return;
    const now = this.#now();
    const seen = this.#repeats.get(key);
    if (seen !== undefined && now - seen.at < REPEAT_INTERVAL_MS) {
      seen.suppressed++;
      return;
    }
    if (seen === undefined && this.#repeats.size >= MAX_REPEAT_KEYS) {
      for (const [k, v] of this.#repeats) {
        if (now - v.at >= REPEAT_INTERVAL_MS) this.#repeats.delete(k);
      }
    }
    this.#repeats.set(key, { at: now, suppressed: 0 });
    this.log(
      level,
      msg,
      seen !== undefined && seen.suppressed > 0 ? { ...fields, suppressed: seen.suppressed } : fields,
    );
  }
}

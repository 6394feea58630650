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
  session_ref?: number;
  session_id?: string;
  cell_id?: string;
  execution_id?: string;
  traceparent?: string;
  error?: string;
  exit_code?: number | null;
  signal?: string | null;
  stderr_tail?: string;
  [key: string]: unknown;
}

/** A leveled JSON-lines logger. */
export class Logger {
  #threshold: number;
  #write: (line: string) => void;

  /**
   * @param level the threshold (default `info`)
   * @param write where lines go (default: stderr)
   */
  constructor(level: LogLevel = "info", write?: (line: string) => void) {
    this.#threshold = ORDER[level];
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
}

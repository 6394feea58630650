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

/** A leveled JSON-lines logger. */
export class Logger {
  #threshold: number;
  #write: (line: string) => void;

  /**
   * Creates a logger.
   *
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

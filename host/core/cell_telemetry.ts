/**
 * What a session's telemetry follows of its cells: each cell's `Cell` span from its start to its
 * `CellClosed`, its tool calls' spans and counts, and the outcome a closed cell is counted by
 * (`code_mode_cells_total{outcome}`).
 *
 * @module
 */
import type { Cell } from "./cell.ts";
import {
  type CellOutcomeLabel,
  type HostSpan,
  NO_SPAN,
  type Telemetry,
  type ToolCallOutcome,
} from "../ops/telemetry.ts";

interface CellWatch {
  span: HostSpan;
  /** Its completion was committed; `failed`: with an error text. */
  committed?: { failed: boolean };
}

/** The telemetry of one session's cells. */
export class CellTelemetry {
  #telemetry: Telemetry;
  #watches = new Map<Cell, CellWatch>();

  /** @param telemetry metrics and tracing (each possibly off) */
  constructor(telemetry: Telemetry) {
    this.#telemetry = telemetry;
  }

  /**
   * A cell started: its `Cell` span begins.
   *
   * @param cell the cell
   * @param parent the Execute's span
   */
  started(cell: Cell, parent: HostSpan | undefined): void {
    const tracer = this.#telemetry.tracer;
    const span = tracer.enabled ? tracer.start("Cell", parent, { "code_mode.cell_id": cell.id }) : NO_SPAN;
    this.#watches.set(cell, { span });
  }

  /**
   * A cell's completion was committed.
   *
   * @param cell the cell
   * @param failed whether with an error text
   */
  committed(cell: Cell, failed: boolean): void {
    const watch = this.#watches.get(cell);
    if (watch) watch.committed = { failed };
  }

  /**
   * A cell's tool call begins: its `ToolCall` span, a child of the cell's.
   *
   * @param cell the cell
   * @param tool the tool's JS name
   * @returns the span (none when tracing is off)
   */
  toolCallSpan(cell: Cell, tool: string): HostSpan {
    const tracer = this.#telemetry.tracer;
    return tracer.enabled
      ? tracer.start("ToolCall", this.#watches.get(cell)?.span, { "code_mode.tool": tool })
      : NO_SPAN;
  }

  /**
   * A tool call ended: counted, and its span ends.
   *
   * @param span the call's span
   * @param outcome how it ended
   * @param failure its failure message, if any
   */
  toolCallDone(span: HostSpan, outcome: ToolCallOutcome, failure: string | undefined): void {
    this.#telemetry.metrics.toolCall(outcome);
    span.set({ "code_mode.tool_outcome": outcome });
    span.end(failure);
  }

  /**
   * A cell closed: counted by its outcome, and its span ends.
   *
   * @param cell the cell
   * @param crashed whether its session's runtime crashed
   */
  closed(cell: Cell, crashed: boolean): void {
    const watch = this.#watches.get(cell);
    this.#watches.delete(cell);
    const reason = cell.endReason?.kind;
    // A completion with an error text is the end reason's when the isolate ended without a result.
    const outcome: CellOutcomeLabel = !watch?.committed
      ? "terminated"
      : !watch.committed.failed
      ? "completed"
      : cell.resulted
      ? "failed"
      : reason === "heapLimit"
      ? "heap_limit"
      : reason === "restart"
      ? "restart"
      : crashed
      ? "crashed"
      : "failed";
    this.#telemetry.metrics.cellClosed(outcome);
    watch?.span.set({ "code_mode.outcome": outcome });
    watch?.span.end();
  }
}

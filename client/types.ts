/**
 * The public types of the client library (SPEC §10.1). IDs in every value and callback are public
 * IDs (§10.5).
 *
 * @module
 */

/** Which side truncates output (SPEC §8.2). */
export type CodeModeOutputTruncation = "client" | "server";

/** Options of a public session. */
export interface CodeModeSessionOptions {
  /** Requested output mode; default `"client"`. */
  outputTruncation?: CodeModeOutputTruncation;
  /** Limits sent with OpenSession when at least one is set. */
  cellExecutionLimits?: { maxYieldTimeMs?: number; maxHeapSizeBytes?: number };
  /**
   * How many tool calls the session may leave unanswered at once: sent as OpenSession's
   * `max_pending_delegate_calls` (the host refuses calls beyond it, `code-mode session has too many
   * pending delegate calls`), and the most the session serves at once (calls beyond it are failed
   * with `code-mode host exceeded its pending delegate callback limit`). An integer from 1 to
   * 4,294,967,295; default 4096, what Codex 0.171 sends.
   */
  maxPendingDelegateCalls?: number;
  /**
   * Whether Executes name their tools by catalog revision when the host supports it
   * (`SessionOpened.supports_catalog_revision`), as Codex 0.171 does: the first Execute of a tool
   * set sends the tools with a new revision, later Executes with the same tools send only the
   * revision (default true). Without host support, or with no tools, the tools are sent each time.
   */
  catalogRevisions?: boolean;
}

/** The provider's time source (its deadlines and delays, SPEC §10.3): the project's one clock. */
export type { Clock } from "../proto/clock.ts";

/**
 * What opens public sessions: `GrpcCodeModeSessionProvider` (a host at an endpoint) and
 * `ProcessOwnedGrpcCodeModeSessionProvider` (a host it spawns and speaks to over the child's pipes).
 */
export interface CodeModeSessionProvider {
  /**
   * Opens a public session (its first binding).
   *
   * @param options output mode and cell limits
   * @returns the session
   * @throws {CodeModeError} the first binding's opening failure
   */
  createSession(options?: CodeModeSessionOptions): Promise<CodeModeSession>;
}

/** A tool the cell may call (SPEC §2.3 `ToolDefinition`). */
export interface ToolDefinition {
  /** The JavaScript-facing name (normalised into `tools.<name>`). */
  name: string;
  /** The name and namespace the harness dispatches on. */
  toolName: { name: string; namespace?: string };
  /** Shown to the cell in `ALL_TOOLS`. */
  description: string;
  /** Function or freeform tool. */
  kind: "function" | "freeform";
  /** JSON Schema of the input, sent as JSON. */
  inputSchema?: unknown;
  /** JSON Schema of the output, sent as JSON. */
  outputSchema?: unknown;
}

/** What `execute` runs. */
export interface ExecuteRequest {
  /** The model's tool call ID of this `exec`. */
  toolCallId: string;
  /** The tools the cell may call. */
  enabledTools: ToolDefinition[];
  /** The cell's JavaScript (or TypeScript) source. */
  source: string;
  /** When the initial observation yields; the host's default when absent. */
  yieldTimeMs?: number;
  /** Server mode: the token budget of the cell's outcomes. */
  maxOutputTokens?: number;
}

/** What `wait` observes. */
export interface WaitRequest {
  /** The public cell ID. */
  cellId: string;
  /** When the observation yields. */
  yieldTimeMs: number;
  /**
   * Server mode: the token budget of this observation's output (the `wait` tool's `max_tokens`);
   * the host's default (10,000) when absent, whatever the Execute asked for.
   */
  maxTokens?: number;
}

/** A content item as a model sees it. */
export type FunctionCallOutputContentItem =
  | { type: "input_text"; text: string }
  | { type: "input_image"; image_url: string; detail?: "auto" | "low" | "high" | "original" }
  | { type: "input_audio"; audio_url: string };

/** An observation's outcome. */
export type RuntimeResponse =
  | {
    type: "yielded";
    cellId: string;
    contentItems: FunctionCallOutputContentItem[];
    codeModeHostDurationNs: number;
  }
  | {
    type: "terminated";
    cellId: string;
    contentItems: FunctionCallOutputContentItem[];
    codeModeHostDurationNs: number;
  }
  | {
    type: "result";
    cellId: string;
    contentItems: FunctionCallOutputContentItem[];
    errorText?: string;
    codeModeHostDurationNs: number;
  };

/** A Wait or Terminate outcome. */
export type WaitOutcome =
  | { type: "liveCell"; response: RuntimeResponse }
  | { type: "missingCell"; response: RuntimeResponse };

/** A tool call of a cell, handed to the delegate. */
export interface CodeModeToolCall {
  /** The public ID of the calling cell. */
  cellId: string;
  /** The call's ID within its cell (`tool-1`, …). */
  runtimeToolCallId: string;
  /** The called tool. */
  toolName: { name: string; namespace?: string };
  /** Function or freeform tool. */
  toolKind: "function" | "freeform";
  /** The parsed input, absent when the cell passed none. */
  input?: unknown;
}

/** The harness side of a session: tools, notifications, closures. */
export interface CodeModeSessionDelegate {
  /** Runs a tool; the resolved value is the tool's output. */
  invokeTool(call: CodeModeToolCall, signal: AbortSignal): Promise<unknown>;
  /** Delivers a `notify()` of a cell. */
  notify(callId: string, cellId: string, text: string, signal: AbortSignal): Promise<void>;
  /** The cell has stopped (exactly once per cell). */
  cellClosed(cellId: string): void;
}

/** A cell started by `execute`. */
export interface StartedCell {
  /** The public cell ID. */
  readonly cellId: string;
  /** The Execute's initial observation. */
  initialResponse(options?: { signal?: AbortSignal }): Promise<RuntimeResponse>;
  /** Gives the cell up: cancel the Execute, terminate in the background, report `cellClosed`. */
  abandon(): void;
}

/** A public session (SPEC §10.1). */
export interface CodeModeSession extends AsyncDisposable {
  /** Starts a cell. */
  execute(
    request: ExecuteRequest,
    delegate: CodeModeSessionDelegate,
    options?: { preempt?: AbortSignal; signal?: AbortSignal },
  ): Promise<StartedCell>;
  /** Observes a cell. */
  wait(request: WaitRequest, options?: { preempt?: AbortSignal; signal?: AbortSignal }): Promise<WaitOutcome>;
  /** Terminates a cell. */
  terminate(cellId: string): Promise<WaitOutcome>;
  /** Ends the session (idempotent). */
  shutdown(): Promise<void>;
  /** The mode selected for the first binding; never changes. */
  readonly outputTruncation: CodeModeOutputTruncation;
}

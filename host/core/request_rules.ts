/**
 * The domain rules every request of the core is checked against, in one place, so that every door
 * gives the same answers with the same messages: identifiers (strict, or lenient as JSON host V1
 * takes them), the session lookup, tool definitions and names, the effective yield time and the
 * output token budget.
 *
 * @module
 */
import { normalizeCodeModeIdentifier } from "../../proto/identifiers.ts";
import { MAX_TIMER_MS } from "./clock.ts";
import { TOOL_KIND_FREEFORM, TOOL_KIND_FUNCTION, type ToolDefinition, type ToolName } from "./core_api.ts";
import { HostError } from "./errors.ts";
import type { Limits } from "./limits.ts";
import { serdeJsonError } from "./serde_json.ts";
import type { Session } from "./session.ts";
import type { SessionManager } from "./session_manager.ts";
import type { ToolDefinitionInfo } from "./tool_bridge.ts";
import { validateIdentifier } from "./validate.ts";

/** The identifiers {@link RequestRulesOptions.lenientIds} does not check. */
const LENIENT_FIELDS = new Set<string>([
  "session ID",
  "cell ID",
  "tool call ID",
  "tool definition name",
  "tool name",
]);

/** The field names of {@link validateIdentifier}. */
export type IdentifierField = Parameters<typeof validateIdentifier>[1];

/** One validated tool of an Execute: its JS name, description and definition. */
export interface CheckedTool {
  globalName: string;
  description: string;
  definition: ToolDefinitionInfo;
}

/**
 * A token budget from the wire (any `uint64`) as a number: `B = 4·T` stays exact in a double up to
 * 2^51 tokens, and larger budgets never truncate anyway (the reference accepts every value).
 *
 * @param tokens the budget as sent
 * @returns the budget the collector applies
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { tokenBudget } from "./request_rules.ts";
 * assert.equal(tokenBudget(10n), 10);
 * assert.equal(tokenBudget(2n ** 64n - 1n), 2 ** 50);
 * ```
 */
export function tokenBudget(tokens: bigint): number {
  return Number(tokens > 2n ** 50n ? 2n ** 50n : tokens);
}

/**
 * Bytes that must be one JSON value, as text.
 *
 * @param bytes UTF-8 JSON
 * @returns the text
 * @throws {SyntaxError} with serde_json's error text (Codex's host's)
 */
export function parseJsonBytes(bytes: Uint8Array): string {
  const error = serdeJsonError(bytes);
  if (error !== undefined) throw new SyntaxError(error);
  return new TextDecoder().decode(bytes);
}

/** Options of {@link RequestRules}. */
export interface RequestRulesOptions {
  manager: SessionManager;
  /** Callers choose session IDs (any text) instead of UUIDs (`CodeModeCoreOptions.clientSessionIds`). */
  clientSessionIds: boolean;
  /** Identifiers as JSON host V1 takes them (`CodeModeCoreOptions.lenientIds`). */
  lenientIds: boolean;
}

/** The request checks of one core. */
export class RequestRules {
  readonly limits: Limits;
  readonly #options: RequestRulesOptions;

  /** @param options see {@link RequestRulesOptions} */
  constructor(options: RequestRulesOptions) {
    this.#options = options;
    this.limits = options.manager.limits;
  }

  /**
   * Checks an identifier (SPEC §2.6), unless lenient IDs leave that field unchecked.
   *
   * @param value the identifier as sent
   * @param field its name in the messages
   * @returns the identifier
   * @throws {HostError} `invalid_request`
   */
  id(value: string | undefined, field: IdentifierField): string {
    if (this.#options.lenientIds && LENIENT_FIELDS.has(field)) return value ?? "";
    return validateIdentifier(value, field, this.limits.maxIdentifierBytes);
  }

  /**
   * Finds the session a request names (SPEC §2.6–§2.7).
   *
   * @param sessionId the request's session ID
   * @returns the session
   * @throws {HostError} `invalid_request`, `unknown_session`
   */
  lookup(sessionId: string): Session {
    return this.#options.manager.lookup(sessionId, {
      uuid: !this.#options.clientSessionIds,
      unchecked: this.#options.lenientIds,
    });
  }

  /**
   * Effective yield time: requested, capped by the session, clamped to a timer (SPEC §4.1).
   *
   * @param requested the request's yield time
   * @param session the session (its `max_yield_time_ms`)
   * @returns milliseconds
   */
  effectiveYield(requested: bigint, session: Session): number {
    let ms = requested;
    if (session.maxYieldTimeMs !== undefined && session.maxYieldTimeMs < ms) ms = session.maxYieldTimeMs;
    return Number(ms > BigInt(MAX_TIMER_MS) ? BigInt(MAX_TIMER_MS) : ms);
  }

  /**
   * An observation's Server-mode budget: the request's, else the host's default.
   *
   * @param maxTokens the request's budget, if any
   * @returns the budget
   */
  outputBudget(maxTokens: bigint | undefined): number {
    return maxTokens === undefined ? this.limits.defaultMaxOutputTokens : tokenBudget(maxTokens);
  }

  /**
   * Checks a tool name (SPEC §2.3): its name, and its namespace when given (which may be empty).
   *
   * @param name the name as sent
   * @returns the name with only its known fields
   * @throws {HostError} `invalid_request`
   */
  toolName(name: ToolName): ToolName {
    this.id(name.name, "tool name");
    if (name.namespace !== undefined) {
      validateIdentifier(name.namespace, "tool namespace", this.limits.maxIdentifierBytes, {
        allowEmpty: true,
      });
      return { name: name.name, namespace: name.namespace };
    }
    return { name: name.name };
  }

  /**
   * Checks an Execute's tool definitions (SPEC §2.3, §7.1) in the reference's order.
   *
   * @param tools the definitions
   * @returns each with its normalised JS name
   * @throws {HostError} `invalid_request`
   */
  tools(tools: readonly ToolDefinition[] | undefined): CheckedTool[] {
    const out: CheckedTool[] = [];
    for (const def of tools ?? []) {
      this.id(def.name, "tool definition name");
      if (!def.toolName) throw new HostError("invalid_request", "tool definition is missing its tool name");
      const toolName = this.toolName(def.toolName);
      if (def.kind !== TOOL_KIND_FUNCTION && def.kind !== TOOL_KIND_FREEFORM) {
        throw new HostError("invalid_request", "tool definition has an invalid kind");
      }
      for (
        const [bytes, label] of [[def.inputSchemaJson, "input"], [def.outputSchemaJson, "output"]] as const
      ) {
        if (bytes === undefined) continue;
        try {
          parseJsonBytes(bytes);
        } catch (error) {
          throw new HostError(
            "invalid_request",
            `invalid tool ${label} schema: ${(error as Error).message}`,
            {
              cause: error,
            },
          );
        }
      }
      out.push({
        globalName: normalizeCodeModeIdentifier(def.name),
        description: def.description ?? "",
        definition: { toolName, kind: def.kind },
      });
    }
    return out;
  }
}

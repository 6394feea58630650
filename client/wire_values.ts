/**
 * The client's conversions between the wire messages (`proto/code_mode_types.ts`) and its public
 * values (`types.ts`): outcomes to responses, tool definitions to the Execute's form, and a tool
 * set's catalog key.
 *
 * @module
 */
import {
  type ContentItem,
  type ExecutionOutcome,
  type ToolDefinitionInit,
  ToolKind,
} from "../proto/code_mode_types.ts";
import { CodeModeError } from "../proto/errors.ts";
import type { FunctionCallOutputContentItem, RuntimeResponse, ToolDefinition } from "./types.ts";

const DETAILS = [undefined, "auto", "low", "high", "original"] as const;

/** Maps wire content items to the items a model sees. */
function contentItems(items: ContentItem[] | undefined): FunctionCallOutputContentItem[] {
  return (items ?? []).map((item) => {
    if (item.text) return { type: "input_text", text: item.text.text ?? "" };
    if (item.image) {
      const out: FunctionCallOutputContentItem = {
        type: "input_image",
        image_url: item.image.imageUrl ?? "",
      };
      if (item.image.detail !== undefined && item.image.detail !== 0) {
        const detail = DETAILS[item.image.detail];
        if (!detail) {
          throw new CodeModeError(undefined, `code-mode image has invalid detail value ${item.image.detail}`);
        }
        out.detail = detail;
      }
      return out;
    }
    if (item.audio) return { type: "input_audio", audio_url: item.audio.audioUrl ?? "" };
    throw new CodeModeError(undefined, "code-mode execution returned an empty content item");
  });
}

/**
 * Maps a wire `ExecutionOutcome` to a response with the public cell ID.
 *
 * @param outcome the outcome as decoded
 * @param publicId the cell's public ID
 * @returns the response
 * @throws {CodeModeError} for an empty content item or an image detail out of range
 */
export function toRuntimeResponse(outcome: ExecutionOutcome, publicId: string): RuntimeResponse {
  const base = {
    cellId: publicId,
    contentItems: contentItems(outcome.contentItems),
    codeModeHostDurationNs: Number(outcome.codeModeHostDurationNs ?? 0),
  };
  if (outcome.completed) {
    return outcome.completed.errorText === undefined
      ? { type: "result", ...base }
      : { type: "result", ...base, errorText: outcome.completed.errorText };
  }
  if (outcome.terminated) return { type: "terminated", ...base };
  return { type: "yielded", ...base };
}

/**
 * A tool definition as an Execute sends it: schemas as JSON bytes, the kind as its enum number.
 *
 * @param tool the public definition
 * @returns the wire definition
 */
export function wireTool(tool: ToolDefinition): ToolDefinitionInit {
  const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
  return {
    name: tool.name,
    toolName: tool.toolName,
    description: tool.description,
    kind: tool.kind === "freeform" ? ToolKind.TOOL_KIND_FREEFORM : ToolKind.TOOL_KIND_FUNCTION,
    ...(tool.inputSchema === undefined ? {} : { inputSchemaJson: encode(tool.inputSchema) }),
    ...(tool.outputSchema === undefined ? {} : { outputSchemaJson: encode(tool.outputSchema) }),
  };
}

/**
 * The tool set of an Execute as one string: equal exactly when the wire definitions are.
 *
 * @param tools the wire definitions, in order
 * @returns the key `Binding.catalogFor` takes
 */
export function catalogKey(tools: ToolDefinitionInit[]): string {
  const text = (bytes?: Uint8Array) => (bytes === undefined ? null : new TextDecoder().decode(bytes));
  return JSON.stringify(
    tools.map((t) => [
      t.name,
      t.toolName?.name,
      t.toolName?.namespace ?? null,
      t.description,
      t.kind,
      text(t.inputSchemaJson),
      text(t.outputSchemaJson),
    ]),
  );
}

/**
 * A fake OpenAI Responses API for driving the real Codex CLI (`../../shared/CODEX-0.171.md`,
 * "Driving the real Codex with a fake model"). Folder-private.
 *
 * - One server serves many Codex runs at once. A run is found by its prompt: the text of the
 *   user message that {@link FakeModel.script} registered. The server is stateless per request:
 *   the next scripted item is the one after as many as the request's `input` already holds tool
 *   calls, so a repeated request gets the same answer.
 * - Each `POST /v1/responses` is answered with server-sent events, the shape Codex's own tests
 *   use: `response.created`, one `response.output_item.done` per item of the step (several make
 *   parallel tool calls), `response.completed` with zero usage. When the script is used up, the
 *   item is an assistant message `done` (the turn ends).
 * - `GET /v1/models` answers an empty list; anything else 404.
 * - The last request body of each run is kept: its `input` is the whole conversation, and its
 *   `custom_tool_call_output` / `function_call_output` items are exactly what the model saw.
 * - It listens on 127.0.0.1:0 and, when asked, on a Unix socket too (a Unix socket crosses
 *   network namespaces: a relay inside a loopback-only namespace reaches it).
 *
 * @module
 */

/** A response item of the Responses API (`custom_tool_call`, `function_call`, `message`). */
export type ModelItem = Record<string, unknown>;

/**
 * One answer of the model: an item, or several items in one response (parallel tool calls: Codex
 * runs them and sends all their outputs in its next request).
 */
export type ModelStep = ModelItem | readonly ModelItem[];

/** An input item of a request. */
// deno-lint-ignore no-explicit-any
export type InputItem = Record<string, any>;

/** What a run's last request carried. */
export interface RunRecord {
  /** How many `POST /v1/responses` the run made. */
  requests: number;
  /** The `input` of the last request: the whole conversation. */
  input: InputItem[];
  /** When each request arrived (`performance.now()`, ms): a tool call's latency as Codex sees it. */
  at: number[];
  /** The whole body of the last request (`tools`, `parallel_tool_calls`, …). */
  // deno-lint-ignore no-explicit-any
  body: Record<string, any>;
}

const END: ModelItem = {
  type: "message",
  role: "assistant",
  id: "msg-end",
  content: [{ type: "output_text", text: "done" }],
};

/** A tool call, as the model writes it: `exec` is freeform, `wait` a function. */
export function execCall(callId: string, source: string): ModelItem {
  return { type: "custom_tool_call", call_id: callId, name: "exec", input: source };
}

/** A `wait` call with JSON arguments. */
export function waitCall(callId: string, args: Record<string, unknown>): ModelItem {
  return { type: "function_call", call_id: callId, name: "wait", arguments: JSON.stringify(args) };
}

/** The items of a step. */
export function stepItems(step: ModelStep): readonly ModelItem[] {
  return Array.isArray(step) ? step : [step as ModelItem];
}

/** The texts of the user messages, in order. */
function userTexts(input: InputItem[]): string[] {
  const out: string[] = [];
  for (const item of input) {
    if (item.type !== "message" || item.role !== "user" || !Array.isArray(item.content)) continue;
    for (const part of item.content) {
      if (part?.type === "input_text" && typeof part.text === "string") out.push(part.text);
    }
  }
  return out;
}

function sse(items: readonly ModelItem[], id: string): string {
  const usage = {
    input_tokens: 0,
    input_tokens_details: null,
    output_tokens: 0,
    output_tokens_details: null,
    total_tokens: 0,
  };
  return [
    { type: "response.created", response: { id } },
    ...items.map((item) => ({ type: "response.output_item.done", item })),
    { type: "response.completed", response: { id, usage } },
  ].map((event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`).join("");
}

/** The fake Responses API server. */
export class FakeModel implements AsyncDisposable {
  readonly #scripts = new Map<string, ModelStep[]>();
  readonly #records = new Map<string, RunRecord>();
  readonly #servers: Deno.HttpServer[] = [];
  readonly #unknown: string[] = [];
  #served = 0;
  /** The TCP port on 127.0.0.1. */
  port = 0;
  /** The Unix socket path, when one was asked for. */
  socket?: string;

  private constructor() {}

  /**
   * Starts the server on 127.0.0.1:0, and on `socket` when given.
   *
   * @param socket an optional Unix socket path
   * @returns the running server
   */
  static async start(socket?: string): Promise<FakeModel> {
    const model = new FakeModel();
    const handler = (request: Request) => model.#handle(request);
    const tcp = Promise.withResolvers<number>();
    model.#servers.push(
      Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: ({ port }) => tcp.resolve(port) }, handler),
    );
    model.port = await tcp.promise;
    if (socket) {
      const unix = Promise.withResolvers<void>();
      model.#servers.push(Deno.serve({ path: socket, onListen: () => unix.resolve() }, handler));
      await unix.promise;
      model.socket = socket;
    }
    return model;
  }

  /**
   * Registers a run: requests whose user prompt is `prompt` get `items`, one step per request (a
   * step of several items is one response with several tool calls).
   *
   * @param prompt the prompt the run is started with (unique per run)
   * @param items the model's answers in order
   */
  script(prompt: string, items: ModelStep[]): void {
    if (this.#scripts.has(prompt)) throw new Error(`the prompt '${prompt}' is already scripted`);
    this.#scripts.set(prompt, items);
  }

  /**
   * What the run with this prompt sent last.
   *
   * @param prompt the run's prompt
   * @returns its record, or undefined when it made no request
   */
  record(prompt: string): RunRecord | undefined {
    return this.#records.get(prompt);
  }

  /** Prompts of requests that matched no script (a defect of the test). */
  get unknownPrompts(): readonly string[] {
    return this.#unknown;
  }

  async #handle(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (request.method === "GET" && url.pathname.endsWith("/models")) return Response.json({ models: [] });
    if (request.method !== "POST" || !url.pathname.endsWith("/responses")) {
      return new Response("not found", { status: 404 });
    }
    const arrived = performance.now();
    const body = await request.json();
    const input: InputItem[] = Array.isArray(body.input) ? body.input : [];
    const texts = userTexts(input);
    const prompt = texts.find((text) => this.#scripts.has(text));
    const script = prompt === undefined ? undefined : this.#scripts.get(prompt);
    if (prompt === undefined || !script) {
      this.#unknown.push(texts.at(-1) ?? "");
      return new Response("no script for this prompt", { status: 400 });
    }
    const previous = this.#records.get(prompt);
    this.#records.set(prompt, {
      requests: (previous?.requests ?? 0) + 1,
      input,
      at: [...(previous?.at ?? []), arrived],
      body,
    });
    const calls = input.filter((item) => item.type === "custom_tool_call" || item.type === "function_call");
    // The next step is the first one whose calls are not in the input yet.
    let step = 0;
    for (let made = 0; step < script.length && made < calls.length; step++) {
      made += stepItems(script[step]).length;
    }
    const items = step < script.length ? stepItems(script[step]) : [END];
    return new Response(sse(items, `resp-${++this.#served}`), {
      headers: { "content-type": "text/event-stream" },
    });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await Promise.all(this.#servers.map((server) => server.shutdown().catch(() => {})));
  }
}

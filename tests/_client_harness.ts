/**
 * Shared pieces of the client-library tests: a provider clock moved by hand, a TCP relay that
 * counts connections, a middleware that injects statuses, and small call helpers.
 */
import { type CallContext, ServerError, type ServerMiddleware, type Status } from "nice-grpc";
import { NoopCodeModeSessionDelegate } from "../client/session.ts";
import type { Clock, CodeModeSession, CodeModeSessionDelegate, RuntimeResponse } from "../client/types.ts";

/** A provider clock that only moves when told to. */
export class FakeClock implements Clock {
  #now = 0;
  #next = 1;
  #timers = new Map<number, { due: number; fn(): void }>();
  now(): number {
    return this.#now;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.#next++;
    this.#timers.set(id, { due: this.#now + ms, fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.#timers.delete(handle as number);
  }
  /** Timers waiting for their time (deadlines and delays armed and not yet settled or aborted). */
  get sleeping(): number {
    return this.#timers.size;
  }
  advance(ms: number): void {
    this.#now += ms;
    const due = [...this.#timers].filter(([, t]) => t.due <= this.#now);
    for (const [id] of due) this.#timers.delete(id);
    for (const [, t] of due) t.fn();
  }
}

/** Relays TCP connections to the host and counts them; `onlyOne` relays the first and stops listening. */
export function relay(targetPort: number, onlyOne = false) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.Conn>();
  let connections = 0;
  const firstEnded = Promise.withResolvers<void>();
  const ended: boolean[] = [];
  const accepting = (async () => {
    for (;;) {
      let client: Deno.Conn;
      try {
        client = await listener.accept();
      } catch {
        return;
      }
      connections++;
      if (onlyOne) listener.close();
      const host = await Deno.connect({ hostname: "127.0.0.1", port: targetPort });
      conns.add(client).add(host);
      const index = connections;
      ended[index - 1] = false;
      void (async () => {
        await Promise.race([
          client.readable.pipeTo(host.writable).catch(() => {}),
          host.readable.pipeTo(client.writable).catch(() => {}),
        ]);
        for (const c of [client, host]) {
          conns.delete(c);
          try {
            c.close();
          } catch { /* closed */ }
        }
        ended[index - 1] = true;
        if (index === 1) firstEnded.resolve();
      })();
      if (onlyOne) return;
    }
  })();
  return {
    port: (listener.addr as Deno.NetAddr).port,
    get connections() {
      return connections;
    },
    /** Resolves when the first relayed connection has ended (its EOF). */
    firstEnded: firstEnded.promise,
    /** Whether each relayed connection (in accept order) has ended. */
    ended,
    async close() {
      try {
        listener.close();
      } catch { /* closed */ }
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      await accepting;
    },
  };
}

/** Injects the next status (once) and counts calls by method. */
export function injector() {
  const state = {
    next: undefined as { code: Status; message: string; routeLost?: boolean } | undefined,
    count: 0,
    calls: [] as string[],
  };
  const middleware = async function* <Request, Response>(
    call: {
      method: { path: string };
      request: Request;
      next(request: Request, context: CallContext): AsyncGenerator<Response, Response | void, undefined>;
    },
    context: CallContext,
  ) {
    state.count++;
    state.calls.push(call.method.path.replace(/^.*\//, ""));
    const rejection = state.next;
    if (rejection) {
      state.next = undefined;
      if (rejection.routeLost) context.trailer.set("x-code-mode-route-lost", "true");
      throw new ServerError(rejection.code, rejection.message);
    }
    return yield* call.next(call.request, context);
  } as unknown as ServerMiddleware;
  return { state, middleware };
}

export async function run(
  session: CodeModeSession,
  source: string,
  extra: { maxOutputTokens?: number; yieldTimeMs?: number } = {},
  delegate: CodeModeSessionDelegate = new NoopCodeModeSessionDelegate(),
): Promise<RuntimeResponse> {
  const started = await session.execute(
    { toolCallId: "call-1", enabledTools: [], source, ...extra },
    delegate,
  );
  return await started.initialResponse();
}

/** A delegate that records closures, notifications and tool calls, answering tools with `answer`. */
export class RecordingDelegate implements CodeModeSessionDelegate {
  closed: string[] = [];
  notifications: { callId: string; cellId: string; text: string }[] = [];
  calls: { cellId: string; name: string; input: unknown }[] = [];
  readonly answer: (input: unknown) => unknown;
  constructor(answer: (input: unknown) => unknown = (input) => input) {
    this.answer = answer;
  }
  invokeTool(call: { cellId: string; toolName: { name: string }; input?: unknown }): Promise<unknown> {
    this.calls.push({ cellId: call.cellId, name: call.toolName.name, input: call.input });
    return Promise.resolve(this.answer(call.input));
  }
  notify(callId: string, cellId: string, text: string): Promise<void> {
    this.notifications.push({ callId, cellId, text });
    return Promise.resolve();
  }
  cellClosed(cellId: string): void {
    this.closed.push(cellId);
  }
}

export function textResponse(cellId: string, text: string, duration: number): RuntimeResponse {
  return {
    type: "result",
    cellId,
    contentItems: [{ type: "input_text", text }],
    codeModeHostDurationNs: duration,
  };
}

export async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected a rejection");
}

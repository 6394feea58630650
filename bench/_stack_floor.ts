/**
 * The floor of this host's fixed gRPC stack (issue 28): a server built the way the host builds its
 * gRPC door — nice-grpc on `@grpc/grpc-js` and Deno's `node:http2`, the service definition loaded
 * from the same .proto files by protobufjs (`proto/loader.ts`), the same server options, and over
 * `grpc+stdio://` the same relay of stdin and stdout to a private Unix socket — with nothing behind
 * it: no session core, no runtime process, no sandbox. Every call is answered at once with what the
 * measurement client checks (`_grpc_client.py`). Folder-private; `BENCH_FLOOR=1 deno task
 * bench:reference` measures it in place of this host, beside Codex's host in the same run.
 *
 * What it answers:
 * - `OpenSession`: `opened`, then the stream stays open until the client cancels it.
 * - `Execute`: `started`, then a completed outcome: the text `x`; for `text(await tools.echo({}))`
 *   the tool call goes out on the session's `SubscribeToToolCalls` stream first and its
 *   `CompleteToolCall` output is the text; for `"x".repeat(N)` a text of N `x`; for the store cell
 *   a counter per session; bench:scale's `store("v", K); text("x")` the text `x`, and its
 *   `text(load("v"))` that K.
 * - `CloseSession`, `CompleteToolCall`: empty answers.
 *
 * Usage: `deno run --allow-all bench/_stack_floor.ts --listen grpc://127.0.0.1:0` (prints
 * `http://127.0.0.1:PORT` on stdout) or `--listen grpc+stdio://` (stdin EOF ends it).
 *
 * @module
 */
import { createServer, ServerError, Status } from "nice-grpc";
import { codeModeHostDefinition } from "../proto/loader.ts";
import { relayConnection } from "../host/doors/grpc/local_transports.ts";
import { MIB } from "../proto/bytes.ts";

const listen = Deno.args[Deno.args.indexOf("--listen") + 1] ?? "grpc://127.0.0.1:0";
const LIMIT = 64 * MIB;

// deno-lint-ignore no-explicit-any
type Any = any;
const toolWaiters = new Map<string, (text: string) => void>();
/** Each session's `store("v", K)` of bench:scale. */
const stored = new Map<string, string>();
const subscribers = new Map<string, (call: Any) => void>();
const counters = new Map<string, number>();
let sessions = 0;
let invocations = 0;

function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

const completed = (cellId: string, text: string) => ({
  outcome: { cellId, contentItems: [{ text: { text } }], completed: {}, codeModeHostDurationNs: 1n },
});

const implementation = {
  async *openSession(_request: Any, context: Any) {
    const sessionId = `floor-${++sessions}`;
    yield { opened: { sessionId } };
    await untilAborted(context.signal);
  },
  closeSession() {
    return Promise.resolve({});
  },
  async *subscribeToToolCalls(request: Any, context: Any) {
    const queue: Any[] = [];
    let wake: (() => void) | undefined;
    subscribers.set(request.sessionId, (call) => {
      queue.push(call);
      wake?.();
    });
    while (!context.signal.aborted) {
      if (queue.length === 0) {
        await Promise.race([new Promise<void>((r) => wake = r), untilAborted(context.signal)]);
        continue;
      }
      yield queue.shift();
    }
  },
  completeToolCall(request: Any) {
    const bytes: Uint8Array | undefined = request.succeeded?.outputJson;
    toolWaiters.get(request.invocationId)?.(bytes ? String(JSON.parse(new TextDecoder().decode(bytes))) : "");
    toolWaiters.delete(request.invocationId);
    return Promise.resolve({});
  },
  acknowledgeNotification() {
    return Promise.resolve({});
  },
  async *execute(request: Any) {
    const cellId = "1";
    yield { started: { executionId: request.executionId, cellId } };
    const source: string = request.source ?? "";
    const repeat = /"x"\.repeat\((\d+)\)/.exec(source);
    // bench:scale's first cell stores its K; the session's next cell reads it back.
    const storedK = /store\("v", (\d+)\)/.exec(source);
    if (source.includes("tools.echo")) {
      const invocationId = `inv-${++invocations}`;
      const answered = new Promise<string>((resolve) => toolWaiters.set(invocationId, resolve));
      subscribers.get(request.sessionId)?.({
        sessionId: request.sessionId,
        executionId: request.executionId,
        cellId,
        invocationId,
        runtimeToolCallId: "tool-1",
        toolName: { name: "echo" },
        toolKind: 1,
        inputJson: new TextEncoder().encode("{}"),
      });
      yield completed(cellId, await answered);
    } else if (repeat) {
      yield completed(cellId, "x".repeat(Number(repeat[1])));
    } else if (storedK) {
      stored.set(request.sessionId, storedK[1]);
      yield completed(cellId, "x");
    } else if (source.includes('load("v")')) {
      yield completed(cellId, stored.get(request.sessionId) ?? "");
    } else if (source.includes('load("n")')) {
      const n = (counters.get(request.sessionId) ?? 0) + 1;
      counters.set(request.sessionId, n);
      yield completed(cellId, String(n));
    } else {
      yield completed(cellId, "x");
    }
  },
};

const server = createServer({
  "grpc.max_receive_message_length": LIMIT,
  "grpc.max_send_message_length": LIMIT,
});
// The other methods (Wait, Terminate, …) are not measured: UNIMPLEMENTED.
const definition = codeModeHostDefinition() as Any;
const all: Any = { ...implementation };
for (const method of Object.keys(definition)) {
  all[method] ??= () => Promise.reject(new ServerError(Status.UNIMPLEMENTED, "not in the floor"));
}
server.add(definition, all);

if (listen === "grpc+stdio://") {
  const dir = await Deno.makeTempDir({ prefix: "stack-floor-" });
  const socket = `${dir}/grpc.sock`;
  await server.listen(`unix:${socket}`);
  const relay = await relayConnection(
    { readable: Deno.stdin.readable, writable: Deno.stdout.writable },
    socket,
  );
  await relay.ended;
  server.forceShutdown();
  await Deno.remove(dir, { recursive: true });
  Deno.exit(0);
} else {
  const address = listen.replace(/^grpc:\/\//, "");
  const port = await server.listen(address);
  console.log(`http://${address.slice(0, address.lastIndexOf(":"))}:${port}`);
  Deno.addSignalListener("SIGTERM", () => {
    server.forceShutdown();
    Deno.exit(0);
  });
}

/**
 * Where this host deliberately differs from Codex's own `codex-code-mode-host` (the reference, Codex
 * 0.171.0): the one table of them. Two documents show it, and a test in `conformance.ts` checks
 * both against this file: the README's section "Deliberate differences from Codex's own host" (three
 * columns: id, what differs, why; {@link renderDifferencesTable}`("readme")`) and
 * `docs/deliberate-differences.md` (every column; {@link renderDifferencesTable}`("full")`). The
 * conformance suite accepts a difference between the two hosts only in a scenario that names one of
 * these ids, and that scenario checks both sides.
 *
 * `deno run tests/reference/deliberate_differences.ts [readme]` prints the full table (or the
 * README's) as Markdown.
 *
 * @module
 */

/** One deliberate difference. */
export interface DeliberateDifference {
  /** Stable id, used by the scenarios that observe it. */
  readonly id: string;
  /** What differs. */
  readonly what: string;
  /** What the reference does. */
  readonly reference: string;
  /** What this host does. */
  readonly ours: string;
  /** Why. */
  readonly reason: string;
}

/** Every deliberate difference. */
export const DELIBERATE_DIFFERENCES: readonly DeliberateDifference[] = [
  {
    id: "typescript-cells",
    what: "TypeScript cells",
    reference: "Runs JavaScript only: a type annotation fails the cell with `SyntaxError: …`",
    ours: "Strips TypeScript types before the cell runs (SPEC §5.5); plain JavaScript runs unchanged",
    reason: "Models often write TypeScript; those cells then run",
  },
  {
    id: "cell-heap-limit",
    what: "A cell over its heap limit",
    reference: "The whole host process dies (`Fatal JavaScript out of memory`), ending every session",
    ours:
      "That cell completes with `exec runtime ended unexpectedly: cell heap limit of N MiB reached`; its session and every other session go on",
    reason: "One runaway cell must not end other sessions' work (SPEC §5.6)",
  },
  {
    id: "stdout-clean",
    what: "An uncaught value V8 cannot print (`[Symbol()]`)",
    reference:
      "V8 prints `…: Uncaught …` on stdout (also when its `toString` or `stack` throws): over JSON V1 and grpc+stdio the client loses the host (over TCP the cell fails with an empty error text)",
    ours:
      "Nothing but protocol frames reaches stdout; the cell completes with an error and the session goes on",
    reason: "On stdio, stdout is the transport; a cell must not break it",
  },
  {
    id: "unix-listener",
    what: "`--listen unix:PATH`",
    reference: "Refused: `` unsupported --listen URL `unix:…` ``, exit 1",
    ours: "Serves gRPC on a Unix socket created with mode 0600; the endpoint line is `unix:PATH`",
    reason: "File permissions instead of a TCP port (SPEC §9.9)",
  },
  {
    id: "limits-flag",
    what: "`--limit NAME=VALUE` and admission messages",
    reference: "No such flag (`unexpected argument '--limit'`, exit 2); its limits are fixed",
    ours:
      "Every limit of SPEC §2.8 can be set; requests over a limit fail `RESOURCE_EXHAUSTED` with SPEC §2.7's texts (e.g. `code-mode host has too many sessions`)",
    reason: "Operators size a shared host to its machine and tenants",
  },
  {
    id: "ops-flags",
    what: "Metrics, probes and traces flags",
    reference:
      "`--otel-trace-exporter URL` and `--otel-trace-listen URL` (a WebSocket of OTLP batches); no metrics or probes",
    ours:
      "`--metrics-listen IP:PORT` (Prometheus `/metrics`, `/healthz`, `/readyz`) and `--otel-trace-exporter URL`; no `--otel-trace-listen`",
    reason: "Services are scraped and probed by standard tooling",
  },
  {
    id: "os-sandbox",
    what: "OS sandbox",
    reference: "None: cells run in V8 isolates inside the host process",
    ours:
      "Each session runtime is its own permission-restricted Deno process, inside bubblewrap when available (`--os-sandbox`)",
    reason: "Defence in depth for untrusted code beyond V8's isolation",
  },
  {
    id: "mcp-front-door",
    what: "MCP front door",
    reference: "No MCP: only gRPC and JSON host V1",
    ours:
      "`--listen mcp+stdio` and `mcp+http://IP:PORT` serve tools `exec` and `wait`; `--mcp-config` adds MCP servers",
    reason: "MCP clients other than Codex can use code mode",
  },
  {
    id: "health-reflection",
    what: "gRPC health and reflection services",
    reference: "Not served: `grpc.health.v1.Health/Check` fails `UNIMPLEMENTED`",
    ours: "`grpc.health.v1.Health` (`SERVING`, `NOT_SERVING` while draining) and server reflection",
    reason: "Load balancers and grpcurl need them (SPEC §9.2)",
  },
  {
    id: "auth-tls",
    what: "Bearer-token auth and TLS",
    reference: "No `--auth-token-file`, `--tls-cert` or `--tls-key` (exit 2)",
    ours:
      "`--auth-token-file` requires `authorization: Bearer …` on every RPC (`UNAUTHENTICATED` otherwise); `--tls-cert`/`--tls-key` serve TLS",
    reason: "A host shared by several users needs access control and TLS",
  },
  {
    id: "usage-errors",
    what: "Usage errors: a bad `--listen`, an unknown flag",
    reference:
      "Exits 1 for a bad `--listen` value; exits 2 with clap's texts for a missing value or an unknown flag (`unexpected argument '--no-such-flag' found`)",
    ours:
      "Exits 2 for every usage error, with this host's texts (`Unknown option '--no-such-flag'`; the `--listen` forms it lists include `unix:PATH`)",
    reason: "One exit code for usage errors; messages name the flag",
  },
  {
    id: "non-loopback-listen",
    what: "A `grpc://` address outside 127.0.0.0/8 and ::1",
    reference: "Listens on it silently (e.g. `grpc://0.0.0.0:0`) and prints `http://0.0.0.0:PORT`",
    ours:
      "Refuses it, exit 2 (``refusing to listen on non-loopback address `0.0.0.0:0` without --allow-non-loopback``)",
    reason: "Remote access to a code runner must be chosen, not a default",
  },
  {
    id: "graceful-signals",
    what: "SIGTERM or SIGINT",
    reference: "Dies by the signal (exit status 143 for SIGTERM); running cells and unsent output are lost",
    ours: "Drains: no new sessions, running cells end, pending output is sent, runtimes are stopped; exits 0",
    reason: "No output lost, no runtime left behind, a clean exit",
  },
  {
    id: "spinning-cell-restart",
    what: "Stopping a spinning cell (`while (true) {}`)",
    reference:
      "Terminate (or `wait` with `terminate`) stops that cell only; the session's other running cells go on",
    ours:
      "Restarts the session's runtime (stored values kept): its other running cells end with `exec runtime ended unexpectedly: the session runtime was restarted to stop cell N` (until each running cell has its own runtime)",
    reason: "Deno 2.9.6 cannot stop one spinning Worker by itself",
  },
  {
    id: "traceparent-tool-calls",
    what: "An Execute's `traceparent` metadata",
    reference: "Not passed on: the cell's tool calls carry no `traceparent`",
    ours: "Copied into each `ToolCall` the cell makes",
    reason: "A harness can join its tool spans to their Execute's trace",
  },
  {
    id: "grpc-transport-details",
    what: "gRPC transport details",
    reference: "`content-type: application/grpc`; an unknown method's `UNIMPLEMENTED` has an empty message",
    ours: "`application/grpc+proto`; grpc-js's `The server does not implement the method /…`",
    reason: "grpc-js's framing",
  },
  {
    id: "notification-order",
    what: "Order of a cell's notifications and its outcome",
    reference:
      "A very chatty cell's last notifications can follow its outcome (over JSON V1 Codex then drops them)",
    ours: "A cell's notifications are always sent before its outcome, on every transport",
    reason: "Nothing a cell notifies is lost or arrives after its result",
  },
  {
    id: "stack-trace-limit",
    what: "`Error.stackTraceLimit` in a cell",
    reference: "Reads 10",
    ours:
      "Reads 64: the host's hidden frames count against V8's limit; at most 10 of the cell's frames are shown by default",
    reason: "The host's hidden frames must not crowd out the cell's",
  },
  {
    id: "prepare-stack-trace-accessor",
    what: "`Function.prototype`'s own property names in a cell",
    reference:
      "`Object.getOwnPropertyNames(Function.prototype)` is `length,name,constructor,apply,bind,call,toString,arguments,caller`",
    ours: "The same, then `prepareStackTrace`: the accessor through which the host hides its own frames",
    reason: "Stack traces show only the cell's frames, as the reference's",
  },
  {
    id: "helper-source-text",
    what: "Source of `as_settled`, `stream_settled`, `content`",
    reference: "The reference's own JavaScript",
    ours: "This host's implementation, with the same names, parameters and behaviour",
    reason: "Our own implementation of the documented behaviour",
  },
  {
    id: "finalization-registry",
    what: "`String(FinalizationRegistry)` in a cell",
    reference: "`function FinalizationRegistry() { [native code] }`",
    ours: "`function () { [native code] }` (its `name` is still `FinalizationRegistry`)",
    reason: "The constructor is wrapped so ended cells' cleanups never run",
  },
  {
    id: "v8-engine",
    what: "V8 differences (Deno 2.9.6's V8, the reference's)",
    reference:
      "A stack overflow's top frame is the call or the function's entry (varies run to run); a 3,000-deep array literal fails `RangeError`; `import source` is a `SyntaxError`",
    ours:
      "The same variation of the top frame; the literal evaluates; `import source` parses, then fails `Unsupported import in exec: y`",
    reason: "Limits and syntax of the JavaScript engine, not of the host",
  },
];

/** Looks up a difference by id. */
export function deliberateDifference(id: string): DeliberateDifference {
  const found = DELIBERATE_DIFFERENCES.find((d) => d.id === id);
  if (!found) {
    throw new Error(`no deliberate difference '${id}' in tests/reference/deliberate_differences.ts`);
  }
  return found;
}

function cell(text: string): string {
  return text.replaceAll("|", "\\|");
}

/** Which table: the README's three columns, or every column (docs/deliberate-differences.md). */
export type DifferencesTable = "readme" | "full";

/** Where each table is shown, its header and how a difference fills a row. */
export const DIFFERENCES_TABLES: Record<DifferencesTable, {
  /** The document, from the repository's root. */
  readonly file: string;
  /** The heading of the section whose one table it is. */
  readonly heading: string;
  /** The column names. */
  readonly header: readonly string[];
  /** A difference's cells, unescaped. */
  readonly row: (d: DeliberateDifference) => string[];
}> = {
  readme: {
    file: "README.md",
    heading: "## Deliberate differences from Codex's own host",
    header: ["id", "What differs", "Why"],
    row: (d) => [`\`${d.id}\``, d.what, d.reason],
  },
  full: {
    file: "docs/deliberate-differences.md",
    heading: "## The table",
    header: ["id", "What differs", "Codex's own host", "This host", "Why"],
    row: (d) => [`\`${d.id}\``, d.what, d.reference, d.ours, d.reason],
  },
};

/**
 * One table as Markdown, as its document shows it (before `deno fmt` pads the columns).
 *
 * @param table `"full"` (default: every column) or `"readme"` (id, what differs, why)
 */
export function renderDifferencesTable(table: DifferencesTable = "full"): string {
  const { header, row } = DIFFERENCES_TABLES[table];
  const line = (cells: readonly string[]) => `| ${cells.join(" | ")} |`;
  const rows = [
    line(header),
    line(header.map(() => "---")),
    ...DELIBERATE_DIFFERENCES.map((d) => line(row(d).map(cell))),
  ];
  return rows.join("\n") + "\n";
}

if (import.meta.main) console.log(renderDifferencesTable(Deno.args[0] === "readme" ? "readme" : "full"));

/**
 * Where this host deliberately differs from Codex's own `codex-code-mode-host` (the reference, Codex
 * 0.171.0): the one table of them. The README's section "Deliberate differences from Codex's own
 * host" shows it (a test in `conformance.ts` checks that the README's table equals
 * {@link renderDifferencesTable}); the conformance suite accepts a difference between the two hosts
 * only in a scenario that names one of these ids, and that scenario checks both sides.
 *
 * `deno run tests/reference/deliberate_differences.ts` prints the table as Markdown.
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
    reason: "Models often write TypeScript; a cell that would only fail with a SyntaxError runs instead",
  },
  {
    id: "cell-heap-limit",
    what: "A cell over its heap limit",
    reference: "The whole host process dies (`Fatal JavaScript out of memory`), ending every session",
    ours:
      "That cell completes with `exec runtime ended unexpectedly: cell heap limit of N MiB reached`; its session and every other session go on",
    reason: "One runaway cell must not take down other sessions' work (SPEC §5.6)",
  },
  {
    id: "stdout-clean",
    what: "A thrown value whose `toString` throws (`throw { toString() { throw new Error('x') } }`)",
    reference:
      "V8 prints `exec_main.mjs:N: Uncaught Error: x` on the host's stdout: over JSON V1 and grpc+stdio that corrupts the stream and the client loses the host (over TCP the cell completes with an empty error text)",
    ours:
      "Nothing but protocol frames reaches stdout; the cell completes with an error and the session goes on",
    reason: "On stdio, stdout is the transport; one cell must not cut every session off",
  },
  {
    id: "unix-listener",
    what: "`--listen unix:PATH`",
    reference: "Refused: `` unsupported --listen URL `unix:…` ``, exit 1",
    ours: "Serves gRPC on a Unix socket created with mode 0600; the endpoint line is `unix:PATH`",
    reason: "A local harness can use file permissions instead of a TCP port (SPEC §9.9)",
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
    reason: "A host run as a service is scraped and probed by standard tooling",
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
    reason: "A host reachable by more than one local user needs access control and encryption",
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

/** The table as Markdown, exactly as the README shows it. */
export function renderDifferencesTable(): string {
  const rows = [
    "| id | What differs | Codex's own host | This host | Why |",
    "| --- | --- | --- | --- | --- |",
    ...DELIBERATE_DIFFERENCES.map((d) =>
      `| \`${d.id}\` | ${cell(d.what)} | ${cell(d.reference)} | ${cell(d.ours)} | ${cell(d.reason)} |`
    ),
  ];
  return rows.join("\n") + "\n";
}

if (import.meta.main) console.log(renderDifferencesTable());

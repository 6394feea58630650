/**
 * The operations listener (`--metrics-listen IP:PORT`): plain HTTP/1.1 for scrapers and probes
 * that cannot send gRPC metadata, so it never asks for the host's token.
 *
 * - `GET /metrics`: every metric in Prometheus text format (`prometheus.ts`).
 * - `GET /healthz`: `200 ok` while the process serves at all.
 * - `GET /readyz`: `200 ready` while new sessions are accepted, `503 draining` once a graceful
 *   shutdown began (and `503 starting` before the front door listens).
 * - Any other path is `404`, any other method `405`.
 *
 * @module
 */
import type { PrometheusMetrics } from "./prometheus.ts";

/** Options of {@link startOpsServer}. */
export interface OpsServerOptions {
  /** The IP literal to bind (IPv6 without brackets). */
  hostname: string;
  /** The port; 0 picks a free one. */
  port: number;
  /** The metrics to render. */
  metrics: PrometheusMetrics;
  /** The readiness state. */
  readiness(): "ready" | "draining" | "starting";
}

/** A running operations listener. */
export interface OpsServer extends AsyncDisposable {
  /** The bound port. */
  readonly port: number;
  /** `http://IP:PORT` (IPv6 in brackets). */
  readonly url: string;
  /** Stops listening and waits for the requests in progress. */
  close(): Promise<void>;
}

/**
 * Starts the operations listener.
 *
 * @param options address, metrics and readiness
 * @returns the listener
 * @throws {Error} `failed to bind metrics listener to {addr}: {cause}` (e.g. `address already in use`)
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { PrometheusMetrics } from "./prometheus.ts";
 * import { startOpsServer } from "./ops_server.ts";
 *
 * const metrics = new PrometheusMetrics({ sessionsOpen: () => 0, warmRuntimes: () => 0 });
 * await using ops = startOpsServer({ hostname: "127.0.0.1", port: 0, metrics, readiness: () => "ready" });
 * const response = await fetch(`${ops.url}/readyz`);
 * assert.equal(await response.text(), "ready\n");
 * ```
 */
export function startOpsServer(options: OpsServerOptions): OpsServer {
  const { hostname, metrics } = options;
  const shown = hostname.includes(":") ? `[${hostname}]` : hostname;
  let server: Deno.HttpServer<Deno.NetAddr>;
  try {
    server = Deno.serve({ hostname, port: options.port, onListen() {} }, async (request) => {
      const path = new URL(request.url).pathname;
      if (path !== "/metrics" && path !== "/healthz" && path !== "/readyz") {
        return new Response("not found\n", { status: 404 });
      }
      if (request.method !== "GET" && request.method !== "HEAD") {
        return new Response("method not allowed\n", { status: 405, headers: { allow: "GET, HEAD" } });
      }
      if (path === "/healthz") return new Response("ok\n");
      if (path === "/readyz") {
        const state = options.readiness();
        return new Response(`${state}\n`, { status: state === "ready" ? 200 : 503 });
      }
      return new Response(await metrics.render(), { headers: { "content-type": metrics.contentType } });
    });
  } catch (error) {
    const cause = error instanceof Deno.errors.AddrInUse
      ? "address already in use"
      : (error as Error).message.replace(/ \(os error \d+\)$/, "").toLowerCase();
    throw new Error(`failed to bind metrics listener to ${shown}:${options.port}: ${cause}`, {
      cause: error,
    });
  }
  const port = server.addr.port;
  let closing: Promise<void> | undefined;
  const close = () => closing ??= server.shutdown().catch(alreadyClosed);
  return { port, url: `http://${shown}:${port}`, close, [Symbol.asyncDispose]: close };
}

/** A second shutdown of a server already closed rejects; closing is idempotent here, so it resolves. */
function alreadyClosed(): void {}

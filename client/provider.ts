/**
 * `GrpcCodeModeSessionProvider` (SPEC §10.1–§10.4): one shared HTTP/2 connection per provider,
 * provider-wide generations, and the opening of bindings with admission retry.
 *
 * Connection contract (§10.3):
 * - The channel is created lazily by the first binding that needs it, with its own subchannel pool
 *   (`grpc.use_local_subchannel_pool`), keep-alive pings also without calls, no idle timeout and a
 *   reconnect backoff of at most 50 ms.
 * - Every binding holds it from the start of its opening until it fails or shuts down; when the
 *   last hold goes, the channel is closed at once (the host sees EOF). A connection failure
 *   discards the channel; the next opening makes a fresh one.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { ChannelCredentials } from "@grpc/grpc-js";
import { type Channel, ClientError, createChannel, createClient, Metadata, Status } from "nice-grpc";
import { CodeModeError } from "../proto/errors.ts";
import { codeModeHostClientDefinition } from "../proto/loader.ts";
import {
  type OpenSessionRequestInit,
  OutputTruncationMode,
  type SessionEvent,
} from "../proto/code_mode_types.ts";
import { MAX_INT32, MAX_MESSAGE_BYTES, utf8ByteLength } from "../proto/bytes.ts";
import { realClock, sleep, TIMED_OUT, withDeadline } from "../proto/clock.ts";
import { Binding, type HostClient, statusError } from "./binding.ts";
import type { OpeningRequest } from "./binding_opener.ts";
import { type ParsedEndpoint, parseEndpoint } from "./endpoint.ts";
import { GrpcCodeModeSession } from "./session.ts";
import { rpcFailureText, timeoutText } from "./status_text.ts";
import type {
  Clock,
  CodeModeOutputTruncation,
  CodeModeSession,
  CodeModeSessionOptions,
  CodeModeSessionProvider,
} from "./types.ts";

/** Options of {@link GrpcCodeModeSessionProvider}. */
export interface ProviderOptions {
  /** Deadline of transport-level operations; default 60,000 ms. */
  transportTimeoutMs?: number;
  /** HTTP/2 keep-alive interval; default 30,000 ms. */
  keepaliveIntervalMs?: number;
  /** HTTP/2 keep-alive timeout; default 10,000 ms. */
  keepaliveTimeoutMs?: number;
  /** Sent as `authorization: Bearer {token}` on every RPC; default none. */
  authToken?: string;
  /** The provider's time source; default real time. */
  clock?: Clock;
  /** PEM roots to trust for `https` (default: the system's). */
  rootCertificates?: string;
  /**
   * The name to verify the host's certificate against, instead of the endpoint's host (default:
   * the host). Deno's `node:tls` refuses an IP address as the TLS server name, so a Deno client of
   * `https://127.0.0.1:…` sets a name the certificate carries, e.g. `localhost`.
   */
  tlsServerName?: string;
}

/**
 * An in-memory stand-in for the provider's channel: hands out a client and takes it back. Set by
 * the host's embedded provider (`embedded/`) through {@link useConnector}; a provider
 * with one has no endpoint, no connection and no channel to discard.
 */
export type Connector = () => { client: HostClient; release(): void };

const connectors = new WeakMap<GrpcCodeModeSessionProvider, Connector>();

/**
 * Makes `provider` open its bindings through `connector` instead of a gRPC channel (internal, for
 * the embedded provider; not exported from `mod.ts`).
 *
 * @param provider a provider that has not opened a session yet
 * @param connector where its clients come from
 */
export function useConnector(provider: GrpcCodeModeSessionProvider, connector: Connector): void {
  connectors.set(provider, connector);
}

const MAX_ROUTE_BYTES = 256;
/** OpenSession's `max_pending_delegate_calls` when the session does not choose: Codex 0.171's. */
const DEFAULT_PENDING_DELEGATE_CALLS = 4096;
const MAX_UINT32 = 4_294_967_295;
/**
 * The HTTP/2 receive window of the channel, per stream and for the connection (grpc-js otherwise
 * keeps the 64 KiB default): a large outcome (up to the 64 MiB message limit) then streams without
 * a WINDOW_UPDATE round trip every 64 KiB. At most this much is in flight unread per connection.
 */
const FLOW_CONTROL_WINDOW_BYTES = 4 * 1024 * 1024;
const MAX_SESSION_ID_BYTES = 256;
const ADMISSION_DELAYS_MS = [0, 50, 100, 200];
const MAX_ATTEMPTS = 5;
const MODE_CHANGED = "gRPC code-mode host changed the session output truncation mode on reconnect";

/**
 * What the first event of an opening's lease says: the opened session, or why the opening fails
 * (`UNAVAILABLE`: retried).
 */
function readOpening(
  first: IteratorResult<SessionEvent>,
  request: OpeningRequest,
):
  | { sessionId: string; mode: CodeModeOutputTruncation; supportsCatalogRevision: boolean }
  | { refusal: string; code?: "UNAVAILABLE" } {
  if (first.done) {
    return {
      refusal: rpcFailureText("session opening", Status.UNAVAILABLE, "session lease ended before opening"),
      code: "UNAVAILABLE",
    };
  }
  const opened = first.value.opened;
  if (!opened) return { refusal: "gRPC code-mode session lease omitted its opening event" };
  const sessionId = opened.sessionId ?? "";
  if (sessionId === "") return { refusal: "gRPC code-mode host returned an empty session ID" };
  if (utf8ByteLength(sessionId) > MAX_SESSION_ID_BYTES) {
    return { refusal: "gRPC code-mode host returned session ID exceeding 256 bytes" };
  }
  const mode: CodeModeOutputTruncation =
    opened.outputTruncation === OutputTruncationMode.OUTPUT_TRUNCATION_MODE_SERVER ? "server" : "client";
  if (request.pinned && mode !== request.mode) return { refusal: MODE_CHANGED };
  return { sessionId, mode, supportsCatalogRevision: opened.supportsCatalogRevision === true };
}

/**
 * Opens Codex-compatible sessions on one host endpoint, over one shared connection.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { GrpcCodeModeSessionProvider } from "./provider.ts";
 *
 * const provider = new GrpcCodeModeSessionProvider("ftp://127.0.0.1:1");
 * await assert.rejects(provider.createSession(), { message: "gRPC code-mode host URL must use http or https" });
 * ```
 */
export class GrpcCodeModeSessionProvider implements CodeModeSessionProvider {
  readonly #endpoint: string;
  readonly #options:
    & Required<Omit<ProviderOptions, "authToken" | "rootCertificates" | "tlsServerName">>
    & ProviderOptions;
  #parsed: ParsedEndpoint | undefined;
  #generation = 0;
  #channel: Channel | undefined;
  #client: HostClient | undefined;
  #holds = 0;

  /**
   * Creates a provider; nothing is validated or connected until `createSession`.
   *
   * @param endpoint `http://HOST:PORT`, `https://HOST:PORT`, `unix:PATH` or `unix://PATH`
   * @param options timeouts, token and clock
   */
  constructor(endpoint: string, options: ProviderOptions = {}) {
    this.#endpoint = endpoint;
    this.#options = {
      transportTimeoutMs: 60_000,
      keepaliveIntervalMs: 30_000,
      keepaliveTimeoutMs: 10_000,
      clock: realClock,
      ...options,
    };
  }

  /**
   * The provider's clock.
   *
   * @ignore
   */
  get clock(): Clock {
    return this.#options.clock;
  }

  /**
   * `transportTimeoutMs`.
   *
   * @ignore
   */
  get transportTimeoutMs(): number {
    return this.#options.transportTimeoutMs;
  }

  /**
   * Opens a public session (its first binding).
   *
   * @param options output mode and cell limits
   * @returns the session
   * @throws {CodeModeError} an endpoint error, or the first binding's opening failure
   */
  async createSession(options: CodeModeSessionOptions = {}): Promise<CodeModeSession> {
    if (!this.#parsed && !connectors.has(this)) {
      try {
        this.#parsed = parseEndpoint(this.#endpoint);
      } catch (error) {
        throw new CodeModeError(undefined, (error as Error).message);
      }
    }
    // The provider is the session's BindingOpener (binding_opener.ts), checked structurally here.
    return await GrpcCodeModeSession.open(this, options);
  }

  /**
   * Metadata of an RPC: the auth token, and a route token when given.
   *
   * @ignore
   */
  metadata(route?: string): Metadata {
    const metadata = Metadata();
    if (this.#options.authToken !== undefined) {
      metadata.set("authorization", `Bearer ${this.#options.authToken}`);
    }
    if (route !== undefined) metadata.set("x-code-mode-route", route);
    return metadata;
  }

  #hold(): { client: HostClient; release(): void } {
    const connector = connectors.get(this);
    if (connector) return connector();
    if (!this.#channel) {
      const parsed = this.#parsed!;
      const credentials = parsed.kind === "tcp" && parsed.secure
        ? ChannelCredentials.createSsl(
          this.#options.rootCertificates === undefined ? null : Buffer.from(this.#options.rootCertificates),
        )
        : undefined;
      this.#channel = createChannel(parsed.address, credentials, {
        "grpc.use_local_subchannel_pool": 1,
        "grpc.keepalive_time_ms": this.#options.keepaliveIntervalMs,
        "grpc.keepalive_timeout_ms": this.#options.keepaliveTimeoutMs,
        "grpc.keepalive_permit_without_calls": 1,
        "grpc.client_idle_timeout_ms": MAX_INT32,
        "grpc.initial_reconnect_backoff_ms": 50,
        "grpc.max_reconnect_backoff_ms": 50,
        "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
        "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
        "grpc-node.flow_control_window": FLOW_CONTROL_WINDOW_BYTES,
        ...(this.#options.tlsServerName === undefined
          ? {}
          : { "grpc.ssl_target_name_override": this.#options.tlsServerName }),
      });
      this.#client = createClient(codeModeHostClientDefinition(), this.#channel);
    }
    const channel = this.#channel;
    const client = this.#client!;
    this.#holds++;
    let released = false;
    return {
      client,
      release: () => {
        if (released) return;
        released = true;
        this.#holds--;
        if (this.#holds === 0 && this.#channel === channel) {
          this.#channel = undefined;
          this.#client = undefined;
          channel.close();
        }
      },
    };
  }

  /** A connection failure: the next hold creates a fresh channel. */
  #discardChannel(): void {
    const channel = this.#channel;
    if (!channel) return;
    this.#channel = undefined;
    this.#client = undefined;
    if (this.#holds === 0) channel.close();
  }

  /**
   * Opens a binding (SPEC §10.4): a new generation, admission retry, mode pinning, subscription.
   *
   * @param request the mode to ask for, and whether it is pinned
   * @returns the live binding and the mode its host selected
   * @throws {CodeModeError} the opening failure
   * @ignore
   */
  async openBinding(request: OpeningRequest): Promise<{ binding: Binding; mode: CodeModeOutputTruncation }> {
    const generation = ++this.#generation;
    const limits = request.limits;
    const openRequest: OpenSessionRequestInit = {};
    if (limits && (limits.maxYieldTimeMs !== undefined || limits.maxHeapSizeBytes !== undefined)) {
      if (limits.maxHeapSizeBytes !== undefined && limits.maxHeapSizeBytes > Number.MAX_SAFE_INTEGER) {
        throw new CodeModeError(
          undefined,
          `invalid code-mode heap size limit: ${limits.maxHeapSizeBytes} exceeds ${Number.MAX_SAFE_INTEGER}`,
        );
      }
      openRequest.cellExecutionLimits = {
        ...(limits.maxYieldTimeMs === undefined ? {} : { maxYieldTimeMs: limits.maxYieldTimeMs }),
        ...(limits.maxHeapSizeBytes === undefined ? {} : { maxHeapSizeBytes: limits.maxHeapSizeBytes }),
      };
    }
    if (request.mode === "server") {
      openRequest.outputTruncation = OutputTruncationMode.OUTPUT_TRUNCATION_MODE_SERVER;
    }
    const capacity = request.maxPendingDelegateCalls ?? DEFAULT_PENDING_DELEGATE_CALLS;
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > MAX_UINT32) {
      throw new CodeModeError(undefined, `invalid code-mode delegate capacity: ${capacity}`);
    }
    openRequest.maxPendingDelegateCalls = capacity;
    let lastError: CodeModeError | undefined;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      if (attempt > 0) {
        const delay = ADMISSION_DELAYS_MS[Math.min(attempt - 1, ADMISSION_DELAYS_MS.length - 1)];
        if (delay > 0) await sleep(this.clock, delay * (0.9 + Math.random() * 0.2), request.signal);
      }
      const outcome = await this.#attempt(generation, openRequest, request);
      if ("binding" in outcome) return outcome;
      lastError = outcome.error;
      if (!outcome.retry) throw outcome.error;
    }
    throw lastError!;
  }

  async #attempt(
    generation: number,
    openRequest: OpenSessionRequestInit,
    request: OpeningRequest,
  ): Promise<
    { binding: Binding; mode: CodeModeOutputTruncation } | { error: CodeModeError; retry: boolean }
  > {
    const hold = this.#hold();
    const abort = new AbortController();
    const onOuterAbort = () => abort.abort();
    request.signal?.addEventListener("abort", onOuterAbort, { once: true });
    let route: string | undefined;
    let routeTooLong = false;
    try {
      const stream = hold.client.openSession(openRequest, {
        signal: abort.signal,
        metadata: this.metadata(),
        onHeader: (header: Metadata) => {
          const value = header.get("x-code-mode-route");
          if (typeof value !== "string") return;
          if (utf8ByteLength(value) > MAX_ROUTE_BYTES) routeTooLong = true;
          else route = value;
        },
      });
      const lease = stream[Symbol.asyncIterator]();
      const first = await withDeadline(this.clock, lease.next(), this.transportTimeoutMs);
      if (first === TIMED_OUT) {
        abort.abort();
        hold.release();
        return {
          error: new CodeModeError("DEADLINE_EXCEEDED", timeoutText("session opening")),
          retry: false,
        };
      }
      const fail = (message: string, code?: "UNAVAILABLE") => {
        abort.abort();
        hold.release();
        return { error: new CodeModeError(code, message), retry: code === "UNAVAILABLE" };
      };
      if (routeTooLong) return fail("session routing token is too long");
      const opening = readOpening(first, request);
      if ("refusal" in opening) return fail(opening.refusal, opening.code);
      const { sessionId, mode } = opening;
      const binding = new Binding({
        sessionId,
        generation,
        route,
        supportsCatalogRevision: opening.supportsCatalogRevision,
        maxPendingDelegateCalls: openRequest.maxPendingDelegateCalls,
        client: hold.client,
        host: this,
        release: hold.release,
        lease,
        leaseAbort: abort,
      });
      try {
        await binding.subscribe();
      } catch (error) {
        binding.fail(error as CodeModeError);
        return { error: error as CodeModeError, retry: false };
      }
      return { binding, mode };
    } catch (error) {
      abort.abort();
      hold.release();
      if (error instanceof ClientError) {
        const retry = error.code === Status.UNAVAILABLE || error.code === Status.RESOURCE_EXHAUSTED;
        if (error.code === Status.UNAVAILABLE) this.#discardChannel();
        return { error: statusError("session opening", error), retry };
      }
      throw error;
    } finally {
      request.signal?.removeEventListener("abort", onOuterAbort);
    }
  }
}

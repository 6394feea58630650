/**
 * Child process of the "OpenSession while draining" test (crash_test.ts): starts a host with one
 * open session, begins its graceful shutdown (which waits for that session), races an
 * OpenSession against the drain, then ends the session and prints `refused <code>`.
 * Folder-private.
 *
 * @module
 */
import { collect, grpcError, openSession, startHost } from "./_harness.ts";

const h = await startHost();
// The open lease keeps the host draining (not yet closed) while the OpenSession arrives.
const held = await openSession(h.client);
const shutdown = h.host.shutdown();
const refused = await grpcError(collect(h.client.openSession({}))).catch(() => ({ code: -1 }));
held.cancel();
await shutdown;
await h[Symbol.asyncDispose]();
console.log(`refused ${refused.code}`);

/**
 * Child process of the "OpenSession while draining" test (crash_test.ts): starts a host, begins
 * its graceful shutdown and races an OpenSession against it, then prints `refused <code>`.
 * Folder-private.
 *
 * @module
 */
import { collect, grpcError, startHost } from "./_harness.ts";

const h = await startHost();
const shutdown = h.host.shutdown();
const refused = await grpcError(collect(h.client.openSession({}))).catch(() => ({ code: -1 }));
await shutdown;
await h[Symbol.asyncDispose]();
console.log(`refused ${refused.code}`);

/**
 * The client library's catalog-revision scenario (`tests/_client_catalog.ts`) against Codex's own
 * host (`codex-code-mode-host` 0.171): the revisions the library sends are the ones the reference
 * accepts, and it recovers when the reference forgot one. Part of `deno task test:reference`.
 */
import { catalogScenario, startServer } from "../_client_catalog.ts";
import { ensureCodex } from "./_codex.ts";

Deno.test("client: with Codex's host, tools travel once per catalog revision and again after the host forgot it", async () => {
  const { host } = await ensureCodex();
  const { address, child } = await startServer(host, ["--listen", "grpc://127.0.0.1:0"]);
  try {
    await catalogScenario(address);
  } finally {
    child.kill();
    await child.status;
  }
});

/**
 * Test helpers for the metrics listener: scrape `/metrics` and parse the Prometheus text.
 * Folder-private: never re-exported.
 *
 * @module
 */
import assert from "node:assert/strict";

/** Parses Prometheus text into `name{labels}` → value. */
export function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/** Scrapes `/metrics`. */
export async function scrape(url: string): Promise<Map<string, number>> {
  const response = await fetch(`${url}/metrics`);
  assert.equal(response.status, 200);
  assert.match(response.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  return parseMetrics(await response.text());
}

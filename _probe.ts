import { Client, StdioClientTransport } from "./host/doors/mcp/sdk.ts";
const t = new StdioClientTransport({ command: Deno.execPath(), args: ["run", "-A", "host/main.ts", "--listen", "mcp+stdio", "--mcp-config", "deploy/mcp/example.json", "--log-level", "warn"] });
const c = new Client({ name: "probe", version: "1" });
let t0 = performance.now();
await c.connect(t);
console.log("connect ms", performance.now() - t0);
const tools = await c.listTools();
console.log(tools.tools.map((t) => t.name), tools.tools[0].description.slice(-800));
for (const code of ['store("k", 41); text("ok")', 'text(load("k") + 1)', 'const [a, b] = await Promise.all([tools.mcp__fixture__lookup({key: "answer"}), tools.mcp__fixture__slow_sum({a: 1, b: 2})]); text(a); text(b)', 'throw new Error("boom")', 'image("data:image/png;base64,iVBORw0KGgo=")', '// @exec: {"yield_time_ms": 100}\nawait new Promise(r => setTimeout(r, 500)); text("late")', 'try { await tools.mcp__fixture__lookup({key: "nope"}) } catch (e) { text("caught: " + e.message) }']) {
  t0 = performance.now();
  const r = await c.callTool({ name: "exec", arguments: { code } });
  console.log(performance.now() - t0, JSON.stringify(r));
}
console.log(JSON.stringify(await c.callTool({ name: "wait", arguments: { cell_id: "6" } })));
await c.close();

// proto/worker_ready.ts
var WORKER_PROTOCOL_VERSION = 2;
function varint(value, out) {
  while (value > 127) {
    out.push(value & 127 | 128);
    value = Math.floor(value / 128);
  }
  out.push(value);
}
function encodeReadyFrame(denoVersion, protocolVersion = WORKER_PROTOCOL_VERSION) {
  const version = new TextEncoder().encode(denoVersion);
  const ready2 = [
    10
  ];
  varint(version.length, ready2);
  ready2.push(...version, 16);
  varint(protocolVersion, ready2);
  const message = [
    10
  ];
  varint(ready2.length, message);
  message.push(...ready2);
  const n = message.length;
  return new Uint8Array([
    n >>> 24,
    n >>> 16 & 255,
    n >>> 8 & 255,
    n & 255,
    ...message
  ]);
}

// worker/runtime_entry.ts
var ready = encodeReadyFrame(Deno.version.deno);
for (let offset = 0; offset < ready.length; ) offset += Deno.stdout.writeSync(ready.subarray(offset));
var main = new URL("./runtime_main.js", import.meta.url).href;
await import(main);

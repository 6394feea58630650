/**
 * The worker protocol codec (`proto/worker_codec.ts`) against protobufjs reading worker.proto, its
 * baseline: a small cell event (the common frame) and a 64 KiB text item, each way.
 *
 * @module
 */
import { PROTO_FILES, readProtoText } from "../proto/loader.ts";
import protobuf, { asBuffer } from "../proto/protobuf_runtime.ts";
import { createWorkerCodec, type WorkerToHost } from "../proto/worker_codec.ts";

const codec = createWorkerCodec();
const root = protobuf.parse(readProtoText(PROTO_FILES.worker), { keepCase: false }).root;
const type = root.lookupType("codemode.worker.v1.WorkerToHost");
const options = { longs: Number, enums: Number, oneofs: true, defaults: false };

const small: WorkerToHost = { cellEvent: { cellId: "12", contentItem: { text: "hello" } } };
const large: WorkerToHost = { cellEvent: { cellId: "12", contentItem: { text: "x".repeat(65_536) } } };
const smallBytes = codec.encodeWorkerToHost(small);
const largeBytes = codec.encodeWorkerToHost(large);

for (
  const [name, value, bytes] of [["small event", small, smallBytes], [
    "64 KiB text",
    large,
    largeBytes,
  ]] as const
) {
  Deno.bench(
    { name: `encode ${name}: protobufjs (baseline)`, group: `encode ${name}`, baseline: true },
    () => {
      type.encode(value).finish();
    },
  );
  Deno.bench({ name: `encode ${name}: worker codec`, group: `encode ${name}` }, () => {
    codec.encodeWorkerToHost(value);
  });
  Deno.bench(
    { name: `decode ${name}: protobufjs (baseline)`, group: `decode ${name}`, baseline: true },
    () => {
      type.toObject(type.decode(asBuffer(bytes)), options);
    },
  );
  Deno.bench({ name: `decode ${name}: worker codec`, group: `decode ${name}` }, () => {
    codec.decodeWorkerToHost(bytes);
  });
}

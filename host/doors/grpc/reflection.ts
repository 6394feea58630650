/**
 * gRPC server reflection (`grpc.reflection.v1.ServerReflection`, SPEC §9.2), loaded on its first
 * call: the package that answers it (nice-grpc-server-reflection, on google-protobuf) and the
 * encoded descriptor set of the public protos cost a host's start ~25 ms of its thread, and no
 * Codex session calls it.
 *
 * - The method is registered at start with the package's path and stream kinds, its messages left
 *   as bytes; its first call loads the package and builds the descriptor set (once per host).
 * - Every call is then answered by the package's own implementation, each message decoded and
 *   encoded by the package's own serializers: the same bytes as a host that loaded it at start.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import type { CallContext } from "nice-grpc";

/** The one method of the reflection service, as the package defines it. */
const PATH = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";

/** Messages stay bytes until the package is loaded. */
const asBytes = (value: Uint8Array): Buffer => Buffer.isBuffer(value) ? value : Buffer.from(value);

/** A grpc-js style definition of the reflection service with byte messages. */
export const REFLECTION_SERVICE = {
  serverReflectionInfo: {
    path: PATH,
    requestStream: true,
    responseStream: true,
    originalName: "serverReflectionInfo",
    requestSerialize: asBytes,
    requestDeserialize: asBytes,
    responseSerialize: asBytes,
    responseDeserialize: asBytes,
  },
} as const;

/** What the first call loads. */
interface Loaded {
  method: {
    requestDeserialize(bytes: Buffer): unknown;
    responseSerialize(value: unknown): Buffer;
  };
  answer(requests: AsyncIterable<unknown>, context: CallContext): AsyncIterable<unknown>;
}

/**
 * The implementation of {@link REFLECTION_SERVICE}.
 *
 * @param protoset builds the encoded `FileDescriptorSet` to serve (called once, on the first call)
 * @param serviceNames the services it lists
 * @returns the implementation, for `server.add(REFLECTION_SERVICE, …)`
 */
export function lazyServerReflection(protoset: () => Promise<Uint8Array>, serviceNames: string[]) {
  let loaded: Promise<Loaded> | undefined;
  const load = () =>
    loaded ??= (async () => {
      const [{ ServerReflection, ServerReflectionService }, set] = await Promise.all([
        import("nice-grpc-server-reflection"),
        protoset(),
      ]);
      const implementation = ServerReflection(set, serviceNames);
      return {
        method: ServerReflectionService.serverReflectionInfo as unknown as Loaded["method"],
        answer: implementation.serverReflectionInfo as unknown as Loaded["answer"],
      };
    })();
  return {
    async *serverReflectionInfo(requests: AsyncIterable<Buffer>, context: CallContext) {
      const { method, answer } = await load();
      async function* decoded() {
        for await (const bytes of requests) yield method.requestDeserialize(bytes);
      }
      for await (const response of answer(decoded(), context)) yield method.responseSerialize(response);
    },
  };
}

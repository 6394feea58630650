/**
 * The encoded `FileDescriptorSet` of a parsed root, for gRPC server reflection. A module of its own
 * because protobufjs's descriptor extension costs ~8 ms to load, which only the first reflection
 * call pays (`host/doors/grpc/reflection.ts`).
 *
 * @module
 */
import type protobuf from "./protobuf_runtime.ts";
import descriptor from "protobufjs/ext/descriptor/index.js";

/**
 * Encodes a `FileDescriptorSet` of the given root for gRPC server reflection.
 *
 * @param root the parsed protos
 * @returns the serialized descriptor set
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { publicProtoRoot } from "./loader.ts";
 * assert.ok(fileDescriptorSet(publicProtoRoot()).length > 0);
 * ```
 */
export function fileDescriptorSet(root: protobuf.Root): Uint8Array {
  // protobufjs/ext/descriptor adds `toDescriptor` to `Root` at run time; its typings do not say so.
  const set = (root as protobuf.Root & { toDescriptor(syntax: string): protobuf.Message }).toDescriptor(
    "proto3",
  );
  return descriptor.FileDescriptorSet.encode(set).finish();
}

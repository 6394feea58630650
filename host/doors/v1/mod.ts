/**
 * The JSON "host V1" front door (SPEC §9.10).
 *
 * @module
 */
export { serveV1Stdio, type V1Io } from "./stdio.ts";
export { type ConnectionEnd, V1Connection, type V1ConnectionOptions } from "./connection.ts";

/**
 * `normalizeCodeModeIdentifier` (SPEC §11.3), shared with the client's harness kit through `proto/`.
 *
 * @module
 */
export { normalizeCodeModeIdentifier } from "../../proto/identifiers.ts";

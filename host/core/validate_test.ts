import assert from "node:assert/strict";
import { parseUuid, validateIdentifier } from "./validate.ts";

const ID = "abcdef12-2222-4333-8444-555555555555";

Deno.test("parseUuid accepts the forms of Rust's uuid crate and returns the lower-case hyphenated form", () => {
  const upper = ID.toUpperCase();
  for (
    const form of [ID, upper, ID.replaceAll("-", ""), `{${upper}}`, `urn:uuid:${ID}`, `urn:uuid:${upper}`]
  ) {
    assert.equal(parseUuid(form), ID, form);
  }
  // Any version and variant, the nil UUID included.
  assert.equal(parseUuid("00000000-0000-0000-0000-000000000000"), "00000000-0000-0000-0000-000000000000");
});

Deno.test("parseUuid refuses what the uuid crate refuses", () => {
  for (
    const bad of [
      "",
      "abc",
      ID.slice(0, -1),
      ID + "5",
      `{${ID.replaceAll("-", "")}}`,
      `URN:UUID:${ID}`,
      `urn:uuid:${ID.replaceAll("-", "")}`,
      ` ${ID}`,
      `${ID} `,
      "g" + ID.slice(1),
      "abcdef1-22222-4333-8444-555555555555",
      "abcdef122222-4333-8444-555555555555",
    ]
  ) {
    assert.equal(parseUuid(bad), undefined, bad);
  }
});

Deno.test("validateIdentifier checks empty, then length, then UUID, and returns the value unchanged", () => {
  assert.throws(() => validateIdentifier("", "session ID", 256, { uuid: true }), /must not be empty/);
  assert.throws(
    () => validateIdentifier("x".repeat(257), "session ID", 256, { uuid: true }),
    /exceeds 256 bytes/,
  );
  assert.throws(() => validateIdentifier("nope", "session ID", 256, { uuid: true }), {
    message: "code-mode session ID must be a UUID",
  });
  assert.equal(validateIdentifier(`{${ID}}`, "session ID", 256, { uuid: true }), `{${ID}}`);
});

/**
 * Writes `proto/code_mode_types.ts`: TypeScript types of every `codex.code_mode.v1` message as the
 * loader decodes and encodes it, and the service's method signatures, from the `.proto` file
 * (protobufjs reflection). `proto/code_mode_types_test.ts` fails when the committed file differs
 * from a fresh generation.
 *
 * Run: `deno run --allow-read --allow-write proto/gen_types.ts`
 *
 * @module
 */
import type protobuf from "./protobuf_runtime.ts";
import { parseProtos, PROTO_FILES, readProtoText } from "./loader.ts";

const PACKAGE = "codex.code_mode.v1";
const SERVICE = "CodeModeHost";

const LONGS = new Set(["int64", "uint64", "sint64", "fixed64", "sfixed64"]);
const NUMBERS = new Set(["int32", "uint32", "sint32", "fixed32", "sfixed32", "float", "double"]);

/** The TypeScript type of one field's value; `init` is the encoder's side. */
function valueType(field: protobuf.Field, init: boolean): string {
  const resolved = field.resolvedType;
  let type: string;
  if (resolved && "fieldsArray" in resolved) type = init ? `${resolved.name}Init` : resolved.name;
  else if (resolved) type = "number";
  else if (LONGS.has(field.type)) type = init ? "number" : "string";
  else if (NUMBERS.has(field.type)) type = "number";
  else if (field.type === "string") type = "string";
  else if (field.type === "bool") type = "boolean";
  else if (field.type === "bytes") type = "Uint8Array";
  else throw new Error(`gen_types: unsupported field type ${field.type} of ${field.fullName}`);
  return field.repeated ? `${type}[]` : type;
}

function fieldDoc(field: protobuf.Field): string {
  const resolved = field.resolvedType;
  const what = resolved && !("fieldsArray" in resolved) ? `; an {@link ${resolved.name}} number` : "";
  const long = LONGS.has(field.type) ? "; 64-bit" : "";
  return `/** \`${field.options?.proto3_optional ? "optional " : ""}${
    field.repeated ? "repeated " : ""
  }${field.type} ${snake(field.name)} = ${field.id}\`${what}${long} */`;
}

function snake(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function isSynthetic(oneof: protobuf.OneOf): boolean {
  return oneof.fieldsArray.length === 1 && oneof.fieldsArray[0].options?.proto3_optional === true;
}

function message(type: protobuf.Type, init: boolean): string {
  const name = init ? `${type.name}Init` : type.name;
  const real = type.oneofsArray.filter((o) => !isSynthetic(o));
  const inOneof = new Set(real.flatMap((o) => o.fieldsArray.map((f) => f.name)));
  const lines: string[] = [];
  for (const field of type.fieldsArray) {
    if (inOneof.has(field.name)) continue;
    lines.push(`  ${fieldDoc(field)}`, `  ${field.name}?: ${valueType(field, init)};`);
  }
  if (!init) {
    for (const oneof of type.oneofsArray.filter(isSynthetic)) {
      lines.push(
        `  /** Set to the field's name when \`${oneof.fieldsArray[0].name}\` is present. */`,
        `  ${oneof.name}?: "${oneof.fieldsArray[0].name}";`,
      );
    }
  }
  const doc = init
    ? `/** \`${type.fullName.slice(1)}\` as the encoder takes it. */`
    : `/** \`${type.fullName.slice(1)}\` as decoded. */`;
  const body = lines.length === 0 ? "{}" : `{\n${lines.join("\n")}\n}`;
  if (real.length === 0) {
    return lines.length === 0
      ? `${doc}\n// deno-lint-ignore no-empty-interface\nexport interface ${name} {}\n`
      : `${doc}\nexport interface ${name} ${body}\n`;
  }
  const unions = real.map((oneof) => {
    const members = oneof.fieldsArray.map((field) => field.name);
    const variant = (set: string | undefined) => {
      const parts: string[] = [];
      if (!init) parts.push(set === undefined ? `${oneof.name}?: undefined` : `${oneof.name}: "${set}"`);
      for (const member of members) {
        const field = oneof.fieldsArray.find((f) => f.name === member)!;
        parts.push(member === set ? `${member}: ${valueType(field, init)}` : `${member}?: undefined`);
      }
      return `{\n${parts.map((part) => `      ${part};`).join("\n")}\n    }`;
    };
    const variants = [...members.map((m) => variant(m)), variant(undefined)];
    return `  /** \`oneof ${snake(oneof.name)}\`: at most one of ${
      members.map((m) => `\`${m}\``).join(", ")
    }${init ? "" : `, named by \`${oneof.name}\``}. */\n  & (\n${
      variants.map((v) => `    | ${v}`).join("\n")
    }\n  )`;
  });
  if (lines.length === 0 && unions.length === 1) {
    // One oneof and nothing else: the union on its own (`& (…)` with one member is not kept by fmt).
    const only = unions[0].replace("\n  & (\n", "\n").replace(/\n {2}\)$/, "").replace(/\n {4}/g, "\n  ");
    return `${doc}\nexport type ${name} =\n${only};\n`;
  }
  const head = lines.length === 0 ? "" : `  & ${body.replace(/\n/g, "\n  ")}\n`;
  return `${doc}\nexport type ${name} =\n${head}${unions.join("\n")};\n`;
}

function enumeration(type: protobuf.Enum): string {
  const entries = Object.entries(type.values).map(([key, value]) => `  ${key}: ${value},`);
  return `/** \`${type.fullName.slice(1)}\` numbers (decoded enums are numbers; unknown ones too). */\n` +
    `export const ${type.name} = {\n${entries.join("\n")}\n} as const;\n`;
}

function service(svc: protobuf.Service): string {
  const methods = svc.methodsArray.map((method) => {
    method.resolve();
    if (method.requestStream) throw new Error(`gen_types: client streaming ${method.name} is not supported`);
    const key = method.name[0].toLowerCase() + method.name.slice(1);
    const request = method.resolvedRequestType!.name;
    const response = `${method.resolvedResponseType!.name}Init`;
    const result = method.responseStream ? `AsyncIterable<${response}>` : `Promise<${response}>`;
    return `  /** \`rpc ${method.name}(${request}) returns (${method.responseStream ? "stream " : ""}${
      method.resolvedResponseType!.name
    })\` */\n  ${key}(\n    request: ${request},\n    context: Context,\n  ): ${result};`;
  });
  return `/**\n * A server implementation of \`${
    svc.fullName.slice(1)
  }\`, keyed like the loader's definition;\n` +
    ` * \`Context\` is the server's call context.\n */\n` +
    `export interface ${svc.name}Implementation<Context> {\n${methods.join("\n")}\n}\n`;
}

function client(svc: protobuf.Service): string {
  const methods = svc.methodsArray.map((method) => {
    method.resolve();
    const key = method.name[0].toLowerCase() + method.name.slice(1);
    const request = `${method.resolvedRequestType!.name}Init`;
    const response = method.resolvedResponseType!.name;
    const result = method.responseStream ? `AsyncIterable<${response}>` : `Promise<${response}>`;
    return `  /** \`rpc ${method.name}(${method.resolvedRequestType!.name}) returns (${
      method.responseStream ? "stream " : ""
    }${response})\` */\n  ${key}(\n    request: ${request},\n    options?: Options,\n  ): ${result};`;
  });
  // A type literal rather than an interface: a client assembled method by method at run time
  // (a `Record`) can then be asserted to it.
  return `/**\n * A client of \`${
    svc.fullName.slice(1)
  }\`, keyed like the loader's definition: requests as the\n` +
    ` * encoder takes them, responses as decoded; \`Options\` are the client's call options.\n */\n` +
    `export type ${svc.name}Client<Options> = {\n${methods.join("\n")}\n};\n`;
}

/**
 * Generates the text of `proto/code_mode_types.ts`.
 *
 * @returns the module's source
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.match(generateCodeModeTypes(), /export interface ExecutionStarted \{/);
 * ```
 */
export function generateCodeModeTypes(): string {
  const root = parseProtos([readProtoText(PROTO_FILES.codeModeHost)]);
  const ns = root.lookup(PACKAGE) as protobuf.Namespace;
  const parts: string[] = [
    `// Generated by proto/gen_types.ts from ${PROTO_FILES.codeModeHost}; do not edit.\n` +
    `// Regenerate: deno run --allow-read --allow-write proto/gen_types.ts\n`,
    `/**\n` +
    ` * TypeScript types of the \`${PACKAGE}\` messages as \`proto/loader.ts\` converts them.\n` +
    ` *\n` +
    ` * - \`Name\`: as decoded (\`DECODE_OPTIONS\`): every field may be absent (defaults are left out),\n` +
    ` *   64-bit integers are decimal strings, enums are numbers, bytes are \`Uint8Array\`s, and each\n` +
    ` *   oneof's set member is named in a property called after the oneof (a proto3 \`optional\` field\n` +
    ` *   \`x\` is such a oneof, \`_x\`).\n` +
    ` * - \`NameInit\`: what the encoder takes: the same fields, 64-bit integers as numbers, at most one\n` +
    ` *   member of each oneof set.\n` +
    ` *\n` +
    ` * @module\n` +
    ` */\n`,
  ];
  for (const nested of ns.nestedArray) {
    if ("values" in nested && !("fieldsArray" in nested)) parts.push(enumeration(nested as protobuf.Enum));
  }
  for (const nested of ns.nestedArray) {
    if ("fieldsArray" in nested) {
      const type = nested as protobuf.Type;
      parts.push(message(type, false), message(type, true));
    }
  }
  const svc = ns.lookup(SERVICE) as protobuf.Service;
  parts.push(service(svc), client(svc));
  return parts.join("\n");
}

/** Where the generated module lives. */
export const GENERATED_TYPES_URL: URL = new URL("./code_mode_types.ts", import.meta.url);

if (import.meta.main) {
  Deno.writeTextFileSync(GENERATED_TYPES_URL, generateCodeModeTypes());
  const fmt = new Deno.Command(Deno.execPath(), { args: ["fmt", GENERATED_TYPES_URL.pathname] }).outputSync();
  if (!fmt.success) throw new Error(new TextDecoder().decode(fmt.stderr));
}

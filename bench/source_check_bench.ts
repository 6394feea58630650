/** Micro costs of the host's source check (SPEC §5.4–§5.5) on 1 MB sources. */
import { checkCellSource } from "../host/core/source_check.ts";

const line = "{ const v = [1, 2, 3].map((x) => x * 2).join(','); text(v); }\n";
const big = line.repeat(Math.ceil(1_000_000 / line.length));
let n = 0;

Deno.bench({ name: 'text("x")', group: "source check", baseline: true }, async () => {
  await checkCellSource(`text("x${n++}")`);
});
Deno.bench({ name: "1 MB valid JavaScript (unique each run)", group: "source check" }, async () => {
  await checkCellSource(`${big}// ${n++}`);
});
Deno.bench({ name: "1 MB TypeScript, strip-only (unique each run)", group: "source check" }, async () => {
  await checkCellSource(`const t: number = ${n++};\n${big}`);
});

import assert from "node:assert/strict";
import { AUDIT_ARCH, buildSeccompFilter, DENIED_SYSCALLS, RET } from "./seccomp.ts";

interface Insn {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

function decode(program: Uint8Array): Insn[] {
  const view = new DataView(program.buffer, program.byteOffset, program.byteLength);
  return Array.from({ length: program.length / 8 }, (_, i) => ({
    code: view.getUint16(i * 8, true),
    jt: view.getUint8(i * 8 + 2),
    jf: view.getUint8(i * 8 + 3),
    k: view.getUint32(i * 8 + 4, true),
  }));
}

/** A classic BPF interpreter for the opcodes the filter uses, over one `struct seccomp_data`. */
function evaluate(program: Uint8Array, data: { nr: number; arch: number; arg0?: number }): number {
  const insns = decode(program);
  const bytes = new DataView(new ArrayBuffer(64));
  bytes.setUint32(0, data.nr, true);
  bytes.setUint32(4, data.arch, true);
  bytes.setUint32(16, data.arg0 ?? 0, true);
  let a = 0;
  for (let pc = 0; pc < insns.length; pc++) {
    const { code, jt, jf, k } = insns[pc];
    if (code === 0x20) a = bytes.getUint32(k, true);
    else if (code === 0x15) pc += a === k ? jt : jf;
    else if (code === 0x35) pc += a >= k ? jt : jf;
    else if (code === 0x45) pc += (a & k) !== 0 ? jt : jf;
    else if (code === 0x06) return k;
    else throw new Error(`unexpected opcode ${code.toString(16)} at ${pc}`);
  }
  throw new Error("the program fell off its end");
}

const EPERM = RET.ERRNO | 1;
const ENOSYS = RET.ERRNO | 38;
const CLONE_THREAD_FLAGS = 0x003d0f00; // what glibc's pthread_create passes
const CLONE_NEWUSER = 0x10000000;
const SIGCHLD = 17;

Deno.test("buildSeccompFilter(x86_64): the bytes start with the arch check (AUDIT_ARCH_X86_64) and the x32 guard", () => {
  const insns = decode(buildSeccompFilter("x86_64"));
  assert.deepEqual(insns.slice(0, 4), [
    { code: 0x20, jt: 0, jf: 0, k: 4 }, // ld [arch]
    { code: 0x15, jt: 0, jf: insns.length - 3, k: 0xc000003e }, // jeq AUDIT_ARCH_X86_64, next, kill
    { code: 0x20, jt: 0, jf: 0, k: 0 }, // ld [nr]
    { code: 0x35, jt: insns.length - 5, jf: 0, k: 0x40000000 }, // jge X32_SYSCALL_BIT → kill
  ]);
  assert.deepEqual(insns.at(-1), { code: 0x06, jt: 0, jf: 0, k: RET.KILL_PROCESS });
  assert.deepEqual(insns.at(-2), { code: 0x06, jt: 0, jf: 0, k: EPERM });
  assert.deepEqual(insns.at(-3), { code: 0x06, jt: 0, jf: 0, k: ENOSYS });
  // ptrace (101) is the first denied number.
  assert.deepEqual(insns[4], { code: 0x15, jt: insns.length - 4 - 3, jf: 0, k: 101 });
});

for (const arch of ["x86_64", "aarch64"] as const) {
  const column = arch === "x86_64" ? 0 : 1;
  const program = buildSeccompFilter(arch);
  const native = AUDIT_ARCH[arch];
  const nr = (name: string) => DENIED_SYSCALLS[name][column];
  const syscall = { clone: [56, 220][column], clone3: 435, unshare: [272, 97][column] };

  Deno.test(`buildSeccompFilter(${arch}): every denied call gets EPERM, others are allowed`, () => {
    for (const [name, numbers] of Object.entries(DENIED_SYSCALLS)) {
      if (numbers[column] === 0) continue;
      assert.equal(evaluate(program, { nr: numbers[column], arch: native }), EPERM, name);
    }
    for (const name of ["ptrace", "mount", "keyctl", "bpf", "setns", "perf_event_open", "userfaultfd"]) {
      assert.ok(nr(name) > 0, name);
    }
    // read, write, mmap, futex, epoll_wait/epoll_pwait, getrandom (x86-64 / aarch64 numbers).
    const allowed = arch === "x86_64" ? [0, 1, 9, 202, 232, 318] : [63, 64, 222, 98, 22, 278];
    for (const n of allowed) assert.equal(evaluate(program, { nr: n, arch: native }), RET.ALLOW, String(n));
  });

  Deno.test(`buildSeccompFilter(${arch}): threads may clone, namespaces may not; clone3 is ENOSYS; another arch is killed`, () => {
    assert.equal(evaluate(program, { nr: syscall.clone, arch: native, arg0: CLONE_THREAD_FLAGS }), RET.ALLOW);
    assert.equal(evaluate(program, { nr: syscall.clone, arch: native, arg0: SIGCHLD }), RET.ALLOW, "fork");
    for (
      const flag of [0x00020000, 0x02000000, 0x04000000, 0x08000000, CLONE_NEWUSER, 0x20000000, 0x40000000]
    ) {
      assert.equal(evaluate(program, { nr: syscall.clone, arch: native, arg0: flag | SIGCHLD }), EPERM);
      assert.equal(evaluate(program, { nr: syscall.unshare, arch: native, arg0: flag }), EPERM);
    }
    assert.equal(
      evaluate(program, { nr: syscall.unshare, arch: native, arg0: 0x80 }),
      EPERM,
      "CLONE_NEWTIME",
    );
    assert.equal(
      evaluate(program, { nr: syscall.unshare, arch: native, arg0: 0x400 }),
      RET.ALLOW,
      "CLONE_FILES",
    );
    assert.equal(evaluate(program, { nr: syscall.clone3, arch: native }), ENOSYS);
    const other = arch === "x86_64" ? AUDIT_ARCH.aarch64 : AUDIT_ARCH.x86_64;
    assert.equal(evaluate(program, { nr: 0, arch: other }), RET.KILL_PROCESS);
    assert.equal(evaluate(program, { nr: 0, arch: 0x40000003 }), RET.KILL_PROCESS, "i386");
    if (arch === "x86_64") {
      assert.equal(evaluate(program, { nr: 0x40000000, arch: native }), RET.KILL_PROCESS, "x32");
    }
  });
}

Deno.test("buildSeccompFilter() refuses an architecture without a table", () => {
  assert.throws(() => buildSeccompFilter("riscv64"), RangeError);
});

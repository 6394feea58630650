/**
 * The seccomp filter of the OS sandbox (issue 27): a classic BPF program, generated here, that
 * bubblewrap installs on each session runtime (`--seccomp <fd>`) after it has set up the sandbox
 * and before it executes Deno. Pure: no I/O.
 *
 * - The architecture is checked first: a system call made through another ABI (i386's `int 0x80`,
 *   x32's numbers on x86-64) kills the process, so no second table can bypass the first.
 * - Denied with `EPERM`: what Deno 2.9.6 does not need and what a sandbox escape would use — the
 *   debugger (`ptrace`, `process_vm_*`, `kcmp`), mounts (`mount`, `umount2`, `pivot_root`,
 *   `chroot` and the new mount API), namespaces (`setns`; `unshare` and `clone` with any
 *   `CLONE_NEW*` flag), the kernel keyring, `bpf`, `perf_event_open`, `userfaultfd`, `io_uring`,
 *   modules, `kexec`, `reboot`, swap, `acct`, `quotactl`, `syslog`, file handles
 *   (`open_by_handle_at`), the clock and the host name.
 * - `clone3` fails with `ENOSYS`: its flags sit in memory a filter cannot read, and glibc falls
 *   back to `clone` on `ENOSYS`, whose flags the filter checks.
 * - Everything else is allowed (a deny list: the kernel's own permission checks and bubblewrap's
 *   namespaces stay the main wall; this takes away the attack surface behind them).
 *
 * @module
 */

/** Architectures a filter can be built for, as `Deno.build.arch` names them. */
export type SeccompArch = "x86_64" | "aarch64";

/** `AUDIT_ARCH_*` of each architecture (`linux/audit.h`). */
export const AUDIT_ARCH: Readonly<Record<SeccompArch, number>> = {
  x86_64: 0xc000003e,
  aarch64: 0xc00000b7,
};

/** The system calls denied with `EPERM`: name → [x86-64 number, aarch64 number] (0: none there). */
export const DENIED_SYSCALLS: Readonly<Record<string, readonly [number, number]>> = {
  ptrace: [101, 117],
  process_vm_readv: [310, 270],
  process_vm_writev: [311, 271],
  kcmp: [312, 272],
  mount: [165, 40],
  umount2: [166, 39],
  pivot_root: [155, 41],
  chroot: [161, 51],
  open_tree: [428, 428],
  move_mount: [429, 429],
  fsopen: [430, 430],
  fsconfig: [431, 431],
  fsmount: [432, 432],
  fspick: [433, 433],
  mount_setattr: [442, 442],
  setns: [308, 268],
  keyctl: [250, 219],
  add_key: [248, 217],
  request_key: [249, 218],
  bpf: [321, 280],
  perf_event_open: [298, 241],
  userfaultfd: [323, 282],
  io_uring_setup: [425, 425],
  io_uring_enter: [426, 426],
  io_uring_register: [427, 427],
  init_module: [175, 105],
  finit_module: [313, 273],
  delete_module: [176, 106],
  kexec_load: [246, 104],
  kexec_file_load: [320, 294],
  reboot: [169, 142],
  swapon: [167, 224],
  swapoff: [168, 225],
  acct: [163, 89],
  quotactl: [179, 60],
  quotactl_fd: [443, 443],
  syslog: [103, 116],
  open_by_handle_at: [304, 265],
  name_to_handle_at: [303, 264],
  lookup_dcookie: [212, 18],
  settimeofday: [164, 170],
  clock_settime: [227, 112],
  sethostname: [170, 161],
  setdomainname: [171, 162],
  vhangup: [153, 58],
  iopl: [172, 0],
  ioperm: [173, 0],
  uselib: [134, 0],
  _sysctl: [156, 0],
};

/** `unshare`, `clone` and `clone3`: [x86-64, aarch64]. */
const UNSHARE = [272, 97] as const;
const CLONE = [56, 220] as const;
const CLONE3 = [435, 435] as const;

/** Every `CLONE_NEW*` flag: NS, CGROUP, UTS, IPC, USER, PID, NET. */
const CLONE_NEW_MASK = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 |
  0x40000000;
/** `CLONE_NEWTIME` (0x80): a namespace flag for `unshare`, part of the exit signal for `clone`. */
const UNSHARE_NEW_MASK = CLONE_NEW_MASK | 0x00000080;

/** x32 system calls on x86-64 carry this bit. */
const X32_SYSCALL_BIT = 0x40000000;

const EPERM = 1;
const ENOSYS = 38;

/** `SECCOMP_RET_*` actions. */
export const RET = {
  KILL_PROCESS: 0x80000000,
  ERRNO: 0x00050000,
  ALLOW: 0x7fff0000,
} as const;

// Classic BPF opcodes (linux/filter.h).
const LD_W_ABS = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const JSET_K = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RET_K = 0x06; // BPF_RET | BPF_K

// Offsets in struct seccomp_data: nr, arch, instruction_pointer, args[6] (the low half of args[0]
// on these little-endian machines).
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
const OFFSET_ARG0_LOW = 16;

/** One instruction, its jump targets as labels until {@link assemble} resolves them. */
interface Instruction {
  code: number;
  k: number;
  jt?: string;
  jf?: string;
  label?: string;
}

function assemble(program: Instruction[]): Uint8Array {
  const at = new Map<string, number>();
  program.forEach((ins, i) => ins.label && at.set(ins.label, i));
  const bytes = new Uint8Array(program.length * 8);
  const view = new DataView(bytes.buffer);
  program.forEach((ins, i) => {
    const offset = (label?: string) => {
      if (label === undefined) return 0;
      const target = at.get(label);
      if (target === undefined || target <= i || target - i - 1 > 255) throw new Error(`bad jump ${label}`);
      return target - i - 1;
    };
    view.setUint16(i * 8, ins.code, true);
    view.setUint8(i * 8 + 2, offset(ins.jt));
    view.setUint8(i * 8 + 3, offset(ins.jf));
    view.setUint32(i * 8 + 4, ins.k >>> 0, true);
  });
  return bytes;
}

/**
 * Builds the filter for one architecture: an array of `struct sock_filter` (8 bytes each, little
 * endian), the format bubblewrap's `--seccomp` reads from its file descriptor.
 *
 * @param arch the architecture of the runtime (default: this machine's)
 * @returns the program's bytes
 * @throws {RangeError} for an architecture without a table
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const program = buildSeccompFilter("x86_64");
 * assert.equal(program.length % 8, 0);
 * assert.equal(new DataView(program.buffer).getUint32(12, true), 0xc000003e); // the arch check
 * ```
 */
export function buildSeccompFilter(arch: string = Deno.build.arch): Uint8Array {
  if (arch !== "x86_64" && arch !== "aarch64") throw new RangeError(`no seccomp filter for ${arch}`);
  const column = arch === "x86_64" ? 0 : 1;
  const denied = Object.values(DENIED_SYSCALLS).map((numbers) => numbers[column]).filter((n) => n > 0);
  const program: Instruction[] = [
    { code: LD_W_ABS, k: OFFSET_ARCH },
    { code: JEQ_K, k: AUDIT_ARCH[arch], jt: "nr", jf: "kill" },
    { code: LD_W_ABS, k: OFFSET_NR, label: "nr" },
    ...(arch === "x86_64" ? [{ code: JGE_K, k: X32_SYSCALL_BIT, jt: "kill" }] : []),
    ...denied.map((nr) => ({ code: JEQ_K, k: nr, jt: "deny" })),
    { code: JEQ_K, k: CLONE3[column], jt: "nosys" },
    { code: JEQ_K, k: CLONE[column], jt: "clone" },
    { code: JEQ_K, k: UNSHARE[column], jt: "unshare" },
    { code: RET_K, k: RET.ALLOW },
    { code: LD_W_ABS, k: OFFSET_ARG0_LOW, label: "clone" },
    { code: JSET_K, k: CLONE_NEW_MASK, jt: "deny" },
    { code: RET_K, k: RET.ALLOW },
    { code: LD_W_ABS, k: OFFSET_ARG0_LOW, label: "unshare" },
    { code: JSET_K, k: UNSHARE_NEW_MASK, jt: "deny" },
    { code: RET_K, k: RET.ALLOW },
    { code: RET_K, k: RET.ERRNO | ENOSYS, label: "nosys" },
    { code: RET_K, k: RET.ERRNO | EPERM, label: "deny" },
    { code: RET_K, k: RET.KILL_PROCESS, label: "kill" },
  ];
  return assemble(program);
}

import assert from "node:assert/strict";
import {
  BUSY_MIN_CPU_MS,
  BUSY_SAMPLES,
  CPU_WATCH_INTERVAL_MS,
  IdleCpuWatchdog,
  processesCpuMs,
  QUIET_SAMPLES,
  SLOW_EVERY,
} from "./cpu_watchdog.ts";

/** A watchdog over one fake process whose CPU time the test advances. */
function fake(percent = 10) {
  const state = { now: 0, cpuMs: 0 as number | undefined, reads: 0 };
  const dog = new IdleCpuWatchdog(percent, {
    readCpuMs: () => (state.reads++, state.cpuMs),
    walk: (pid) => [pid],
    now: () => state.now,
  });
  const reports: number[] = [];
  const watch = dog.watch(1, (p) => reports.push(p));
  /** One sample after the process used `usedPercent` of a core for an interval. */
  const tick = (usedPercent: number) => {
    state.now += CPU_WATCH_INTERVAL_MS;
    if (state.cpuMs !== undefined) state.cpuMs += (usedPercent * CPU_WATCH_INTERVAL_MS) / 100;
    dog.sample();
  };
  return { state, watch, reports, tick, [Symbol.dispose]: () => watch.stop() };
}

Deno.test("an idle runtime busy in every one of BUSY_SAMPLES samples is reported once, with its mean use", () => {
  using f = fake();
  f.watch.setIdle(true);
  f.tick(0); // the baseline
  for (let i = 0; i < BUSY_SAMPLES - 1; i++) f.tick(50);
  assert.deepEqual(f.reports, []);
  f.tick(150);
  const mean = ((BUSY_SAMPLES - 1) * 50 + 150) / BUSY_SAMPLES;
  assert.deepEqual(f.reports, [mean]);
  for (let i = 0; i < 10; i++) f.tick(100);
  assert.deepEqual(f.reports, [mean]);
});

Deno.test("a runtime with a live cell is not judged, and each change of idleness starts a new baseline", () => {
  using f = fake();
  for (let i = 0; i < 10; i++) f.tick(100);
  f.watch.setIdle(true);
  for (let i = 0; i < BUSY_SAMPLES - 1; i++) f.tick(100);
  f.watch.setIdle(false);
  f.watch.setIdle(true);
  for (let i = 0; i < BUSY_SAMPLES; i++) f.tick(100);
  assert.deepEqual(f.reports, [], "the first sample after a change is a baseline");
  f.tick(100);
  assert.deepEqual(f.reports, [100]);
});

Deno.test("a runtime idle with settleMs is judged only after it: the first sample then is the baseline", () => {
  using f = fake();
  f.watch.setIdle(true, 5 * CPU_WATCH_INTERVAL_MS);
  for (let i = 0; i < 4; i++) f.tick(100); // settling: a dying Worker's collections
  f.tick(100); // the baseline, as the settling ends
  for (let i = 0; i < BUSY_SAMPLES - 1; i++) f.tick(100);
  assert.deepEqual(f.reports, [], "not judged while settling");
  f.tick(100);
  assert.deepEqual(f.reports, [100], "a burn that goes on is reported after the settling");
  // Without settleMs the same burn is reported BUSY_SAMPLES samples after the baseline.
  using g = fake();
  g.watch.setIdle(true);
  for (let i = 0; i < BUSY_SAMPLES + 1; i++) g.tick(100);
  assert.deepEqual(g.reports, [100]);
});

Deno.test("a burst (a new spare cell worker, a collection) is not a burn: one quiet sample resets the count", () => {
  using f = fake();
  f.watch.setIdle(true);
  f.tick(0);
  for (let round = 0; round < 5; round++) {
    for (let i = 0; i < BUSY_SAMPLES - 1; i++) f.tick(200);
    f.tick(9);
  }
  assert.deepEqual(f.reports, []);
});

Deno.test("a quiet runtime is read once a second; a burn that starts late is still reported", () => {
  using f = fake();
  f.watch.setIdle(true);
  for (let i = 0; i <= QUIET_SAMPLES + SLOW_EVERY; i++) f.tick(0);
  const reads = f.state.reads;
  for (let i = 0; i < 4 * SLOW_EVERY; i++) f.tick(0);
  assert.equal(f.state.reads - reads, 4, "one read every SLOW_EVERY ticks");
  let ticks = 0;
  while (f.reports.length === 0 && ticks < 100) f.tick(100), ticks++;
  assert.deepEqual(f.reports, [100]);
  assert.ok(ticks <= SLOW_EVERY + BUSY_SAMPLES - 1, `reported after ${ticks} ticks`);
});

Deno.test("a thread left running is judged on its mean (it runs in bursts), and its watch ends with it", () => {
  const state = { now: 0, cpuMs: 0 as number | undefined };
  const dog = new IdleCpuWatchdog(10, { readThreadCpuMs: () => state.cpuMs, now: () => state.now });
  const reports: number[] = [];
  const watch = dog.watchThread(42, (p) => reports.push(p));
  const tick = (ms: number) => {
    state.now += CPU_WATCH_INTERVAL_MS;
    if (state.cpuMs !== undefined) state.cpuMs += ms;
    dog.sample();
  };
  tick(0);
  for (let i = 0; i < 2 * BUSY_SAMPLES; i++) tick(0);
  assert.deepEqual(reports, [], "a thread asleep (Atomics.wait) is not burning");
  const bursts = [10, 0, 20, 0, 10].slice(0, BUSY_SAMPLES);
  for (const ms of bursts) tick(ms);
  const mean = Math.round((bursts.reduce((a, b) => a + b) * 100) / (BUSY_SAMPLES * CPU_WATCH_INTERVAL_MS));
  assert.deepEqual(reports, [mean], "bursts of 0–20 ms, under the runtime's 10 % bound but counted");
  watch.stop();
  let goneReports = 0;
  const gone = dog.watchThread(43, () => goneReports++);
  state.cpuMs = undefined;
  tick(0);
  for (let i = 0; i < 2 * BUSY_SAMPLES; i++) tick(0);
  gone.stop(); // idempotent: the watch stopped itself when the thread could not be read
  assert.equal(goneReports, 0);
});

Deno.test("a process tree that cannot be read (gone, no /proc) is never reported", () => {
  using f = fake();
  f.watch.setIdle(true);
  f.state.cpuMs = undefined;
  for (let i = 0; i < 20; i++) f.tick(0);
  assert.deepEqual(f.reports, []);
});

Deno.test("processesCpuMs reads this process's own CPU time, and nothing for a process that is gone", () => {
  const start = processesCpuMs([Deno.pid])!;
  const until = performance.now() + 60;
  while (performance.now() < until) { /* burn */ }
  assert.ok(processesCpuMs([Deno.pid])! >= start);
  assert.equal(processesCpuMs([2 ** 22 + 1]), undefined);
});

Deno.test("a runtime's own start stretched over the samples by a loaded machine is no burn: a busy run needs BUSY_MIN_CPU_MS", () => {
  using f = fake();
  f.watch.setIdle(true);
  f.tick(0);
  // ~290 ms of CPU (a runtime's start to its booted spare) at 15 % of a core: each sample busy.
  const perSample = (15 * CPU_WATCH_INTERVAL_MS) / 100;
  const samples = Math.floor(290 / perSample);
  assert.ok(samples >= BUSY_SAMPLES);
  for (let i = 0; i < samples; i++) f.tick(15);
  assert.deepEqual(f.reports, []);
  f.tick(0);
  // A thread that keeps spinning at 15 % is reported once it has used BUSY_MIN_CPU_MS.
  let ticks = 0;
  while (f.reports.length === 0 && ticks < 50) f.tick(15), ticks++;
  assert.equal(ticks, Math.ceil(BUSY_MIN_CPU_MS / perSample));
  assert.deepEqual(f.reports, [15]);
});

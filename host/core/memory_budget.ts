/**
 * The host-wide memory budget (`hostBufferedBytes`, issue 27): what the host holds on behalf of
 * cells — output buffered until a harness reads it, stored values — counts against one number of
 * bytes, shared by the sessions.
 *
 * Contract:
 * - The host never holds more than `total` charged bytes: a charge that would pass it is refused
 *   whole (nothing is taken).
 * - A session may hold up to `floor` bytes as long as the host has room; above that, at most its
 *   fair share, `max(floor, total / holders)` (holders: sessions holding bytes, itself included),
 *   and only while `floor` bytes stay free for the others. So one tenant cannot take it all, and a
 *   session that holds little is served while others hold a lot.
 * - Closing an account releases everything it holds; a closed account refuses nothing and charges
 *   nothing (its session is gone).
 * - `total` 0 turns the budget off: every charge is taken.
 * - An account's first refusal calls its `onRefused` (the session logs it once).
 *
 * @module
 */
import type { ByteBudget } from "../output/output_items.ts";

/** The floor of a session's share: an eighth of the budget, at most 64 MiB. */
export function budgetFloor(total: number): number {
  return Math.min(Math.floor(total / 8), 67_108_864);
}

/**
 * The host's budget; {@link HostMemoryBudget.account} opens one session's account.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { HostMemoryBudget } from "./memory_budget.ts";
 *
 * const budget = new HostMemoryBudget(800);
 * const a = budget.account();
 * const b = budget.account();
 * assert.ok(a.tryCharge(600)); // a alone: all but the floor (100)
 * assert.equal(a.tryCharge(200), false); // would leave no floor for b
 * assert.ok(b.tryCharge(100)); // b within its floor
 * assert.equal(b.tryCharge(1), false); // the host is full
 * a.close();
 * assert.equal(budget.used, 100);
 * ```
 */
export class HostMemoryBudget {
  /** The budget in bytes (0: off). */
  readonly total: number;
  /** The bytes every session may hold while the host has room. */
  readonly floor: number;
  #used = 0;
  #holders = new Set<SessionBudget>();

  /** @param total `hostBufferedBytes`; 0 turns the budget off */
  constructor(total: number) {
    this.total = total;
    this.floor = budgetFloor(total);
  }

  /** Bytes charged now, over every account. */
  get used(): number {
    return this.#used;
  }

  /**
   * Opens one session's account.
   *
   * @param onRefused called at the account's first refusal; default none
   * @returns the account; close it when the session ends
   */
  account(onRefused?: () => void): SessionBudget {
    return new SessionBudget(this, onRefused, {
      tryCharge: (account, bytes) => this.#tryCharge(account, bytes),
      release: (account, bytes) => this.#release(account, bytes),
      force: (account, bytes) => {
        this.#used += bytes;
        this.#holders.add(account);
      },
    });
  }

  #tryCharge(account: SessionBudget, bytes: number): boolean {
    if (this.total > 0) {
      const after = account.held + bytes;
      if (this.#used + bytes > this.total) return false;
      if (after > this.floor) {
        const holders = this.#holders.size + (this.#holders.has(account) ? 0 : 1);
        if (after > Math.max(this.floor, this.total / holders)) return false;
        if (this.#used + bytes > this.total - this.floor) return false;
      }
    }
    this.#used += bytes;
    if (bytes > 0) this.#holders.add(account);
    return true;
  }

  #release(account: SessionBudget, bytes: number): void {
    this.#used -= bytes;
    if (account.held === 0) this.#holders.delete(account);
  }
}

interface Ledger {
  tryCharge(account: SessionBudget, bytes: number): boolean;
  release(account: SessionBudget, bytes: number): void;
  force(account: SessionBudget, bytes: number): void;
}

/** One session's account in the {@link HostMemoryBudget}. */
export class SessionBudget implements ByteBudget {
  readonly #budget: HostMemoryBudget;
  readonly #ledger: Ledger;
  #onRefused: (() => void) | undefined;
  #held = 0;
  #closed = false;

  /** @internal Use {@link HostMemoryBudget.account}. */
  constructor(budget: HostMemoryBudget, onRefused: (() => void) | undefined, ledger: Ledger) {
    this.#budget = budget;
    this.#onRefused = onRefused;
    this.#ledger = ledger;
  }

  /** Bytes this account holds. */
  get held(): number {
    return this.#held;
  }

  /** The host's budget in bytes (0: off). */
  get total(): number {
    return this.#budget.total;
  }

  tryCharge(bytes: number): boolean {
    if (this.#closed || bytes <= 0) return true;
    if (!this.#ledger.tryCharge(this, bytes)) return this.#refused();
    this.#held += bytes;
    return true;
  }

  #refused(): false {
    const onRefused = this.#onRefused;
    this.#onRefused = undefined;
    onRefused?.();
    return false;
  }

  charge(bytes: number): void {
    if (this.#closed || bytes <= 0) return;
    // Taken even over the budget: the caller already holds the bytes (it checked with `fits`).
    this.#ledger.force(this, bytes);
    this.#held += bytes;
  }

  fits(bytes: number): boolean {
    if (this.#closed || bytes <= 0) return true;
    if (!this.#ledger.tryCharge(this, bytes)) return this.#refused();
    this.#ledger.release(this, bytes);
    return true;
  }

  release(bytes: number): void {
    if (this.#closed || bytes <= 0) return;
    const n = Math.min(bytes, this.#held);
    this.#held -= n;
    this.#ledger.release(this, n);
  }

  /** Releases everything held; later charges are taken without counting. */
  close(): void {
    if (this.#closed) return;
    this.release(this.#held);
    this.#closed = true;
  }
}

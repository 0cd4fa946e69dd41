import type { Clock } from '../../clock.ts';

/**
 * Failed attempts per key in a sliding window (CONTRACT §7: more than 10 failed verifications per
 * minute from one address for one campaign → 429). Only failures count, so a tenant verifying many
 * real codes is never slowed down; a success does not reset the count, so a known good code cannot
 * launder a guessing run. Kept in this process's memory, like the other rate limits.
 */
export class FailureLimiter {
  private readonly failures = new Map<string, number[]>();

  constructor(
    private readonly clock: Clock,
    /** Failures allowed inside the window; 0 = no limit. */
    private readonly limit: number,
    private readonly windowMs = 60_000,
    /** Keys kept before a sweep of the expired ones. */
    private readonly sweepAbove = 10_000,
  ) {}

  /** Seconds to wait when `key` has used up its failures, else null. */
  retryAfterS(key: string): number | null {
    if (this.limit === 0) return null;
    const recent = this.recent(key);
    if (recent.length < this.limit) return null;
    const oldest = recent[recent.length - this.limit];
    return Math.max(1, Math.ceil((oldest + this.windowMs - this.clock.now()) / 1000));
  }

  fail(key: string): void {
    if (this.limit === 0) return;
    const recent = this.recent(key);
    recent.push(this.clock.now());
    // Only the last `limit` failures ever matter.
    if (recent.length > this.limit) recent.splice(0, recent.length - this.limit);
    this.failures.set(key, recent);
    if (this.failures.size > this.sweepAbove) this.sweep();
  }

  private recent(key: string): number[] {
    const since = this.clock.now() - this.windowMs;
    const list = (this.failures.get(key) ?? []).filter((t) => t > since);
    if (list.length === 0) this.failures.delete(key);
    return list;
  }

  private sweep() {
    const since = this.clock.now() - this.windowMs;
    for (const [key, list] of this.failures) {
      if (list.length === 0 || list[list.length - 1] <= since) this.failures.delete(key);
    }
  }
}

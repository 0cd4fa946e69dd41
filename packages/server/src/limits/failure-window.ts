import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.ts';

/** A reservation: `token` is given back through `release` when the attempt did not fail. */
export type Reservation = { ok: true; token: string } | { ok: false; retryAfterS: number };

/**
 * Failed attempts per key in a sliding window (the verification limiter of CONTRACT §7: more than
 * 10 failures a minute from one address for one campaign → 429). An attempt reserves its failure
 * before it runs, so a concurrent burst cannot pass the limit; one that succeeds gives its
 * reservation back. A success never resets the count, so a known good code cannot launder a
 * guessing run. With several processes the window lives in Redis (redis-failure-window.ts).
 */
export interface FailureWindow {
  reserve(key: string): Promise<Reservation>;
  release(key: string, token: string): Promise<void>;
}

export interface WindowOptions {
  /** Failures allowed inside the window; 0 = no limit. */
  limit: number;
  windowMs: number;
}

/** The window of one process. */
export class MemoryFailureWindow implements FailureWindow {
  private readonly entries = new Map<string, { token: string; at: number }[]>();
  private reservations = 0;

  constructor(
    private readonly clock: Clock,
    private readonly options: WindowOptions,
    /** Keys kept before a sweep of the expired ones. */
    private readonly sweepAbove = 10_000,
  ) {}

  async reserve(key: string): Promise<Reservation> {
    return this.reserveNow(key);
  }

  /** The same as `reserve`, synchronously (the Redis window falls back on it when Redis is away). */
  reserveNow(key: string): Reservation {
    if (this.options.limit === 0) return { ok: true, token: '' };
    const now = this.clock.now();
    const recent = this.recent(key, now);
    if (recent.length >= this.options.limit) {
      const oldest = recent[recent.length - this.options.limit].at;
      return { ok: false, retryAfterS: retryAfterS(oldest, this.options.windowMs, now) };
    }
    const token = randomUUID();
    recent.push({ token, at: now });
    this.entries.set(key, recent);
    if (++this.reservations % 1000 === 0 && this.entries.size > this.sweepAbove) this.sweep(now);
    return { ok: true, token };
  }

  async release(key: string, token: string): Promise<void> {
    const list = this.entries.get(key);
    if (!list) return;
    const rest = list.filter((e) => e.token !== token);
    if (rest.length === 0) this.entries.delete(key);
    else this.entries.set(key, rest);
  }

  private recent(key: string, now: number) {
    const since = now - this.options.windowMs;
    return (this.entries.get(key) ?? []).filter((e) => e.at > since);
  }

  private sweep(now: number) {
    const since = now - this.options.windowMs;
    for (const [key, list] of this.entries) {
      if (list.length === 0 || list[list.length - 1].at <= since) this.entries.delete(key);
    }
  }
}

export function retryAfterS(oldest: number, windowMs: number, now: number): number {
  return Math.max(1, Math.ceil((oldest + windowMs - now) / 1000));
}

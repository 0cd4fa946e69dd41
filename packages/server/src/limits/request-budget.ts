import type { FastifyRateLimitStore } from '@fastify/rate-limit';
import type { RedisLink } from '../bus/index.ts';

/** What one charge to a budget decided: within it, or refused with the wait until the window ends. */
export type Spend = { ok: true } | { ok: false; retryAfterS: number };

/** A window's count after a charge, and the milliseconds left in the window. */
export interface WindowCount {
  current: number;
  ttl: number;
}

type Done = (error: Error | null, result?: WindowCount) => void;

/**
 * A fixed-window request counter in the shape of @fastify/rate-limit's store (`incr`), so the HTTP
 * limiter and the device's WebSocket frames count in the very same counters (CONTRACT §8).
 * `child` (asked for by routes with a limit of their own; none has one) shares the counters.
 */
export interface RateStore extends FastifyRateLimitStore {
  incr(key: string, done: Done, windowMs: number, max: number): void;
}

/** The counters of one process. Keys whose window has passed are swept as the map grows. */
export class MemoryRateStore implements RateStore {
  private readonly windows = new Map<string, { count: number; endsAt: number }>();
  private charges = 0;

  constructor(
    /** Keys kept before a sweep of the finished windows. */
    private readonly sweepAbove = 10_000,
  ) {}

  incr(key: string, done: Done, windowMs: number): void {
    done(null, this.incrNow(key, windowMs));
  }

  /** The same as `incr`, synchronously (the Redis store falls back on it while Redis is away). */
  incrNow(key: string, windowMs: number): WindowCount {
    // Rate windows are wall-clock time, whatever clock the server's logic runs on.
    const now = Date.now();
    let window = this.windows.get(key);
    if (!window || window.endsAt <= now) {
      window = { count: 0, endsAt: now + windowMs };
      this.windows.set(key, window);
    }
    window.count++;
    if (++this.charges % 1000 === 0 && this.windows.size > this.sweepAbove) this.sweep(now);
    return { current: window.count, ttl: window.endsAt - now };
  }

  child(): RateStore {
    return this;
  }

  private sweep(now: number) {
    for (const [key, window] of this.windows) if (window.endsAt <= now) this.windows.delete(key);
  }
}

/** KEYS[1] the counter; ARGV[1] the window in ms. Returns {count, ms left}. */
const INCR = `
local current = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if current == 1 or ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {current, ttl}`;

type BudgetRedis = RedisLink['command'] & {
  requestBudgetIncr(key: string, windowMs: number): Promise<[number, number]>;
};

/**
 * The counters of a deployment, shared by its processes through Redis (one key per budget and
 * window, counted and given its expiry atomically by a script). While Redis is unreachable each
 * process counts on its own: a flood is still held to the limit per process rather than let through.
 */
export class RedisRateStore implements RateStore {
  private readonly redis: BudgetRedis;
  private readonly local = new MemoryRateStore();

  constructor(
    private readonly link: RedisLink,
    private readonly onError: (err: unknown, what: string) => void,
  ) {
    const redis = link.command;
    if (!('requestBudgetIncr' in redis))
      redis.defineCommand('requestBudgetIncr', { lua: INCR, numberOfKeys: 1 });
    this.redis = redis as BudgetRedis;
  }

  incr(key: string, done: Done, windowMs: number): void {
    this.redis.requestBudgetIncr(this.link.key(`rl:${key}`), windowMs).then(
      ([current, ttl]) => done(null, { current, ttl }),
      (err: unknown) => {
        this.onError(err, 'rate limit');
        done(null, this.local.incrNow(key, windowMs));
      },
    );
  }

  child(): RateStore {
    return this;
  }
}

/**
 * Requests per window, by key, in the store the HTTP limiter uses: what the device's WebSocket
 * frames are charged to (see the realtime README for which frames count).
 */
export class RequestBudget {
  constructor(
    readonly store: RateStore,
    private readonly windowMs: number,
  ) {}

  /** Charges one request to `key`; `max` requests fit in a window (0: no limit, nothing counted). */
  spend(key: string, max: number): Promise<Spend> {
    if (max === 0) return Promise.resolve({ ok: true });
    return new Promise((resolve) => {
      this.store.incr(
        key,
        (err, result) => {
          // A store that fails lets the request through, as the HTTP limiter does.
          if (err || !result || result.current <= max) resolve({ ok: true });
          else resolve({ ok: false, retryAfterS: Math.max(1, Math.ceil(result.ttl / 1000)) });
        },
        this.windowMs,
        max,
      );
    });
  }
}

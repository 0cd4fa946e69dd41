import { randomUUID } from 'node:crypto';
import type { RedisLink } from '../bus/index.ts';
import type { Clock } from '../clock.ts';
import {
  type FailureWindow,
  MemoryFailureWindow,
  type Reservation,
  retryAfterS,
  type WindowOptions,
} from './failure-window.ts';

/**
 * KEYS[1] a sorted set of reservations scored by time; ARGV: now, window ms, limit, token.
 * Returns {1} when reserved, {0, oldest} when the limit is reached.
 */
const RESERVE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
local count = redis.call('ZCARD', KEYS[1])
local limit = tonumber(ARGV[3])
if count >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], count - limit, count - limit, 'WITHSCORES')
  return {0, tonumber(oldest[2])}
end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1}`;

type WindowRedis = RedisLink['command'] & {
  failureWindowReserve(
    key: string,
    now: number,
    windowMs: number,
    limit: number,
    token: string,
  ): Promise<number[]>;
};

/**
 * The failure window of a deployment, shared by its processes through Redis (a sorted set per key,
 * checked and reserved atomically by a script). While Redis is unreachable each process counts on
 * its own (a guesser gains at most the number of processes × the limit), rather than letting every
 * attempt through.
 */
export class RedisFailureWindow implements FailureWindow {
  private readonly redis: WindowRedis;
  private readonly local: MemoryFailureWindow;

  constructor(
    private readonly link: RedisLink,
    private readonly clock: Clock,
    private readonly options: WindowOptions & { name: string; onError: (err: unknown, what: string) => void },
  ) {
    const redis = link.command;
    if (!('failureWindowReserve' in redis))
      redis.defineCommand('failureWindowReserve', { lua: RESERVE, numberOfKeys: 1 });
    this.redis = redis as WindowRedis;
    this.local = new MemoryFailureWindow(clock, options);
  }

  async reserve(key: string): Promise<Reservation> {
    if (this.options.limit === 0) return { ok: true, token: '' };
    const now = this.clock.now();
    const token = `${now}:${randomUUID()}`;
    try {
      const [reserved, oldest] = await this.redis.failureWindowReserve(
        this.key(key),
        now,
        this.options.windowMs,
        this.options.limit,
        token,
      );
      return reserved === 1
        ? { ok: true, token }
        : { ok: false, retryAfterS: retryAfterS(oldest, this.options.windowMs, now) };
    } catch (err) {
      this.options.onError(err, 'failure window');
      const local = this.local.reserveNow(key);
      return local.ok ? { ok: true, token: `local:${local.token}` } : local;
    }
  }

  async release(key: string, token: string): Promise<void> {
    if (token === '') return;
    if (token.startsWith('local:')) return this.local.release(key, token.slice('local:'.length));
    try {
      await this.redis.zrem(this.key(key), token);
    } catch (err) {
      this.options.onError(err, 'failure window');
    }
  }

  private key(key: string) {
    return this.link.key(`fw:${this.options.name}:${key}`);
  }
}

import { type RedisLink, redisErrorLogger } from '../bus/index.ts';
import type { Clock } from '../clock.ts';
import { type FailureWindow, MemoryFailureWindow, type WindowOptions } from './failure-window.ts';
import { RedisFailureWindow } from './redis-failure-window.ts';
import { MemoryRateStore, RedisRateStore, RequestBudget } from './request-budget.ts';

export { addressKey } from './address.ts';
export type { FailureWindow, Reservation } from './failure-window.ts';
export type { RateStore, Spend } from './request-budget.ts';
export { MemoryFailureWindow, MemoryRateStore, RedisFailureWindow, RedisRateStore, RequestBudget };

/** A failure window for this process, or shared by the deployment's processes when Redis joins them. */
export function failureWindow(
  redis: RedisLink | null,
  clock: Clock,
  options: WindowOptions & { name: string; log: { warn(obj: object, msg: string): void } },
): FailureWindow {
  if (!redis) return new MemoryFailureWindow(clock, options);
  return new RedisFailureWindow(redis, clock, { ...options, onError: redisErrorLogger(options.log) });
}

/**
 * The request budgets of this process (HTTP requests and device frames count in them alike), or of
 * the deployment's processes together when Redis joins them.
 */
export function requestBudget(
  redis: RedisLink | null,
  options: { windowMs: number; log: { warn(obj: object, msg: string): void } },
): RequestBudget {
  const store = redis ? new RedisRateStore(redis, redisErrorLogger(options.log)) : new MemoryRateStore();
  return new RequestBudget(store, options.windowMs);
}

import { type RedisLink, redisErrorLogger } from '../bus/index.ts';
import type { Clock } from '../clock.ts';
import { type FailureWindow, MemoryFailureWindow, type WindowOptions } from './failure-window.ts';
import { RedisFailureWindow } from './redis-failure-window.ts';

export type { FailureWindow, Reservation } from './failure-window.ts';
export { MemoryFailureWindow, RedisFailureWindow };

/** A failure window for this process, or shared by the deployment's processes when Redis joins them. */
export function failureWindow(
  redis: RedisLink | null,
  clock: Clock,
  options: WindowOptions & { name: string; log: { warn(obj: object, msg: string): void } },
): FailureWindow {
  if (!redis) return new MemoryFailureWindow(clock, options);
  return new RedisFailureWindow(redis, clock, { ...options, onError: redisErrorLogger(options.log) });
}

/** setTimeout fires at once for delays past 2^31 − 1 ms: longer waits are capped to this. */
export const MAX_TIMER_MS = 2_147_483_647;

export interface RetryOptions {
  /** Cap of the first retry's delay; each further attempt doubles it. */
  initialDelayMs: number;
  /** No computed delay exceeds this (a server's `Retry-After` may). */
  maxDelayMs: number;
}

/**
 * Exponential backoff with full jitter: a uniformly random delay in
 * [0, min(maxDelayMs, initialDelayMs · 2^attempt)). `attempt` counts from 0.
 * `random` returns a number in [0, 1), like `Math.random`.
 */
export function backoffDelay(attempt: number, options: RetryOptions, random: () => number): number {
  const ceiling = Math.min(options.maxDelayMs, options.initialDelayMs * 2 ** attempt);
  return Math.floor(random() * ceiling);
}

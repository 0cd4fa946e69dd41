/** What to do with a delivery after a failed attempt. */
export type AfterFailure = { retry: true; at: number } | { retry: false };

/**
 * The retry schedule (CONTRACT §6): after the n-th failed attempt of a delivery (n from 1), wait
 * `scheduleS[n - 1]` seconds; when the schedule is used up, the delivery has failed. With the
 * default schedule a delivery gets 8 attempts over about 38 hours.
 */
export function afterFailure(scheduleS: readonly number[], attempts: number, now: number): AfterFailure {
  if (attempts < 1 || attempts > scheduleS.length) return { retry: false };
  return { retry: true, at: now + scheduleS[attempts - 1] * 1000 };
}

/** Total attempts a delivery gets before it is marked failed. */
export const maxAttempts = (scheduleS: readonly number[]) => scheduleS.length + 1;

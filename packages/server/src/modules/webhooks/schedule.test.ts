import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.ts';
import { afterFailure, maxAttempts } from './schedule.ts';

const DEFAULT = loadConfig({}).webhooks.retryScheduleS;

describe('retry schedule', () => {
  it('is the contract default: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h', () => {
    expect(DEFAULT).toEqual([5, 300, 1800, 7200, 18000, 36000, 36000]);
    expect(maxAttempts(DEFAULT)).toBe(8);
  });

  it.each([
    [1, 5_000],
    [2, 300_000],
    [3, 1_800_000],
    [4, 7_200_000],
    [5, 18_000_000],
    [6, 36_000_000],
    [7, 36_000_000],
  ])('after failed attempt %i the next is due %i ms later', (attempts, delay) => {
    expect(afterFailure(DEFAULT, attempts, 1_000)).toEqual({ retry: true, at: 1_000 + delay });
  });

  it('gives up after the last retry', () => {
    expect(afterFailure(DEFAULT, 8, 1_000)).toEqual({ retry: false });
    expect(afterFailure(DEFAULT, 0, 1_000)).toEqual({ retry: false });
  });

  it('takes LIVELINE_WEBHOOK_RETRY_SCHEDULE in seconds', () => {
    const schedule = loadConfig({ LIVELINE_WEBHOOK_RETRY_SCHEDULE: '0, 1,2' }).webhooks.retryScheduleS;
    expect(schedule).toEqual([0, 1, 2]);
    expect(afterFailure(schedule, 1, 10)).toEqual({ retry: true, at: 10 });
    expect(afterFailure(schedule, 3, 10)).toEqual({ retry: true, at: 2_010 });
    expect(afterFailure(schedule, 4, 10)).toEqual({ retry: false });
  });

  it.each(['', ' '])('an empty override (%j) keeps the default', (raw) => {
    expect(loadConfig({ LIVELINE_WEBHOOK_RETRY_SCHEDULE: raw }).webhooks.retryScheduleS).toEqual(DEFAULT);
  });

  it.each(['1,,2', 'a', '-1', '1.5', '1;2'])('refuses a malformed override %j', (raw) => {
    expect(() => loadConfig({ LIVELINE_WEBHOOK_RETRY_SCHEDULE: raw })).toThrow(/RETRY_SCHEDULE/);
  });

  it('refuses a lease no longer than the attempt timeout', () => {
    expect(() => loadConfig({ LIVELINE_WEBHOOK_LEASE_S: '10' })).toThrow(/LEASE_S/);
    expect(loadConfig({ LIVELINE_WEBHOOK_LEASE_S: '11' }).webhooks.leaseS).toBe(11);
  });

  it('reads LIVELINE_WEBHOOK_ALLOW_PRIVATE as a boolean', () => {
    expect(loadConfig({}).webhooks.allowPrivate).toBe(false);
    expect(loadConfig({ LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true' }).webhooks.allowPrivate).toBe(true);
    expect(() => loadConfig({ LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'maybe' })).toThrow(/ALLOW_PRIVATE/);
  });
});

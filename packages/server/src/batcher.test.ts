import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { Batcher } from './batcher.ts';

/** A writer that takes `ms` per batch (real time: what `utilization` measures is real time). */
const slowWriter = (ms: number) =>
  new Batcher<number, number>(async (items) => {
    await sleep(ms);
    return items;
  });

describe('Batcher.utilization', () => {
  it('is near 1 while batches follow each other back to back', async () => {
    const batcher = slowWriter(5);
    // Always something queued behind the batch in flight, for 300 ms.
    await Promise.all(Array.from({ length: 100 }, (_, i) => sleep(i * 3).then(() => batcher.submit(i))));
    expect(batcher.utilization()).toBeGreaterThan(0.9);
  });

  it('is low under a load the writer keeps up with, and 0 once it has been idle a while', async () => {
    const batcher = slowWriter(2);
    for (let i = 0; i < 30; i++) {
      await batcher.submit(i);
      await sleep(18);
    }
    expect(batcher.utilization()).toBeLessThan(0.5);
    const busy = slowWriter(5);
    await Promise.all(Array.from({ length: 100 }, (_, i) => sleep(i * 3).then(() => busy.submit(i))));
    expect(busy.utilization()).toBeGreaterThan(0.9);
    await sleep(150);
    expect(busy.utilization()).toBe(0);
  });
});

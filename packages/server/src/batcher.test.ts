import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { Batcher, type BatcherOptions } from './batcher.ts';

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

  it('with several slots, counts only the time every slot is taken', async () => {
    const writer = (ms: number) =>
      new Batcher<number, number>(
        async (items) => {
          await sleep(ms);
          return items;
        },
        { concurrency: 3, maxBatch: 5 },
      );
    // One batch after another, each 20 ms, one slot of three busy nearly all the time: no queue.
    const steady = writer(20);
    for (let i = 0; i < 10; i++) await steady.submit(i);
    expect(steady.utilization()).toBeLessThan(0.5);
    // Every slot taken back to back, callers queued behind them: 300 items at once, 5 a batch, so
    // the queue never runs dry before the end (however late the machine runs the timers).
    const flooded = writer(15);
    await Promise.all(Array.from({ length: 300 }, (_, i) => flooded.submit(i)));
    expect(flooded.utilization()).toBeGreaterThan(0.9);
  });
});

/** A batcher recording each batch it writes (after a tick, like a store's round trip). */
function recording(options: BatcherOptions<number>) {
  const batches: number[][] = [];
  const batcher = new Batcher<number, number>(async (items) => {
    batches.push(items);
    await sleep(1);
    return items;
  }, options);
  return { batches, batcher };
}

describe('Batcher gather', () => {
  it("an idle writer's first batch takes every item of the turn, not only the first", async () => {
    const gathered = recording({ gather: true });
    // Items submitted in one turn, the way requests read from the sockets at once are handled.
    const results = await Promise.all([1, 2, 3].map((i) => gathered.batcher.submit(i)));
    expect(results).toEqual([1, 2, 3]);
    expect(gathered.batches).toEqual([[1, 2, 3]]);

    // Without it the first item goes at once, alone, and the rest wait for the next batch.
    const eager = recording({ gather: false });
    await Promise.all([1, 2, 3].map((i) => eager.batcher.submit(i)));
    expect(eager.batches).toEqual([[1], [2, 3]]);
  });

  it('items submitted while a batch is in flight go in the next one, as before', async () => {
    const { batches, batcher } = recording({ gather: true });
    const first = batcher.submit(1);
    await new Promise((resolve) => setImmediate(resolve));
    const later = [2, 3].map((i) => batcher.submit(i));
    await Promise.all([first, ...later]);
    expect(batches).toEqual([[1], [2, 3]]);
  });
});

describe('Batcher linger', () => {
  /** Negative items linger (acks, in the command log). */
  const lingering = (ms: number) => recording({ gather: true, linger: { ms, lingers: (i) => i < 0 } });

  it('a lingering item waits for an urgent one and goes in its batch', async () => {
    const { batches, batcher } = lingering(60_000);
    const ack = batcher.submit(-1);
    await sleep(20);
    expect(batches).toEqual([]);
    expect(await Promise.all([ack, batcher.submit(1)])).toEqual([-1, 1]);
    expect(batches).toEqual([[-1, 1]]);
  });

  it('lingering items alone are written once the oldest has waited `ms`', async () => {
    const { batches, batcher } = lingering(40);
    const started = performance.now();
    const first = batcher.submit(-1);
    await sleep(10);
    const second = batcher.submit(-2);
    await sleep(5);
    expect(batches).toEqual([]);
    await Promise.all([first, second]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(39);
    expect(batches).toEqual([[-1, -2]]);
  });

  it('an urgent item never waits; lingering items submitted while a batch is in flight wait after it', async () => {
    const { batches, batcher } = lingering(60_000);
    const first = batcher.submit(1);
    await new Promise((resolve) => setImmediate(resolve));
    const ack = batcher.submit(-1);
    await first;
    await sleep(20);
    // The writer is free, but the ack alone does not take it.
    expect(batches).toEqual([[1]]);
    await Promise.all([ack, batcher.submit(2)]);
    expect(batches).toEqual([[1], [-1, 2]]);
  });
});

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisAvailable, startRedis, type TestRedis } from '../../test/helpers/redis.ts';
import { RedisLink } from '../bus/redis-link.ts';
import { MemoryRateStore, RedisRateStore, RequestBudget } from './request-budget.ts';

const MAX = 5;
const WINDOW_MS = 400;

/** Every request budget behaves alike; `nodes` are the budgets of one deployment's processes. */
function contract(name: string, deploy: () => Promise<{ nodes: RequestBudget[]; close(): Promise<void> }>) {
  describe(`request budget: ${name}`, () => {
    it('lets `max` requests through a window, then refuses with the wait until it ends', async () => {
      const { nodes, close } = await deploy();
      try {
        const key = randomUUID();
        for (let i = 0; i < MAX; i++)
          expect(await nodes[i % nodes.length].spend(key, MAX)).toEqual({ ok: true });
        expect(await nodes[0].spend(key, MAX)).toEqual({ ok: false, retryAfterS: 1 });
        // Another key has its own budget.
        expect((await nodes[0].spend(randomUUID(), MAX)).ok).toBe(true);
        await new Promise((r) => setTimeout(r, WINDOW_MS + 50));
        expect((await nodes[nodes.length - 1].spend(key, MAX)).ok).toBe(true);
      } finally {
        await close();
      }
    });

    it('counts a concurrent burst exactly, on every node together', async () => {
      const { nodes, close } = await deploy();
      try {
        const key = randomUUID();
        const burst = await Promise.all(
          Array.from({ length: MAX * 4 }, (_, i) => nodes[i % nodes.length].spend(key, MAX)),
        );
        expect(burst.filter((r) => r.ok)).toHaveLength(MAX);
      } finally {
        await close();
      }
    });

    it('counts nothing with a limit of 0', async () => {
      const { nodes, close } = await deploy();
      try {
        const key = randomUUID();
        for (let i = 0; i < MAX * 2; i++) expect((await nodes[0].spend(key, 0)).ok).toBe(true);
        for (let i = 0; i < MAX; i++) expect((await nodes[0].spend(key, MAX)).ok).toBe(true);
      } finally {
        await close();
      }
    });

    it('is the store the HTTP limiter counts in: its charges and `spend` share one count', async () => {
      const { nodes, close } = await deploy();
      try {
        const key = randomUUID();
        const viaStore = () =>
          new Promise<number>((resolve, reject) =>
            nodes[0].store.incr(
              key,
              (err, res) => (err || !res ? reject(err) : resolve(res.current)),
              WINDOW_MS,
              MAX,
            ),
          );
        expect(await viaStore()).toBe(1);
        expect(await viaStore()).toBe(2);
        for (let i = 0; i < MAX - 2; i++) expect((await nodes[0].spend(key, MAX)).ok).toBe(true);
        expect((await nodes[0].spend(key, MAX)).ok).toBe(false);
        expect(await viaStore()).toBe(MAX + 2);
      } finally {
        await close();
      }
    });
  });
}

contract('memory', async () => ({
  nodes: [new RequestBudget(new MemoryRateStore(), WINDOW_MS)],
  close: async () => {},
}));

describe('memory request budget', () => {
  it('sweeps finished windows as keys pile up', async () => {
    const store = new MemoryRateStore(10);
    const budget = new RequestBudget(store, 20);
    for (let i = 0; i < 500; i++) await budget.spend(`k${i}`, 1);
    await new Promise((r) => setTimeout(r, 30));
    for (let i = 0; i < 1000; i++) await budget.spend(`fresh${i % 5}`, 1000);
    const windows = (store as unknown as { windows: Map<string, unknown> }).windows;
    expect(windows.size).toBe(5);
  });
});

if (redisAvailable)
  describe('request budget across processes (redis)', () => {
    let redis: TestRedis;
    beforeAll(async () => {
      redis = await startRedis();
    });
    afterAll(async () => redis?.stop());
    const ignore = () => {};

    const links = async (n: number) => {
      const prefix = redis.prefix();
      const all = Array.from({ length: n }, () => new RedisLink({ url: redis.url, prefix }));
      await Promise.all(all.map((l) => l.connect(5000)));
      return all;
    };

    contract('redis', async () => {
      const all = await links(3);
      return {
        nodes: all.map((l) => new RequestBudget(new RedisRateStore(l, ignore), WINDOW_MS)),
        close: async () => {
          for (const l of all) await l.close();
        },
      };
    });

    it('counts in each process while Redis is away, rather than letting every request through', async () => {
      const [link] = await links(1);
      const errors: string[] = [];
      const budget = new RequestBudget(
        new RedisRateStore(link, (_err, what) => errors.push(what)),
        WINDOW_MS,
      );
      try {
        await redis.kill();
        const deadline = Date.now() + 5000;
        while (link.up && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        const key = randomUUID();
        const answers = [];
        for (let i = 0; i < MAX + 3; i++) answers.push(await budget.spend(key, MAX));
        expect(answers.filter((a) => a.ok)).toHaveLength(MAX);
        expect(errors[0]).toBe('rate limit');
      } finally {
        await redis.restart();
        await link.close();
      }
    });
  });

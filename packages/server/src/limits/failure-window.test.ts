import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisAvailable, startRedis, type TestRedis } from '../../test/helpers/redis.ts';
import { RedisLink } from '../bus/redis-link.ts';
import { systemClock } from '../clock.ts';
import { type FailureWindow, MemoryFailureWindow } from './failure-window.ts';
import { RedisFailureWindow } from './redis-failure-window.ts';

const LIMIT = 5;
const WINDOW_MS = 400;
const options = { limit: LIMIT, windowMs: WINDOW_MS };

/** Every failure window behaves alike; `nodes` are the windows of one deployment's processes. */
function contract(name: string, deploy: () => Promise<{ nodes: FailureWindow[]; close(): Promise<void> }>) {
  describe(`failure window: ${name}`, () => {
    it('allows the limit, then refuses with a wait inside the window', async () => {
      const { nodes, close } = await deploy();
      try {
        const key = randomUUID();
        for (let i = 0; i < LIMIT; i++) expect((await nodes[i % nodes.length].reserve(key)).ok).toBe(true);
        const refused = await nodes[0].reserve(key);
        expect(refused).toEqual({ ok: false, retryAfterS: 1 });
        expect((await nodes[0].reserve(randomUUID())).ok).toBe(true);
      } finally {
        await close();
      }
    });

    it('lets exactly the limit through a concurrent burst, on every node together', async () => {
      const { nodes, close } = await deploy();
      try {
        const key = randomUUID();
        const burst = await Promise.all(
          Array.from({ length: LIMIT * 4 }, (_, i) => nodes[i % nodes.length].reserve(key)),
        );
        expect(burst.filter((r) => r.ok)).toHaveLength(LIMIT);
      } finally {
        await close();
      }
    });

    it('gives a released reservation back, and frees the window after it passes', async () => {
      const { nodes, close } = await deploy();
      try {
        const key = randomUUID();
        const first = await nodes[0].reserve(key);
        for (let i = 1; i < LIMIT; i++) await nodes[0].reserve(key);
        expect((await nodes[0].reserve(key)).ok).toBe(false);
        if (!first.ok) throw new Error('first reservation refused');
        await nodes[nodes.length - 1].release(key, first.token);
        expect((await nodes[0].reserve(key)).ok).toBe(true);
        expect((await nodes[0].reserve(key)).ok).toBe(false);
        await new Promise((r) => setTimeout(r, WINDOW_MS + 50));
        expect((await nodes[0].reserve(key)).ok).toBe(true);
      } finally {
        await close();
      }
    });
  });
}

contract('memory', async () => ({
  nodes: [new MemoryFailureWindow(systemClock, options)],
  close: async () => {},
}));

if (redisAvailable)
  describe('failure window across processes (redis)', () => {
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
        nodes: all.map(
          (l) => new RedisFailureWindow(l, systemClock, { ...options, name: 'test', onError: ignore }),
        ),
        close: async () => {
          for (const l of all) await l.close();
        },
      };
    });

    it('counts in each process while Redis is away, rather than letting every attempt through', async () => {
      const [link] = await links(1);
      const window = new RedisFailureWindow(link, systemClock, { ...options, name: 'test', onError: ignore });
      try {
        await redis.kill();
        const deadline = Date.now() + 5000;
        while (link.up && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        const key = randomUUID();
        const answers = [];
        for (let i = 0; i < LIMIT + 3; i++) answers.push(await window.reserve(key));
        expect(answers.filter((a) => a.ok)).toHaveLength(LIMIT);
      } finally {
        await redis.restart();
        await link.close();
      }
    });
  });

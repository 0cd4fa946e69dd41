import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busContract, presenceContract } from '../../test/contracts/bus.contract.ts';
import { redisAvailable, startRedis, type TestRedis } from '../../test/helpers/redis.ts';
import type { BusMessage } from './bus.ts';
import { RedisBus } from './redis-bus.ts';
import { RedisLink } from './redis-link.ts';
import { RedisPresence } from './redis-presence.ts';

const NODES = 3;
const LEASE_MS = 400;
const ignore = () => {};

async function until(check: () => boolean, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function links(redis: TestRedis, n: number) {
  const prefix = redis.prefix();
  const all = Array.from({ length: n }, () => new RedisLink({ url: redis.url, prefix }));
  await Promise.all(all.map((link) => link.connect(5000)));
  return all;
}

// Declared only where redis-server can run (CI requires it; see test/helpers/redis.ts).
if (redisAvailable)
  describe('redis bus and presence (redis)', () => {
    let redis: TestRedis;
    beforeAll(async () => {
      redis = await startRedis();
    });
    afterAll(async () => redis?.stop());

    busContract('redis', async () => {
      const all = await links(redis, NODES);
      const nodes = all.map((link) => new RedisBus(link, ignore));
      await Promise.all(nodes.map((bus) => bus.start()));
      return {
        nodes,
        async close() {
          for (const bus of nodes) await bus.close();
          for (const link of all) await link.close();
        },
      };
    });

    presenceContract(
      'redis',
      async () => {
        const all = await links(redis, NODES);
        const nodes = all.map(
          (link) => new RedisPresence(link, { nodeId: randomUUID(), leaseMs: LEASE_MS, onError: ignore }),
        );
        await Promise.all(nodes.map((p) => p.start()));
        const dead = new Set<number>();
        return {
          nodes,
          kill: {
            leaseMs: LEASE_MS,
            // A crash: the node stops renewing and its connection drops, nothing is released.
            async node(i) {
              dead.add(i);
              all[i].command.disconnect();
              all[i].subscriber.disconnect();
              await nodes[i].close().catch(ignore);
            },
          },
          async close() {
            for (const [i, p] of nodes.entries()) if (!dead.has(i)) await p.close();
            for (const link of all) await link.close();
          },
        };
      },
      { nodesCanDie: true },
    );

    it('names a holder of a version before 2026-11-29 (lease "1") as hearing only what is published to all', async () => {
      const [link] = await links(redis, 1);
      const presence = new RedisPresence(link, { nodeId: randomUUID(), leaseMs: 5000, onError: ignore });
      await presence.start();
      try {
        // What such a node writes: its lease, and its claim of a session.
        const [oldNode, sessionId] = [randomUUID(), randomUUID()];
        await link.command.set(link.key(`node:${oldNode}`), '1', 'PX', 5000);
        await link.command.set(link.key(`presence:${sessionId}`), `${oldNode} conn-1`, 'EX', 60);
        await presence.claim('mine', 'conn-2');
        expect(await presence.holders([sessionId, 'mine'])).toEqual(
          new Map([
            [sessionId, { node: oldNode, addressable: false }],
            ['mine', { node: presence.nodeId, addressable: true }],
          ]),
        );
      } finally {
        await presence.close();
        await link.close();
      }
    });

    it('resyncs every node after Redis comes back, and carries messages again', async () => {
      const all = await links(redis, 2);
      const [a, b] = all.map((link) => new RedisBus(link, ignore));
      await a.start();
      await b.start();
      const resyncs = [0, 0];
      a.onResync(() => resyncs[0]++);
      b.onResync(() => resyncs[1]++);
      const got: BusMessage[] = [];
      b.subscribe((m) => void got.push(m));
      try {
        await redis.kill();
        await until(() => !all[0].up && !all[1].up);
        const lost: BusMessage = { type: 'close', sessionId: randomUUID(), code: 4009, reason: 'while down' };
        // Publishing while Redis is down neither throws nor hangs; the local handlers still run.
        const local: BusMessage[] = [];
        a.subscribe((m) => void local.push(m));
        await a.publish(lost);
        expect(local).toEqual([lost]);
        await redis.restart();
        await until(() => resyncs[0] > 0 && resyncs[1] > 0);
        expect(resyncs).toEqual([1, 1]);
        const after: BusMessage = { type: 'close', sessionId: randomUUID(), code: 4009, reason: 'after' };
        await a.publish(after);
        await until(() => got.length > 0);
        expect(got).toEqual([after]);
        // Its own channel is subscribed again too.
        const direct: BusMessage = { type: 'close', sessionId: randomUUID(), code: 4009, reason: 'sent' };
        await a.send(b.nodeId, direct);
        await until(() => got.length > 1);
        expect(got).toEqual([after, direct]);
      } finally {
        await a.close();
        await b.close();
        for (const link of all) await link.close();
      }
    });
  });

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { TestSocket } from '../helpers/device-socket.ts';
import {
  cli,
  exitWithin,
  logLines,
  type ServerProcess,
  sleep,
  spawnCli,
  startProcess,
} from '../helpers/process.ts';
import { startReceiver } from '../helpers/receiver.ts';
import { redisAvailable, startRedis, type TestRedis } from '../helpers/redis.ts';
import { ADMIN_TOKEN, freshStore } from '../helpers/server.ts';
import { openTail } from '../helpers/sse.ts';

/**
 * Several processes on one PostgreSQL database, joined by a Redis this suite starts itself
 * (CONTRACT §9.1): commands reach a device on any process in order, takeover and session end cross
 * processes, limits are shared, webhooks are sent once, a process killed with SIGKILL leaves its
 * devices to the others, and Redis going away stops nothing a single process can do.
 */
const LEASE_MS = 1500;
const clusterCanRun = redisAvailable && Boolean(process.env.DATABASE_URL);
const DEVICE_RPS = 8;

type Store = ReturnType<typeof freshStore>;

async function until<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 10_000,
) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(50);
  }
}

// Declared only where PostgreSQL and Redis can run (CI requires both; see test/helpers/redis.ts).
if (clusterCanRun)
  describe('several processes over Redis (postgres) (redis)', () => {
    let redis: TestRedis;
    let store: Store;
    let env: Record<string, string>;
    const servers: ServerProcess[] = [];
    let tenant: TenantFixture;

    const spawnServer = async () => {
      const server = await startProcess(env, { timeoutMs: 60_000 });
      servers.push(server);
      return server;
    };

    beforeAll(async () => {
      redis = await startRedis();
      store = freshStore('postgres');
      env = {
        ...store.env,
        REDIS_URL: redis.url,
        LIVELINE_REDIS_PREFIX: redis.prefix(),
        LIVELINE_ADMIN_TOKEN: ADMIN_TOKEN,
        LIVELINE_PRESENCE_LEASE_MS: String(LEASE_MS),
        LIVELINE_RATE_LIMIT_TENANT_RPS: '0',
        LIVELINE_RATE_LIMIT_DEVICE_RPS: String(DEVICE_RPS),
        LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true',
        LIVELINE_WEBHOOK_RETRY_SCHEDULE: '1,1,1',
        LIVELINE_WEBHOOK_POLL_MS: '200',
      };
      // The first process migrates the schema; the others start on it.
      await spawnServer();
      await Promise.all([spawnServer(), spawnServer()]);
      tenant = await createTenant(servers[0].url, ADMIN_TOKEN);
    }, 60_000);

    afterAll(async () => {
      for (const s of servers) if (s.child.exitCode === null) s.child.kill('SIGKILL');
      await Promise.all(servers.map((s) => s.exited));
      await redis?.stop();
      await store?.destroy();
    });

    /** A live session of a new player, opened through `base`. */
    async function session(base: string) {
      const playerId = `p-${randomUUID()}`;
      const token = await deviceToken(base, tenant.token, playerId);
      const created = await call(base, 'POST', '/client/v1/sessions', { token, json: {} });
      expect(created.status).toBe(201);
      return { token, sessionId: String(created.body.sessionId) };
    }

    const text = (base: string, sessionId: string, data: string) =>
      call(base, 'POST', `/sessions/${sessionId}/realtime/commands`, {
        token: tenant.token,
        json: { name: 'text', data },
      });

    it('delivers commands sent through any process to the device on another, in order', async () => {
      const [a, b, c] = servers;
      const { token, sessionId } = await session(a.url);
      const device = await TestSocket.open(a.url, sessionId, token);
      await device.ofType('welcome');
      // `connected` is true whichever process is asked.
      for (const s of [a, b, c]) {
        const view = await call(s.url, 'GET', `/sessions/${sessionId}`, { token: tenant.token });
        expect(view.body.connected).toBe(true);
      }
      const sent: string[] = [];
      for (let i = 0; i < 30; i++) {
        const via = [b, c, a][i % 3];
        const answer = await text(via.url, sessionId, `m${i}`);
        expect(answer.status).toBe(202);
        expect(answer.body.status).toBe('delivered');
        sent.push(`m${i}`);
      }
      const got: string[] = [];
      while (got.length < sent.length) {
        const command = await device.ofType('command');
        got.push(String(command.data));
        device.send({ type: 'ack', commandId: command.commandId, ok: true });
      }
      expect(got).toEqual(sent);
      await device.close();
    });

    it('delivers a burst through one process to devices on two others, in order, each answered as it went', async () => {
      const [a, b, c] = servers;
      const held = [a, a, a, c, c, c];
      const devices = await Promise.all(
        held.map(async (server) => {
          const { token, sessionId } = await session(server.url);
          const socket = await TestSocket.open(server.url, sessionId, token);
          await socket.ofType('welcome');
          return { sessionId, socket };
        }),
      );
      // A session whose device is connected nowhere, in the same bursts.
      const offline = await session(a.url);
      const rounds = 10;
      for (let i = 0; i < rounds; i++) {
        // Concurrent requests: B stores them in shared groups and sends each holder its share at once.
        const answers = await Promise.all([
          ...devices.map((d, n) => text(b.url, d.sessionId, `d${n}-m${i}`)),
          text(b.url, offline.sessionId, `offline-m${i}`),
        ]);
        for (const answer of answers.slice(0, devices.length)) {
          expect(answer.status, answer.text).toBe(202);
          expect(answer.body.status).toBe('delivered');
          expect(typeof answer.body.deliveredAt).toBe('number');
        }
        expect(answers[devices.length].body.status).toBe('queued');
      }
      for (const [n, d] of devices.entries()) {
        const got: string[] = [];
        while (got.length < rounds) got.push(String((await d.socket.ofType('command')).data));
        expect(got).toEqual(Array.from({ length: rounds }, (_, i) => `d${n}-m${i}`));
        await d.socket.close();
      }
    });

    it('tails on one process what the others store and who connects there (live tail, resume)', async () => {
      const [a, b, c] = servers;
      const cohort = `c-${randomUUID()}`;
      const reader = await openTail(a.url, `/cohorts/${cohort}/events/stream`, tenant.token);
      const playerId = `p-${randomUUID()}`;
      const token = await deviceToken(b.url, tenant.token, playerId, cohort);
      const created = await call(b.url, 'POST', '/client/v1/sessions', { token, json: {} });
      const sessionId = String(created.body.sessionId);
      const device = await TestSocket.open(c.url, sessionId, token);
      await device.ofType('welcome');
      const post = (via: ServerProcess, ids: string[]) =>
        call(via.url, 'POST', `/sessions/${sessionId}/Events`, {
          token,
          json: {
            events: ids.map((id) => ({ id, eventType: 'Custom', timestamp: Date.now(), custom01: id })),
          },
        });
      expect((await post(b, ['e1', 'e2'])).status).toBe(200);
      expect((await post(c, ['e3'])).status).toBe(200);
      await reader.until(() => reader.events().length >= 3);
      expect(reader.events().map((m) => m.data.id)).toEqual(['e1', 'e2', 'e3']);
      expect(reader.presence().map((m) => m.event)).toEqual(['session.started', 'device.connected']);
      // Away, then back on another process: what was stored meanwhile, nothing twice.
      const last = reader.lastId();
      reader.close();
      expect((await post(a, ['e4'])).status).toBe(200);
      expect((await post(b, ['e5'])).status).toBe(200);
      const again = await openTail(c.url, `/cohorts/${cohort}/events/stream`, tenant.token, last);
      await again.until(() => again.events().length >= 2);
      await device.close();
      await again.until(() => again.presence().some((m) => m.event === 'device.disconnected'));
      expect(again.events().map((m) => m.data.id)).toEqual(['e4', 'e5']);
      again.close();
    });

    it('closes the older socket (4001) when the session connects on another process', async () => {
      const [a, b] = servers;
      const { token, sessionId } = await session(a.url);
      const first = await TestSocket.open(a.url, sessionId, token);
      await first.ofType('welcome');
      const second = await TestSocket.open(b.url, sessionId, token);
      await second.ofType('welcome');
      expect((await first.waitClosed()).code).toBe(4001);
      // Commands now go to the newer socket.
      expect((await text(a.url, sessionId, 'after takeover')).body.status).toBe('delivered');
      expect((await second.ofType('command')).data).toBe('after takeover');
      await second.close();
    });

    it("closes the device's socket (4009) when its session ends through another process", async () => {
      const [a, , c] = servers;
      const { token, sessionId } = await session(a.url);
      const device = await TestSocket.open(a.url, sessionId, token);
      await device.ofType('welcome');
      const ended = await call(c.url, 'POST', `/client/v1/sessions/${sessionId}/end`, { token });
      expect(ended.status).toBe(200);
      expect((await device.waitClosed()).code).toBe(4009);
    });

    it('counts a device rate limit across processes', async () => {
      const { token, sessionId } = await session(servers[0].url);
      const event = () => ({ id: randomUUID(), eventType: 'Custom', timestamp: Date.now(), custom01: 'x' });
      // 3 × 5 requests at once: each process alone sees fewer than the limit of 8 a second.
      const answers = await Promise.all(
        servers.flatMap((s) =>
          Array.from({ length: 5 }, () =>
            call(s.url, 'POST', `/sessions/${sessionId}/Events`, { token, json: { events: [event()] } }),
          ),
        ),
      );
      const statuses = answers.map((r) => r.status);
      expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(DEVICE_RPS);
      expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(15 - DEVICE_RPS);
    });

    it("stops a deleted client's tokens on every process within a second", async () => {
      const other = await createTenant(servers[0].url, ADMIN_TOKEN);
      // Every process has just seen the token work (and may remember that).
      for (const s of servers)
        expect((await call(s.url, 'GET', '/sessions/active', { token: other.token })).status).toBe(200);
      const deleted = await call(
        servers[0].url,
        'DELETE',
        `/admin/v1/tenants/${other.tenantId}/clients/${other.clientId}`,
        {
          token: ADMIN_TOKEN,
        },
      );
      expect(deleted.status).toBe(204);
      // At once on the process that deleted it; within 1 s on the others.
      expect((await call(servers[0].url, 'GET', '/sessions/active', { token: other.token })).status).toBe(
        401,
      );
      await sleep(1100);
      for (const s of servers)
        expect((await call(s.url, 'GET', '/sessions/active', { token: other.token })).status).toBe(401);
    });

    it("revokes a player's device tokens on every process: a socket held by another closes with 4003", async () => {
      const [a, b, c] = servers;
      const { token, sessionId } = await session(a.url);
      const playerId = JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).sub as string;
      const device = await TestSocket.open(b.url, sessionId, token);
      await device.ofType('welcome');
      const start = (s: ServerProcess) => call(s.url, 'POST', '/client/v1/sessions', { token, json: {} });
      // Each process has seen the token work (and keeps what it verified); few requests: the device limit is 8/s.
      for (const s of [b, c]) expect((await start(s)).status).toBe(201);
      const revokedAt = Date.now();
      const revoked = await call(c.url, 'POST', '/client-tokens/revoke', {
        token: tenant.token,
        json: { playerId },
      });
      expect(revoked.status).toBe(200);
      expect((await device.waitClosed()).code).toBe(4003);
      for (const s of servers) await until(async () => (await start(s)).status === 401, 1000);
      expect(Date.now() - revokedAt).toBeLessThan(1500);
      // A token minted afterwards works everywhere.
      await sleep(1000);
      const fresh = await deviceToken(a.url, tenant.token, playerId);
      for (const s of servers)
        expect((await call(s.url, 'POST', '/client/v1/sessions', { token: fresh, json: {} })).status).toBe(
          201,
        );
    });

    it('a signing key rotated through one process signs and verifies on every process within a second', async () => {
      const [a, b, c] = servers;
      const kidOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[0], 'base64url').toString()).kid;
      const rotated = await call(a.url, 'POST', '/admin/v1/keys/rotate', { token: ADMIN_TOKEN });
      expect(rotated.status).toBe(200);
      const newKid = (rotated.body.key as { kid: string }).kid;
      // The others read the keys again on the bus message: within a second they sign with the new key.
      for (const s of [b, c])
        await until(async () => kidOf(await deviceToken(s.url, tenant.token, 'p-rotated')) === newKid, 1000);
      const minted = await deviceToken(a.url, tenant.token, 'p-rotated');
      expect(kidOf(minted)).toBe(newKid);
      for (const s of servers)
        expect((await call(s.url, 'POST', '/client/v1/sessions', { token: minted, json: {} })).status).toBe(
          201,
        );
      // The tenant's access token, signed with the old key, still works everywhere.
      for (const s of servers)
        expect((await call(s.url, 'GET', '/sessions/active', { token: tenant.token })).status).toBe(200);
    });

    it('counts failed reward verifications across processes', async () => {
      const campaign = await call(servers[0].url, 'POST', '/campaigns', {
        token: tenant.token,
        json: { name: 'limits', redemption: { method: 'displayCode', instructionsTemplate: 'Code: {code}' } },
      });
      expect(campaign.status).toBe(201);
      const guess = (s: ServerProcess, i: number) =>
        call(s.url, 'POST', '/campaigns/verifyrewardcode', {
          json: {
            campaignSecret: campaign.body.campaignSecret,
            verificationCode: `ZZZZ-ZZZ${'23456789'[i % 8]}`,
          },
        });
      // 10 failures a minute per address and campaign: spread over three processes, not 10 each.
      const answers = [];
      for (let i = 0; i < 12; i++) answers.push((await guess(servers[i % 3], i)).status);
      expect(answers.slice(0, 10)).toEqual(Array(10).fill(404));
      expect(answers.slice(10)).toEqual([429, 429]);
    });

    it('sends each webhook once although every process dispatches', async () => {
      const receiver = await startReceiver();
      try {
        const hook = await call(servers[0].url, 'POST', '/webhooks', {
          token: tenant.token,
          json: { url: receiver.url, types: ['session.event'] },
        });
        expect(hook.status).toBe(201);
        // The endpoint is known to the other processes at once (their caches are told), not after a TTL.
        const { token, sessionId } = await session(servers[1].url);
        const ids: string[] = [];
        for (const [i, s] of servers.entries()) {
          const events = Array.from({ length: 10 }, () => ({
            id: randomUUID(),
            eventType: 'Custom',
            timestamp: Date.now(),
            custom01: String(i),
          }));
          ids.push(...events.map((e) => e.id));
          const stored = await call(s.url, 'POST', `/sessions/${sessionId}/Events`, {
            token,
            json: { events },
          });
          expect(stored.status).toBe(200);
          await sleep(150);
        }
        await until(() => receiver.received.length >= ids.length);
        await sleep(1500);
        const eventIds = receiver.received.map(
          (r) => (JSON.parse(r.body) as { data: { id: string } }).data.id,
        );
        expect(eventIds.sort()).toEqual([...ids].sort());
        expect(new Set(receiver.received.map((r) => r.id)).size).toBe(ids.length);
      } finally {
        await receiver.stop();
      }
    });

    it('keeps delivering through a Redis outage and catches up when Redis is back', async () => {
      const [a, b] = servers;
      const { token, sessionId } = await session(a.url);
      const device = await TestSocket.open(a.url, sessionId, token);
      await device.ofType('welcome');
      await redis.kill();
      try {
        await until(async () => {
          const ready = await call(a.url, 'GET', '/readyz');
          return ready.status === 200 && ready.body.redis === 'down';
        });
        const metrics = await call(a.url, 'GET', '/metrics');
        expect(metrics.text).toMatch(/^liveline_redis_up 0$/m);
        // The process holding the socket still delivers what it accepts.
        const local = await text(a.url, sessionId, 'local while down');
        expect(local.body.status).toBe('delivered');
        expect((await device.ofType('command')).data).toBe('local while down');
        // Another process stores the command; it reaches the device once Redis is back.
        const remote = await text(b.url, sessionId, 'remote while down');
        expect(remote.status).toBe(202);
        expect(remote.body.status).toBe('queued');
        expect(device.closed).toBeNull();
      } finally {
        await redis.restart();
      }
      const started = Date.now();
      expect((await device.ofType('command', 10_000)).data).toBe('remote while down');
      expect(Date.now() - started).toBeLessThan(10_000);
      for (const server of [a, b]) {
        await until(async () => (await call(server.url, 'GET', '/readyz')).body.redis === 'up');
      }
      // Both processes say they have rejoined (subscribed again, presence re-written): cross-process
      // delivery is back, answered `delivered` again.
      expect((await text(b.url, sessionId, 'after')).body.status).toBe('delivered');
      expect((await device.ofType('command')).data).toBe('after');
      await device.close();
    }, 30_000);

    it("gives a SIGKILLed process's devices every command queued meanwhile on reconnect elsewhere", async () => {
      const victim = await spawnServer();
      const [, b] = servers;
      const { token, sessionId } = await session(victim.url);
      const device = await TestSocket.open(victim.url, sessionId, token);
      await device.ofType('welcome');
      victim.child.kill('SIGKILL');
      await victim.exited;
      await device.waitClosed();
      // Its ownership lapses within the lease: then commands are answered `queued` at once.
      const queued: string[] = [];
      for (let i = 0; i < 5; i++) {
        const answer = await text(b.url, sessionId, `q${i}`);
        expect(answer.status).toBe(202);
        queued.push(`q${i}`);
      }
      await until(async () => {
        const view = await call(b.url, 'GET', `/sessions/${sessionId}`, { token: tenant.token });
        return view.body.connected === false;
      }, LEASE_MS + 2000);
      const again = await TestSocket.open(b.url, sessionId, token);
      await again.ofType('welcome');
      const got: string[] = [];
      while (got.length < queued.length) got.push(String((await again.ofType('command')).data));
      expect(got).toEqual(queued);
      await again.close();
    }, 90_000);
  });

describe('liveline start --workers', () => {
  it('refuses without PostgreSQL and Redis, saying what is missing', async () => {
    const result = await cli(['start', '--workers', '2', '--port', '0']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('DATABASE_URL (PostgreSQL) and REDIS_URL');
    const noRedis = await cli(['start', '--workers', '2', '--port', '0'], {
      DATABASE_URL: 'postgres://root@127.0.0.1:5432/test',
    });
    expect(noRedis.code).toBe(1);
    expect(noRedis.stderr).toContain('set REDIS_URL');
    expect((await cli(['start', '--workers', 'many'])).stderr).toContain('--workers must be an integer');
  });

  if (clusterCanRun)
    it('runs N processes on one port and stops them all on SIGTERM (postgres) (redis)', async () => {
      const redis = await startRedis();
      const store = freshStore('postgres');
      let run: ReturnType<typeof spawnCli> | undefined;
      try {
        const cluster = spawnCli(['start', '--workers', '2'], {
          ...store.env,
          PORT: '0',
          HOST: '127.0.0.1',
          REDIS_URL: redis.url,
          LIVELINE_REDIS_PREFIX: redis.prefix(),
          LIVELINE_ADMIN_TOKEN: ADMIN_TOKEN,
        });
        run = cluster;
        const listening = await until(() => {
          const lines = logLines(cluster.stdout())
            .map((l) => JSON.parse(l) as { msg?: string; url?: string; pid?: number })
            .filter((e) => e.msg?.startsWith('liveline listening'));
          return lines.length === 2 ? lines : undefined;
          // Two processes load TypeScript one after the other: slow on a busy machine.
        }, 120_000);
        expect(new Set(listening.map((l) => l.url)).size).toBe(1);
        expect(new Set(listening.map((l) => l.pid)).size).toBe(2);
        const url = String(listening[0].url);
        expect((await call(url, 'GET', '/readyz')).body).toMatchObject({ status: 'ready', redis: 'up' });
        cluster.child.kill('SIGTERM');
        const exit = await exitWithin({ ...cluster, url }, 15_000);
        expect(exit.code).toBe(0);
      } finally {
        // Its workers exit when the primary's channel to them closes.
        if (run && run.child.exitCode === null) run.child.kill('SIGKILL');
        await redis.stop();
        await store.destroy();
      }
    }, 180_000);
});

import http from 'node:http';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LivelineDevice } from '../../../client/src/index.ts';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { type RunningServer, startServer } from '../../src/server.ts';
import { createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { GOOD_IMAGE } from '../helpers/rewards.ts';
import { ADMIN_TOKEN, backends, freshStore, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;

/**
 * Issue 10, finding 8: the URLs the server hands out (a device's `realtimeUrl`, a challenge's
 * `imageUrl`) come from LIVELINE_PUBLIC_URL when it is set, whatever `Host` or `X-Forwarded-*` a
 * caller sends. Unset (development), they follow the `Host` the caller used, which must be a host
 * name or address; and the server warns at startup when it runs that way outside development.
 */

/** One request with a `Host` header of our choosing (fetch would set its own). */
function rawCall(
  base: string,
  method: string,
  path: string,
  options: { token?: string; json?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Json }> {
  const url = new URL(base);
  const body = options.json === undefined ? undefined : JSON.stringify(options.json);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: {
          ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...options.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text ? JSON.parse(text) : {} });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const FORGED = {
  host: 'attacker.example',
  'x-forwarded-host': 'attacker.example',
  'x-forwarded-proto': 'http',
};

describe.each(backends)('URLs the server hands out (%s)', (backend) => {
  describe('with LIVELINE_PUBLIC_URL set', () => {
    let server: TestServer;
    let tenant: TenantFixture;
    let device: string;
    beforeAll(async () => {
      // A path prefix and a trailing slash, as an operator might write it behind a proxy.
      server = await startTestServer(backend, { LIVELINE_PUBLIC_URL: 'https://liveline.example.com/ll/' });
      tenant = await createTenant(server.url, server.adminToken);
      device = await deviceToken(server.url, tenant.token, 'public-url-player');
    });
    afterAll(async () => server?.close());

    it('realtimeUrl comes from it, never from Host or X-Forwarded-Host', async () => {
      for (const headers of [FORGED, {}]) {
        const res = await rawCall(server.url, 'POST', '/client/v1/sessions', {
          token: device,
          json: {},
          headers,
        });
        expect(res.status).toBe(201);
        expect(res.body.realtimeUrl).toBe(
          `wss://liveline.example.com/ll/client/v1/sessions/${res.body.sessionId}/realtime`,
        );
      }
    });

    it('the device SDK given another base URL refuses the realtimeUrl instead of following it', async () => {
      // The server says devices reach it at liveline.example.com; this device was pointed elsewhere.
      const d = new LivelineDevice({ baseUrl: server.url, token: device, flushIntervalMs: 60_000 });
      try {
        const info = await d.startSession();
        expect(info.realtimeUrl.startsWith('wss://liveline.example.com/ll/')).toBe(true);
        await expect(d.connect()).rejects.toMatchObject({ code: 'realtime_origin_mismatch' });
        expect(d.connected).toBe(false);
        expect((await server.services.presence.connected([info.sessionId])).size).toBe(0);
      } finally {
        await d.close();
      }
    });

    it('challenge imageUrls come from it on every route that returns one, tenant, device and operator', async () => {
      const campaign = await rawCall(server.url, 'POST', '/campaigns', {
        token: tenant.token,
        json: {
          name: 'Public URL',
          redemption: { method: 'displayCode', instructionsTemplate: 'Code: {code}' },
        },
        headers: FORGED,
      });
      expect(campaign.status, JSON.stringify(campaign.body)).toBe(201);
      const campaignId = String(campaign.body.campaignId);
      const challenge = await rawCall(server.url, 'POST', `/campaigns/${campaignId}/challenges`, {
        token: tenant.token,
        json: {
          rewardCode: 'PU1',
          rewardTitle: 'T',
          rewardRequirement: 'R',
          rewardImage: GOOD_IMAGE,
          rule: { type: 'uniqueDays', target: 2 },
        },
        headers: FORGED,
      });
      expect(challenge.status, JSON.stringify(challenge.body)).toBe(201);
      const challengeId = String(challenge.body.challengeId);
      const tenantImage = `https://liveline.example.com/ll/campaigns/${campaignId}/challenges/${challengeId}/image`;
      expect(challenge.body.imageUrl).toBe(tenantImage);

      const one = await rawCall(server.url, 'GET', `/campaigns/${campaignId}/challenges/${challengeId}`, {
        token: tenant.token,
        headers: FORGED,
      });
      expect(one.body.imageUrl).toBe(tenantImage);
      const list = await rawCall(server.url, 'GET', `/campaigns/${campaignId}/challenges`, {
        token: tenant.token,
        headers: FORGED,
      });
      expect((list.body.challenges as Json[]).map((c) => c.imageUrl)).toEqual([tenantImage]);
      const patched = await rawCall(
        server.url,
        'PATCH',
        `/campaigns/${campaignId}/challenges/${challengeId}`,
        {
          token: tenant.token,
          json: { rewardTitle: 'T2' },
          headers: FORGED,
        },
      );
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      expect(patched.body.imageUrl).toBe(tenantImage);

      const forDevice = await rawCall(server.url, 'GET', '/client/v1/challenges', {
        token: device,
        headers: FORGED,
      });
      expect(forDevice.status).toBe(200);
      expect((forDevice.body.challenges as Json[]).map((c) => c.imageUrl)).toEqual([tenantImage]);

      const admin = `/admin/v1/tenants/${tenant.tenantId}/campaigns/${campaignId}/challenges/${challengeId}`;
      const byOperator = await rawCall(server.url, 'GET', admin, {
        token: server.adminToken,
        headers: FORGED,
      });
      expect(byOperator.body.imageUrl).toBe(`https://liveline.example.com/ll${admin}/image`);
    });
  });

  describe('without LIVELINE_PUBLIC_URL (development)', () => {
    let server: TestServer;
    let tenant: TenantFixture;
    let device: string;
    beforeAll(async () => {
      server = await startTestServer(backend);
      tenant = await createTenant(server.url, server.adminToken);
      device = await deviceToken(server.url, tenant.token, 'dev-player');
    });
    afterAll(async () => server?.close());

    const sessionCount = async () =>
      Number(
        (
          await server.services.storage.db
            .selectFrom('sessions')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );

    it('follows the Host the caller used', async () => {
      const port = new URL(server.url).port;
      for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, 'dev-box.local']) {
        const res = await rawCall(server.url, 'POST', '/client/v1/sessions', {
          token: device,
          json: {},
          headers: { host },
        });
        expect(res.status).toBe(201);
        expect(res.body.realtimeUrl).toBe(`ws://${host}/client/v1/sessions/${res.body.sessionId}/realtime`);
      }
    });

    it('refuses a Host that is not a host name or address with 400, writing nothing', async () => {
      const before = await sessionCount();
      for (const host of [
        'attacker.example/evil?',
        'user@attacker.example',
        'a b',
        'attacker.example:80:80',
      ]) {
        const res = await rawCall(server.url, 'POST', '/client/v1/sessions', {
          token: device,
          json: {},
          headers: { host },
        });
        expect(res.status, host).toBe(400);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.body).toMatchObject({
          code: 'validation_failed',
          errors: [{ path: 'headers.host', message: expect.any(String) }],
        });
      }
      expect(await sessionCount()).toBe(before);
    });

    it('refuses such a Host before a challenge is written', async () => {
      const campaign = await rawCall(server.url, 'POST', '/campaigns', {
        token: tenant.token,
        json: { name: 'Dev', redemption: { method: 'displayCode', instructionsTemplate: 'Code: {code}' } },
      });
      expect(campaign.status).toBe(201);
      const path = `/campaigns/${campaign.body.campaignId}/challenges`;
      const body = {
        rewardCode: 'DEV1',
        rewardTitle: 'T',
        rewardRequirement: 'R',
        rewardImage: GOOD_IMAGE,
        rule: { type: 'uniqueDays', target: 2 },
      };
      const refused = await rawCall(server.url, 'POST', path, {
        token: tenant.token,
        json: body,
        headers: { host: 'attacker.example/x' },
      });
      expect(refused.status).toBe(400);
      const list = await rawCall(server.url, 'GET', path, { token: tenant.token });
      expect(list.body.challenges).toEqual([]);
    });
  });
});

describe('LIVELINE_PUBLIC_URL settings', () => {
  it.each([
    'liveline.example.com',
    'ftp://liveline.example.com',
    'wss://liveline.example.com',
    'https://user:secret@liveline.example.com',
    'https://liveline.example.com/?a=1',
    'https://liveline.example.com/#top',
  ])('refuses %s', (value) => {
    expect(() => loadConfig({ LIVELINE_PUBLIC_URL: value })).toThrow(ConfigError);
    expect(() => loadConfig({ LIVELINE_PUBLIC_URL: value })).toThrow(/LIVELINE_PUBLIC_URL/);
  });

  it.each(['https://liveline.example.com', 'http://10.0.0.5:8080/', 'https://example.com/liveline/'])(
    'takes %s as it is',
    (value) => {
      expect(loadConfig({ LIVELINE_PUBLIC_URL: value }).publicUrl).toBe(value);
    },
  );
});

describe('the startup warning when URLs would follow the Host header', () => {
  const running: RunningServer[] = [];
  const stores: ReturnType<typeof freshStore>[] = [];
  afterEach(async () => {
    for (const s of running.splice(0)) await s.close();
    for (const s of stores.splice(0)) await s.destroy();
  });

  /** Starts a server with these settings and returns what it logged at warn level. */
  async function warnings(env: Record<string, string>): Promise<string[]> {
    const store = freshStore('sqlite');
    stores.push(store);
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    });
    const config = loadConfig({
      PORT: '0',
      LIVELINE_ADMIN_TOKEN: ADMIN_TOKEN,
      LIVELINE_SQLITE_SYNCHRONOUS: 'NORMAL',
      ...store.env,
      ...env,
    });
    running.push(await startServer(config, { logger: pino({ level: 'warn' }, sink) }));
    return lines
      .map((line) => JSON.parse(line) as { level: number; msg: string })
      .filter((l) => l.level === 40)
      .map((l) => l.msg);
  }
  const aboutHost = (msgs: string[]) => msgs.filter((m) => m.includes('LIVELINE_PUBLIC_URL'));

  it('warns when listening on every interface, or in production, without it', async () => {
    const wide = aboutHost(await warnings({ HOST: '0.0.0.0' }));
    expect(wide).toHaveLength(1);
    expect(wide[0]).toMatch(/listens on 0\.0\.0\.0/);
    expect(wide[0]).toMatch(/Host header/);
    const production = aboutHost(await warnings({ HOST: '127.0.0.1', NODE_ENV: 'production' }));
    expect(production).toHaveLength(1);
    expect(production[0]).toMatch(/NODE_ENV is production/);
  });

  it('stays quiet on a loopback address in development, and whenever it is set', async () => {
    expect(aboutHost(await warnings({ HOST: '127.0.0.1' }))).toEqual([]);
    expect(aboutHost(await warnings({ HOST: '127.0.0.1', NODE_ENV: 'development' }))).toEqual([]);
    expect(
      aboutHost(
        await warnings({
          HOST: '0.0.0.0',
          NODE_ENV: 'production',
          LIVELINE_PUBLIC_URL: 'https://liveline.example.com',
        }),
      ),
    ).toEqual([]);
  });
});

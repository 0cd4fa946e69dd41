import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * Finding 6 of issue 10: limits that could be dodged or abused. `/oauth/token` counts refused client
 * authentications; behind a proxy the limits see the client's address (LIVELINE_TRUST_PROXY), an
 * IPv6 address by its /64; a device spends its own budget, not the budget of the session it names;
 * verification's unknown-secret counter is per address whatever campaign is named, and a failure is
 * reserved before the lookup, so a concurrent burst cannot pass the limit.
 */

function token(base: string, clientId: string, secret: string, from?: string) {
  return fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`,
      ...(from ? { 'x-forwarded-for': from } : {}),
    },
    body: 'grant_type=client_credentials',
  });
}

async function campaignSecret(base: string, tenant: TenantFixture) {
  const created = await call(base, 'POST', '/campaigns', {
    token: tenant.token,
    json: { name: 'limits', redemption: { method: 'displayCode', instructionsTemplate: 'Code: {code}' } },
  });
  expect(created.status, created.text).toBe(201);
  return String(created.body.campaignSecret);
}

/** A wrong code for a real campaign (404), from `from` (X-Forwarded-For). */
function guess(base: string, secret: string, from: string, i = 0) {
  return call(base, 'POST', '/campaigns/verifyrewardcode', {
    json: { campaignSecret: secret, verificationCode: `ZZZZ-ZZZ${'23456789'[i % 8]}` },
    headers: { 'x-forwarded-for': from },
  });
}

describe.each(backends)('/oauth/token failures (%s)', (backend) => {
  let server: TestServer;
  let tenant: TenantFixture;
  let other: TenantFixture;
  beforeAll(async () => {
    // The test's own requests come from 127.0.0.1: trusting it lets X-Forwarded-For name other addresses.
    server = await startTestServer(backend, { LIVELINE_TRUST_PROXY: '127.0.0.1' });
    tenant = await createTenant(server.url, server.adminToken);
    other = await createTenant(server.url, server.adminToken);
  });
  afterAll(async () => server?.close());

  it('answers 429 invalid_request after 10 refused secrets a minute for one client from one address', async () => {
    const from = '198.51.100.10';
    for (let i = 0; i < 10; i++) {
      const res = await token(server.url, tenant.clientId, `wrong-${i}`, from);
      expect(res.status).toBe(401);
      expect(((await res.json()) as { error: string }).error).toBe('invalid_client');
    }
    const limited = await token(server.url, tenant.clientId, 'wrong-again', from);
    expect(limited.status).toBe(429);
    expect(await limited.json()).toMatchObject({ error: 'invalid_request' });
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // Whatever the secret: guessing learns nothing past the limit.
    expect((await token(server.url, tenant.clientId, tenant.clientSecret, from)).status).toBe(429);
    // Another client from the same address, and the same client from another address, are not held.
    expect((await token(server.url, other.clientId, other.clientSecret, from)).status).toBe(200);
    expect((await token(server.url, tenant.clientId, tenant.clientSecret, '198.51.100.11')).status).toBe(200);
  });

  it('does not count a client that authenticates', async () => {
    const from = '198.51.100.20';
    for (let i = 0; i < 15; i++)
      expect((await token(server.url, other.clientId, other.clientSecret, from)).status).toBe(200);
    for (let i = 0; i < 10; i++)
      expect((await token(server.url, other.clientId, 'nope', from)).status).toBe(401);
  });

  it('lets exactly 10 refusals through a concurrent burst', async () => {
    const from = '198.51.100.30';
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) => token(server.url, tenant.clientId, `burst-${i}`, from)),
    );
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(20);
  });

  it('counts an unknown client id too (per id and address)', async () => {
    const from = '198.51.100.40';
    for (let i = 0; i < 10; i++)
      expect((await token(server.url, 'no-such-client', 'x', from)).status).toBe(401);
    expect((await token(server.url, 'no-such-client', 'x', from)).status).toBe(429);
  });
});

describe.each(backends)('verification limiter behind a proxy (%s)', (backend) => {
  let trusting: TestServer;
  let direct: TestServer;
  let trustingSecret: string;
  let directSecret: string;
  beforeAll(async () => {
    trusting = await startTestServer(backend, { LIVELINE_TRUST_PROXY: '127.0.0.1' });
    direct = await startTestServer(backend);
    trustingSecret = await campaignSecret(
      trusting.url,
      await createTenant(trusting.url, trusting.adminToken),
    );
    directSecret = await campaignSecret(direct.url, await createTenant(direct.url, direct.adminToken));
  });
  afterAll(async () => {
    await trusting?.close();
    await direct?.close();
  });

  it('with LIVELINE_TRUST_PROXY, one guesser behind the load balancer does not lock out the others', async () => {
    for (let i = 0; i < 10; i++)
      expect((await guess(trusting.url, trustingSecret, '203.0.113.7', i)).status).toBe(404);
    expect((await guess(trusting.url, trustingSecret, '203.0.113.7')).status).toBe(429);
    // A claims machine at another address still gets its answers.
    expect((await guess(trusting.url, trustingSecret, '203.0.113.8')).status).toBe(404);
    // The address is the one the trusted proxy saw: what the client wrote before it does not count.
    expect((await guess(trusting.url, trustingSecret, '10.9.9.9, 203.0.113.7')).status).toBe(429);
  });

  it('counts an IPv6 address by its /64', async () => {
    for (let i = 0; i < 10; i++) {
      const res = await guess(trusting.url, trustingSecret, `2001:db8:5:6::${(i + 1).toString(16)}`, i);
      expect(res.status).toBe(404);
    }
    // Another host of the same /64 is the same guesser...
    expect((await guess(trusting.url, trustingSecret, '2001:db8:5:6:ffff:1:2:3')).status).toBe(429);
    // ...another /64 is not.
    expect((await guess(trusting.url, trustingSecret, '2001:db8:5:7::1')).status).toBe(404);
  });

  it('without it, X-Forwarded-For is not believed', async () => {
    for (let i = 0; i < 10; i++)
      expect((await guess(direct.url, directSecret, `203.0.113.${i}`, i)).status).toBe(404);
    // Every request came from 127.0.0.1, whatever the header said.
    expect((await guess(direct.url, directSecret, '203.0.113.99')).status).toBe(429);
  });
});

describe.each(backends)('verification failures per address (%s)', (backend) => {
  let server: TestServer;
  let secret: string;
  beforeAll(async () => {
    // Trusting the test's own address lets each case come from an address of its own (X-Forwarded-For).
    server = await startTestServer(backend, { LIVELINE_TRUST_PROXY: '127.0.0.1' });
    secret = await campaignSecret(server.url, await createTenant(server.url, server.adminToken));
  });
  afterAll(async () => server?.close());

  it('counts unknown secrets per address whatever campaignId is named: a fresh one each time does not reset it', async () => {
    const from = '198.51.100.50';
    const unknown = (i: number | string) =>
      call(server.url, 'POST', '/campaigns/verifyrewardcode', {
        json: { campaignSecret: `lcs_guess${i}`, verificationCode: 'ZZZZ-ZZZZ', campaignId: randomUUID() },
        headers: { 'x-forwarded-for': from },
      });
    for (let i = 0; i < 10; i++) {
      const res = await unknown(i);
      expect(res.status, res.text).toBe(401);
      expect(res.body.code).toBe('invalid_campaign_secret');
    }
    const limited = await unknown('again');
    expect(limited.status, limited.text).toBe(429);
    expect(limited.body.code).toBe('rate_limited');
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // A real campaign's counter is its own: the same address still gets its answers there.
    const real = await guess(server.url, secret, from);
    expect(real.status, real.text).toBe(404);
    expect(real.body.code).toBe('entitlement_not_found');
  });

  it('lets exactly 10 failures through a concurrent burst of wrong codes for one campaign', async () => {
    const from = '198.51.100.60';
    // Open the 40 keep-alive connections first: the burst then reaches the server at once, not one
    // connection handshake at a time, and its lookups overlap.
    await Promise.all(
      Array.from({ length: 40 }, () => fetch(`${server.url}/healthz`).then((r) => r.arrayBuffer())),
    );
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) => guess(server.url, secret, from, i)),
    );
    const found = answers.filter((r) => r.status === 404);
    const limited = answers.filter((r) => r.status === 429);
    expect(found).toHaveLength(10);
    expect(limited).toHaveLength(30);
    for (const r of found) expect(r.body.code).toBe('entitlement_not_found');
    for (const r of limited) {
      expect(r.body.code).toBe('rate_limited');
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
  });
});

describe('LIVELINE_TRUST_PROXY', () => {
  const parse = (value: string | undefined) => loadConfig({ LIVELINE_TRUST_PROXY: value }).trustProxy;

  it('is off unless set', () => {
    expect(parse(undefined)).toBe(false);
    expect(parse('')).toBe(false);
    expect(parse('false')).toBe(false);
    expect(parse('0')).toBe(false);
  });

  it('takes true, a number of hops, or addresses and CIDR ranges', () => {
    expect(parse('true')).toBe(true);
    expect(parse('2')).toBe(2);
    expect(parse('10.0.0.0/8, 192.168.1.1,fd00::/8, loopback')).toEqual([
      '10.0.0.0/8',
      '192.168.1.1',
      'fd00::/8',
      'loopback',
    ]);
  });

  it('refuses anything else at startup', () => {
    for (const bad of ['yes', '10.0.0.0/33', 'fd00::/129', 'example.com', '1.2.3.4/8/8', '99'])
      expect(() => parse(bad)).toThrow(ConfigError);
  });
});

describe.each(backends)("another player's device and a session's budget (%s)", (backend) => {
  const RPS = 5;
  let server: TestServer;
  let tenant: TenantFixture;
  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_RATE_LIMIT_DEVICE_RPS: String(RPS) });
    tenant = await createTenant(server.url, server.adminToken);
  });
  afterAll(async () => server?.close());

  it('spends the caller’s own budget: 404s on another session do not exhaust it', async () => {
    const owner = await deviceToken(server.url, tenant.token, 'owner');
    const intruder = await deviceToken(server.url, tenant.token, 'intruder');
    const started = await call(server.url, 'POST', '/client/v1/sessions', { token: owner, json: {} });
    expect(started.status).toBe(201);
    const sessionId = String(started.body.sessionId);
    const post = (token: string, id: string) =>
      call(server.url, 'POST', `/sessions/${sessionId}/Events`, {
        token,
        json: { events: [{ id, eventType: 'Custom', timestamp: Date.now(), custom01: 'x' }] },
      });
    const intruding = await Promise.all(Array.from({ length: 2 * RPS }, (_, i) => post(intruder, `i-${i}`)));
    const statuses = intruding.map((r) => r.status);
    expect(statuses.filter((s) => s === 404)).toHaveLength(RPS);
    expect(statuses.filter((s) => s === 429)).toHaveLength(RPS);
    // The owner's device is not held by any of that.
    const own = await post(owner, 'o-1');
    expect(own.status, own.text).toBe(200);
  });
});

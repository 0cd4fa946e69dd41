import http from 'node:http';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { createTenant } from '../../server/test/helpers/api.ts';
import { startTestServer, type TestServer } from '../../server/test/helpers/server.ts';
import {
  createTenantClient,
  TokenError,
  TokenSource,
  verifyWebhook,
  WebhookVerificationError,
} from '../src/index.ts';

const secret = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
const other = `whsec_${Buffer.alloc(32, 2).toString('base64')}`;

function signed(body: string, secrets: string[], at = new Date()) {
  const id = 'msg_1';
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': secrets.map((s) => new Webhook(s).sign(id, at, body)).join(' '),
  };
}

describe('verifyWebhook', () => {
  const body = JSON.stringify({
    type: 'session.event',
    timestamp: new Date().toISOString(),
    data: { id: 'e1', sessionId: 's', eventType: 'Custom', timestamp: 1, tenantCohortId: null },
  });

  it('returns the verified message, from Node headers, fetch Headers, a string or a Buffer', () => {
    const headers = signed(body, [secret]);
    const message = verifyWebhook(body, headers, secret);
    expect(message.type).toBe('session.event');
    if (message.type === 'session.event') expect(message.data.eventType).toBe('Custom');
    expect(verifyWebhook(Buffer.from(body), new Headers(headers), secret)).toEqual(message);
    expect(verifyWebhook(body, { ...headers, 'x-other': ['a', 'b'], missing: undefined }, secret)).toEqual(
      message,
    );
  });

  it('accepts any of several secrets (rolling a secret), and a request signed with two', () => {
    expect(verifyWebhook(body, signed(body, [other]), [secret, other]).type).toBe('session.event');
    const both = signed(body, [other, secret]);
    expect(verifyWebhook(body, both, secret).type).toBe('session.event');
    expect(verifyWebhook(body, both, other).type).toBe('session.event');
  });

  it('throws on a bad signature, a changed body, missing headers or a stale timestamp', () => {
    const headers = signed(body, [secret]);
    expect(() => verifyWebhook(body, headers, other)).toThrow(WebhookVerificationError);
    expect(() => verifyWebhook(`${body} `, headers, secret)).toThrow(WebhookVerificationError);
    expect(() => verifyWebhook(body, { 'webhook-id': 'x' }, secret)).toThrow(WebhookVerificationError);
    const stale = signed(body, [secret], new Date(Date.now() - 10 * 60_000));
    expect(() => verifyWebhook(body, stale, [other, secret])).toThrow(/too old/);
    expect(() => verifyWebhook(body, headers, [])).toThrow(TypeError);
  });
});

describe('TokenSource', () => {
  function fakeServer(expiresIn = 3600) {
    let calls = 0;
    const fetch = (async (_url: string | URL | Request, init?: RequestInit) => {
      calls++;
      expect(String(init?.body)).toContain('grant_type=client_credentials');
      expect(new Headers(init?.headers).get('authorization')).toBe(
        `Basic ${Buffer.from('id:s%20e').toString('base64')}`,
      );
      return new Response(
        JSON.stringify({ access_token: `t${calls}`, token_type: 'Bearer', expires_in: expiresIn }),
        {
          status: 200,
          headers: { 'content-type': 'application/json' },
        },
      );
    }) as typeof globalThis.fetch;
    return { fetch, calls: () => calls };
  }

  it('fetches once, reuses the token, and refreshes it shortly before it expires', async () => {
    let now = 1_000_000;
    const server = fakeServer(3600);
    const tokens = new TokenSource({
      baseUrl: 'http://liveline.test/',
      clientId: 'id',
      clientSecret: 's e',
      fetch: server.fetch,
      now: () => now,
    });
    const [a, b] = await Promise.all([tokens.token(), tokens.token()]);
    expect([a, b]).toEqual(['t1', 't1']);
    expect(server.calls()).toBe(1);
    now += 3540_000 - 1;
    expect(await tokens.token()).toBe('t1');
    expect(server.calls()).toBe(1);
    // Within the last minute: the current token is still handed out while a new one is fetched.
    now += 2;
    expect(await tokens.token()).toBe('t1');
    await new Promise((r) => setTimeout(r, 0));
    expect(server.calls()).toBe(2);
    expect(await tokens.token()).toBe('t2');
    // Expired: the caller waits for a new one.
    now += 7200_000;
    expect(await tokens.token()).toBe('t3');
    tokens.invalidate();
    expect(await tokens.token()).toBe('t4');
  });

  it('reports a refused client as a TokenError', async () => {
    const fetch = (async () =>
      new Response(
        JSON.stringify({ error: 'invalid_client', error_description: 'Unknown client or wrong secret.' }),
        {
          status: 401,
        },
      )) as typeof globalThis.fetch;
    const tokens = new TokenSource({ baseUrl: 'http://x', clientId: 'a', clientSecret: 'b', fetch });
    const err = await tokens.token().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TokenError);
    expect(err).toMatchObject({ status: 401, error: 'invalid_client' });
  });
});

describe('createTenantClient against a real server', () => {
  const servers: TestServer[] = [];
  const receivers: http.Server[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
    for (const r of receivers.splice(0)) await new Promise((done) => r.close(done));
  });

  it('manages webhooks with typed calls and verifies what the server sends', async () => {
    const server = await startTestServer('sqlite', { LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true' });
    servers.push(server);
    const tenant = await createTenant(server.url, server.adminToken);
    const got: { body: string; headers: http.IncomingHttpHeaders }[] = [];
    const receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        got.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers });
        res.writeHead(204).end();
      });
    });
    receivers.push(receiver);
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
    const port = (receiver.address() as { port: number }).port;

    const liveline = createTenantClient({
      baseUrl: server.url,
      credentials: { clientId: tenant.clientId, clientSecret: tenant.clientSecret },
    });
    const created = await liveline.POST('/webhooks', {
      body: { url: `http://127.0.0.1:${port}/hooks`, types: ['session.event'], eventTypes: ['Error'] },
    });
    expect(created.response.status).toBe(201);
    const hook = created.data!;
    expect(hook.secret).toMatch(/^whsec_/);
    expect(hook.eventTypes).toEqual(['Error']);

    const list = await liveline.GET('/webhooks');
    expect(list.data?.totalCount).toBe(1);

    const bad = await liveline.POST('/webhooks', { body: { url: 'ftp://nope' } });
    expect(bad.response.status).toBe(400);
    expect(bad.error).toMatchObject({ code: 'validation_failed' });

    const test = await liveline.POST('/webhooks/{webhookId}/test', {
      params: { path: { webhookId: hook.webhookId } },
      body: {},
    });
    expect(test.response.status).toBe(202);
    for (let i = 0; i < 100 && got.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    const message = verifyWebhook(got[0].body, got[0].headers, hook.secret);
    expect(message).toMatchObject({ type: 'webhook.test', data: { webhookId: hook.webhookId } });
    expect(liveline.tokens).not.toBeNull();
  });
});

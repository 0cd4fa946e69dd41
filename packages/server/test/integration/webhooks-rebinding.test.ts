import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { type RunningServer, startServer } from '../../src/server.ts';
import { call, createTenant } from '../helpers/api.ts';
import { type Receiver, startReceiver, waitFor } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, backends, freshStore } from '../helpers/server.ts';

type Json = Record<string, unknown>;
type Delivery = { status: string; lastError: string | null; attempts: { error: string | null }[] };

const PUBLIC = '93.184.215.14';
const NAME = 'hooks.rebind.example';

/**
 * DNS rebinding (issue 10, "tests a trusted service has"): a name that answers a public address when
 * the webhook is registered and a private one when the sender connects must not be reached. The server
 * runs for real with an attacker's resolver in its configuration (the only thing not real: the DNS
 * answers), and the receiver is a real HTTP server on 127.0.0.1 that the private answer points at.
 * The tenant reads "not allowed" in the API and the delivery log; the address is in the server log.
 */
describe.each(backends)('webhooks and DNS rebinding (%s)', (backend) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A resolver the test steers: what `NAME` resolves to now, and every name it was asked. */
  function attackerDns() {
    const dns = { answer: PUBLIC, asked: [] as string[] };
    const resolve = async (hostname: string) => {
      dns.asked.push(hostname);
      if (hostname !== NAME)
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
      return [{ address: dns.answer, family: 4 }];
    };
    return { dns, resolve };
  }

  async function start(
    env: Record<string, string>,
    resolve: (h: string) => Promise<{ address: string; family: number }[]>,
  ) {
    const store = freshStore(backend);
    const logs: Json[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString('utf8').split('\n').filter(Boolean))
          logs.push(JSON.parse(line) as Json);
        done();
      },
    });
    const config = loadConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      LIVELINE_ADMIN_TOKEN: ADMIN_TOKEN,
      LIVELINE_SQLITE_SYNCHRONOUS: 'NORMAL',
      LIVELINE_WEBHOOK_RETRY_SCHEDULE: '3600',
      ...store.env,
      ...env,
    });
    config.webhooks.resolve = resolve;
    let server: RunningServer;
    try {
      server = await startServer(config, { logger: pino({ level: 'warn' }, sink) });
    } catch (err) {
      await store.destroy();
      throw err;
    }
    cleanups.push(async () => {
      await server.close();
      await store.destroy();
    });
    const tenant = await createTenant(server.url, ADMIN_TOKEN);
    return { server, tenant, logs };
  }

  async function receiver(): Promise<Receiver> {
    const r = await startReceiver();
    cleanups.push(() => r.close());
    return r;
  }

  async function firstAttempt(base: string, token: string, webhookId: string): Promise<Delivery> {
    let delivery: Delivery | undefined;
    await waitFor(
      async () => {
        const log = await call<{ deliveries: Delivery[] }>(base, 'GET', `/webhooks/${webhookId}/deliveries`, {
          token,
        });
        // The log is read in one snapshot: a delivery listed with an attempt is the settled one.
        delivery = log.body.deliveries.find((d) => d.attempts.length > 0);
        return delivery !== undefined;
      },
      10_000,
      'the first attempt',
    );
    return delivery as Delivery;
  }

  it('refuses to connect when the name re-points at a private address after registration', async () => {
    const { dns, resolve } = attackerDns();
    const { server, tenant, logs } = await start({}, resolve);
    const r = await receiver();

    // Registration: the name answers a public address, so the URL is accepted.
    const created = await call(server.url, 'POST', '/webhooks', {
      token: tenant.token,
      json: { url: `http://${NAME}:${r.port}/hooks` },
    });
    expect(created.status, created.text).toBe(201);
    expect(dns.asked).toEqual([NAME]);

    // Then the attacker's DNS answers the address where an internal service (our receiver) listens.
    dns.answer = '127.0.0.1';
    const test = await call(server.url, 'POST', `/webhooks/${created.body.webhookId}/test`, {
      token: tenant.token,
    });
    expect(test.status, test.text).toBe(202);
    const delivery = await firstAttempt(server.url, tenant.token, String(created.body.webhookId));

    // The sender resolved the name again when connecting, saw the private answer, and did not connect.
    expect(dns.asked.length).toBeGreaterThan(1);
    expect(r.received).toHaveLength(0);
    expect(delivery.attempts[0].error).toBe(
      `refused: ${NAME} is not allowed: webhooks may reach public addresses only`,
    );
    expect(delivery.lastError).toBe(delivery.attempts[0].error);
    expect(JSON.stringify(delivery)).not.toContain('127.0.0.1');
    expect(JSON.stringify(delivery)).not.toContain('loopback');
    // The operator's log has the address and its class.
    expect(logs).toContainEqual(
      expect.objectContaining({ level: 40, host: NAME, address: '127.0.0.1', addressClass: 'loopback' }),
    );
    // Nothing reached the receiver while we looked either.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(r.received).toHaveLength(0);
  });

  it('with private targets allowed, the same answers do reach the receiver (the resolver is what connects)', async () => {
    const { dns, resolve } = attackerDns();
    const { server, tenant } = await start({ LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true' }, resolve);
    const r = await receiver();
    const created = await call(server.url, 'POST', '/webhooks', {
      token: tenant.token,
      json: { url: `http://${NAME}:${r.port}/hooks` },
    });
    expect(created.status, created.text).toBe(201);
    dns.answer = '127.0.0.1';
    await call(server.url, 'POST', `/webhooks/${created.body.webhookId}/test`, { token: tenant.token });
    const delivery = await firstAttempt(server.url, tenant.token, String(created.body.webhookId));
    expect(delivery.status).toBe('delivered');
    expect(r.received).toHaveLength(1);
    expect(dns.asked).toContain(NAME);
  });

  it('registration says "not allowed" without the address it resolved to; the server log has it', async () => {
    const { dns, resolve } = attackerDns();
    const { server, tenant, logs } = await start({}, resolve);
    dns.answer = '10.20.30.40';
    const refused = await call(server.url, 'POST', '/webhooks', {
      token: tenant.token,
      json: { url: `https://${NAME}/hooks` },
    });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({
      code: 'validation_failed',
      errors: [{ path: 'url', message: 'is not allowed: webhooks may reach public addresses only' }],
    });
    expect(refused.text).not.toContain('10.20.30.40');
    expect(refused.text).not.toContain('private');
    expect(logs).toContainEqual(
      expect.objectContaining({ level: 40, host: NAME, address: '10.20.30.40', addressClass: 'private' }),
    );
    // A literal internal address is refused the same way; a name that does not resolve says so.
    const literal = await call(server.url, 'POST', '/webhooks', {
      token: tenant.token,
      json: { url: 'http://169.254.169.254/latest/meta-data' },
    });
    expect(literal.status).toBe(400);
    expect((literal.body.errors as Json[])[0].message).toBe(
      'is not allowed: webhooks may reach public addresses only',
    );
    expect(literal.text).not.toContain('metadata');
    const unknown = await call(server.url, 'POST', '/webhooks', {
      token: tenant.token,
      json: { url: 'https://nowhere.rebind.example/hooks' },
    });
    expect(unknown.status).toBe(400);
    expect((unknown.body.errors as Json[])[0].message).toMatch(/does not resolve/);
  });
});

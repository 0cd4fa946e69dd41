import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { type Receiver, startReceiver, waitFor } from '../helpers/receiver.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

/** Webhooks (CONTRACT §6) against real local receivers, on every backend. */

const FAST = {
  LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true',
  LIVELINE_WEBHOOK_RETRY_SCHEDULE: '1,1,1,1,1,1,1,1',
  LIVELINE_WEBHOOK_POLL_MS: '100',
  LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
  LIVELINE_RATE_LIMIT_TENANT_RPS: '0',
};

interface Message {
  type: string;
  timestamp: string;
  data: Record<string, unknown>;
}

function verify(secret: string, r: { body: string; headers: Record<string, string> }): Message {
  return new Webhook(secret).verify(r.body, r.headers) as Message;
}

describe.each(backends)('webhooks (%s)', (backend) => {
  const servers: TestServer[] = [];
  const receivers: Receiver[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
    for (const r of receivers.splice(0)) await r.close();
  });

  async function setup(env: Record<string, string> = {}) {
    const server = await startTestServer(backend, { ...FAST, ...env });
    servers.push(server);
    const tenant = await createTenant(server.url, server.adminToken);
    return { server, base: server.url, tenant };
  }

  async function receiver(...args: Parameters<typeof startReceiver>) {
    const r = await startReceiver(...args);
    receivers.push(r);
    return r;
  }

  async function register(base: string, token: string, body: Record<string, unknown>) {
    const res = await call(base, 'POST', '/webhooks', { token, json: body });
    expect(res.status, res.text).toBe(201);
    return res.body as { webhookId: string; secret: string; url: string };
  }

  async function liveSession(base: string, tenant: TenantFixture, cohort?: string) {
    const token = await deviceToken(base, tenant.token, `player-${Math.random()}`, cohort);
    const s = await call(base, 'POST', '/client/v1/sessions', { token, json: {} });
    expect(s.status).toBe(201);
    return { token, sessionId: String(s.body.sessionId) };
  }

  async function sendEvents(base: string, device: { token: string; sessionId: string }, events: unknown[]) {
    const res = await call(base, 'POST', `/sessions/${device.sessionId}/Events`, {
      token: device.token,
      json: { events },
    });
    expect(res.status, res.text).toBe(200);
    return res.body as { accepted: number };
  }

  const custom = (id: string) => ({ id, eventType: 'Custom', timestamp: Date.now(), custom01: id });
  const error = (id: string) => ({
    id,
    eventType: 'Error',
    timestamp: Date.now(),
    severity: 'Warning',
    message: `problem ${id}`,
  });

  it('registers, lists, reads, updates and deletes endpoints; the secret is shown only at creation', async () => {
    const { base, tenant, server } = await setup();
    const created = await call(base, 'POST', '/webhooks', {
      token: tenant.token,
      json: {
        url: 'http://127.0.0.1:9/hook',
        description: 'ops',
        eventTypes: ['Error'],
        types: ['session.event'],
      },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      url: 'http://127.0.0.1:9/hook',
      description: 'ops',
      eventTypes: ['Error'],
      types: ['session.event'],
      enabled: true,
    });
    expect(String(created.body.secret)).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(String(created.body.secret).slice(6), 'base64')).toHaveLength(32);
    expect(typeof created.body.createdAt).toBe('number');
    const id = String(created.body.webhookId);

    const list = await call(base, 'GET', '/webhooks', { token: tenant.token });
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({
      page: 1,
      pageSize: 1000,
      totalCount: 1,
      totalPages: 1,
      hasMore: false,
    });
    expect((list.body.webhooks as unknown[]).length).toBe(1);
    expect(list.text).not.toContain('whsec_');

    const one = await call(base, 'GET', `/webhooks/${id}`, { token: tenant.token });
    expect(one.status).toBe(200);
    expect(one.body.secret).toBeUndefined();

    const patched = await call(base, 'PATCH', `/webhooks/${id}`, {
      token: tenant.token,
      json: {
        description: null,
        eventTypes: null,
        types: ['reward.claimed', 'reward.verified'],
        enabled: false,
      },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({
      description: null,
      eventTypes: null,
      types: ['reward.claimed', 'reward.verified'],
      enabled: false,
      disabledReason: 'manual',
    });
    const reenabled = await call(base, 'PATCH', `/webhooks/${id}`, {
      token: tenant.token,
      json: { enabled: true },
    });
    expect(reenabled.body).toMatchObject({ enabled: true, disabledReason: null });

    // The operator sees and manages the same endpoints under the tenant.
    const admin = `/admin/v1/tenants/${tenant.tenantId}/webhooks`;
    const adminList = await call(base, 'GET', admin, { token: server.adminToken });
    expect(adminList.status).toBe(200);
    expect(adminList.body.totalCount).toBe(1);
    const adminCreated = await call(base, 'POST', admin, {
      token: server.adminToken,
      json: { url: 'https://example.com/hook' },
    });
    expect(adminCreated.status).toBe(201);
    expect(adminCreated.body).toMatchObject({ eventTypes: null, types: null, enabled: true });
    expect(
      (
        await call(base, 'GET', `/admin/v1/tenants/00000000-0000-7000-8000-000000000000/webhooks`, {
          token: server.adminToken,
        })
      ).status,
    ).toBe(404);

    const deleted = await call(base, 'DELETE', `/webhooks/${id}`, { token: tenant.token });
    expect(deleted.status).toBe(204);
    expect((await call(base, 'GET', `/webhooks/${id}`, { token: tenant.token })).status).toBe(404);
    expect(
      (await call(base, 'DELETE', `${admin}/${adminCreated.body.webhookId}`, { token: server.adminToken }))
        .status,
    ).toBe(204);
  });

  it("hides another tenant's endpoints (404) and needs the webhooks:manage scope (403)", async () => {
    const { base, tenant, server } = await setup();
    const hook = await register(base, tenant.token, { url: 'http://127.0.0.1:9/hook' });
    const other = await createTenant(base, server.adminToken);
    const routes: [string, string, unknown?][] = [
      ['GET', `/webhooks/${hook.webhookId}`],
      ['PATCH', `/webhooks/${hook.webhookId}`, { description: 'x' }],
      ['DELETE', `/webhooks/${hook.webhookId}`],
      ['POST', `/webhooks/${hook.webhookId}/secret/rotate`],
      ['POST', `/webhooks/${hook.webhookId}/test`],
      ['GET', `/webhooks/${hook.webhookId}/deliveries`],
      ['POST', `/webhooks/${hook.webhookId}/replay`, { since: 0 }],
    ];
    for (const [method, path, json] of routes) {
      const res = await call(base, method, path, { token: other.token, json });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    // Nor through the operator routes of the other tenant.
    const viaOther = await call(
      base,
      'GET',
      `/admin/v1/tenants/${other.tenantId}/webhooks/${hook.webhookId}`,
      {
        token: server.adminToken,
      },
    );
    expect(viaOther.status).toBe(404);
    expect((await call(base, 'GET', '/webhooks', { token: other.token })).body.totalCount).toBe(0);

    const limited = await createTenant(base, server.adminToken, { scopes: ['sessions:read'] });
    const forbidden = await call(base, 'POST', '/webhooks', {
      token: limited.token,
      json: { url: 'http://127.0.0.1:9/hook' },
    });
    expect(forbidden.status).toBe(403);
    expect(forbidden.headers.get('content-type')).toContain('application/problem+json');
    expect(forbidden.body.code).toBe('forbidden');
    expect((await call(base, 'GET', '/webhooks', { token: limited.token })).status).toBe(403);
    expect((await call(base, 'GET', '/webhooks')).status).toBe(401);
  });

  it('refuses bad input with 400 problem documents', async () => {
    const { base, tenant } = await setup();
    const hook = await register(base, tenant.token, { url: 'http://127.0.0.1:9/hook' });
    const bad: [string, string, unknown, string][] = [
      ['POST', '/webhooks', { url: 'ftp://example.com/x' }, 'url'],
      ['POST', '/webhooks', { url: 'not a url' }, 'url'],
      ['POST', '/webhooks', { url: 'https://user:pw@example.com/x' }, 'url'],
      ['POST', '/webhooks', { url: 'https://example.com/x', extra: 1 }, 'extra'],
      ['POST', '/webhooks', { url: 'https://example.com/x', types: ['reward.exploded'] }, 'types[0]'],
      ['POST', '/webhooks', { url: 'https://example.com/x', types: [] }, 'types'],
      ['POST', '/webhooks', { url: 'https://example.com/x', eventTypes: ['Nope'] }, 'eventTypes[0]'],
      ['POST', '/webhooks', { url: 'https://example.com/x', eventTypes: ['Error', 'Error'] }, 'eventTypes'],
      ['POST', '/webhooks', { description: 'no url' }, 'url'],
      ['PATCH', `/webhooks/${hook.webhookId}`, {}, ''],
      ['PATCH', `/webhooks/${hook.webhookId}`, { secret: 'whsec_AAAA' }, 'secret'],
      ['PATCH', `/webhooks/${hook.webhookId}`, { url: 'javascript:alert(1)' }, 'url'],
      ['POST', `/webhooks/${hook.webhookId}/replay`, {}, 'since'],
      ['POST', `/webhooks/${hook.webhookId}/replay`, { since: 'yesterday' }, 'since'],
      ['POST', `/webhooks/${hook.webhookId}/test`, { unexpected: true }, 'unexpected'],
    ];
    for (const [method, path, json, errorPath] of bad) {
      const res = await call(base, method, path, { token: tenant.token, json });
      expect(res.status, `${method} ${path} ${JSON.stringify(json)}: ${res.text}`).toBe(400);
      expect(res.headers.get('content-type')).toContain('application/problem+json');
      expect(res.body.code).toBe('validation_failed');
      const paths = (res.body.errors as { path: string }[]).map((e) => e.path);
      if (errorPath) expect(paths, JSON.stringify(json)).toContain(errorPath);
    }
    const badQuery = await call(base, 'GET', `/webhooks/${hook.webhookId}/deliveries?status=lost`, {
      token: tenant.token,
    });
    expect(badQuery.status).toBe(400);
    const badId = await call(base, 'GET', '/webhooks/not-a-uuid', { token: tenant.token });
    expect(badId.status).toBe(400);
  });

  it('delivers every stored event and reward signal to every matching endpoint, signed', async () => {
    const { base, tenant, server } = await setup();
    const [all, errorsOnly, rewards, otherTenant] = await Promise.all([
      receiver(),
      receiver(),
      receiver(),
      receiver(),
    ]);
    const hAll = await register(base, tenant.token, { url: all.url });
    const hErrors = await register(base, tenant.token, {
      url: errorsOnly.url,
      types: ['session.event'],
      eventTypes: ['Error', 'SessionEnd'],
    });
    const hRewards = await register(base, tenant.token, { url: rewards.url, types: ['reward.claimed'] });
    const other = await createTenant(base, server.adminToken);
    const hOther = await register(base, other.token, { url: otherTenant.url });

    // Several devices at once: their batches share group-commit transactions.
    const devices = await Promise.all(
      [0, 1, 2, 3].map((i) => liveSession(base, tenant, i % 2 ? 'cohort-b' : 'cohort-a')),
    );
    await Promise.all(
      devices.map((d, i) =>
        sendEvents(base, d, [custom(`c${i}-1`), error(`e${i}-1`), custom(`c${i}-2`), error(`e${i}-2`)]),
      ),
    );
    // A duplicate is not stored again, so it is not delivered again either.
    await sendEvents(base, devices[0], [custom('c0-1')]);
    // A server-emitted event: ending a session stores SessionEnd.
    const ended = await call(base, 'POST', `/client/v1/sessions/${devices[3].sessionId}/end`, {
      token: devices[3].token,
      json: {},
    });
    expect(ended.status).toBe(200);

    // Reward signals, as the rewards module writes them: in its own transaction.
    const ctx = server.services;
    await ctx.storage.db.transaction().execute((trx) =>
      ctx.outbox.enqueue(trx, [
        {
          tenantId: tenant.tenantId,
          type: 'reward.claimed',
          data: { claimId: 1, playerId: 'p1' },
          occurredAt: Date.now(),
        },
        { tenantId: tenant.tenantId, type: 'reward.verified', data: { claimId: 1 }, occurredAt: Date.now() },
        { tenantId: other.tenantId, type: 'reward.claimed', data: { claimId: 2 }, occurredAt: Date.now() },
      ]),
    );
    // A rolled-back transaction leaves nothing to deliver.
    await expect(
      ctx.storage.db.transaction().execute(async (trx) => {
        await ctx.outbox.enqueue(trx, [
          {
            tenantId: tenant.tenantId,
            type: 'reward.claimed',
            data: { claimId: 99 },
            occurredAt: Date.now(),
          },
        ]);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');

    const eventCount = 16 + 1; // 4 devices × 4 events, plus one SessionEnd
    await waitFor(
      () => all.received.length >= eventCount + 2,
      15_000,
      'all events at the catch-all endpoint',
    );
    await waitFor(() => errorsOnly.received.length >= 9, 10_000, 'errors and SessionEnd');
    await waitFor(() => rewards.received.length >= 1 && otherTenant.received.length >= 1, 10_000, 'rewards');
    await new Promise((r) => setTimeout(r, 500)); // anything extra would show up by now

    const allMessages = all.received.map((r) => verify(hAll.secret, r));
    expect(allMessages).toHaveLength(eventCount + 2);
    expect(new Set(all.received.map((r) => r.id)).size).toBe(all.received.length);
    const events = allMessages.filter((m) => m.type === 'session.event');
    expect(events.map((m) => m.data.id).sort()).toEqual(
      [
        ...devices.flatMap((_, i) => [`c${i}-1`, `c${i}-2`, `e${i}-1`, `e${i}-2`]),
        events.find((m) => m.data.eventType === 'SessionEnd')?.data.id,
      ].sort(),
    );
    for (const m of events) {
      expect(m.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      const device = devices.find((d) => d.sessionId === m.data.sessionId);
      expect(device).toBeDefined();
      expect(m.data.tenantCohortId).toBe(devices.indexOf(device!) % 2 ? 'cohort-b' : 'cohort-a');
    }
    const c01 = events.find((m) => m.data.id === 'c0-1')!;
    expect(c01.data).toMatchObject({
      eventType: 'Custom',
      custom01: 'c0-1',
      sessionId: devices[0].sessionId,
    });
    expect(allMessages.filter((m) => m.type === 'reward.claimed').map((m) => m.data)).toEqual([
      { claimId: 1, playerId: 'p1' },
    ]);
    expect(allMessages.filter((m) => m.type === 'reward.verified')).toHaveLength(1);

    const errorMessages = errorsOnly.received.map((r) => verify(hErrors.secret, r));
    expect(errorMessages).toHaveLength(9);
    expect(new Set(errorMessages.map((m) => m.data.eventType))).toEqual(new Set(['Error', 'SessionEnd']));
    expect(rewards.received.map((r) => verify(hRewards.secret, r).data)).toEqual([
      { claimId: 1, playerId: 'p1' },
    ]);
    expect(otherTenant.received.map((r) => verify(hOther.secret, r).data)).toEqual([{ claimId: 2 }]);
    // Signed with one endpoint's secret, a message does not verify with another's.
    expect(() => verify(hErrors.secret, all.received[0])).toThrow();

    // The delivery log shows each delivery with its attempt (written just after the answer).
    await waitFor(
      async () =>
        (
          await call<{ deliveries: unknown[] }>(
            base,
            'GET',
            `/webhooks/${hAll.webhookId}/deliveries?status=pending`,
            {
              token: tenant.token,
            },
          )
        ).body.deliveries.length === 0,
      5_000,
      'every result to be written',
    );
    const log = await call<{
      deliveries: { status: string; attempts: { statusCode: number; latencyMs: number }[] }[];
    }>(base, 'GET', `/webhooks/${hRewards.webhookId}/deliveries`, { token: tenant.token });
    expect(log.status).toBe(200);
    expect(log.body.deliveries).toHaveLength(1);
    expect(log.body.deliveries[0]).toMatchObject({ status: 'delivered', type: 'reward.claimed' });
    expect(log.body.deliveries[0].attempts).toHaveLength(1);
    expect(log.body.deliveries[0].attempts[0].statusCode).toBe(200);

    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/liveline_webhook_deliveries_total\{outcome="delivered"\} \d+/);
    expect(metrics).toMatch(/liveline_webhook_attempt_duration_seconds_count\{result="success"\} \d+/);
    expect(metrics).toContain('liveline_webhook_outbox_depth 0');
    expect(metrics).toContain('liveline_webhook_outbox_oldest_pending_age_seconds 0');
  });

  it('a receiver that is down and comes back gets everything', async () => {
    const { base, tenant } = await setup();
    const r = await receiver();
    const hook = await register(base, tenant.token, { url: r.url });
    await r.stop();
    const device = await liveSession(base, tenant);
    const ids = Array.from({ length: 30 }, (_, i) => `down-${i}`);
    await sendEvents(base, device, ids.map(custom));
    // Give the first attempts time to fail (connection refused) before the receiver returns.
    await waitFor(
      async () => {
        const log = await call<{ deliveries: { attempts: unknown[] }[] }>(
          base,
          'GET',
          `/webhooks/${hook.webhookId}/deliveries?limit=1000`,
          { token: tenant.token },
        );
        return log.body.deliveries.length === 30 && log.body.deliveries.every((d) => d.attempts.length >= 1);
      },
      10_000,
      'first attempts to fail',
    );
    const failedMetrics = await (await fetch(`${base}/metrics`)).text();
    expect(failedMetrics).toMatch(/liveline_webhook_deliveries_total\{outcome="retrying"\} \d+/);
    expect(failedMetrics).toMatch(/liveline_webhook_outbox_depth 30/);
    await r.restart();
    await waitFor(
      () => new Set(r.received.map((x) => x.id)).size >= 30,
      15_000,
      'every delivery after the return',
    );
    const got = r.received.map((x) => verify(hook.secret, x).data.id);
    expect(new Set(got)).toEqual(new Set(ids));
    type Log = {
      deliveries: { status: string; attempts: { error: string | null; statusCode: number | null }[] }[];
    };
    const delivered = async () =>
      (
        await call<Log>(base, 'GET', `/webhooks/${hook.webhookId}/deliveries?status=delivered&limit=1000`, {
          token: tenant.token,
        })
      ).body;
    // Results are written just after the answers come in.
    await waitFor(
      async () => (await delivered()).deliveries.length === 30,
      5_000,
      'the log to show 30 delivered',
    );
    const log = { body: await delivered() };
    for (const d of log.body.deliveries) {
      expect(d.attempts.length).toBeGreaterThanOrEqual(2);
      expect(d.attempts[0].statusCode).toBeNull();
      expect(d.attempts[0].error).toMatch(/ECONNREFUSED|refused|closed|socket/i);
      expect(d.attempts.at(-1)!.statusCode).toBe(200);
    }
  });

  it('a receiver that hangs does not delay deliveries to another endpoint', async () => {
    const { base, tenant } = await setup({
      LIVELINE_WEBHOOK_CONCURRENCY: '4',
      LIVELINE_WEBHOOK_ENDPOINT_CONCURRENCY: '2',
    });
    const hanging = await receiver({ behaviour: () => 'hang' });
    const fine = await receiver();
    await register(base, tenant.token, { url: hanging.url });
    const device = await liveSession(base, tenant);
    // A backlog for the hanging endpoint alone: its due rows come first in due order.
    await sendEvents(
      base,
      device,
      Array.from({ length: 500 }, (_, i) => custom(`old-${i}`)),
    );
    await waitFor(() => hanging.received.length >= 2, 5_000, 'the hanging endpoint to hold its slots');
    const hFine = await register(base, tenant.token, { url: fine.url });
    const started = Date.now();
    const ids = Array.from({ length: 40 }, (_, i) => `h-${i}`);
    for (let i = 0; i < ids.length; i += 10) await sendEvents(base, device, ids.slice(i, i + 10).map(custom));
    await waitFor(() => fine.received.length >= 40, 5_000, 'the healthy endpoint to get everything');
    // The attempts to the hanging receiver are still waiting out their 10 s timeout.
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(hanging.received.length).toBeLessThanOrEqual(2);
    expect(new Set(fine.received.map((r) => verify(hFine.secret, r).data.id))).toEqual(new Set(ids));
  });

  it('retry and replay resend with the same webhook-id; a delivery fails after the last retry', async () => {
    const { base, tenant } = await setup({ LIVELINE_WEBHOOK_RETRY_SCHEDULE: '0,1' });
    let status = 500;
    const r = await receiver({ behaviour: () => status });
    const hook = await register(base, tenant.token, { url: r.url });
    const device = await liveSession(base, tenant);
    const t0 = Date.now();
    await sendEvents(base, device, [custom('r-1'), custom('r-2')]);
    type Log = {
      deliveries: {
        deliveryId: string;
        status: string;
        attempts: {
          statusCode: number | null;
          latencyMs: number;
          error: string | null;
          attemptedAt: number;
        }[];
      }[];
    };
    const logOf = async (query = '') =>
      (
        await call<Log>(base, 'GET', `/webhooks/${hook.webhookId}/deliveries${query}`, {
          token: tenant.token,
        })
      ).body;
    await waitFor(
      async () => (await logOf('?status=failed')).deliveries.length === 2,
      10_000,
      'both to fail',
    );
    expect(r.received).toHaveLength(6); // 3 attempts each: the first and 2 retries
    const failed = (await logOf()).deliveries;
    for (const d of failed) {
      expect(d.status).toBe('failed');
      expect(d.attempts.map((a) => a.statusCode)).toEqual([500, 500, 500]);
      expect(d.attempts.every((a) => a.error === 'HTTP 500' && a.latencyMs >= 0 && a.attemptedAt >= t0)).toBe(
        true,
      );
      // Every attempt of one delivery carries the same webhook-id: the delivery id.
      expect(r.received.filter((x) => x.id === d.deliveryId)).toHaveLength(3);
    }

    status = 200;
    const [target] = failed;
    const retried = await call(
      base,
      'POST',
      `/webhooks/${hook.webhookId}/deliveries/${target.deliveryId}/retry`,
      {
        token: tenant.token,
      },
    );
    expect(retried.status, retried.text).toBe(202);
    expect(retried.body.deliveryId).toBe(target.deliveryId);
    await waitFor(() => r.received.length >= 7, 5_000, 'the retried delivery');
    expect(r.received[6].id).toBe(target.deliveryId);
    expect(r.received[6].body).toBe(r.received.find((x) => x.id === target.deliveryId)!.body);
    verify(hook.secret, r.received[6]);
    const statusOf = async (deliveryId: string) =>
      (
        await call(base, 'GET', `/webhooks/${hook.webhookId}/deliveries/${deliveryId}`, {
          token: tenant.token,
        })
      ).body.status;
    await waitFor(async () => (await statusOf(target.deliveryId)) === 'delivered', 5_000, 'the retry result');
    const one = await call<Log['deliveries'][number]>(
      base,
      'GET',
      `/webhooks/${hook.webhookId}/deliveries/${target.deliveryId}`,
      { token: tenant.token },
    );
    expect(one.body.status).toBe('delivered');
    expect(one.body.attempts.map((a) => a.statusCode)).toEqual([500, 500, 500, 200]);

    const replay = await call(base, 'POST', `/webhooks/${hook.webhookId}/replay`, {
      token: tenant.token,
      json: { since: t0 - 1000 },
    });
    expect(replay.status).toBe(202);
    expect(replay.body).toEqual({ replayed: 2 });
    await waitFor(() => r.received.length >= 9, 5_000, 'the replayed deliveries');
    expect(new Set(r.received.slice(7).map((x) => x.id))).toEqual(new Set(failed.map((d) => d.deliveryId)));
    // Same body on every resend; a fresh signature each time.
    for (const x of r.received.slice(7)) {
      expect(x.body).toBe(r.received.find((y) => y.id === x.id)!.body);
      verify(hook.secret, x);
    }
    await waitFor(
      async () => (await logOf('?status=delivered')).deliveries.length === 2,
      5_000,
      'replay results',
    );
    // A replay from the future resends nothing.
    const none = await call(base, 'POST', `/webhooks/${hook.webhookId}/replay`, {
      token: tenant.token,
      json: { since: Date.now() + 60_000 },
    });
    expect(none.body).toEqual({ replayed: 0 });
    const unknown = await call(
      base,
      'POST',
      `/webhooks/${hook.webhookId}/deliveries/00000000-0000-7000-8000-000000000000/retry`,
      {
        token: tenant.token,
      },
    );
    expect(unknown.status).toBe(404);
  });

  it('pages through the delivery log with a cursor and filters by status', async () => {
    const { base, tenant } = await setup();
    const r = await receiver();
    const hook = await register(base, tenant.token, { url: r.url });
    const device = await liveSession(base, tenant);
    await sendEvents(
      base,
      device,
      Array.from({ length: 5 }, (_, i) => custom(`p-${i}`)),
    );
    await waitFor(() => r.received.length >= 5, 5_000, 'deliveries');
    const seen: string[] = [];
    let after: string | null = null;
    do {
      const query: string = after ? `?limit=2&after=${after}` : '?limit=2';
      const page = await call<{
        deliveries: { deliveryId: string }[];
        nextCursor: string | null;
        hasMore: boolean;
      }>(base, 'GET', `/webhooks/${hook.webhookId}/deliveries${query}`, { token: tenant.token });
      expect(page.status).toBe(200);
      seen.push(...page.body.deliveries.map((d) => d.deliveryId));
      after = page.body.nextCursor;
      expect(page.body.hasMore).toBe(after !== null);
    } while (after);
    expect(seen).toHaveLength(5);
    expect([...seen].sort().reverse()).toEqual(seen); // newest first
    const pending = await call(base, 'GET', `/webhooks/${hook.webhookId}/deliveries?status=pending`, {
      token: tenant.token,
    });
    expect(pending.body.deliveries).toEqual([]);
  });

  it('after a rotation, deliveries carry both signatures: the old and the new secret verify', async () => {
    const { base, tenant } = await setup();
    const r = await receiver();
    const hook = await register(base, tenant.token, { url: r.url });
    const rotated = await call(base, 'POST', `/webhooks/${hook.webhookId}/secret/rotate`, {
      token: tenant.token,
    });
    expect(rotated.status, rotated.text).toBe(200);
    const newSecret = String(rotated.body.secret);
    expect(newSecret).toMatch(/^whsec_/);
    expect(newSecret).not.toBe(hook.secret);
    expect(Number(rotated.body.previousSecretExpiresAt) - Date.now()).toBeGreaterThan(23 * 3600_000);
    expect(
      (await call(base, 'GET', `/webhooks/${hook.webhookId}`, { token: tenant.token })).text,
    ).not.toContain('whsec_');

    const test = await call(base, 'POST', `/webhooks/${hook.webhookId}/test`, { token: tenant.token });
    expect(test.status, test.text).toBe(202);
    expect(test.body).toMatchObject({ type: 'webhook.test', status: 'pending' });
    await waitFor(() => r.received.length >= 1, 5_000, 'the test delivery');
    const [got] = r.received;
    expect(got.id).toBe(test.body.deliveryId);
    expect(got.signature.split(' ')).toHaveLength(2);
    expect(verify(newSecret, got)).toMatchObject({
      type: 'webhook.test',
      data: { webhookId: hook.webhookId },
    });
    expect(verify(hook.secret, got).type).toBe('webhook.test');
    expect(() => verify(`whsec_${Buffer.alloc(32, 7).toString('base64')}`, got)).toThrow();
  });

  it('disables an endpoint after nothing but failures for the configured time; PATCH enabled re-enables it', async () => {
    const { base, tenant } = await setup({
      LIVELINE_WEBHOOK_DISABLE_AFTER_S: '1',
      LIVELINE_WEBHOOK_RETRY_SCHEDULE: '1,1,1,1,1',
    });
    const r = await receiver({ behaviour: () => 503 });
    const hook = await register(base, tenant.token, { url: r.url });
    const device = await liveSession(base, tenant);
    await sendEvents(base, device, [custom('x-1')]);
    await waitFor(
      async () =>
        (await call(base, 'GET', `/webhooks/${hook.webhookId}`, { token: tenant.token })).body.enabled ===
        false,
      10_000,
      'the endpoint to be disabled',
    );
    const disabled = await call(base, 'GET', `/webhooks/${hook.webhookId}`, { token: tenant.token });
    expect(disabled.body.disabledReason).toBe('failing');
    const log = await call<{ deliveries: { status: string; lastError: string }[] }>(
      base,
      'GET',
      `/webhooks/${hook.webhookId}/deliveries`,
      { token: tenant.token },
    );
    expect(log.body.deliveries[0].status).toBe('failed');
    // While disabled, nothing new is queued for it, and a test is refused.
    await sendEvents(base, device, [custom('x-2')]);
    expect(
      (await call(base, 'POST', `/webhooks/${hook.webhookId}/test`, { token: tenant.token })).status,
    ).toBe(409);

    r.setBehaviour(() => 204);
    const enabled = await call(base, 'PATCH', `/webhooks/${hook.webhookId}`, {
      token: tenant.token,
      json: { enabled: true },
    });
    expect(enabled.body).toMatchObject({ enabled: true, disabledReason: null });
    const before = r.received.length;
    await sendEvents(base, device, [custom('x-3')]);
    await waitFor(() => r.received.length > before, 5_000, 'a delivery after re-enabling');
    expect(r.received.slice(before).map((x) => verify(hook.secret, x).data.id)).toEqual(['x-3']);
  });

  it('refuses private targets by default', async () => {
    const server = await startTestServer(backend, {});
    servers.push(server);
    const tenant = await createTenant(server.url, server.adminToken);
    for (const url of [
      'http://127.0.0.1:8080/x',
      'http://localhost/x',
      'http://[::1]/x',
      'http://169.254.169.254/latest/meta-data',
      'http://10.1.2.3/x',
      'http://192.168.1.1/x',
      'http://172.20.0.1/x',
      'http://100.64.0.1/x',
      'http://[::ffff:127.0.0.1]/x',
      'http://[fd00::1]/x',
      'http://[fe80::1]/x',
      'http://0x7f000001/x',
      'http://0.0.0.0/x',
    ]) {
      const res = await call(server.url, 'POST', '/webhooks', { token: tenant.token, json: { url } });
      expect(res.status, url).toBe(400);
      expect(res.body.code).toBe('validation_failed');
      expect((res.body.errors as { path: string }[])[0].path).toBe('url');
    }
    // A public literal address passes the guard.
    const ok = await call(server.url, 'POST', '/webhooks', {
      token: tenant.token,
      json: { url: 'https://93.184.215.14/x' },
    });
    expect(ok.status, ok.text).toBe(201);
    // So does changing it to a private one, not.
    const patched = await call(server.url, 'PATCH', `/webhooks/${ok.body.webhookId}`, {
      token: tenant.token,
      json: { url: 'http://127.0.0.1/x' },
    });
    expect(patched.status).toBe(400);
  });
});

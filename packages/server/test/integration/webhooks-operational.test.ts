import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { call, createTenant } from '../helpers/api.ts';
import { type Behaviour, type Receiver, startReceiver, waitFor } from '../helpers/receiver.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * Operational webhooks (CONTRACT §16): `webhook.endpoint.disabled` and `webhook.endpoint.recovered`,
 * against real local receivers, on every backend. Failing endpoints are driven by real HTTP answers
 * (503) and the dispatcher's own retry schedule and disable-after setting, shortened to a second.
 */

const FAST = {
  LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true',
  LIVELINE_WEBHOOK_RETRY_SCHEDULE: '1,1,1,1,1',
  LIVELINE_WEBHOOK_DISABLE_AFTER_S: '1',
  LIVELINE_WEBHOOK_POLL_MS: '100',
};

const OPERATIONAL = ['webhook.endpoint.disabled', 'webhook.endpoint.recovered'];

interface Message {
  type: string;
  timestamp: string;
  data: Record<string, unknown>;
}

interface Hook {
  webhookId: string;
  secret: string;
  url: string;
}

describe.each(backends)('operational webhooks (%s)', (backend) => {
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

  async function receiver(behaviour?: Behaviour) {
    const r = await startReceiver({ behaviour });
    receivers.push(r);
    return r;
  }

  async function register(base: string, token: string, url: string, types?: string[]) {
    const res = await call(base, 'POST', '/webhooks', { token, json: { url, types } });
    expect(res.status, res.text).toBe(201);
    return res.body as unknown as Hook;
  }

  /** Every message the receiver got, each verified with the endpoint's secret (Standard Webhooks). */
  const verified = (r: Receiver, hook: Hook) =>
    r.received.map((x) => new Webhook(hook.secret).verify(x.body, x.headers) as Message);
  const ofType = (r: Receiver, hook: Hook, type: string) => verified(r, hook).filter((m) => m.type === type);

  const get = async (base: string, token: string, hook: Hook) =>
    (await call(base, 'GET', `/webhooks/${hook.webhookId}`, { token })).body;

  /**
   * Sends a `webhook.test` to `hook` and waits for it: a message written before it (in an earlier
   * transaction) has been claimed and sent by then, so what has not arrived was never written.
   */
  async function marker(base: string, token: string, r: Receiver, hook: Hook) {
    const sent = await call(base, 'POST', `/webhooks/${hook.webhookId}/test`, { token });
    expect(sent.status, sent.text).toBe(202);
    await waitFor(() => r.received.some((x) => x.id === sent.body.deliveryId), 10_000, 'the marker');
  }

  it('a failing endpoint is disabled: the tenant’s other endpoints that name the type hear of it once, nobody else does; after a re-enable its first success reports the recovery to it and to them', async () => {
    const { server, base, tenant } = await setup();
    const failing = await receiver(() => 503);
    const watching = await receiver();
    const unfiltered = await receiver();
    const eventsOnly = await receiver();
    // The failing endpoint names both types: it must still never get its own disabled message.
    // (`webhook.test`, the markers, goes to any endpoint whatever its filters.)
    const f = await register(base, tenant.token, failing.url, OPERATIONAL);
    const w = await register(base, tenant.token, watching.url, OPERATIONAL);
    const n = await register(base, tenant.token, unfiltered.url);
    const e = await register(base, tenant.token, eventsOnly.url, ['session.event']);
    const other = await createTenant(base, server.adminToken, { name: 'other' });
    const elsewhere = await receiver();
    await register(base, other.token, elsewhere.url, OPERATIONAL);

    const before = Date.now();
    await marker(base, tenant.token, failing, f); // it arrives, answered 503: retried, then disabled
    await waitFor(
      async () => (await get(base, tenant.token, f)).enabled === false,
      15_000,
      'the failing endpoint to be disabled',
    );
    expect(await get(base, tenant.token, f)).toMatchObject({ enabled: false, disabledReason: 'failing' });
    await waitFor(
      () => ofType(watching, w, 'webhook.endpoint.disabled').length > 0,
      10_000,
      'webhook.endpoint.disabled at the other endpoint',
    );
    const [disabled] = ofType(watching, w, 'webhook.endpoint.disabled');
    expect(disabled.data).toEqual({
      webhookId: f.webhookId,
      url: f.url,
      reason: 'failing',
      disabledAt: expect.any(Number),
    });
    expect(disabled.data.disabledAt as number).toBeGreaterThanOrEqual(before);
    expect(disabled.data.disabledAt as number).toBeLessThanOrEqual(Date.now());
    expect(new Date(disabled.timestamp).getTime()).toBe(disabled.data.disabledAt);

    // Re-enabling alone reports nothing; the markers flush anything already written.
    failing.setBehaviour(() => 204);
    const enabled = await call(base, 'PATCH', `/webhooks/${f.webhookId}`, {
      token: tenant.token,
      json: { enabled: true },
    });
    expect(enabled.body).toMatchObject({ enabled: true, disabledReason: null });
    await marker(base, tenant.token, watching, w);
    expect(ofType(watching, w, 'webhook.endpoint.recovered')).toEqual([]);

    // Its first success after the re-enable (a test send) reports the recovery, to it and to the others.
    const failed = failing.received.length;
    await marker(base, tenant.token, failing, f);
    await waitFor(
      () =>
        ofType(watching, w, 'webhook.endpoint.recovered').length > 0 &&
        ofType(failing, f, 'webhook.endpoint.recovered').length > 0,
      10_000,
      'webhook.endpoint.recovered at both endpoints',
    );
    expect(failing.received.length).toBeGreaterThan(failed);
    const [recovered] = ofType(watching, w, 'webhook.endpoint.recovered');
    expect(recovered.data).toEqual({
      webhookId: f.webhookId,
      url: f.url,
      failingSince: expect.any(Number),
      recoveredAt: expect.any(Number),
    });
    // The outage began with the first failure, before the endpoint was disabled.
    expect(recovered.data.failingSince as number).toBeGreaterThanOrEqual(before);
    expect(recovered.data.failingSince as number).toBeLessThan(disabled.data.disabledAt as number);
    expect(recovered.data.recoveredAt as number).toBeGreaterThan(disabled.data.disabledAt as number);
    expect(ofType(failing, f, 'webhook.endpoint.recovered')[0].data).toEqual(recovered.data);

    // Flush, then count: one of each at the watcher; never a disabled message at the disabled
    // endpoint; nothing operational at endpoints that do not name the types, nor at another tenant.
    await marker(base, tenant.token, watching, w);
    await marker(base, tenant.token, failing, f);
    expect(ofType(watching, w, 'webhook.endpoint.disabled')).toHaveLength(1);
    expect(ofType(watching, w, 'webhook.endpoint.recovered')).toHaveLength(1);
    expect(ofType(failing, f, 'webhook.endpoint.disabled')).toEqual([]);
    expect(ofType(failing, f, 'webhook.endpoint.recovered')).toHaveLength(1);
    await marker(base, tenant.token, unfiltered, n);
    await marker(base, tenant.token, eventsOnly, e);
    expect(verified(unfiltered, n).map((m) => m.type)).toEqual(['webhook.test']);
    expect(verified(eventsOnly, e).map((m) => m.type)).toEqual(['webhook.test']);
    expect(elsewhere.received).toEqual([]);
    // The delivery log shows them like any other message.
    const log = await call<{ deliveries: { type: string; status: string }[] }>(
      base,
      'GET',
      `/webhooks/${w.webhookId}/deliveries`,
      { token: tenant.token },
    );
    expect(log.body.deliveries.filter((d) => OPERATIONAL.includes(d.type)).map((d) => d.status)).toEqual([
      'delivered',
      'delivered',
    ]);
  });

  it('a manual disable is reported with reason manual, once, to the other endpoints; re-enabling a healthy endpoint reports nothing', async () => {
    const { base, tenant, server } = await setup();
    const target = await receiver();
    const watching = await receiver();
    const onlyRecovered = await receiver();
    const t = await register(base, tenant.token, target.url, OPERATIONAL);
    const w = await register(base, tenant.token, watching.url, ['webhook.endpoint.disabled']);
    const r = await register(base, tenant.token, onlyRecovered.url, ['webhook.endpoint.recovered']);

    const before = Date.now();
    const off = await call(base, 'PATCH', `/webhooks/${t.webhookId}`, {
      token: tenant.token,
      json: { enabled: false },
    });
    expect(off.status, off.text).toBe(200);
    expect(off.body).toMatchObject({ enabled: false, disabledReason: 'manual' });
    expect(await get(base, tenant.token, t)).toMatchObject({ enabled: false, disabledReason: 'manual' });
    // Disabling what is disabled already, through the operator's route this time, changes nothing.
    const again = await call(base, 'PATCH', `/admin/v1/tenants/${tenant.tenantId}/webhooks/${t.webhookId}`, {
      token: server.adminToken,
      json: { enabled: false },
    });
    expect(again.body).toMatchObject({ enabled: false, disabledReason: 'manual' });

    await waitFor(
      () => ofType(watching, w, 'webhook.endpoint.disabled').length > 0,
      10_000,
      'webhook.endpoint.disabled',
    );
    const [disabled] = ofType(watching, w, 'webhook.endpoint.disabled');
    expect(disabled.data).toEqual({
      webhookId: t.webhookId,
      url: t.url,
      reason: 'manual',
      disabledAt: expect.any(Number),
    });
    expect(disabled.data.disabledAt as number).toBeGreaterThanOrEqual(before);

    const on = await call(base, 'PATCH', `/webhooks/${t.webhookId}`, {
      token: tenant.token,
      json: { enabled: true },
    });
    expect(on.body).toMatchObject({ enabled: true, disabledReason: null });
    await marker(base, tenant.token, target, t); // a success of a healthy endpoint: nothing to report
    await marker(base, tenant.token, watching, w);
    await marker(base, tenant.token, onlyRecovered, r);
    expect(ofType(watching, w, 'webhook.endpoint.disabled')).toHaveLength(1);
    expect(verified(onlyRecovered, r).map((m) => m.type)).toEqual(['webhook.test']);
    expect(verified(target, t).map((m) => m.type)).toEqual(['webhook.test']);
  });

  it('one failure that its retry mends is not an outage; a failed retry is, and its end is reported', async () => {
    // Failing for a minute would disable it; these failures last a second or two.
    const { base, tenant } = await setup({ LIVELINE_WEBHOOK_DISABLE_AFTER_S: '60' });
    let failures = 1;
    const flaky = await receiver(() => (failures-- > 0 ? 503 : 200));
    const watching = await receiver();
    const f = await register(base, tenant.token, flaky.url, OPERATIONAL);
    const w = await register(base, tenant.token, watching.url, OPERATIONAL);

    // 503, then the retry a second later: 200.
    await marker(base, tenant.token, flaky, f);
    await waitFor(() => flaky.received.length >= 2, 10_000, 'the retry');
    await waitFor(
      async () => {
        const log = await call<{ deliveries: { status: string }[] }>(
          base,
          'GET',
          `/webhooks/${f.webhookId}/deliveries`,
          { token: tenant.token },
        );
        return log.body.deliveries[0]?.status === 'delivered';
      },
      10_000,
      'the retry to be recorded',
    );
    await marker(base, tenant.token, watching, w);
    expect(verified(watching, w).map((m) => m.type)).toEqual(['webhook.test']);

    // 503 twice (the first attempt and its retry), then 200 on the second retry: reported.
    failures = 2;
    const start = Date.now();
    const seen = flaky.received.length;
    await call(base, 'POST', `/webhooks/${f.webhookId}/test`, { token: tenant.token });
    await waitFor(
      () => ofType(watching, w, 'webhook.endpoint.recovered').length > 0,
      15_000,
      'webhook.endpoint.recovered',
    );
    expect(flaky.received.length - seen).toBeGreaterThanOrEqual(2);
    const [recovered] = ofType(watching, w, 'webhook.endpoint.recovered');
    expect(recovered.data).toMatchObject({ webhookId: f.webhookId, url: f.url });
    expect(recovered.data.failingSince as number).toBeGreaterThanOrEqual(start);
    expect(recovered.data.recoveredAt as number).toBeGreaterThan(recovered.data.failingSince as number);
    expect(await get(base, tenant.token, f)).toMatchObject({ enabled: true, disabledReason: null });
    await waitFor(
      () => ofType(flaky, f, 'webhook.endpoint.recovered').length > 0,
      10_000,
      'webhook.endpoint.recovered at the endpoint itself',
    );
    await marker(base, tenant.token, watching, w);
    expect(ofType(watching, w, 'webhook.endpoint.recovered')).toHaveLength(1);
  });
});

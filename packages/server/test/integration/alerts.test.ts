import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { type Receiver, startReceiver, waitFor } from '../helpers/receiver.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

/** Alert rules (CONTRACT §13) over real HTTP, with a real webhook receiver, on every backend. */

const ENV = {
  LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true',
  LIVELINE_WEBHOOK_RETRY_SCHEDULE: '1,1,1',
  LIVELINE_WEBHOOK_POLL_MS: '100',
  LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
  LIVELINE_RATE_LIMIT_TENANT_RPS: '0',
  LIVELINE_QUOTA_ALERT_RULES: '5',
};

type Json = Record<string, unknown>;
interface Message {
  type: string;
  timestamp: string;
  data: Json & { event: Json | null };
}

const BATTERY = { name: 'Low battery', eventType: 'Health', field: 'batteryLevel', op: 'lt', value: 15 };
/** Event times: a minute ago plus `s` seconds (well inside the accepted window). */
const T0 = Date.now() - 3_600_000;
const at = (s: number) => T0 + s * 1000;

describe.each(backends)('alert rules (%s)', (backend) => {
  let server: TestServer;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    server = await startTestServer(backend, ENV);
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    await server?.close();
  });

  /** A tenant with an endpoint taking only alert messages, and a way to read them verified. */
  async function setup() {
    const tenant = await createTenant(server.url, server.adminToken);
    const receiver = await startReceiver();
    receivers.push(receiver);
    const hook = await api(tenant, 'POST', '/webhooks', {
      url: receiver.url,
      types: ['alert.triggered', 'alert.resolved'],
    });
    expect(hook.status, hook.text).toBe(201);
    const signer = new Webhook(String(hook.body.secret));
    const messages = () => receiver.received.map((r) => signer.verify(r.body, r.headers) as Message);
    const waitForMessages = async (count: number, what: string) => {
      await waitFor(() => receiver.received.length >= count, 15_000, what);
      return messages();
    };
    return { tenant, receiver, messages, waitForMessages };
  }

  function api(tenant: TenantFixture, method: string, path: string, json?: unknown) {
    return call(server.url, method, path, { token: tenant.token, json });
  }

  async function createAlert(tenant: TenantFixture, body: Json) {
    const res = await api(tenant, 'POST', '/alerts', body);
    expect(res.status, res.text).toBe(201);
    return res.body as Json & { alertId: string };
  }

  async function device(tenant: TenantFixture, cohort?: string) {
    const playerId = `player-${randomUUID()}`;
    const token = await deviceToken(server.url, tenant.token, playerId, cohort);
    const s = await call(server.url, 'POST', '/client/v1/sessions', { token, json: {} });
    expect(s.status, s.text).toBe(201);
    const sessionId = String(s.body.sessionId);
    return {
      playerId,
      sessionId,
      token,
      async send(...events: Json[]) {
        const res = await call(server.url, 'POST', `/sessions/${sessionId}/Events`, {
          token,
          json: { events: events.map((e) => ({ id: randomUUID(), ...e })) },
        });
        expect(res.status, res.text).toBe(200);
      },
    };
  }

  const health = (s: number, fields: Json) => ({ eventType: 'Health', timestamp: at(s), ...fields });

  /** Gives the dispatcher time to send anything more (asserting that nothing more comes). */
  const settle = () => new Promise((r) => setTimeout(r, 700));

  it('creates, lists, reads, changes and deletes rules', async () => {
    const { tenant } = await setup();
    const created = await createAlert(tenant, BATTERY);
    expect(created).toMatchObject({
      ...BATTERY,
      tenantCohortId: null,
      forSeconds: 0,
      cooldownSeconds: 300,
    });
    const list = await api(tenant, 'GET', '/alerts');
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ page: 1, totalCount: 1, totalPages: 1, hasMore: false });
    expect((list.body.alerts as Json[]).map((a) => a.alertId)).toEqual([created.alertId]);
    const page = await api(tenant, 'GET', '/alerts/page/1?pageSize=1');
    expect(page.body).toMatchObject({ page: 1, pageSize: 1, totalCount: 1 });
    const one = await api(tenant, 'GET', `/alerts/${created.alertId}`);
    expect(one.body).toEqual(created);
    const changed = await api(tenant, 'PATCH', `/alerts/${created.alertId}`, {
      name: 'Very low battery',
      value: 5,
      tenantCohortId: 'class-7b',
      forSeconds: 10,
    });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body).toMatchObject({
      name: 'Very low battery',
      value: 5,
      tenantCohortId: 'class-7b',
      forSeconds: 10,
    });
    const cleared = await api(tenant, 'PATCH', `/alerts/${created.alertId}`, { tenantCohortId: null });
    expect(cleared.body.tenantCohortId).toBeNull();
    const gone = await api(tenant, 'DELETE', `/alerts/${created.alertId}`);
    expect(gone.status).toBe(204);
    expect((await api(tenant, 'GET', `/alerts/${created.alertId}`)).status).toBe(404);
    expect((await api(tenant, 'GET', `/alerts/${created.alertId}/incidents`)).status).toBe(404);
  });

  it.each([
    [
      'a field the event type does not have',
      { ...BATTERY, eventType: 'Error' },
      'field',
      'severity, message',
    ],
    ['an unknown event type', { ...BATTERY, eventType: 'Weather' }, 'eventType', 'Health'],
    ['a text value on a numeric field', { ...BATTERY, value: '15' }, 'value', 'number'],
    [
      'an order on an enumerated field',
      { ...BATTERY, eventType: 'Error', field: 'severity', value: 'Critical' },
      'op',
      'eq',
    ],
    [
      'a value the enumeration does not allow',
      { ...BATTERY, eventType: 'Error', field: 'severity', op: 'eq', value: 'Fatal' },
      'value',
      'Critical',
    ],
    ['an unknown operator', { ...BATTERY, op: 'between' }, 'op', ''],
    ['an unknown member', { ...BATTERY, severity: 'x' }, '', ''],
    ['no name', { eventType: 'Health', field: 'fps', op: 'lt', value: 3 }, 'name', ''],
    ['a negative forSeconds', { ...BATTERY, forSeconds: -1 }, 'forSeconds', ''],
  ])('refuses %s (400, nothing written)', async (_what, body, path, mention) => {
    const { tenant } = await setup();
    const res = await api(tenant, 'POST', '/alerts', body);
    expect(res.status, res.text).toBe(400);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(res.body.code).toBe('validation_failed');
    const errors = res.body.errors as { path: string; message: string }[];
    expect(errors.some((e) => e.path.includes(path))).toBe(true);
    if (mention) expect(JSON.stringify(res.body)).toContain(mention);
    expect((await api(tenant, 'GET', '/alerts')).body.totalCount).toBe(0);
  });

  it('refuses a bad change and keeps the rule as it was', async () => {
    const { tenant } = await setup();
    const created = await createAlert(tenant, BATTERY);
    const res = await api(tenant, 'PATCH', `/alerts/${created.alertId}`, { eventType: 'Error' });
    expect(res.status).toBe(400);
    expect(res.body.detail).toContain('severity, message');
    expect((await api(tenant, 'GET', `/alerts/${created.alertId}`)).body).toEqual(created);
  });

  it('keeps the per-tenant quota (409 alert_rule_quota_exceeded)', async () => {
    const { tenant } = await setup();
    for (let i = 0; i < 5; i++) await createAlert(tenant, { ...BATTERY, name: `rule ${i}` });
    const res = await api(tenant, 'POST', '/alerts', BATTERY);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ code: 'alert_rule_quota_exceeded', limit: 5 });
  });

  it('Health batteryLevel lt 15: one signed alert.triggered while it holds, alert.resolved after', async () => {
    const { tenant, waitForMessages, messages } = await setup();
    const rule = await createAlert(tenant, BATTERY);
    const d = await device(tenant);
    await d.send(health(0, { batteryLevel: 40 }), health(10, { fps: 30 }));
    await d.send(health(20, { batteryLevel: 12 }));
    const [triggered] = await waitForMessages(1, 'alert.triggered');
    expect(triggered.type).toBe('alert.triggered');
    expect(triggered.data).toMatchObject({
      alertId: rule.alertId,
      name: 'Low battery',
      sessionId: d.sessionId,
      playerId: d.playerId,
      tenantCohortId: null,
      event: { eventType: 'Health', batteryLevel: 12, timestamp: at(20), sessionId: d.sessionId },
    });
    // Still low, and an event without the field: nothing more.
    await d.send(health(30, { batteryLevel: 10 }), health(35, { fps: 90 }));
    await settle();
    expect(messages()).toHaveLength(1);
    await d.send(health(40, { batteryLevel: 60 }));
    const [, resolved] = await waitForMessages(2, 'alert.resolved');
    expect(resolved.type).toBe('alert.resolved');
    expect(resolved.data).toMatchObject({
      alertId: rule.alertId,
      incidentId: triggered.data.incidentId,
      sessionId: d.sessionId,
      playerId: d.playerId,
      reason: 'condition_cleared',
      event: { batteryLevel: 60 },
    });
    const incidents = await api(tenant, 'GET', `/alerts/${rule.alertId}/incidents`);
    expect(incidents.status).toBe(200);
    expect(incidents.body).toMatchObject({ totalCount: 1, hasMore: false });
    expect((incidents.body.incidents as Json[])[0]).toMatchObject({
      incidentId: triggered.data.incidentId,
      sessionId: d.sessionId,
      playerId: d.playerId,
      status: 'resolved',
      triggeredAt: at(20),
      notifications: 1,
      resolvedAt: at(40),
      resolvedReason: 'condition_cleared',
    });
    const open = await api(tenant, 'GET', `/alerts/${rule.alertId}/incidents?status=open`);
    expect(open.body.totalCount).toBe(0);
  });

  it('fps lt 45 for 30 s: triggers at 31 s, and a non-matching event between resets the run', async () => {
    const { tenant, waitForMessages, messages } = await setup();
    const rule = await createAlert(tenant, {
      ...BATTERY,
      name: 'Slow',
      field: 'fps',
      value: 45,
      forSeconds: 30,
    });
    const steady = await device(tenant);
    await steady.send(health(0, { fps: 30 }), health(10, { fps: 31 }));
    await steady.send(health(20, { fps: 32 }));
    await settle();
    expect(messages()).toHaveLength(0);
    await steady.send(health(31, { fps: 33 }));
    const [triggered] = await waitForMessages(1, 'alert.triggered at 31 s');
    expect(triggered.data).toMatchObject({
      alertId: rule.alertId,
      sessionId: steady.sessionId,
      event: { fps: 33 },
    });

    const flaky = await device(tenant);
    await flaky.send(health(0, { fps: 30 }), health(10, { fps: 30 }), health(15, { fps: 60 }));
    await flaky.send(health(20, { fps: 30 }), health(31, { fps: 30 }));
    await settle();
    expect(messages().filter((m) => m.data.sessionId === flaky.sessionId)).toHaveLength(0);
    await flaky.send(health(50, { fps: 30 }));
    await waitFor(
      () => messages().some((m) => m.data.sessionId === flaky.sessionId),
      15_000,
      'the flaky session triggers 30 s after its run restarted',
    );
  });

  it('Error severity eq Critical', async () => {
    const { tenant, waitForMessages, messages } = await setup();
    const rule = await createAlert(tenant, {
      name: 'Crash',
      eventType: 'Error',
      field: 'severity',
      op: 'eq',
      value: 'Critical',
    });
    const d = await device(tenant);
    await d.send({ eventType: 'Error', timestamp: at(1), severity: 'Warning', message: 'meh' });
    await d.send({ eventType: 'Error', timestamp: at(2), severity: 'Critical', message: 'boom' });
    const [triggered] = await waitForMessages(1, 'alert.triggered');
    expect(triggered.data).toMatchObject({
      alertId: rule.alertId,
      event: { severity: 'Critical', message: 'boom' },
    });
    await settle();
    expect(messages()).toHaveLength(1);
  });

  it('cooldown: alert.triggered again for the same incident once the cooldown has passed', async () => {
    const { tenant, waitForMessages, messages } = await setup();
    await createAlert(tenant, { ...BATTERY, cooldownSeconds: 60 });
    const d = await device(tenant);
    await d.send(health(0, { batteryLevel: 10 }));
    await d.send(health(30, { batteryLevel: 9 }));
    const [first] = await waitForMessages(1, 'the first alert.triggered');
    await settle();
    expect(messages()).toHaveLength(1);
    await d.send(health(61, { batteryLevel: 8 }));
    const [, again] = await waitForMessages(2, 'the second alert.triggered');
    expect(again.type).toBe('alert.triggered');
    expect(again.data.incidentId).toBe(first.data.incidentId);
    expect(again.data.event).toMatchObject({ batteryLevel: 8 });
  });

  it('a cohort-restricted rule ignores other cohorts', async () => {
    const { tenant, waitForMessages, messages } = await setup();
    await createAlert(tenant, { ...BATTERY, tenantCohortId: 'class-7b' });
    const other = await device(tenant, 'class-8a');
    const none = await device(tenant);
    await other.send(health(0, { batteryLevel: 3 }));
    await none.send(health(0, { batteryLevel: 3 }));
    const mine = await device(tenant, 'class-7b');
    await mine.send(health(0, { batteryLevel: 3 }));
    const [triggered] = await waitForMessages(1, 'alert.triggered');
    expect(triggered.data).toMatchObject({ sessionId: mine.sessionId, tenantCohortId: 'class-7b' });
    await settle();
    expect(messages()).toHaveLength(1);
  });

  it('an ended session resolves its open incident', async () => {
    const { tenant, waitForMessages } = await setup();
    const rule = await createAlert(tenant, BATTERY);
    const d = await device(tenant);
    await d.send(health(0, { batteryLevel: 3 }));
    await waitForMessages(1, 'alert.triggered');
    const end = await call(server.url, 'POST', `/client/v1/sessions/${d.sessionId}/end`, { token: d.token });
    expect(end.status, end.text).toBe(200);
    const [triggered, resolved] = await waitForMessages(2, 'alert.resolved');
    expect(resolved).toMatchObject({
      type: 'alert.resolved',
      data: {
        incidentId: triggered.data.incidentId,
        reason: 'session_ended',
        event: null,
        playerId: d.playerId,
      },
    });
    const incidents = await api(tenant, 'GET', `/alerts/${rule.alertId}/incidents`);
    expect((incidents.body.incidents as Json[])[0]).toMatchObject({
      status: 'resolved',
      resolvedReason: 'session_ended',
    });
    // A late event of the ended session triggers nothing.
    await d.send(health(5, { batteryLevel: 60 }), health(6, { batteryLevel: 2 }));
    await new Promise((r) => setTimeout(r, 700));
    expect((await api(tenant, 'GET', `/alerts/${rule.alertId}/incidents`)).body.totalCount).toBe(1);
  });

  it("another tenant's rule is 404 and its sessions do not trigger it", async () => {
    const a = await setup();
    const b = await setup();
    const rule = await createAlert(a.tenant, BATTERY);
    for (const [method, path, json] of [
      ['GET', `/alerts/${rule.alertId}`],
      ['PATCH', `/alerts/${rule.alertId}`, { name: 'mine now' }],
      ['DELETE', `/alerts/${rule.alertId}`],
      ['GET', `/alerts/${rule.alertId}/incidents`],
    ] as const) {
      const res = await api(b.tenant, method, path, json);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    expect((await api(b.tenant, 'GET', '/alerts')).body.totalCount).toBe(0);
    const d = await device(b.tenant);
    await d.send(health(0, { batteryLevel: 1 }));
    await settle();
    expect(a.messages()).toHaveLength(0);
    expect(b.messages()).toHaveLength(0);
    expect((await api(a.tenant, 'GET', `/alerts/${rule.alertId}`)).body.name).toBe('Low battery');
  });
});

import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken, type TenantFixture } from '../../server/test/helpers/api.ts';
import { TestSocket } from '../../server/test/helpers/device-socket.ts';
import { backends, startTestServer, type TestServer } from '../../server/test/helpers/server.ts';
import {
  createTenantClient,
  TailError,
  type TailMessage,
  type TailOptions,
  type TailTarget,
  type TenantClient,
} from '../src/index.ts';

/** A TCP proxy in front of the server whose connections the test can cut, as a network drop would. */
async function cuttableProxy(target: string) {
  const { hostname, port } = new URL(target);
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((client) => {
    connections++;
    const upstream = net.connect(Number(port), hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    connections: () => connections,
    cut() {
      for (const s of sockets) s.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Runs a tail in the background, collecting what it yields (and how it ended). */
function collect(client: TenantClient, target: TailTarget, options: TailOptions = {}) {
  const controller = new AbortController();
  const messages: TailMessage[] = [];
  let error: unknown;
  let ended = false;
  const done = (async () => {
    try {
      for await (const m of client.tail(target, { signal: controller.signal, ...options })) messages.push(m);
    } catch (err) {
      error = err;
    } finally {
      ended = true;
    }
  })();
  return {
    messages,
    done,
    get error() {
      return error;
    },
    get ended() {
      return ended;
    },
    events: () => messages.flatMap((m) => (m.kind === 'event' ? [m] : [])),
    presence: () => messages.filter((m) => m.kind !== 'event'),
    ids: () => messages.flatMap((m) => (m.kind === 'event' ? [m.event.id] : [])),
    async until(check: () => boolean, what: string, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (!check()) {
        if (Date.now() > deadline)
          throw new Error(`timed out waiting for ${what}: ${JSON.stringify(messages.map((m) => m.kind))}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    stop: () => controller.abort(),
  };
}

describe.each(backends)('tenant client tail() against a real server (%s)', (backend) => {
  let server: TestServer;
  let tenant: TenantFixture;
  let client: TenantClient;
  const stops: (() => unknown)[] = [];

  beforeAll(async () => {
    server = await startTestServer(backend, {
      LIVELINE_RATE_LIMIT_TENANT_RPS: '0',
      LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
    });
    tenant = await createTenant(server.url, server.adminToken);
    client = createTenantClient({
      baseUrl: server.url,
      credentials: { clientId: tenant.clientId, clientSecret: tenant.clientSecret },
    });
  });
  afterAll(async () => {
    for (const stop of stops) await stop();
    await server?.close();
  });

  function tailOf(c: TenantClient, target: TailTarget, options?: TailOptions) {
    const t = collect(c, target, options);
    stops.push(t.stop);
    return t;
  }

  async function device(cohort?: string) {
    const playerId = `p-${randomUUID()}`;
    const token = await deviceToken(server.url, tenant.token, playerId, cohort);
    const res = await call(server.url, 'POST', '/client/v1/sessions', { token, json: {} });
    expect(res.status).toBe(201);
    return { token, playerId, sessionId: String(res.body.sessionId) };
  }

  async function ingest(d: { token: string; sessionId: string }, ids: string[], eventType = 'Custom') {
    const events = ids.map((id, i) => ({
      id,
      eventType,
      timestamp: Date.now() - i,
      ...(eventType === 'Error' ? { severity: 'Error', message: id } : { custom01: id }),
    }));
    const res = await call(server.url, 'POST', `/sessions/${d.sessionId}/Events`, {
      token: d.token,
      json: { events },
    });
    expect(res.status, res.text).toBe(200);
  }

  const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

  it('yields typed stored events of a session, with their cursor, and ends on abort', async () => {
    const d = await device();
    const t = tailOf(client, { sessionId: d.sessionId });
    // The stream is open once the first reader of the tenant is registered: give it a moment.
    await new Promise((r) => setTimeout(r, 300));
    await ingest(d, ids('a', 3));
    await t.until(() => t.events().length >= 3, 'three events');
    expect(t.ids()).toEqual(ids('a', 3));
    const first = t.events()[0];
    expect(first).toMatchObject({
      kind: 'event',
      eventType: 'Custom',
      event: { id: 'a-0', eventType: 'Custom', sessionId: d.sessionId, custom01: 'a-0' },
    });
    expect(typeof first.id).toBe('string');
    t.stop();
    await t.done;
    expect(t.ended).toBe(true);
    expect(t.error).toBeUndefined();
  });

  it('starts after lastEventId, and a for-await loop that breaks closes the stream', async () => {
    const d = await device();
    await ingest(d, ids('old', 2));
    const seen: string[] = [];
    const first = tailOf(client, { sessionId: d.sessionId });
    await new Promise((r) => setTimeout(r, 300));
    await ingest(d, ids('b', 2));
    // A tail "from now" may still get events stored just before it opened: wait for ours.
    await first.until(() => first.ids().includes('b-1'), 'b-1');
    const resumeFrom = first.events().find((m) => m.event.id === 'b-0')?.id;
    expect(resumeFrom).toBeDefined();
    first.stop();
    for await (const m of client.tail({ sessionId: d.sessionId }, { lastEventId: resumeFrom })) {
      if (m.kind === 'event') seen.push(m.event.id);
      if (seen.length === 1) break;
    }
    expect(seen).toEqual(['b-1']);
  });

  it('reconnects with Last-Event-ID after the connection drops: no gap, no repeat', async () => {
    const proxy = await cuttableProxy(server.url);
    stops.push(proxy.close);
    const viaProxy = createTenantClient({
      baseUrl: proxy.url,
      credentials: { clientId: tenant.clientId, clientSecret: tenant.clientSecret },
    });
    const reconnects: { lastEventId: string | undefined }[] = [];
    const d1 = await device();
    const d2 = await device();
    const t = tailOf(viaProxy, {}, { onReconnect: (info) => reconnects.push(info) });
    await new Promise((r) => setTimeout(r, 300));
    await ingest(d1, ids('before', 3));
    await t.until(() => t.events().length >= 3, 'the events before the cut');
    const lastBefore = t.events().at(-1)?.id;

    proxy.cut();
    // Stored while the tail is away (it waits about a second, the server's retry:, before reconnecting).
    await ingest(d1, ids('away1', 4));
    await ingest(d2, ids('away2', 4));
    await t.until(() => t.events().length >= 11, 'the events stored while away', 15_000);
    await ingest(d2, ['after']);
    await t.until(() => t.ids().includes('after'), 'an event after the reconnect');

    expect(reconnects.length).toBeGreaterThanOrEqual(1);
    expect(reconnects[0].lastEventId).toBe(lastBefore);
    expect(proxy.connections()).toBeGreaterThanOrEqual(2);
    const got = t.ids();
    expect(got.slice(0, 3)).toEqual(ids('before', 3));
    expect(got.slice(3, 11).sort()).toEqual([...ids('away1', 4), ...ids('away2', 4)].sort());
    expect(got.slice(11)).toEqual(['after']);
    expect(new Set(t.events().map((m) => m.id)).size).toBe(got.length);
  });

  it('filters by event type and presence kind, for a cohort', async () => {
    const cohort = `c-${randomUUID()}`;
    const errorsOnly = tailOf(client, { tenantCohortId: cohort }, { eventTypes: ['Error'] });
    const presence = tailOf(
      client,
      { tenantCohortId: cohort },
      { eventTypes: ['session.started', 'device.connected', 'device.disconnected', 'session.ended'] },
    );
    const everything = tailOf(client, { tenantCohortId: cohort });
    await new Promise((r) => setTimeout(r, 300));
    const d = await device(cohort);
    const outside = await device();
    await ingest(outside, ['x-error'], 'Error');
    await ingest(d, ['c-custom']);
    await ingest(d, ['c-error'], 'Error');
    const socket = await TestSocket.open(server.url, d.sessionId, d.token);
    await socket.ofType('welcome');
    await socket.close();
    const end = await call(server.url, 'POST', `/client/v1/sessions/${d.sessionId}/end`, { token: d.token });
    expect(end.status).toBe(200);

    await presence.until(() => presence.messages.some((m) => m.kind === 'session.ended'), 'session.ended');
    expect(presence.messages.map((m) => m.kind)).toEqual([
      'session.started',
      'device.connected',
      'device.disconnected',
      'session.ended',
    ]);
    for (const m of presence.messages) {
      if (m.kind === 'event') throw new Error('an event in a presence-only tail');
      expect(m.data).toMatchObject({ sessionId: d.sessionId, playerId: d.playerId, tenantCohortId: cohort });
      expect(typeof m.data.at).toBe('number');
    }
    await errorsOnly.until(() => errorsOnly.ids().includes('c-error'), 'the Error');
    await everything.until(() => everything.events().some((m) => m.eventType === 'SessionEnd'), 'SessionEnd');
    expect(errorsOnly.ids()).toEqual(['c-error']);
    expect(errorsOnly.presence()).toEqual([]);
    expect(everything.ids().slice(0, 2)).toEqual(['c-custom', 'c-error']);
    expect(everything.presence().map((m) => m.kind)).toEqual([
      'session.started',
      'device.connected',
      'device.disconnected',
      'session.ended',
    ]);
  });

  it('ends with a TailError carrying the problem document on a refusal', async () => {
    const malformed = collect(client, {}, { lastEventId: 'not-a-cursor' });
    await malformed.done;
    expect(malformed.error).toBeInstanceOf(TailError);
    expect(malformed.error).toMatchObject({ status: 400, problem: { code: 'validation_failed' } });

    const unknown = collect(client, { sessionId: randomUUID() });
    await unknown.done;
    expect(unknown.error).toMatchObject({ status: 404, code: 'not_found' });

    // A fixed token cannot be refreshed: its 401 ends the tail at once.
    const stale = createTenantClient({ baseUrl: server.url, accessToken: 'not-a-token' });
    const refused = collect(stale, {});
    await refused.done;
    expect(refused.error).toMatchObject({ status: 401 });
  });
});

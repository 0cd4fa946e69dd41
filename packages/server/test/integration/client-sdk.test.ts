/**
 * The device SDK (`@liveline/client`) against the real server over real HTTP: sessions, typed events,
 * partial resend of a refused batch, deduplication after a lost response, and another player's token.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type DeviceErrorEvent,
  HttpClient,
  LivelineDevice,
  type LivelineDeviceOptions,
  LivelineError,
  SDK_VERSION,
  type StampedEvent,
} from '../../../client/src/index.ts';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;

describe.each(backends)('the client SDK against the real server (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  let token: string;
  const devices: LivelineDevice[] = [];

  beforeAll(async () => {
    server = await startTestServer(backend);
    base = server.url;
    tenant = await createTenant(base, server.adminToken);
    token = await deviceToken(base, tenant.token, 'sdk-player');
  });
  afterEach(async () => {
    await Promise.all(devices.splice(0).map((device) => device.close()));
  });
  afterAll(async () => server?.close());

  /**
   * A device on the real server. Its clock starts a minute ago and ticks 1 ms per reading, so every
   * event has its own timestamp (the server orders by timestamp) and all precede the server's SessionEnd.
   */
  function device(options: Partial<LivelineDeviceOptions> = {}): LivelineDevice {
    let now = Date.now() - 60_000;
    const created = new LivelineDevice({
      baseUrl: base,
      token,
      clock: { now: () => now++ },
      flushIntervalMs: 60_000,
      random: () => 1,
      retry: { initialDelayMs: 5, maxDelayMs: 20 },
      ...options,
    });
    devices.push(created);
    return created;
  }

  /** A `fetch` that records the event ids of every batch it sends (it changes nothing). */
  function recordingFetch(batches: string[][]): typeof fetch {
    return async (input, init) => {
      if (String(input).endsWith('/events') && typeof init?.body === 'string') {
        const body = JSON.parse(init.body) as { events: { id: string }[] };
        batches.push(body.events.map((event) => event.id));
      }
      return fetch(input, init);
    };
  }

  async function readSession(sessionId: string) {
    const res = await call<Json & { events: Json[] }>(base, 'GET', `/sessions/${sessionId}`, {
      token: tenant.token,
    });
    expect(res.status).toBe(200);
    return res.body;
  }

  /** An event as the server stores and returns it: the tracked event plus its session id. */
  const stored = (sessionId: string, event: StampedEvent) => ({ ...event, sessionId });

  it('starts a session, sends typed events of every kind in order, ends it; the tenant reads them all', async () => {
    const batches: string[][] = [];
    const d = device({ batchSize: 4, fetch: recordingFetch(batches) });
    const info = await d.startSession({ device: { model: 'Quest 3', appVersion: '1.4.0' } });
    expect(info.realtimeUrl).toContain(`/client/v1/sessions/${info.sessionId}/realtime`);
    expect(info.heartbeatIntervalMs).toBeGreaterThan(0);

    const tracked: StampedEvent[] = [
      d.track({ eventType: 'Health', fps: 72, cpuUsage: 35.5, batteryLevel: 81, memoryUsage: 900 }),
      d.track({ eventType: 'Progression', progressionStatus: 'Start', progression01: 'level-3' }),
      d.track({ eventType: 'Custom', custom01: 'opened-menu', custom10: 'j' }),
      d.track({ eventType: 'Design', eventId: 'level:boss:defeated', value: 1.5 }),
      d.track({ eventType: 'Business', amount: 499, currency: 'EUR', itemType: 'skin', itemId: 's1' }),
      d.track({
        eventType: 'Resource',
        flowType: 'Sink',
        currency: 'gold',
        amount: 5,
        itemType: 'potion',
        itemId: 'p1',
      }),
      d.track({ eventType: 'Error', severity: 'Warning', message: 'low memory' }),
      d.track({ eventType: 'Impression', adNetwork: 'net', adType: 'video' }),
      d.track({ eventType: 'Screenshot', imageUrl: 'https://example.com/a.jpg', width: 200, height: 100 }),
      d.track({
        eventType: 'Progression',
        progressionStatus: 'Complete',
        progression01: 'level-3',
        score: 1200,
      }),
    ];
    await d.flush();
    expect(d.stats()).toEqual({ sent: 10, duplicates: 0, dropped: 0, rejected: 0, buffered: 0, retries: 0 });
    const ids = tracked.map((event) => event.id);
    expect(batches).toEqual([ids.slice(0, 4), ids.slice(4, 8), ids.slice(8)]);

    const ended = await d.endSession();
    expect(ended).toMatchObject({
      sessionId: info.sessionId,
      playerId: 'sdk-player',
      status: 'ended',
      endReason: 'device',
    });
    expect(d.session).toBeNull();

    const session = await readSession(info.sessionId);
    expect(session).toMatchObject({
      sessionId: info.sessionId,
      playerId: 'sdk-player',
      status: 'ended',
      device: { model: 'Quest 3', appVersion: '1.4.0', sdkVersion: SDK_VERSION },
    });
    const events = session.events;
    expect(events.slice(0, -1)).toEqual(tracked.map((event) => stored(info.sessionId, event)));
    expect(events.at(-1)).toMatchObject({
      sessionId: info.sessionId,
      eventType: 'SessionEnd',
      reason: 'device',
    });
    expect(Number(events.at(-1)?.duration)).toBeGreaterThanOrEqual(0);
    expect(ids).not.toContain(events.at(-1)?.id);
  });

  it('loses only the invalid event of a batch: the rest is resent at once with the same ids', async () => {
    const batches: string[][] = [];
    const d = device({ fetch: recordingFetch(batches) });
    const errors: DeviceErrorEvent[] = [];
    d.on('error', (event) => errors.push(event));
    const { sessionId } = await d.startSession();

    const before = d.track({ eventType: 'Custom', custom01: 'before' });
    const bad = d.track({ eventType: 'Health', fps: 72, cpuUsage: 140 });
    const after = d.track({ eventType: 'Design', eventId: 'menu:open' });
    await d.flush();

    expect(batches).toEqual([
      [before.id, bad.id, after.id],
      [before.id, after.id],
    ]);
    expect(d.stats()).toMatchObject({ sent: 2, rejected: 1, buffered: 0, retries: 0 });
    expect(errors).toHaveLength(1);
    expect(errors[0].error).toBeInstanceOf(LivelineError);
    expect(errors[0].error).toMatchObject({
      status: 400,
      code: 'validation_failed',
      errors: [{ path: 'events[1].cpuUsage' }],
    });
    expect(errors[0].rejectedEvents).toEqual([bad]);
    expect(errors[0].rejections).toEqual([
      { event: bad, errors: [{ path: 'cpuUsage', message: expect.any(String) }] },
    ]);

    const session = await readSession(sessionId);
    expect(session.events).toEqual([stored(sessionId, before), stored(sessionId, after)]);
  });

  it('drops, pass after pass, more bad events than one answer names (the server reports 50)', async () => {
    const batches: string[][] = [];
    const d = device({ fetch: recordingFetch(batches) });
    const errors: DeviceErrorEvent[] = [];
    d.on('error', (event) => errors.push(event));
    const { sessionId } = await d.startSession();

    // 60 bad events among 100: the first answer names 50 of them, the first resend the other 10.
    const tracked = Array.from({ length: 100 }, (_, i) =>
      i % 5 < 3
        ? d.track({ eventType: 'Health', batteryLevel: 101 + i })
        : d.track({ eventType: 'Custom', custom01: `good-${i}` }),
    );
    await d.flush();

    const good = tracked.filter((event) => event.eventType === 'Custom');
    expect(batches.map((batch) => batch.length)).toEqual([100, 50, 40]);
    expect(errors.map((error) => error.rejectedEvents.length)).toEqual([50, 10]);
    expect(d.stats()).toMatchObject({ sent: 40, rejected: 60, buffered: 0 });
    const session = await readSession(sessionId);
    expect(session.events.map((event) => event.id)).toEqual(good.map((event) => event.id));
  });

  it('resends a batch whose response was lost; the server counts it as duplicates', async () => {
    let lose = true;
    const batches: string[][] = [];
    const record = recordingFetch(batches);
    // The request reaches the server and is stored; the answer never reaches the SDK.
    const losingFetch: typeof fetch = async (input, init) => {
      const response = await record(input, init);
      if (lose && String(input).endsWith('/events')) {
        lose = false;
        await response.arrayBuffer();
        throw new TypeError('fetch failed: connection reset');
      }
      return response;
    };
    const d = device({ fetch: losingFetch });
    const { sessionId } = await d.startSession();

    const tracked = [
      d.track({ eventType: 'Custom', custom01: 'a' }),
      d.track({ eventType: 'Health', fps: 90 }),
      d.track({ eventType: 'Error', severity: 'Error', message: 'boom' }),
    ];
    await d.flush();

    const ids = tracked.map((event) => event.id);
    expect(batches).toEqual([ids, ids]);
    expect(d.stats()).toEqual({ sent: 3, duplicates: 3, dropped: 0, rejected: 0, buffered: 0, retries: 1 });
    const session = await readSession(sessionId);
    expect(session.events).toEqual(tracked.map((event) => stored(sessionId, event)));
  });

  it("gives another player's device token a 404 not_found on the session", async () => {
    const d = device();
    const { sessionId } = await d.startSession();
    const mine = d.track({ eventType: 'Custom', custom01: 'mine' });
    await d.flush();

    const other = new HttpClient({
      baseUrl: base,
      token: await deviceToken(base, tenant.token, 'other-player'),
    });
    const attempts = [
      () =>
        other.request('POST', `/client/v1/sessions/${sessionId}/events`, {
          events: [{ id: 'intruder', eventType: 'Custom', timestamp: Date.now() }],
        }),
      () => other.request('POST', `/client/v1/sessions/${sessionId}/end`),
    ];
    for (const attempt of attempts) {
      const error = await attempt().catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(LivelineError);
      expect(error).toMatchObject({ status: 404, code: 'not_found', retryable: false });
    }

    // The other player's own device works, but cannot touch this session.
    const otherDevice = device({ token: await deviceToken(base, tenant.token, 'other-player') });
    const own = await otherDevice.startSession();
    expect(own.sessionId).not.toBe(sessionId);

    const session = await readSession(sessionId);
    expect(session.status).toBe('live');
    expect(session.events).toEqual([stored(sessionId, mine)]);
  });
});

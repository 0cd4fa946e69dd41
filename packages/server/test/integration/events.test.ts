import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { TestSocket } from '../helpers/device-socket.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;

describe.each(backends)('event ingestion and queries (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  let device: string;

  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_BODY_LIMIT_BYTES: String(256 * 1024) });
    base = server.url;
    tenant = await createTenant(base, server.adminToken);
    device = await deviceToken(base, tenant.token, 'ingest-player');
  });
  afterAll(async () => server?.close());

  async function newSession() {
    const res = await call(base, 'POST', '/client/v1/sessions', { token: device, json: {} });
    return String(res.body.sessionId);
  }
  const now = () => Date.now();
  const post = (sessionId: string, json: unknown, token = device, path = 'Events') =>
    call(base, 'POST', `/sessions/${sessionId}/${path}`, { token, json });
  const storedCount = async (sessionId: string) =>
    Number(
      (
        await server.services.storage.db
          .selectFrom('events')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('session_id', '=', sessionId)
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('stores every event type; ids are idempotent per session', async () => {
    const sessionId = await newSession();
    const t = now();
    const events = [
      { id: 'c', eventType: 'Custom', timestamp: t, custom01: 'a', custom10: 'j' },
      {
        id: 'h',
        eventType: 'Health',
        timestamp: t,
        fps: 90,
        cpuUsage: 12.5,
        batteryLevel: 50,
        memoryUsage: 900,
        errorCount: 0,
      },
      {
        id: 'p',
        eventType: 'Progression',
        timestamp: t,
        progressionStatus: 'Complete',
        progression01: 'w1',
        score: 7,
      },
      {
        id: 'b',
        eventType: 'Business',
        timestamp: t,
        amount: 499,
        currency: 'EUR',
        itemType: 'skin',
        itemId: 's1',
      },
      {
        id: 'r',
        eventType: 'Resource',
        timestamp: t,
        flowType: 'Sink',
        currency: 'gold',
        amount: 5,
        itemType: 'x',
        itemId: 'y',
      },
      { id: 'd', eventType: 'Design', timestamp: t, eventId: 'a:b:c:d', value: 1.5 },
      { id: 'e', eventType: 'Error', timestamp: t, severity: 'Warning', message: 'low memory' },
      { id: 'i', eventType: 'Impression', timestamp: t, adNetwork: 'net', adType: 'video' },
      {
        id: 's',
        eventType: 'Screenshot',
        timestamp: t,
        imageUrl: 'https://example.com/a.jpg',
        width: 200,
        height: 100,
      },
    ];
    const first = await post(sessionId, { events });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ accepted: 9, duplicates: 0 });
    const again = await post(sessionId, {
      events: [...events, { id: 'new', eventType: 'Custom', timestamp: t }],
    });
    expect(again.body).toEqual({ accepted: 1, duplicates: 9 });
    const inBatch = await post(sessionId, {
      events: [
        { id: 'twice', eventType: 'Custom', timestamp: t },
        { id: 'twice', eventType: 'Custom', timestamp: t },
      ],
    });
    expect(inBatch.body).toEqual({ accepted: 1, duplicates: 1 });
    expect(await storedCount(sessionId)).toBe(11);
    // The same id in another session is another event.
    const other = await newSession();
    expect((await post(other, { events: [{ id: 'c', eventType: 'Custom', timestamp: t }] })).body).toEqual({
      accepted: 1,
      duplicates: 0,
    });
  });

  it('stores each event as the client wrote it, with its session, and the live stream stamped', async () => {
    const sessionId = await newSession();
    const t = now();
    // The client's own key order, escapes, characters beyond ASCII, numbers in exponent form.
    const compact = [
      { custom01: 'é "q" \\ 😀 \u2028', timestamp: t, id: 'k1', eventType: 'Custom' },
      { eventType: 'Health', fps: 60.5, id: 'k2', timestamp: t + 1, cpuUsage: 1e-7 },
    ];
    expect((await post(sessionId, { events: compact })).body).toEqual({ accepted: 2, duplicates: 0 });
    // Pretty-printed, and an event naming its session (in upper case): serialized as before.
    const pretty = [
      { id: 'k3', eventType: 'Custom', timestamp: t + 2, custom02: 'x' },
      { id: 'k4', eventType: 'Custom', timestamp: t + 3, sessionId: sessionId.toUpperCase() },
    ];
    const prettyAnswer = await call(base, 'POST', `/sessions/${sessionId}/Events`, {
      token: device,
      body: JSON.stringify({ events: pretty }, null, 2),
      headers: { 'content-type': 'application/json' },
    });
    expect(prettyAnswer.body).toEqual({ accepted: 2, duplicates: 0 });
    // While a stream is live, an event without a stream of its own gets the live one.
    const socket = await TestSocket.open(base, sessionId, device);
    try {
      await socket.ofType('welcome');
      const started = await call(base, 'POST', `/client/v1/sessions/${sessionId}/stream/start`, {
        token: device,
        json: { resolution: 2, aspectratio: 0 },
      });
      expect(started.status).toBe(200);
      const stream = String(started.body.streamingSessionId);
      const own = '0190a3c2-7b7e-7c3e-8f00-0000000000dd';
      const live = [
        { id: 'k5', eventType: 'Custom', timestamp: t + 4 },
        {
          id: 'k6',
          eventType: 'Screenshot',
          timestamp: t + 5,
          imageUrl: 'https://e.com/a.png',
          streamingSessionId: own,
        },
      ];
      expect((await post(sessionId, { events: live })).body).toEqual({ accepted: 2, duplicates: 0 });
      const listed = await call<{ events: Json[] }>(
        base,
        'GET',
        `/sessions/${sessionId}/events?eventType=Custom&from=${t + 4}`,
        {
          token: tenant.token,
        },
      );
      expect(listed.body.events).toEqual([{ ...live[0], sessionId, streamingSessionId: stream }]);
      const all = await call<{ events: Json[] }>(base, 'GET', `/sessions/${sessionId}/events?from=${t}`, {
        token: tenant.token,
      });
      expect(all.body.events.filter((e) => e.eventType !== 'StreamStarted')).toEqual([
        ...compact.map((e) => ({ ...e, sessionId })),
        ...pretty.map((e) => ({ ...e, sessionId })),
        { ...live[0], sessionId, streamingSessionId: stream },
        { ...live[1], sessionId },
      ]);
    } finally {
      socket.close();
    }
    // Stored bodies stay one line each (NDJSON exports) whatever the request's layout.
    const bodies = await server.services.storage.db
      .selectFrom('events')
      .select('body')
      .where('session_id', '=', sessionId)
      .execute();
    expect(bodies.length).toBeGreaterThanOrEqual(6);
    for (const { body } of bodies) expect(body).not.toMatch(/[\n\r]/);
  });

  it('concurrent batches are group-committed and each gets its own counts', async () => {
    const sessionId = await newSession();
    const t = now();
    const batches = Array.from({ length: 20 }, (_, b) => ({
      events: Array.from({ length: 50 }, (_, i) => ({
        id: `b${b}-e${i}`,
        eventType: 'Custom',
        timestamp: t + i,
      })),
    }));
    // Half of the batches overlap with the previous one by 10 ids.
    for (let b = 1; b < 20; b += 2) {
      for (let i = 0; i < 10; i++) batches[b].events[i].id = `b${b - 1}-e${i}`;
    }
    const results = await Promise.all(batches.map((body) => post(sessionId, body)));
    expect(results.every((r) => r.status === 200)).toBe(true);
    const accepted = results.reduce((a, r) => a + Number(r.body.accepted), 0);
    const duplicates = results.reduce((a, r) => a + Number(r.body.duplicates), 0);
    expect(accepted).toBe(1000 - 100);
    expect(duplicates).toBe(100);
    expect(await storedCount(sessionId)).toBe(900);
  });

  it('the tenant may ingest with events:write; without it, 403', async () => {
    const sessionId = await newSession();
    const ok = await post(
      sessionId,
      { events: [{ id: 't1', eventType: 'Custom', timestamp: now() }] },
      tenant.token,
    );
    expect(ok.body).toEqual({ accepted: 1, duplicates: 0 });
    const readOnly = await createTenant(base, server.adminToken, { scopes: ['sessions:read'] });
    const denied = await post(
      sessionId,
      { events: [{ id: 't2', eventType: 'Custom', timestamp: now() }] },
      readOnly.token,
    );
    // Another tenant's token: its scope is missing, so 403 comes before any lookup.
    expect(denied.status).toBe(403);
  });

  it('a bad batch is rejected whole with exact paths, and nothing is stored', async () => {
    const sessionId = await newSession();
    const t = now();
    const res = await post(sessionId, {
      events: [
        { id: 'ok', eventType: 'Custom', timestamp: t },
        { id: 'bad1', eventType: 'Health', timestamp: t, cpuUsage: 140 },
        { id: 'bad2', eventType: 'Custom', timestamp: 'yesterday' },
        { id: 'bad3', eventType: 'Custom', timestamp: t, custom11: 'x' },
        { eventType: 'Custom', timestamp: t },
      ],
    });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(res.body.code).toBe('validation_failed');
    const paths = (res.body.errors as { path: string }[]).map((e) => e.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'events[1].cpuUsage',
        'events[2].timestamp',
        'events[3].custom11',
        'events[4].id',
      ]),
    );
    expect(String(res.body.detail)).toContain('nothing was stored');
    expect(await storedCount(sessionId)).toBe(0);
  });

  it('rejects unknown and server-only event types, bad timestamps and mismatched sessionIds', async () => {
    const sessionId = await newSession();
    const t = now();
    const unknown = await post(sessionId, { events: [{ id: 'u', eventType: 'Teleport', timestamp: t }] });
    expect(unknown.status).toBe(400);
    expect(unknown.body.code).toBe('unknown_event_type');
    expect(unknown.body.errors).toMatchObject([{ path: 'events[0].eventType' }]);
    const serverOnly = await post(sessionId, {
      events: [{ id: 's', eventType: 'StreamStarted', timestamp: t, streamingSessionId: 'x' }],
    });
    expect(serverOnly.status).toBe(400);
    expect(serverOnly.body.code).toBe('validation_failed');
    const old = await post(sessionId, {
      events: [{ id: 'o', eventType: 'Custom', timestamp: 946684799999 }],
    });
    expect(old.body.errors).toMatchObject([{ path: 'events[0].timestamp' }]);
    const future = await post(sessionId, {
      events: [{ id: 'f', eventType: 'Custom', timestamp: t + 25 * 3600_000 }],
    });
    expect(future.body.errors).toMatchObject([{ path: 'events[0].timestamp' }]);
    const mismatch = await post(sessionId, {
      events: [
        { id: 'm', eventType: 'Custom', timestamp: t, sessionId: '0190a0a0-0000-7000-8000-000000000000' },
      ],
    });
    expect(mismatch.body.errors).toMatchObject([{ path: 'events[0].sessionId' }]);
    const matching = await post(sessionId, {
      events: [{ id: 'm', eventType: 'Custom', timestamp: t, sessionId }],
    });
    expect(matching.body).toEqual({ accepted: 1, duplicates: 0 });
    expect(await storedCount(sessionId)).toBe(1);
  });

  it('rejects malformed bodies: not JSON, wrong content type, empty, too many events, too large', async () => {
    const sessionId = await newSession();
    const notJson = await call(base, 'POST', `/sessions/${sessionId}/Events`, {
      token: device,
      body: '{"events": [',
      headers: { 'content-type': 'application/json' },
    });
    expect(notJson.status).toBe(400);
    expect(notJson.body.code).toBe('malformed_json');
    const form = await call(base, 'POST', `/sessions/${sessionId}/Events`, {
      token: device,
      body: 'events=1',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(form.status).toBe(415);
    for (const body of [{}, { events: [] }, { events: {} }, { events: [1] }, [], { events: [], extra: 1 }]) {
      const res = await post(sessionId, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('validation_failed');
    }
    const many = await post(sessionId, {
      events: Array.from({ length: 1001 }, (_, i) => ({
        id: `m${i}`,
        eventType: 'Custom',
        timestamp: now(),
      })),
    });
    expect(many.status).toBe(400);
    expect(many.body.errors).toMatchObject([{ path: 'events' }]);
    const huge = await post(sessionId, {
      events: [{ id: 'x', eventType: 'Custom', timestamp: now(), custom01: 'x'.repeat(300 * 1024) }],
    });
    expect(huge.status).toBe(413);
    expect(huge.body.code).toBe('payload_too_large');
    expect(await storedCount(sessionId)).toBe(0);
    const badSession = await call(base, 'POST', '/sessions/nope/Events', {
      token: device,
      json: { events: [] },
    });
    expect(badSession.status).toBe(400);
    expect(badSession.body.errors).toMatchObject([{ path: 'path.SessionId' }]);
  });

  it('pages through events with filters and a cursor', async () => {
    const sessionId = await newSession();
    const t = now() - 100_000;
    const events = Array.from({ length: 25 }, (_, i) => ({
      id: `e${String(i).padStart(2, '0')}`,
      eventType: i % 5 === 0 ? 'Health' : 'Custom',
      timestamp: t + Math.floor(i / 2) * 1000, // pairs share a timestamp: ties ordered by id
    }));
    await post(sessionId, { events: [...events].reverse() });
    const seen: string[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const q: string = `/sessions/${sessionId}/events?limit=10${after ? `&after=${after}` : ''}`;
      const res = await call<{ events: Json[]; nextCursor: string | null; hasMore: boolean }>(
        base,
        'GET',
        q,
        {
          token: tenant.token,
        },
      );
      expect(res.status).toBe(200);
      seen.push(...res.body.events.map((e) => String(e.id)));
      after = res.body.nextCursor;
      expect(res.body.hasMore).toBe(after !== null);
      pages++;
    } while (after);
    expect(pages).toBe(3);
    expect(seen).toEqual(events.map((e) => e.id));
    const health = await call<{ events: Json[] }>(
      base,
      'GET',
      `/sessions/${sessionId}/events?eventType=Health`,
      {
        token: tenant.token,
      },
    );
    expect(health.body.events.map((e) => e.id)).toEqual(['e00', 'e05', 'e10', 'e15', 'e20']);
    const window = await call<{ events: Json[] }>(
      base,
      'GET',
      `/sessions/${sessionId}/events?from=${t + 2000}&to=${t + 4000}`,
      { token: tenant.token },
    );
    expect(window.body.events.map((e) => e.id)).toEqual(['e04', 'e05', 'e06', 'e07']);
    const badCursor = await call(base, 'GET', `/sessions/${sessionId}/events?after=garbage`, {
      token: tenant.token,
    });
    expect(badCursor.status).toBe(400);
    const badLimit = await call(base, 'GET', `/sessions/${sessionId}/events?limit=0`, {
      token: tenant.token,
    });
    expect(badLimit.status).toBe(400);
    const unknownParam = await call(base, 'GET', `/sessions/${sessionId}/events?colour=red`, {
      token: tenant.token,
    });
    expect(unknownParam.status).toBe(400);
  });

  it('GET /sessions/{id} streams a large session in order', async () => {
    const sessionId = await newSession();
    const t = now() - 3600_000;
    for (let b = 0; b < 3; b++) {
      const events = Array.from({ length: 1000 }, (_, i) => ({
        id: `ev-${b}-${i}`,
        eventType: 'Custom',
        timestamp: t + b * 1000 + i,
        custom01: 'x'.repeat(50),
      }));
      expect((await post(sessionId, { events })).body).toEqual({ accepted: 1000, duplicates: 0 });
    }
    const res = await call<{ events: Json[] }>(base, 'GET', `/sessions/${sessionId}`, {
      token: tenant.token,
    });
    expect(res.status).toBe(200);
    expect(res.body.events).toHaveLength(3000);
    const stamps = res.body.events.map((e) => Number(e.timestamp));
    expect(stamps).toEqual([...stamps].sort((a, b) => a - b));
  });
});

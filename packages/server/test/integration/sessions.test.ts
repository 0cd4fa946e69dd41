import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { backends, manualClock, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;

describe.each(backends)('sessions and cohorts (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  let other: TenantFixture;
  const clock = manualClock(Date.UTC(2026, 10, 21, 12, 0, 0));

  async function startSession(playerId: string, cohort?: string, body: Json = {}) {
    const token = await deviceToken(base, tenant.token, playerId, cohort);
    const res = await call(base, 'POST', '/client/v1/sessions', { token, json: body });
    expect(res.status).toBe(201);
    return { token, sessionId: String(res.body.sessionId), res };
  }

  beforeAll(async () => {
    server = await startTestServer(backend, {}, { clock });
    base = server.url;
    tenant = await createTenant(base, server.adminToken);
    other = await createTenant(base, server.adminToken);
  });
  afterAll(async () => server?.close());

  it('a device starts a session; the tenant reads it with its events', async () => {
    const { token, sessionId, res } = await startSession('alice', 'class-1', {
      device: { model: 'Quest 3', os: 'Android 14' },
    });
    expect(res.body.realtimeUrl).toBe(`ws://${base.slice(7)}/client/v1/sessions/${sessionId}/realtime`);
    expect(res.body.heartbeatIntervalMs).toBe(15000);
    const ev = await call(base, 'POST', `/sessions/${sessionId}/Events`, {
      token,
      json: {
        events: [
          {
            id: 'e2',
            eventType: 'Health',
            timestamp: clock.now() + 10,
            fps: 72,
            cpuUsage: 41.5,
            batteryLevel: 80,
          },
          { id: 'e1', eventType: 'Custom', timestamp: clock.now(), custom01: 'hello' },
        ],
      },
    });
    expect(ev.status).toBe(200);
    expect(ev.body).toEqual({ accepted: 2, duplicates: 0 });
    const got = await call<Json>(base, 'GET', `/sessions/${sessionId}`, { token: tenant.token });
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      sessionId,
      tenantCohortId: 'class-1',
      playerId: 'alice',
      device: { model: 'Quest 3', os: 'Android 14' },
      status: 'live',
      connected: false,
      endedAt: null,
      stream: { state: 'idle', streamingSessionId: null },
      recording: { state: 'idle', recordingId: null },
    });
    expect(got.body.events).toEqual([
      { id: 'e1', sessionId, eventType: 'Custom', timestamp: clock.now(), custom01: 'hello' },
      {
        id: 'e2',
        sessionId,
        eventType: 'Health',
        timestamp: clock.now() + 10,
        fps: 72,
        cpuUsage: 41.5,
        batteryLevel: 80,
      },
    ]);
  });

  it('a session with more events than a page of the store streams every one, once, in order', async () => {
    // 2,345 events over two pages of the store (2,000 each), nine to a millisecond and sent out of order,
    // so that the page boundary falls inside a millisecond: the cursor is (timestamp, id).
    const { token, sessionId } = await startSession('many');
    const total = 2345;
    const t0 = clock.now() - 10_000;
    const all = Array.from({ length: total }, (_, i) => {
      const k = (i * 7919) % total;
      // Ids in another order than times, so that the greatest id of a chunk is seldom its last event's.
      const id = `e${String((k * 613) % total).padStart(4, '0')}`;
      return { id, eventType: 'Custom', timestamp: t0 + Math.floor(k / 9) };
    });
    for (let i = 0; i < total; i += 500) {
      const res = await call(base, 'POST', `/sessions/${sessionId}/events`, {
        token,
        json: { events: all.slice(i, i + 500) },
      });
      expect(res.status).toBe(200);
    }
    const got = await call<{ events: { id: string; timestamp: number; sessionId: string }[] }>(
      base,
      'GET',
      `/sessions/${sessionId}`,
      { token: tenant.token },
    );
    expect(got.status).toBe(200);
    const expected = [...all]
      .sort((a, b) => a.timestamp - b.timestamp || (a.id < b.id ? -1 : 1))
      .map((e) => ({ ...e, sessionId }));
    expect(got.body.events).toEqual(expected);
  });

  it('a cohort in the token wins over one in the body', async () => {
    const { sessionId } = await startSession('bob', 'from-token', { tenantCohortId: 'from-body' });
    const got = await call(base, 'GET', `/sessions/${sessionId}`, { token: tenant.token });
    expect(got.body.tenantCohortId).toBe('from-token');
    const token = await deviceToken(base, tenant.token, 'carol');
    const res = await call(base, 'POST', '/client/v1/sessions', {
      token,
      json: { tenantCohortId: 'from-body' },
    });
    const got2 = await call(base, 'GET', `/sessions/${res.body.sessionId}`, { token: tenant.token });
    expect(got2.body.tenantCohortId).toBe('from-body');
  });

  it('ending a session emits SessionEnd with its duration; ending again changes nothing', async () => {
    const { token, sessionId } = await startSession('dave');
    clock.advance(90_500);
    const ended = await call(base, 'POST', `/client/v1/sessions/${sessionId}/end`, { token });
    expect(ended.status).toBe(200);
    expect(ended.body).toMatchObject({
      sessionId,
      status: 'ended',
      endedAt: clock.now(),
      endReason: 'device',
    });
    const again = await call(base, 'POST', `/client/v1/sessions/${sessionId}/end`, { token });
    expect(again.status).toBe(200);
    expect(again.body.endedAt).toBe(clock.now());
    const got = await call<{ events: Json[] }>(base, 'GET', `/sessions/${sessionId}`, {
      token: tenant.token,
    });
    const ends = got.body.events.filter((e) => e.eventType === 'SessionEnd');
    expect(ends).toHaveLength(1);
    expect(ends[0]).toMatchObject({ sessionId, duration: 91, reason: 'device', timestamp: clock.now() });
    expect(String(ends[0].id)).toMatch(/^[0-9a-f-]{36}$/);
    // Late buffers are still accepted into an ended session.
    const late = await call(base, 'POST', `/sessions/${sessionId}/Events`, {
      token,
      json: { events: [{ id: 'late', eventType: 'Custom', timestamp: clock.now() - 1000 }] },
    });
    expect(late.body).toEqual({ accepted: 1, duplicates: 0 });
  });

  it('a SessionEnd event from the device ends the session without a second SessionEnd', async () => {
    const { token, sessionId } = await startSession('erin');
    const res = await call(base, 'POST', `/sessions/${sessionId}/events`, {
      token,
      json: {
        events: [
          { id: 'bye', eventType: 'SessionEnd', timestamp: clock.now(), duration: 12, reason: 'quit' },
        ],
      },
    });
    expect(res.status).toBe(200);
    const got = await call<{ events: Json[]; status: string; endReason: string }>(
      base,
      'GET',
      `/sessions/${sessionId}`,
      {
        token: tenant.token,
      },
    );
    expect(got.body.status).toBe('ended');
    expect(got.body.endReason).toBe('quit');
    expect(got.body.events.filter((e) => e.eventType === 'SessionEnd')).toHaveLength(1);
  });

  it('isolates tenants and devices', async () => {
    const { token, sessionId } = await startSession('frank');
    const foreign = await call(base, 'GET', `/sessions/${sessionId}`, { token: other.token });
    expect(foreign.status).toBe(404);
    expect(foreign.body.code).toBe('not_found');
    expect((await call(base, 'GET', `/sessions/${sessionId}/events`, { token: other.token })).status).toBe(
      404,
    );
    const foreignIngest = await call(base, 'POST', `/sessions/${sessionId}/Events`, {
      token: other.token,
      json: { events: [{ id: 'x', eventType: 'Custom', timestamp: clock.now() }] },
    });
    expect(foreignIngest.status).toBe(404);
    // Another player's device token of the same tenant.
    const stranger = await deviceToken(base, tenant.token, 'stranger');
    const strangerIngest = await call(base, 'POST', `/sessions/${sessionId}/Events`, {
      token: stranger,
      json: { events: [{ id: 'x', eventType: 'Custom', timestamp: clock.now() }] },
    });
    expect(strangerIngest.status).toBe(404);
    expect(
      (await call(base, 'POST', `/client/v1/sessions/${sessionId}/end`, { token: stranger })).status,
    ).toBe(404);
    // A device token cannot read tenant routes.
    const asDevice = await call(base, 'GET', `/sessions/${sessionId}`, { token });
    expect(asDevice.status).toBe(403);
    expect((await call(base, 'GET', '/sessions/active', { token })).status).toBe(403);
    // Tenant tokens cannot start device sessions.
    expect((await call(base, 'POST', '/client/v1/sessions', { token: tenant.token, json: {} })).status).toBe(
      403,
    );
    // No token, garbage token.
    expect((await call(base, 'GET', `/sessions/${sessionId}`)).status).toBe(401);
    expect((await call(base, 'GET', `/sessions/${sessionId}`, { token: 'a.b.c' })).status).toBe(401);
  });

  it('rejects bad session input', async () => {
    const token = await deviceToken(base, tenant.token, 'gina');
    const unknown = await call(base, 'POST', '/client/v1/sessions', { token, json: { foo: 1 } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors).toEqual([{ path: 'foo', message: 'is not an allowed field' }]);
    const badDevice = await call(base, 'POST', '/client/v1/sessions', {
      token,
      json: { device: { model: 5 } },
    });
    expect(badDevice.status).toBe(400);
    expect(badDevice.body.errors).toEqual([{ path: 'device.model', message: 'must be string' }]);
    const badId = await call(base, 'GET', '/sessions/not-a-uuid', { token: tenant.token });
    expect(badId.status).toBe(400);
    expect(badId.body.errors).toEqual([{ path: 'path.SessionId', message: 'must match format "uuid"' }]);
    const missing = await call(base, 'GET', '/sessions/0190a0a0-0000-7000-8000-000000000000', {
      token: tenant.token,
    });
    expect(missing.status).toBe(404);
  });
});

describe.each(backends)('active and cohort lists (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  const clock = manualClock(Date.UTC(2026, 10, 21, 12, 0, 0));
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    server = await startTestServer(backend, {}, { clock });
    base = server.url;
    tenant = await createTenant(base, server.adminToken);
    // s0..s5 start one minute apart; s0–s2 in cohort A, s3–s4 in B, s5 has none. s1 is ended.
    for (let i = 0; i < 6; i++) {
      const cohort = i < 3 ? 'A' : i < 5 ? 'B' : undefined;
      const token = await deviceToken(base, tenant.token, `p${i}`, cohort);
      const res = await call(base, 'POST', '/client/v1/sessions', { token, json: {} });
      ids[`s${i}`] = String(res.body.sessionId);
      if (i === 1) await call(base, 'POST', `/client/v1/sessions/${ids.s1}/end`, { token });
      clock.advance(60_000);
    }
    // Now: s5 seen 1 min ago, s4 2 min ago, ..., s0 6 min ago.
  });
  afterAll(async () => server?.close());

  const list = async (path: string, init: Parameters<typeof call>[3] = {}) => {
    const res = await call<{ sessions: Json[] } & Json>(base, 'GET', path, { token: tenant.token, ...init });
    expect(res.status, res.text).toBe(200);
    return { ...res.body, ids: res.body.sessions.map((s) => s.sessionId) };
  };

  it('active sessions default to 5 minutes, newest contact first, ended ones excluded', async () => {
    const r = await list('/sessions/active');
    expect(r.ids).toEqual([ids.s5, ids.s4, ids.s3, ids.s2]);
    expect(r).toMatchObject({ page: 1, pageSize: 1000, totalCount: 4, totalPages: 1, hasMore: false });
    expect(r.sessions[0]).not.toHaveProperty('events');
  });

  it('minutes from the query or from a GET body; both different → 400', async () => {
    expect((await list('/sessions/active?minutes=2')).ids).toEqual([ids.s5, ids.s4]);
    expect((await list('/sessions/active?minutes=10')).ids).toEqual([ids.s5, ids.s4, ids.s3, ids.s2, ids.s0]);
    // fetch cannot send a GET body; node:http can.
    const http = await import('node:http');
    const getWithBody = (path: string, body: string) =>
      new Promise<{ status: number; body: Json }>((resolve, reject) => {
        const req = http.request(
          `${base}${path}`,
          {
            method: 'GET',
            headers: {
              authorization: `Bearer ${tenant.token}`,
              'content-type': 'application/json',
              'content-length': String(Buffer.byteLength(body)),
            },
          },
          (res) => {
            let data = '';
            res.on('data', (c) => {
              data += c;
            });
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(data) }));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    const viaBody = await getWithBody('/sessions/active', '{"minutes":2}');
    expect(viaBody.status).toBe(200);
    expect((viaBody.body.sessions as Json[]).map((s) => s.sessionId)).toEqual([ids.s5, ids.s4]);
    const same = await getWithBody('/sessions/active?minutes=2', '{"minutes":2}');
    expect(same.status).toBe(200);
    const conflict = await getWithBody('/sessions/active?minutes=3', '{"minutes":2}');
    expect(conflict.status).toBe(400);
    expect(conflict.body.code).toBe('validation_failed');
    const badBody = await getWithBody('/sessions/active', '{"minutes":0}');
    expect(badBody.status).toBe(400);
    expect(badBody.body.errors).toEqual([{ path: 'minutes', message: 'must be >= 1' }]);
    const notJson = await getWithBody('/sessions/active', '{minutes');
    expect(notJson.status).toBe(400);
    expect(notJson.body.code).toBe('malformed_json');
    const extra = await getWithBody('/sessions/active', '{"minutes":2,"x":1}');
    expect(extra.status).toBe(400);
    for (const bad of ['0', '-1', '1.5', 'abc', '10081']) {
      const res = await call(base, 'GET', `/sessions/active?minutes=${bad}`, { token: tenant.token });
      expect(res.status, bad).toBe(400);
      expect(res.body.errors).toMatchObject([{ path: 'query.minutes' }]);
    }
  });

  it('pages are 1-based with pageSize; past the end is empty; bad page numbers → 400', async () => {
    const p1 = await list('/sessions/active/page/1?pageSize=3&minutes=10');
    expect(p1.ids).toEqual([ids.s5, ids.s4, ids.s3]);
    expect(p1).toMatchObject({ page: 1, pageSize: 3, totalCount: 5, totalPages: 2, hasMore: true });
    const p2 = await list('/sessions/active/page/2?pageSize=3&minutes=10');
    expect(p2.ids).toEqual([ids.s2, ids.s0]);
    expect(p2).toMatchObject({ page: 2, hasMore: false });
    const p9 = await list('/sessions/active/page/9?minutes=10');
    expect(p9).toMatchObject({ sessions: [], page: 9, pageSize: 50, totalCount: 5, hasMore: false });
    for (const bad of ['0', '-1', '1.5', 'x']) {
      const res = await call(base, 'GET', `/sessions/active/page/${bad}`, { token: tenant.token });
      expect(res.status, bad).toBe(400);
      expect(res.body.errors).toMatchObject([{ path: 'path.pageNumber' }]);
    }
    for (const bad of ['0', '1001', 'x']) {
      const res = await call(base, 'GET', `/sessions/active/page/1?pageSize=${bad}`, { token: tenant.token });
      expect(res.status, bad).toBe(400);
    }
  });

  it('cohort sessions, newest first; active sessions of a cohort; unknown cohort is empty', async () => {
    expect((await list('/cohorts/A/sessions')).ids).toEqual([ids.s2, ids.s1, ids.s0]);
    expect((await list('/cohorts/B/sessions')).ids).toEqual([ids.s4, ids.s3]);
    const paged = await list('/cohorts/A/sessions/page/2?pageSize=2');
    expect(paged.ids).toEqual([ids.s0]);
    expect(paged).toMatchObject({ page: 2, pageSize: 2, totalCount: 3, totalPages: 2, hasMore: false });
    expect((await list('/cohorts/A/active')).ids).toEqual([ids.s2]);
    expect((await list('/cohorts/A/active?minutes=10')).ids).toEqual([ids.s2, ids.s0]);
    expect((await list('/cohorts/A/active/page/1?minutes=10&pageSize=1')).ids).toEqual([ids.s2]);
    const none = await list('/cohorts/nobody/sessions');
    expect(none).toMatchObject({ sessions: [], totalCount: 0, totalPages: 0, hasMore: false });
    // Another tenant sees none of them.
    const other = await createTenant(base, server.adminToken);
    const foreign = await call<{ sessions: Json[] }>(base, 'GET', '/cohorts/A/sessions', {
      token: other.token,
    });
    expect(foreign.body.sessions).toEqual([]);
    const foreignActive = await call<{ sessions: Json[] }>(base, 'GET', '/sessions/active?minutes=60', {
      token: other.token,
    });
    expect(foreignActive.body.sessions).toEqual([]);
  });

  it('device contact moves lastSeenAt; the idle sweep ends silent sessions with reason idle', async () => {
    const token = await deviceToken(base, tenant.token, 'p3', 'B');
    await call(base, 'POST', `/sessions/${ids.s3}/Events`, {
      token,
      json: { events: [{ id: 'ping', eventType: 'Custom', timestamp: clock.now() }] },
    });
    expect((await list('/sessions/active')).ids[0]).toBe(ids.s3);
    const before = await call(base, 'GET', `/sessions/${ids.s3}`, { token: tenant.token });
    expect(before.body.lastSeenAt).toBe(clock.now());
    // Everything else but s5 has been silent for ≥ 2 min; s3 was just seen.
    const ended = await server.services.sessions.sweepIdle(90_000);
    expect(ended).toBe(3); // s0, s2, s4 (s5 seen 1 min ago, s1 already ended)
    const s0 = await call<{
      status: string;
      endReason: string;
      endedAt: number;
      lastSeenAt: number;
      events: Json[];
    }>(base, 'GET', `/sessions/${ids.s0}`, { token: tenant.token });
    expect(s0.body).toMatchObject({ status: 'ended', endReason: 'idle' });
    expect(s0.body.endedAt).toBe(s0.body.lastSeenAt);
    expect(s0.body.events).toMatchObject([{ eventType: 'SessionEnd', reason: 'idle', duration: 0 }]);
    expect(await server.services.sessions.sweepIdle(90_000)).toBe(0);
  });
});

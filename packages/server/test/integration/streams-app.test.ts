import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProblemError } from '../../src/http/problem.ts';
import type { SessionRow } from '../../src/modules/sessions/service.ts';
import type { CommandOutcome } from '../../src/signals.ts';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { backends, manualClock, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;
interface SessionBody extends Json {
  lastSeenAt: number;
  stream: Json;
  recording: Json;
  events: Json[];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const SERVER_EVENTS = [
  'StreamStarted',
  'StreamStopped',
  'RecordingStarted',
  'RecordingStopped',
  'SessionEnd',
];

describe.each(backends)('streams and recordings (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  const clock = manualClock(Date.UTC(2026, 10, 21, 12, 0, 0));
  let players = 0;

  async function startSession(playerId = `player-${++players}`) {
    const token = await deviceToken(base, tenant.token, playerId);
    const res = await call(base, 'POST', '/client/v1/sessions', { token, json: {} });
    expect(res.status).toBe(201);
    return { token, playerId, sessionId: String(res.body.sessionId) };
  }

  const device = (token: string, sessionId: string, path: string, json?: unknown) =>
    call(base, 'POST', `/client/v1/sessions/${sessionId}/${path}`, { token, json });

  async function getSession(sessionId: string) {
    const res = await call<SessionBody>(base, 'GET', `/sessions/${sessionId}`, { token: tenant.token });
    expect(res.status).toBe(200);
    return res.body;
  }

  const serverEvents = async (sessionId: string) =>
    (await getSession(sessionId)).events.filter((e) => SERVER_EVENTS.includes(String(e.eventType)));

  async function ingest(token: string, sessionId: string, id: string) {
    const res = await call(base, 'POST', `/sessions/${sessionId}/Events`, {
      token,
      json: { events: [{ id, eventType: 'Custom', timestamp: clock.now(), custom01: id }] },
    });
    expect(res.status).toBe(200);
  }

  async function sessionRow(sessionId: string): Promise<SessionRow> {
    const row = await server.services.sessions.findForTenant(tenant.tenantId, sessionId);
    if (!row) throw new Error('no such session');
    return row;
  }

  /** A command's settlement as the commands module's settle hook reports it, in its transaction. */
  const settle = (row: SessionRow, commandId: string, name: string, outcome: CommandOutcome) =>
    server.services.storage.db.transaction().execute((trx) =>
      server.services.streams.onCommandSettled(trx, {
        commandId,
        sessionId: row.session_id,
        tenantId: row.tenant_id,
        name,
        data: {},
        outcome,
        error: outcome === 'failed' ? { code: 'nope' } : null,
      }),
    );

  beforeAll(async () => {
    // The sweeps are called by the tests with their own limits; the server's own sweep jobs, which
    // run on real time, must not act on what the manual clock jumps over (they did under load: a
    // stream stopped as disconnected before the test's idle sweep ran).
    server = await startTestServer(
      backend,
      { LIVELINE_STREAM_GRACE_S: '86400', LIVELINE_SESSION_IDLE_TIMEOUT_S: String(30 * 86400) },
      { clock },
    );
    base = server.url;
    tenant = await createTenant(base, server.adminToken);
  });
  afterAll(async () => server?.close());

  it('the app starts and stops a stream and a recording: events, session fields, interval', async () => {
    const { token, sessionId, playerId } = await startSession();
    clock.advance(1000);
    const t0 = clock.now();
    const started = await device(token, sessionId, 'stream/start', { resolution: 2, aspectratio: 1 });
    expect(started.status).toBe(200);
    const streamingSessionId = String(started.body.streamingSessionId);
    expect(streamingSessionId).toMatch(UUID);
    expect(Object.keys(started.body)).toEqual(['streamingSessionId']);

    let s = await getSession(sessionId);
    expect(s.stream).toEqual({
      state: 'streaming',
      streamingSessionId,
      resolution: 2,
      aspectratio: 1,
      startedAt: t0,
    });
    expect(s.recording).toEqual({ state: 'idle', recordingId: null, startedAt: null });
    expect(s.lastSeenAt).toBe(t0);

    clock.advance(2000);
    const t1 = clock.now();
    const rec = await device(token, sessionId, 'record/start');
    expect(rec.status).toBe(200);
    const recordingId = String(rec.body.recordingId);
    expect(recordingId).toMatch(UUID);
    s = await getSession(sessionId);
    expect(s.recording).toEqual({ state: 'recording', recordingId, startedAt: t1 });

    clock.advance(3000);
    const t2 = clock.now();
    const recStop = await device(token, sessionId, 'record/stop', {});
    expect(recStop.status).toBe(200);
    expect(recStop.body).toEqual({ recordingId });

    clock.advance(4000);
    const t3 = clock.now();
    const stop = await device(token, sessionId, 'stream/stop');
    expect(stop.status).toBe(200);
    expect(stop.body).toEqual({ streamingSessionId });

    s = await getSession(sessionId);
    expect(s.stream).toEqual({
      state: 'idle',
      streamingSessionId: null,
      resolution: null,
      aspectratio: null,
      startedAt: null,
    });
    expect(s.recording).toEqual({ state: 'idle', recordingId: null, startedAt: null });
    expect(s.lastSeenAt).toBe(t3);

    const id = expect.stringMatching(UUID);
    expect(s.events).toEqual([
      {
        id,
        sessionId,
        eventType: 'StreamStarted',
        timestamp: t0,
        streamingSessionId,
        resolution: 2,
        aspectratio: 1,
      },
      { id, sessionId, eventType: 'RecordingStarted', timestamp: t1, recordingId, streamingSessionId },
      { id, sessionId, eventType: 'RecordingStopped', timestamp: t2, recordingId, streamingSessionId },
      { id, sessionId, eventType: 'StreamStopped', timestamp: t3, streamingSessionId, reason: 'app' },
    ]);
    expect(await server.services.streams.intervalsForPlayer(tenant.tenantId, playerId)).toEqual([
      { streamingSessionId, sessionId, startedAt: t0, stoppedAt: t3, stopReason: 'app' },
    ]);

    // A second stream on the same session gets a new id and its own interval.
    const again = await device(token, sessionId, 'stream/start', { resolution: 0, aspectratio: 4 });
    expect(again.status).toBe(200);
    expect(again.body.streamingSessionId).not.toBe(streamingSessionId);
    expect((await getSession(sessionId)).stream).toMatchObject({
      state: 'streaming',
      resolution: 0,
      aspectratio: 4,
    });
  });

  it('stopping the stream stops its recording first', async () => {
    const { token, sessionId } = await startSession();
    const { body: stream } = await device(token, sessionId, 'stream/start', {
      resolution: 1,
      aspectratio: 0,
    });
    clock.advance(500);
    const { body: rec } = await device(token, sessionId, 'record/start');
    clock.advance(500);
    expect((await device(token, sessionId, 'stream/stop')).status).toBe(200);
    const events = await serverEvents(sessionId);
    expect(events.map((e) => e.eventType)).toEqual([
      'StreamStarted',
      'RecordingStarted',
      'RecordingStopped',
      'StreamStopped',
    ]);
    expect(events[2]).toMatchObject({
      recordingId: rec.recordingId,
      streamingSessionId: stream.streamingSessionId,
    });
    expect((await getSession(sessionId)).recording).toEqual({
      state: 'idle',
      recordingId: null,
      startedAt: null,
    });
  });

  it('answers every state conflict with 409 and its code', async () => {
    const { token, sessionId } = await startSession();
    const expect409 = async (path: string, code: string, json?: unknown) => {
      const res = await device(token, sessionId, path, json);
      expect(res.status, `${path} → ${res.text}`).toBe(409);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ status: 409, code });
    };
    await expect409('stream/stop', 'not_streaming');
    await expect409('record/start', 'not_streaming');
    await expect409('record/stop', 'not_recording');
    expect((await device(token, sessionId, 'stream/start', { resolution: 1, aspectratio: 1 })).status).toBe(
      200,
    );
    await expect409('stream/start', 'already_streaming', { resolution: 1, aspectratio: 1 });
    await expect409('record/stop', 'not_recording');
    expect((await device(token, sessionId, 'record/start')).status).toBe(200);
    await expect409('record/start', 'already_recording');
    expect((await device(token, sessionId, 'record/stop')).status).toBe(200);
    await expect409('record/stop', 'not_recording');
    expect((await device(token, sessionId, 'stream/stop')).status).toBe(200);
    await expect409('stream/stop', 'not_streaming');
    // Nothing refused left a trace.
    expect((await serverEvents(sessionId)).map((e) => e.eventType)).toEqual([
      'StreamStarted',
      'RecordingStarted',
      'RecordingStopped',
      'StreamStopped',
    ]);

    expect((await device(token, sessionId, 'end')).status).toBe(200);
    await expect409('stream/start', 'session_ended', { resolution: 1, aspectratio: 1 });
    await expect409('stream/stop', 'session_ended');
    await expect409('record/start', 'session_ended');
    await expect409('record/stop', 'session_ended');
  });

  it('of concurrent starts exactly one wins', async () => {
    const { token, sessionId, playerId } = await startSession();
    const results = await Promise.all(
      Array.from({ length: 6 }, () =>
        device(token, sessionId, 'stream/start', { resolution: 1, aspectratio: 1 }),
      ),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409, 409, 409, 409]);
    const recs = await Promise.all(Array.from({ length: 4 }, () => device(token, sessionId, 'record/start')));
    expect(recs.map((r) => r.status).sort()).toEqual([200, 409, 409, 409]);
    expect(await server.services.streams.intervalsForPlayer(tenant.tenantId, playerId)).toHaveLength(1);
    expect((await serverEvents(sessionId)).map((e) => e.eventType)).toEqual([
      'StreamStarted',
      'RecordingStarted',
    ]);
  });

  it('rejects bad input with 400 and paths', async () => {
    const { token, sessionId } = await startSession();
    const bad = async (json: unknown, errors: Json[], path = 'stream/start') => {
      const res = await device(token, sessionId, path, json);
      expect(res.status, JSON.stringify(json)).toBe(400);
      expect(res.body.code).toBe('validation_failed');
      expect(res.body.errors).toEqual(errors);
    };
    await bad({ resolution: 5, aspectratio: -1 }, [
      { path: 'resolution', message: 'must be <= 4' },
      { path: 'aspectratio', message: 'must be >= 0' },
    ]);
    await bad({ resolution: 1 }, [{ path: 'aspectratio', message: 'is required' }]);
    await bad({}, [
      { path: 'resolution', message: 'is required' },
      { path: 'aspectratio', message: 'is required' },
    ]);
    await bad({ resolution: '1', aspectratio: 1.5 }, [
      { path: 'resolution', message: 'must be integer' },
      { path: 'aspectratio', message: 'must be integer' },
    ]);
    await bad({ resolution: 1, aspectratio: 1, fps: 60 }, [
      { path: 'fps', message: 'is not an allowed field' },
    ]);
    await bad({ force: true }, [{ path: 'force', message: 'is not an allowed field' }], 'stream/stop');
    await bad({ x: 1 }, [{ path: 'x', message: 'is not an allowed field' }], 'record/start');
    const noBody = await device(token, sessionId, 'stream/start');
    expect(noBody.status).toBe(400);
    const badId = await call(base, 'POST', '/client/v1/sessions/nope/stream/stop', { token });
    expect(badId.status).toBe(400);
    expect(badId.body.errors).toEqual([{ path: 'path.sessionId', message: 'must match format "uuid"' }]);
    // None of it changed anything.
    expect((await getSession(sessionId)).stream).toMatchObject({ state: 'idle' });
  });

  it('only the session’s own device may use it', async () => {
    const { token, sessionId } = await startSession();
    const stranger = await deviceToken(base, tenant.token, 'stranger');
    for (const path of ['stream/start', 'stream/stop', 'record/start', 'record/stop']) {
      const json = path === 'stream/start' ? { resolution: 1, aspectratio: 1 } : undefined;
      const res = await device(stranger, sessionId, path, json);
      expect(res.status, path).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    const other = await createTenant(base, server.adminToken);
    const foreign = await deviceToken(base, other.token, 'player-1');
    expect((await device(foreign, sessionId, 'stream/stop')).status).toBe(404);
    expect((await device(tenant.token, sessionId, 'stream/stop')).status).toBe(403);
    expect((await call(base, 'POST', `/client/v1/sessions/${sessionId}/stream/stop`)).status).toBe(401);
    expect((await getSession(sessionId)).stream).toMatchObject({ state: 'idle' });
    expect((await device(token, sessionId, 'stream/stop')).status).toBe(409);
  });

  it('events ingested during a stream carry its streamingSessionId; before and after they do not', async () => {
    const { token, sessionId } = await startSession();
    await ingest(token, sessionId, 'before');
    clock.advance(10);
    const { body } = await device(token, sessionId, 'stream/start', { resolution: 3, aspectratio: 2 });
    clock.advance(10);
    await ingest(token, sessionId, 'during');
    // A tenant stop command in flight: the stream still runs, so events are still tied to it.
    const row = await sessionRow(sessionId);
    await server.services.storage.db
      .transaction()
      .execute((trx) => server.services.streams.requestStreamStop(trx, row, 'stop-1'));
    expect((await getSession(sessionId)).stream).toMatchObject({ state: 'stopping' });
    clock.advance(10);
    await ingest(token, sessionId, 'stopping');
    await settle(row, 'stop-1', 'stream.stop', 'acknowledged');
    clock.advance(10);
    await ingest(token, sessionId, 'after');
    const byId = new Map((await getSession(sessionId)).events.map((e) => [e.id, e]));
    expect(byId.get('before')).not.toHaveProperty('streamingSessionId');
    expect(byId.get('during')).toMatchObject({ streamingSessionId: body.streamingSessionId });
    expect(byId.get('stopping')).toMatchObject({ streamingSessionId: body.streamingSessionId });
    expect(byId.get('after')).not.toHaveProperty('streamingSessionId');
    // The event query API filters on the stored column too.
    const stopped = (await serverEvents(sessionId)).find((e) => e.eventType === 'StreamStopped');
    expect(stopped).toMatchObject({ streamingSessionId: body.streamingSessionId, reason: 'command' });
  });

  it('ending the session stops its stream and recording before SessionEnd', async () => {
    const { token, sessionId, playerId } = await startSession();
    const t0 = clock.now();
    const { body: stream } = await device(token, sessionId, 'stream/start', {
      resolution: 1,
      aspectratio: 1,
    });
    const { body: rec } = await device(token, sessionId, 'record/start');
    clock.advance(65_000);
    const endedAt = clock.now();
    const ended = await device(token, sessionId, 'end');
    expect(ended.status).toBe(200);
    expect(ended.body).toMatchObject({
      status: 'ended',
      stream: { state: 'idle', streamingSessionId: null },
      recording: { state: 'idle', recordingId: null },
    });
    const events = await serverEvents(sessionId);
    expect(events.map((e) => e.eventType)).toEqual([
      'StreamStarted',
      'RecordingStarted',
      'RecordingStopped',
      'StreamStopped',
      'SessionEnd',
    ]);
    expect(events[2]).toMatchObject({ recordingId: rec.recordingId, timestamp: endedAt });
    expect(events[3]).toMatchObject({
      streamingSessionId: stream.streamingSessionId,
      reason: 'session_ended',
      timestamp: endedAt,
    });
    // SessionEnd is no longer tied to the stream.
    expect(events[4]).not.toHaveProperty('streamingSessionId');
    expect(await server.services.streams.intervalsForPlayer(tenant.tenantId, playerId)).toEqual([
      {
        streamingSessionId: stream.streamingSessionId,
        sessionId,
        startedAt: t0,
        stoppedAt: endedAt,
        stopReason: 'session_ended',
      },
    ]);
  });

  it('an idle-ended session’s stream ends at the session’s end, its last contact', async () => {
    const { token, sessionId, playerId } = await startSession();
    const t0 = clock.now();
    await device(token, sessionId, 'stream/start', { resolution: 1, aspectratio: 1 });
    clock.advance(30_000);
    await ingest(token, sessionId, 'last-words');
    const lastContact = clock.now();
    clock.advance(20 * 60_000);
    expect(await server.services.sessions.sweepIdle(10 * 60_000)).toBeGreaterThanOrEqual(1);
    const [interval] = await server.services.streams.intervalsForPlayer(tenant.tenantId, playerId);
    expect(interval).toMatchObject({ startedAt: t0, stoppedAt: lastContact, stopReason: 'session_ended' });
    const stopped = (await serverEvents(sessionId)).find((e) => e.eventType === 'StreamStopped');
    expect(stopped).toMatchObject({ reason: 'session_ended', timestamp: clock.now() });
  });

  it('the disconnect sweep stops a stream at the last contact', async () => {
    const gone = await startSession();
    const connected = await startSession();
    const recent = await startSession();
    const t0 = clock.now();
    for (const s of [gone, connected, recent]) {
      expect(
        (await device(s.token, s.sessionId, 'stream/start', { resolution: 2, aspectratio: 0 })).status,
      ).toBe(200);
    }
    await device(gone.token, gone.sessionId, 'record/start');
    clock.advance(15_000);
    await ingest(gone.token, gone.sessionId, 'last-contact');
    const lastContact = clock.now();
    clock.advance(45_000);
    await ingest(recent.token, recent.sessionId, 'still-here');
    clock.advance(30_000);
    // `gone` last seen 75 s ago, `connected` 90 s ago but holding a socket, `recent` 30 s ago.
    // Streams of earlier tests' sessions count as connected here, so only these three are in play.
    const mine = new Set([gone.sessionId, connected.sessionId, recent.sessionId]);
    const connectedBut =
      (...away: string[]) =>
      async (ids: string[]) =>
        new Set(ids.filter((id) => !mine.has(id) || !away.includes(id)));
    const asked: string[][] = [];
    const stopped = await server.services.streams.sweepDisconnected(
      60_000,
      async (ids) => {
        asked.push(ids);
        return connectedBut(gone.sessionId, recent.sessionId)(ids);
      },
      2,
    );
    expect(stopped).toBe(1);
    // Every live stream is looked at, page by page.
    expect(asked.every((page) => page.length <= 2)).toBe(true);
    expect(asked.flat()).toEqual(
      expect.arrayContaining([gone.sessionId, connected.sessionId, recent.sessionId]),
    );

    const s = await getSession(gone.sessionId);
    expect(s.stream).toMatchObject({ state: 'idle', streamingSessionId: null });
    expect(s.recording).toMatchObject({ state: 'idle' });
    const events = s.events.filter((e) => SERVER_EVENTS.includes(String(e.eventType)));
    expect(events.map((e) => e.eventType)).toEqual([
      'StreamStarted',
      'RecordingStarted',
      'RecordingStopped',
      'StreamStopped',
    ]);
    // The event carries server time; the interval ends at the last contact.
    expect(events[3]).toMatchObject({ reason: 'disconnected', timestamp: clock.now() });
    expect(await server.services.streams.intervalsForPlayer(tenant.tenantId, gone.playerId)).toEqual([
      {
        streamingSessionId: events[0].streamingSessionId,
        sessionId: gone.sessionId,
        startedAt: t0,
        stoppedAt: lastContact,
        stopReason: 'disconnected',
      },
    ]);
    expect((await getSession(connected.sessionId)).stream).toMatchObject({ state: 'streaming' });
    expect((await getSession(recent.sessionId)).stream).toMatchObject({ state: 'streaming' });
    expect(
      await server.services.streams.sweepDisconnected(60_000, connectedBut(gone.sessionId, recent.sessionId)),
    ).toBe(0);
    // Once it drops off the bus too, the connected one goes as well.
    expect(await server.services.streams.sweepDisconnected(60_000, connectedBut(connected.sessionId))).toBe(
      1,
    );
    expect((await getSession(connected.sessionId)).stream).toMatchObject({ state: 'idle' });
    // The session itself lives on: the device may come back and stream again.
    expect((await getSession(gone.sessionId)).status).toBe('live');
    expect(
      (await device(gone.token, gone.sessionId, 'stream/start', { resolution: 2, aspectratio: 0 })).status,
    ).toBe(200);
  });

  it('the session list routes show every session’s stream in one page', async () => {
    const a = await startSession();
    const b = await startSession();
    const { body } = await device(a.token, a.sessionId, 'stream/start', { resolution: 4, aspectratio: 3 });
    const res = await call<{ sessions: Json[] }>(base, 'GET', '/sessions/active?minutes=1', {
      token: tenant.token,
    });
    expect(res.status).toBe(200);
    const byId = new Map(res.body.sessions.map((s) => [s.sessionId, s]));
    expect(byId.get(a.sessionId)).toMatchObject({
      stream: {
        state: 'streaming',
        streamingSessionId: body.streamingSessionId,
        resolution: 4,
        aspectratio: 3,
      },
    });
    expect(byId.get(b.sessionId)).toMatchObject({ stream: { state: 'idle', streamingSessionId: null } });
  });

  it('tenant commands move the state and wait for the device; stale outcomes do nothing', async () => {
    const { token, sessionId, playerId } = await startSession();
    const row = await sessionRow(sessionId);
    const { db } = server.services.storage;
    const { streams } = server.services;

    const { streamingSessionId } = await db
      .transaction()
      .execute((trx) => streams.requestStreamStart(trx, row, { resolution: 2, aspectratio: 1 }, 'c-start'));
    expect(streamingSessionId).toMatch(UUID);
    expect((await getSession(sessionId)).stream).toEqual({
      state: 'starting',
      streamingSessionId,
      resolution: 2,
      aspectratio: 1,
      startedAt: null,
    });
    // Not yet streaming: no events tied to it, no interval, a second start refused.
    await ingest(token, sessionId, 'while-starting');
    expect((await getSession(sessionId)).events.find((e) => e.id === 'while-starting')).not.toHaveProperty(
      'streamingSessionId',
    );
    await expect(
      db
        .transaction()
        .execute((trx) => streams.requestStreamStart(trx, row, { resolution: 1, aspectratio: 1 }, 'c-x')),
    ).rejects.toMatchObject({ status: 409, code: 'already_streaming' });
    expect(
      (await device(token, sessionId, 'stream/start', { resolution: 1, aspectratio: 1 })).body.code,
    ).toBe('already_streaming');
    expect(await streams.intervalsForPlayer(tenant.tenantId, playerId)).toEqual([]);

    // Outcomes of other commands (or of other kinds) change nothing.
    await settle(row, 'c-other', 'stream.start', 'acknowledged');
    await settle(row, 'c-start', 'record.start', 'acknowledged');
    await settle(row, 'c-start', 'camera', 'acknowledged');
    expect((await getSession(sessionId)).stream).toMatchObject({ state: 'starting' });

    clock.advance(1000);
    const t0 = clock.now();
    await settle(row, 'c-start', 'stream.start', 'acknowledged');
    expect((await getSession(sessionId)).stream).toMatchObject({ state: 'streaming', startedAt: t0 });
    // Delivered twice: the second outcome is stale.
    await settle(row, 'c-start', 'stream.start', 'failed');
    expect((await getSession(sessionId)).stream).toMatchObject({ state: 'streaming' });

    // A recording by command: refused, then granted.
    const { recordingId } = await db
      .transaction()
      .execute((trx) => streams.requestRecordStart(trx, row, 'c-rec'));
    expect((await getSession(sessionId)).recording).toEqual({
      state: 'starting',
      recordingId,
      startedAt: null,
    });
    await settle(row, 'c-rec', 'record.start', 'failed');
    expect((await getSession(sessionId)).recording).toEqual({
      state: 'idle',
      recordingId: null,
      startedAt: null,
    });
    const second = await db.transaction().execute((trx) => streams.requestRecordStart(trx, row, 'c-rec2'));
    clock.advance(1000);
    await settle(row, 'c-rec2', 'record.start', 'acknowledged');
    expect((await getSession(sessionId)).recording).toEqual({
      state: 'recording',
      recordingId: second.recordingId,
      startedAt: clock.now(),
    });
    await db.transaction().execute((trx) => streams.requestRecordStop(trx, row, 'c-rec-stop'));
    expect((await getSession(sessionId)).recording).toMatchObject({ state: 'stopping' });
    await settle(row, 'c-rec-stop', 'record.stop', 'expired');
    expect((await getSession(sessionId)).recording).toMatchObject({ state: 'recording' });

    // Stop by command: expired → still streaming; then acknowledged → idle, recording with it.
    await db.transaction().execute((trx) => streams.requestStreamStop(trx, row, 'c-stop'));
    await expect(
      db.transaction().execute((trx) => streams.requestStreamStop(trx, row, 'c-stop-again')),
    ).rejects.toMatchObject({ code: 'not_streaming' });
    await settle(row, 'c-stop', 'stream.stop', 'expired');
    expect((await getSession(sessionId)).stream).toMatchObject({ state: 'streaming', startedAt: t0 });
    await db.transaction().execute((trx) => streams.requestStreamStop(trx, row, 'c-stop2'));
    clock.advance(5000);
    const t1 = clock.now();
    await settle(row, 'c-stop2', 'stream.stop', 'acknowledged');
    const s = await getSession(sessionId);
    expect(s.stream).toMatchObject({ state: 'idle', streamingSessionId: null });
    expect(s.recording).toMatchObject({ state: 'idle', recordingId: null });
    const events = s.events.filter((e) => SERVER_EVENTS.includes(String(e.eventType)));
    expect(events.map((e) => [e.eventType, e.timestamp])).toEqual([
      ['StreamStarted', t0],
      ['RecordingStarted', t1 - 5000],
      ['RecordingStopped', t1],
      ['StreamStopped', t1],
    ]);
    expect(events[3]).toMatchObject({ streamingSessionId, reason: 'command' });
    expect(await streams.intervalsForPlayer(tenant.tenantId, playerId)).toEqual([
      { streamingSessionId, sessionId, startedAt: t0, stoppedAt: t1, stopReason: 'command' },
    ]);
  });

  it('a refused request leaves the command transaction to roll back as a whole', async () => {
    const { sessionId } = await startSession();
    const row = await sessionRow(sessionId);
    const { db } = server.services.storage;
    const err = await db
      .transaction()
      .execute((trx) => server.services.streams.requestRecordStart(trx, row, 'c-1'))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProblemError);
    expect(err).toMatchObject({ status: 409, code: 'not_streaming' });
    // Concurrent tenant starts inside their own transactions: exactly one wins.
    const results = await Promise.allSettled(
      Array.from({ length: 5 }, (_, i) =>
        db
          .transaction()
          .execute((trx) =>
            server.services.streams.requestStreamStart(
              trx,
              row,
              { resolution: 0, aspectratio: 0 },
              `race-${i}`,
            ),
          ),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) {
      if (r.status === 'rejected') expect(r.reason).toMatchObject({ code: 'already_streaming' });
    }
    // An ended session takes no command.
    await server.services.sessions.end(row, 'device');
    const ended = await sessionRow(sessionId);
    expect((await getSession(sessionId)).stream).toMatchObject({ state: 'idle' });
    await expect(
      db
        .transaction()
        .execute((trx) =>
          server.services.streams.requestStreamStart(trx, ended, { resolution: 0, aspectratio: 0 }, 'late'),
        ),
    ).rejects.toMatchObject({ code: 'session_ended' });
  });

  it('a start acknowledged after its session ended starts nothing', async () => {
    const { sessionId, playerId } = await startSession();
    const row = await sessionRow(sessionId);
    await server.services.storage.db
      .transaction()
      .execute((trx) =>
        server.services.streams.requestStreamStart(trx, row, { resolution: 0, aspectratio: 0 }, 'c-late'),
      );
    await server.services.sessions.end(row, 'device');
    await settle(row, 'c-late', 'stream.start', 'acknowledged');
    expect((await getSession(sessionId)).stream).toMatchObject({ state: 'idle' });
    expect(await serverEvents(sessionId)).toMatchObject([{ eventType: 'SessionEnd' }]);
    expect(await server.services.streams.intervalsForPlayer(tenant.tenantId, playerId)).toEqual([]);
  });

  it('records every interval exactly and answers window queries', async () => {
    const playerId = 'interval-player';
    const one = await startSession(playerId);
    const two = await startSession(playerId);
    const start = clock.now();
    const a = await device(one.token, one.sessionId, 'stream/start', { resolution: 1, aspectratio: 1 });
    clock.advance(60_000);
    // A second headset of the same player streams overlapping the first.
    const b = await device(two.token, two.sessionId, 'stream/start', { resolution: 1, aspectratio: 1 });
    clock.advance(30_000);
    await device(one.token, one.sessionId, 'stream/stop');
    clock.advance(60_000);
    const c = await device(one.token, one.sessionId, 'stream/start', { resolution: 1, aspectratio: 1 });
    const all = await server.services.streams.intervalsForPlayer(tenant.tenantId, playerId);
    expect(all).toEqual([
      {
        streamingSessionId: a.body.streamingSessionId,
        sessionId: one.sessionId,
        startedAt: start,
        stoppedAt: start + 90_000,
        stopReason: 'app',
      },
      {
        streamingSessionId: b.body.streamingSessionId,
        sessionId: two.sessionId,
        startedAt: start + 60_000,
        stoppedAt: null,
        stopReason: null,
      },
      {
        streamingSessionId: c.body.streamingSessionId,
        sessionId: one.sessionId,
        startedAt: start + 150_000,
        stoppedAt: null,
        stopReason: null,
      },
    ]);
    const ids = async (from?: number, to?: number) =>
      (await server.services.streams.intervalsForPlayer(tenant.tenantId, playerId, from, to)).map(
        (i) => i.streamingSessionId,
      );
    expect(await ids(start + 90_000)).toEqual([b.body.streamingSessionId, c.body.streamingSessionId]);
    expect(await ids(start + 89_999)).toHaveLength(3);
    expect(await ids(undefined, start + 60_000)).toEqual([a.body.streamingSessionId]);
    expect(await ids(start + 100_000, start + 150_000)).toEqual([b.body.streamingSessionId]);
    // Another player's and another tenant's streams are not in it.
    expect(await server.services.streams.intervalsForPlayer(tenant.tenantId, 'nobody')).toEqual([]);
    expect(await server.services.streams.intervalsForPlayer('other-tenant', playerId)).toEqual([]);
  });
});

/**
 * Cohort-wide commands (CONTRACT §12) over real HTTP and real device sockets: a command to every
 * live session of a cohort, sessions whose state refuses it listed with their own error, devices
 * offline at the time served on reconnect, the batch view's counts moving as devices answer,
 * Idempotency-Key retries, what is left out (ended sessions, other cohorts, other tenants), bad
 * bodies refused with nothing written, and the batch limit.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Answer, call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { TestSocket } from '../helpers/device-socket.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;
interface Entry {
  sessionId: string;
  commandId?: string;
  status?: string;
  error?: { code: string; detail: string };
}
interface BatchAnswer {
  batchId: string;
  total: number;
  accepted: number;
  refused: number;
  sessions: Entry[];
}
interface BatchView extends BatchAnswer {
  tenantCohortId: string;
  name: string;
  counts: Record<string, number>;
  nextCursor: string | null;
  hasMore: boolean;
}

function expectProblem(res: Answer, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(res.body.code).toBe(code);
}

const cohortName = () => `c-${randomUUID().slice(0, 8)}`;

describe.each(backends)('cohort-wide commands (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  const sockets: TestSocket[] = [];

  beforeAll(async () => {
    server = await startTestServer(backend, {
      LIVELINE_COMMAND_SWEEP_MS: '100',
      LIVELINE_COHORT_COMMAND_MAX_SESSIONS: '60',
    });
    base = server.url;
    tenant = await createTenant(base, server.adminToken);
  });
  afterEach(async () => {
    await Promise.all(sockets.splice(0).map((s) => (s.closed ? null : s.close())));
  });
  afterAll(async () => server?.close());

  const as = (t: TenantFixture) => ({
    post: (path: string, json?: unknown, headers?: Record<string, string>) =>
      call<Json>(base, 'POST', path, { token: t.token, json, headers }),
    put: (path: string, json?: unknown, headers?: Record<string, string>) =>
      call<Json>(base, 'PUT', path, { token: t.token, json, headers }),
    get: (path: string) => call<Json>(base, 'GET', path, { token: t.token }),
  });
  const api = () => as(tenant);
  const cohortCommands = (cohort: string) => `/cohorts/${cohort}/realtime/commands`;
  const batchOf = async (cohort: string, batchId: string, query = '') => {
    const res = await api().get(`/cohorts/${cohort}/realtime/batches/${batchId}${query}`);
    expect(res.status, res.text).toBe(200);
    return res.body as unknown as BatchView;
  };

  /** A live session in the cohort; with `connect`, its socket (acking every command with `ack`). */
  async function session(cohort: string | null, t: TenantFixture = tenant) {
    const token = await deviceToken(base, t.token, `p-${randomUUID()}`, cohort ?? undefined);
    const res = await call(base, 'POST', '/client/v1/sessions', { token, json: {} });
    expect(res.status, res.text).toBe(201);
    return { token, sessionId: String(res.body.sessionId) };
  }
  async function connect(s: { sessionId: string; token: string }, ack = true) {
    const socket = await TestSocket.open(base, s.sessionId, s.token);
    sockets.push(socket);
    if (ack) {
      socket.ws.on('message', (data) => {
        const m = JSON.parse(data.toString()) as { type: string; commandId?: string };
        if (m.type === 'command') socket.send({ type: 'ack', commandId: m.commandId, ok: true });
      });
      // Pending commands follow the welcome at once, maybe before the listener was added.
      for (const m of socket.messages)
        if (m.type === 'command') socket.send({ type: 'ack', commandId: m.commandId, ok: true });
    }
    await socket.ofType('welcome');
    return socket;
  }
  const sorted = (ids: string[]) => [...ids].sort();

  it('50 live devices, 10 already streaming: 40 stream commands delivered and acknowledged, 10 refused with already_streaming; the counts follow', async () => {
    const cohort = cohortName();
    const all = await Promise.all(Array.from({ length: 50 }, () => session(cohort)));
    const streaming = all.slice(0, 10);
    for (const s of streaming) {
      const started = await call(base, 'POST', `/client/v1/sessions/${s.sessionId}/stream/start`, {
        token: s.token,
        json: { resolution: 1, aspectratio: 0 },
      });
      expect(started.status, started.text).toBe(200);
    }
    const sockets = await Promise.all(all.map((s) => connect(s)));

    const res = await api().post(`${cohortCommands(cohort)}/stream`, { resolution: 2, aspectratio: 1 });
    expect(res.status, res.text).toBe(202);
    const answer = res.body as unknown as BatchAnswer;
    expect(answer).toMatchObject({ total: 50, accepted: 40, refused: 10 });
    expect(answer.sessions.map((e) => e.sessionId)).toEqual(sorted(all.map((s) => s.sessionId)));
    const refusedIds = new Set(streaming.map((s) => s.sessionId));
    for (const entry of answer.sessions) {
      if (refusedIds.has(entry.sessionId)) {
        expect(entry).toEqual({
          sessionId: entry.sessionId,
          error: { code: 'already_streaming', detail: expect.any(String) },
        });
      } else {
        expect(entry).toEqual({
          sessionId: entry.sessionId,
          commandId: expect.any(String),
          status: 'delivered',
        });
      }
    }
    // Every device that was not streaming got the command, with a stream id the server allocated.
    await Promise.all(
      all.map(async (s, i) => {
        if (refusedIds.has(s.sessionId)) return;
        const command = await sockets[i].ofType('command');
        const entry = answer.sessions.find((e) => e.sessionId === s.sessionId)!;
        expect(command).toMatchObject({ commandId: entry.commandId, name: 'stream.start' });
        expect(command.data).toMatchObject({
          resolution: 2,
          aspectratio: 1,
          streamingSessionId: expect.any(String),
        });
      }),
    );
    for (const i of [0, 1]) expect(sockets[i].messages.filter((m) => m.type === 'command')).toEqual([]);

    await expect
      .poll(async () => (await batchOf(cohort, answer.batchId)).counts.acknowledged, { timeout: 10_000 })
      .toBe(40);
    const view = await batchOf(cohort, answer.batchId);
    expect(view).toMatchObject({
      batchId: answer.batchId,
      tenantCohortId: cohort,
      name: 'stream.start',
      total: 50,
      accepted: 40,
      refused: 10,
      counts: { queued: 0, delivered: 0, acknowledged: 40, failed: 0, expired: 0, cancelled: 0 },
      nextCursor: null,
      hasMore: false,
    });
    expect(view.sessions.map((e) => e.sessionId)).toEqual(answer.sessions.map((e) => e.sessionId));
    expect(view.sessions.filter((e) => e.status === 'acknowledged')).toHaveLength(40);
    expect(view.sessions.filter((e) => e.error?.code === 'already_streaming')).toHaveLength(10);
    // All 50 stream now: the 40 by the batch (acked), the 10 as before.
    await expect
      .poll(async () => {
        const states = await Promise.all(
          all.map(async (s) => ((await api().get(`/sessions/${s.sessionId}`)).body.stream as Json).state),
        );
        return states.filter((st) => st === 'streaming').length;
      })
      .toBe(50);

    // Pages of the per-session list, in session order, by cursor.
    const first = await batchOf(cohort, answer.batchId, '?limit=20');
    expect(first.sessions).toHaveLength(20);
    expect(first.hasMore).toBe(true);
    expect(first.nextCursor).toBe(first.sessions[19].sessionId);
    const second = await batchOf(cohort, answer.batchId, `?limit=20&after=${first.nextCursor}`);
    const third = await batchOf(cohort, answer.batchId, `?limit=20&after=${second.nextCursor}`);
    expect(third).toMatchObject({ hasMore: false, nextCursor: null });
    expect([...first.sessions, ...second.sessions, ...third.sessions]).toEqual(view.sessions);
    // The same cohort's stream stop: now every session streams, so all 50 are sent one.
    const stop = await api().put(`${cohortCommands(cohort)}/stream/stop`);
    expect(stop.status, stop.text).toBe(202);
    expect(stop.body).toMatchObject({ total: 50, accepted: 50, refused: 0 });
  }, 60_000);

  it('devices offline when it is sent get it when they reconnect; the counts move from queued', async () => {
    const cohort = cohortName();
    const online = await Promise.all(Array.from({ length: 3 }, () => session(cohort)));
    const offline = await Promise.all(Array.from({ length: 2 }, () => session(cohort)));
    await Promise.all(online.map((s) => connect(s)));

    const res = await api().post(`${cohortCommands(cohort)}?ttlSeconds=120`, {
      name: 'text',
      data: 'hello class',
    });
    expect(res.status, res.text).toBe(202);
    const answer = res.body as unknown as BatchAnswer;
    expect(answer).toMatchObject({ total: 5, accepted: 5, refused: 0 });
    const statusOf = (id: string) => answer.sessions.find((e) => e.sessionId === id)?.status;
    for (const s of online) expect(statusOf(s.sessionId)).toBe('delivered');
    for (const s of offline) expect(statusOf(s.sessionId)).toBe('queued');
    // The TTL is the batch's: two minutes.
    const one = await api().get(
      `/sessions/${offline[0].sessionId}/realtime/commands/${answer.sessions.find((e) => e.sessionId === offline[0].sessionId)?.commandId}`,
    );
    expect(Number(one.body.expiresAt) - Number(one.body.issuedAt)).toBe(120_000);

    await expect
      .poll(async () => (await batchOf(cohort, answer.batchId)).counts)
      .toMatchObject({ queued: 2, acknowledged: 3 });

    const late = await Promise.all(offline.map((s) => connect(s)));
    for (const socket of late)
      expect(await socket.ofType('command')).toMatchObject({ name: 'text', data: 'hello class' });
    await expect
      .poll(async () => (await batchOf(cohort, answer.batchId)).counts)
      .toEqual({ queued: 0, delivered: 0, acknowledged: 5, failed: 0, expired: 0, cancelled: 0 });
  });

  it('an Idempotency-Key retry gets the first answer byte for byte; another body or cohort with the key is 409 idempotency_key_reused', async () => {
    const cohort = cohortName();
    const members = await Promise.all(Array.from({ length: 3 }, () => session(cohort)));
    const key = `key-${randomUUID()}`;
    const body = { name: 'difficulty', data: { names: ['level'], types: ['int'], values: ['3'] } };
    const first = await api().post(cohortCommands(cohort), body, { 'idempotency-key': key });
    expect(first.status, first.text).toBe(202);
    // A session that joins meanwhile changes nothing for the retry.
    await session(cohort);
    const retry = await api().post(cohortCommands(cohort), body, { 'idempotency-key': key });
    expect(retry.status).toBe(202);
    expect(retry.text).toBe(first.text);
    // Concurrent retries too.
    const burst = await Promise.all(
      Array.from({ length: 4 }, () => api().post(cohortCommands(cohort), body, { 'idempotency-key': key })),
    );
    for (const b of burst) expect(b.text).toBe(first.text);
    expectProblem(
      await api().post(
        cohortCommands(cohort),
        { ...body, data: { ...body.data, values: ['4'] } },
        { 'idempotency-key': key },
      ),
      409,
      'idempotency_key_reused',
    );
    expectProblem(
      await api().post(cohortCommands(cohortName()), body, { 'idempotency-key': key }),
      409,
      'idempotency_key_reused',
    );
    // One command per session, not one per request.
    for (const m of members) {
      const list = await api().get(`/sessions/${m.sessionId}/realtime/commands`);
      expect(list.body.totalCount).toBe(1);
    }
    // A concurrent first request: one batch, the same answer for all.
    const key2 = `key-${randomUUID()}`;
    const racing = await Promise.all(
      Array.from({ length: 4 }, () =>
        api().post(cohortCommands(cohort), { name: 'text', data: 'once' }, { 'idempotency-key': key2 }),
      ),
    );
    for (const r of racing) {
      expect(r.status, r.text).toBe(202);
      expect(r.text).toBe(racing[0].text);
    }
    const list = await api().get(`/sessions/${members[0].sessionId}/realtime/commands`);
    expect(list.body.totalCount).toBe(2);
  });

  it('ended sessions, other cohorts and other tenants are left out; another tenant gets 404 for the batch', async () => {
    const cohort = cohortName();
    const live = await Promise.all(Array.from({ length: 2 }, () => session(cohort)));
    const ended = await session(cohort);
    const end = await call(base, 'POST', `/client/v1/sessions/${ended.sessionId}/end`, {
      token: ended.token,
      json: {},
    });
    expect(end.status, end.text).toBe(200);
    await session(cohortName());
    await session(null);
    const other = await createTenant(base, server.adminToken);
    await session(cohort, other);

    const res = await api().post(cohortCommands(cohort), { name: 'text', data: 'only the live ones' });
    expect(res.status, res.text).toBe(202);
    const answer = res.body as unknown as BatchAnswer;
    expect(answer).toMatchObject({ total: 2, accepted: 2, refused: 0 });
    expect(answer.sessions.map((e) => e.sessionId)).toEqual(sorted(live.map((s) => s.sessionId)));

    const path = `/cohorts/${cohort}/realtime/batches/${answer.batchId}`;
    expectProblem(await as(other).get(path), 404, 'not_found');
    expectProblem(
      await api().get(`/cohorts/${cohortName()}/realtime/batches/${answer.batchId}`),
      404,
      'not_found',
    );
    expectProblem(await api().get(`/cohorts/${cohort}/realtime/batches/${randomUUID()}`), 404, 'not_found');
    // The other tenant's own command to the same cohort name reaches only its own session.
    const theirs = await as(other).post(cohortCommands(cohort), { name: 'text', data: 'x' });
    expect(theirs.body).toMatchObject({ total: 1, accepted: 1 });
  });

  it('an unknown cohort, or one with no live session, is a 202 with total 0; the batch can be read', async () => {
    const cohort = cohortName();
    const res = await api().put(`${cohortCommands(cohort)}/record`);
    expect(res.status, res.text).toBe(202);
    expect(res.body).toEqual({
      batchId: expect.any(String),
      total: 0,
      accepted: 0,
      refused: 0,
      sessions: [],
    });
    const view = await batchOf(cohort, String(res.body.batchId));
    expect(view).toMatchObject({
      total: 0,
      accepted: 0,
      refused: 0,
      name: 'record.start',
      counts: { queued: 0, delivered: 0, acknowledged: 0, failed: 0, expired: 0, cancelled: 0 },
      sessions: [],
      hasMore: false,
    });
  });

  it('record and record/stop follow each session’s state: not_streaming is its own error', async () => {
    const cohort = cohortName();
    const [a, b] = await Promise.all([session(cohort), session(cohort)]);
    const started = await call(base, 'POST', `/client/v1/sessions/${a.sessionId}/stream/start`, {
      token: a.token,
      json: { resolution: 0, aspectratio: 0 },
    });
    expect(started.status).toBe(200);
    const record = await api().put(`${cohortCommands(cohort)}/record`, {});
    expect(record.status, record.text).toBe(202);
    const entries = (record.body as unknown as BatchAnswer).sessions;
    expect(entries.find((e) => e.sessionId === a.sessionId)).toMatchObject({ status: 'queued' });
    expect(entries.find((e) => e.sessionId === b.sessionId)).toMatchObject({
      error: { code: 'not_streaming' },
    });
    const stop = await api().put(`${cohortCommands(cohort)}/record/stop`);
    expect((stop.body as unknown as BatchAnswer).sessions.map((e) => e.error?.code ?? e.status)).toEqual(
      entries.map(() => 'not_recording'),
    );
  });

  it('each batch command is in its session’s command list, stamped with its batch', async () => {
    const cohort = cohortName();
    const members = await Promise.all(Array.from({ length: 3 }, () => session(cohort)));
    const camera = { name: 'camera', data: { controls: [{ name: 'fieldOfView', value: '90' }] } };
    const res = await api().post(cohortCommands(cohort), camera);
    const answer = res.body as unknown as BatchAnswer;
    for (const m of members) {
      const list = await api().get(`/sessions/${m.sessionId}/realtime/commands`);
      const commands = list.body.commands as Json[];
      expect(commands).toHaveLength(1);
      expect(commands[0]).toMatchObject({
        commandId: answer.sessions.find((e) => e.sessionId === m.sessionId)?.commandId,
        name: 'camera',
        data: camera.data,
        status: 'queued',
        batchId: answer.batchId,
      });
    }
    // A per-session command carries no batch.
    const single = await api().post(`/sessions/${members[0].sessionId}/realtime/commands`, {
      name: 'text',
      data: 'x',
    });
    expect(single.body.batchId).toBeNull();
  });

  it('bad bodies and parameters are 400 problem documents, and nothing is written', async () => {
    const cohort = cohortName();
    const members = await Promise.all(Array.from({ length: 2 }, () => session(cohort)));
    const bad: [string, string, unknown, Record<string, string>?][] = [
      ['POST', '', { name: 'text', data: 5 }],
      ['POST', '', { name: 'text', data: '' }],
      ['POST', '', { name: 'camera', data: { controls: [{ name: 'zoom', value: '1' }] } }],
      ['POST', '', { name: 'camera', data: { controls: [{ name: 'fieldOfView', value: '500' }] } }],
      ['POST', '', { name: 'x', data: { names: ['a'], types: ['int'], values: ['1.5'] } }],
      ['POST', '', { name: 'text', data: 'hi', extra: 1 }],
      ['POST', '', { name: 'bad name!', data: { names: ['a'], types: ['int'], values: ['1'] } }],
      ['POST', '', []],
      ['POST', '/stream', { resolution: 9, aspectratio: 0 }],
      ['POST', '/stream', { resolution: 1 }],
      ['PUT', '/stream/stop', { reason: 'x' }],
      ['PUT', '/record', { x: 1 }],
      ['POST', '?ttlSeconds=0', { name: 'text', data: 'hi' }],
      ['POST', '?ttlSeconds=3601', { name: 'text', data: 'hi' }],
      ['POST', '?other=1', { name: 'text', data: 'hi' }],
      ['POST', '', { name: 'text', data: 'hi' }, { 'idempotency-key': 'ä' }],
    ];
    for (const [method, suffix, json, headers] of bad) {
      const res = await call(base, method, `${cohortCommands(cohort)}${suffix}`, {
        token: tenant.token,
        json,
        headers,
      });
      expectProblem(res, 400, 'validation_failed');
    }
    expectProblem(
      await call(base, 'GET', `/cohorts/${cohort}/realtime/batches/not-a-uuid`, { token: tenant.token }),
      400,
      'validation_failed',
    );
    expectProblem(
      await call(base, 'GET', `/cohorts/${cohort}/realtime/batches/${randomUUID()}?limit=0`, {
        token: tenant.token,
      }),
      400,
      'validation_failed',
    );
    for (const m of members) {
      const list = await api().get(`/sessions/${m.sessionId}/realtime/commands`);
      expect(list.body.totalCount).toBe(0);
    }
    const count = await server.services.storage.db
      .selectFrom('command_batches')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('tenant_cohort_id', '=', cohort)
      .executeTakeFirstOrThrow();
    expect(Number(count.n)).toBe(0);
  });

  it('a cohort with more live sessions than a batch takes is 409 cohort_too_large, and nothing is sent', async () => {
    const cohort = cohortName();
    const members = await Promise.all(Array.from({ length: 61 }, () => session(cohort)));
    const res = await api().post(cohortCommands(cohort), { name: 'text', data: 'too many' });
    expectProblem(res, 409, 'cohort_too_large');
    expect(res.body.limit).toBe(60);
    const list = await api().get(`/sessions/${members[0].sessionId}/realtime/commands`);
    expect(list.body.totalCount).toBe(0);
  });

  it('needs commands:send', async () => {
    const reader = await createTenant(base, server.adminToken, { scopes: ['sessions:read'] });
    expectProblem(await as(reader).post(cohortCommands('x'), { name: 'text', data: 'x' }), 403, 'forbidden');
    expectProblem(
      await call(base, 'POST', cohortCommands('x'), { json: { name: 'text', data: 'x' } }),
      401,
      'unauthorized',
    );
  });
});

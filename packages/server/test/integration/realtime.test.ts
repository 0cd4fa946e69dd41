import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { TestSocket } from '../helpers/device-socket.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;

describe.each(backends)('realtime channel and commands (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;

  beforeAll(async () => {
    server = await startTestServer(backend, { LIVELINE_COMMAND_SWEEP_MS: '100' });
    base = server.url;
    tenant = await createTenant(base, server.adminToken);
  });
  afterAll(async () => server?.close());

  async function device(playerId = `p-${Math.random().toString(36).slice(2)}`) {
    const token = await deviceToken(base, tenant.token, playerId);
    const res = await call(base, 'POST', '/client/v1/sessions', { token, json: {} });
    return { token, sessionId: String(res.body.sessionId), playerId };
  }
  const command = (sessionId: string, json: unknown, query = '') =>
    call<Json>(base, 'POST', `/sessions/${sessionId}/realtime/commands${query}`, {
      token: tenant.token,
      json,
    });
  const getCommand = (sessionId: string, commandId: unknown) =>
    call<Json>(base, 'GET', `/sessions/${sessionId}/realtime/commands/${commandId}`, { token: tenant.token });

  it('welcomes the device, delivers a text command, records the ack', async () => {
    const d = await device();
    const socket = await TestSocket.open(base, d.sessionId, d.token);
    const welcome = await socket.ofType('welcome');
    expect(welcome).toEqual({ type: 'welcome', sessionId: d.sessionId, heartbeatIntervalMs: 15000 });
    const sent = await command(d.sessionId, { name: 'text', data: 'hello headset' });
    expect(sent.status).toBe(202);
    expect(sent.body).toMatchObject({ sessionId: d.sessionId, name: 'text', status: 'delivered' });
    const msg = await socket.ofType('command');
    expect(msg).toMatchObject({ commandId: sent.body.commandId, name: 'text', data: 'hello headset' });
    socket.send({ type: 'ack', commandId: msg.commandId, ok: true });
    await expect
      .poll(async () => (await getCommand(d.sessionId, msg.commandId)).body.status)
      .toBe('acknowledged');
    const session = await call(base, 'GET', `/sessions/${d.sessionId}`, { token: tenant.token });
    expect(session.body.connected).toBe(true);
    await socket.close();
    await expect
      .poll(
        async () =>
          (await call(base, 'GET', `/sessions/${d.sessionId}`, { token: tenant.token })).body.connected,
      )
      .toBe(false);
  });

  it("a command's group waits for the disk; a group of acks alone does not (the next durable commit carries it)", async () => {
    const storage = server.services.storage;
    const atomically = storage.atomically;
    const groups: { sql: string; durable: boolean }[] = [];
    storage.atomically = (statements, options) => {
      for (const s of statements) groups.push({ sql: s.sql, durable: options?.durable !== false });
      return atomically(statements, options);
    };
    try {
      const d = await device();
      const socket = await TestSocket.open(base, d.sessionId, d.token);
      const sent = await command(d.sessionId, { name: 'text', data: 'durable first' });
      expect(sent.status).toBe(202);
      const msg = await socket.ofType('command');
      socket.send({ type: 'ack', commandId: msg.commandId, ok: true });
      await expect
        .poll(async () => (await getCommand(d.sessionId, msg.commandId)).body.status)
        .toBe('acknowledged');
      await socket.close();
      const insert = groups.find((g) => /^insert into commands/.test(g.sql));
      const ack = groups.find((g) => /^update commands set status = 'acknowledged'/.test(g.sql));
      expect(insert?.durable).toBe(true);
      expect(ack?.durable).toBe(false);
    } finally {
      storage.atomically = atomically;
    }
  });

  it("a command's settle hook runs in the settling transaction: it sees the settlement, and its failure undoes it", async () => {
    const seen: string[] = [];
    server.services.commands.onSettle(['probe.seen'], async (trx, settled) => {
      const row = await trx
        .selectFrom('commands')
        .select('status')
        .where('command_id', '=', settled.commandId)
        .executeTakeFirstOrThrow();
      seen.push(`${settled.outcome}:${row.status}`);
    });
    server.services.commands.onSettle(['probe.fails'], async () => {
      throw new Error('the hook failed');
    });
    const d = await device();
    const socket = await TestSocket.open(base, d.sessionId, d.token, true);
    await socket.ofType('welcome');
    const variables = { names: ['x'], types: ['int'], values: ['1'] };
    const ok = await command(d.sessionId, { name: 'probe.seen', data: variables });
    const failing = await command(d.sessionId, { name: 'probe.fails', data: variables });
    for (const sent of [ok, failing]) {
      const msg = await socket.ofType('command');
      expect(msg.commandId).toBe(sent.body.commandId);
      socket.send({ type: 'ack', commandId: msg.commandId, ok: true });
    }
    await expect
      .poll(async () => (await getCommand(d.sessionId, ok.body.commandId)).body.status)
      .toBe('acknowledged');
    expect(seen).toEqual(['acknowledged:acknowledged']);
    // The failing hook's settlement was rolled back with it: still open, answerable again.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await getCommand(d.sessionId, failing.body.commandId)).body.status).toBe('delivered');
    await socket.close();
  });

  it('an events frame holding U+0000 is refused (validation_failed) and stores nothing, on every store', async () => {
    const d = await device();
    const socket = await TestSocket.open(base, d.sessionId, d.token, true);
    await socket.ofType('welcome');
    const event = (id: string, message: string) => ({
      id,
      eventType: 'Error',
      timestamp: Date.now(),
      message,
      severity: 'Error',
    });
    socket.send({ type: 'events', requestId: 'r1', events: [event('e1', 'bad\u0000byte')] });
    const refused = await socket.ofType('error');
    expect(refused).toMatchObject({ code: 'validation_failed' });
    expect(refused.message).toContain('events[0].message');
    // A backslash followed by "u0000" is ordinary text.
    socket.send({ type: 'events', requestId: 'r2', events: [event('e2', 'a \\u0000 b')] });
    expect(await socket.ofType('events.ack')).toMatchObject({ requestId: 'r2', accepted: 1 });
    const stored = await call<{ events: { id: string; message?: string }[] }>(
      base,
      'GET',
      `/sessions/${d.sessionId}`,
      { token: tenant.token },
    );
    expect(stored.body.events.map((e) => e.id)).toEqual(['e2']);
    await socket.close();
  });

  it('a refused command is failed with the error', async () => {
    const d = await device();
    const socket = await TestSocket.open(base, d.sessionId, d.token, true);
    await socket.ofType('welcome');
    const sent = await command(d.sessionId, {
      name: 'jump',
      data: { names: ['height'], types: ['float'], values: ['2.5'] },
    });
    const msg = await socket.ofType('command');
    expect(msg.data).toEqual({ names: ['height'], types: ['float'], values: ['2.5'] });
    socket.send({ type: 'ack', commandId: msg.commandId, ok: false, error: 'not now' });
    await expect
      .poll(async () => (await getCommand(d.sessionId, sent.body.commandId)).body)
      .toMatchObject({
        status: 'failed',
        error: 'not now',
      });
    await socket.close();
  });

  it('queues commands for a disconnected device and delivers them in order on connect; expired ones never arrive', async () => {
    const d = await device();
    const expiring = await command(d.sessionId, { name: 'text', data: 'too late' }, '?ttlSeconds=1');
    expect(expiring.body.status).toBe('queued');
    const a = await command(d.sessionId, { name: 'text', data: 'first' }, '?ttlSeconds=60');
    const b = await command(d.sessionId, { name: 'text', data: 'second' }, '?ttlSeconds=60');
    expect(a.body.status).toBe('queued');
    await expect
      .poll(async () => (await getCommand(d.sessionId, expiring.body.commandId)).body.status, {
        timeout: 5000,
      })
      .toBe('expired');
    const socket = await TestSocket.open(base, d.sessionId, d.token);
    const first = await socket.ofType('command');
    const second = await socket.ofType('command');
    expect([first.data, second.data]).toEqual(['first', 'second']);
    expect([first.commandId, second.commandId]).toEqual([a.body.commandId, b.body.commandId]);
    await new Promise((r) => setTimeout(r, 200));
    expect(socket.messages.filter((m) => m.type === 'command')).toEqual([]);
    expect((await getCommand(d.sessionId, a.body.commandId)).body.status).toBe('delivered');
    await socket.close();
  });

  it('ending the session closes its socket with 4009', async () => {
    const d = await device();
    const socket = await TestSocket.open(base, d.sessionId, d.token);
    await socket.ofType('welcome');
    await call(base, 'POST', `/client/v1/sessions/${d.sessionId}/end`, { token: d.token });
    expect((await socket.waitClosed()).code).toBe(4009);
  });

  it('the 202 says delivered even when the device acked before the answer', async () => {
    const d = await device();
    const socket = await TestSocket.open(base, d.sessionId, d.token);
    await socket.ofType('welcome');
    socket.ws.on('message', (data) => {
      const m = JSON.parse(data.toString());
      if (m.type === 'command') socket.send({ type: 'ack', commandId: m.commandId, ok: true });
    });
    for (let i = 0; i < 20; i++) {
      const sent = await command(d.sessionId, { name: 'text', data: `quick ${i}` });
      expect(sent.body.status).toBe('delivered');
      expect(sent.body.deliveredAt).toEqual(expect.any(Number));
    }
    await socket.close();
  });

  it('a second connection replaces the first (4001)', async () => {
    const d = await device();
    const one = await TestSocket.open(base, d.sessionId, d.token);
    await one.ofType('welcome');
    const two = await TestSocket.open(base, d.sessionId, d.token);
    await two.ofType('welcome');
    expect((await one.waitClosed()).code).toBe(4001);
    await command(d.sessionId, { name: 'text', data: 'to the new one' });
    expect((await two.ofType('command')).data).toBe('to the new one');
    await two.close();
  });

  it('closes with 4003 for another player’s session and 4004 for an unknown one; 401 without a token', async () => {
    const d = await device();
    const stranger = await deviceToken(base, tenant.token, 'stranger');
    const s = await TestSocket.open(base, d.sessionId, stranger);
    expect((await s.waitClosed()).code).toBe(4003);
    const u = await TestSocket.open(base, '0190a0a0-0000-7000-8000-000000000000', d.token);
    expect((await u.waitClosed()).code).toBe(4004);
    await expect(TestSocket.open(base, d.sessionId, 'garbage')).rejects.toThrow('HTTP 401');
    await expect(TestSocket.open(base, d.sessionId, tenant.token)).rejects.toThrow('HTTP 403');
  });

  it('bad frames get an error and the socket survives; oversize frames close with 1009', async () => {
    const d = await device();
    const socket = await TestSocket.open(base, d.sessionId, d.token);
    await socket.ofType('welcome');
    socket.send('not json');
    expect(await socket.ofType('error')).toMatchObject({ code: 'malformed_message' });
    socket.send({ type: 'teleport' });
    expect(await socket.ofType('error')).toMatchObject({ code: 'unknown_message_type' });
    socket.send({ type: 'ack', commandId: '0190a0a0-0000-7000-8000-000000000000', ok: true });
    expect(await socket.ofType('error')).toMatchObject({ code: 'unknown_command' });
    socket.send({ type: 'ack' });
    expect(await socket.ofType('error')).toMatchObject({ code: 'malformed_message' });
    socket.send({
      type: 'events',
      events: [{ id: 'x', eventType: 'Nope', timestamp: Date.now() }],
      requestId: 'r1',
    });
    expect(await socket.ofType('error')).toMatchObject({ code: 'unknown_event_type', requestId: 'r1' });
    socket.send({
      type: 'events',
      events: [{ id: 'e1', eventType: 'Custom', timestamp: Date.now() }],
      requestId: 'r2',
    });
    expect(await socket.ofType('events.ack')).toEqual({
      type: 'events.ack',
      accepted: 1,
      duplicates: 0,
      requestId: 'r2',
    });
    socket.send({ type: 'heartbeat' });
    socket.send('x'.repeat(300 * 1024));
    expect((await socket.waitClosed()).code).toBe(1009);
  });

  it('acks for another session’s command are refused', async () => {
    const a = await device();
    const b = await device();
    const sa = await TestSocket.open(base, a.sessionId, a.token);
    const sb = await TestSocket.open(base, b.sessionId, b.token);
    const sent = await command(a.sessionId, { name: 'text', data: 'for a' });
    await sa.ofType('command');
    sb.send({ type: 'ack', commandId: sent.body.commandId, ok: true });
    expect(await sb.ofType('error')).toMatchObject({ code: 'unknown_command' });
    expect((await getCommand(a.sessionId, sent.body.commandId)).body.status).toBe('delivered');
    await sa.close();
    await sb.close();
  });

  it('validates commands per CONTRACT §3', async () => {
    const d = await device();
    const cases: [unknown, string][] = [
      [{ name: 'camera', data: { controls: [{ name: 'zoom', value: '1' }] } }, 'data.controls[0].name'],
      [
        { name: 'camera', data: { controls: [{ name: 'fieldOfView', value: '500' }] } },
        'data.controls[0].value',
      ],
      [
        { name: 'camera', data: { controls: [{ name: 'cameraView', value: '1.5' }] } },
        'data.controls[0].value',
      ],
      [{ name: 'camera', data: { controls: [] } }, 'data.controls'],
      [{ name: 'text', data: '' }, 'data'],
      [{ name: 'text', data: 'x'.repeat(4097) }, 'data'],
      [{ name: 'text', data: { t: 1 } }, 'data'],
      [{ name: 'bad name!', data: { names: ['a'], types: ['int'], values: ['1'] } }, 'name'],
      [{ name: 'stream.start', data: { names: ['a'], types: ['int'], values: ['1'] } }, 'name'],
      [{ name: 'v', data: { names: ['a', 'b'], types: ['int'], values: ['1'] } }, 'data'],
      [
        { name: 'v', data: { names: ['a', 'a'], types: ['int', 'int'], values: ['1', '2'] } },
        'data.names[1]',
      ],
      [{ name: 'v', data: { names: ['camera'], types: ['int'], values: ['1'] } }, 'data.names[0]'],
      [{ name: 'v', data: { names: ['a'], types: ['long'], values: ['1'] } }, 'data.types[0]'],
      [{ name: 'v', data: { names: ['a'], types: ['int'], values: ['2147483648'] } }, 'data.values[0]'],
      [{ name: 'v', data: { names: ['a'], types: ['bool'], values: ['yes'] } }, 'data.values[0]'],
      [{ name: 'v', data: { names: ['a'], types: ['float'], values: ['NaN'] } }, 'data.values[0]'],
      [{ name: 'v', data: { names: [], types: [], values: [] } }, 'data.names'],
      [{ name: 'v', data: { names: ['a'], types: ['int'], values: ['1'] }, extra: 1 }, 'extra'],
      [{ data: 'x' }, 'name'],
      [{ name: 'text' }, 'data'],
    ];
    for (const [body, path] of cases) {
      const res = await command(d.sessionId, body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(
        (res.body.errors as { path: string }[]).map((e) => e.path),
        JSON.stringify(body).slice(0, 80),
      ).toContain(path);
    }
    const unknownControl = await command(d.sessionId, {
      name: 'camera',
      data: { controls: [{ name: 'zoom', value: '1' }] },
    });
    expect(String((unknownControl.body.errors as { message: string }[])[0].message)).toContain('fieldOfView');
    const ok = await command(d.sessionId, {
      name: 'camera',
      data: {
        controls: [
          { name: 'fieldOfView', value: '90.5' },
          { name: 'cameraView', value: '2' },
          { name: 'heightOffset', value: '-100' },
        ],
      },
    });
    expect(ok.status).toBe(202);
    const list = await call<{ commands: Json[] }>(base, 'GET', `/sessions/${d.sessionId}/realtime/commands`, {
      token: tenant.token,
    });
    expect(list.body.commands.map((c) => c.name)).toEqual(['camera']);
    const badTtl = await command(d.sessionId, { name: 'text', data: 'x' }, '?ttlSeconds=0');
    expect(badTtl.status).toBe(400);
  });

  it('Idempotency-Key returns the first result; reuse with another body is a conflict', async () => {
    const d = await device();
    const headers = { 'idempotency-key': 'retry-123' };
    const first = await call<Json>(base, 'POST', `/sessions/${d.sessionId}/realtime/commands`, {
      token: tenant.token,
      json: { name: 'text', data: 'once' },
      headers,
    });
    const again = await call<Json>(base, 'POST', `/sessions/${d.sessionId}/realtime/commands`, {
      token: tenant.token,
      json: { name: 'text', data: 'once' },
      headers,
    });
    expect(again.status).toBe(202);
    expect(again.body.commandId).toBe(first.body.commandId);
    const other = await call<Json>(base, 'POST', `/sessions/${d.sessionId}/realtime/commands`, {
      token: tenant.token,
      json: { name: 'text', data: 'different' },
      headers,
    });
    expect(other.status).toBe(409);
    expect(other.body.code).toBe('idempotency_key_reused');
    const list = await call<{ commands: Json[] }>(base, 'GET', `/sessions/${d.sessionId}/realtime/commands`, {
      token: tenant.token,
    });
    expect(list.body.commands).toHaveLength(1);
  });

  it('commands to ended, unknown or foreign sessions', async () => {
    const d = await device();
    // Accepted while live (the session is then remembered by the command path), refused once ended.
    expect((await command(d.sessionId, { name: 'text', data: 'before' })).status).toBe(202);
    await call(base, 'POST', `/client/v1/sessions/${d.sessionId}/end`, { token: d.token });
    const ended = await command(d.sessionId, { name: 'text', data: 'x' });
    expect(ended.status).toBe(409);
    expect(ended.body.code).toBe('session_ended');
    const unknown = await command('0190a0a0-0000-7000-8000-000000000000', { name: 'text', data: 'x' });
    expect(unknown.status).toBe(404);
    const other = await createTenant(base, server.adminToken);
    const live = await device();
    const foreign = await call(base, 'POST', `/sessions/${live.sessionId}/realtime/commands`, {
      token: other.token,
      json: { name: 'text', data: 'x' },
    });
    expect(foreign.status).toBe(404);
    const noScope = await createTenant(base, server.adminToken, { scopes: ['sessions:read'] });
    const denied = await call(base, 'POST', `/sessions/${live.sessionId}/realtime/commands`, {
      token: noScope.token,
      json: { name: 'text', data: 'x' },
    });
    expect(denied.status).toBe(403);
  });
});

describe.each(backends)('a vanished device’s stream (%s)', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    // A one-second grace, so the server's own sweep (every min(5 s, grace / 4)) acts within the test.
    server = await startTestServer(backend, {
      LIVELINE_STREAM_GRACE_S: '1',
      LIVELINE_HEARTBEAT_INTERVAL_MS: '200',
    });
  });
  afterAll(async () => server?.close());

  it('is stopped at its last contact once the grace has passed', async () => {
    const base = server.url;
    const tenant = await createTenant(base, server.adminToken);
    const token = await deviceToken(base, tenant.token, 'vanishing');
    const sessionId = String(
      (await call(base, 'POST', '/client/v1/sessions', { token, json: {} })).body.sessionId,
    );
    const socket = await TestSocket.open(base, sessionId, token);
    await socket.ofType('welcome');
    const started = await call(base, 'POST', `/client/v1/sessions/${sessionId}/stream/start`, {
      token,
      json: { resolution: 2, aspectratio: 0 },
    });
    expect(started.status).toBe(200);
    // The headset loses power: no close frame, the TCP connection just dies.
    socket.ws.terminate();
    const read = () =>
      call<Json & { events: Json[] }>(base, 'GET', `/sessions/${sessionId}`, { token: tenant.token });
    // The first answer that shows the stream idle already holds its StreamStopped: the sweep writes
    // the state and its event in one transaction, and the session is read before its events.
    let session = (await read()).body;
    for (const deadline = Date.now() + 10_000; (session.stream as Json).state !== 'idle'; ) {
      if (Date.now() > deadline) throw new Error(`the stream was not stopped: ${JSON.stringify(session)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
      session = (await read()).body;
    }
    const stopped = session.events.find((e) => e.eventType === 'StreamStopped');
    expect(stopped).toMatchObject({
      reason: 'disconnected',
      streamingSessionId: started.body.streamingSessionId,
    });
    expect(session.connected).toBe(false);
    expect(session.status).toBe('live');
    // The interval (what challenge progress counts) ends at the last contact, not when the sweep ran
    // (and never before it began: the stream started a moment after the request that touched).
    const [interval] = await server.services.streams.intervalsForPlayer(tenant.tenantId, 'vanishing');
    expect(interval.stopReason).toBe('disconnected');
    expect(interval.stoppedAt).toBe(Math.max(Number(session.lastSeenAt), interval.startedAt));
    expect(Number(stopped?.timestamp) - Number(interval.stoppedAt)).toBeGreaterThanOrEqual(1000);
  });
});

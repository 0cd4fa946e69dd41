/**
 * Per-tenant quotas (issue 10, finding 7) and command cancel with idempotent replay (finding 10),
 * over real HTTP and real device sockets: each quota at its limit and under a concurrent burst,
 * pending commands sent to a returning device in pages, cancel of queued, delivered and settled
 * commands (the stream state goes back to idle, the device hears `command.cancel`, also through the
 * SDK and across processes), and an Idempotency-Key retry that gets the first answer byte for byte.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type CommandCancellation, LivelineDevice, type RealtimeCommand } from '../../../client/src/index.ts';
import { loadConfig } from '../../src/config.ts';
import { type RunningServer, startServer } from '../../src/server.ts';
import {
  type Answer,
  accessToken,
  call,
  createTenant,
  deviceToken,
  type TenantFixture,
} from '../helpers/api.ts';
import { TestSocket } from '../helpers/device-socket.ts';
import { greyJpeg } from '../helpers/jpeg.ts';
import { redisAvailable, startRedis, type TestRedis } from '../helpers/redis.ts';
import { ADMIN_TOKEN, backends, freshStore, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;

const QUOTAS = {
  LIVELINE_QUOTA_WEBHOOK_ENDPOINTS: '3',
  LIVELINE_QUOTA_PENDING_COMMANDS: '5',
  LIVELINE_QUOTA_CAMPAIGNS: '3',
  LIVELINE_QUOTA_CHALLENGES: '4',
};
const DISPLAY = { method: 'displayCode', instructionsTemplate: 'Enter {code}' };
const IMAGE = greyJpeg(200, 200);
const HEADER = 'Reward Code,Reward Title,Reward Requirement,Reward Image,Reward Rules,Target';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Problem document with the stable code (and the right media type). */
function expectProblem(res: Answer, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(res.body.code).toBe(code);
}

const statuses = (answers: Answer[]) => answers.map((a) => a.status).sort((a, b) => a - b);

describe.each(backends)('per-tenant quotas, command cancel and idempotent replay (%s)', (backend) => {
  let server: TestServer;
  let base: string;
  let tenant: TenantFixture;
  const devices: LivelineDevice[] = [];
  const sockets: TestSocket[] = [];

  beforeAll(async () => {
    server = await startTestServer(backend, {
      ...QUOTAS,
      LIVELINE_COMMAND_SWEEP_MS: '100',
      LIVELINE_WEBHOOK_ALLOW_PRIVATE: 'true',
    });
    base = server.url;
    tenant = await createTenant(base, server.adminToken);
  });
  afterEach(async () => {
    await Promise.all(devices.splice(0).map((d) => d.close()));
    await Promise.all(sockets.splice(0).map((s) => (s.closed ? null : s.close())));
  });
  afterAll(async () => server?.close());

  const as = (t: TenantFixture) => ({
    post: (path: string, json: unknown = {}, headers?: Record<string, string>) =>
      call<Json>(base, 'POST', path, { token: t.token, json, headers }),
    get: (path: string) => call<Json>(base, 'GET', path, { token: t.token }),
    del: (path: string) => call<Json>(base, 'DELETE', path, { token: t.token }),
  });
  const api = () => as(tenant);

  async function session(t: TenantFixture = tenant, playerId = `p-${randomUUID()}`) {
    const token = await deviceToken(base, t.token, playerId);
    const res = await call(base, 'POST', '/client/v1/sessions', { token, json: {} });
    expect(res.status, res.text).toBe(201);
    return { token, sessionId: String(res.body.sessionId), playerId };
  }
  async function socketOf(s: { sessionId: string; token: string }) {
    const socket = await TestSocket.open(base, s.sessionId, s.token);
    sockets.push(socket);
    await socket.ofType('welcome');
    return socket;
  }
  const commandsOf = (sessionId: string) => `/sessions/${sessionId}/realtime/commands`;
  const text = (sessionId: string, data: string, query = '', t: TenantFixture = tenant) =>
    as(t).post(`${commandsOf(sessionId)}${query}`, { name: 'text', data });
  const cancel = (sessionId: string, commandId: unknown, t: TenantFixture = tenant) =>
    as(t).post(`${commandsOf(sessionId)}/${commandId}/cancel`);
  const commandStatus = async (sessionId: string, commandId: unknown) =>
    (await api().get(`${commandsOf(sessionId)}/${commandId}`)).body.status;
  const streamOf = async (sessionId: string) =>
    (await api().get(`/sessions/${sessionId}`)).body.stream as Json;
  const recordingOf = async (sessionId: string) =>
    (await api().get(`/sessions/${sessionId}`)).body.recording as Json;

  // --- quotas --------------------------------------------------------------------------------------

  describe('quotas', () => {
    const hook = (t: TenantFixture) => as(t).post('/webhooks', { url: 'http://127.0.0.1:9/hook' });

    it('webhook endpoints: the 4th of a quota of 3 is 409 webhook_endpoint_quota_exceeded; a delete frees a place; other tenants are not counted', async () => {
      const t = await createTenant(base, server.adminToken);
      const created = [];
      for (let i = 0; i < 3; i++) {
        const res = await hook(t);
        expect(res.status, res.text).toBe(201);
        created.push(String(res.body.webhookId));
      }
      const over = await hook(t);
      expectProblem(over, 409, 'webhook_endpoint_quota_exceeded');
      expect(over.body.limit).toBe(3);
      // The operator's route for the tenant counts the same endpoints.
      const viaOperator = await call(base, 'POST', `/admin/v1/tenants/${t.tenantId}/webhooks`, {
        token: server.adminToken,
        json: { url: 'http://127.0.0.1:9/op' },
      });
      expectProblem(viaOperator, 409, 'webhook_endpoint_quota_exceeded');
      expect((await as(t).get('/webhooks')).body.totalCount).toBe(3);
      // Another tenant has its own quota.
      expect((await hook(await createTenant(base, server.adminToken))).status).toBe(201);
      expect((await as(t).del(`/webhooks/${created[0]}`)).status).toBe(204);
      expect((await hook(t)).status).toBe(201);
      expectProblem(await hook(t), 409, 'webhook_endpoint_quota_exceeded');
    });

    it('webhook endpoints: a concurrent burst of 12 creates exactly 3', async () => {
      const t = await createTenant(base, server.adminToken);
      const answers = await Promise.all(Array.from({ length: 12 }, () => hook(t)));
      expect(statuses(answers)).toEqual([...Array(3).fill(201), ...Array(9).fill(409)]);
      for (const a of answers.filter((x) => x.status === 409))
        expect(a.body.code).toBe('webhook_endpoint_quota_exceeded');
      expect((await as(t).get('/webhooks')).body.totalCount).toBe(3);
    });

    const campaign = (t: TenantFixture, name = 'C') =>
      as(t).post('/campaigns', { name, redemption: DISPLAY });

    it('campaigns: the 4th of a quota of 3 is 409 campaign_quota_exceeded, through the operator too', async () => {
      const t = await createTenant(base, server.adminToken);
      for (let i = 0; i < 3; i++) expect((await campaign(t, `C${i}`)).status).toBe(201);
      const over = await campaign(t);
      expectProblem(over, 409, 'campaign_quota_exceeded');
      expect(over.body.limit).toBe(3);
      const viaOperator = await call(base, 'POST', `/admin/v1/tenants/${t.tenantId}/campaigns`, {
        token: server.adminToken,
        json: { name: 'op', redemption: DISPLAY },
      });
      expectProblem(viaOperator, 409, 'campaign_quota_exceeded');
      expect((await as(t).get('/campaigns')).body.totalCount).toBe(3);
      expect((await campaign(await createTenant(base, server.adminToken))).status).toBe(201);
    });

    it('campaigns: a concurrent burst of 10 creates exactly 3', async () => {
      const t = await createTenant(base, server.adminToken);
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => campaign(t, `B${i}`)));
      expect(statuses(answers)).toEqual([...Array(3).fill(201), ...Array(7).fill(409)]);
      expect((await as(t).get('/campaigns')).body.totalCount).toBe(3);
    });

    const challenge = (t: TenantFixture, campaignId: string, code: string) =>
      as(t).post(`/campaigns/${campaignId}/challenges`, {
        rewardCode: code,
        rewardTitle: `Title ${code}`,
        rewardRequirement: 'Stream once',
        rewardImage: IMAGE.toString('base64'),
        rule: { type: 'sessionCount', target: 1 },
      });
    const importRows = async (t: TenantFixture, campaignId: string, codes: string[]) => {
      const form = new FormData();
      const csv = `${HEADER}\n${codes.map((c) => `${c},T,R,pic.jpg,Stream session count,1`).join('\n')}\n`;
      form.append('template', new Blob([csv], { type: 'text/csv' }), 'challenges.csv');
      form.append('images', new Blob([new Uint8Array(IMAGE)], { type: 'image/jpeg' }), 'pic.jpg');
      const res = await fetch(`${base}/campaigns/${campaignId}/challenges/import`, {
        method: 'POST',
        headers: { authorization: `Bearer ${t.token}` },
        body: form,
      });
      const body = await res.text();
      return { status: res.status, headers: res.headers, text: body, body: JSON.parse(body) as Json };
    };
    const challengeCount = async (t: TenantFixture, campaignId: string) =>
      Number((await as(t).get(`/campaigns/${campaignId}/challenges`)).body.totalCount);

    it('challenges: 4 per tenant over all its campaigns; an import past the quota writes none; a delete frees a place', async () => {
      const t = await createTenant(base, server.adminToken);
      const a = String((await campaign(t, 'A')).body.campaignId);
      const b = String((await campaign(t, 'B')).body.campaignId);
      for (const code of ['A1', 'A2']) expect((await challenge(t, a, code)).status).toBe(201);
      expect((await importRows(t, b, ['B1'])).status).toBe(201);
      // One place left: an import of two is refused whole.
      const tooMany = await importRows(t, b, ['B2', 'B3']);
      expectProblem(tooMany as unknown as Answer, 409, 'challenge_quota_exceeded');
      expect(await challengeCount(t, b)).toBe(1);
      const last = await challenge(t, b, 'B2');
      expect(last.status, last.text).toBe(201);
      const over = await challenge(t, a, 'A3');
      expectProblem(over, 409, 'challenge_quota_exceeded');
      expect(over.body.limit).toBe(4);
      expect((await as(t).del(`/campaigns/${b}/challenges/${last.body.challengeId}`)).status).toBe(204);
      expect((await challenge(t, a, 'A3')).status).toBe(201);
      expect((await challengeCount(t, a)) + (await challengeCount(t, b))).toBe(4);
    });

    it('challenges: a concurrent burst of 10 over two campaigns creates exactly 4', async () => {
      const t = await createTenant(base, server.adminToken);
      const ids = [
        String((await campaign(t, 'A')).body.campaignId),
        String((await campaign(t, 'B')).body.campaignId),
      ];
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) => challenge(t, ids[i % 2], `R${i}`)),
      );
      expect(statuses(answers)).toEqual([...Array(4).fill(201), ...Array(6).fill(409)]);
      expect((await challengeCount(t, ids[0])) + (await challengeCount(t, ids[1]))).toBe(4);
    });

    it('pending commands: the 6th unsettled command of a session is 429 command_queue_full with Retry-After; settling one frees a place', async () => {
      const s = await session();
      const queued = [];
      for (let i = 0; i < 5; i++) {
        const res = await text(s.sessionId, `c${i}`, '?ttlSeconds=120');
        expect(res.status, res.text).toBe(202);
        expect(res.body.status).toBe('queued');
        queued.push(res.body.commandId);
      }
      const full = await text(s.sessionId, 'one too many', '?ttlSeconds=120');
      expectProblem(full, 429, 'command_queue_full');
      expect(full.body.limit).toBe(5);
      const retryAfter = Number(full.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(110);
      expect(retryAfter).toBeLessThanOrEqual(120);
      // Another session of the tenant is not held up.
      expect((await text((await session()).sessionId, 'elsewhere')).status).toBe(202);
      // The stream commands count too (nothing moved: the stream stays idle).
      const stream = await api().post(`${commandsOf(s.sessionId)}/stream`, { resolution: 1, aspectratio: 0 });
      expectProblem(stream, 429, 'command_queue_full');
      expect((await streamOf(s.sessionId)).state).toBe('idle');
      expect((await api().get(commandsOf(s.sessionId))).body.totalCount).toBe(5);

      // The device comes back, gets the five and answers one: a place is free.
      const socket = await socketOf(s);
      const first = await socket.ofType('command');
      expect(first.commandId).toBe(queued[0]);
      socket.send({ type: 'ack', commandId: first.commandId, ok: true });
      await expect.poll(() => commandStatus(s.sessionId, first.commandId)).toBe('acknowledged');
      expect((await text(s.sessionId, 'now it fits')).status).toBe(202);
      expectProblem(await text(s.sessionId, 'full again'), 429, 'command_queue_full');
      // A cancelled one frees a place too.
      expect((await cancel(s.sessionId, queued[1])).status).toBe(200);
      expect((await text(s.sessionId, 'after a cancel')).status).toBe(202);
    });

    it('pending commands: expired commands leave the queue', async () => {
      const s = await session();
      for (let i = 0; i < 5; i++)
        expect((await text(s.sessionId, `short${i}`, '?ttlSeconds=1')).status).toBe(202);
      expectProblem(await text(s.sessionId, 'full'), 429, 'command_queue_full');
      await sleep(1100);
      expect((await text(s.sessionId, 'fits after expiry')).status).toBe(202);
    });

    it('pending commands: a concurrent burst of 30 to one session accepts exactly 5', async () => {
      const s = await session();
      const answers = await Promise.all(
        Array.from({ length: 30 }, (_, i) => text(s.sessionId, `burst ${i}`, '?ttlSeconds=120')),
      );
      expect(statuses(answers)).toEqual([...Array(5).fill(202), ...Array(25).fill(429)]);
      for (const a of answers.filter((x) => x.status === 429)) expect(a.body.code).toBe('command_queue_full');
      expect((await api().get(commandsOf(s.sessionId))).body.totalCount).toBe(5);
    });

    it('pending commands: a burst to a connected device that answers at once is never refused', async () => {
      const s = await session();
      const socket = await socketOf(s);
      socket.ws.on('message', (data) => {
        const m = JSON.parse(data.toString());
        if (m.type === 'command') socket.send({ type: 'ack', commandId: m.commandId, ok: true });
      });
      for (let round = 0; round < 4; round++) {
        const answers = await Promise.all(
          Array.from({ length: 5 }, (_, i) => text(s.sessionId, `r${round}-${i}`)),
        );
        expect(statuses(answers)).toEqual(Array(5).fill(202));
        await expect
          .poll(async () => (await api().get(commandsOf(s.sessionId))).body.commands as Json[])
          .toSatisfy((list: Json[]) => list.every((c) => c.status === 'acknowledged'));
      }
    });
  });

  // --- cancel ---------------------------------------------------------------------------------------

  describe('cancel', () => {
    it('a queued stream.start is cancelled: the stream is idle again at once, and the device never gets it', async () => {
      const s = await session();
      const start = await api().post(`${commandsOf(s.sessionId)}/stream`, { resolution: 2, aspectratio: 1 });
      expect(start.body.status).toBe('queued');
      expect((await streamOf(s.sessionId)).state).toBe('starting');
      // While it waits, the session is blocked for another start.
      expectProblem(
        await api().post(`${commandsOf(s.sessionId)}/stream`, { resolution: 1, aspectratio: 0 }),
        409,
        'already_streaming',
      );
      const cancelled = await cancel(s.sessionId, start.body.commandId);
      expect(cancelled.status, cancelled.text).toBe(200);
      expect(cancelled.body).toMatchObject({
        commandId: start.body.commandId,
        name: 'stream.start',
        status: 'cancelled',
        deliveredAt: null,
        settledAt: expect.any(Number),
      });
      expect(await commandStatus(s.sessionId, start.body.commandId)).toBe('cancelled');
      await expect.poll(async () => (await streamOf(s.sessionId)).state).toBe('idle');
      // A device that connects now gets only what is still pending.
      const next = await api().post(`${commandsOf(s.sessionId)}/stream`, { resolution: 1, aspectratio: 0 });
      expect(next.status, next.text).toBe(202);
      const socket = await socketOf(s);
      const got = await socket.ofType('command');
      expect(got.commandId).toBe(next.body.commandId);
      await sleep(200);
      expect(socket.messages.filter((m) => m.type === 'command' || m.type === 'command.cancel')).toEqual([]);
      const events = (await api().get(`/sessions/${s.sessionId}`)).body.events as Json[];
      expect(events.filter((e) => e.eventType === 'StreamStarted')).toEqual([]);
    });

    it('a delivered command is cancelled: the device gets command.cancel, a late ack changes nothing', async () => {
      const s = await session();
      const socket = await socketOf(s);
      const sent = await text(s.sessionId, 'cancel me');
      expect(sent.body.status).toBe('delivered');
      const frame = await socket.ofType('command');
      const cancelled = await cancel(s.sessionId, sent.body.commandId);
      expect(cancelled.status).toBe(200);
      expect(cancelled.body).toMatchObject({ status: 'cancelled', deliveredAt: expect.any(Number) });
      expect(await socket.ofType('command.cancel')).toEqual({
        type: 'command.cancel',
        commandId: frame.commandId,
      });
      socket.send({ type: 'ack', commandId: frame.commandId, ok: true });
      await sleep(200);
      expect(await commandStatus(s.sessionId, sent.body.commandId)).toBe('cancelled');
      expect(socket.messages.filter((m) => m.type === 'error')).toEqual([]);
    });

    it('a delivered stream.start and record.start: each state machine goes back to idle, no Started event', async () => {
      const s = await session();
      const socket = await socketOf(s);
      const start = await api().post(`${commandsOf(s.sessionId)}/stream`, { resolution: 1, aspectratio: 0 });
      expect(start.body.status).toBe('delivered');
      await socket.ofType('command');
      expect((await cancel(s.sessionId, start.body.commandId)).status).toBe(200);
      await socket.ofType('command.cancel');
      await expect.poll(async () => (await streamOf(s.sessionId)).state).toBe('idle');

      // Now a real stream, then a recording start that is cancelled.
      const again = await api().post(`${commandsOf(s.sessionId)}/stream`, { resolution: 1, aspectratio: 0 });
      const frame = await socket.ofType('command');
      expect(frame.commandId).toBe(again.body.commandId);
      socket.send({ type: 'ack', commandId: frame.commandId, ok: true });
      await expect.poll(async () => (await streamOf(s.sessionId)).state).toBe('streaming');
      const record = await call<Json>(base, 'PUT', `${commandsOf(s.sessionId)}/record`, {
        token: tenant.token,
      });
      expect(record.status, record.text).toBe(202);
      await socket.ofType('command');
      expect((await recordingOf(s.sessionId)).state).toBe('starting');
      expect((await cancel(s.sessionId, record.body.commandId)).status).toBe(200);
      await socket.ofType('command.cancel');
      await expect.poll(async () => (await recordingOf(s.sessionId)).state).toBe('idle');
      expect((await streamOf(s.sessionId)).state).toBe('streaming');
      const streamEvents = async () =>
        ((await api().get(`/sessions/${s.sessionId}`)).body.events as Json[])
          .map((e) => String(e.eventType))
          .filter((t) => t.startsWith('Stream') || t.startsWith('Recording'));
      await expect.poll(streamEvents).toEqual(['StreamStarted']);
    });

    it('settled commands answer 409 command_settled with their status; unknown, foreign or malformed ones 404/400', async () => {
      const s = await session();
      const socket = await socketOf(s);
      const acked = await text(s.sessionId, 'answered');
      const frame = await socket.ofType('command');
      socket.send({ type: 'ack', commandId: frame.commandId, ok: true });
      await expect.poll(() => commandStatus(s.sessionId, acked.body.commandId)).toBe('acknowledged');
      const settled = await cancel(s.sessionId, acked.body.commandId);
      expectProblem(settled, 409, 'command_settled');
      expect(settled.body.commandStatus).toBe('acknowledged');

      const refused = await text(s.sessionId, 'refused');
      const refusedFrame = await socket.ofType('command');
      socket.send({ type: 'ack', commandId: refusedFrame.commandId, ok: false, error: 'no' });
      await expect.poll(() => commandStatus(s.sessionId, refused.body.commandId)).toBe('failed');
      expect((await cancel(s.sessionId, refused.body.commandId)).body).toMatchObject({
        code: 'command_settled',
        commandStatus: 'failed',
      });

      const offline = await session();
      const expiring = await text(offline.sessionId, 'soon gone', '?ttlSeconds=1');
      await sleep(1100);
      const expired = await cancel(offline.sessionId, expiring.body.commandId);
      expectProblem(expired, 409, 'command_settled');
      expect(expired.body.commandStatus).toBe('expired');

      const twice = await text(offline.sessionId, 'twice', '?ttlSeconds=60');
      expect((await cancel(offline.sessionId, twice.body.commandId)).status).toBe(200);
      const again = await cancel(offline.sessionId, twice.body.commandId);
      expectProblem(again, 409, 'command_settled');
      expect(again.body.commandStatus).toBe('cancelled');

      expectProblem(await cancel(offline.sessionId, randomUUID()), 404, 'not_found');
      // Another session's command, another tenant's session: 404, nothing changes.
      const live = await text(offline.sessionId, 'still here', '?ttlSeconds=60');
      expectProblem(await cancel(s.sessionId, live.body.commandId), 404, 'not_found');
      const other = await createTenant(base, server.adminToken);
      expectProblem(await cancel(offline.sessionId, live.body.commandId, other), 404, 'not_found');
      expect(await commandStatus(offline.sessionId, live.body.commandId)).toBe('queued');
      expectProblem(await cancel(offline.sessionId, 'not-a-uuid'), 400, 'validation_failed');
      const withBody = await api().post(`${commandsOf(offline.sessionId)}/${live.body.commandId}/cancel`, {
        reason: 'x',
      });
      expectProblem(withBody, 400, 'validation_failed');
      // A client of the tenant without commands:send cannot cancel.
      const client = await call(base, 'POST', `/admin/v1/tenants/${tenant.tenantId}/clients`, {
        token: server.adminToken,
        json: { scopes: ['sessions:read'] },
      });
      const readerToken = await accessToken(
        base,
        String(client.body.clientId),
        String(client.body.clientSecret),
      );
      const forbidden = await call(
        base,
        'POST',
        `${commandsOf(offline.sessionId)}/${live.body.commandId}/cancel`,
        {
          token: readerToken,
        },
      );
      expectProblem(forbidden, 403, 'forbidden');
      expect(await commandStatus(offline.sessionId, live.body.commandId)).toBe('queued');
    });

    it('the SDK hears command.cancel: a waiting command never runs, a running one is aborted, neither is answered', async () => {
      const playerId = `sdk-${randomUUID()}`;
      const token = await deviceToken(base, tenant.token, playerId);
      const device = new LivelineDevice({ baseUrl: base, token, flushIntervalMs: 60_000 });
      devices.push(device);
      const { sessionId } = await device.startSession();
      const ran: string[] = [];
      const aborted: string[] = [];
      let release = () => {};
      device.onCommand(async (name, _variables, command: RealtimeCommand) => {
        ran.push(name);
        await new Promise<void>((resolve) => {
          release = resolve;
          command.signal?.addEventListener('abort', () => {
            aborted.push(name);
            resolve();
          });
        });
      });
      const cancellations: CommandCancellation[] = [];
      device.on('commandCancelled', (c) => cancellations.push(c));
      await device.connect();
      const custom = (name: string) =>
        api().post(commandsOf(sessionId), { name, data: { names: ['x'], types: ['int'], values: ['1'] } });
      const slow = await custom('slow');
      const behind = await custom('behind');
      await expect.poll(() => ran).toEqual(['slow']);
      expect((await cancel(sessionId, behind.body.commandId)).status).toBe(200);
      expect((await cancel(sessionId, slow.body.commandId)).status).toBe(200);
      await expect.poll(() => cancellations.length).toBe(2);
      expect(cancellations.map((c) => [c.commandId, c.stage, c.command?.name])).toEqual([
        [behind.body.commandId, 'waiting', 'behind'],
        [slow.body.commandId, 'running', 'slow'],
      ]);
      expect(aborted).toEqual(['slow']);
      release();
      await sleep(200);
      // The waiting one never reached its handler; neither was answered.
      expect(ran).toEqual(['slow']);
      expect(await commandStatus(sessionId, slow.body.commandId)).toBe('cancelled');
      expect(await commandStatus(sessionId, behind.body.commandId)).toBe('cancelled');
      // A command after them runs as usual.
      device.onText(() => {});
      const after = await text(sessionId, 'after');
      await expect.poll(() => commandStatus(sessionId, after.body.commandId)).toBe('acknowledged');
    });
  });

  // --- pages ----------------------------------------------------------------------------------------

  describe('pending commands in pages', () => {
    let open: TestServer;
    let owner: TenantFixture;

    beforeAll(async () => {
      open = await startTestServer(backend, { LIVELINE_QUOTA_PENDING_COMMANDS: '0' });
      owner = await createTenant(open.url, open.adminToken);
    });
    afterAll(async () => open?.close());

    it('a device back after 250 commands gets them all, in order, at most 100 at a time; a live one comes after them', async () => {
      const token = await deviceToken(open.url, owner.token, `pages-${randomUUID()}`);
      const started = await call(open.url, 'POST', '/client/v1/sessions', { token, json: {} });
      const sessionId = String(started.body.sessionId);
      const ids: string[] = [];
      for (let i = 0; i < 250; i += 25) {
        const batch = await Promise.all(
          Array.from({ length: 25 }, (_, j) =>
            call<Json>(open.url, 'POST', `/sessions/${sessionId}/realtime/commands?ttlSeconds=300`, {
              token: owner.token,
              json: { name: 'text', data: `n${i + j}` },
            }),
          ),
        );
        for (const b of batch) expect(b.status, b.text).toBe(202);
        ids.push(...batch.map((b) => String(b.body.commandId)));
      }
      ids.sort();
      // Counts the frames the real hub has in flight at once (it still writes every one).
      const hub = open.services.hub;
      const write = hub.sendCommands.bind(hub);
      let inFlight = 0;
      let most = 0;
      hub.sendCommands = async (connectionId, commands) => {
        inFlight += commands.length;
        most = Math.max(most, inFlight);
        try {
          return await write(connectionId, commands);
        } finally {
          inFlight -= commands.length;
        }
      };
      const socket = await TestSocket.open(open.url, sessionId, token);
      sockets.push(socket);
      const received: string[] = [];
      for (let i = 0; i < 250; i++) received.push(String((await socket.ofType('command')).commandId));
      expect(received).toEqual(ids);
      expect(most).toBeGreaterThan(1);
      expect(most).toBeLessThanOrEqual(100);
      const live = await call<Json>(open.url, 'POST', `/sessions/${sessionId}/realtime/commands`, {
        token: owner.token,
        json: { name: 'text', data: 'live' },
      });
      expect((await socket.ofType('command')).commandId).toBe(live.body.commandId);
    });
  });

  // --- idempotent replay -----------------------------------------------------------------------------

  describe('Idempotency-Key', () => {
    const keyed = (sessionId: string, key: string, json: unknown, path = '') =>
      api().post(`${commandsOf(sessionId)}${path}`, json, { 'idempotency-key': key });

    it('a retry gets the first answer byte for byte, even after the command was acknowledged', async () => {
      const s = await session();
      const first = await keyed(s.sessionId, 'k-queued', { name: 'text', data: 'once' });
      expect(first.status).toBe(202);
      expect(first.body.status).toBe('queued');
      const socket = await socketOf(s);
      const frame = await socket.ofType('command');
      socket.send({ type: 'ack', commandId: frame.commandId, ok: true });
      await expect.poll(() => commandStatus(s.sessionId, first.body.commandId)).toBe('acknowledged');
      const retry = await keyed(s.sessionId, 'k-queued', { name: 'text', data: 'once' });
      expect(retry.status).toBe(202);
      expect(retry.text).toBe(first.text);
      expect(retry.headers.get('content-type')).toBe(first.headers.get('content-type'));
      expect(retry.body.status).toBe('queued');

      // Delivered first: the retry says delivered with the same deliveredAt, after the ack.
      const delivered = await keyed(s.sessionId, 'k-delivered', { resolution: 1, aspectratio: 0 }, '/stream');
      expect(delivered.body.status).toBe('delivered');
      const startFrame = await socket.ofType('command');
      socket.send({ type: 'ack', commandId: startFrame.commandId, ok: true });
      await expect.poll(async () => (await streamOf(s.sessionId)).state).toBe('streaming');
      const again = await keyed(s.sessionId, 'k-delivered', { resolution: 1, aspectratio: 0 }, '/stream');
      expect(again.status).toBe(202);
      expect(again.text).toBe(delivered.text);
      // Not a second stream start: the retry is not a new command.
      expect((await api().get(commandsOf(s.sessionId))).body.totalCount).toBe(2);
      expect(socket.messages.filter((m) => m.type === 'command')).toEqual([]);
      // The same key with another request is refused.
      expectProblem(
        await keyed(s.sessionId, 'k-queued', { name: 'text', data: 'other' }),
        409,
        'idempotency_key_reused',
      );
    });

    it('a cancelled command is replayed as first answered; concurrent retries all get the one answer', async () => {
      const s = await session();
      const first = await keyed(s.sessionId, 'k-cancel', { name: 'text', data: 'x' });
      expect((await cancel(s.sessionId, first.body.commandId)).status).toBe(200);
      const retry = await keyed(s.sessionId, 'k-cancel', { name: 'text', data: 'x' });
      expect(retry.text).toBe(first.text);

      const burst = await Promise.all(
        Array.from({ length: 8 }, () => keyed(s.sessionId, 'k-burst', { name: 'text', data: 'burst' })),
      );
      expect(burst.map((b) => b.status)).toEqual(Array(8).fill(202));
      expect(new Set(burst.map((b) => b.text)).size).toBe(1);
      const list = (await api().get(commandsOf(s.sessionId))).body.commands as Json[];
      expect(list.filter((c) => c.data === 'burst')).toHaveLength(1);
    });

    it('a refused request is not kept: its retry is tried again', async () => {
      const s = await session();
      for (let i = 0; i < 5; i++) await text(s.sessionId, `fill${i}`, '?ttlSeconds=60');
      const full = await keyed(s.sessionId, 'k-full', { name: 'text', data: 'later' });
      expectProblem(full, 429, 'command_queue_full');
      const pending = (await api().get(commandsOf(s.sessionId))).body.commands as Json[];
      expect((await cancel(s.sessionId, pending[0].commandId)).status).toBe(200);
      const retry = await keyed(s.sessionId, 'k-full', { name: 'text', data: 'later' });
      expect(retry.status, retry.text).toBe(202);
    });
  });
});

// --- across processes ---------------------------------------------------------------------------------

// Two servers on one PostgreSQL schema joined by a Redis this suite starts (as in cluster.test.ts).
if (redisAvailable && process.env.DATABASE_URL)
  describe('command cancel across processes (postgres) (redis)', () => {
    let redis: TestRedis;
    let store: ReturnType<typeof freshStore>;
    const servers: RunningServer[] = [];
    let tenant: TenantFixture;

    beforeAll(async () => {
      redis = await startRedis();
      store = freshStore('postgres');
      const env = {
        ...store.env,
        PORT: '0',
        HOST: '127.0.0.1',
        REDIS_URL: redis.url,
        LIVELINE_REDIS_PREFIX: redis.prefix(),
        LIVELINE_ADMIN_TOKEN: ADMIN_TOKEN,
        LIVELINE_QUOTA_PENDING_COMMANDS: '3',
        LOG_LEVEL: 'silent',
      };
      servers.push(await startServer(loadConfig(env)));
      servers.push(await startServer(loadConfig(env)));
      tenant = await createTenant(servers[0].url, ADMIN_TOKEN);
    }, 60_000);
    afterAll(async () => {
      for (const s of servers) await s.close();
      await redis?.stop();
      await store?.destroy();
    });

    /** A new session whose device never connects, and a way to send it a text through either process. */
    async function offlineSession(opener: RunningServer, token: string) {
      const created = await call(opener.url, 'POST', '/client/v1/sessions', { token, json: {} });
      const sessionId = String(created.body.sessionId);
      return (server: RunningServer, data: string) =>
        call<Json>(server.url, 'POST', `/sessions/${sessionId}/realtime/commands?ttlSeconds=60`, {
          token: tenant.token,
          json: { name: 'text', data },
        });
    }

    it('a command cancelled through one process reaches the device on the other; the queue quota holds', async () => {
      const [a, b] = servers;
      const token = await deviceToken(a.url, tenant.token, `x-${randomUUID()}`);
      const sessionId = String(
        (await call(a.url, 'POST', '/client/v1/sessions', { token, json: {} })).body.sessionId,
      );
      const socket = await TestSocket.open(a.url, sessionId, token);
      await socket.ofType('welcome');
      const sent = await call<Json>(b.url, 'POST', `/sessions/${sessionId}/realtime/commands/stream`, {
        token: tenant.token,
        json: { resolution: 1, aspectratio: 0 },
      });
      expect(sent.status, sent.text).toBe(202);
      expect(sent.body.status).toBe('delivered');
      await socket.ofType('command');
      const cancelled = await call<Json>(
        b.url,
        'POST',
        `/sessions/${sessionId}/realtime/commands/${sent.body.commandId}/cancel`,
        {
          token: tenant.token,
        },
      );
      expect(cancelled.status, cancelled.text).toBe(200);
      expect(await socket.ofType('command.cancel')).toEqual({
        type: 'command.cancel',
        commandId: sent.body.commandId,
      });
      await expect
        .poll(
          async () =>
            (await call<Json>(a.url, 'GET', `/sessions/${sessionId}`, { token: tenant.token })).body.stream,
        )
        .toMatchObject({ state: 'idle' });
      await socket.close();

      // The quota of 3, with commands accepted through both processes one after another.
      const through = await offlineSession(a, token);
      expect((await through(a, '1')).status).toBe(202);
      expect((await through(b, '2')).status).toBe(202);
      expect((await through(a, '3')).status).toBe(202);
      expect((await through(b, '4')).status).toBe(429);
      await sleep(2100);
      expect((await through(a, '5')).status).toBe(429);
    });

    it('counts the commands another process accepted, for a device connected nowhere (announced, not delivered)', async () => {
      const [a, b] = servers;
      const token = await deviceToken(a.url, tenant.token, `x-${randomUUID()}`);
      const through = await offlineSession(a, token);
      // B reads the session's queue while it is empty and remembers one command of its own.
      expect((await through(b, '1')).status).toBe(202);
      // A fills it; no command travels to a device, so B hears of them only as A announces them.
      expect((await through(a, '2')).status).toBe(202);
      expect((await through(a, '3')).status).toBe(202);
      await sleep(400);
      // B counts A's two (the queue looks full, is read again, and is): the quota of 3 holds.
      const fourth = await through(b, '4');
      expect(fourth.status, fourth.text).toBe(429);
      expect(fourth.body.code).toBe('command_queue_full');
    });
  });

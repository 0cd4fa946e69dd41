import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { type RunningServer, startServer } from '../../src/server.ts';
import { call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { TestSocket } from '../helpers/device-socket.ts';
import { greyJpeg } from '../helpers/jpeg.ts';
import { cli } from '../helpers/process.ts';
import { type Receiver, startReceiver, waitFor } from '../helpers/receiver.ts';
import { redisAvailable, startRedis, type TestRedis } from '../helpers/redis.ts';
import { LONG_CLOCK_ENV, MINUTE } from '../helpers/rewards.ts';
import { ADMIN_TOKEN, backends, freshStore, startTestServer, type TestServer } from '../helpers/server.ts';
import { openTail } from '../helpers/sse.ts';

/**
 * Players' data (CONTRACT §16) over real HTTP and WebSocket, on both stores: a player's sessions,
 * the NDJSON export, the erasure (reads 404 at once, sockets 4003, tokens refused, every table
 * emptied of the player by the job, claims kept without their player, `player.erased`), erasure
 * while devices ingest, tenants kept apart, the audit log, the scope, and the CLI.
 */

type Json = Record<string, unknown>;

/** Real time plus what the test moved it by (streams of minutes count without waiting them). */
function offsetClock() {
  let offset = 0;
  return {
    now: () => Date.now() + offset,
    advance(ms: number) {
      offset += ms;
    },
  };
}

describe.each(backends)('players (%s)', (backend) => {
  const clock = offsetClock();
  let server: TestServer;
  let base: string;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    server = await startTestServer(
      backend,
      {
        ...LONG_CLOCK_ENV,
        LIVELINE_RATE_LIMIT_TENANT_RPS: '0',
        LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
        LIVELINE_ERASURE_INTERVAL_MS: '100',
        LIVELINE_ERASURE_GRACE_MS: '700',
      },
      { clock },
    );
    base = server.url;
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    await server?.close();
  });

  const api = (t: TenantFixture, method: string, url: string, json?: unknown) =>
    call(base, method, url, { token: t.token, json });
  const admin = (method: string, url: string) => call(base, method, url, { token: server.adminToken });

  async function startSession(token: string) {
    const res = await call(base, 'POST', '/client/v1/sessions', { token, json: {} });
    expect(res.status, res.text).toBe(201);
    return String(res.body.sessionId);
  }

  async function postEvents(token: string, sessionId: string, count: number, fields: Json = {}) {
    for (let done = 0; done < count; done += 1000) {
      const events = Array.from({ length: Math.min(1000, count - done) }, () => ({
        id: randomUUID(),
        timestamp: clock.now() - 60_000,
        ...(fields.eventType ? fields : { eventType: 'Custom', custom01: 'x' }),
      }));
      const res = await call(base, 'POST', `/sessions/${sessionId}/Events`, { token, json: { events } });
      expect(res.status, res.text).toBe(200);
    }
  }

  async function upload(token: string, sessionId: string) {
    const form = new FormData();
    form.append('image', new Blob([new Uint8Array(greyJpeg(16, 12))], { type: 'image/jpeg' }), 'shot');
    const res = await fetch(`${base}/client/v1/sessions/${sessionId}/screenshots`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: form,
    });
    expect(res.status).toBe(201);
    return String(((await res.json()) as Json).imageId);
  }

  async function exportLines(url: string, token: string) {
    const res = await fetch(`${base}${url}`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/x-ndjson');
    const text = await res.text();
    expect(text.endsWith('\n')).toBe(true);
    return text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Json & { kind: string });
  }

  /** A tenant with a campaign whose challenge one session of streaming completes. */
  async function rewardsTenant() {
    const t = await createTenant(base, server.adminToken);
    const campaign = await api(t, 'POST', '/campaigns', {
      name: 'Campaign',
      redemption: { method: 'displayCode', instructionsTemplate: 'Show {code}' },
    });
    expect(campaign.status, campaign.text).toBe(201);
    const challenge = await api(t, 'POST', `/campaigns/${campaign.body.campaignId}/challenges`, {
      rewardCode: 'BADGE',
      rewardTitle: 'Badge',
      rewardRequirement: 'Play once',
      rewardImage: greyJpeg(200, 200).toString('base64'),
      rule: { type: 'sessionCount', target: 1 },
    });
    expect(challenge.status, challenge.text).toBe(201);
    return {
      t,
      campaignSecret: String(campaign.body.campaignSecret),
      challengeId: String(challenge.body.challengeId),
    };
  }

  /** A player with one session of everything: events, a command, a screenshot, a stream, an alert incident, a claim. */
  async function fullPlayer(t: TenantFixture, challengeId: string | null, playerId = `p-${randomUUID()}`) {
    const token = await deviceToken(base, t.token, playerId);
    const sessionId = await startSession(token);
    await postEvents(token, sessionId, 3);
    await postEvents(token, sessionId, 1, { eventType: 'Health', batteryLevel: 5 });
    const command = await api(t, 'POST', `/sessions/${sessionId}/realtime/commands`, {
      name: 'text',
      data: 'hi',
    });
    expect(command.status, command.text).toBe(202);
    const imageId = await upload(token, sessionId);
    const start = await call(base, 'POST', `/client/v1/sessions/${sessionId}/stream/start`, {
      token,
      json: { resolution: 1, aspectratio: 0 },
    });
    expect(start.status, start.text).toBe(200);
    clock.advance(2 * MINUTE);
    const stop = await call(base, 'POST', `/client/v1/sessions/${sessionId}/stream/stop`, {
      token,
      json: {},
    });
    expect(stop.status, stop.text).toBe(200);
    let claim: Json | null = null;
    if (challengeId) {
      const claimed = await call(base, 'POST', `/client/v1/challenges/${challengeId}/claim`, {
        token,
        json: {},
      });
      expect(claimed.status, claimed.text).toBe(201);
      claim = claimed.body;
    }
    return { playerId, token, sessionId, imageId, commandId: String(command.body.commandId), claim };
  }

  /** Waits until the player's latest erasure is done (the job's final empty pass). */
  async function settled(tenantId: string, playerId: string) {
    await waitFor(
      async () => {
        const row = await server.services.storage.db
          .selectFrom('player_erasures')
          .select('state')
          .where('tenant_id', '=', tenantId)
          .where('player_id', '=', playerId)
          .where('state', '=', 'pending')
          .executeTakeFirst();
        return row === undefined;
      },
      20_000,
      'the erasure to complete',
    );
  }

  /** Rows left anywhere in the store that hold these sessions or this player (what an erasure must empty). */
  async function leftovers(tenantId: string, playerId: string, sessionIds: string[], commandIds: string[]) {
    const db = server.services.storage.db;
    const n = async (q: Promise<{ n: unknown } | undefined>) => Number((await q)?.n ?? 0);
    const count = sql<number>`count(*)`.as('n');
    const ids = sessionIds.length > 0 ? sessionIds : ['none'];
    const cmds = commandIds.length > 0 ? commandIds : ['none'];
    const mentions = (column: string) =>
      sql<boolean>`(${sql.join(
        [...ids, `"playerId":${JSON.stringify(playerId)}`].map(
          (s) => sql`${sql.ref(column)} like ${`%${s}%`}`,
        ),
        sql` or `,
      )})`;
    const mine = { tenant: tenantId, player: playerId };
    return {
      sessions: await n(
        db
          .selectFrom('sessions')
          .select(count)
          .where((eb) =>
            eb.or([
              eb('session_id', 'in', ids),
              eb.and([eb('tenant_id', '=', mine.tenant), eb('player_id', '=', mine.player)]),
            ]),
          )
          .executeTakeFirst(),
      ),
      events: await n(
        db.selectFrom('events').select(count).where('session_id', 'in', ids).executeTakeFirst(),
      ),
      commands: await n(
        db.selectFrom('commands').select(count).where('session_id', 'in', ids).executeTakeFirst(),
      ),
      commandAnswers: await n(
        db.selectFrom('command_answers').select(count).where('command_id', 'in', cmds).executeTakeFirst(),
      ),
      batchRefusals: await n(
        db
          .selectFrom('command_batch_refusals')
          .select(count)
          .where('session_id', 'in', ids)
          .executeTakeFirst(),
      ),
      streams: await n(
        db.selectFrom('session_streams').select(count).where('session_id', 'in', ids).executeTakeFirst(),
      ),
      intervals: await n(
        db
          .selectFrom('stream_intervals')
          .select(count)
          .where((eb) => eb.or([eb('session_id', 'in', ids), eb('player_id', '=', playerId)]))
          .where('tenant_id', '=', tenantId)
          .executeTakeFirst(),
      ),
      alertStates: await n(
        db
          .selectFrom('alert_states')
          .select(count)
          .where((eb) => eb.or([eb('session_id', 'in', ids), eb('player_id', '=', playerId)]))
          .executeTakeFirst(),
      ),
      alertIncidents: await n(
        db
          .selectFrom('alert_incidents')
          .select(count)
          .where((eb) => eb.or([eb('session_id', 'in', ids), eb('player_id', '=', playerId)]))
          .executeTakeFirst(),
      ),
      screenshots: await n(
        db.selectFrom('screenshots').select(count).where('session_id', 'in', ids).executeTakeFirst(),
      ),
      claims: await n(
        db
          .selectFrom('claims')
          .select(count)
          .where('tenant_id', '=', tenantId)
          .where('player_id', '=', playerId)
          .executeTakeFirst(),
      ),
      // Deliveries already sent stay in the log (CONTRACT §16); `player.erased` itself names the player.
      unsentDeliveries: await n(
        db
          .selectFrom('webhook_deliveries')
          .select(count)
          .where('tenant_id', '=', tenantId)
          .where('status', '!=', 'delivered')
          .where('type', '!=', 'player.erased')
          .where(mentions('payload'))
          .executeTakeFirst(),
      ),
      fanout: await n(
        db.selectFrom('webhook_fanout').select(count).where(mentions('messages')).executeTakeFirst(),
      ),
    };
  }

  const NOTHING = {
    sessions: 0,
    events: 0,
    commands: 0,
    commandAnswers: 0,
    batchRefusals: 0,
    streams: 0,
    intervals: 0,
    alertStates: 0,
    alertIncidents: 0,
    screenshots: 0,
    claims: 0,
    unsentDeliveries: 0,
    fanout: 0,
  };

  it("lists a player's sessions newest first, by page and cursor; an unknown or another tenant's player has none", async () => {
    const t = await createTenant(base, server.adminToken);
    const other = await createTenant(base, server.adminToken);
    const token = await deviceToken(base, t.token, 'alice');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push(await startSession(token));
      clock.advance(1000);
    }
    await startSession(await deviceToken(base, t.token, 'bob'));
    const newestFirst = [...ids].reverse();

    const all = await api(t, 'GET', '/players/alice/sessions');
    expect(all.status, all.text).toBe(200);
    expect((all.body.sessions as Json[]).map((s) => s.sessionId)).toEqual(newestFirst);
    expect(all.body).toMatchObject({ page: 1, totalCount: 3, hasMore: false, nextCursor: null });
    expect((all.body.sessions as Json[])[0]).toMatchObject({
      playerId: 'alice',
      status: 'live',
      connected: false,
    });

    const first = await api(t, 'GET', '/players/alice/sessions/page/1?pageSize=2');
    expect((first.body.sessions as Json[]).map((s) => s.sessionId)).toEqual(newestFirst.slice(0, 2));
    expect(first.body).toMatchObject({ hasMore: true, totalCount: 3, totalPages: 2 });
    const second = await api(t, 'GET', '/players/alice/sessions/page/2?pageSize=2');
    expect((second.body.sessions as Json[]).map((s) => s.sessionId)).toEqual(newestFirst.slice(2));
    const after = await api(
      t,
      'GET',
      `/players/alice/sessions/page/1?pageSize=2&after=${encodeURIComponent(String(first.body.nextCursor))}`,
    );
    expect((after.body.sessions as Json[]).map((s) => s.sessionId)).toEqual(newestFirst.slice(2));
    expect(after.body).toMatchObject({ page: null, hasMore: false });
    const bad = await api(t, 'GET', '/players/alice/sessions?after=nonsense');
    expect(bad.status).toBe(400);

    for (const res of [
      await api(t, 'GET', '/players/nobody/sessions'),
      await api(other, 'GET', '/players/alice/sessions'),
    ]) {
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ sessions: [], totalCount: 0 });
    }

    const mirrored = await admin('GET', `/admin/v1/tenants/${t.tenantId}/players/alice/sessions`);
    expect((mirrored.body.sessions as Json[]).map((s) => s.sessionId)).toEqual(newestFirst);
    expect((await admin('GET', `/admin/v1/tenants/${randomUUID()}/players/alice/sessions`)).status).toBe(404);
  });

  it('exports every kind of line with a correct end line; another tenant exports nothing of it', async () => {
    const { t, challengeId } = await rewardsTenant();
    const p = await fullPlayer(t, challengeId);
    const lines = await exportLines(`/players/${p.playerId}/export`, t.token);
    expect(lines[0]).toMatchObject({ kind: 'player', playerId: p.playerId });
    expect(typeof lines[0].exportedAt).toBe('number');
    const kinds = lines.map((l) => l.kind);
    for (const kind of ['session', 'event', 'command', 'screenshot', 'claim']) expect(kinds).toContain(kind);
    const end = lines[lines.length - 1];
    const counted = (kind: string) => lines.filter((l) => l.kind === kind).length;
    expect(end).toEqual({
      kind: 'end',
      counts: {
        sessions: counted('session'),
        events: counted('event'),
        commands: counted('command'),
        screenshots: counted('screenshot'),
        claims: counted('claim'),
      },
    });
    expect(end.counts).toMatchObject({ sessions: 1, commands: 1, screenshots: 1, claims: 1 });
    // 4 posted, plus the server's own (StreamStarted, StreamStopped, Screenshot…).
    expect(counted('event')).toBeGreaterThanOrEqual(5);
    expect(lines.find((l) => l.kind === 'session')).toMatchObject({
      sessionId: p.sessionId,
      playerId: p.playerId,
    });
    expect(lines.find((l) => l.kind === 'command')).toMatchObject({
      sessionId: p.sessionId,
      commandId: p.commandId,
    });
    expect(lines.find((l) => l.kind === 'claim')).toMatchObject({
      claimId: p.claim?.claimId,
      playerId: p.playerId,
      rewardCode: 'BADGE',
    });
    const shot = lines.find((l) => l.kind === 'screenshot')!;
    expect(shot).toMatchObject({ sessionId: p.sessionId, imageId: p.imageId, width: 16, height: 12 });
    const image = await fetch(String(shot.url), { headers: { authorization: `Bearer ${t.token}` } });
    expect(image.status).toBe(200);
    for (const event of lines.filter((l) => l.kind === 'event')) expect(event.sessionId).toBe(p.sessionId);

    const other = await createTenant(base, server.adminToken);
    const nothing = await exportLines(`/players/${p.playerId}/export`, other.token);
    expect(nothing.map((l) => l.kind)).toEqual(['player', 'end']);
    expect(nothing[1].counts).toEqual({ sessions: 0, events: 0, commands: 0, screenshots: 0, claims: 0 });

    const mirrored = await exportLines(
      `/admin/v1/tenants/${t.tenantId}/players/${p.playerId}/export`,
      server.adminToken,
    );
    expect(mirrored[mirrored.length - 1]).toEqual(end);
  });

  it("streams a larger player's export (20,000 events) that parses whole", async () => {
    const t = await createTenant(base, server.adminToken);
    const token = await deviceToken(base, t.token, 'big');
    const sessionId = await startSession(token);
    await postEvents(token, sessionId, 20_000);
    const res = await fetch(`${base}/players/big/export`, {
      headers: { authorization: `Bearer ${t.token}` },
    });
    expect(res.headers.get('content-type')).toContain('application/x-ndjson');
    // Read as it arrives: lines are parsed chunk by chunk, never the whole body at once.
    const decoder = new TextDecoder();
    let rest = '';
    let events = 0;
    let chunks = 0;
    let last: Json | null = null;
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      chunks++;
      const text = rest + decoder.decode(chunk, { stream: true });
      const parts = text.split('\n');
      rest = parts.pop() ?? '';
      for (const l of parts) {
        last = JSON.parse(l) as Json;
        if (last.kind === 'event') events++;
      }
    }
    expect(rest).toBe('');
    expect(events).toBe(20_000);
    expect(chunks).toBeGreaterThan(1);
    expect(last).toMatchObject({ kind: 'end', counts: { sessions: 1, events: 20_000 } });
  }, 60_000);

  it('erases a player: reads 404 at once, socket 4003, token refused, every table emptied, claims kept, player.erased sent', async () => {
    const { t, campaignSecret, challengeId } = await rewardsTenant();
    const receiver = await startReceiver();
    const failing = await startReceiver({ behaviour: () => 500 });
    receivers.push(receiver, failing);
    expect((await api(t, 'POST', '/webhooks', { url: receiver.url })).status).toBe(201);
    // An endpoint that keeps failing: its deliveries of the player's data stay unsent until the erasure.
    expect((await api(t, 'POST', '/webhooks', { url: failing.url })).status).toBe(201);
    const rule = await api(t, 'POST', '/alerts', {
      name: 'Low battery',
      eventType: 'Health',
      field: 'batteryLevel',
      op: 'lt',
      value: 15,
    });
    expect(rule.status, rule.text).toBe(201);

    const p = await fullPlayer(t, challengeId);
    const second = await startSession(p.token);
    await postEvents(p.token, second, 5);
    const kept = await fullPlayer(t, challengeId);
    const socket = await TestSocket.open(base, second, p.token);
    await socket.ofType('welcome');
    const tail = await openTail(base, `/sessions/${second}/events/stream`, t.token);
    await tail.ready();
    await waitFor(() => failing.received.length > 0, 10_000, 'deliveries to the failing endpoint');
    const before = await leftovers(t.tenantId, p.playerId, [p.sessionId, second], [p.commandId]);
    expect(before.events).toBeGreaterThan(0);
    expect(before.alertIncidents).toBe(1);
    expect(before.unsentDeliveries).toBeGreaterThan(0);
    const keptBefore = await exportLines(`/players/${kept.playerId}/export`, t.token);

    const erased = await api(t, 'DELETE', `/players/${p.playerId}`);
    expect(erased.status, erased.text).toBe(202);
    expect(erased.body).toEqual({ playerId: p.playerId, erasedAt: expect.any(Number) });
    const erasedAt = Number(erased.body.erasedAt);

    // At once: every read of the sessions is a 404, the token is refused, the socket closes with 4003.
    for (const url of [
      `/sessions/${p.sessionId}`,
      `/sessions/${p.sessionId}/events`,
      `/sessions/${p.sessionId}/realtime/commands`,
      `/sessions/${p.sessionId}/realtime/commands/${p.commandId}`,
      `/sessions/${p.sessionId}/screenshots/${p.imageId}`,
      `/sessions/${second}`,
    ]) {
      expect((await api(t, 'GET', url)).status, url).toBe(404);
    }
    const sent = await api(t, 'POST', `/sessions/${p.sessionId}/realtime/commands`, {
      name: 'text',
      data: 'x',
    });
    expect(sent.status).toBe(404);
    expect((await socket.waitClosed()).code).toBe(4003);
    await tail.until(() => tail.ended, 5000, "the erased session's live tail to end");
    const reopened = await openTail(base, `/sessions/${second}/events/stream`, t.token);
    await reopened.until(() => reopened.ended, 5000, 'the refused tail');
    expect(reopened.status).toBe(404);
    const refused = await call(base, 'POST', '/client/v1/sessions', { token: p.token, json: {} });
    expect(refused.status).toBe(401);
    expect((await api(t, 'GET', `/players/${p.playerId}/sessions`)).body).toMatchObject({ totalCount: 0 });

    // A second DELETE while it is pending answers the same erasure.
    const again = await api(t, 'DELETE', `/players/${p.playerId}`);
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ playerId: p.playerId, erasedAt });

    await settled(t.tenantId, p.playerId);
    expect(Date.now() - erasedAt).toBeLessThan(60_000);
    expect(await leftovers(t.tenantId, p.playerId, [p.sessionId, second], [p.commandId])).toEqual(NOTHING);
    const blob = await server.services.blobs.get(`screenshots/${t.tenantId}/${p.sessionId}/${p.imageId}`);
    expect(blob).toBeNull();
    // The revocation that refuses the player's old tokens stays until they have all expired (documented).
    const revocation = await server.services.storage.db
      .selectFrom('player_token_revocations')
      .selectAll()
      .where('tenant_id', '=', t.tenantId)
      .where('player_id', '=', p.playerId)
      .executeTakeFirst();
    expect(Number(revocation?.not_before)).toBe(erasedAt);

    // The claim stays, without its player, and its code still verifies.
    const claim = await server.services.storage.db
      .selectFrom('claims')
      .selectAll()
      .where('claim_id', '=', Number(p.claim?.claimId))
      .executeTakeFirstOrThrow();
    expect(claim).toMatchObject({
      player_id: null,
      reward_code: 'BADGE',
      display_code: p.claim?.displayCode,
    });
    const verified = await call(base, 'POST', '/campaigns/verifyrewardcode', {
      json: { campaignSecret, verificationCode: p.claim?.displayCode },
    });
    expect(verified.status, verified.text).toBe(200);
    expect(verified.body).toMatchObject({ claimId: p.claim?.claimId, rewardCode: 'BADGE', playerId: null });

    await waitFor(
      () => receiver.messages().some((m) => m.type === 'player.erased'),
      10_000,
      'player.erased at the receiver',
    );
    expect(receiver.messages().find((m) => m.type === 'player.erased')?.data).toEqual({
      playerId: p.playerId,
      erasedAt,
    });

    // The other player of the tenant: untouched.
    const keptAfter = await exportLines(`/players/${kept.playerId}/export`, t.token);
    // (Compared by identity: a command's expiry may have been recorded meanwhile.)
    const identities = (lines: Json[]) =>
      lines
        .slice(1)
        .map((l) => [l.kind, l.id ?? l.commandId ?? l.imageId ?? l.claimId ?? l.sessionId ?? l.counts]);
    expect(identities(keptAfter)).toEqual(identities(keptBefore));
    expect((await api(t, 'GET', `/sessions/${kept.sessionId}`)).status).toBe(200);

    // Done: a new DELETE starts a new erasure (the player may have come back).
    const later = await api(t, 'DELETE', `/players/${p.playerId}`);
    expect(later.status).toBe(202);
    expect(Number(later.body.erasedAt)).toBeGreaterThan(erasedAt);
    await settled(t.tenantId, p.playerId);
  }, 60_000);

  it("another tenant's DELETE of the same player id erases nothing of the first tenant", async () => {
    const a = await createTenant(base, server.adminToken);
    const b = await createTenant(base, server.adminToken);
    const token = await deviceToken(base, a.token, 'shared-name');
    const sessionId = await startSession(token);
    await postEvents(token, sessionId, 10);
    const before = await exportLines('/players/shared-name/export', a.token);
    const erased = await api(b, 'DELETE', '/players/shared-name');
    expect(erased.status).toBe(202);
    await settled(b.tenantId, 'shared-name');
    const after = await exportLines('/players/shared-name/export', a.token);
    expect(after.slice(1)).toEqual(before.slice(1));
    expect((await call(base, 'POST', '/client/v1/sessions', { token, json: {} })).status).toBe(201);
  });

  it('an erasure during ingestion leaves nothing of the player, and another player ingesting meanwhile loses nothing', async () => {
    const t = await createTenant(base, server.adminToken);
    const victim = { id: `v-${randomUUID()}`, token: '', sessionId: '' };
    const bystander = { id: `b-${randomUUID()}`, token: '', sessionId: '' };
    for (const p of [victim, bystander]) {
      p.token = await deviceToken(base, t.token, p.id);
      p.sessionId = await startSession(p.token);
    }
    let stop = false;
    let bystanderAccepted = 0;
    let victimAccepted = 0;
    const pump = async (p: typeof victim, onAccepted: (n: number) => void) => {
      while (!stop) {
        const events = Array.from({ length: 50 }, () => ({
          id: randomUUID(),
          eventType: 'Custom',
          timestamp: clock.now() - 1000,
          custom01: 'x',
        }));
        const res = await call(base, 'POST', `/sessions/${p.sessionId}/Events`, {
          token: p.token,
          json: { events },
        });
        if (res.status !== 200) return res.status;
        onAccepted(Number(res.body.accepted));
      }
      return 200;
    };
    const victimPump = pump(victim, (n) => {
      victimAccepted += n;
    });
    const bystanderPump = pump(bystander, (n) => {
      bystanderAccepted += n;
    });
    try {
      await waitFor(
        () => victimAccepted >= 500 && bystanderAccepted >= 500,
        20_000,
        'both devices ingesting',
      );
      const erased = await api(t, 'DELETE', `/players/${victim.id}`);
      expect(erased.status).toBe(202);
      // The victim's next batch is refused: 401 (its token is revoked), or 404 when it was in flight
      // while the erasure committed (its session deleted before the revocation reached this process).
      expect([401, 404]).toContain(await victimPump);
      // Once the erasure has answered, every batch is refused for the revoked token.
      const after = await call(base, 'POST', `/sessions/${victim.sessionId}/Events`, {
        token: victim.token,
        json: {
          events: [{ id: randomUUID(), eventType: 'Custom', timestamp: clock.now() - 1000, custom01: 'x' }],
        },
      });
      expect(after.status).toBe(401);
      // The bystander goes on a while.
      await new Promise((r) => setTimeout(r, 300));
    } finally {
      // Also when the test fails: no request may outlive it (the server closes after the file).
      stop = true;
    }
    expect(await bystanderPump).toBe(200);
    await settled(t.tenantId, victim.id);
    expect(await leftovers(t.tenantId, victim.id, [victim.sessionId], [])).toEqual(NOTHING);
    const stored = await server.services.storage.db
      .selectFrom('events')
      .select(sql<number>`count(*)`.as('n'))
      .where('session_id', '=', bystander.sessionId)
      .executeTakeFirstOrThrow();
    expect(Number(stored.n)).toBe(bystanderAccepted);
  }, 60_000);

  it('keeps an audit log of exports and erasures for the operator; players:manage is needed', async () => {
    const t = await createTenant(base, server.adminToken);
    const playerId = `audited-${randomUUID()}`;
    const token = await deviceToken(base, t.token, playerId);
    const sessionId = await startSession(token);
    await postEvents(token, sessionId, 2);
    await exportLines(`/players/${playerId}/export`, t.token);
    const erased = await api(t, 'DELETE', `/players/${playerId}`);
    expect(erased.status).toBe(202);
    await settled(t.tenantId, playerId);
    await exportLines(`/admin/v1/tenants/${t.tenantId}/players/${playerId}/export`, server.adminToken);

    const log = await admin('GET', `/admin/v1/audit?playerId=${playerId}`);
    expect(log.status, log.text).toBe(200);
    const entries = log.body.entries as Json[];
    expect(entries.map((e) => [e.action, e.actor])).toEqual([
      ['player.export', 'operator'],
      ['player.erase', t.clientId],
      ['player.export', t.clientId],
    ]);
    expect(entries[1]).toMatchObject({ tenantId: t.tenantId, playerId, at: erased.body.erasedAt });
    expect(entries[1].counts).toMatchObject({ sessions: 1, events: 2 });
    expect(entries[2].counts).toEqual({ sessions: 1, events: 2, commands: 0, screenshots: 0, claims: 0 });
    const erasures = await admin('GET', `/admin/v1/audit?tenantId=${t.tenantId}&action=player.erase`);
    expect((erasures.body.entries as Json[]).map((e) => e.playerId)).toEqual([playerId]);
    const paged = await admin('GET', `/admin/v1/audit/page/1?playerId=${playerId}&pageSize=1`);
    expect(paged.body).toMatchObject({ totalCount: 3, hasMore: true });
    expect((await api(t, 'GET', '/admin/v1/audit')).status).toBe(403);
    expect((await admin('GET', '/admin/v1/audit?action=other')).status).toBe(400);

    const reader = await createTenant(base, server.adminToken, { scopes: ['sessions:read'] });
    for (const [method, url] of [
      ['GET', '/players/x/sessions'],
      ['GET', '/players/x/export'],
      ['DELETE', '/players/x'],
    ] as const) {
      const res = await api(reader, method, url);
      expect(res.status, url).toBe(403);
      expect(res.body.code).toBe('forbidden');
    }
  });

  it('liveline admin players export and erase, through the real CLI', async () => {
    const t = await createTenant(base, server.adminToken);
    const token = await deviceToken(base, t.token, 'cli-player');
    const sessionId = await startSession(token);
    await postEvents(token, sessionId, 3);
    const conn = ['--url', base, '--token', server.adminToken];
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'liveline-players-'));
    try {
      const file = path.join(dir, 'player.ndjson');
      const exported = await cli([
        'admin',
        'players',
        'export',
        t.tenantId,
        'cli-player',
        '--out',
        file,
        ...conn,
      ]);
      expect(exported.code, exported.stderr).toBe(0);
      expect(exported.stderr).toContain('1 sessions, 3 events');
      const lines = fs
        .readFileSync(file, 'utf8')
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as Json);
      expect(lines[0]).toMatchObject({ kind: 'player', playerId: 'cli-player' });
      expect(lines[lines.length - 1]).toMatchObject({ kind: 'end', counts: { sessions: 1, events: 3 } });
      const toStdout = await cli(['admin', 'players', 'export', t.tenantId, 'cli-player', ...conn]);
      expect(toStdout.code).toBe(0);
      expect(toStdout.stdout.trimEnd().split('\n')).toHaveLength(lines.length);

      const erased = await cli(['admin', 'players', 'erase', t.tenantId, 'cli-player', '--json', ...conn]);
      expect(erased.code, erased.stderr).toBe(0);
      expect(JSON.parse(erased.stdout)).toMatchObject({
        playerId: 'cli-player',
        erasedAt: expect.any(Number),
      });
      expect((await api(t, 'GET', `/sessions/${sessionId}`)).status).toBe(404);
      const unknown = await cli(['admin', 'players', 'erase', randomUUID(), 'cli-player', ...conn]);
      expect(unknown.code).not.toBe(0);
      expect(unknown.stderr).toContain('not_found');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

// Two processes on one PostgreSQL database, joined by Redis: the erasure reaches the other's socket
// and caches at once, and the two processes' jobs share the work through the lease.
if (redisAvailable && process.env.DATABASE_URL)
  describe('players across processes (postgres) (redis)', () => {
    let redis: TestRedis;
    let store: ReturnType<typeof freshStore>;
    const running: RunningServer[] = [];
    beforeAll(async () => {
      redis = await startRedis();
      store = freshStore('postgres');
      const config = loadConfig({
        PORT: '0',
        HOST: '127.0.0.1',
        LIVELINE_ADMIN_TOKEN: ADMIN_TOKEN,
        ...store.env,
        REDIS_URL: redis.url,
        LIVELINE_REDIS_PREFIX: redis.prefix(),
        LIVELINE_RATE_LIMIT_TENANT_RPS: '0',
        LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
        LIVELINE_ERASURE_INTERVAL_MS: '100',
        LIVELINE_ERASURE_GRACE_MS: '500',
      });
      const logger = pino({ level: 'silent' });
      // The first migrates the schema; the second starts on it.
      running.push(await startServer(config, { logger }));
      running.push(await startServer(config, { logger }));
    }, 60_000);
    afterAll(async () => {
      for (const s of running) await s.close();
      await store?.destroy();
      await redis?.stop();
    });

    it("a DELETE on one process closes the player's socket on the other (4003) and its caches forget the sessions", async () => {
      const [a, b] = running;
      const t = await createTenant(a.url, ADMIN_TOKEN);
      const token = await deviceToken(a.url, t.token, 'roaming');
      const started = await call(a.url, 'POST', '/client/v1/sessions', { token, json: {} });
      const sessionId = String(started.body.sessionId);
      const events = Array.from({ length: 30 }, (_, i) => ({
        id: `e${i}`,
        eventType: 'Custom',
        timestamp: Date.now() - 1000,
        custom01: 'x',
      }));
      expect(
        (await call(a.url, 'POST', `/sessions/${sessionId}/Events`, { token, json: { events } })).status,
      ).toBe(200);
      const socket = await TestSocket.open(b.url, sessionId, token);
      await socket.ofType('welcome');
      // b remembers the live session (its command path reads no row).
      const command = (s: RunningServer) =>
        call(s.url, 'POST', `/sessions/${sessionId}/realtime/commands`, {
          token: t.token,
          json: { name: 'text', data: 'hi' },
        });
      expect((await command(b)).status).toBe(202);

      const erased = await call(a.url, 'DELETE', '/players/roaming', { token: t.token });
      expect(erased.status).toBe(202);
      expect((await socket.waitClosed()).code).toBe(4003);
      await waitFor(async () => (await command(b)).status === 404, 2000, 'b to forget the session');
      expect((await call(b.url, 'POST', '/client/v1/sessions', { token, json: {} })).status).toBe(401);

      const db = a.services.storage.db;
      await waitFor(
        async () =>
          (
            await db
              .selectFrom('player_erasures')
              .select('state')
              .where('player_id', '=', 'roaming')
              .executeTakeFirst()
          )?.state === 'done',
        20_000,
        'the erasure to complete',
      );
      const row = await db
        .selectFrom('player_erasures')
        .selectAll()
        .where('player_id', '=', 'roaming')
        .executeTakeFirstOrThrow();
      // Each row was counted once: the lease let one process at a time work on the erasure.
      expect(JSON.parse(String(row.counts))).toMatchObject({ sessions: 1, events: 30, commands: 1 });
      const left = await db
        .selectFrom('events')
        .select(sql<number>`count(*)`.as('n'))
        .where('session_id', '=', sessionId)
        .executeTakeFirstOrThrow();
      expect(Number(left.n)).toBe(0);
    }, 60_000);
  });

import { CompiledQuery, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EVENT_SWEEP_BATCH,
  expiredEventIdsQuery,
  type SweepResult,
} from '../../src/modules/events/retention.ts';
import { startOrderQuery } from '../../src/modules/sessions/store.ts';
import { accessToken, call, createTenant, deviceToken, type TenantFixture } from '../helpers/api.ts';
import { cli } from '../helpers/process.ts';
import { DAY, LONG_CLOCK_ENV } from '../helpers/rewards.ts';
import { backends, manualClock, startTestServer, type TestServer } from '../helpers/server.ts';

type Json = Record<string, unknown>;
const HOUR = 3_600_000;

/**
 * Event retention through the real server: events go in over HTTP, the server's clock moves, the
 * `events.retention` job runs as the scheduler runs it, and what is left is read back over HTTP.
 * Default retention 2 days; tenant B keeps 5 days, tenant C forever (both set with PATCH).
 */
describe.each(backends)('event retention (%s)', (backend) => {
  const T0 = Math.floor(Date.now() / DAY) * DAY;
  const clock = manualClock(T0);
  let server: TestServer;
  let base: string;
  const tenants: Record<'a' | 'b' | 'c', TenantFixture & { device: string }> = {} as never;

  beforeAll(async () => {
    server = await startTestServer(
      backend,
      {
        ...LONG_CLOCK_ENV,
        LIVELINE_DEVICE_TOKEN_TTL_S: String(30 * 86400),
        LIVELINE_EVENT_RETENTION_DAYS: '2',
        LIVELINE_RATE_LIMIT_TENANT_RPS: '0',
        LIVELINE_RATE_LIMIT_DEVICE_RPS: '0',
      },
      { clock },
    );
    base = server.url;
    for (const name of ['a', 'b', 'c'] as const) {
      const t = await createTenant(base, server.adminToken, { name: `tenant ${name}` });
      tenants[name] = { ...t, device: await deviceToken(base, t.token, `player-${name}`) };
    }
  });
  afterAll(async () => server?.close());

  const admin = (method: string, path: string, json?: unknown) =>
    call<Json>(base, method, path, { token: server.adminToken, json });
  const sweep = async () => {
    const job = server.services.jobs.find((j) => j.name === 'events.retention');
    if (!job) throw new Error('no events.retention job');
    return (await job.run()) as SweepResult;
  };
  /** Re-mints the tenants' access tokens (1-day TTL) after the clock moved. */
  const refreshTokens = async () => {
    for (const t of Object.values(tenants)) t.token = await accessToken(base, t.clientId, t.clientSecret);
  };
  async function newSession(t: TenantFixture & { device: string }) {
    const res = await call(base, 'POST', '/client/v1/sessions', { token: t.device, json: {} });
    expect(res.status).toBe(201);
    return String(res.body.sessionId);
  }
  async function ingest(t: TenantFixture & { device: string }, sessionId: string, n: number, prefix: string) {
    for (let start = 0; start < n; start += 1000) {
      const events = Array.from({ length: Math.min(1000, n - start) }, (_, i) => ({
        id: `${prefix}-${String(start + i).padStart(6, '0')}`,
        eventType: 'Custom',
        timestamp: clock.now(),
        custom01: 'x',
      }));
      const res = await call(base, 'POST', `/sessions/${sessionId}/Events`, {
        token: t.device,
        json: { events },
      });
      expect(res.status, res.text).toBe(200);
    }
  }
  const end = (t: TenantFixture & { device: string }, sessionId: string) =>
    call(base, 'POST', `/client/v1/sessions/${sessionId}/end`, { token: t.device, json: {} });
  const eventIds = async (t: TenantFixture, sessionId: string) => {
    const res = await call<{ events: { id: string }[] }>(base, 'GET', `/sessions/${sessionId}`, {
      token: t.token,
    });
    return res.status === 200 ? res.body.events.map((e) => e.id) : res.status;
  };
  const rowsOf = async (table: 'commands' | 'session_streams' | 'sessions', sessionId: string) =>
    Number(
      (
        await server.services.storage.db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('session_id', '=', sessionId)
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('the operator sets a tenant retention; the tenant object shows it; bad values are 400, unknown tenants 404', async () => {
    const fresh = await admin('GET', `/admin/v1/tenants/${tenants.a.tenantId}`);
    expect(fresh.body.eventRetentionDays).toBeNull();

    const b = await admin('PATCH', `/admin/v1/tenants/${tenants.b.tenantId}`, { eventRetentionDays: 5 });
    expect(b.status, b.text).toBe(200);
    expect(b.body).toMatchObject({ tenantId: tenants.b.tenantId, eventRetentionDays: 5 });
    const c = await admin('PATCH', `/admin/v1/tenants/${tenants.c.tenantId}`, { eventRetentionDays: 0 });
    expect(c.body.eventRetentionDays).toBe(0);
    expect((await admin('GET', `/admin/v1/tenants/${tenants.b.tenantId}`)).body.eventRetentionDays).toBe(5);
    const list = await call<{ tenants: Json[] }>(base, 'GET', '/admin/v1/tenants', {
      token: server.adminToken,
    });
    expect(list.body.tenants.find((t) => t.tenantId === tenants.c.tenantId)?.eventRetentionDays).toBe(0);

    for (const bad of [
      { eventRetentionDays: -1 },
      { eventRetentionDays: 36501 },
      { eventRetentionDays: 1.5 },
      { eventRetentionDays: '3' },
      {},
      { eventRetentionDays: 3, name: 'x' },
    ]) {
      const res = await admin('PATCH', `/admin/v1/tenants/${tenants.a.tenantId}`, bad);
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.headers.get('content-type')).toContain('application/problem+json');
    }
    expect((await admin('PATCH', '/admin/v1/tenants/not-a-uuid', { eventRetentionDays: 1 })).status).toBe(
      400,
    );
    const unknown = await admin('PATCH', '/admin/v1/tenants/01890000-0000-7000-8000-000000000000', {
      eventRetentionDays: 1,
    });
    expect(unknown.status).toBe(404);
    const asTenant = await call(base, 'PATCH', `/admin/v1/tenants/${tenants.a.tenantId}`, {
      token: tenants.a.token,
      json: { eventRetentionDays: 1 },
    });
    expect([401, 403]).toContain(asTenant.status);
    expect(
      (await admin('GET', `/admin/v1/tenants/${tenants.a.tenantId}`)).body.eventRetentionDays,
    ).toBeNull();
  });

  it('deletes exactly the events received before each tenant cutoff, in batches, and ended sessions left empty', {
    timeout: 60_000,
  }, async () => {
    // Day 0: A's ended session with 2,500 events and a command, A's live session with 5; B and C one ended session each.
    const aOld = await newSession(tenants.a);
    await ingest(tenants.a, aOld, 2500, 'old');
    const cmd = await call(base, 'POST', `/sessions/${aOld}/realtime/commands`, {
      token: tenants.a.token,
      json: { name: 'text', data: 'hi' },
    });
    expect(cmd.status, cmd.text).toBe(202);
    expect(await rowsOf('commands', aOld)).toBe(1);
    expect((await end(tenants.a, aOld)).status).toBe(200);
    const aLive = await newSession(tenants.a);
    await ingest(tenants.a, aLive, 5, 'day0');
    const bOld = await newSession(tenants.b);
    await ingest(tenants.b, bOld, 10, 'b');
    await end(tenants.b, bOld);
    const cOld = await newSession(tenants.c);
    await ingest(tenants.c, cOld, 10, 'c');
    await end(tenants.c, cOld);

    // Day 1 + 1 h: more events in A's live session, and a new ended session of A.
    clock.set(T0 + DAY + HOUR);
    await ingest(tenants.a, aLive, 5, 'day1');
    const aRecent = await newSession(tenants.a);
    await ingest(tenants.a, aRecent, 3, 'recent');
    await end(tenants.a, aRecent);

    // Day 3: A's cutoff is day 1 (2 days); B (5 days) and C (forever) keep everything.
    clock.set(T0 + 3 * DAY);
    await refreshTokens();
    const result = await sweep();
    expect(result).toMatchObject({ events: 2506, sessions: 1, batches: 4 });
    // 2,500 events and the server's SessionEnd: batches of 1,000, 1,000 and 501; the live session's 5 in one more.
    expect(EVENT_SWEEP_BATCH).toBe(1000);

    expect(await eventIds(tenants.a, aOld)).toBe(404);
    expect(await rowsOf('sessions', aOld)).toBe(0);
    expect(await rowsOf('commands', aOld)).toBe(0);
    expect(await rowsOf('session_streams', aOld)).toBe(0);
    expect(await eventIds(tenants.a, aLive)).toEqual([
      'day1-000000',
      'day1-000001',
      'day1-000002',
      'day1-000003',
      'day1-000004',
    ]);
    expect(await eventIds(tenants.a, aRecent)).toHaveLength(4); // 3 and SessionEnd
    expect(await eventIds(tenants.b, bOld)).toHaveLength(11);
    expect(await eventIds(tenants.c, cOld)).toHaveLength(11);

    const metrics = await call(base, 'GET', '/metrics', { token: server.adminToken });
    expect(metrics.text).toMatch(/liveline_retention_deleted_total\{kind="event"\} 2506/);
    expect(metrics.text).toMatch(/liveline_retention_deleted_total\{kind="session"\} 1/);

    // A second sweep finds nothing more.
    expect(await sweep()).toMatchObject({ events: 0, sessions: 0, batches: 0 });

    // Day 6: B's cutoff (5 days) passes its day-0 session; C still keeps forever.
    clock.set(T0 + 6 * DAY);
    await refreshTokens();
    expect(await sweep()).toMatchObject({ events: 5 + 4 + 11, sessions: 2 });
    expect(await eventIds(tenants.b, bOld)).toBe(404);
    expect(await eventIds(tenants.c, cOld)).toHaveLength(11);
    // A's live session lost its day-1 events but stays: it has not ended.
    expect(await eventIds(tenants.a, aLive)).toEqual([]);
    expect(await eventIds(tenants.a, aRecent)).toBe(404);

    // C back to the server's default (null), with the CLI: its day-0 events go at the next sweep.
    const conn = ['--url', base, '--token', server.adminToken];
    const reset = await cli([
      'admin',
      'tenant',
      'retention',
      tenants.c.tenantId,
      'default',
      '--json',
      ...conn,
    ]);
    expect(reset.code, reset.stderr).toBe(0);
    expect(JSON.parse(reset.stdout)).toMatchObject({
      tenantId: tenants.c.tenantId,
      eventRetentionDays: null,
    });
    const bad = await cli(['admin', 'tenant', 'retention', tenants.c.tenantId, 'forever', ...conn]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('validation_failed');
    expect(await sweep()).toMatchObject({ events: 11, sessions: 1 });
    expect(await eventIds(tenants.c, cOld)).toBe(404);
  });

  it('the sweep and export read their index ranges in order (EXPLAIN)', async () => {
    const db = server.services.storage.db;
    await seedForPlans(server);
    const queries = [
      {
        q: startOrderQuery(
          db,
          'plan-t1',
          { before: T0 },
          { startedAt: 5, sessionId: 'plan-s5' },
          200,
        ).compile(),
        index: 'sessions_tenant_started',
      },
      {
        q: startOrderQuery(
          db,
          'plan-t1',
          { since: 0 },
          { startedAt: 5, sessionId: 'plan-s5' },
          100,
        ).compile(),
        index: 'sessions_tenant_started',
      },
      {
        q: expiredEventIdsQuery(db, 'plan-s1', T0, 'e5', 1000).compile(),
        index: backend === 'sqlite' ? 'sqlite_autoindex_events_1' : 'events_pk',
      },
    ];
    for (const { q, index } of queries) {
      const plan = await explain(server, q);
      if (process.env.SHOW_PLANS) console.log(plan);
      expect(plan, q.sql).toContain(index);
      expect(plan, q.sql).not.toMatch(/TEMP B-TREE|Seq Scan|"Node Type": "Sort"|\bSCAN (sessions|events)\b/);
    }
  });
});

/** A few thousand rows over several tenants, so a plan that scans or sorts would show. */
async function seedForPlans(server: TestServer) {
  const db = server.services.storage.db;
  const rec = (n: number) =>
    `with recursive n(i) as (select 0 union all select i + 1 from n where i < ${n - 1}) `;
  await sql
    .raw(`${rec(10)}insert into tenants (tenant_id, name, created_at) select 'plan-t' || i, 'plan', i from n`)
    .execute(db);
  await sql
    .raw(
      `${rec(5000)}insert into sessions (session_id, tenant_id, player_id, tenant_cohort_id, device, status, started_at, last_seen_at) ` +
        `select 'plan-s' || i, 'plan-t' || (i % 10), 'p', null, '{}', 'ended', i, i from n`,
    )
    .execute(db);
  await sql
    .raw(
      `${rec(20000)}insert into events (session_id, event_id, event_type, timestamp, received_at, body) ` +
        `select 'plan-s' || (i % 50), 'e' || i, 'Custom', i, i, '{}' from n`,
    )
    .execute(db);
  await sql`analyze`.execute(db);
}

/** The plan as text: SQLite's EXPLAIN QUERY PLAN details, PostgreSQL's JSON plan with scans the planner would avoid at scale off. */
async function explain(server: TestServer, q: CompiledQuery): Promise<string> {
  const { storage } = server.services;
  if (storage.dialect === 'sqlite') {
    const { rows } = await storage.db.executeQuery<{ detail: string }>(
      CompiledQuery.raw(`explain query plan ${q.sql}`, [...q.parameters]),
    );
    return rows.map((r) => r.detail).join('\n');
  }
  // Thousands of rows, not millions: as in query-plans.test.ts, sequential and bitmap scans are off
  // for this transaction, so the plan shows what the planner does once reading the table is out of the question.
  return storage.db.transaction().execute(async (trx) => {
    await sql`set local enable_seqscan = off`.execute(trx);
    await sql`set local enable_bitmapscan = off`.execute(trx);
    const { rows } = await trx.executeQuery<Json>(
      CompiledQuery.raw(`explain (format json) ${q.sql}`, [...q.parameters]),
    );
    return JSON.stringify(rows[0], null, 1);
  });
}

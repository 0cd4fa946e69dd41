import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COUNT_BOUND } from '../../src/storage/index.ts';
import { type Answer, call, createTenant, type TenantFixture } from '../helpers/api.ts';
import { backends, startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * Lists at any depth (docs/api.md, "Lists"): a cursor (`after` = a page's `nextCursor`) walks a
 * list in its order with nothing skipped or repeated, ties included; the count stops at a bound
 * (`totalCountExact`) while `hasMore` stays exact; a cursor that is not the list's is a 400.
 * Sessions are seeded through the store (10,000 of them through HTTP would take minutes), read
 * through HTTP.
 */

interface Envelope {
  sessions: { sessionId: string; startedAt: number; lastSeenAt: number }[];
  page: number | null;
  pageSize: number;
  totalCount: number;
  totalCountExact: boolean;
  totalPages: number;
  hasMore: boolean;
  nextCursor: string | null;
}

describe.each(backends)('list cursors and bounded counts (%s)', (backend) => {
  let server: TestServer;
  let tenant: TenantFixture;
  const now = Date.now();
  /** The cohort's sessions in list order: startedAt desc, then sessionId (byte order). */
  let expected: string[] = [];
  const COHORT = 'class-1';
  const BIG = 'everyone';

  async function seed(cohort: string, n: number, startedAt: (i: number) => number) {
    const rows = Array.from({ length: n }, (_, i) => ({
      session_id: randomUUID(),
      tenant_id: tenant.tenantId,
      player_id: `p${i}`,
      tenant_cohort_id: cohort,
      device: '{}',
      status: 'live',
      started_at: startedAt(i),
      last_seen_at: now - (i % 7) * 1000,
      ended_at: null,
      end_reason: null,
    }));
    const db = server.services.storage.db;
    for (let i = 0; i < rows.length; i += 500) {
      await db
        .insertInto('sessions')
        .values(rows.slice(i, i + 500))
        .execute();
    }
    return rows;
  }

  beforeAll(async () => {
    server = await startTestServer(backend);
    tenant = await createTenant(server.url, server.adminToken);
    // 23 sessions on 4 distinct start times: most pages end inside a run of ties.
    const rows = await seed(COHORT, 23, (i) => now - (i % 4) * 60_000);
    expected = rows
      .sort(
        (a, b) =>
          b.started_at - a.started_at || Buffer.compare(Buffer.from(a.session_id), Buffer.from(b.session_id)),
      )
      .map((r) => r.session_id);
    await seed(BIG, COUNT_BOUND + 20, (i) => now - i);
  }, 120_000);

  afterAll(async () => {
    await server?.close();
  });

  const get = (path: string) => call<Envelope>(server.url, 'GET', path, { token: tenant.token });

  it('walks a list by cursor, ties included, nothing skipped or repeated', async () => {
    const first = await get(`/cohorts/${COHORT}/sessions/page/1?pageSize=5`);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      page: 1,
      pageSize: 5,
      totalCount: 23,
      totalCountExact: true,
      hasMore: true,
    });
    const seen = first.body.sessions.map((s) => s.sessionId);
    let cursor = first.body.nextCursor;
    let pages = 1;
    while (cursor) {
      const next: Answer<Envelope> = await get(
        `/cohorts/${COHORT}/sessions/page/1?pageSize=5&after=${cursor}`,
      );
      expect(next.status).toBe(200);
      // A page read by cursor has no number; the count is the list's.
      expect(next.body).toMatchObject({ page: null, totalCount: 23, totalCountExact: true });
      seen.push(...next.body.sessions.map((s) => s.sessionId));
      expect(next.body.hasMore).toBe(next.body.nextCursor !== null);
      cursor = next.body.nextCursor;
      pages++;
    }
    expect(pages).toBe(5);
    expect(seen).toEqual(expected);
    // The page numbers give the same order.
    const all = await get(`/cohorts/${COHORT}/sessions`);
    expect(all.body.sessions.map((s) => s.sessionId)).toEqual(expected);
    expect(all.body.nextCursor).toBeNull();
  });

  it('takes a cursor on the unpaginated form too, and on the active lists', async () => {
    const first = await get(`/cohorts/${COHORT}/sessions/page/2?pageSize=10`);
    const rest = await get(`/cohorts/${COHORT}/sessions?after=${first.body.nextCursor}`);
    expect(rest.body.sessions.map((s) => s.sessionId)).toEqual(expected.slice(20));
    expect(rest.body.hasMore).toBe(false);

    const activeAll = await get(`/cohorts/${COHORT}/active`);
    const order = activeAll.body.sessions.map((s) => s.sessionId);
    expect(order).toHaveLength(23);
    const activeFirst = await get(`/cohorts/${COHORT}/active/page/1?pageSize=7`);
    const activeRest = await get(`/cohorts/${COHORT}/active?after=${activeFirst.body.nextCursor}`);
    expect([...activeFirst.body.sessions, ...activeRest.body.sessions].map((s) => s.sessionId)).toEqual(
      order,
    );
  });

  it('counts to a bound, keeps hasMore exact, and reaches any depth by cursor', async () => {
    const first = await get(`/cohorts/${BIG}/sessions/page/1?pageSize=50`);
    expect(first.body).toMatchObject({ totalCount: COUNT_BOUND, totalCountExact: false, hasMore: true });
    // A page deeper than the bound is counted to its end: the count is a floor that covers it.
    const deeper = await get(`/cohorts/${BIG}/sessions/page/1001?pageSize=10`);
    expect(deeper.body.sessions).toHaveLength(10);
    expect(deeper.body).toMatchObject({ totalCount: 1001 * 10, totalCountExact: false, hasMore: true });
    const past = await get(`/cohorts/${BIG}/sessions/page/1003?pageSize=10`);
    expect(past.body).toMatchObject({
      sessions: [],
      totalCount: COUNT_BOUND + 20,
      totalCountExact: true,
      hasMore: false,
    });
    const deep = await get(`/cohorts/${BIG}/sessions/page/201?pageSize=50`);
    expect(deep.body.sessions).toHaveLength(20);
    expect(deep.body).toMatchObject({ totalCountExact: true, totalCount: COUNT_BOUND + 20, hasMore: false });
    const last = await get(`/cohorts/${BIG}/sessions/page/200?pageSize=50`);
    expect(last.body).toMatchObject({ hasMore: true });
    const after = await get(`/cohorts/${BIG}/sessions/page/1?pageSize=50&after=${last.body.nextCursor}`);
    expect(after.body.sessions.map((s) => s.sessionId)).toEqual(deep.body.sessions.map((s) => s.sessionId));
    expect(after.body).toMatchObject({ hasMore: false, nextCursor: null });
  });

  it('refuses a cursor that is not one of the list’s', async () => {
    const active = await get(`/cohorts/${COHORT}/active/page/1?pageSize=5`);
    // An active list's cursor (lastSeenAt) on a cohort list (startedAt).
    const wrong = await get(`/cohorts/${COHORT}/sessions/page/1?after=${active.body.nextCursor}`);
    expect(wrong.status).toBe(400);
    expect(wrong.body).toMatchObject({ code: 'validation_failed', errors: [{ path: 'after' }] });
    for (const bad of [
      'nope',
      Buffer.from('[1,2]').toString('base64url'),
      Buffer.from('{"a":1}').toString('base64url'),
    ]) {
      const answer = await get(`/cohorts/${COHORT}/sessions?after=${bad}`);
      expect(answer.status).toBe(400);
    }
    expect((await get(`/cohorts/${COHORT}/sessions?after=a%20b`)).status).toBe(400);
  });
});

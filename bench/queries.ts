// Session queries at 10k, 100k and 1M sessions (issue 12): each list read through HTTP, beside the
// same store query run straight on the store from this process (the limit), and session creation/s
// through HTTP beside raw inserts of the same rows. The store is seeded directly (a million sessions
// through HTTP would take longer than the measurement), then ANALYZEd, then read by one keep-alive
// connection, request after request, after a warm-up pass over every case.
//
//   node --import tsx bench/queries.ts [--sizes 10000,100000,1000000] [--requests 300]
//   BENCH_BACKEND=postgres DATABASE_URL=postgres://root@127.0.0.1:5432/test node --import tsx bench/queries.ts
//
// Shape of the data: the newest 2,000 sessions are live (seen within the last 4 minutes), the rest
// ended; cohorts hold 1,000 consecutive sessions each (a class, a study batch), so the newest two are
// live. The tenant's history grows with the size; its live population and a cohort's size do not.
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { Pool } from 'undici';
import {
  insertSession,
  insertSessions,
  listSessions,
  type SessionFilter,
  sessionRow,
} from '../packages/server/src/modules/sessions/store.ts';
import { openStorage, type Storage } from '../packages/server/src/storage/index.ts';
import { createTenant, deviceToken } from '../packages/server/test/helpers/api.ts';
import { percentile, startBenchServer } from './lib.ts';

const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '10000,100000,1000000' },
    requests: { type: 'string', default: '300' },
    seconds: { type: 'string', default: '5' },
  },
});
const backend = (process.env.BENCH_BACKEND ?? 'sqlite') as 'sqlite' | 'postgres';
const sizes = values.sizes.split(',').map(Number);
const REQUESTS = Number(values.requests);
const CREATE_SECONDS = Number(values.seconds);
const LIVE = 2_000;
const COHORT_SIZE = 1_000;
const EVENTS = 10_000;
/** Requests of each case in the warm-up pass before the measurements. */
const WARM_UP = 50;

interface Seeded {
  tenantId: string;
  now: number;
  /** A live session in the middle of the active list: the cursor of a deep page. */
  middle: { sessionId: string; lastSeenAt: number };
  eventsSession: string;
}

async function seed(storage: Storage, tenantId: string, n: number): Promise<Seeded> {
  const db = storage.db;
  const now = Date.now();
  const chunk = 500;
  let middle: Seeded['middle'] | undefined;
  for (let start = 0; start < n; start += chunk * 20) {
    await db.transaction().execute(async (trx) => {
      for (let from = start; from < Math.min(n, start + chunk * 20); from += chunk) {
        const rows = [];
        for (let i = from; i < Math.min(n, from + chunk); i++) {
          const live = i >= n - LIVE;
          const sessionId = randomUUID();
          const lastSeenAt = live ? now - ((i * 7919) % 240_000) : now - (n - i) * 2_000;
          if (i === n - LIVE / 2) middle = { sessionId, lastSeenAt };
          rows.push({
            session_id: sessionId,
            tenant_id: tenantId,
            player_id: `p${i}`,
            tenant_cohort_id: `c${Math.floor(i / COHORT_SIZE)}`,
            device: '{"model":"Quest 3"}',
            status: live ? 'live' : 'ended',
            started_at: now - (n - i) * 2_000 - 60_000,
            last_seen_at: lastSeenAt,
            ended_at: live ? null : now - (n - i) * 2_000,
            end_reason: live ? null : 'device',
          });
        }
        await trx.insertInto('sessions').values(rows).execute();
      }
    });
  }
  // One session with 10,000 events.
  const eventsSession = (
    await insertSession(db, { tenantId, playerId: 'events', tenantCohortId: null, device: {}, now })
  ).session_id;
  for (let from = 0; from < EVENTS; from += chunk) {
    const rows = Array.from({ length: chunk }, (_, k) => {
      const i = from + k;
      const id = `e${String(i).padStart(6, '0')}`;
      const body = {
        id,
        eventType: 'Custom',
        timestamp: now - EVENTS + i,
        sessionId: eventsSession,
        custom01: 'x'.repeat(40),
      };
      return {
        session_id: eventsSession,
        event_id: id,
        event_type: 'Custom',
        timestamp: body.timestamp,
        streaming_session_id: null,
        received_at: now,
        body: JSON.stringify(body),
      };
    });
    await db.insertInto('events').values(rows).execute();
  }
  // PostgreSQL: VACUUM as well, as autovacuum would have long since on a table that grew to this size
  // (the visibility map lets index-only scans skip the heap); left to autovacuum, it starts on the
  // freshly seeded table during the first query's measurement.
  if (backend === 'postgres') await sql`vacuum (analyze) sessions, events`.execute(db);
  else await sql`analyze`.execute(db);
  if (!middle) throw new Error('no middle session');
  return { tenantId, now, middle, eventsSession };
}

function cursor(column: string, value: number, id: string) {
  return Buffer.from(JSON.stringify([column, value, id])).toString('base64url');
}

async function timeHttp(pool: Pool, token: string, path: () => string, requests = REQUESTS) {
  const times: number[] = [];
  let bytes = 0;
  for (let i = 0; i < requests + 20; i++) {
    const started = performance.now();
    const res = await pool.request({
      method: 'GET',
      path: path(),
      headers: { authorization: `Bearer ${token}` },
    });
    const body = await res.body.arrayBuffer(); // to the last byte
    if (res.statusCode !== 200)
      throw new Error(`${path()}: ${res.statusCode} ${Buffer.from(body).toString()}`);
    if (i >= 20) times.push(performance.now() - started); // the first 20 warm up
    bytes = body.byteLength;
  }
  return { ...stats(times), bytes };
}

async function timeStore(run: () => Promise<unknown>) {
  const times: number[] = [];
  for (let i = 0; i < REQUESTS + 20; i++) {
    const started = performance.now();
    await run();
    if (i >= 20) times.push(performance.now() - started);
  }
  return stats(times);
}

function stats(times: number[]) {
  const sorted = times.sort((a, b) => a - b);
  const round = (x: number) => Math.round(x * 100) / 100;
  return { p50: round(percentile(sorted, 50)), p99: round(percentile(sorted, 99)) };
}

/** Sessions started through HTTP by 32 keep-alive clients for a few seconds, then raw inserts of the same rows. */
async function creation(url: string, token: string, storage: Storage, tenantId: string) {
  const clients = 32;
  const tokens = await Promise.all(
    Array.from({ length: clients }, (_, i) => deviceToken(url, token, `creator-${i}`)),
  );
  const pool = new Pool(url, { connections: clients, pipelining: 1 });
  let created = 0;
  const until = Date.now() + CREATE_SECONDS * 1000;
  const started = performance.now();
  await Promise.all(
    tokens.map(async (t) => {
      while (Date.now() < until) {
        const res = await pool.request({
          method: 'POST',
          path: '/client/v1/sessions',
          headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' },
          body: '{"tenantCohortId":"created","device":{"model":"Quest 3"}}',
        });
        await res.body.arrayBuffer();
        if (res.statusCode !== 201) throw new Error(`session start: ${res.statusCode}`);
        created++;
      }
    }),
  );
  const httpRate = created / ((performance.now() - started) / 1000);
  await pool.close();
  // The store's limit: the same rows inserted 100 to a statement and transaction, back to back.
  let raw = 0;
  const rawUntil = Date.now() + CREATE_SECONDS * 1000;
  const rawStarted = performance.now();
  while (Date.now() < rawUntil) {
    const rows = Array.from({ length: 100 }, (_, i) =>
      sessionRow({
        tenantId,
        playerId: `raw-${i}`,
        tenantCohortId: 'created',
        device: { model: 'Quest 3' },
        now: Date.now(),
      }),
    );
    await insertSessions(storage.db, rows);
    raw += rows.length;
  }
  const rawRate = raw / ((performance.now() - rawStarted) / 1000);
  return {
    httpPerS: Math.round(httpRate),
    rawPerS: Math.round(rawRate),
    ratio: Math.round((httpRate / rawRate) * 100) / 100,
  };
}

for (const size of sizes) {
  const server = await startBenchServer(backend);
  const storage = await openStorage({
    databaseUrl: backend === 'postgres' ? (process.env.DATABASE_URL ?? null) : null,
    databaseSchema: server.schema ?? 'public',
    dataDir: server.dataDir,
    sqliteSynchronous: 'NORMAL',
  });
  try {
    const tenant = await createTenant(server.url, server.adminToken);
    const seedStarted = performance.now();
    const seeded = await seed(storage, tenant.tenantId, size);
    const seedSeconds = Math.round((performance.now() - seedStarted) / 100) / 10;
    const pool = new Pool(server.url, { connections: 1 });
    const newestCohort = `c${Math.floor((size - 1) / COHORT_SIZE)}`;
    const cohorts = Math.ceil(size / COHORT_SIZE);
    let k = 0;
    const anyCohort = () => `c${(k++ * 7) % cohorts}`;
    const since = seeded.now - 5 * 60_000; // the store query's filter for "active within 5 minutes"
    const active: SessionFilter = { tenantId: tenant.tenantId, activeSince: since };
    const deep = cursor('last_seen_at', seeded.middle.lastSeenAt, seeded.middle.sessionId);
    const cases: {
      name: string;
      path: () => string;
      store?: () => Promise<unknown>;
      limit?: number;
    }[] = [
      {
        name: 'active, page of 50',
        path: () => '/sessions/active/page/1?pageSize=50',
        store: () => listSessions(storage.db, active, { page: 1, pageSize: 50 }),
        limit: 10,
      },
      {
        name: 'cohort, page of 50',
        path: () => `/cohorts/${anyCohort()}/sessions/page/1?pageSize=50`,
        store: () =>
          listSessions(
            storage.db,
            { tenantId: tenant.tenantId, tenantCohortId: 'c0' },
            { page: 1, pageSize: 50 },
          ),
        limit: 10,
      },
      {
        name: 'cohort active, page of 50',
        path: () => `/cohorts/${newestCohort}/active/page/1?pageSize=50`,
        store: () =>
          listSessions(
            storage.db,
            { tenantId: tenant.tenantId, tenantCohortId: newestCohort, activeSince: since },
            { page: 1, pageSize: 50 },
          ),
        limit: 10,
      },
      {
        name: 'active, 1,000 rows',
        path: () => '/sessions/active',
        store: () => listSessions(storage.db, active, { page: 1, pageSize: 1000 }),
        limit: 30,
      },
      {
        name: 'active, cursor page of 50 at row 1,000',
        path: () => `/sessions/active/page/1?pageSize=50&after=${deep}`,
        store: () => listSessions(storage.db, active, { page: 1, pageSize: 50, after: deep }),
        limit: 10,
      },
      {
        name: 'active, page 20 of 50 by number (for comparison)',
        path: () => '/sessions/active/page/20?pageSize=50',
        store: () => listSessions(storage.db, active, { page: 20, pageSize: 50 }),
      },
      {
        name: 'one session with 10,000 events',
        path: () => `/sessions/${seeded.eventsSession}`,
        limit: 50,
      },
    ];
    // A warm-up pass over every case before any is measured: the server has just started and the
    // store has just been seeded, and whichever query came first paid for both (at 1M sessions on
    // PostgreSQL the first case's p99 was 11.7 ms, the same case measured again at the end 6.6 ms).
    for (const c of cases) await timeHttp(pool, tenant.token, c.path, WARM_UP);
    for (const c of cases) {
      const http = await timeHttp(pool, tenant.token, c.path);
      const store = c.store ? await timeStore(c.store) : null;
      console.log(
        JSON.stringify({
          bench: 'queries',
          backend,
          sessions: size,
          query: c.name,
          httpP50Ms: http.p50,
          httpP99Ms: http.p99,
          bytes: http.bytes,
          ...(store
            ? {
                storeP50Ms: store.p50,
                storeP99Ms: store.p99,
                p99VsStore: Math.round((http.p99 / store.p99) * 10) / 10,
              }
            : {}),
          ...(c.limit ? { targetP99Ms: c.limit, met: http.p99 <= c.limit } : {}),
        }),
      );
    }
    await pool.close();
    if (size === sizes[0]) {
      const created = await creation(server.url, tenant.token, storage, tenant.tenantId);
      console.log(
        JSON.stringify({ bench: 'session-creation', backend, sessions: size, ...created, targetPerS: 5000 }),
      );
    }
    console.log(JSON.stringify({ bench: 'queries-seed', backend, sessions: size, seedSeconds }));
  } finally {
    await storage.close();
    await server.stop();
  }
}

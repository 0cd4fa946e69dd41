import {
  CompiledQuery as Compiled,
  type CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryResult,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  sql,
} from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as auth from '../../src/modules/auth/store.ts';
import * as commands from '../../src/modules/commands/store.ts';
import * as events from '../../src/modules/events/store.ts';
import * as rewards from '../../src/modules/rewards/store.ts';
import * as sessions from '../../src/modules/sessions/store.ts';
import * as streams from '../../src/modules/streams/store.ts';
import * as webhooks from '../../src/modules/webhooks/store.ts';
import type { Database, Storage } from '../../src/storage/index.ts';
import { type Backend, backends, freshStore, openFreshStore } from '../helpers/server.ts';

/**
 * Every list reads one index range in the list's order (migration 008, storage/README.md "List
 * indexes"): the store's own queries — captured as Kysely compiles them, never copied by hand — are
 * explained on SQLite (`EXPLAIN QUERY PLAN`) and PostgreSQL (`EXPLAIN (FORMAT JSON)`) over a seeded,
 * ANALYZEd store, and each plan must search the expected index with every equality of the filter in
 * its condition, and must neither scan the table nor sort (no temp B-tree, no Sort node). Without
 * 008's indexes these plans sort or filter row by row, and this test fails.
 */

// --- capturing the SQL a store function runs ---------------------------------------------------------

/** A Kysely whose driver records each compiled query instead of running it (rows: none, counts: 0). */
function capturing(backend: Backend) {
  const queries: CompiledQuery[] = [];
  const connection: DatabaseConnection = {
    async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
      queries.push(query);
      return { rows: (/\bcount\(/i.test(query.sql) ? [{ n: 0 }] : []) as R[] };
    },
    // biome-ignore lint/correctness/useYield: never streamed here
    async *streamQuery() {
      throw new Error('not streamed');
    },
  };
  const driver: Driver = {
    async init() {},
    async acquireConnection() {
      return connection;
    },
    async beginTransaction() {},
    async commitTransaction() {},
    async rollbackTransaction() {},
    async releaseConnection() {},
    async destroy() {},
  };
  const dialect: Dialect =
    backend === 'sqlite'
      ? {
          createAdapter: () => new SqliteAdapter(),
          createDriver: () => driver,
          createIntrospector: (db) => new SqliteIntrospector(db),
          createQueryCompiler: () => new SqliteQueryCompiler(),
        }
      : {
          createAdapter: () => new PostgresAdapter(),
          createDriver: () => driver,
          createIntrospector: (db) => new PostgresIntrospector(db),
          createQueryCompiler: () => new PostgresQueryCompiler(),
        };
  return { db: new Kysely<Database>({ dialect }), queries };
}

/** The statements `run` sends, in order. */
async function sqlOf(backend: Backend, run: (db: Kysely<Database>) => Promise<unknown>) {
  const { db, queries } = capturing(backend);
  await run(db);
  return queries;
}

// --- the data: enough rows, spread over tenants, cohorts, sessions, that a scan would show ------------

const T0 = 1_700_000_000_000;
const SESSIONS = 20_000;

/** `insert into <table> (...) select ... from 0..n-1`: a recursive CTE, the same SQL on both stores. */
function seed(db: Kysely<Database>, table: string, n: number, columns: Record<string, string>) {
  const names = Object.keys(columns).join(', ');
  const values = Object.values(columns).join(', ');
  return sql
    .raw(
      `with recursive n(i) as (select 0 union all select i + 1 from n where i < ${n - 1}) ` +
        `insert into ${table} (${names}) select ${values} from n`,
    )
    .execute(db);
}

async function seedAll(db: Kysely<Database>) {
  await seed(db, 'tenants', 2_000, { tenant_id: "'t' || i", name: "'tenant'", created_at: `${T0} + i` });
  await seed(db, 'sessions', SESSIONS, {
    session_id: "'s' || i",
    tenant_id: "'t' || (i % 20)",
    player_id: "'p' || (i % 1000)",
    tenant_cohort_id: "'c' || (i % 400)",
    device: "'{}'",
    status: "case when i % 7 = 0 then 'live' else 'ended' end",
    started_at: `${T0} + i * 1000`,
    last_seen_at: `${T0} + i * 1000 + 500`,
  });
  await seed(db, 'events', 20_000, {
    session_id: "'s' || (i % 20)",
    event_id: "'e' || i",
    event_type: "'type' || (i % 25)",
    timestamp: `${T0} + i`,
    received_at: `${T0} + i`,
    body: "'{}'",
  });
  await seed(db, 'commands', 20_000, {
    command_id: "'cmd' || i",
    session_id: "'s' || (i % 10)",
    tenant_id: "'t0'",
    name: "'text'",
    data: "'{}'",
    // Like a long-running session: a few commands open, the history settled.
    status: "case when i % 50 = 0 then 'queued' else 'acknowledged' end",
    issued_at: `${T0} + i`,
    expires_at: `${T0} + i + 60000`,
  });
  await seed(db, 'campaigns', 200, {
    campaign_id: "'camp' || i",
    tenant_id: "'t' || (i % 20)",
    name: "'campaign'",
    timezone: "'UTC'",
    redemption: "'code'",
    secret_digest: "'digest' || i",
    created_at: `${T0} + i`,
    updated_at: `${T0} + i`,
  });
  await seed(db, 'challenges', 4_000, {
    challenge_id: "'ch' || i",
    campaign_id: "'camp' || (i % 200)",
    tenant_id: "'t' || (i % 20)",
    reward_code: "'r' || i",
    reward_title: "'title'",
    reward_requirement: "'requirement'",
    rule_type: "'stream_minutes'",
    rule_target: '1',
    image: "''",
    created_at: `${T0} + i`,
    updated_at: `${T0} + i`,
  });
  await seed(db, 'oauth_clients', 4_000, {
    client_id: "'cl' || i",
    tenant_id: "'t' || (i % 20)",
    secret_digest: "'x'",
    scopes: "'sessions:read'",
    created_at: `${T0} + i`,
  });
  await seed(db, 'webhook_endpoints', 400, {
    webhook_id: "'wh' || i",
    tenant_id: "'t' || (i % 20)",
    url: "'https://example.com/hook'",
    enabled: '1',
    secret: "'x'",
    created_at: `${T0} + i`,
    updated_at: `${T0} + i`,
  });
  await seed(db, 'webhook_deliveries', 20_000, {
    delivery_id: "'d' || i",
    webhook_id: "'wh' || (i % 400)",
    tenant_id: "'t' || (i % 20)",
    type: "'event'",
    payload: "'{}'",
    status: "case i % 3 when 0 then 'pending' when 1 then 'delivered' else 'failed' end",
    attempts: '0',
    next_attempt_at: `${T0} + i`,
    created_at: `${T0} + i`,
  });
  await seed(db, 'stream_intervals', 10_000, {
    streaming_session_id: "'ss' || i",
    session_id: "'s' || (i % 20)",
    tenant_id: "'t' || (i % 20)",
    player_id: "'p' || (i % 200)",
    started_at: `${T0} + i * 1000`,
    stopped_at: `${T0} + i * 1000 + 500`,
  });
  await sql`analyze`.execute(db);
}

// --- the lists and what each must read ----------------------------------------------------------------

interface Expectation {
  /** The table read. */
  table: string;
  /** The index whose range is the answer (null for a count: any index whose condition has `equal`). */
  index: string | null;
  /** Columns the filter compares with `=`: each must be in the index condition. */
  equal: string[];
}

interface ListCase {
  name: string;
  run: (db: Kysely<Database>) => Promise<unknown>;
  /** One expectation per statement the store function sends, in order. */
  expect: Expectation[];
}

const page = { page: 3, pageSize: 50 };
/** A list cursor as the server hands it out (storage/pages.ts): the order column, its value, the id. */
const cursor = (column: string, value: number, id: string) =>
  Buffer.from(JSON.stringify([column, value, id])).toString('base64url');
const since = T0 + (SESSIONS - 2_000) * 1000;

const sessionPage = (index: string, equal: string[]): Expectation[] => [
  { table: 'sessions', index, equal },
  { table: 'sessions', index: null, equal },
];

const cases: ListCase[] = [
  {
    name: 'GET /sessions/active',
    run: (db) => sessions.listSessions(db, { tenantId: 't0', activeSince: since }, page),
    expect: sessionPage('sessions_tenant_status_seen', ['tenant_id', 'status']),
  },
  {
    name: 'GET /cohorts/{id}/sessions',
    run: (db) => sessions.listSessions(db, { tenantId: 't0', tenantCohortId: 'c0' }, page),
    expect: sessionPage('sessions_tenant_cohort_started', ['tenant_id', 'tenant_cohort_id']),
  },
  {
    name: 'GET /cohorts/{id}/active',
    run: (db) =>
      sessions.listSessions(db, { tenantId: 't0', tenantCohortId: 'c0', activeSince: since }, page),
    expect: sessionPage('sessions_tenant_cohort_status_seen', ['tenant_id', 'tenant_cohort_id', 'status']),
  },
  // The cursor form (`after=`): the same index range, entered at the cursor (`column <= v` bounds it).
  {
    name: 'GET /sessions/active?after=',
    run: (db) =>
      sessions.listSessions(
        db,
        { tenantId: 't0', activeSince: since },
        { ...page, after: cursor('last_seen_at', since + 500_000, 's100') },
      ),
    expect: sessionPage('sessions_tenant_status_seen', ['tenant_id', 'status']),
  },
  {
    name: 'GET /cohorts/{id}/sessions?after=',
    run: (db) =>
      sessions.listSessions(
        db,
        { tenantId: 't0', tenantCohortId: 'c0' },
        { ...page, after: cursor('started_at', T0 + 500_000, 's100') },
      ),
    expect: sessionPage('sessions_tenant_cohort_started', ['tenant_id', 'tenant_cohort_id']),
  },
  {
    name: 'GET /players/{id}/sessions',
    run: (db) => sessions.listSessions(db, { tenantId: 't0', playerId: 'p0' }, page),
    expect: sessionPage('sessions_tenant_player_started', ['tenant_id', 'player_id']),
  },
  {
    name: 'GET /players/{id}/sessions?after=',
    run: (db) =>
      sessions.listSessions(
        db,
        { tenantId: 't0', playerId: 'p0' },
        { ...page, after: cursor('started_at', T0 + 10_000_000, 's10000') },
      ),
    expect: sessionPage('sessions_tenant_player_started', ['tenant_id', 'player_id']),
  },
  {
    name: "a session's commands after a cursor",
    run: (db) =>
      commands.listCommands(db, 's0', {
        ...page,
        after: Buffer.from(JSON.stringify(['command_id', 'cmd500'])).toString('base64url'),
      }),
    expect: [
      { table: 'commands', index: 'commands_session_id', equal: ['session_id'] },
      { table: 'commands', index: null, equal: ['session_id'] },
    ],
  },
  {
    name: "a session's events",
    run: (db) => events.queryEvents(db, 's0', { limit: 1000 }),
    expect: [{ table: 'events', index: 'events_session_time', equal: ['session_id'] }],
  },
  {
    name: "a session's events in a time range",
    run: (db) => events.queryEvents(db, 's0', { from: T0 + 100, to: T0 + 10_000, limit: 1000 }),
    expect: [{ table: 'events', index: 'events_session_time', equal: ['session_id'] }],
  },
  // The cursor: `timestamp >= ?` bounds the range at the cursor (the rest of the condition skips the
  // events of that millisecond already seen), so a page costs its size, not the events before it.
  {
    name: "a session's events after a cursor",
    run: (db) => events.queryEvents(db, 's0', { after: { timestamp: T0 + 5_000, id: 'e5000' }, limit: 1000 }),
    expect: [{ table: 'events', index: 'events_session_time', equal: ['session_id'] }],
  },
  // The type is checked row by row along the session's range of events_session_time (no index on the
  // type: it would halve event inserts, storage/README.md): the session's events, not the table.
  {
    name: "a session's events of one type",
    run: (db) => events.queryEvents(db, 's0', { eventType: 'type0', limit: 1000 }),
    expect: [{ table: 'events', index: 'events_session_time', equal: ['session_id'] }],
  },
  {
    name: "a session's events of one type in a time range",
    run: (db) => events.queryEvents(db, 's0', { eventType: 'type0', from: T0, to: T0 + 10_000, limit: 100 }),
    expect: [{ table: 'events', index: 'events_session_time', equal: ['session_id'] }],
  },
  {
    name: "a session's commands",
    run: (db) => commands.listCommands(db, 's0', page),
    expect: [
      { table: 'commands', index: 'commands_session_id', equal: ['session_id'] },
      { table: 'commands', index: null, equal: ['session_id'] },
    ],
  },
  // A reconnecting device's replay and the queue quota: the session's open commands only, in order,
  // from the partial index of open commands (migration 009), not the session's whole history.
  {
    name: "a session's open commands, page by page (device replay)",
    run: (db) => commands.pendingPage(db, 's0', T0, 'cmd100', 100),
    expect: [{ table: 'commands', index: 'commands_open', equal: ['session_id'] }],
  },
  {
    name: "a session's open commands (queue quota)",
    run: (db) => commands.openCommands(db, 's0', T0),
    expect: [{ table: 'commands', index: 'commands_open', equal: ['session_id'] }],
  },
  // A lookup by idempotency key reads the partial index of commands that have one (migration 018).
  {
    name: "a session's command by idempotency key",
    run: (db) => commands.findByIdempotencyKey(db, 't0', 's0', 'key-1'),
    expect: [
      {
        table: 'commands',
        index: 'commands_idempotency',
        equal: ['tenant_id', 'session_id', 'idempotency_key'],
      },
    ],
  },
  {
    name: "an endpoint's deliveries of one status, after a cursor",
    run: (db) => webhooks.listDeliveries(db, 'wh0', { status: 'failed', after: 'd9', limit: 50 }),
    expect: [
      { table: 'webhook_deliveries', index: 'webhook_deliveries_endpoint', equal: ['webhook_id', 'status'] },
    ],
  },
  {
    name: "an endpoint's deliveries (one range per status)",
    run: (db) => webhooks.listDeliveries(db, 'wh0', { limit: 50 }),
    expect: ['pending', 'delivered', 'failed'].map(() => ({
      table: 'webhook_deliveries',
      index: 'webhook_deliveries_endpoint',
      equal: ['webhook_id', 'status'],
    })),
  },
  {
    name: "a tenant's webhook endpoints",
    run: (db) => webhooks.listEndpoints(db, 't0', 50),
    expect: [
      { table: 'webhook_endpoints', index: 'webhook_endpoints_tenant', equal: ['tenant_id'] },
      { table: 'webhook_endpoints', index: null, equal: ['tenant_id'] },
    ],
  },
  {
    name: "a tenant's campaigns",
    run: (db) => rewards.listCampaigns(db, 't0', { page: 1, pageSize: 5 }),
    expect: [
      { table: 'campaigns', index: 'campaigns_tenant', equal: ['tenant_id'] },
      { table: 'campaigns', index: null, equal: ['tenant_id'] },
    ],
  },
  {
    name: "a campaign's challenges",
    run: (db) => rewards.listChallenges(db, 'camp0', { page: 1, pageSize: 5 }),
    expect: [
      { table: 'challenges', index: 'challenges_campaign_created', equal: ['campaign_id'] },
      { table: 'challenges', index: null, equal: ['campaign_id'] },
    ],
  },
  {
    name: "a tenant's clients",
    run: (db) => auth.listClients({ db } as Storage, 't0', page),
    expect: [
      { table: 'oauth_clients', index: 'oauth_clients_tenant_created', equal: ['tenant_id'] },
      { table: 'oauth_clients', index: null, equal: ['tenant_id'] },
    ],
  },
  {
    name: "a player's stream intervals",
    run: (db) => streams.playerIntervals(db, 't0', 'p0', T0, T0 + 10_000_000),
    expect: [
      {
        table: 'stream_intervals',
        index: 'stream_intervals_player_started',
        equal: ['tenant_id', 'player_id'],
      },
    ],
  },
];

/** The operator's tenants list has no filter: it reads its index from the start (its count scans). */
const tenantsCase = {
  run: (db: Kysely<Database>) => auth.listTenants({ db } as Storage, page),
  table: 'tenants',
  index: 'tenants_created',
};

/**
 * The many-row updates of the hot paths (a statement per 500 rows, the rows in a `values` list joined to
 * the table): they must find each row by its key. SQLite's planner, left to itself, read the whole
 * table for every statement (`SCAN sessions USING COVERING INDEX …`, the `values` list searched by an
 * automatic index): the contact flush of 1,000 live sessions took about 105 ms of the writer thread
 * with 100,000 sessions stored, and more with every session kept.
 */
const keyedUpdates: {
  name: string;
  table: string;
  key: string;
  statements: (backend: Backend) => Promise<CompiledQuery[]>;
}[] = [
  {
    name: 'the contact flush (and an ingestion group’s touch)',
    table: 'sessions',
    key: 'session_id',
    statements: async (backend) => {
      const contacts: [string, number][] = Array.from({ length: 300 }, (_, i) => [`s${i * 7}`, T0 + 1e9]);
      const piped: CompiledQuery[] = [];
      const captured = await sqlOf(backend, (db) =>
        sessions.touchEach(
          {
            dialect: backend,
            pipeline: async (_trx, statement) => {
              piped.push(Compiled.raw(statement.sql, [...statement.parameters]));
            },
          },
          db,
          contacts,
        ),
      );
      return [...captured, ...piped].filter((q) => /^with/i.test(q.sql));
    },
  },
  {
    name: 'the webhook dispatcher settling its attempts',
    table: 'webhook_deliveries',
    key: 'delivery_id',
    statements: async (backend) => {
      const results = Array.from({ length: 300 }, (_, i) => ({
        attempt: {
          attempt_id: `a${i}`,
          delivery_id: `d${i * 3}`,
          webhook_id: `wh${(i * 3) % 400}`,
          attempted_at: T0,
          status_code: 200,
          latency_ms: 5,
          error: null,
        },
        claimId: 'claim',
        status: 'delivered' as const,
        attempts: 1,
        nextAttemptAt: null,
        completedAt: T0,
      }));
      return webhooks
        .settleAttemptedStatements(backend, results)
        .filter((s) => /^with/i.test(s.sql))
        .map((s) => Compiled.raw(s.sql, [...s.parameters]));
    },
  },
];

// --- reading the plans ---------------------------------------------------------------------------------

async function sqlitePlan(storage: Storage, q: CompiledQuery) {
  const { rows } = await storage.db.executeQuery<{ detail: string }>(
    Compiled.raw(`explain query plan ${q.sql}`, [...q.parameters]),
  );
  return rows.map((r) => r.detail);
}

interface PgNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  Plans?: PgNode[];
}

async function postgresPlan(storage: Storage, q: CompiledQuery) {
  // The tables here hold thousands of rows, not millions: at this size a bitmap scan and a sort of a
  // few hundred rows cost the planner less than the ordered index scan it picks at scale. Turning
  // off sequential and bitmap scans (for this transaction only) asks what it would do once reading
  // the table is out of the question; a sort still costs what it costs, so a plan without a fitting
  // index still sorts, and fails.
  const rows = await storage.db.transaction().execute(async (trx) => {
    await sql`set local enable_seqscan = off`.execute(trx);
    await sql`set local enable_bitmapscan = off`.execute(trx);
    const result = await trx.executeQuery<{ 'QUERY PLAN': [{ Plan: PgNode }] }>(
      Compiled.raw(`explain (format json) ${q.sql}`, [...q.parameters]),
    );
    return result.rows;
  });
  const nodes: PgNode[] = [];
  const walk = (n: PgNode) => {
    nodes.push(n);
    for (const child of n.Plans ?? []) walk(child);
  };
  walk(rows[0]['QUERY PLAN'][0].Plan);
  return nodes;
}

/** What is wrong with a plan for `e` (empty when it reads the index range in order). */
function sqliteProblems(plan: string[], e: Expectation): string[] {
  const problems: string[] = [];
  if (plan.some((d) => d.includes('TEMP B-TREE'))) problems.push('sorts (temp B-tree)');
  // `SCAN t USING (COVERING) INDEX i` reads the whole index: a scan all the same.
  if (plan.some((d) => d === `SCAN ${e.table}` || d.startsWith(`SCAN ${e.table} USING`)))
    problems.push(`scans the whole of ${e.table}`);
  const index = e.index ?? '\\w+';
  const search = plan
    .map((d) => new RegExp(`^SEARCH ${e.table} USING (?:COVERING )?INDEX ${index} \\((.*)\\)$`).exec(d))
    .find((m) => m !== null);
  if (!search) problems.push(`no search of ${e.table} by index ${e.index ?? '(any)'}`);
  else {
    for (const column of e.equal) {
      if (!search[1].split(' AND ').includes(`${column}=?`))
        problems.push(`${column} not in the index condition`);
    }
  }
  return problems;
}

function postgresProblems(nodes: PgNode[], e: Expectation, count: boolean): string[] {
  const problems: string[] = [];
  for (const n of nodes) {
    if (n['Node Type'] === 'Seq Scan') problems.push(`scans the whole of ${n['Relation Name']}`);
    if (!count && n['Node Type'].endsWith('Sort')) problems.push(`sorts (${n['Node Type']})`);
    if (!count && n['Node Type'] === 'Bitmap Heap Scan') problems.push('bitmap scan (loses the order)');
  }
  const scans = nodes.filter(
    (n) =>
      (n['Node Type'] === 'Index Scan' ||
        n['Node Type'] === 'Index Only Scan' ||
        (count && n['Node Type'] === 'Bitmap Index Scan')) &&
      (e.index === null || n['Index Name'] === e.index),
  );
  const scan = scans.find((n) => e.equal.every((c) => (n['Index Cond'] ?? '').includes(`(${c} = `)));
  if (!scan)
    problems.push(`no index scan by ${e.index ?? '(any)'} with ${e.equal.join(', ')} in its condition`);
  return problems;
}

// --- the test --------------------------------------------------------------------------------------------

describe.each(backends)('list query plans on %s', (backend) => {
  const store = freshStore(backend);
  let storage: Storage;

  beforeAll(async () => {
    storage = await openFreshStore(backend, store);
    await seedAll(storage.db);
  }, 120_000);

  afterAll(async () => {
    await storage?.close();
    await store.destroy();
  });

  /** `count`: a count's plan (any index, sorts allowed); by default, for an expectation without an index. */
  async function problemsOf(q: CompiledQuery, e: Expectation, count = e.index === null) {
    if (backend === 'sqlite') {
      const plan = await sqlitePlan(storage, q);
      return { plan: plan.join('\n'), problems: sqliteProblems(plan, e) };
    }
    const nodes = await postgresPlan(storage, q);
    return {
      plan: nodes
        .map(
          (n) => `${n['Node Type']} ${n['Index Name'] ?? n['Relation Name'] ?? ''} ${n['Index Cond'] ?? ''}`,
        )
        .join('\n'),
      problems: postgresProblems(nodes, e, count),
    };
  }

  it.each(cases)('$name reads its index in order', async ({ run, expect: expectations }) => {
    const queries = await sqlOf(backend, run);
    expect(queries).toHaveLength(expectations.length);
    for (const [i, q] of queries.entries()) {
      const { plan, problems } = await problemsOf(q, expectations[i]);
      expect(problems, `${q.sql}\n-- plan:\n${plan}`).toEqual([]);
    }
  });

  it('keeps commands without an idempotency key out of commands_idempotency (migration 018)', async () => {
    const definition =
      backend === 'sqlite'
        ? (
            await sql<{
              sql: string;
            }>`select sql from sqlite_master where name = 'commands_idempotency'`.execute(storage.db)
          ).rows[0].sql
        : (
            await sql<{
              sql: string;
            }>`select indexdef as sql from pg_indexes where indexname = 'commands_idempotency' and schemaname = current_schema()`.execute(
              storage.db,
            )
          ).rows[0].sql;
    expect(definition.toLowerCase()).toMatch(/unique index.*where \(?idempotency_key is not null\)?/);
  });

  it.each(keyedUpdates)(
    '$name finds each row of $table by its key, never reading the whole table',
    async ({ table, key, statements }) => {
      const list = await statements(backend);
      expect(list.length).toBeGreaterThan(0);
      for (const q of list) {
        // Any index, as long as its condition has the key; nothing scanned, nothing sorted.
        const { plan, problems } = await problemsOf(q, { table, index: null, equal: [key] }, false);
        expect(problems, `${q.sql.slice(0, 200)}…\n-- plan:\n${plan}`).toEqual([]);
      }
    },
  );

  it("the operator's tenants list reads tenants_created from the start, without sorting", async () => {
    const [pageQuery] = await sqlOf(backend, tenantsCase.run);
    if (backend === 'sqlite') {
      const plan = await sqlitePlan(storage, pageQuery);
      expect(plan.join('\n')).not.toContain('TEMP B-TREE');
      expect(plan).toContainEqual(
        expect.stringMatching(new RegExp(`^SCAN tenants USING (COVERING )?INDEX ${tenantsCase.index}$`)),
      );
    } else {
      const nodes = await postgresPlan(storage, pageQuery);
      expect(nodes.map((n) => n['Node Type'])).not.toContain('Sort');
      expect(nodes.map((n) => n['Node Type'])).not.toContain('Seq Scan');
      expect(nodes.map((n) => n['Index Name'])).toContain(tenantsCase.index);
    }
  });
});

// --- settling commands by id -----------------------------------------------------------------------------

/**
 * A device's answers, delivery marks, a cancel and the expiry of one row find their commands by id:
 * through the primary key, whatever else the statement says. In a running deployment nearly every
 * command is settled, so PostgreSQL's statistics say that hardly any is open, and its planner would
 * rather read the open entries of `commands_open` or `commands_expiry` than a few primary keys; but
 * those indexes keep an entry for each earlier version of a row until VACUUM (each answered command's
 * `queued` and `delivered` versions), and such plans read thousands of entries a statement under load
 * (store.ts, `STILL_OPEN`). Seeded here as a deployment looks: 20,000 commands answered, five open, the
 * table analyzed; plans as the planner picks them (bitmap scans allowed).
 */
describe.each(backends)('commands settled by id on %s', (backend) => {
  const store = freshStore(backend);
  let storage: Storage;
  const open = ['open1', 'open2', 'open3', 'open4', 'open5'];

  beforeAll(async () => {
    storage = await openFreshStore(backend, store);
    await seed(storage.db, 'commands', 20_000, {
      command_id: "'cmd' || i",
      session_id: "'s' || (i % 1000)",
      tenant_id: "'t0'",
      name: "'text'",
      data: "'{}'",
      status: "'acknowledged'",
      issued_at: `${T0} + i`,
      expires_at: `${T0} + i + 30000`,
    });
    await seed(storage.db, 'commands', open.length, {
      command_id: "'open' || (i + 1)",
      session_id: "'s' || i",
      tenant_id: "'t0'",
      name: "'text'",
      data: "'{}'",
      status: "'delivered'",
      issued_at: `${T0} + 20000`,
      expires_at: `${T0} + 50000`,
    });
    await sql`analyze`.execute(storage.db);
  }, 120_000);

  afterAll(async () => {
    await storage?.close();
    await store.destroy();
  });

  /** How each statement reaches `commands`: the index names its plan reads, or `scan`. */
  async function access(q: { sql: string; parameters: readonly unknown[] }) {
    if (backend === 'sqlite') {
      const plan = await sqlitePlan(storage, Compiled.raw(q.sql, [...q.parameters]));
      return plan
        .filter((d) => /^(SEARCH|SCAN) commands\b/.test(d))
        .map(
          (d) =>
            /USING (?:COVERING )?INDEX (\w+)/.exec(d)?.[1] ?? (d.includes('PRIMARY KEY') ? 'pkey' : 'scan'),
        );
    }
    const { rows } = await storage.db.executeQuery<{ 'QUERY PLAN': [{ Plan: PgNode }] }>(
      Compiled.raw(`explain (format json) ${q.sql}`, [...q.parameters]),
    );
    const found: string[] = [];
    const walk = (n: PgNode) => {
      if (n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'commands') found.push('scan');
      if (n['Index Name']?.startsWith('commands')) found.push(n['Index Name']);
      for (const child of n.Plans ?? []) walk(child);
    };
    walk(rows[0]['QUERY PLAN'][0].Plan);
    return found;
  }
  const byKey = backend === 'sqlite' ? 'sqlite_autoindex_commands_1' : 'commands_pkey';

  it('through the primary key: an ack group, a refusal, delivery marks, a cancel, an expiry', async () => {
    const acks = open.map((id, i) => ({
      sessionId: `s${i}`,
      commandId: id,
      status: 'acknowledged' as const,
      error: null,
    }));
    // PostgreSQL locks the rows in id order first (`for update`), as the server does there.
    const lockInOrder = backend === 'postgres';
    const statements = [
      ...commands.settleStatements(storage.db, backend, acks, T0 + 100, { lockInOrder }).statements,
      ...commands.settleStatements(
        storage.db,
        backend,
        [{ sessionId: 's0', commandId: 'open1', status: 'failed', error: 'no' }],
        T0 + 100,
      ).statements,
      ...commands.deliveryMarkStatements(storage.db, backend, new Map([[T0 + 50, open]]), { lockInOrder }),
      ...(await sqlOf(backend, (db) => commands.cancelCommand(db, 's0', 'open1', T0 + 100, null))),
      ...(await sqlOf(backend, (db) => commands.expireCommand(db, 'open1', T0 + 100_000))),
    ];
    expect(statements.length).toBeGreaterThanOrEqual(5);
    for (const q of statements) {
      // By key: the primary key, or (session, command) — one entry a command either way.
      const reads = await access(q);
      expect(reads.length, q.sql.slice(0, 160)).toBeGreaterThan(0);
      expect(
        reads.filter((r) => r !== byKey && r !== 'commands_session_id'),
        `${q.sql.slice(0, 160)} reads ${reads.join(', ')}`,
      ).toEqual([]);
    }
  });
});

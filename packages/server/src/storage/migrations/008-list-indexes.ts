import type { Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe tables before the typed schema knows them.
// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/**
 * Indexes that match every list's filter and order (issue 12): the equality columns of the filter
 * first, then the ORDER BY columns in their directions, so that a page is one index range read in
 * order — no scan of the tenant's rows, no sort, whatever the table holds. Where a new index starts
 * with every column of an old one in the same order, the old one is dropped. Which list each index
 * serves: storage/README.md (List indexes); `test/integration/query-plans.test.ts` checks the plans.
 */
interface IndexSpec {
  name: string;
  table: string;
  columns: string[];
}

const CREATED: IndexSpec[] = [
  // GET /sessions/active: tenant, live, lastSeenAt >= since; lastSeenAt desc, sessionId.
  {
    name: 'sessions_tenant_status_seen',
    table: 'sessions',
    columns: ['tenant_id', 'status', 'last_seen_at desc', 'session_id'],
  },
  // GET /cohorts/{id}/sessions: tenant, cohort; startedAt desc, sessionId.
  {
    name: 'sessions_tenant_cohort_started',
    table: 'sessions',
    columns: ['tenant_id', 'tenant_cohort_id', 'started_at desc', 'session_id'],
  },
  // GET /cohorts/{id}/active: tenant, cohort, live, lastSeenAt >= since; lastSeenAt desc, sessionId.
  {
    name: 'sessions_tenant_cohort_status_seen',
    table: 'sessions',
    columns: ['tenant_id', 'tenant_cohort_id', 'status', 'last_seen_at desc', 'session_id'],
  },
  // A session's events (with or without a type) stay on events_session_time, from 001: an index on
  // (session_id, event_type, timestamp, event_id) halved raw event inserts (storage/README.md).
  // GET /sessions/{id}/commands: session; commandId desc (commands_session, from 002, leads with
  // status after the session: it serves the device's pending replay, not this list).
  { name: 'commands_session_id', table: 'commands', columns: ['session_id', 'command_id'] },
  // GET /campaigns/{id}/challenges: campaign; createdAt, challengeId.
  {
    name: 'challenges_campaign_created',
    table: 'challenges',
    columns: ['campaign_id', 'created_at', 'challenge_id'],
  },
  // A tenant's clients (GET /clients): tenant; createdAt, clientId.
  {
    name: 'oauth_clients_tenant_created',
    table: 'oauth_clients',
    columns: ['tenant_id', 'created_at', 'client_id'],
  },
  // The operator's tenants list: no filter; createdAt, tenantId.
  { name: 'tenants_created', table: 'tenants', columns: ['created_at', 'tenant_id'] },
  // A player's stream intervals (challenge progress): tenant, player; startedAt, streamingSessionId.
  {
    name: 'stream_intervals_player_started',
    table: 'stream_intervals',
    columns: ['tenant_id', 'player_id', 'started_at', 'streaming_session_id'],
  },
];

/** Indexes the ones above make redundant: each is a prefix of one of them (same columns, same order). */
const DROPPED: IndexSpec[] = [
  { name: 'sessions_tenant_active', table: 'sessions', columns: ['tenant_id', 'status', 'last_seen_at'] },
  {
    name: 'sessions_tenant_cohort',
    table: 'sessions',
    columns: ['tenant_id', 'tenant_cohort_id', 'started_at'],
  },
  { name: 'oauth_clients_tenant', table: 'oauth_clients', columns: ['tenant_id'] },
  {
    name: 'stream_intervals_player',
    table: 'stream_intervals',
    columns: ['tenant_id', 'player_id', 'started_at'],
  },
];

export async function up(db: AnyDb): Promise<void> {
  for (const index of CREATED) {
    await db.schema.createIndex(index.name).on(index.table).columns(index.columns).execute();
  }
  for (const index of DROPPED) await db.schema.dropIndex(index.name).ifExists().execute();
}

export async function down(db: AnyDb): Promise<void> {
  for (const index of DROPPED) {
    await db.schema.createIndex(index.name).ifNotExists().on(index.table).columns(index.columns).execute();
  }
  for (const index of CREATED) await db.schema.dropIndex(index.name).ifExists().execute();
}

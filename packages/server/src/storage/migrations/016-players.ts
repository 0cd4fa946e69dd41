import { type Kysely, SqliteAdapter, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/**
 * Players' data (CONTRACT §16, the players module):
 *
 * - `sessions_tenant_player_started`: `GET /players/{playerId}/sessions` (tenant, player; startedAt
 *   desc, sessionId) and the erasure's "this player's sessions" are one index range.
 * - `player_erasures`: one row per erasure request (pending → done), with the lease that lets one
 *   process at a time work on it, and the counts once done. `player_erasure_sessions`: the ids of the
 *   sessions the erasure deleted, the work list of the job (the session rows themselves are gone in
 *   the request's transaction, so every session-scoped read is a 404 at once).
 * - `audit_log`: every export and erasure (the one place a player id stays after its erasure).
 * - `claims.player_id` becomes nullable: an erased player's claims keep their code, their player is null.
 *   PostgreSQL drops the constraint; SQLite cannot alter a column, so the table is rebuilt as it was
 *   (same columns, ids, indexes and AUTOINCREMENT sequence) with the column nullable.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createIndex('sessions_tenant_player_started')
    .on('sessions')
    .columns(['tenant_id', 'player_id', 'started_at desc', 'session_id'])
    .execute();

  await db.schema
    .createTable('player_erasures')
    .addColumn('erasure_id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('player_id', 'text', (c) => c.notNull())
    .addColumn('erased_at', 'bigint', (c) => c.notNull())
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('counts', 'text')
    .addColumn('completed_at', 'bigint')
    .addColumn('lease_until', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  // At most one pending erasure per player: a second DELETE answers the pending one.
  await sql`create unique index player_erasures_pending on player_erasures (tenant_id, player_id) where state = 'pending'`.execute(
    db,
  );
  await sql`create index player_erasures_due on player_erasures (lease_until) where state = 'pending'`.execute(
    db,
  );
  await db.schema
    .createTable('player_erasure_sessions')
    .addColumn('erasure_id', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('player_erasure_sessions_pk', ['erasure_id', 'session_id'])
    .execute();

  await db.schema
    .createTable('audit_log')
    .addColumn('audit_id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('player_id', 'text', (c) => c.notNull())
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('at', 'bigint', (c) => c.notNull())
    .addColumn('counts', 'text')
    .addColumn('erasure_id', 'text')
    .execute();
  // GET /admin/v1/audit: newest first, optionally one tenant's or one player's.
  await db.schema.createIndex('audit_log_at').on('audit_log').columns(['at desc', 'audit_id']).execute();
  await db.schema
    .createIndex('audit_log_tenant_at')
    .on('audit_log')
    .columns(['tenant_id', 'at desc', 'audit_id'])
    .execute();
  await db.schema
    .createIndex('audit_log_player_at')
    .on('audit_log')
    .columns(['player_id', 'at desc', 'audit_id'])
    .execute();
  await db.schema.createIndex('audit_log_erasure').on('audit_log').column('erasure_id').execute();

  if (db.getExecutor().adapter instanceof SqliteAdapter) await rebuildClaims(db);
  else await sql`alter table claims alter column player_id drop not null`.execute(db);
}

async function rebuildClaims(db: AnyDb) {
  await db.schema
    .createTable('claims_new')
    .addColumn('claim_id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('campaign_id', 'text', (c) => c.notNull())
    .addColumn('challenge_id', 'text', (c) => c.notNull().references('challenges.challenge_id'))
    .addColumn('player_id', 'text')
    .addColumn('reward_code', 'text', (c) => c.notNull())
    .addColumn('display_code', 'text', (c) => c.notNull().unique())
    .addColumn('achievement_code', 'text', (c) => c.notNull().unique())
    .addColumn('redemption', 'text', (c) => c.notNull())
    .addColumn('claimed_at', 'bigint', (c) => c.notNull())
    .addColumn('verified_at', 'bigint')
    .execute();
  await sql`insert into claims_new select claim_id, tenant_id, campaign_id, challenge_id, player_id, reward_code,
    display_code, achievement_code, redemption, claimed_at, verified_at from claims`.execute(db);
  await sql`drop table claims`.execute(db);
  await sql`alter table claims_new rename to claims`.execute(db);
  await db.schema
    .createIndex('claims_one_per_player')
    .on('claims')
    .columns(['challenge_id', 'player_id'])
    .unique()
    .execute();
  await db.schema
    .createIndex('claims_player')
    .on('claims')
    .columns(['tenant_id', 'player_id', 'challenge_id'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('audit_log').ifExists().execute();
  await db.schema.dropTable('player_erasure_sessions').ifExists().execute();
  await db.schema.dropTable('player_erasures').ifExists().execute();
  await db.schema.dropIndex('sessions_tenant_player_started').ifExists().execute();
}

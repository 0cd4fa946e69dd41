import type { Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe tables before the typed schema knows them.
// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('server_keys')
    .addColumn('kid', 'text', (c) => c.primaryKey())
    .addColumn('purpose', 'text', (c) => c.notNull())
    .addColumn('material', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('tenants')
    .addColumn('tenant_id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('oauth_clients')
    .addColumn('client_id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.tenant_id'))
    .addColumn('name', 'text')
    .addColumn('secret_digest', 'text', (c) => c.notNull())
    .addColumn('scopes', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('revoked_at', 'bigint')
    .execute();
  await db.schema.createIndex('oauth_clients_tenant').on('oauth_clients').columns(['tenant_id']).execute();

  await db.schema
    .createTable('sessions')
    .addColumn('session_id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.tenant_id'))
    .addColumn('player_id', 'text', (c) => c.notNull())
    .addColumn('tenant_cohort_id', 'text')
    .addColumn('device', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('started_at', 'bigint', (c) => c.notNull())
    .addColumn('last_seen_at', 'bigint', (c) => c.notNull())
    .addColumn('ended_at', 'bigint')
    .addColumn('end_reason', 'text')
    .execute();
  await db.schema
    .createIndex('sessions_tenant_active')
    .on('sessions')
    .columns(['tenant_id', 'status', 'last_seen_at'])
    .execute();
  await db.schema
    .createIndex('sessions_tenant_cohort')
    .on('sessions')
    .columns(['tenant_id', 'tenant_cohort_id', 'started_at'])
    .execute();
  await db.schema
    .createIndex('sessions_idle_sweep')
    .on('sessions')
    .columns(['status', 'last_seen_at'])
    .execute();

  await db.schema
    .createTable('events')
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('event_type', 'text', (c) => c.notNull())
    .addColumn('timestamp', 'bigint', (c) => c.notNull())
    .addColumn('streaming_session_id', 'text')
    .addColumn('received_at', 'bigint', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('events_pk', ['session_id', 'event_id'])
    .execute();
  await db.schema
    .createIndex('events_session_time')
    .on('events')
    .columns(['session_id', 'timestamp', 'event_id'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  for (const table of ['events', 'sessions', 'oauth_clients', 'tenants', 'server_keys']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}

import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/**
 * Alert rules (CONTRACT §13). `alerts` holds a tenant's rules. `alert_states` is each rule's state in
 * one session (primary key `(session_id, alert_id)`): since when its condition has held
 * (`pending_since`, an event timestamp), the open incident, when it last notified, and a `version`
 * that every change bumps: ingestion changes a row only where the version it read is still there (or
 * inserts it where none was, the key refusing a second), so two processes cannot both trigger.
 * `alert_incidents` is the history the incidents list reads (newest first by its UUIDv7 id).
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('alerts')
    .addColumn('alert_id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('event_type', 'text', (c) => c.notNull())
    .addColumn('field', 'text', (c) => c.notNull())
    .addColumn('op', 'text', (c) => c.notNull())
    // JSON text of the value (a number or a string).
    .addColumn('value', 'text', (c) => c.notNull())
    .addColumn('tenant_cohort_id', 'text')
    .addColumn('for_seconds', 'integer', (c) => c.notNull())
    .addColumn('cooldown_seconds', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('alerts_tenant_created')
    .on('alerts')
    .columns(['tenant_id', 'created_at', 'alert_id'])
    .execute();
  await db.schema
    .createTable('alert_states')
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('alert_id', 'text', (c) => c.notNull())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('pending_since', 'bigint')
    .addColumn('incident_id', 'text')
    .addColumn('notified_at', 'bigint')
    .addColumn('player_id', 'text')
    .addColumn('version', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('alert_states_pk', ['session_id', 'alert_id'])
    .execute();
  await db.schema.createIndex('alert_states_alert').on('alert_states').columns(['alert_id']).execute();
  // The sessions of a tenant where some rule's condition holds or an incident is open: what each
  // process keeps in memory so that ingestion reads no state for the others.
  await sql`create index alert_states_active on alert_states (tenant_id, session_id) where pending_since is not null or incident_id is not null`.execute(
    db,
  );
  await db.schema
    .createTable('alert_incidents')
    .addColumn('incident_id', 'text', (c) => c.primaryKey())
    .addColumn('alert_id', 'text', (c) => c.notNull())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('player_id', 'text', (c) => c.notNull())
    .addColumn('tenant_cohort_id', 'text')
    .addColumn('triggered_at', 'bigint', (c) => c.notNull())
    .addColumn('triggered_event_id', 'text', (c) => c.notNull())
    .addColumn('notifications', 'integer', (c) => c.notNull())
    .addColumn('last_notified_at', 'bigint', (c) => c.notNull())
    .addColumn('resolved_at', 'bigint')
    .addColumn('resolved_reason', 'text')
    .addColumn('resolved_event_id', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('alert_incidents_alert')
    .on('alert_incidents')
    .columns(['alert_id', 'incident_id'])
    .execute();
  await db.schema
    .createIndex('alert_incidents_session')
    .on('alert_incidents')
    .columns(['session_id'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('alert_incidents').ifExists().execute();
  await db.schema.dropTable('alert_states').ifExists().execute();
  await db.schema.dropTable('alerts').ifExists().execute();
}

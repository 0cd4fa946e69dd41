import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/**
 * Event retention (issue 12): a tenant's own retention in days (null: the server's
 * `LIVELINE_EVENT_RETENTION_DAYS`; 0: forever), and the index both the retention sweep and the
 * tenant export walk — a tenant's sessions by start time, `(tenant_id, started_at, session_id)`, so
 * "this tenant's sessions started before the cutoff" and "after this export cursor" are one index
 * range read in order, however many sessions the tenant has. Events need no new index: the sweep
 * deletes a session's events through the primary key `(session_id, event_id)` (events/README.md).
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('tenants').addColumn('event_retention_days', 'integer').execute();
  await db.schema
    .createIndex('sessions_tenant_started')
    .on('sessions')
    .columns(['tenant_id', 'started_at', 'session_id'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('sessions_tenant_started').ifExists().execute();
  await db.schema.alterTable('tenants').dropColumn('event_retention_days').execute();
}

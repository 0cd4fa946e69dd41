import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/**
 * `commands_idempotency` (unique: tenant, session, key; migration 002) held an entry for every command,
 * though most have no key: now only those with one (`where idempotency_key is not null`). A command
 * without a key costs its writer one index entry less, and the index stops growing with the history of
 * keyless commands. A lookup by key (`idempotency_key = ?`) implies the condition on both stores, so it
 * still reads the index; uniqueness among keys is as before (rows without a key never collided).
 *
 * (`commands_expiry` stays whole: made partial on open statuses, the planners chose it over
 * `commands_open` for a session's open commands, a scan of every session's.)
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('commands_idempotency').execute();
  await sql`create unique index commands_idempotency on commands (tenant_id, session_id, idempotency_key) where idempotency_key is not null`.execute(
    db,
  );
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('commands_idempotency').execute();
  await db.schema
    .createIndex('commands_idempotency')
    .on('commands')
    .columns(['tenant_id', 'session_id', 'idempotency_key'])
    .unique()
    .execute();
}

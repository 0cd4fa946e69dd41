import type { Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe tables before the typed schema knows them.
// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/**
 * The first answer to a command request made with an `Idempotency-Key` (CONTRACT §3), kept as it was
 * sent — status code and body text — so that a retry gets it again byte for byte, whatever the
 * command has come to since. One row per keyed command; plain commands have none. (Commands may now
 * also end `cancelled`: `status` is free text, so that needs no change.)
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('command_answers')
    .addColumn('command_id', 'text', (c) => c.primaryKey())
    .addColumn('status_code', 'integer', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('command_answers').ifExists().execute();
}

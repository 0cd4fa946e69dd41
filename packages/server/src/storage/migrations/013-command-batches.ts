import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/**
 * Cohort-wide commands (CONTRACT §12). Each command of a batch is an ordinary row of `commands`,
 * stamped with its batch (`batch_id`, null for a per-session command); `commands_batch` (partial:
 * only stamped rows, so per-session commands cost it nothing) serves a batch's counts and its
 * per-session list in session order. `command_batches` is the batch itself: whose it is, which
 * cohort, how many live sessions it was sent to, and — for a request with an `Idempotency-Key` —
 * the key, the request's digest and the first answer as it was sent. `command_batch_refusals` holds
 * the sessions whose state refused the command (no command row): code and detail.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('commands').addColumn('batch_id', 'text').execute();
  await sql`create index commands_batch on commands (batch_id, session_id) where batch_id is not null`.execute(
    db,
  );
  await db.schema
    .createTable('command_batches')
    .addColumn('batch_id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('tenant_cohort_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('issued_at', 'bigint', (c) => c.notNull())
    .addColumn('total', 'integer', (c) => c.notNull())
    .addColumn('idempotency_key', 'text')
    .addColumn('request_hash', 'text')
    // The first 202 body, exactly as sent (null until the batch has been issued).
    .addColumn('answer', 'text')
    .execute();
  await db.schema
    .createIndex('command_batches_idempotency')
    .on('command_batches')
    .columns(['tenant_id', 'idempotency_key'])
    .unique()
    .execute();
  await db.schema
    .createTable('command_batch_refusals')
    .addColumn('batch_id', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('code', 'text', (c) => c.notNull())
    .addColumn('detail', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('command_batch_refusals_pk', ['batch_id', 'session_id'])
    .execute();
  // Retention deletes a session's refusals with its commands.
  await db.schema
    .createIndex('command_batch_refusals_session')
    .on('command_batch_refusals')
    .columns(['session_id'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('command_batch_refusals').ifExists().execute();
  await db.schema.dropTable('command_batches').ifExists().execute();
  await db.schema.dropIndex('commands_batch').ifExists().execute();
  await db.schema.alterTable('commands').dropColumn('batch_id').execute();
}

import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/**
 * Screenshots (CONTRACT §14): one row per uploaded image, the bytes themselves in the blob store
 * (`blobs/`). A row is written before its blob with `event_id` null (pending); the transaction that
 * stores the `Screenshot` event sets `event_id`. A row still pending an hour later is an upload that
 * never finished (a crash between the blob and the event): the sweep deletes its blob and the row.
 * `screenshots_session` finds a session's images by event id (retention); `screenshots_pending`
 * (partial: only pending rows) serves the sweep.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('screenshots')
    .addColumn('image_id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('event_id', 'text')
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('width', 'integer', (c) => c.notNull())
    .addColumn('height', 'integer', (c) => c.notNull())
    .addColumn('size_bytes', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('screenshots_session')
    .on('screenshots')
    .columns(['session_id', 'event_id'])
    .execute();
  await sql`create index screenshots_pending on screenshots (created_at) where event_id is null`.execute(db);
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('screenshots').ifExists().execute();
}

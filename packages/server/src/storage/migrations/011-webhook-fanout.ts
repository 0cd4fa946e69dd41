import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/**
 * Webhook fan-out off the ingestion path. `webhook_fanout` holds, per ingestion group and tenant
 * (a big group in chunks of up to 500 events), the `session.event` messages with the endpoints each
 * goes to: one row written in the ingestion transaction instead of a delivery row per event per
 * endpoint. The dispatcher expands it
 * into `webhook_deliveries` and deletes it in one transaction. `webhook_endpoints.batch` (0/1): the
 * endpoint takes its `session.event` messages in batches of up to 100 per request.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .alterTable('webhook_endpoints')
    .addColumn('batch', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .createTable('webhook_fanout')
    // UUIDv7: expansion takes the oldest first, in primary key order.
    .addColumn('fanout_id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    // The message bodies back to back, exactly as they will be sent (no escaping: cheap to write).
    .addColumn('messages', 'text', (c) => c.notNull())
    // JSON: [[eventType, length], ...], where each body ends (lengths in UTF-16 code units).
    .addColumn('layout', 'text', (c) => c.notNull())
    // JSON: [[webhookId, null | [message index, ...]], ...] (null: every message).
    .addColumn('targets', 'text', (c) => c.notNull())
    // The per-event deliveries it stands for (messages × their endpoints): the outbox depth gauge.
    .addColumn('deliveries', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('webhook_fanout').ifExists().execute();
  await db.schema.alterTable('webhook_endpoints').dropColumn('batch').execute();
}

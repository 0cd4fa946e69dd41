import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/** The webhooks module's tables: endpoints, the outbox of deliveries, and the attempts log. */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('webhook_endpoints')
    .addColumn('webhook_id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.tenant_id'))
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('event_types', 'text')
    .addColumn('types', 'text')
    .addColumn('enabled', 'integer', (c) => c.notNull())
    .addColumn('disabled_reason', 'text')
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('previous_secret', 'text')
    .addColumn('previous_secret_until', 'bigint')
    .addColumn('failing_since', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('webhook_endpoints_tenant')
    .on('webhook_endpoints')
    .columns(['tenant_id', 'webhook_id'])
    .execute();

  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('delivery_id', 'text', (c) => c.primaryKey())
    .addColumn('webhook_id', 'text', (c) => c.notNull())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('event_type', 'text')
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull())
    .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
    .addColumn('claim_id', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('last_attempt_at', 'bigint')
    .addColumn('last_status_code', 'integer')
    .addColumn('last_error', 'text')
    .addColumn('completed_at', 'bigint')
    .execute();
  // What the dispatcher claims from: pending rows in due order.
  await db.schema
    .createIndex('webhook_deliveries_due')
    .on('webhook_deliveries')
    .columns(['status', 'next_attempt_at'])
    .execute();
  // One endpoint's deliveries by status, oldest first (delivery ids are UUIDv7: time-ordered): the
  // delivery log, and the dispatcher's look at one endpoint's due rows.
  await db.schema
    .createIndex('webhook_deliveries_endpoint')
    .on('webhook_deliveries')
    .columns(['webhook_id', 'status', 'delivery_id'])
    .execute();

  await db.schema
    .createTable('webhook_attempts')
    .addColumn('attempt_id', 'text', (c) => c.primaryKey())
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('webhook_id', 'text', (c) => c.notNull())
    .addColumn('attempted_at', 'bigint', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('latency_ms', 'integer', (c) => c.notNull())
    .addColumn('error', 'text')
    .execute();
  await db.schema
    .createIndex('webhook_attempts_delivery')
    .on('webhook_attempts')
    .columns(['delivery_id', 'attempt_id'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  for (const table of ['webhook_attempts', 'webhook_deliveries', 'webhook_endpoints']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}

import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/**
 * Operational webhooks (CONTRACT §16): `webhook_endpoints.outage_since` — the start of a failing run
 * that is worth reporting as `webhook.endpoint.recovered` when the endpoint next answers 2xx: one in
 * which a retry failed too, or which got the endpoint disabled. Unlike `failing_since` (which
 * re-enabling clears, so the endpoint gets a fresh `LIVELINE_WEBHOOK_DISABLE_AFTER_S`), it survives a
 * re-enable: the first success afterwards reports the recovery. Null while there is nothing to report.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('webhook_endpoints').addColumn('outage_since', 'bigint').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('webhook_endpoints').dropColumn('outage_since').execute();
}

import type { Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe tables before the typed schema knows them.
// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/**
 * Revocation (CONTRACT §15).
 *
 * - `oauth_clients` keeps the digest of the secret a rotation replaced, and until when it still works
 *   (24 h, or never with `immediately`).
 * - `player_token_revocations`: per tenant and player, the time before which the player's device
 *   tokens were issued are refused. A row older than the longest token lifetime refuses nothing that
 *   could still be valid, and is deleted.
 * - `revoked_at` is read by time range (every process keeps the revoked clients in memory and asks
 *   only for what changed since it last looked).
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('oauth_clients').addColumn('previous_secret_digest', 'text').execute();
  await db.schema.alterTable('oauth_clients').addColumn('previous_secret_expires_at', 'bigint').execute();
  await db.schema.createIndex('oauth_clients_revoked').on('oauth_clients').columns(['revoked_at']).execute();

  await db.schema
    .createTable('player_token_revocations')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('player_id', 'text', (c) => c.notNull())
    .addColumn('not_before', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('player_token_revocations_pk', ['tenant_id', 'player_id'])
    .execute();
  await db.schema
    .createIndex('player_token_revocations_time')
    .on('player_token_revocations')
    .columns(['not_before'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('player_token_revocations').ifExists().execute();
  await db.schema.dropIndex('oauth_clients_revoked').ifExists().execute();
  await db.schema.alterTable('oauth_clients').dropColumn('previous_secret_expires_at').execute();
  await db.schema.alterTable('oauth_clients').dropColumn('previous_secret_digest').execute();
}

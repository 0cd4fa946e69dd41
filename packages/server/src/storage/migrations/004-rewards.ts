import { type Kysely, SqliteAdapter } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/** The rewards module's tables: campaigns, their challenges, and the players' claims. */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('campaigns')
    .addColumn('campaign_id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.tenant_id'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('timezone', 'text', (c) => c.notNull())
    .addColumn('starts_at', 'bigint')
    .addColumn('ends_at', 'bigint')
    .addColumn('redemption', 'text', (c) => c.notNull())
    .addColumn('secret_digest', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('campaigns_tenant')
    .on('campaigns')
    .columns(['tenant_id', 'created_at', 'campaign_id'])
    .execute();

  await db.schema
    .createTable('challenges')
    .addColumn('challenge_id', 'text', (c) => c.primaryKey())
    .addColumn('campaign_id', 'text', (c) => c.notNull().references('campaigns.campaign_id'))
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('reward_code', 'text', (c) => c.notNull())
    .addColumn('reward_title', 'text', (c) => c.notNull())
    .addColumn('reward_requirement', 'text', (c) => c.notNull())
    .addColumn('rule_type', 'text', (c) => c.notNull())
    .addColumn('rule_target', 'integer', (c) => c.notNull())
    .addColumn('image', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('challenges_reward_code')
    .on('challenges')
    .columns(['campaign_id', 'reward_code'])
    .unique()
    .execute();

  // The one dialect difference: how a column numbers itself.
  const sqlite = db.getExecutor().adapter instanceof SqliteAdapter;
  await db.schema
    .createTable('claims')
    .addColumn('claim_id', sqlite ? 'integer' : 'bigint', (c) =>
      sqlite ? c.primaryKey().autoIncrement() : c.primaryKey().generatedByDefaultAsIdentity(),
    )
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('campaign_id', 'text', (c) => c.notNull())
    .addColumn('challenge_id', 'text', (c) => c.notNull().references('challenges.challenge_id'))
    .addColumn('player_id', 'text', (c) => c.notNull())
    .addColumn('reward_code', 'text', (c) => c.notNull())
    .addColumn('display_code', 'text', (c) => c.notNull().unique())
    .addColumn('achievement_code', 'text', (c) => c.notNull().unique())
    .addColumn('redemption', 'text', (c) => c.notNull())
    .addColumn('claimed_at', 'bigint', (c) => c.notNull())
    .addColumn('verified_at', 'bigint')
    .execute();
  // One claim per player per challenge: concurrent claims collide here, and exactly one wins.
  await db.schema
    .createIndex('claims_one_per_player')
    .on('claims')
    .columns(['challenge_id', 'player_id'])
    .unique()
    .execute();
  await db.schema
    .createIndex('claims_player')
    .on('claims')
    .columns(['tenant_id', 'player_id', 'challenge_id'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  for (const table of ['claims', 'challenges', 'campaigns']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}

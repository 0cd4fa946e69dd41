import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('commands')
    .addColumn('command_id', 'text', (c) => c.primaryKey())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('data', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('issued_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('delivered_at', 'bigint')
    .addColumn('settled_at', 'bigint')
    .addColumn('error', 'text')
    .addColumn('idempotency_key', 'text')
    .addColumn('request_hash', 'text')
    .execute();
  await db.schema
    .createIndex('commands_session')
    .on('commands')
    .columns(['session_id', 'status', 'command_id'])
    .execute();
  await db.schema.createIndex('commands_expiry').on('commands').columns(['status', 'expires_at']).execute();
  await db.schema
    .createIndex('commands_idempotency')
    .on('commands')
    .columns(['tenant_id', 'session_id', 'idempotency_key'])
    .unique()
    .execute();

  // One row per session: the current stream and recording state.
  await db.schema
    .createTable('session_streams')
    .addColumn('session_id', 'text', (c) => c.primaryKey())
    .addColumn('stream_state', 'text', (c) => c.notNull())
    .addColumn('streaming_session_id', 'text')
    .addColumn('resolution', 'integer')
    .addColumn('aspectratio', 'integer')
    .addColumn('stream_started_at', 'bigint')
    .addColumn('stream_command_id', 'text')
    .addColumn('recording_state', 'text', (c) => c.notNull())
    .addColumn('recording_id', 'text')
    .addColumn('recording_started_at', 'bigint')
    .addColumn('recording_command_id', 'text')
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('session_streams_state')
    .on('session_streams')
    .columns(['stream_state'])
    .execute();

  // Every stream that ran: what challenge progress is computed from.
  await db.schema
    .createTable('stream_intervals')
    .addColumn('streaming_session_id', 'text', (c) => c.primaryKey())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('player_id', 'text', (c) => c.notNull())
    .addColumn('started_at', 'bigint', (c) => c.notNull())
    .addColumn('stopped_at', 'bigint')
    .addColumn('stop_reason', 'text')
    .execute();
  await db.schema
    .createIndex('stream_intervals_player')
    .on('stream_intervals')
    .columns(['tenant_id', 'player_id', 'started_at'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  for (const table of ['stream_intervals', 'session_streams', 'commands']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}

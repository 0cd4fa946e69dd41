import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/**
 * A session's open commands (queued or delivered: what a reconnecting device is sent, page by page,
 * and what the queue quota counts) in command order, from an index of open commands only: however
 * long the session's history, a replay reads its open commands and nothing else, already in order.
 * It replaces `commands_session` (session, status, command: two ranges to merge and sort), next to
 * which the planner preferred walking the whole history through `commands_session_id` (migration
 * 008). Both stores keep partial indexes; the queries name the statuses literally (`OPEN` in the
 * commands store), which the planners need to see the index applies.
 */
export async function up(db: AnyDb): Promise<void> {
  await sql`create index commands_open on commands (session_id, command_id) where status in ('queued', 'delivered')`.execute(
    db,
  );
  await db.schema.dropIndex('commands_session').ifExists().execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema
    .createIndex('commands_session')
    .ifNotExists()
    .on('commands')
    .columns(['session_id', 'status', 'command_id'])
    .execute();
  await db.schema.dropIndex('commands_open').ifExists().execute();
}

import { type Kysely, SqliteAdapter, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/**
 * The order in which events became visible, for the live tail (CONTRACT §11, modules/tail): a reader
 * resumes after the last event it got with no gap and no repeat, which needs an order that a later
 * commit can never fall behind.
 *
 * SQLite: the rowid. One writer commits one transaction at a time and each insert takes the next
 * rowid, so what a reader can see is always every rowid up to some value. Nothing to add.
 *
 * PostgreSQL: `tx`, the writing transaction's id. Several transactions write events at once and commit
 * in any order, so ids are not visible in order; but every transaction older than the oldest one still
 * running (`pg_snapshot_xmin`) has finished, so events with `tx` below that bound are final, and the
 * tail reads only those, in (tx, session, event id) order. The column is added without a default
 * first (no rewrite of an existing table; events stored before this migration have none and are not
 * tailed), then given one for new rows. A BRIN index serves `tx > cursor` and costs ingestion next to
 * nothing (tx grows with the table's physical order).
 */
const isSqlite = (db: AnyDb) => db.getExecutor().adapter instanceof SqliteAdapter;

export async function up(db: AnyDb): Promise<void> {
  if (isSqlite(db)) return;
  await sql`alter table events add column tx bigint`.execute(db);
  await sql`alter table events alter column tx set default (pg_current_xact_id()::text::bigint)`.execute(db);
  await sql`create index events_tx on events using brin (tx)`.execute(db);
}

export async function down(db: AnyDb): Promise<void> {
  if (isSqlite(db)) return;
  await sql`drop index if exists events_tx`.execute(db);
  await sql`alter table events drop column if exists tx`.execute(db);
}

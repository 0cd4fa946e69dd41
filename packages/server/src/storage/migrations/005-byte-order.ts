import { type Kysely, SqliteAdapter, sql } from 'kysely';

// Migrations take Kysely<any>: they describe tables before the typed schema knows them.
// biome-ignore lint/suspicious/noExplicitAny: schema-building code is untyped by nature
type AnyDb = Kysely<any>;

/**
 * Text the server sorts or compares by range, compared byte by byte on PostgreSQL as on SQLite
 * (whose BINARY collation is `memcmp` of UTF-8; PostgreSQL's "C" is the same). Without it PostgreSQL
 * orders by the database's default collation: under `en_US` the events `A`, `_x`, `a-b`, `aB`
 * come out as `_x a-b A aB` instead of SQLite's `A _x a-b aB`, and keyset cursors skip or repeat
 * events. Column collations (not `COLLATE` in each query) keep the indexes serving the ordered,
 * keyset-paged reads. See storage/README.md.
 */
const COLUMNS: [table: string, column: string][] = [
  // A session's events: ordered by (timestamp, event_id), paged by a (timestamp, event_id) cursor.
  // event_id is the client's own text (any characters), the column where the order really differs.
  ['events', 'event_id'],
  // Filtered by equality only today; byte order so any later order or range over it agrees too.
  ['events', 'event_type'],
  // Session lists: ties broken by session_id.
  ['sessions', 'session_id'],
  // Live streams, keyset-paged by (started_at, streaming_session_id); a player's intervals.
  ['stream_intervals', 'streaming_session_id'],
];

const isSqlite = (db: AnyDb) => db.getExecutor().adapter instanceof SqliteAdapter;

export async function up(db: AnyDb): Promise<void> {
  // SQLite compares text byte by byte already.
  if (isSqlite(db)) return;
  // Same type, another collation: no table rewrite; the indexes on these columns are rebuilt.
  for (const [table, column] of COLUMNS) {
    await sql`alter table ${sql.table(table)} alter column ${sql.ref(column)} type text collate "C"`.execute(
      db,
    );
  }
}

export async function down(db: AnyDb): Promise<void> {
  if (isSqlite(db)) return;
  for (const [table, column] of COLUMNS) {
    await sql`alter table ${sql.table(table)} alter column ${sql.ref(column)} type text collate "default"`.execute(
      db,
    );
  }
}

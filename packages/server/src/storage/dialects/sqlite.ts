import fs from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect, sql } from 'kysely';
import type { Database } from '../schema.ts';
import type { BulkInserter, Storage } from '../storage.ts';

export interface SqliteOptions {
  dataDir: string;
  synchronous: 'FULL' | 'NORMAL';
}

/** SQLite through better-sqlite3: the embedded default. One file, WAL, one writer. */
export function createSqliteStorage(options: SqliteOptions): Storage {
  fs.mkdirSync(options.dataDir, { recursive: true });
  const file = path.join(options.dataDir, 'liveline.db');
  const handle = new BetterSqlite3(file);
  handle.pragma('journal_mode = WAL');
  // FULL: a committed transaction survives power loss, not only a process crash.
  handle.pragma(`synchronous = ${options.synchronous}`);
  handle.pragma('busy_timeout = 5000');
  handle.pragma('foreign_keys = ON');
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: handle }) });
  const statements = new Map<string, BetterSqlite3.Statement>();
  const bulk: BulkInserter = {
    // One cached prepared statement run per row: the fastest way to load rows into SQLite.
    // The raw handle is safe here: Kysely's SQLite driver has this one connection, and the
    // transaction the caller is in holds it until the callback returns.
    async insertIgnoringConflicts(_trx, spec, rows) {
      const key = `${String(spec.table)}:${spec.columns.map((c) => c.name).join(',')}`;
      let stmt = statements.get(key);
      if (!stmt) {
        const cols = spec.columns.map((c) => `"${c.name}"`).join(', ');
        const marks = spec.columns.map(() => '?').join(', ');
        const conflict = spec.conflict.map((c) => `"${c}"`).join(', ');
        stmt = handle.prepare(
          `insert into "${String(spec.table)}" (${cols}) values (${marks}) on conflict (${conflict}) do nothing`,
        );
        statements.set(key, stmt);
      }
      const inserted = new Array<boolean>(rows.length);
      for (let i = 0; i < rows.length; i++) inserted[i] = stmt.run(rows[i]).changes === 1;
      return inserted;
    },
  };
  return {
    dialect: 'sqlite',
    writeConcurrency: 1,
    skipLocked: false,
    maxBindParameters: 32766,
    db,
    bulk,
    isUniqueViolation: (err) => {
      const code = (err as { code?: unknown } | null)?.code;
      return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
    },
    async ping() {
      await sql`select 1`.execute(db);
    },
    async close() {
      await db.destroy();
    },
  };
}

import fs from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect, sql } from 'kysely';
import type { Database } from '../schema.ts';
import type { Storage } from '../storage.ts';

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
  return {
    dialect: 'sqlite',
    maxBindParameters: 32766,
    db,
    async ping() {
      await sql`select 1`.execute(db);
    },
    async close() {
      await db.destroy();
    },
  };
}

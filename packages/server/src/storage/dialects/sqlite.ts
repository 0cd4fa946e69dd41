import { CompiledQuery, Kysely, type KyselyConfig, SqliteDialect, sql } from 'kysely';
import { prepareDataDir } from '../data-dir.ts';
import type { Database } from '../schema.ts';
import {
  type BulkInserter,
  type BulkTable,
  inOneTransaction,
  runInTransaction,
  type Storage,
  type VisibleOrder,
} from '../storage.ts';
import type BetterSqlite3 from './better-sqlite3.js';
import { openWriter } from './better-sqlite3.js';
import { MainThreadReader, registerBulk, SqliteThread, SqliteThreadDialect } from './sqlite-thread.ts';

export interface SqliteOptions {
  dataDir: string;
  synchronous: 'FULL' | 'NORMAL';
  /**
   * Where statements run. `worker` (the default): a worker thread owns the connection, so no query
   * and no commit's fsync ever blocks the event loop. `main`: better-sqlite3 on the calling thread,
   * as before the worker existed — kept for benchmarks that compare the two.
   */
  thread?: 'worker' | 'main';
  /**
   * With `thread: 'worker'`: where selects outside transactions run. `main` (the default): a
   * read-only connection on the main thread, so reads never queue behind a write transaction;
   * `worker`: every statement in the worker. See the storage README for the measurements.
   */
  reads?: 'worker' | 'main';
  /** Kysely's query log (storage/tracing.ts: a span per statement while tracing). */
  log?: KyselyConfig['log'];
}

const STATEMENT_CACHE_SIZE = 500;

/** SQLite through better-sqlite3: the embedded default. One file, WAL, one writer. */
export async function createSqliteStorage(options: SqliteOptions): Promise<Storage> {
  const file = prepareDataDir(options.dataDir);
  if (options.thread === 'main') return onMainThread(file, options.synchronous);

  const thread = await SqliteThread.start({
    file,
    synchronous: options.synchronous,
    statementCacheSize: STATEMENT_CACHE_SIZE,
  });
  let reader: MainThreadReader | null = null;
  try {
    if (options.reads !== 'worker') reader = new MainThreadReader(file);
  } catch (err) {
    await thread.close();
    throw err;
  }
  const dialect = new SqliteThreadDialect({ thread, reader });
  const db = new Kysely<Database>({ dialect, log: options.log });
  const bulk: BulkInserter = {
    // The whole batch goes to the worker in one message, on the connection of the transaction
    // `trx`; there one cached prepared statement runs per row.
    async insertIgnoringConflicts(trx, spec, rows) {
      if (rows.length === 0) return [];
      const query = CompiledQuery.raw(insertSql(spec));
      registerBulk(query, query.sql, rows);
      const result = await trx.executeQuery<{ inserted: Uint8Array }>(query);
      const flags = result.rows[0].inserted;
      const inserted = new Array<boolean>(rows.length);
      for (let i = 0; i < rows.length; i++) inserted[i] = flags[i] === 1;
      return inserted;
    },
  };
  return sqliteStorage(
    db,
    bulk,
    (statements, options) => dialect.atomically(statements, options),
    async (_trx, statement) => dialect.pipeline(statement),
    async () => {
      await db.destroy();
      // Also when no query ever ran (Kysely then never started its driver, nor destroys it).
      reader?.close();
      await thread.close();
    },
  );
}

/** The connection on the calling thread: every statement and commit blocks it. */
function onMainThread(file: string, synchronous: SqliteOptions['synchronous']): Storage {
  const handle = openWriter(file, synchronous);
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: handle }) });
  const statements = new Map<string, BetterSqlite3.Statement>();
  const bulk: BulkInserter = {
    // One cached prepared statement run per row. The raw handle is safe here: Kysely's SQLite
    // driver has this one connection, and the transaction the caller is in holds it.
    async insertIgnoringConflicts(_trx, spec, rows) {
      const text = insertSql(spec);
      let stmt = statements.get(text);
      if (!stmt) {
        stmt = handle.prepare(text);
        statements.set(text, stmt);
      }
      const inserted = new Array<boolean>(rows.length);
      for (let i = 0; i < rows.length; i++) inserted[i] = stmt.run(rows[i]).changes === 1;
      return inserted;
    },
  };
  return sqliteStorage(
    db,
    bulk,
    (statements) => inOneTransaction(db, statements),
    runInTransaction,
    () => db.destroy(),
  );
}

const insertSqlCache = new WeakMap<object, string>();

function insertSql<T extends keyof Database>(spec: BulkTable<T>): string {
  let text = insertSqlCache.get(spec);
  if (text === undefined) {
    const cols = spec.columns.map((c) => `"${c.name}"`).join(', ');
    const marks = spec.columns.map(() => '?').join(', ');
    const conflict = spec.conflict.map((c) => `"${c}"`).join(', ');
    text = `insert into "${String(spec.table)}" (${cols}) values (${marks}) on conflict (${conflict}) do nothing`;
    insertSqlCache.set(spec, text);
  }
  return text;
}

/** One writer commits one transaction at a time and each insert takes the next rowid. */
const visibleOrder: VisibleOrder = {
  seq: sql<number>`e.rowid`,
  final: null,
  ties: false,
  async head(db) {
    const { rows } = await sql<{ seq: number | null }>`select max(rowid) as seq from events`.execute(db);
    return Number(rows[0]?.seq ?? 0);
  },
};

function sqliteStorage(
  db: Kysely<Database>,
  bulk: BulkInserter,
  atomically: Storage['atomically'],
  pipeline: Storage['pipeline'],
  close: () => Promise<void>,
): Storage {
  return {
    atomically,
    pipeline,
    dialect: 'sqlite',
    writeConcurrency: 1,
    skipLocked: false,
    maxBindParameters: 32766,
    db,
    bulk,
    visibleOrder,
    isUniqueViolation: (err) => {
      const code = (err as { code?: unknown } | null)?.code;
      return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
    },
    async ping() {
      await sql`select 1`.execute(db);
    },
    close,
  };
}

import { Migrator } from 'kysely';
import type { Config } from '../config.ts';
import { createPostgresStorage } from './dialects/postgres.ts';
import { createSqliteStorage } from './dialects/sqlite.ts';
import { migrationProvider } from './migrations/index.ts';
import type { Storage } from './storage.ts';
import { queryLog, traceStorage } from './tracing.ts';

export { dataDirWarnings } from './data-dir.ts';
export { COUNT_BOUND, CursorError, type ListOrder, type Page, type PageSpec, readPage } from './pages.ts';
export type { Database } from './schema.ts';
export { inSnapshot } from './snapshot.ts';
export { CompiledOnce, flatColumns, param, Statement, StatementFamily } from './statement.ts';
export type { CompiledStatement, DialectName, Storage, VisibleOrder } from './storage.ts';
export { runStatements } from './storage.ts';

/** Opens the configured store (PostgreSQL when DATABASE_URL is set, else SQLite) and migrates it. */
export async function openStorage(
  config: Pick<Config, 'databaseUrl' | 'databaseSchema' | 'dataDir' | 'sqliteSynchronous'>,
): Promise<Storage> {
  // With tracing on (tracing.ts, set up before the store opens): a span per statement and per transaction.
  const storage = traceStorage(
    config.databaseUrl
      ? await createPostgresStorage({
          url: config.databaseUrl,
          schema: config.databaseSchema,
          log: queryLog('postgres'),
        })
      : await createSqliteStorage({
          dataDir: config.dataDir,
          synchronous: config.sqliteSynchronous,
          log: queryLog('sqlite'),
        }),
  );
  try {
    await migrate(storage, config.databaseUrl ? config.databaseSchema : undefined);
  } catch (err) {
    await storage.close();
    throw err;
  }
  return storage;
}

/**
 * Applies pending migrations. On PostgreSQL the migrator's own tables live in the deployment's
 * schema: left to itself Kysely would look for them in any schema and skip creating its own.
 */
export async function migrate(storage: Storage, schema?: string): Promise<void> {
  const migrator = new Migrator({
    db: storage.db,
    provider: migrationProvider,
    ...(schema ? { migrationTableSchema: schema } : {}),
  });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error || failed) {
    throw new Error(`migration ${failed?.migrationName ?? ''} failed: ${String(error)}`);
  }
}

import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Database } from '../schema.ts';
import type { Storage } from '../storage.ts';

export interface PostgresOptions {
  url: string;
  schema: string;
  poolSize?: number;
}

const INT8_OID = 20;

/** BIGINT columns hold Unix milliseconds and counts: all well inside 2^53, so they come back as numbers. */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
};

/** PostgreSQL: the production store. `schema` is created when missing and put first on the search path. */
export async function createPostgresStorage(options: PostgresOptions): Promise<Storage> {
  const setup = new pg.Client({ connectionString: options.url });
  await setup.connect();
  try {
    await setup.query(`create schema if not exists "${options.schema}"`);
  } finally {
    await setup.end();
  }
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    options: `-c search_path="${options.schema}"`,
    types,
  });
  // An idle client that loses its connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    dialect: 'postgres',
    maxBindParameters: 65535,
    db,
    async ping() {
      await sql`select 1`.execute(db);
    },
    async close() {
      await db.destroy();
    },
  };
}

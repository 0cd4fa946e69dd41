import {
  type DatabaseIntrospector,
  type DatabaseMetadata,
  Kysely,
  type KyselyConfig,
  PostgresDialect,
  PostgresIntrospector,
  sql,
  type TableMetadata,
} from 'kysely';
import pg from 'pg';
import type { Database } from '../schema.ts';
import {
  type BulkInserter,
  type CompiledStatement,
  inOneTransaction,
  runInTransaction,
  type Storage,
  type VisibleOrder,
} from '../storage.ts';

export interface PostgresOptions {
  url: string;
  schema: string;
  poolSize?: number;
  /** Kysely's query log (storage/tracing.ts: a span per statement while tracing). */
  log?: KyselyConfig['log'];
}

const INT8_OID = 20;

/** BIGINT columns hold Unix milliseconds and counts: all well inside 2^53, so they come back as numbers. */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
};

/**
 * Between the values of a text column sent as one string (`insertIgnoringConflicts`): the record
 * separator, a control character that JSON text never holds raw and ids do not.
 */
const SEPARATOR = '\u001e';

/** Whether a value can travel in a joined text column: a string without the separator. */
function joinable(value: unknown): boolean {
  return typeof value === 'string' && !value.includes(SEPARATOR);
}

/** PostgreSQL: the production store. `schema` is created when missing and put first on the search path. */
/**
 * Transactions commit in any order: an event is final once every transaction older than the one
 * that wrote it has ended, and "now" is just before the oldest transaction still running.
 */
const visibleOrder: VisibleOrder = {
  seq: sql<number>`e.tx`,
  final: sql<boolean>`e.tx < pg_snapshot_xmin(pg_current_snapshot())::text::bigint`,
  ties: true,
  async head(db) {
    const { rows } = await sql<{
      seq: string;
    }>`select pg_snapshot_xmin(pg_current_snapshot())::text::bigint - 1 as seq`.execute(db);
    return Number(rows[0].seq);
  },
};

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
  const db = new Kysely<Database>({ dialect: new SchemaPostgresDialect({ pool }), log: options.log });
  const bulk: BulkInserter = {
    // One statement for the whole set: each column travels as one parameter and `rows from` zips
    // them back into rows, so the statement text is the same whatever the row count. A text column
    // travels as its values joined by a separator none of them holds, split by string_to_table():
    // no quoting or escaping of each value (an array literal doubles every `"` and `\` of a JSON
    // body, on both sides of the wire); otherwise as an array, split by unnest().
    async insertIgnoringConflicts(trx, spec, rows) {
      if (rows.length === 0) return [];
      const cols = spec.columns.map((c) => sql.id(c.name));
      const columns = spec.columns.map((c, i) => {
        const values = rows.map((r) => r[i]);
        // (One empty string would split into no value at all.)
        if (c.type === 'text' && values.every(joinable) && (values.length > 1 || values[0] !== ''))
          return sql`string_to_table(${values.join(SEPARATOR)}, ${SEPARATOR})`;
        return sql`unnest(${values}::${sql.raw(c.type)}[])`;
      });
      const conflict = spec.conflict.map((c) => sql.id(c));
      const result = await sql<Record<string, unknown>>`
        insert into ${sql.table(String(spec.table))} (${sql.join(cols)})
        select * from rows from (${sql.join(columns)})
        on conflict (${sql.join(conflict)}) do nothing
        returning ${sql.join(conflict)}`.execute(trx);
      const keyIndexes = spec.conflict.map((c) => spec.columns.findIndex((col) => col.name === c));
      const inserted = new Set(result.rows.map((r) => spec.conflict.map((c) => String(r[c])).join('\u0000')));
      return rows.map((row) => inserted.has(keyIndexes.map((i) => String(row[i])).join('\u0000')));
    },
  };
  return {
    dialect: 'postgres',
    writeConcurrency: 4,
    skipLocked: true,
    maxBindParameters: 65535,
    db,
    bulk,
    visibleOrder,
    atomically: (statements) => atomically(pool, db, statements),
    pipeline: runInTransaction,
    isUniqueViolation: (err) => (err as { code?: unknown } | null)?.code === '23505',
    async ping() {
      await sql`select 1`.execute(db);
    },
    async close() {
      await db.destroy();
    },
  };
}

/**
 * `Storage.atomically` in one round trip: the statements go as one query of the simple protocol, their
 * parameters written in as literals, and PostgreSQL runs a query of several statements as one implicit
 * transaction (all or nothing; a failure aborts the rest). Through the extended protocol, which takes
 * parameters but one statement at a time (node-postgres does not pipeline), a group of the command log —
 * BEGIN, its inserts, the acks' row locks and updates, COMMIT — was five round trips, each waiting for
 * the event loop's turn on a busy process. Values are strings (`pg.escapeLiteral`, which doubles quotes
 * and backslashes), finite numbers, booleans and nulls; a statement with any other value, or a string
 * holding U+0000 (which would end the query's text), goes through `inOneTransaction` as before.
 */
async function atomically(
  pool: pg.Pool,
  db: Kysely<Database>,
  statements: readonly CompiledStatement[],
): Promise<Record<string, unknown>[][]> {
  if (statements.length < 2) return inOneTransaction(db, statements);
  const texts: string[] = [];
  for (const statement of statements) {
    const text = inlined(statement);
    if (text === undefined) return inOneTransaction(db, statements);
    texts.push(text);
  }
  const results = (await pool.query(texts.join(';\n'))) as unknown as pg.QueryResult[];
  return results.map((r) => r.rows);
}

/** The statement's text with each `$n` replaced by its parameter as a literal; undefined if one cannot be. */
export function inlined({ sql: text, parameters }: CompiledStatement): string | undefined {
  const literals: string[] = [];
  for (const value of parameters) {
    const literal = asLiteral(value);
    if (literal === undefined) return undefined;
    literals.push(literal);
  }
  return text.replace(/\$(\d+)/g, (_, n: string) => literals[Number(n) - 1]);
}

function asLiteral(value: unknown): string | undefined {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return value.includes('\u0000') ? undefined : pg.escapeLiteral(value);
  // In parentheses, so that a negative number after an operator cannot make `--`, a comment.
  if (typeof value === 'number') return Number.isFinite(value) ? `(${value})` : undefined;
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  return undefined;
}

/**
 * Kysely's PostgreSQL dialect with an introspector that lists only the tables of this deployment's
 * schema (the first on the search path). The migrator asks for the tables to find its own; Kysely's
 * introspector reads every schema of the database and resolves each schema's name as it goes, so a
 * schema dropped meanwhile by anyone sharing the database (another deployment, a test finishing)
 * failed the migration with `schema "…" does not exist` — and it grew with the number of schemas.
 */
class SchemaPostgresDialect extends PostgresDialect {
  override createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    const general = new PostgresIntrospector(db);
    const getTables = async (): Promise<TableMetadata[]> => {
      const { rows } = await sql<{ name: string; schema: string; isView: boolean }>`
        select c.relname as name, n.nspname as schema, c.relkind = 'v' as "isView"
        from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
        where n.nspname = current_schema() and c.relkind in ('r', 'v', 'p')
        order by c.relname`.execute(db);
      return rows.map((r) => ({ ...r, columns: [] }));
    };
    return {
      getSchemas: () => general.getSchemas(),
      getTables,
      getMetadata: async (): Promise<DatabaseMetadata> => ({ tables: await getTables() }),
    };
  }
}

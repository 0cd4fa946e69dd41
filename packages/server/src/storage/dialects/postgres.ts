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
    // Not durable (`durable: false`): the transaction does not wait for its WAL to be flushed.
    atomically: async (statements, options) =>
      options?.durable === false && statements.length > 0
        ? (await atomically(pool, db, [LAZY_COMMIT, ...statements])).slice(1)
        : atomically(pool, db, statements),
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
 * The first statement of a `durable: false` transaction: its COMMIT returns before its WAL is flushed
 * (a crash of PostgreSQL or the machine may lose it; nothing is left half-written), for that
 * transaction only. It works in the implicit transaction of a query of several statements too.
 */
const LAZY_COMMIT: CompiledStatement = { sql: 'set local synchronous_commit = off', parameters: [] };

/**
 * `Storage.atomically` in one round trip: the statements go as one query of the simple protocol, their
 * parameters written in as literals, and PostgreSQL runs a query of several statements as one implicit
 * transaction (all or nothing; a failure aborts the rest). Through the extended protocol, which takes
 * parameters but one statement at a time (node-postgres does not pipeline), a group of the command log —
 * BEGIN, its inserts, the acks' row locks and updates, COMMIT — was five round trips, each waiting for
 * the event loop's turn on a busy process. Values are strings (`pg.escapeLiteral`, which doubles quotes
 * and backslashes), finite numbers, booleans and nulls; a statement with any other value, or a string
 * holding U+0000 (which would end the query's text), goes through `inOneTransaction` as before.
 *
 * A statement marked `prepare` is a prepared statement of the connection (`PREPARE` the first time the
 * connection sees its text, in the same query; `EXECUTE name(literals…)` after): PostgreSQL parses it
 * once per connection and can keep its plan, where with its values written in it was parsed and planned
 * every time — the webhook claim, planned in 0.8 ms, ran in 1.3. The others are written in: a small
 * insert or update costs PostgreSQL more as an EXECUTE than as itself.
 */
async function atomically(
  pool: pg.Pool,
  db: Kysely<Database>,
  statements: readonly CompiledStatement[],
): Promise<Record<string, unknown>[][]> {
  if (statements.length < 2) return inOneTransaction(db, statements);
  const args: string[][] = [];
  for (const statement of statements) {
    const literals = literalsOf(statement.parameters);
    if (literals === undefined) return inOneTransaction(db, statements);
    args.push(literals);
  }
  const client = await pool.connect();
  const names = preparedOf(client);
  const texts: string[] = [];
  const executes: number[] = [];
  const preparing: string[] = [];
  statements.forEach((statement, i) => {
    if (!statement.prepare || unpreparable.has(statement.sql)) {
      executes.push(texts.length);
      texts.push(withLiterals(statement.sql, args[i]));
      return;
    }
    let name = names.get(statement.sql);
    if (name === undefined) {
      preparing.push(statement.sql);
      if (names.size >= MAX_PREPARED) {
        texts.push('deallocate all');
        names.clear();
      }
      name = `ll_${(nextPrepared++).toString(36)}`;
      names.set(statement.sql, name);
      texts.push(`prepare ${name} as ${statement.sql}`);
    }
    executes.push(texts.length);
    texts.push(args[i].length === 0 ? `execute ${name}` : `execute ${name}(${args[i].join(', ')})`);
  });
  let results: pg.QueryResult[];
  try {
    results = (await client.query(texts.join(';\n'))) as unknown as pg.QueryResult[];
  } catch (err) {
    // Which of this query's PREPAREs ran before it failed is not known: the connection goes. One that
    // prepared nothing (a unique violation, say: an idempotency race) keeps its connection, which still
    // holds what `names` says.
    client.release(preparing.length > 0);
    // A parameter whose type only its value tells (`? is null`) cannot be prepared: such a statement
    // is written with its values in, as before, from now on. The failed query wrote nothing.
    if (preparing.length > 0 && cannotPrepare(err) && (await findUnpreparable(pool, preparing))) {
      return atomically(pool, db, statements);
    }
    throw err;
  }
  client.release();
  return executes.map((i) => results[i].rows);
}

/** Prepared statements one connection keeps (`atomically`); past this many it deallocates them all. */
const MAX_PREPARED = 256;
let nextPrepared = 0;
const prepared = new WeakMap<pg.PoolClient, Map<string, string>>();
/** Statement texts PostgreSQL could not prepare (a parameter of no knowable type), sent with their values in. */
const unpreparable = new Set<string>();

/** The statements prepared on this connection: name by text. */
function preparedOf(client: pg.PoolClient): Map<string, string> {
  let names = prepared.get(client);
  if (names === undefined) {
    names = new Map();
    prepared.set(client, names);
  }
  return names;
}

/** PostgreSQL's answer to a parameter of no knowable type (`indeterminate_datatype`, `ambiguous_parameter`). */
const cannotPrepare = (err: unknown) => {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '42P18' || code === '42P08';
};

/** Prepares each text alone to learn which cannot be (`unpreparable`); whether any was found. */
async function findUnpreparable(pool: pg.Pool, texts: readonly string[]): Promise<boolean> {
  const client = await pool.connect();
  let found = false;
  try {
    for (const text of texts) {
      try {
        await client.query(`prepare ll_probe as ${text}`);
        await client.query('deallocate ll_probe');
      } catch (err) {
        if (!cannotPrepare(err)) throw err;
        unpreparable.add(text);
        found = true;
      }
    }
  } finally {
    client.release();
  }
  return found;
}

/** Each parameter as a literal; undefined if one cannot be. */
function literalsOf(parameters: readonly unknown[]): string[] | undefined {
  const literals: string[] = [];
  for (const value of parameters) {
    const literal = asLiteral(value);
    if (literal === undefined) return undefined;
    literals.push(literal);
  }
  return literals;
}

/** The statement's text with each `$n` replaced by its parameter as a literal; undefined if one cannot be. */
export function inlined({ sql: text, parameters }: CompiledStatement): string | undefined {
  const literals = literalsOf(parameters);
  return literals === undefined ? undefined : withLiterals(text, literals);
}

/** `text` with each `$n` replaced by the n-th literal. */
const withLiterals = (text: string, literals: readonly string[]) =>
  text.replace(/\$(\d+)/g, (_, n: string) => literals[Number(n) - 1]);

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

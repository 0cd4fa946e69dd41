import { type Compilable, CompiledQuery, type Kysely } from 'kysely';
import type { Database } from './schema.ts';
import type { CompiledStatement, DialectName } from './storage.ts';

/**
 * A fixed SQL statement run without the query builder, for the few statements on the hottest paths
 * (a command's insert and its ack): building and compiling a Kysely query costs more than running
 * it there. Written once with `?` placeholders; PostgreSQL gets `$1, $2, …`. Everywhere else,
 * use the query builder.
 */
export class Statement {
  private readonly texts = new Map<DialectName, string>();

  /**
   * `prepare`: on PostgreSQL, `Storage.atomically` prepares the statement on its connection and runs it
   * by name (`CompiledStatement.prepare`) — for a statement whose planning costs more than running it.
   */
  constructor(
    private readonly text: string,
    private readonly options: { prepare?: boolean } = {},
  ) {}

  run<R>(db: Kysely<Database>, dialect: DialectName, parameters: readonly unknown[]): Promise<R[]> {
    return db
      .executeQuery<R>(CompiledQuery.raw(this.textFor(dialect), [...parameters]))
      .then((result) => result.rows);
  }

  /** The statement with its parameters, for `Storage.atomically`. */
  bind(dialect: DialectName, parameters: readonly unknown[]): CompiledStatement {
    const sql = this.textFor(dialect);
    return this.options.prepare ? { sql, parameters, prepare: true } : { sql, parameters };
  }

  private textFor(dialect: DialectName): string {
    let text = this.texts.get(dialect);
    if (text === undefined) {
      let n = 0;
      text = dialect === 'postgres' ? this.text.replace(/\?/g, () => `$${++n}`) : this.text;
      this.texts.set(dialect, text);
    }
    return text;
  }
}

/**
 * The `columns` of `rows` back to back, one flat array filled in place: the values of a multi-row
 * statement. (A `flatMap` of a `map` a row costs several times as much in V8: ~10 µs against ~1.3 for
 * four rows of 14 columns, on a hot path that runs for every group commit.)
 */
export function flatColumns<R, C extends keyof R>(rows: readonly R[], columns: readonly C[]): unknown[] {
  const values = new Array<unknown>(rows.length * columns.length);
  let k = 0;
  for (const row of rows) for (const column of columns) values[k++] = row[column];
  return values;
}

/** Statements that differ only in how many rows (or pairs) they carry, made once per count. */
export class StatementFamily {
  private readonly made = new Map<number, Statement>();

  constructor(
    private readonly make: (count: number) => string,
    private readonly options: { prepare?: boolean } = {},
  ) {}

  /** `insert into <table> (<columns>) values (?, …), (?, …)…`: one statement per number of rows. */
  static insert(table: string, columns: readonly string[]): StatementFamily {
    const row = `(${columns.map(() => '?').join(', ')})`;
    return new StatementFamily(
      (n) => `insert into ${table} (${columns.join(', ')}) values ${Array(n).fill(row).join(', ')}`,
    );
  }

  /**
   * `select <key> from <table> where <key> in (?, …) order by <orderBy> for update`: PostgreSQL locks
   * the rows in that order (an update by `in (…)` or a join locks them in the plan's order).
   */
  static lockInOrder(table: string, key: string, orderBy: string = key): StatementFamily {
    return new StatementFamily(
      (n) =>
        `select ${key} from ${table} where ${key} in (${Array(n).fill('?').join(', ')}) ` +
        `order by ${orderBy} for update`,
    );
  }

  of(count: number): Statement {
    let statement = this.made.get(count);
    if (!statement) {
      statement = new Statement(this.make(count), this.options);
      this.made.set(count, statement);
    }
    return statement;
  }
}

/**
 * A query-builder query compiled once per database (or transaction) and run again with other values:
 * for a select on a hot path, where compiling it costs more than running it (the session read of the
 * live-session cache: ~0.75 % of the main thread at 3,000 commands/s). It stays the builder's query,
 * so SQLite still runs it on the main thread's read-only connection. `build` writes each value as its
 * name, `:name` (`param('name')`); `run` puts the values in by name wherever the compiled SQL takes
 * them, and refuses a name it was not given.
 */
export class CompiledOnce<R> {
  private readonly compiled = new WeakMap<Kysely<Database>, CompiledQuery<R>>();

  constructor(private readonly build: (db: Kysely<Database>) => Compilable<R>) {}

  async run(db: Kysely<Database>, values: Readonly<Record<string, unknown>>): Promise<R[]> {
    let query = this.compiled.get(db);
    if (!query) {
      query = this.build(db).compile();
      this.compiled.set(db, query);
    }
    const parameters = query.parameters.map((p) => {
      const name = typeof p === 'string' && p.startsWith(':') ? p.slice(1) : undefined;
      if (name === undefined || !(name in values)) throw new Error(`CompiledOnce: no value for ${String(p)}`);
      return values[name];
    });
    return (await db.executeQuery<R>({ ...query, parameters })).rows;
  }
}

/** A value of a `CompiledOnce` query, by name. */
export const param = (name: string) => `:${name}`;

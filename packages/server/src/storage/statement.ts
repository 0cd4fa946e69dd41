import { CompiledQuery, type Kysely } from 'kysely';
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

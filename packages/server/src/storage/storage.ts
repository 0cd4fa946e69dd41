import { CompiledQuery, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from './schema.ts';

export type DialectName = 'sqlite' | 'postgres';

/**
 * The one query layer every module uses. What differs between the backends is read from
 * `dialect` (capability flags), never from `if (sqlite)` branches spread through the modules.
 */
export interface Storage {
  readonly dialect: DialectName;
  /** Largest number of bound parameters one statement may carry. */
  readonly maxBindParameters: number;
  /** How many write transactions may usefully run at once (SQLite has one writer). */
  readonly writeConcurrency: number;
  /**
   * Whether `select ... for update skip locked` works: several processes claiming work rows (the
   * webhook outbox) then pass over each other's rows instead of waiting. Without it (SQLite, one
   * writer) a claim is a conditional update, which is just as safe.
   */
  readonly skipLocked: boolean;
  readonly db: Kysely<Database>;
  /** Many-row inserts on the hot paths, written the fastest way each backend allows. */
  readonly bulk: BulkInserter;
  /** The order in which events become visible (the live tail's; migration 012). */
  readonly visibleOrder: VisibleOrder;
  /**
   * Runs fixed statements as one transaction and returns each statement's rows: for a group commit
   * whose statements are all known before it starts (no logic between them). SQLite sends BEGIN,
   * the statements and COMMIT to its writer thread as one message; PostgreSQL runs one transaction.
   * All or nothing: when a statement fails, nothing is written and the promise rejects.
   *
   * `durable: false` is for writes that may be lost on power loss (not on a crash of the process):
   * state that is noted in memory and written a while later anyway, such as device contact. On
   * SQLite the COMMIT then does not wait for the disk (`synchronous = NORMAL` for that transaction):
   * its frames reach the disk with the next durable commit, or a checkpoint, and it does not hold the
   * writer thread for an fsync while durable commits (commands, events) wait behind it. On PostgreSQL
   * the transaction runs with `synchronous_commit = off` (`SET LOCAL`): its COMMIT returns before its
   * WAL is flushed, and a crash of PostgreSQL or the machine may lose it.
   */
  atomically(
    statements: readonly CompiledStatement[],
    options?: { durable?: boolean },
  ): Promise<Record<string, unknown>[][]>;
  /**
   * Runs a write of the transaction `trx` (the caller is inside it) whose answer the caller does not
   * need. SQLite's writer thread gets it at once and the promise resolves at once: the statement runs
   * in order with the transaction's others, and if it fails, the rest of the transaction is refused
   * and its COMMIT fails with that error, writing nothing — so it costs the transaction no round trip
   * (`sqlite-thread.ts` `ThreadConnection.post`). Elsewhere it runs through `trx`, awaited.
   */
  pipeline(trx: Kysely<Database>, statement: CompiledStatement): Promise<void>;
  /** Whether `err` is this backend's report of a unique-index violation. */
  isUniqueViolation(err: unknown): boolean;
  /** Resolves when the store answers a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The order in which stored events become visible, in SQL over the `events` table aliased `e`: a
 * reader that has read every final event up to a position never finds one behind it later. SQLite: the
 * rowid (one writer, one commit at a time). PostgreSQL: the writing transaction's id (`events.tx`);
 * transactions commit in any order, so an event is final only once every transaction older than its
 * own has ended (`tx < pg_snapshot_xmin`), and the events of one transaction are ordered by key.
 */
export interface VisibleOrder {
  /** An event's position. */
  readonly seq: RawBuilder<number>;
  /** Condition that no event committed later can come before this one; null: every visible event. */
  readonly final: RawBuilder<boolean> | null;
  /** Whether events share a `seq` (then ordered by session id and event id, byte order). */
  readonly ties: boolean;
  /** The position of "now": every final event is at or before it, and every later one after. */
  head(db: Kysely<Database>): Promise<number>;
}

/** A statement with its parameters, ready to run (`Statement.bind`, or a compiled Kysely query). */
export interface CompiledStatement {
  readonly sql: string;
  readonly parameters: readonly unknown[];
  /**
   * PostgreSQL: `Storage.atomically` prepares it on the connection the first time and runs it by name
   * after (the plan kept), instead of sending it with its values written in (parsed and planned every
   * time). For statements whose planning outweighs their running (the webhook claim); a small insert
   * or update costs more as an EXECUTE.
   */
  readonly prepare?: boolean;
}

export type ColumnType = 'text' | 'bigint' | 'integer';

/** A table for `BulkInserter`: its columns in order, with types, and the unique key that conflicts. */
export interface BulkTable<T extends keyof Database> {
  table: T;
  columns: { name: keyof Database[T] & string; type: ColumnType }[];
  conflict: (keyof Database[T] & string)[];
}

export interface BulkInserter {
  /**
   * Inserts `rows` (values in `columns` order) inside the transaction `trx`, skipping rows whose
   * key exists already. Returns, for each row, whether it was inserted. Keys must be unique
   * within `rows`.
   */
  insertIgnoringConflicts<T extends keyof Database>(
    trx: Kysely<Database>,
    spec: BulkTable<T>,
    rows: unknown[][],
  ): Promise<boolean[]>;
}

/** `Storage.pipeline` where nothing is pipelined: the statement runs through `trx`, awaited. */
export async function runInTransaction(trx: Kysely<Database>, statement: CompiledStatement): Promise<void> {
  await runStatements(trx, [statement]);
}

/** Runs statements one after another through `db` (a transaction, usually); each one's rows. */
export async function runStatements(
  db: Kysely<Database>,
  statements: readonly CompiledStatement[],
): Promise<Record<string, unknown>[][]> {
  const results: Record<string, unknown>[][] = [];
  for (const s of statements) {
    results.push(
      (await db.executeQuery<Record<string, unknown>>(CompiledQuery.raw(s.sql, [...s.parameters]))).rows,
    );
  }
  return results;
}

/**
 * `Storage.atomically` through the query builder's transaction: one statement after another. A
 * single statement is atomic by itself and runs alone (no BEGIN and COMMIT: one round trip).
 */
export async function inOneTransaction(
  db: Kysely<Database>,
  statements: readonly CompiledStatement[],
): Promise<Record<string, unknown>[][]> {
  if (statements.length < 2) return runStatements(db, statements);
  return db.transaction().execute((trx) => runStatements(trx, statements));
}
